"""Scheduler configuration against the topology (`check --slurm-conf/--gres-conf/--kubelet-config`).
Codes NT520-NT536 are stable. Pure: parsed files and what `emit` derives in, findings out; the
expected values are the ones `numatune emit` writes, so each fix names the right line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.model.document import MAX_SIZE, Doc
from numatune.model.findings import Finding, Severity, register
from numatune.model.topology import Topology
from numatune.numbers import maybe_int
from numatune.plan.slurm import GresLine, NodeLine, SlurmLayout

NT520 = register(
    "NT520", Severity.ERROR, "scheduler", "slurm.conf's socket/core/thread counts disagree with the node", """
    The node's NodeName line in slurm.conf gives Sockets, CoresPerSocket, ThreadsPerCore or CPUs that differ from
    what slurmd finds (hwloc: online CPUs, packages with cores). Fewer than there are: Slurm schedules and binds
    with the wrong layout; more: the node registers with less than configured and is drained.""")
NT521 = register("NT521", Severity.ERROR, "scheduler", "slurm.conf's RealMemory is above the node's memory", """
    RealMemory is larger than the memory the kernel reports (MemTotal, what slurmd registers): slurmctld drains
    the node ("Low RealMemory").""")
NT522 = register("NT522", Severity.WARNING, "scheduler", "a gres.conf GPU's Cores= is on the other socket", """
    A GPU's Cores= names cores of a socket its NUMA node is not on: with --gres-flags=enforce-binding jobs get
    the GPU with the far socket's cores, otherwise Slurm merely prefers them; either way host-to-GPU copies and
    the rank's memory cross the socket link.""")
NT523 = register("NT523", Severity.ERROR, "scheduler", "a gres.conf Cores= does not cover whole sockets", """
    Cores= must name every core of one socket (or all cores): Slurm checks it against socket boundaries
    (_check_core_range_matches_sock) and rejects the GRES, or logs an error and ignores the binding in older
    releases. Often a Linux CPU list pasted where Slurm's abstract core indices belong.""")
NT524 = register("NT524", Severity.WARNING, "scheduler", "gres.conf and slurm.conf disagree with the GPUs present", """
    The GPU count in slurm.conf's Gres=gpu:N, or the gres.conf GPU lines, differs from the GPUs on the node,
    or a File= names a device that is not one of them: the node registers fewer GPUs than configured and
    is drained, or jobs are given a device file that belongs to another GPU.""")
NT525 = register("NT525", Severity.ERROR, "scheduler", "CpuSpecList names CPUs the node does not have", """
    CpuSpecList lists abstract CPU ids at or above the node's CPU count; slurmd rejects the specialization.
    The ids are Slurm's abstract ones (see numatune-emit(1)), not Linux CPU ids.""")
NT530 = register(
    "NT530", Severity.ERROR, "scheduler", "kubelet's reservedSystemCPUs leave a NUMA node without CPUs", """
    reservedSystemCPUs takes every CPU of a NUMA node: the static CPU manager cannot give a guaranteed pod any
    CPU there, so with the topology manager GPUs on that node can never be aligned with CPUs.""")
NT531 = register("NT531", Severity.ERROR, "scheduler", "kubelet's reservedMemory does not sum to its reservations", """
    With memoryManagerPolicy Static, kubelet refuses to start unless the memory of reservedMemory over all NUMA
    nodes equals kubeReserved + systemReserved + evictionHard memory.available (its default 100Mi when unset).""")
NT532 = register("NT532", Severity.WARNING, "scheduler", "kubelet ignores NUMA on a multi-node machine", """
    cpuManagerPolicy is not static or topologyManagerPolicy is none/unset on a node with several NUMA nodes
    with CPUs: guaranteed pods get CPUs, memory and GPUs from any node.""")
NT533 = register(
    "NT533", Severity.ERROR, "scheduler", "kubelet's config names CPUs or NUMA nodes that do not exist", """
    reservedSystemCPUs lists CPUs that are not online, or reservedMemory names a NUMA node the machine does not
    have: kubelet refuses the configuration.""")
