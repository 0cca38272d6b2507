"""Binding failures named by cause: what keeps a rank (or its workers) from the binding it was meant to have,
each a code with one line and the exact fix, for audit (findings), launch and numatune.bind() (their error and
warning text starts with the code). Pure: the callers read the process, the errno, the cgroup.

The catalogue (docs/launchers.md, "Binding failures"): NT410 refused by the kernel, NT411 a cpuset without the
rank's node, NT412 OpenMP variables that re-pin, NT413 a memory-only node as the CPU node, NT414 a binding by the
visible GPU index, NT415 memory bound to another SNC/NPS cluster, NT416 a Ray actor left unbound. The cases
numatune already names elsewhere keep their codes: threads started before the binding (NCCL/UCX progress threads)
are NT406, a worker wider than its rank (an engine core narrower than its workers) is NT408.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Iterable, Mapping

from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity, register
from numatune.model.process import ProcessInfo
from numatune.model.resolve import THREAD_AFFINITY_VARS
from numatune.model.topology import Topology

NT410 = register("NT410", Severity.ERROR, "audit", "the kernel refused the binding (seccomp, no CAP_SYS_NICE)", """
    sched_setaffinity or set_mempolicy/mbind returned EPERM (or EACCES): a seccomp profile filters the NUMA
    system calls (Docker's default profile allows set_mempolicy and mbind only with CAP_SYS_NICE), or the
    process lacks CAP_SYS_NICE for what it asked. launch and numatune.bind() stop with this code, the call and
    the errno instead of running unbound without a word (a subprocess of an engine that dies silently). The fix
    gives the container the capability (docker run --cap-add SYS_NICE; Kubernetes securityContext.capabilities.add:
    [SYS_NICE]) or a seccomp profile that allows the calls; --best-effort (best_effort=True) runs unbound and
    says so.""")
NT411 = register("NT411", Severity.ERROR, "audit", "the cgroup's cpuset excludes the node the rank belongs on", """
    The container's or job's cpuset (cpuset.cpus.effective, or the mask it was started with) has no CPU of the
    node the rank's GPU is attached to (or the node asked for): no binding inside it can be near the GPU, and
    every host-to-device copy crosses the socket link. launch and bind() stop with this code. The fix gives the
    container CPUs of that node: Kubernetes' CPU manager (static) with the topology manager's single-numa-node or
    restricted policy, docker --cpuset-cpus with the node's CPUs, Slurm --gres-flags=enforce-binding; or binds
    the rank to a GPU whose node the cpuset has.""")
NT412 = register("NT412", Severity.WARNING, "audit", "OpenMP affinity variables re-pin the rank's threads", """
    KMP_AFFINITY, OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY is set in the rank's environment: the OpenMP
    runtime loaded with torch (Intel's or GNU's) pins its threads itself after the launcher bound the process,
    to the places it computes (KMP_AFFINITY=explicit,proclist=... and GOMP_CPU_AFFINITY name CPUs outright,
    within or outside the binding): the threads leave the binding or pile onto its first cores
    (pytorch#136307). Only these named keys of a process's environment are read. The fix unsets them for
    ranks that a launcher binds (numatune launch, torchrun --numa-binding, srun --cpu-bind), or sets
    OMP_PROC_BIND=close with OMP_PLACES=cores so the runtime places threads inside the inherited mask.""")
NT413 = register("NT413", Severity.ERROR, "audit", "a memory-only node was given as the CPU node", """
    The node asked for (launch --node, bind(node=), numactl --cpunodebind) has memory but no CPUs: a Grace
    Hopper/Blackwell GPU's HBM onlined as a NUMA node, a CXL expander. numactl --cpunodebind on it fails and a
    binding to it has no CPUs to run on (vllm#39361). The fix binds the CPUs to its nearest node with CPUs (the
    Grace CPU's node) and places memory on the memory-only node with a memory policy (--mem-policy gpu-memory,
    --mem-nodes).""")

NT414 = register("NT414", Severity.WARNING, "audit", "a rank is bound by its visible GPU index, not its GPU", """
    CUDA_VISIBLE_DEVICES (or ROCR/HIP_VISIBLE_DEVICES) re-indexes the GPUs: a rank's visible GPU 0 is not
    physical GPU 0. The rank's GPU is physical GPUi (inspect's label, by PCI address) on one node, but its CPUs
    are all on the node of the physical GPU whose number equals its visible index: a binder took the index
    for a physical one (NeMo-RL#2613). audit names GPUs by PCI address and inspect's label, never by the
    visible index. The fix binds by the GPU's PCI address or UUID (numatune launch resolves the visible-devices
    list as CUDA does), and taskset for the running rank.""")
NT415 = register("NT415", Severity.WARNING, "audit", "a rank's memory is bound to another SNC/NPS cluster", """
    On a socket split into clusters (SNC, NPS), the rank's memory policy binds it to cluster node(s) of its
    socket other than the ones its CPUs are on: a binder that membinds every rank to the socket's first
    cluster (sglang#19666) leaves the other clusters' ranks fetching every page across the mesh, and fills
    one cluster's memory. The fix binds memory to the node of the rank's CPUs (numatune launch --mem-policy
    bind does) or to the whole socket (--mem-policy socket).""")

NT416 = register("NT416", Severity.WARNING, "audit", "a Ray actor that holds a GPU runs unbound", """
    Ray gives each actor its GPUs (CUDA_VISIBLE_DEVICES) but binds no CPU or memory: the actor process (its title
    `ray::ClassName`) runs on every CPU the raylet has, on every socket, and its pages land wherever it first
    touched them (sglang#22989). Said where the actor's CPUs reach beyond its GPU's node on a machine with more
    than one node with CPUs. The fix calls numatune.bind_actor() first in the actor's __init__ (it binds to the
    GPU Ray assigned, within the raylet's own mask), or starts the raylet under numatune launch; taskset for the
    running actor.""")

# Values that ask the OpenMP runtime for no pinning (OMP_PROC_BIND=false, KMP_AFFINITY=none|disabled)
NO_PINNING = ("", "false", "none", "disabled")
REFUSED = (_errno.EPERM, _errno.EACCES)


def refused(call: str, err: int, detail: str) -> str | None:
    """The NT410 line for a binding call the kernel refused; None for an errno that is not a refusal."""
    if err not in REFUSED:
        return None
    name = _errno.errorcode.get(err, str(err))
    return (f"NT410: {call}({detail}) refused ({name}): a seccomp profile filters it or CAP_SYS_NICE is missing; "
            "fix: give the container CAP_SYS_NICE (docker run --cap-add SYS_NICE; Kubernetes securityContext."
            "capabilities.add: [SYS_NICE]) or a seccomp profile that allows it, or pass --best-effort "
            "(best_effort=True) to run unbound")


def cpuset_excludes(node: int, node_cpus: Iterable[int], allowed: Iterable[int] | None, source: str) -> str:
    """The NT411 line: the allowed CPUs (`source`: the cgroup's cpuset, the mask) have none of `node`'s."""
    have = format_cpulist(allowed) if allowed is not None else "?"
    return (f"NT411: no usable CPU on node {node}: the allowed CPUs {have} ({source}) have none of its CPUs ("
            f"{format_cpulist(node_cpus)}); fix: give the container or job CPUs of node {node} (Kubernetes CPU "
            f"manager static with topology manager single-numa-node; docker --cpuset-cpus "
            f"{format_cpulist(node_cpus)}), or bind the rank to a GPU on a node the cpuset has")


def memory_only_node(node: int, kind: str, cpu_node: int | None) -> str:
    """The NT413 line: `node` has memory but no CPUs; `cpu_node` its nearest node with CPUs."""
    near = (f"--node {cpu_node} (its nearest node with CPUs) with --mem-policy gpu-memory or --mem-nodes {node}"
            if cpu_node is not None else "a node with CPUs, and --mem-nodes for this one")
    return f"NT413: node {node} is a memory-only node ({kind}, no CPUs): it cannot be the CPU node; fix: {near}"


def openmp_repinning(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The OpenMP affinity variables of `environ` that ask for pinning ("KMP_AFFINITY=compact"...)."""
    return tuple(f"{k}={environ[k][:60]}" for k in THREAD_AFFINITY_VARS
                 if k in environ and environ[k].strip().lower() not in NO_PINNING)


def openmp_line(found: tuple[str, ...]) -> str:
    """The NT412 line for launch's and bind()'s warnings."""
    return (f"NT412: {', '.join(found)} in the environment: the OpenMP runtime re-pins the threads after the "
            "binding; fix: unset them for bound ranks, or OMP_PROC_BIND=close OMP_PLACES=cores to stay inside it")


def rank_findings(topo: Topology, proc: ProcessInfo, memory_nodes: frozenset[int]) -> list[Finding]:
    """audit's binding-failure findings for one process (`memory_nodes`: the nodes its memory policies name):
    for a rank (a local rank or a GPU), NT412 for OpenMP variables that re-pin, NT414 for a binding to the node of
    the GPU its visible index names physically, NT415 for memory bound to another cluster of its socket."""
    if proc.rank is None and proc.gpu is None:
        return []
    out = []
    subject = f"pid {proc.pid}"
    unbound = _unbound_ray_actor(topo, proc)
    if unbound is not None:
        out.append(NT416(*unbound, subject))
    found = openmp_repinning(proc.environ)
    if found:
        out.append(NT412(f"{', '.join(found)} in its environment: the OpenMP runtime re-pins its threads after the "
                         "binding", "unset them for ranks a launcher binds, or set OMP_PROC_BIND=close "
                         "OMP_PLACES=cores so the runtime places threads inside the inherited mask", subject))
    node_of = {c: n.id for n in topo.nodes for c in n.cpus}
    cpu_nodes = frozenset(node_of[c] for c in proc.cpus_allowed if c in node_of)
    reindexed = _reindexed(topo, proc, cpu_nodes)
    if reindexed is not None:
        out.append(NT414(*reindexed, subject))
    other = _other_cluster(topo, cpu_nodes, memory_nodes)
    if other is not None:
        out.append(NT415(*other, subject))
    return out



def _unbound_ray_actor(topo: Topology, proc: ProcessInfo) -> tuple[str, str] | None:
    """(message, fix) for a Ray actor (process title `ray::...`) with a GPU whose CPUs reach other nodes."""
    title = proc.cmdline[0] if proc.cmdline else proc.comm
    if not (title.startswith("ray::") or proc.comm.startswith("ray::")) or proc.gpu is None:
        return None
    home = _cpu_home(topo, proc.gpu.node)
    with_cpus = [n for n in topo.nodes if n.cpus]
    if home is None or len(with_cpus) < 2:
        return None
    node_of = {c: n.id for n in with_cpus for c in n.cpus}
    away = sorted({node_of[c] for c in proc.cpus_allowed if c in node_of} - {home})
    if not away:
        return None
    gpu = proc.gpu.label or proc.gpu.bdf or "its GPU"
    home_cpus = format_cpulist(topo.node(home).cpus)
    return (f"Ray actor {title[:60]} holds {gpu} (node {home}) but may run on CPUs of node(s) "
            f"{', '.join(map(str, away))} too: Ray binds no actor",
            f"call numatune.bind_actor() first in the actor's __init__ (or start the raylet under numatune launch); "
            f"for the running actor: taskset -a -p -c {home_cpus} {proc.pid}")

def _cpu_home(topo: Topology, node: int | None) -> int | None:
    from numatune.model.gpumem import nearest_cpu_node

    if node is None:
        return None
    n = topo.node(node)
    return node if n is not None and n.cpus else nearest_cpu_node(topo, node)


def _reindexed(topo: Topology, proc: ProcessInfo, cpu_nodes: frozenset[int]) -> tuple[str, str] | None:
    """(message, fix) when the rank's CPUs all sit on the node of physical GPU[visible index], not its GPU's."""
    from numatune.errors import NumatuneError
    from numatune.model.order import gpu_order, labels
    from numatune.model.resolve import visible_devices

    g = proc.gpu
    if g is None or g.bdf is None or not proc.environ:
        return None
    gpus, _ = gpu_order(topo.devices)
    try:
        var, visible, uuids = visible_devices(proc.environ, gpus)
    except NumatuneError:
        return None
    dev = next((d for d in gpus if d.bdf.lower() == g.bdf.lower()), None)
    if visible is None or dev is None or dev not in visible:
        return None
    pos = visible.index(dev)
    if pos >= len(gpus) or gpus[pos] is dev:
        return None
    taken = gpus[pos]
    home, wrong = _cpu_home(topo, dev.node), _cpu_home(topo, taken.node)
    if home is None or wrong is None or home == wrong or cpu_nodes != {wrong}:
        return None
    name = labels(topo.devices)
    home_cpus = format_cpulist(topo.node(home).cpus)
    return (f"its GPU is {var} entry {pos} = physical {name.get(dev.bdf.lower(), 'GPU')} {dev.bdf} (node {home}), "
            f"but its CPUs are all on node {wrong}, the node of physical {name.get(taken.bdf.lower(), 'GPU')} "
            f"{taken.bdf}: the visible index {pos} was taken for a physical GPU",
            f"bind by the GPU's PCI address or UUID, not the visible index (numatune launch resolves {var}); the "
            f"running rank: taskset -a -p -c {home_cpus} {proc.pid}")


def _other_cluster(topo: Topology, cpu_nodes: frozenset[int], memory_nodes: frozenset[int]
                   ) -> tuple[str, str] | None:
    """(message, fix) when the memory policy binds to clusters of the CPUs' socket that the CPUs are not on."""
    from numatune.model.gpumem import clustering

    name, per_socket = clustering(topo)
    if name is None or not cpu_nodes or not memory_nodes:
        return None
    clusters = next((set(ns) for ns in per_socket.values() if cpu_nodes <= set(ns)), None)
    if clusters is None or not memory_nodes <= clusters or memory_nodes & cpu_nodes:
        return None
    first = " (the socket's first cluster)" if memory_nodes == {min(clusters)} else ""
    return (f"{name}: its memory is bound to cluster node(s) {format_cpulist(memory_nodes)}{first} while its CPUs "
            f"are on cluster node(s) {format_cpulist(cpu_nodes)} of the same socket",
            f"bind memory to the node(s) of its CPUs ({format_cpulist(cpu_nodes)}: numatune launch --mem-policy bind) "
            "or to the whole socket (--mem-policy socket)")
