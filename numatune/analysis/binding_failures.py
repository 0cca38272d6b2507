"""Binding failures named by cause: what keeps a rank (or its workers) from the binding it was meant to have,
each a code with one line and the exact fix, for audit (findings), launch and numatune.bind() (their error and
warning text starts with the code). Pure: the callers read the process, the errno, the cgroup.

The catalogue (docs/launchers.md, "Binding failures"); the cases numatune already names elsewhere keep their
codes: threads started before the binding (NCCL/UCX progress threads) are NT406, a worker wider than its rank
(an engine core narrower than its workers) is NT408, a socket split into SNC clusters with one cluster's memory
for the rank is launch's cluster note (`--mem-policy socket`).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Iterable, Mapping

from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity, register
from numatune.model.resolve import THREAD_AFFINITY_VARS

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


def rank_findings(pid: int, environ: Mapping[str, str], is_rank: bool) -> list[Finding]:
    """audit's binding-failure findings for one process: NT412 for a rank (a process with a local rank or a GPU)
    whose environment asks OpenMP to pin."""
    found = openmp_repinning(environ) if is_rank else ()
    if not found:
        return []
    return [NT412(f"{', '.join(found)} in its environment: the OpenMP runtime re-pins its threads after the "
                  "binding", "unset them for ranks a launcher binds, or set OMP_PROC_BIND=close OMP_PLACES=cores "
                  "so the runtime places threads inside the inherited mask", f"pid {pid}")]