NT534 = register("NT534", Severity.ERROR, "scheduler", "kubelet's static CPU manager has no CPU reservation", """
    cpuManagerPolicy is static but neither reservedSystemCPUs nor a cpu quantity in kubeReserved/systemReserved
    is given: kubelet refuses to start ("the static policy requires systemreserved.cpu + kubereserved.cpu to be
    greater than zero").""")
NT535 = register(
    "NT535", Severity.ERROR, "scheduler", "kubelet's NUMA managers cannot represent this machine's NUMA ids", """
    topologyManagerPolicy or memoryManagerPolicy Static is set on a machine with a NUMA node id above 63 (POWER9
    GPU memory nodes are 250-255): kubelet keeps NUMA nodes in a 64-bit mask (topologymanager/bitmask, "bit
    number must be in range 0-63") and cannot describe such a node; leave both managers at none there.""")

NT536 = register(
    "NT536", Severity.ERROR, "scheduler", "kubelet's topology manager cannot make hints for this many NUMA nodes", """
    topologyManagerPolicy is set on a machine with more NUMA nodes than kubelet can enumerate hints for: the
    device manager walks every subset of the nodes (2^n), CPU-less GPU-memory and MIG placeholder nodes
    included, so on a GB200 tray (34 nodes) a pod asking for a device never gets past admission
    (kubernetes#135541). Leave the topology manager at none and align devices with DRA, or use a kubelet with
    the restrict-to-cpu-numa-nodes policy option.""")


def _int(value: str | None) -> int | None:
    """A slurm.conf / gres.conf count; None when absent or not a number (numbers.maybe_int: bounded)."""
    return maybe_int(value, "the Slurm configuration") if value is not None else None


def check_slurm_node(line_no: int, node: Mapping[str, str], expected: NodeLine, layout: SlurmLayout,
                     memory_mib: int | None, where: str,
                     own: Sequence[tuple[str, str]] = ()) -> Iterator[Finding]:
    """`own`: the line's pairs as written; the fix line is that line with what is wrong replaced, every other key
    (CpuSpecList, MemSpecLimit, Features, Weight, State...) kept. Without it, the line `emit slurm` writes."""
    subject = f"{where}:{line_no}"
    wrong_counts: list[str] = []
    fixed: dict[str, str] = {}  # lower-case key -> the value to write
    if not layout.problem:
        got = {k: _int(node.get(k.lower())) for k in ("Sockets", "CoresPerSocket", "ThreadsPerCore", "CPUs")}
        if got["Sockets"] is None and _int(node.get("socketsperboard")) is not None:
            got["Sockets"] = _int(node["socketsperboard"]) * (_int(node.get("boards")) or 1)  # type: ignore[operator]
        want = {"Sockets": expected.sockets, "CoresPerSocket": expected.cores_per_socket,
                "ThreadsPerCore": expected.threads_per_core, "CPUs": expected.cpus}
        wrong_counts = [f"{k}={v} (node has {want[k]})" for k, v in got.items() if v is not None and v != want[k]]
        fixed.update({k.lower(): str(want[k]) for k, v in got.items() if v is not None and v != want[k]})
    real = _int(node.get("realmemory"))
    memory_wrong = real is not None and memory_mib is not None and real > memory_mib
    if memory_wrong:
        fixed["realmemory"] = str(memory_mib)
    gres_gpus = _gres_count(node.get("gres", ""), "gpu")
    gres_wrong = gres_gpus is not None and gres_gpus != expected.gpus
    if gres_wrong:
        fixed["gres"] = _with_gpus(node.get("gres", ""), expected.gpus)
    fix_line = f"use `{_fixed_line(own, fixed, expected)}` " + (
        "(your line with the values numatune emit slurm derives where they were wrong)" if own
        else "(numatune emit slurm)")
    if wrong_counts:
        yield NT520(f"NodeName {node.get('nodename')}: {', '.join(wrong_counts)}", fix_line, subject)
    if memory_wrong:
        yield NT521(f"NodeName {node.get('nodename')}: RealMemory={real} MiB but the node has {memory_mib} MiB",
                    f"set RealMemory at or below {memory_mib} (slurmd -C reports it; leave headroom for firmware and "
                    "kernel changes)", subject)
    if gres_wrong:
        yield NT524(f"NodeName {node.get('nodename')}: Gres=gpu:{gres_gpus} but the node has {expected.gpus} GPU(s)",
                    fix_line, subject)
    spec = node.get("cpuspeclist")
    if spec:
        try:
            ids = parse_cpulist(spec)
        except ValueError:
            ids = frozenset()
        beyond = sorted(i for i in ids if i >= expected.cpus)
        if beyond:
            yield NT525(f"CpuSpecList={spec}: abstract CPU ids {format_cpulist(beyond)} >= CPUs={expected.cpus}",
                        "list Slurm abstract CPU ids (numatune emit slurm --reserve-cores N writes them)", subject)


