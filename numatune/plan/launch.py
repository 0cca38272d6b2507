"""Plan a launch: local rank → GPU → NUMA node → CPUs → memory policy → the argv to exec.

Pure: the Topology, the GPU-bearing PCI devices and the live facts (allowed CPUs, isolcpus, kernel,
numactl) come in as arguments, so every decision is tested on fixture trees. Each step appends a
sentence to `reasons`, which `--dry-run` prints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from numatune.cpulist import format_cpulist
from numatune.errors import BindingError, ImpossibleRequest, InputError, UsageError
from numatune.model.launch import (
    POLICY_SUPPORT,
    ClusterShare,
    CpuBind,
    GpuChoice,
    KindShare,
    LaunchFacts,
    LaunchOptions,
    LaunchPlan,
    MemPolicy,
    NodeSplit,
    NodeSpread,
    RankInfo,
    TorchView,
)
from numatune.model.resolve import (  # noqa: F401 - re-exported: the CLI, irq plan and tests use them from here
    ENV_KEYS,
    GPU_VARS,
    RANK_VARS,
    SIZE_VARS,
    UUID,
    gpu_order,
    match_uuid,
    normalize_bdf,
    pci_sort_key,
    rank_gpu,
)
from numatune.model.topology import MEMORY_FROM_PCI, WEIGHT_DIR, NumaNode, PciDevice, Topology
from numatune.numbers import MAX_DIGITS, PID_MAX, maybe_int, parse_int
from numatune.plan.cores import even_share, is_linear, physical_cores, topology_order
from numatune.plan.cxl import nearest_cpu_node
from numatune.plan.nic import choose_nic, nic_env


# -- option parsing (pure, used by the CLI) ---------------------------------------------------------
def parse_cpu_bind(text: str) -> CpuBind:
    """`node`, `socket`, `exclusive`, `core-complex`, `none` or `cores:N`."""
    if text in ("node", "socket", "exclusive", "core-complex", "none"):
        return CpuBind(text)
    m = re.fullmatch(r"cores:([0-9]{1,9})", text)
    if m and parse_int(m.group(1), "--cpu-bind") > 0:
        return CpuBind("cores", parse_int(m.group(1), "--cpu-bind"))
    raise UsageError(
        f"--cpu-bind {text!r}: expected node, socket, exclusive, core-complex, cores:N (N >= 1) or none")


def parse_weights(text: str) -> dict[int, int]:
    """`0:4,2:1` (node:weight); weights 1-255 as the kernel accepts them."""
    out: dict[int, int] = {}
    for part in text.split(","):
        node, sep, weight = part.strip().partition(":")
        if not (sep and node.isascii() and node.isdigit() and weight.isascii() and weight.isdigit()
                and len(node) <= 9 and len(weight) <= 9):
            raise UsageError(f"--weights {text[:80]!r}: expected NODE:WEIGHT[,NODE:WEIGHT...], e.g. 0:4,2:1")
        number = parse_int(weight, "--weights")
        if not 1 <= number <= 255:
            raise UsageError(f"--weights: weight {weight} for node {node} is outside 1-255")
        out[parse_int(node, "--weights")] = number
    return out


def kernel_version(release: str | None) -> tuple[int, int] | None:
    m = re.match(r"([0-9]{1,9})\.([0-9]{1,9})", release or "")  # a kernel release from the root
    return (parse_int(m.group(1), "release"), parse_int(m.group(2), "release")) if m else None


# -- rank ---------------------------------------------------------------------------------------------
def _env_int(env: Mapping[str, str], key: str) -> int | None:
    value = env.get(key)
    if value is None or value.strip() == "":
        return None
    number = maybe_int(value, key) if len(value.strip()) <= MAX_DIGITS else None
    if number is None or number < 0:
        raise InputError(f"{key}={value[:40]!r} is not a non-negative integer")
    return number


def slurm_tasks_on_node(value: str, node_index: int) -> int | None:
    """SLURM_TASKS_PER_NODE "2(x3),1" → tasks on the node_index-th node of the job. Counted part by part
    (linear in the text): a repeat count ("1(x999999999)") is added, never spelled out."""
    if node_index < 0:
        return None
    first = 0  # index of the first node the part covers
    for part in value.split(","):
        m = re.fullmatch(r"([0-9]{1,9})(?:\(x([0-9]{1,9})\))?", part.strip())
        if not m:
            return None
        times = parse_int(m.group(2) or "1", "SLURM_TASKS_PER_NODE")
        if node_index < first + times:
            return parse_int(m.group(1), "SLURM_TASKS_PER_NODE")
        first += times
    return None


def detect_rank(env: Mapping[str, str], opts: LaunchOptions) -> RankInfo:
    """The local rank and local world size, from --rank/--local-size or the first launcher variable set."""
    if opts.rank is not None:
        rank, rank_source = opts.rank, "--rank"
    else:
        rank, rank_source = 0, "default 0 (no LOCAL_RANK, SLURM_LOCALID, OMPI_/MPI_/PMI_/PMIX_ local rank set)"
        for key, who in RANK_VARS:
            value = _env_int(env, key)
            if value is not None:
                rank, rank_source = value, f"{key}={value} ({who})"
                break
    size, size_source = opts.local_size, "--local-size" if opts.local_size is not None else None
    if size is None:
        for key, who in SIZE_VARS:
            if key == "SLURM_TASKS_PER_NODE":
                if key in env:
                    size = slurm_tasks_on_node(env[key], _env_int(env, "SLURM_NODEID") or 0)
            else:
                size = _env_int(env, key)
            if size is not None:
                size_source = f"{key}={env[key][:80]} ({who})"
                break
        if size is not None and size > PID_MAX:  # no job's: 10^30 ranks made core-complex list every rank
            raise InputError(f"{size_source}: a local world size of {size:,} ranks is more processes than a Linux "
                             f"node can run (pid_max is at most {PID_MAX:,})")
    if size is not None and size <= rank:
        raise InputError(f"local rank {rank} ({rank_source}) is not below the local world size {size} ({size_source})")
    return RankInfo(rank, rank_source, size, size_source)


# -- GPU ----------------------------------------------------------------------------------------------
def choose_gpu(
    env: Mapping[str, str], opts: LaunchOptions, rank: RankInfo, devices: Sequence[PciDevice]
) -> tuple[PciDevice, GpuChoice, list[PciDevice]]:
    """The rank's device and the devices in use by the node's local ranks (to split cores among them)."""
    gpus, kind = gpu_order(devices)
    if opts.gpu is not None:
        dev, source, ordering = _gpu_option(opts.gpu, gpus, devices)
        in_use = gpus if dev in gpus else [dev]
        if rank.local_size is not None and dev in gpus and rank.local_size < len(gpus):
            # --local-size N: N ranks, one GPU each: this one's and, for the others, the first GPUs in order
            others = [g for g in gpus if g is not dev][:rank.local_size - 1]
            in_use = sorted([dev, *others], key=gpus.index)
    else:
        if not gpus:
            raise BindingError("no GPU found in this root and neither --gpu nor --node was given")
        found = rank_gpu(env, rank.rank, devices, rank.local_size)
        assert found is not None  # a rank is always known here (default 0)
        dev, source, ordering, in_use = found
    choice = GpuChoice(
        bdf=dev.bdf,
        kind=dev.kind,
        pci_index=sorted(gpus, key=lambda d: pci_sort_key(d.bdf)).index(dev) if dev in gpus else None,
        index=gpus.index(dev) if dev in gpus else None,
        source=source,
        ordering=ordering,
        uuid=dev.nvidia.uuid if dev.nvidia else None,
        numa_node=dev.numa_node,
        inferred_node=dev.inferred_node,
        inferred_from=dev.inferred_from,
    )
    return dev, choice, list(in_use)


def _gpu_option(value: str, gpus: list[PciDevice], devices: Sequence[PciDevice]) -> tuple[PciDevice, str, str | None]:
    bdf = normalize_bdf(value)
    if bdf is not None:
        dev = next((d for d in devices if d.bdf.lower() == bdf), None)
        if dev is None:
            raise ImpossibleRequest(f"--gpu {value}: no PCI device {bdf} in this root")
        return dev, f"--gpu {value} (PCI {dev.kind})", None
    if value.isascii() and value.isdigit():
        if len(value) > 9 or parse_int(value, "--gpu") >= len(gpus):
            raise ImpossibleRequest(f"--gpu {value[:40]}: this root has {len(gpus)} GPU(s)")
        return (gpus[parse_int(value, "--gpu")], f"--gpu {value} (GPU{value} of inspect)",
                "--gpu indices are numatune's GPU numbering: GPU0.. of inspect")
    if UUID.match(value):
        return match_uuid(value, gpus, "--gpu"), f"--gpu {value} (UUID)", None
    raise UsageError(f"--gpu {value!r}: expected an index, a PCI address (0000:18:00.0) or a GPU UUID")


# -- no GPU: the ranks spread over the nodes ------------------------------------------------------------------
def spread_ranks(topo: Topology, opts: LaunchOptions, facts: LaunchFacts, rank: RankInfo) -> NodeSpread:
    """No GPU and no --node (a CPU-only machine): rank r of n on node r·N/n of the N nodes with CPUs this process
    may use (as torch.backends.xeon.run_cpu spreads ranks over sockets and nodes); one rank per node assumed when
    no launcher variable gives n. On one node that node, and the reason says that nothing else was possible."""
    online = frozenset(topo.cpu.online) or frozenset(c for n in topo.nodes for c in n.cpus)
    usable = online if facts.allowed_cpus is None else online & facts.allowed_cpus
    if not opts.allow_isolated:
        usable -= facts.isolated
    nodes = tuple(n.id for n in topo.nodes if usable.intersection(n.cpus))
    here = "on this machine" if topo.live else "in this root"
    if not nodes:
        raise BindingError(f"no GPU {here} and no node with CPUs this process may use: pass --node")
    with_cpus = [n.id for n in topo.nodes if n.cpus]
    limited = "" if len(nodes) == len(with_cpus) else " this process may use"
    spread = NodeSpread(nodes, rank.local_size, 0, "")
    node = spread.node_of(rank.rank)
    where = f"the {len(nodes)} nodes with CPUs{limited} ({format_cpulist(nodes)})"
    if len(nodes) == 1:
        reason = (f"no GPU {here}: node {node} is its only node with CPUs{limited}, so the rank is bound to it "
                  "(nothing else was possible)")
    elif rank.local_size:
        reason = (f"no GPU {here}: the {rank.local_size} local rank(s) are spread over {where}, rank r of n on "
                  f"the (r·N/n)-th of them: rank {rank.rank} → node {node}")
    else:
        reason = (f"no GPU {here} and no launcher variable gives the local world size: one rank per node "
                  f"assumed, rank {rank.rank} → node {node} of {where} (rank r on the (r mod N)-th)")
    return spread._replace(index=nodes.index(node), reason=reason)


def _spread_count(spread: NodeSpread, nodes: set[int], below: int | None = None) -> int:
    """How many of the spread's ranks (below rank `below`, when given) land on `nodes`: ranks r with r·N/n = i
    are ceil(i·n/N) .. ceil((i+1)·n/N) - 1, counted without walking a launcher's rank count."""
    size, count = spread.ranks or len(spread.nodes), len(spread.nodes)
    total = 0
    for i, nid in enumerate(spread.nodes):
        if nid not in nodes:
            continue
        first, end = (-(-i * size // count), -(-(i + 1) * size // count)) if spread.ranks else (i, i + 1)
        if below is not None:
            end = min(end, below)
        total += max(0, end - first)
    return total


# -- node -----------------------------------------------------------------------------------------------
def _device_cpu_node(topo: Topology, dev: PciDevice) -> int | None:
    """The node with CPUs a device is attached to (its numa_node, else the inferred one; a CPU-less node such as
    a GPU's HBM: the nearest node with CPUs); None when unknown."""
    node = dev.numa_node if dev.numa_node is not None else dev.inferred_node
    here = topo.node(node) if node is not None else None
    if here is None:
        return None
    return node if here.cpus else nearest_cpu_node(topo, here)


def choose_node(
    topo: Topology, opts: LaunchOptions, dev: PciDevice | None, warnings: list[str]
) -> tuple[int, str]:
    if opts.node is not None:
        node, source = opts.node, "--node"
        if dev is not None and (home := _device_cpu_node(topo, dev)) is not None and home != node \
                and topo.node(node) is not None:
            warnings.append(f"--node {node}: {dev.bdf} (the rank's GPU) is on node {home}: the rank's CPUs and memory "
                            f"are remote to its GPU (distance {_slit(topo, node, home) or '?'}); leave out --node to "
                            "bind to the GPU's node")
    elif dev is None:
        raise BindingError("no GPU and no --node: nothing to bind to")
    elif dev.numa_node is not None:
        node, source = dev.numa_node, f"numa_node of {dev.bdf}"
    elif dev.inferred_node is not None:
        node, source = dev.inferred_node, f"inferred from {dev.inferred_from} of {dev.bdf}"
        how = source.split(" of ")[0]
        warnings.append(f"{dev.bdf} has numa_node -1 (firmware gave no proximity); node {node} {how}")
    else:
        cpu_nodes = [n.id for n in topo.nodes if n.cpus]
        if len(cpu_nodes) != 1:
            why = ""
            if dev.kfd_cpu_agent is not None:
                why = (f" (the KFD puts it under KFD CPU agent {dev.kfd_cpu_agent}, but this tree's "
                       f"{len(cpu_nodes)} node(s) with CPUs cannot be matched to the KFD's CPU agents)")
            raise BindingError(f"{dev.bdf} has numa_node -1 and its node cannot be inferred{why}: pass --node")
        node, source = cpu_nodes[0], f"the only node with CPUs ({dev.bdf} has numa_node -1)"
        warnings.append(f"{dev.bdf} has numa_node -1; using node {node}, the only node with CPUs")
    if topo.node(node) is None:
        known = ",".join(str(n.id) for n in topo.nodes) or "none"
        if source == "--node":  # the command line's exit 2 (commands.launch); a device's node not there: 7
            raise ImpossibleRequest(f"--node {node}: node {node} does not exist (nodes: {known})")
        raise BindingError(f"node {node} ({source}) does not exist (nodes: {known})")
    if opts.node is None and dev is not None and not topo.node(node).cpus:
        node, source = _cpu_node_of(topo, dev, node, source)
    return node, source


def _cpu_node_of(topo: Topology, dev: PciDevice, node: int, source: str) -> tuple[int, str]:
    """A device whose node has no CPUs (a Grace GPU whose numa_node names its HBM node): the nearest node with
    CPUs, never the CPU-less one (numactl --cpunodebind on it fails)."""
    from numatune.model.gpumem import nearest_cpu_node

    home = nearest_cpu_node(topo, node)
    if home is None:
        raise BindingError(f"node {node} ({source}) has no CPUs and no node with CPUs is near it: pass --node")
    what = "its GPU memory" if topo.node(node).gpu == dev.bdf.lower() or dev.memory_node == node else "CPU-less"
    return home, (f"{source} is node {node}, {what} without CPUs; node {home} is the nearest node with CPUs "
                  "(SLIT)")


def _memory_note(topo: Topology, dev: PciDevice | None, node: int) -> str | None:
    """The reason line for a GPU whose own memory is a NUMA node (Grace in NUMA mode, POWER9, an APU)."""
    if dev is None or dev.memory_node is None:
        return None
    if dev.memory_node_from == "apu":
        return (f"gpu memory: {dev.bdf} is an APU: its memory is node {dev.memory_node}'s, shared with the CPUs, "
                "so binding to the node places host and GPU data in the same HBM")
    if dev.memory_node_from == MEMORY_FROM_PCI:
        return (f"gpu memory: {dev.bdf}'s memory is taken to be node {dev.memory_node} (inferred: its PCI numa_node "
                f"names that CPU-less node and no driver names an owner), without CPUs: CPUs and default memory go "
                f"to node {node}, the nearest node with CPUs; --mem-policy gpu-memory places host memory there "
                "deliberately")
    holes = f"; MIG placeholders {format_cpulist(dev.placeholder_nodes)}" if dev.placeholder_nodes else ""
    return (f"gpu memory: {dev.bdf}'s memory is node {dev.memory_node} ({dev.memory_node_from}; the node NVML "
            f"reports for it{holes}), without CPUs: CPUs and default memory go to node {node}, "
            f"the nearest node with CPUs; --mem-policy gpu-memory places host memory there deliberately")


# -- CPUs -------------------------------------------------------------------------------------------------
def _cores_of(topo: Topology, node: NumaNode, usable: frozenset[int]) -> list[tuple[int, ...]]:
    """The node's usable CPUs grouped into physical cores (SMT siblings together), in CPU order."""
    by_id = {c.id: c for c in topo.cpus}
    mine = set(node.cpus) & usable
    seen: set[int] = set()
    cores = []
    for cpu in sorted(mine):
        if cpu in seen:
            continue
        c = by_id.get(cpu)
        group = tuple(sorted({cpu} | {s for s in (c.siblings if c else ()) if s in mine}))
        seen.update(group)
        cores.append(group)
    return cores


def one_kind(topo: Topology, cores: Sequence[tuple[int, ...]]) -> bool:
    """True when the cores are all of one CPU kind (always on a CPU with one kind)."""
    kinds = topo.cpu_kinds
    if not kinds.heterogeneous:
        return True
    return len({(k.rank if (k := kinds.kind_of(core[0])) else None) for core in cores}) <= 1


def _flat(cores: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(sorted(c for core in cores for c in core))


def kind_tiers(topo: Topology, cores: list[tuple[int, ...]], preference: str) -> list[list[tuple[int, ...]]]:
    """The cores in tiers of equally ranked CPU kinds, in the order `--cpu-kind` prefers.

    One tier (CPU order, as before kinds existed) for `any`, a symmetric CPU or kinds nothing ranks.
    A core's kind is its first CPU's; CPUs in no kind (none expected: kinds cover online CPUs) go last.
    """
    kinds = topo.cpu_kinds
    if preference == "any" or not kinds.heterogeneous or all(k.role == "unranked" for k in kinds.kinds):
        return [list(cores)]
    last = max(k.rank for k in kinds.kinds) + 1
    by_rank: dict[int, list[tuple[int, ...]]] = {}
    for core in cores:
        k = kinds.kind_of(core[0])
        by_rank.setdefault(k.rank if k else last, []).append(core)
    order = sorted(by_rank, reverse=preference == "efficiency")
    return [by_rank[r] for r in order]


def without_reserved(topo: Topology, cores: list[tuple[int, ...]], n: int) -> list[tuple[int, ...]]:
    """The cores left after `--reserve-cores n`: the first n in CPU order, on hybrid CPUs the least performant.

    Housekeeping (data loaders, IRQs) belongs on efficiency cores; CPU 0 is a P-core on Intel hybrids.
    """
    if not n:
        return list(cores)
    order = [core for tier in kind_tiers(topo, cores, "efficiency") for core in tier]
    kept = set(order[n:])
    return [core for core in cores if core in kept]


def _tier_name(topo: Topology, tier: list[tuple[int, ...]]) -> str:
    kinds = [topo.cpu_kinds.kind_of(core[0]) for core in tier]
    names = sorted({k.name or "?" for k in kinds if k}, key=str)
    roles = {k.role for k in kinds if k}
    return f"{'/'.join(names)} ({'/'.join(sorted(roles))})"


def _kind_pool(
    topo: Topology, opts: LaunchOptions, cores: list[tuple[int, ...]], need: int, what: str,
    reasons: list[str], warnings: list[str],
) -> list[tuple[int, ...]]:
    """The node's cores in --cpu-kind order, cut after the first tiers that hold `need` cores."""
    tiers = kind_tiers(topo, cores, opts.cpu_kind)
    if len(tiers) == 1:
        return tiers[0]
    pool: list[tuple[int, ...]] = []
    used = 0
    for tier in tiers:
        pool += tier
        used += 1
        if len(pool) >= need:
            break
    first = _tier_name(topo, tiers[0])
    rest = ", ".join(_tier_name(topo, t) for t in tiers[used:])
    unused = f"; {rest} cores left out (--cpu-kind any uses every kind)" if rest else ""
    if used == 1:
        reasons.append(f"cpu kinds: {what} uses the {len(tiers[0])} {first} core(s) only "
                       f"(--cpu-kind {opts.cpu_kind}, ranked by {', '.join(topo.cpu_kinds.ranked_by)}){unused}")
    else:
        more = ", ".join(_tier_name(topo, t) for t in tiers[1:used])
        text = (f"{what} needs {need} core(s) but the node has {len(tiers[0])} {first} core(s): "
                f"ranks also get {more} cores")
        reasons.append(f"cpu kinds: {text}{unused}")
        if opts.cpu_kind == "performance":
            warnings.append(f"not enough performance cores: {text}; run fewer ranks per node or give each fewer "
                            "cores (cores:N), or pass --cpu-kind any to spread every kind evenly")
    return pool


def kind_shares(topo: Topology, cpus: tuple[int, ...]) -> tuple[KindShare, ...]:
    """The rank's CPUs per CPU kind, most performant first; () on a CPU with one kind."""
    kinds = topo.cpu_kinds
    if not kinds.heterogeneous or not cpus:
        return ()
    mine = set(cpus)
    return tuple(
        KindShare(k.rank, k.role, k.name, tuple(c for c in k.cpus if c in mine))
        for k in kinds.kinds if mine.intersection(k.cpus)
    )


def choose_cpus(
    topo: Topology,
    opts: LaunchOptions,
    facts: LaunchFacts,
    node_id: int,
    share: tuple[int, int],
    reasons: list[str],
    warnings: list[str] | None = None,
) -> tuple[int, ...]:
    """CPUs for this rank; `share` is (this rank's position, ranks sharing the node).

    On CPUs with several kinds, `exclusive`, `cores:N` and `socket` take the kind `--cpu-kind` prefers
    (performance by default) and reach for the next kind only when the preferred one has too few cores.
    """
    warnings = [] if warnings is None else warnings
    mode = opts.cpu_bind.mode
    if mode == "none":
        reasons.append("cpus: not bound (--cpu-bind none)")
        return ()
    online = frozenset(topo.cpu.online) or frozenset(c for n in topo.nodes for c in n.cpus)
    allowed = online if facts.allowed_cpus is None else online & facts.allowed_cpus
    isolated = frozenset() if opts.allow_isolated else facts.isolated
    usable = allowed - isolated
    excluded = []
    if facts.allowed_cpus is not None and online - facts.allowed_cpus:
        excluded.append(f"outside the allowed CPUs {format_cpulist(facts.allowed_cpus)} ({facts.allowed_source})")
    if isolated & allowed:
        excluded.append(f"isolcpus {format_cpulist(isolated)}")

    def node_cores(nid: int) -> list[tuple[int, ...]]:
        """The node's physical cores minus the reserved first N, then only their usable CPUs."""
        n = topo.node(nid)
        cores = _cores_of(topo, n, online) if n else []
        if opts.reserve_cores:
            if len(cores) <= opts.reserve_cores:
                raise ImpossibleRequest(
                    f"--reserve-cores {opts.reserve_cores} leaves no core on node {nid} ({len(cores)} online cores)"
                )
            cores = without_reserved(topo, cores, opts.reserve_cores)
        kept = [tuple(c for c in core if c in usable) for core in cores]
        return topology_order(topo, [core for core in kept if core], facts.cache_groups)

    node = topo.node(node_id)
    if not topo.cpu.online:
        raise BindingError("this root has no CPU topology (/sys/devices/system/cpu): pass --cpu-bind none")
    if node is None or not node.cpus:
        err = BindingError(f"node {node_id} has no CPUs ({node.kind if node else 'absent'}): choose a node with CPUs")
        if node is not None and node.memory_total_kib:  # memory only (a Grace GPU's HBM, CXL): named by cause
            err.cause = ("memory-only", node_id, node.kind)  # type: ignore[attr-defined]
        raise err
    cores = node_cores(node_id)
    if not cores:
        why = "; ".join(excluded) or "none online"
        err = BindingError(f"no usable CPU on node {node_id} (node CPUs {format_cpulist(node.cpus)}; {why})")
        if (facts.allowed_cpus is not None and not facts.allowed_cpus & frozenset(node.cpus)  # the cpuset's doing
                and "cpuset" in facts.allowed_source and "NUMATUNE_BINDING" not in facts.allowed_source):
            err.cause = ("cpuset", node_id, tuple(node.cpus), facts.allowed_cpus,  # type: ignore[attr-defined]
                         facts.allowed_source)
        raise err
    reserve = ""
    if opts.reserve_cores:
        which = "least performant" if topo.cpu_kinds.heterogeneous else "first"
        reserve = f" after reserving its {which} {opts.reserve_cores} core(s)"
    if mode == "node":
        cpus = _flat(cores)
        reasons.append(f"cpus: all usable CPUs of node {node_id}{reserve} (--cpu-bind node)")
    elif mode == "socket":
        packages = {c.package for c in topo.cpus if c.id in node.cpus and c.package is not None}
        nodes = sorted({n.id for n in topo.nodes for c in topo.cpus if c.package in packages and c.id in n.cpus})
        socket_cores = [core for nid in nodes for core in node_cores(nid)]
        cpus = _flat(_kind_pool(topo, opts, socket_cores, 1, "socket", reasons, warnings))
        shown = ",".join(str(p) for p in sorted(packages)) or "?"
        reasons.append(f"cpus: socket {shown} of node {node_id} (nodes {','.join(map(str, nodes))}){reserve}")
    elif mode == "core-complex":
        cpus = _core_complex(topo, opts, facts, node_id, cores, share, reserve, reasons, warnings)
    else:
        index, count = share
        need = count if mode == "exclusive" else count * (opts.cpu_bind.cores or 1)
        what = "exclusive" if mode == "exclusive" else f"cores:{opts.cpu_bind.cores}"
        cores = _kind_pool(topo, opts, cores, need, f"{what} for {count} rank(s)", reasons, warnings)
        per = len(cores) // count if mode == "exclusive" else (opts.cpu_bind.cores or 1)
        if per == 0:
            raise BindingError(f"node {node_id} has {len(cores)} usable core(s){reserve} for {count} ranks")
        # exclusive: the cores left after an even split go one each to the first ranks, as torchrun's
        # --numa-binding=exclusive gives them; over mixed CPU kinds they stay free (each rank the same count)
        spread = one_kind(topo, cores)
        extra = len(cores) % count if mode == "exclusive" and spread else 0
        start, end = (even_share(len(cores), count, index, spread=spread) if mode == "exclusive"
                      else (index * per, (index + 1) * per))
        if end > len(cores):
            raise ImpossibleRequest(
                f"cores:{per} for rank #{index + 1} of {count} on node {node_id} needs {end} cores; "
                f"{len(cores)} usable{reserve}"
            )
        cpus = _flat(cores[start:end])
        what = "exclusive" if mode == "exclusive" else f"cores:{per}"
        if not is_linear(cores):
            by = "package, die and L3 group" if facts.cache_groups else "package and die"
            reasons.append(f"core order: node {node_id} numbers its CPUs non-linearly (CPU number order alternates "
                           f"between sockets or L3 groups): cores are split in topology order ({by}), so each "
                           "rank's share stays as close together as the split allows")
        if mode == "exclusive":
            each = f"{per} core(s) each" + (f", one more for the first {extra}" if extra else "")
            left = len(cores) - count * per - extra
            each += f"; {left} core(s) left unused (mixed CPU kinds: every rank gets as many)" if left else ""
        else:
            left = len(cores) - count * per
            each = f"{per} core(s) each" + (f"; {left} core(s) left unused" if left > 0 else "")
        reasons.append(
            f"cpus: {what}: node {node_id} has {len(cores)} usable physical core(s){reserve}, {count} rank(s) share it "
            f"→ {each}; this rank is #{index + 1} → cores {start}-{end - 1} of the node, SMT siblings kept together"
        )
    if excluded:
        reasons.append("cpus excluded: " + "; ".join(excluded))
    return cpus


def llc_of_cores(facts: LaunchFacts, cores: Sequence[tuple[int, ...]]) -> list[tuple[int, list[tuple[int, ...]]]]:
    """The cores grouped by last-level cache, in torch.numa.binding's order: most usable CPUs first, then
    the group's lowest CPU (of its whole shared_cpu_list). Each item: (that lowest CPU, the group's cores)."""
    group_of = {cpu: g for g in facts.cache_groups for cpu in g}
    by_key: dict[int, list[tuple[int, ...]]] = {}
    for core in cores:
        g = group_of.get(core[0])
        if g is None:
            raise BindingError(f"CPU {core[0]} has no cache information (cpu{core[0]}/cache/index*): "
                               "--cpu-bind core-complex needs the last-level cache groups; use exclusive")
        by_key.setdefault(min(g), []).append(core)
    return sorted(by_key.items(), key=lambda kv: (-len(_flat(kv[1])), kv[0]))


def _core_complex(
    topo: Topology, opts: LaunchOptions, facts: LaunchFacts, node_id: int, cores: list[tuple[int, ...]],
    share: tuple[int, int], reserve: str, reasons: list[str], warnings: list[str],
) -> tuple[int, ...]:
    """One last-level-cache group (core complex) of the node per rank. Groups are ordered as torchrun's
    core-complex mode orders them and handed out round robin; when there are more ranks than groups, the
    ranks that land on one group split its cores (torchrun gives each of them the whole group)."""
    if not facts.cache_groups:
        raise BindingError("this root has no last-level cache information (cpu*/cache/index*/shared_cpu_list): "
                           "--cpu-bind core-complex cannot group cores; use exclusive")
    groups = llc_of_cores(facts, cores)
    index, count = share
    slot = index % len(groups)
    key, mine = groups[slot]
    shown = "; ".join(f"{format_cpulist(_flat(g))}" for _, g in groups)
    reasons.append(f"core complexes: node {node_id} has {len(groups)} last-level-cache group(s) of usable CPUs"
                   f"{reserve} ({shown}), ordered by size then lowest CPU")
    # the ranks i < count with i % groups == slot, counted, never listed (count may be a launcher's word)
    sharing = (count - slot + len(groups) - 1) // len(groups) if slot < count else 0
    if topo.cpu_kinds.heterogeneous and opts.cpu_kind != "any":  # before any split: the ranks sharing a group
        mine = _kind_pool(topo, opts, mine, sharing, "core-complex", reasons, warnings)  # share one pool
    if sharing > 1:
        pos = index // len(groups)
        if len(mine) < sharing:
            raise BindingError(f"L3 group {format_cpulist(_flat(mine))} of node {node_id} has {len(mine)} core(s) "
                               f"for {sharing} ranks")
        start, end = even_share(len(mine), sharing, pos)
        mine = mine[start:end]
        ranks = ", #".join(str(i + 1) for i in range(slot, count, len(groups)))  # at most the group's cores
        warnings.append(f"{count} ranks on node {node_id} but {len(groups)} L3 group(s): ranks "
                        f"#{ranks} share group {slot + 1} and split its cores "
                        "(torchrun --numa-binding=core-complex would give each of them the whole group)")
        reasons.append(f"cpus: core-complex: rank #{index + 1} of {count} → group {slot + 1}, shared with "
                       f"{sharing - 1} other rank(s): part {pos + 1} of {sharing} of its cores")
    else:
        reasons.append(f"cpus: core-complex: rank #{index + 1} of {count} → group {slot + 1} of {len(groups)} "
                       f"(L3 shared by CPUs {format_cpulist(_flat(groups[slot][1]))})")
    return _flat(mine)


def _slit(topo: Topology, a: int | None, b: int | None) -> int | None:
    """The SLIT distance from node a to node b, None when either is unknown."""
    node = topo.node(a) if a is not None else None
    return node.distances.get(b) if node is not None and b is not None else None


# -- memory -------------------------------------------------------------------------------------------------
def local_memory_nodes(topo: Topology, node: int) -> list[int]:
    """CPU-less memory nodes (CXL, HBM, PMem, unknown; not GPU memory) whose nearest CPU node is `node`."""
    out = []
    for m in topo.nodes:
        if m.cpus or m.kind in ("gpu", "memoryless") or m.memory_total_kib == 0:
            continue
        if nearest_cpu_node(topo, m) == node:
            out.append(m.id)
    return out


def nearest_cxl_node(topo: Topology, node: int) -> int | None:
    here = topo.node(node)
    cxl = [m for m in topo.nodes if m.kind == "cxl" and m.memory_total_kib != 0]
    if not cxl or here is None:
        return None
    return min(cxl, key=lambda m: (here.distances.get(m.id, 1 << 30), m.id)).id


def hmat_bandwidth(node: NumaNode) -> int | None:
    """Read bandwidth (MB/s) from CPU initiators (access1), else any initiator (access0)."""
    for cls in (1, 0):
        for e in node.hmat:
            if e.access_class == cls and e.read_bandwidth_mbps:
                return e.read_bandwidth_mbps
    return None


def hmat_weights(topo: Topology, nodes: Sequence[int]) -> dict[int, int] | None:
    bws = {}
    for nid in nodes:
        n = topo.node(nid)
        bw = hmat_bandwidth(n) if n else None
        if not bw:
            return None
        bws[nid] = bw
    low = min(bws.values())
    return {nid: max(1, min(255, round(bw / low))) for nid, bw in bws.items()}


def _check_kernel(policy: str, facts: LaunchFacts, warnings: list[str]) -> None:
    need = POLICY_SUPPORT[policy][1]
    have = kernel_version(facts.kernel)
    if have is None:
        if need > (2, 6):
            warnings.append(f"kernel version unknown: {policy} needs Linux {need[0]}.{need[1]}+")
        return
    if have < need:
        raise BindingError(f"--mem-policy {policy} needs Linux {need[0]}.{need[1]}+; this kernel is {facts.kernel}")


def choose_memory(
    topo: Topology, opts: LaunchOptions, facts: LaunchFacts, node: int, reasons: list[str], warnings: list[str],
    *, dev: PciDevice | None = None,
) -> MemPolicy:
    policy = opts.mem_policy
    if policy == "none":
        reasons.append("memory: no policy (--mem-policy none): the kernel's default, local allocation")
        return MemPolicy("none", None)
    mode = POLICY_SUPPORT[policy][0]
    _check_kernel(policy, facts, warnings)
    explicit = opts.mem_nodes
    weights: dict[int, int] = {}
    weights_source = None
    if policy in ("bind", "preferred"):
        nodes = explicit or (node,)
        if policy == "preferred" and len(nodes) != 1:
            raise BindingError("--mem-policy preferred takes one node; use preferred-many for several")
        why = "--mem-nodes" if explicit else f"node {node}"
        verb = "only from" if policy == "bind" else "first from, then anywhere"
        reasons.append(f"memory: {policy} — allocate {verb} {why}")
    elif policy == "interleave":
        nodes = explicit or tuple(n.id for n in topo.nodes if n.cpus and n.memory_total_kib != 0)
        why = "--mem-nodes" if explicit else "every node with CPUs and memory"
        reasons.append(f"memory: interleave page by page over {why}")
    elif policy == "preferred-many":
        nodes = explicit or (node, *local_memory_nodes(topo, node))
        why = "--mem-nodes" if explicit else f"node {node} and the CPU-less memory nodes nearest to it"
        reasons.append(f"memory: preferred-many over {why}; when all are full the kernel falls back to any node")
    elif policy == "weighted":
        nodes = explicit or (node, *(m for m in local_memory_nodes(topo, node) if topo.node(m).kind != "gpu"))
        if len(nodes) == 1 and explicit:
            warnings.append("weighted interleave over one node (--mem-nodes) places pages like bind")
        elif len(nodes) < 2:
            raise BindingError(
                f"--mem-policy weighted: no CXL or other CPU-less memory node is nearest to node {node}; "
                "weighted interleave over one node is just bind (pass --mem-nodes to choose)"
            )
        weights, weights_source = _weights(topo, opts, facts, nodes, warnings)
        shown = ", ".join(f"node {n}: {w}" for n, w in weights.items())
        reasons.append(f"memory: weighted interleave over nodes {format_cpulist(nodes)} with weights {shown} "
                       f"({weights_source}); weights are system-wide in /sys/kernel/mm/mempolicy/weighted_interleave")
    elif policy in ("socket", "socket-interleave"):
        nodes = explicit or _socket_nodes(topo, node)
        why = "--mem-nodes" if explicit else f"node {node} and the other nodes with CPUs of its socket, nearest first"
        if len(nodes) == 1:
            warnings.append(f"--mem-policy {policy}: node {node} is the only node of its socket with memory "
                            f"(no sub-NUMA clustering): this is bind to node {node}")
        if policy == "socket":
            reasons.append(f"memory: socket — bind to nodes {format_cpulist(nodes)} ({why}): the kernel fills "
                           f"node {node} first, then the socket's other nodes, never another socket's")
        else:
            reasons.append(f"memory: socket-interleave — page by page over nodes {format_cpulist(nodes)} ({why}): "
                           "the bandwidth and capacity of the whole socket, never another socket's")
    elif policy == "gpu-memory":
        nodes = explicit or _gpu_memory_node(topo, dev)
        if explicit:
            reasons.append(f"memory: gpu-memory — bind to nodes {format_cpulist(nodes)} (--mem-nodes)")
        elif dev is not None and dev.memory_node_from == "apu":
            reasons.append(f"memory: gpu-memory — bind to node {nodes[0]}, the APU's HBM, which its CPUs and GPU "
                           f"share (the same as bind)")
        else:
            whose = (f"the memory node inferred for {dev.bdf} from its PCI numa_node" if dev is not None
                     and dev.memory_node_from == MEMORY_FROM_PCI else f"the HBM of {dev.bdf if dev else '?'}")
            reasons.append(f"memory: gpu-memory — bind to node {nodes[0]}, {whose} (CPU-less): host allocations live "
                           f"in GPU memory, which the CPUs of node {node} reach over the C2C link")
    else:  # cxl-spill
        cxl = nearest_cxl_node(topo, node)
        if cxl is None:
            kinds = ", ".join(f"{n.id}:{n.kind}" for n in topo.nodes)
            raise BindingError(f"--mem-policy cxl-spill: no CXL memory node in this root (nodes {kinds})")
        nodes = explicit or (node, cxl)
        dist = topo.node(node).distances.get(cxl)
        if explicit:
            reasons.append(f"memory: cxl-spill — bind to nodes {format_cpulist(nodes)} (--mem-nodes): the kernel "
                           f"fills the nearest node of the set first (the CXL node nearest node {node} is {cxl})")
            others = [n for n in nodes if n != node and (topo.node(n) is None or topo.node(n).cpus)]
            if node not in nodes or others:
                warnings.append(f"--mem-nodes {format_cpulist(nodes)} with cxl-spill: not this rank's node {node} "
                                f"and its CXL node {cxl}, so pages may land off the socket")
        else:
            reasons.append(
                f"memory: cxl-spill — bind to node {node} (local DRAM) and CXL node {cxl} (distance {dist}): the "
                f"kernel fills the nearest node of the set first, so pages spill to CXL, never to another socket"
            )
    for nid in nodes:
        n = topo.node(nid)
        if n is None:
            known = ",".join(str(k.id) for k in topo.nodes) or "none"
            if explicit:  # a command-line request that cannot be met: exit 2, as --node
                raise ImpossibleRequest(f"--mem-nodes: node {nid} does not exist (nodes: {known})")
            raise BindingError(f"memory node {nid} does not exist (nodes: {known})")
        if n.memory_total_kib == 0:
            raise BindingError(f"memory node {nid} has no memory (MemTotal 0)")
        if facts.allowed_mems is not None and nid not in facts.allowed_mems:
            raise BindingError(
                f"memory node {nid} is outside this process's allowed nodes {format_cpulist(facts.allowed_mems)} "
                "(cgroup cpuset.mems)"
            )
    return MemPolicy(policy, mode, tuple(nodes), weights, weights_source)


def _socket_nodes(topo: Topology, node: int) -> tuple[int, ...]:
    """`node`, then the other nodes with CPUs and memory of its socket, nearest (SLIT) first (SNC, NPS)."""
    from numatune.model.gpumem import same_socket_nodes

    return tuple(n for n in same_socket_nodes(topo, node) if n == node or topo.node(n).memory_total_kib != 0)


def _gpu_memory_node(topo: Topology, dev: PciDevice | None) -> tuple[int, ...]:
    if dev is None:
        raise BindingError("--mem-policy gpu-memory needs a GPU: this rank has none (--node without --gpu, or "
                           "no GPU here)")
    if dev.memory_node is None:
        from numatune.model.gpumem import gpu_memory_layout

        mode = gpu_memory_layout(topo._replace(devices=(dev,))).mode
        raise BindingError(f"--mem-policy gpu-memory: {dev.bdf}'s memory is not a NUMA node here (GPU memory "
                           f"mode: {mode}; only Grace and POWER9 in NUMA mode and APUs put it in one)")
    return (dev.memory_node,)


def _weights(
    topo: Topology, opts: LaunchOptions, facts: LaunchFacts, nodes: Sequence[int], warnings: list[str]
) -> tuple[dict[int, int], str]:
    """(weights, where they come from). The weights are system-wide (sysfs), so launch never changes them:
    a per-rank launcher could not save and restore them safely. --weights states what they must be."""
    current = {n: facts.current_weights.get(n, 1) for n in nodes}
    if opts.weights is not None:
        missing = [n for n in nodes if n not in opts.weights]
        if missing:
            raise BindingError(f"--weights gives no weight for node(s) {format_cpulist(missing)}")
        wanted = {n: opts.weights[n] for n in nodes}
        differ = {n: w for n, w in wanted.items() if current[n] != w}
        if not differ:
            return wanted, "--weights (the kernel's match)"
        have = ",".join(f"{n}:{w}" for n, w in current.items())
        fix = "; ".join(f"echo {w} > {WEIGHT_DIR}/node{n}" for n, w in differ.items())
        if not opts.best_effort:
            raise BindingError(f"--weights {_shown(wanted)}: the kernel's weights are {have}; numatune does not "
                               "change system-wide settings", hint=f"set them once per node, as root: {fix}")
        warnings.append(f"--weights {_shown(wanted)} differ from the kernel's {have}; the kernel's are used "
                        f"(--best-effort; to set them, as root: {fix})")
        return current, "kernel's current weights (--weights differ)"
    suggested = hmat_weights(topo, nodes)
    if suggested is None:
        warnings.append("no HMAT bandwidth for these nodes: the kernel's current weights are used")
        return current, "kernel's current weights"
    if suggested != current:
        shown = ",".join(f"{n}:{w}" for n, w in suggested.items())
        auto = " (the kernel's auto mode is on)" if topo.settings.weighted_interleave_auto else ""
        warnings.append(
            f"HMAT read bandwidth suggests weights {shown} but the kernel's are "
            f"{','.join(f'{n}:{w}' for n, w in current.items())}{auto}; the kernel's are used "
            f"(set them as root: {'; '.join(f'echo {w} > {WEIGHT_DIR}/node{n}' for n, w in suggested.items())})"
        )
        return current, "kernel's current weights"
    return current, "HMAT read bandwidth (matches the kernel's weights)"


def _shown(weights: dict[int, int]) -> str:
    return ",".join(f"{n}:{w}" for n, w in weights.items())


# -- how to apply ----------------------------------------------------------------------------------------------
def choose_method(
    opts: LaunchOptions, facts: LaunchFacts, cpus: tuple[int, ...], mem: MemPolicy, command: Sequence[str],
    reasons: list[str],
) -> tuple[str, tuple[str, ...]]:
    """numactl when it can express the policy, taskset for CPUs only, else direct syscalls."""
    command = tuple(command)
    if not cpus and mem.mode is None:
        reasons.append("apply: nothing to bind; the command is exec'd as is")
        return "exec", command
    via = opts.via
    nm = facts.numactl
    why_not = None
    if via in ("auto", "numactl"):
        if nm is None:
            why_not = "numactl is not installed"
        elif mem.policy == "preferred-many" and not nm.preferred_many:
            why_not = f"{nm.path} has no --preferred-many (needs numactl 2.0.15+)"
        elif mem.policy == "weighted" and not nm.weighted:
            why_not = f"{nm.path} has no --weighted-interleave (needs numactl 2.0.19+)"
        else:
            argv = [nm.path]
            if cpus:
                argv.append(f"--physcpubind={format_cpulist(cpus)}")
            if mem.mode is not None:
                argv.append(f"{POLICY_SUPPORT[mem.policy][2]}={format_cpulist(mem.nodes)}")
            reasons.append(f"apply: numactl {nm.version or ''}".rstrip() + f" ({nm.path})")
            return "numactl", (*argv, "--", *command)
        if via == "numactl":
            raise BindingError(f"--via numactl: {why_not}")
    if via in ("auto", "taskset") and mem.mode is None and facts.taskset:
        reasons.append(f"apply: taskset (CPUs only{'; ' + why_not if why_not else ''})")
        return "taskset", (facts.taskset, "-c", format_cpulist(cpus), *command)
    if via == "taskset":
        problem = "taskset cannot set a memory policy" if mem.mode is not None else "taskset is not installed"
        raise BindingError(f"--via taskset: {problem}")
    if mem.mode is not None and not facts.direct_ok:
        extra = f"; {why_not}" if why_not else ""
        raise BindingError(f"no set_mempolicy syscall number known for this architecture{extra}")
    calls = []
    if cpus:
        calls.append(f"sched_setaffinity(0, {{{format_cpulist(cpus)}}})")
    if mem.mode is not None:
        calls.append(f"set_mempolicy({mem.policy}, {{{format_cpulist(mem.nodes)}}})")
    reasons.append(f"apply: directly ({'; '.join(calls)}), then exec{' — ' + why_not if why_not else ''}")
    return "direct", command


# -- the whole plan -----------------------------------------------------------------------------------------------
def plan_launch(
    topo: Topology,
    devices: Sequence[PciDevice],
    facts: LaunchFacts,
    opts: LaunchOptions,
    command: Sequence[str],
) -> LaunchPlan:
    """Rank → GPU → node → CPUs → memory → argv. BindingError unless --best-effort (then unbound)."""
    env = facts.env
    rank = detect_rank(env, opts)
    reasons = [f"rank: {rank.rank} from {rank.rank_source}"
               + (f"; {rank.local_size} local rank(s) from {rank.size_source}" if rank.local_size else
                  "; local world size unknown")]
    warnings: list[str] = []
    gpu = None
    node = None
    node_source = "none"
    spread = clusters = None
    try:
        dev = None
        in_use: list[PciDevice] = []
        if opts.node is None and opts.gpu is None and not gpu_order(devices)[0]:
            spread = spread_ranks(topo, opts, facts, rank)
            node = spread.nodes[spread.index]
            node_source = ("the only node with CPUs (no GPU)" if len(spread.nodes) == 1 else
                           f"no GPU: rank {rank.rank} of {rank.local_size or '?'} spread over nodes "
                           f"{format_cpulist(spread.nodes)}")
        else:
            if opts.node is None or opts.gpu is not None:
                dev, gpu, in_use = choose_gpu(env, opts, rank, devices)
                reasons.append(f"gpu: {gpu.bdf} ({gpu.kind}) from {gpu.source}")
                if gpu.ordering:
                    reasons.append(f"ordering: {gpu.ordering}")
            node, node_source = choose_node(topo, opts, dev, warnings)
        reasons.append(f"node: {node} ({node_source})")
        if (note := _memory_note(topo, dev, node)) is not None:
            reasons.append(note)
        position, count, sharing = _sharing(topo, opts, rank, dev, in_use, node, spread)
        reasons.append(sharing)
        share = (position, count) if opts.cpu_bind.mode in ("exclusive", "cores", "core-complex") else (0, 1)
        cpus = choose_cpus(topo, opts, facts, node, share, reasons, warnings)
        from numatune.plan.torchrun import torch_view  # only when a plan is made

        torch = torch_view(topo, facts, opts, dev, in_use, node, node_source, cpus, share,
                           lambda: node_split(topo, opts, facts, node, cpus, share))
        if torch is not None:
            reasons.append(_torch_line(torch))
        mem = choose_memory(topo, opts, facts, node, reasons, warnings, dev=dev)
        nic = choose_nic(opts.nic, opts.nic_transport, dev, in_use, node, devices, reasons, warnings,
                         distance=lambda a, b: _slit(topo, a, b))
        method, argv = choose_method(opts, facts, cpus, mem, command, reasons)
        clusters = cluster_share(topo, opts, rank, node, cpus, mem, dev, in_use, spread)
    except BindingError as exc:
        if not opts.best_effort:
            raise
        warnings.append(f"{exc.message}; running unbound (--best-effort)")
        reasons.append("apply: unbound (--best-effort)")
        return LaunchPlan(rank, gpu, node, node_source, opts.cpu_bind.mode, (), MemPolicy("none", None), "exec",
                          tuple(command), tuple(command), {}, tuple(reasons), tuple(warnings), True, spread=spread)
    set_env = {}
    if cpus:
        threads, why = omp_threads(topo, opts.cpu_bind.mode, cpus, position, count)
        if count > 1 and rank.local_size and opts.cpu_bind.mode in ("node", "socket"):  # known, not assumed
            warnings.append(f"--cpu-bind {opts.cpu_bind.mode}: the {count} ranks on {_where(topo, opts, node)} "
                            f"overlap, each bound to all its CPUs {format_cpulist(cpus)}; --cpu-bind exclusive "
                            "gives each its own cores")
        if "OMP_NUM_THREADS" in env:
            reasons.append(f"env: OMP_NUM_THREADS={env['OMP_NUM_THREADS']} already set: left alone")
        else:
            set_env["OMP_NUM_THREADS"] = str(threads)
            reasons.append(f"env: OMP_NUM_THREADS={threads} ({why})")
    if nic is not None:
        set_env.update(nic_env(nic, opts.nic_transport, facts.rdma_ports, env, reasons))
    mode = opts.cpu_bind.mode if opts.cpu_bind.mode != "cores" else f"cores:{opts.cpu_bind.cores}"
    shares = kind_shares(topo, cpus)
    if shares:
        reasons.append("cpu kind: " + "; ".join(
            f"{len(s.cpus)} {s.name or '?'} ({s.role}) CPU(s) {format_cpulist(s.cpus)}" for s in shares))
    online = frozenset(topo.cpu.online)
    confined = ""
    if cpus and facts.allowed_cpus is not None and online - facts.allowed_cpus:
        confined = f"the allowed CPUs {format_cpulist(facts.allowed_cpus & online)} ({facts.allowed_source})"
    return LaunchPlan(rank, gpu, node, node_source, mode, cpus, mem, method, argv, tuple(command), set_env,
                      tuple(reasons), tuple(warnings), cpu_kinds=shares, nic=nic, torch=torch,
                      confined=confined, spread=spread, clusters=clusters)


def node_split(topo: Topology, opts: LaunchOptions, facts: LaunchFacts, node: int, cpus: tuple[int, ...],
               share: tuple[int, int]) -> NodeSplit:
    """How numatune splits the rank's node among the ranks sharing it (each position's CPUs), its usable CPUs and
    the ones --reserve-cores keeps: what the torchrun comparison names CPU by CPU."""
    shares: dict[int, frozenset[int]] = {}
    for i in range(share[1]):
        try:
            shares[i] = frozenset(cpus) if i == share[0] else frozenset(
                choose_cpus(topo, opts, facts, node, (i, share[1]), [], []))
        except BindingError:
            shares[i] = frozenset()  # a rank this node cannot bind
    whole = opts._replace(cpu_bind=CpuBind("node"))
    try:
        usable = frozenset(choose_cpus(topo, whole, facts, node, (0, 1), [], []))
        unreserved = frozenset(choose_cpus(topo, whole._replace(reserve_cores=0), facts, node, (0, 1), [], []))
    except BindingError:
        usable = unreserved = frozenset(cpus)
    return NodeSplit(shares, usable, unreserved - usable)


def _torch_line(view: TorchView) -> str:
    """The dry run's sentence on torchrun --numa-binding for the same rank."""
    head = f"torchrun --numa-binding={view.mode}"
    if view.error:
        return f"{view.error}; numatune binds as above"
    if view.same:
        return f"{head} would choose the same CPUs (node {view.node})"
    return f"{head} would bind to CPUs {format_cpulist(view.cpus)} (node {view.node}): " + "; ".join(view.because)


def omp_threads(topo: Topology, mode: str, cpus: Sequence[int], position: int, count: int) -> tuple[int, str]:
    """(OMP_NUM_THREADS, why): the rank's share of physical cores, as torchrun's exclusive split counts them. Under
    node and socket binding every rank on the node is bound to all its CPUs, so each gets its even share of their
    cores (the first ranks one more when the split is uneven), and the ranks' threads together never exceed the
    cores; under exclusive, cores:N and core-complex the binding is the share: one thread per physical core of it."""
    cores = len(physical_cores(topo, cpus))
    if mode in ("node", "socket") and count > 1:
        start, end = even_share(cores, count, position)
        why = f"its share of the {cores} physical core(s) it is bound to among the {count} ranks bound there"
        if cores < count:
            why += f"; {count} ranks for {cores} core(s): one thread each, oversubscribed"
        return max(1, end - start), why
    return max(1, cores), f"one thread per physical core it is bound to: {cores} core(s), {len(cpus)} CPU(s)"


def _where(topo: Topology, opts: LaunchOptions, node: int) -> str:
    nodes = _sharing_nodes(topo, opts, node)
    return f"node {node}" if len(nodes) == 1 else f"the socket of node {node} (nodes {format_cpulist(nodes)})"


def _sharing_nodes(topo: Topology, opts: LaunchOptions, node: int) -> list[int]:
    """The nodes whose ranks bind to the same CPUs as this one: its node; under socket binding every node of its
    socket(s)."""
    if opts.cpu_bind.mode != "socket":
        return [node]
    n = topo.node(node)
    packages = {c.package for c in topo.cpus if n is not None and c.id in n.cpus and c.package is not None}
    return sorted({m.id for m in topo.nodes for c in topo.cpus if c.package in packages and c.id in m.cpus}) or [node]


def _sharing(
    topo: Topology, opts: LaunchOptions, rank: RankInfo, dev: PciDevice | None, in_use: list[PciDevice], node: int,
    spread: NodeSpread | None = None, nodes: set[int] | None = None,
) -> tuple[int, int, str]:
    """(position of this rank among the ranks bound to its node's CPUs, how many there are, the dry run's line
    saying so and where the count comes from). `nodes` counts the ranks on those nodes instead (a socket's)."""
    where = _where(topo, opts, node)
    nodes = set(_sharing_nodes(topo, opts, node)) if nodes is None else nodes
    size = f"{rank.local_size} local rank(s) from {rank.size_source}" if rank.local_size else None
    if spread is not None and size is not None:
        count = _spread_count(spread, nodes)
        return (_spread_count(spread, nodes, rank.rank), count,
                f"sharing: {count} rank(s) on {where}: the {size}, spread over the nodes with CPUs")
    if dev is None or opts.node is not None:
        if size is None:
            return 0, 1, (f"sharing: 1 rank on {where} assumed: no launcher variable gives the local world size "
                          "(LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE, OMPI_COMM_WORLD_LOCAL_SIZE... or --local-size)")
        count = rank.local_size or 1
        return rank.rank % count, count, (f"sharing: {count} rank(s) on {where}: --node given, so all {size} are "
                                          "assumed to share it")
    sharing = sorted({d.bdf: d for d in in_use if d.node in nodes}.values(), key=lambda d: pci_sort_key(d.bdf))
    if dev not in sharing:
        sharing = sorted([*sharing, dev], key=lambda d: pci_sort_key(d.bdf))
    names = ", ".join(d.bdf for d in sharing)
    src = f"the GPUs of the {size}" if size else "local world size unknown: every GPU of the node assumed in use"
    return sharing.index(dev), len(sharing), (f"sharing: {len(sharing)} rank(s) on {where}, one per GPU in use "
                                              f"there ({names}; {src})")


def cluster_share(
    topo: Topology, opts: LaunchOptions, rank: RankInfo, node: int, cpus: tuple[int, ...], mem: MemPolicy,
    dev: PciDevice | None, in_use: list[PciDevice], spread: NodeSpread | None,
) -> ClusterShare | None:
    """Sub-NUMA clustering (SNC, NPS) with fewer local ranks on the rank's socket than the socket has clusters:
    bound by node (or exclusive) and by the node's memory, each rank gets one cluster's cores and memory while the
    socket's others stay idle. None when the local world size is unknown, there is no clustering, the ranks fill
    the clusters, or the binding already spans the socket (--cpu-bind socket, --mem-policy socket...)."""
    if not rank.local_size:
        return None
    from numatune.model.gpumem import clustering
    from numatune.model.gpumem import nearest_cpu_node as cpu_node_of

    name, per_socket = clustering(topo)
    socket, clusters = next(((p, ns) for p, ns in per_socket.items() if node in ns), (None, ()))
    if name is None or socket is None:
        return None
    if dev is not None and opts.node is None:  # the GPUs in use, each at its CPU node (a Grace GPU's HBM is not)
        homes = {d.bdf: cpu_node_of(topo, d.node) if d.node is not None else None for d in [*in_use, dev]}
        ranks = sum(1 for home in homes.values() if home in clusters)
    else:
        ranks = _sharing(topo, opts, rank, dev, in_use, node, spread, set(clusters))[1]
    if ranks >= len(clusters):
        return None
    options: list[str] = []
    parts = []
    online = frozenset(topo.cpu.online)
    socket_cores = len(physical_cores(topo, [c for n in clusters for c in topo.node(n).cpus if c in online]))
    cores = len(physical_cores(topo, cpus))
    if cpus and opts.cpu_bind.mode in ("node", "exclusive"):
        options += ["--cpu-bind", "socket"]
        parts.append(f"{cores} of the socket's {socket_cores} cores")
    with_memory = {n for n in clusters if topo.node(n).memory_total_kib}
    socket_kib = sum(topo.node(n).memory_total_kib or 0 for n in with_memory)
    mine = set(mem.nodes) & with_memory if mem.mode is not None else with_memory
    memory_kib = sum(topo.node(n).memory_total_kib or 0 for n in mine)
    if mine and mine < with_memory and mem.policy not in ("interleave", "socket", "socket-interleave"):
        options += ["--mem-policy", "socket"]
        parts.append(f"{memory_kib / 1048576:.1f} of its {socket_kib / 1048576:.1f} GiB of memory")
    if not options:
        return None
    reason = (f"{name}: socket {socket} has {len(clusters)} clusters (nodes {format_cpulist(clusters)}) and "
              f"{ranks} of the {rank.local_size} local rank(s) on it, so this rank gets one cluster's "
              f"{' and '.join(parts)}; {' '.join(options)} gives "
              + ("it the whole socket's" if ranks == 1 else f"the socket's {ranks} ranks all of it, shared"))
    return ClusterShare(name, socket, tuple(clusters), ranks, cores, socket_cores, memory_kib, socket_kib,
                        tuple(options), reason)