_SPELLING = {"cpus": "CPUs", "sockets": "Sockets", "corespersocket": "CoresPerSocket",
             "threadspercore": "ThreadsPerCore", "realmemory": "RealMemory", "gres": "Gres"}


def _fixed_line(own: Sequence[tuple[str, str]], fixed: Mapping[str, str], expected: NodeLine) -> str:
    """The user's NodeName line with the `fixed` keys' values replaced (Boards/SocketsPerBoard by Sockets= when the
    socket count was wrong), in the user's order and spelling; keys it lacked are added at the end."""
    if not own:
        return expected.text()
    out: list[str] = []
    placed: set[str] = set()
    for key, value in own:
        k = key.lower()
        if k in ("boards", "socketsperboard") and "sockets" in fixed:
            if "sockets" not in placed:
                out.append(f"Sockets={fixed['sockets']}")
                placed.add("sockets")
            continue
        if k in fixed:
            if k not in placed and fixed[k]:  # a key given twice: the fixed value once; an empty Gres: none
                out.append(f"{key}={fixed[k]}")
            placed.add(k)
        else:
            out.append(f"{key}={value}")
    out += [f"{_SPELLING.get(k, k)}={v}" for k, v in fixed.items() if k not in placed and v]
    return " ".join(out)


def _with_gpus(gres: str, count: int) -> str:
    """Gres= with its GPU items replaced by one gpu item of `count` (a type kept when there was one), the other
    GRES (nic, shard, mps...) kept; no gpu item at all for a node without GPUs (empty: no Gres= left)."""
    items = [i for i in gres.split(",") if i]
    gpus = [i for i in items if i.split(":")[0] == "gpu"]
    types = {i.split(":")[1] for i in gpus if len(i.split(":")) == 3}
    gpu = (f"gpu:{types.pop()}:{count}" if len(types) == 1 else f"gpu:{count}") if count else None
    out, done = [], False
    for i in items:
        if i.split(":")[0] != "gpu":
            out.append(i)
        elif not done:
            done = True
            if gpu:
                out.append(gpu)
    return ",".join(out)


def _gres_count(gres: str, name: str) -> int | None:
    total = None
    for item in filter(None, gres.split(",")):
        parts = item.split(":")
        if parts[0] != name:
            continue
        count = _int(parts[-1].split("(")[0]) if len(parts) > 1 else 1
        total = (total or 0) + (count or 0)
    return total


def check_gres(lines: Sequence[tuple[int, Mapping[str, str]]], expected: Sequence[GresLine], layout: SlurmLayout,
               node_name: str, where: str) -> Iterator[Finding]:
    """gres.conf GPU lines of this node against the GPUs and their sockets."""
    by_file = {g.file: g for g in expected if g.file}
    mine = [(n, p) for n, p in lines if p.get("name") == "gpu" and _for_node(p.get("nodename"), node_name)]
    autodetect = any(p.get("autodetect", "off").lower() not in ("off", "") for _, p in lines if "name" not in p)
    per_line = [_files(p.get("file", "")) for _, p in mine]
    files = [f for line in per_line for f in line]
    if len(files) > MAX_GRES_FILES:
        from numatune.errors import InputError

        raise InputError(f"{where} names more than {MAX_GRES_FILES} GPU device files for {node_name}, which no node "
                         "has")
    if (mine or not autodetect) and expected and len(files) != len(expected) and files:
        yield NT524(f"gres.conf names {len(files)} GPU file(s) for {node_name}, the node has {len(expected)} GPU(s)",
                    "one line per GPU: " + "; ".join(g.text(node_name) for g in expected), where)
    socket_cores = [set(layout.socket_cores(s)) for s in range(len(layout.sockets))]
    all_cores = {c.index for c in layout.cores}
    for (number, p), line_files in zip(mine, per_line, strict=True):
        subject = f"{where}:{number}"
        for file in line_files:
            gpu = by_file.get(file)
            if gpu is None:
                if by_file:
                    yield NT524(f"File={file} is not a GPU of this node (its GPUs: {', '.join(by_file)})",
                                "use the device files numatune emit slurm lists", subject)
                continue
            if "cores" not in p or layout.problem:
                continue
            try:
                cores = set(parse_cpulist(p["cores"]))
            except ValueError:
                yield NT523(f"Cores={p['cores']} is not a core list", f"use `{gpu.text(node_name)}`", subject)
                continue
            whole = cores == all_cores or any(cores == s for s in socket_cores)
            if not whole:
                yield NT523(f"{file} ({gpu.bdf}): Cores={p['cores']} is not one whole socket's abstract cores "
                            f"(sockets: {'; '.join(format_cpulist(sorted(s)) for s in socket_cores)})",
                            f"use `{gpu.text(node_name)}`", subject)
            if gpu.cores and not cores & set(gpu.cores):
                yield NT522(f"{file} ({gpu.bdf}): Cores={p['cores']} is on another socket than the GPU "
                            f"(its socket's cores: {format_cpulist(gpu.cores)})", f"use `{gpu.text(node_name)}`",
                            subject)


MAX_GRES_FILES = 1024  # GPU device files of one node in gres.conf (a node has at most a few dozen GPUs)


def _files(spec: str) -> list[str]:
    from numatune.plan.slurm import expand_hostlist

    return expand_hostlist(spec, MAX_GRES_FILES) if spec else []


def _for_node(expr: str | None, node_name: str) -> bool:
    from numatune.plan.slurm import in_hostlist

    return expr is None or in_hostlist(node_name, expr)


def check_kubelet(doc: Doc, topo: Topology) -> Iterator[Finding]:
    """NT530-NT536 of a kubelet config, every field read through `doc` (model.document: a list where a mapping
    goes is exit 3 naming the field, never a Python error)."""
    from numatune.plan.kubelet import EVICTION_MIB

    where = doc.file
    online = {c.id for c in topo.cpus if c.online}
    cpu_nodes = [n for n in topo.nodes if n.cpus]
    reserved_text = doc.text("reservedSystemCPUs")
    reserved: frozenset[int] = frozenset()
    if reserved_text.strip():
        try:
            reserved = parse_cpulist(reserved_text)
        except ValueError:
            yield NT533(f"reservedSystemCPUs={reserved_text!r} is not a CPU list", "write e.g. \"0-1,32-33\"", where)
        missing = sorted(reserved - online)
        if missing and online:
            yield NT533(f"reservedSystemCPUs names CPUs {format_cpulist(missing)} that are not online",
                        "list online CPUs only (numatune emit kubelet)", where)
        for n in cpu_nodes:
            usable = set(n.cpus) & online
            if usable and usable <= reserved:
                yield NT530(f"reservedSystemCPUs {format_cpulist(sorted(reserved))} takes every CPU of node {n.id} "
                            f"({format_cpulist(sorted(usable))})",
                            "reserve a few cores per node instead (numatune emit kubelet --reserve-cores 1)",
                            f"node {n.id}")
    memory_policy = doc.text("memoryManagerPolicy")
    if doc.text("cpuManagerPolicy").lower() == "static" and not reserved:
        cpu = [doc.mapping(key).text("cpu") for key in ("kubeReserved", "systemReserved")]
        if not any(c not in ("", "0") for c in cpu):
            yield NT534("cpuManagerPolicy: static without reservedSystemCPUs or a kubeReserved/systemReserved cpu",
                        "add reservedSystemCPUs (numatune emit kubelet picks a core per NUMA node)", where)
    if memory_policy == "Static":
        want = sum(_quantity(doc.mapping(key).at("memory")) for key in ("kubeReserved", "systemReserved"))
        hard = doc.mapping("evictionHard").at("memory.available")
        want += _quantity(hard) if hard.present else EVICTION_MIB
        got = 0.0
        node_ids = {n.id for n in topo.nodes}
        for entry in doc.list("reservedMemory"):
            got += _quantity(entry.mapping("limits").at("memory"))
            numa = entry.int("numaNode", -(1 << 31), (1 << 31) - 1)  # kubelet's int32
            if node_ids and numa not in node_ids:
                yield NT533(f"reservedMemory names NUMA node {numa}, the machine has nodes "
                            f"{', '.join(map(str, sorted(node_ids)))}", "name existing nodes only", where)
        if abs(got - want) > 0.5:
            yield NT531(f"reservedMemory sums to {got:g}Mi, kubeReserved + systemReserved + evictionHard = {want:g}Mi",
                        "make them equal (numatune emit kubelet writes a matching set)", where)
    from numatune.plan.kubelet import BITMASK_MAX_NODE

    too_high = [n.id for n in topo.nodes if n.id > BITMASK_MAX_NODE] if topo.numa_kernel else []
    topo_policy = (doc.text("topologyManagerPolicy") or "none").lower()
    if too_high and (topo_policy != "none" or memory_policy == "Static"):
        yield NT535(f"topologyManagerPolicy={topo_policy}, memoryManagerPolicy={memory_policy or 'None'}"
                    f" on a machine with NUMA node id(s) {format_cpulist(too_high)} above {BITMASK_MAX_NODE}",
                    "leave topologyManagerPolicy and memoryManagerPolicy unset (numatune emit kubelet)", where)
    from numatune.plan.kubelet import HINT_NODES_LIMIT, RESTRICT_OPTION

    all_nodes = len(topo.nodes) if topo.numa_kernel else 0
    too_many = all_nodes > HINT_NODES_LIMIT
    restricted = doc.mapping("topologyManagerPolicyOptions").text(RESTRICT_OPTION).lower() == "true"
    if too_many and not too_high and topo_policy != "none" and not restricted:
        yield NT536(f"topologyManagerPolicy={topo_policy} on {all_nodes} NUMA nodes ({len(cpu_nodes)} with CPUs): "
                    f"hint generation enumerates 2^{all_nodes} NUMA masks", "leave topologyManagerPolicy unset and "
                    "align devices with DRA (numatune emit kubelet, numatune emit dra), or set "
                    f"topologyManagerPolicyOptions {RESTRICT_OPTION}: \"true\" on a kubelet that has it", where)
    if len(cpu_nodes) > 1 and not too_high and not too_many:
        cpu_policy = (doc.text("cpuManagerPolicy") or "none").lower()
        if cpu_policy != "static" or topo_policy == "none":
            yield NT532(f"cpuManagerPolicy={cpu_policy}, topologyManagerPolicy={topo_policy} on {len(cpu_nodes)} NUMA "
                        "nodes with CPUs", "cpuManagerPolicy: static with topologyManagerPolicy: restricted (or "
                        "single-numa-node) and topologyManagerScope: pod", where)


_UNITS = {"": 1 / 2**20, "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20, "T": 1e12 / 2**20,
          "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2}


def _mib(quantity: Any) -> float:
    """A Kubernetes memory quantity ("1Gi", "512Mi", "1G", "1048576") in MiB; 0 when absent or unreadable."""
    if quantity is None:
        return 0.0
    text = str(quantity).strip()
    for suffix in sorted(_UNITS, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number = text[: -len(suffix)]
            break
    else:
        suffix, number = "", text
    try:
        return float(number) * _UNITS[suffix]
    except ValueError:
        return 0.0


def _quantity(field: Doc) -> float:
    """_mib of a document's field, read as a scalar (a list is exit 3 naming it) and finite: 1e400Gi is exit 3
    naming it, not a sum of inf."""
    mib = _mib(field.text() or None)
    if not -MAX_SIZE / 2**20 <= mib <= MAX_SIZE / 2**20:  # NaN fails both
        field.fail(f"{field.text()[:40]!r} is not a memory quantity of this world (at most 4 EiB)")
    return mib
