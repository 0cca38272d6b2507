"""What `torchrun --numa-binding=MODE` (torch.numa.binding, PyTorch 2.9+) would give the same rank, and why
numatune's answer differs where it does. Pure; launch prints it in the dry run and the JSON plan.

torch.numa.binding's inputs, as its source reads them:
- the GPU of local rank r is cuda:r; its node is the PCI function's numa_node, with -1 read as node 0;
- a node's CPUs are nodeN/cpulist ∩ sched_getaffinity(0) (no isolcpus, CPU kinds or reserved cores);
- socket: the nodes whose lowest allowed CPU has the GPU node's physical_package_id (every possible
  node is asked; one without an allowed CPU makes it fail);
- exclusive: the node's physical cores (grouped by the lowest thread sibling, in that order) split evenly
  over the GPUs it sees on the node, the first GPUs taking one more when the split is uneven;
- core-complex: the node's CPUs grouped by their highest-level data/unified cache (keyed by the lowest
  CPU of its shared_cpu_list), most allowed CPUs first, then by that key; GPU #i on the node takes
  group i modulo the number of groups (so ranks beyond the group count share a whole group).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from numatune.cpulist import format_cpulist
from numatune.model.launch import TORCH_MODES, LaunchFacts, LaunchOptions, NodeSplit, TorchView
from numatune.model.topology import PciDevice, Topology
from numatune.plan.cores import even_share, is_linear, physical_cores, topology_order


class _Fails(Exception):
    pass


def torch_node(dev: PciDevice) -> int:
    return dev.numa_node if dev.numa_node is not None else 0


def _allowed(topo: Topology, facts: LaunchFacts) -> frozenset[int]:
    """sched_getaffinity(0): torch reads no cgroup cpuset beyond what the kernel put in the mask."""
    online = frozenset(topo.cpu.online) or frozenset(c for n in topo.nodes for c in n.cpus)
    mask = facts.affinity_cpus if facts.affinity_cpus is not None else facts.allowed_cpus
    return online if mask is None else online & mask


def _node_cpus(topo: Topology, node: int, allowed: frozenset[int]) -> set[int]:
    n = topo.node(node)
    if n is None:
        raise _Fails(f"node {node} has no cpulist (RuntimeError)")
    return set(n.cpus) & allowed


def _socket(topo: Topology, node: int, allowed: frozenset[int]) -> set[int]:
    pkg = {c.id: c.package for c in topo.cpus}
    mine = _node_cpus(topo, node, allowed)
    if not mine:
        raise _Fails(f"node {node} has no allowed CPU")
    want = pkg.get(min(mine))
    out: set[int] = set()
    for n in topo.nodes:
        cpus = _node_cpus(topo, n.id, allowed)
        if not cpus:
            raise _Fails(f"it asks every node for its lowest allowed CPU and node {n.id} has none "
                         f"({n.kind}, {'CPU-less' if not n.cpus else 'outside the allowed CPUs'})")
        if pkg.get(min(cpus)) == want:
            out |= cpus
    return out


def _split_index(dev: PciDevice, in_use: Sequence[PciDevice], node: int) -> tuple[int, int]:
    """(this GPU's position among the node's GPUs in torch's cuda:i order, how many). `in_use` is in that
    order already (the visible-devices list as given, else numatune's numbering, which is CUDA's by PCI bus
    id): sorting it again put cuda:0 = GPU7 of `CUDA_VISIBLE_DEVICES=7,6,5,4` last."""
    ordered = list({d.bdf: d for d in [*in_use, dev]}.values())
    gpus = [d for d in ordered if torch_node(d) == node] or [dev]
    return [d.bdf for d in gpus].index(dev.bdf), len(gpus)


def _exclusive(topo: Topology, dev: PciDevice, in_use: Sequence[PciDevice], node: int,
               allowed: frozenset[int]) -> set[int]:
    sib = {c.id: c.siblings or (c.id,) for c in topo.cpus}
    cores: dict[int, set[int]] = {}
    for cpu in _node_cpus(topo, node, allowed):
        cores.setdefault(min(sib.get(cpu, (cpu,))), set()).add(cpu)
    ordered = [cores[k] for k in sorted(cores)]
    index, count = _split_index(dev, in_use, node)
    if len(ordered) < count:
        raise _Fails(f"node {node} has {len(ordered)} physical core(s) for {count} GPUs")
    start, end = even_share(len(ordered), count, index)
    return set().union(*ordered[start:end])


def _core_complex(topo: Topology, facts: LaunchFacts, dev: PciDevice, in_use: Sequence[PciDevice], node: int,
                  allowed: frozenset[int]) -> set[int]:
    group_of = {cpu: g for g in facts.cache_groups for cpu in g}
    groups: dict[int, set[int]] = {}
    for cpu in _node_cpus(topo, node, allowed):
        if cpu not in group_of:
            raise _Fails(f"CPU {cpu} has no cache information")
        groups.setdefault(min(group_of[cpu]), set()).add(cpu)
    if not groups:
        raise _Fails(f"node {node} has no allowed CPU")
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    index, _ = _split_index(dev, in_use, node)
    return ordered[index % len(ordered)][1]


def torch_view(
    topo: Topology, facts: LaunchFacts, opts: LaunchOptions, dev: PciDevice | None, in_use: Sequence[PciDevice],
    node: int, node_source: str, cpus: tuple[int, ...], share: tuple[int, int],
    split: Callable[[], NodeSplit] | None = None,
) -> TorchView | None:
    """torchrun's answer for this rank and mode (None for modes it lacks, or with --node: it needs a GPU).
    `split`: numatune's split of the node (plan.launch.node_split), asked for only where the answers differ."""
    mode = opts.cpu_bind.mode
    if mode not in TORCH_MODES or dev is None or opts.node is not None:
        return None
    tnode = torch_node(dev)
    allowed = _allowed(topo, facts)
    try:
        if mode == "node":
            tcpus = _node_cpus(topo, tnode, allowed)
        elif mode == "socket":
            tcpus = _socket(topo, tnode, allowed)
        elif mode == "exclusive":
            tcpus = _exclusive(topo, dev, in_use, tnode, allowed)
        else:
            tcpus = _core_complex(topo, facts, dev, in_use, tnode, allowed)
        if not tcpus:
            raise _Fails("it would bind to no CPU (RuntimeError)")
    except _Fails as exc:
        return TorchView(mode, tnode, (), False, f"torchrun --numa-binding={mode} would fail: {exc}"
                         + _cpu_less(topo, dev, tnode))
    except ValueError:
        return TorchView(mode, tnode, (), False, f"torchrun --numa-binding={mode} would fail (min() of no CPUs)")
    theirs = tuple(sorted(tcpus))
    same = theirs == tuple(sorted(cpus))
    return TorchView(mode, tnode, theirs, same, None,
                     () if same else _because(topo, facts, opts, dev, in_use, node, node_source, set(theirs),
                                              set(cpus), share, tnode, split))


def _cpu_less(topo: Topology, dev: PciDevice, tnode: int) -> str:
    """Why torch's node has no CPUs, when it has none: torch takes the PCI function's numa_node as the rank's
    node, and on Grace in NUMA mode that can be the GPU's own HBM node."""
    n = topo.node(tnode)
    if n is None or n.cpus:
        return ""
    what = "the GPU's own memory (HBM)" if n.gpu == dev.bdf.lower() or dev.memory_node == tnode else "CPU-less"
    return f" (it takes the GPU's numa_node {tnode} as the rank's node: {what}, without CPUs)"


def _because(
    topo: Topology, facts: LaunchFacts, opts: LaunchOptions, dev: PciDevice, in_use: Sequence[PciDevice],
    node: int, node_source: str, theirs: set[int], mine: set[int], share: tuple[int, int], tnode: int,
    split: Callable[[], NodeSplit] | None = None,
) -> tuple[str, ...]:
    mode = opts.cpu_bind.mode
    out = []
    if tnode != node:
        out.append(f"the GPU reports numa_node -1, which torch reads as node {tnode} "
                   f"(numatune uses node {node}: {node_source})")
    if facts.allowed_cpus is not None and theirs - facts.allowed_cpus:
        out.append(f"it reads sched_getaffinity only and would also use CPUs "
                   f"{format_cpulist(theirs - facts.allowed_cpus)}, which the job may not run on "
                   f"({facts.allowed_source})")
    iso = theirs & facts.isolated
    if iso and not opts.allow_isolated:
        out.append(f"it would also use the isolated CPUs {format_cpulist(iso)} (isolcpus), which numatune leaves out")
    if opts.reserve_cores:
        out.append(f"it reserves no cores (numatune: --reserve-cores {opts.reserve_cores})")
    kinds = topo.cpu_kinds
    if kinds.heterogeneous and opts.cpu_kind != "any" and mode != "node" \
            and any(kinds.role_of(c) != kinds.role_of(min(mine)) for c in theirs):
        out.append(f"it ignores CPU kinds (numatune: --cpu-kind {opts.cpu_kind} takes those cores first)")
    if mode in ("exclusive", "core-complex") and tnode == node:
        tindex, tcount = _split_index(dev, in_use, node)
        n = topo.node(node)
        cores = [c for c in physical_cores(topo, n.cpus if n else ()) if set(c) & mine | set(c) & theirs]
        if mode == "exclusive" and not is_linear(topology_order(topo, cores, facts.cache_groups)):
            out.append(f"it splits the node's cores in CPU-number order, which is not topology order here "
                       f"(non-linear CPU numbering): its share spans {_spread(topo, facts, theirs)}, "
                       f"numatune's {_spread(topo, facts, mine)}")
        if tcount != share[1]:
            out.append(f"it counts {tcount} GPU(s) on node {node} where numatune shares it among {share[1]} rank(s)")
        elif tindex != share[0]:
            out.append(f"it orders node {node}'s GPUs by CUDA index (the visible-devices order), numatune by its "
                       f"GPU numbering (GPU0.. of inspect): this rank's share is #{tindex + 1} of {tcount} there, "
                       f"#{share[0] + 1} here")
        elif mode == "core-complex" and facts.cache_groups:
            groups = len({min(g) for g in facts.cache_groups if set(g) & set(topo.node(node).cpus)})
            if share[1] > groups:
                out.append(f"{share[1]} ranks on {groups} L3 group(s): it gives each rank on a shared group the "
                           "whole group, numatune splits the group's cores between them")
    if tnode == node and split is not None:
        out += _account(topo, facts, opts, dev, in_use, node, theirs, mine, share, split())
    if not out:
        out.append(f"torchrun's CPUs {format_cpulist(sorted(theirs))} are not numatune's "
                   f"{format_cpulist(sorted(mine))}")
    return tuple(out)


def _account(
    topo: Topology, facts: LaunchFacts, opts: LaunchOptions, dev: PciDevice, in_use: Sequence[PciDevice], node: int,
    theirs: set[int], mine: set[int], share: tuple[int, int], split: NodeSplit,
) -> list[str]:
    """CPU by CPU, why torchrun's share and numatune's differ: where each CPU of the difference goes on either side
    and the rule that sent it there, computed from both splits of the node (never a guess at the cause)."""
    mode = opts.cpu_bind.mode
    out: list[str] = []
    extra, missing = theirs - mine, mine - theirs
    why: dict[str, set[int]] = {}
    kinds = topo.cpu_kinds
    for cpu in sorted(extra):
        if (cpu in facts.isolated and not opts.allow_isolated) or (
                facts.allowed_cpus is not None and cpu not in facts.allowed_cpus):
            continue  # isolated or not allowed: the lines above name these CPUs
        if cpu in split.reserved:
            why.setdefault(f"numatune reserves (--reserve-cores {opts.reserve_cores}), torchrun reserves none",
                           set()).add(cpu)
        elif (owner := next((i for i, c in split.shares.items() if cpu in c and i != share[0]), None)) is not None:
            why.setdefault(f"numatune gives to rank #{owner + 1} of {share[1]} on node {node}", set()).add(cpu)
        elif kinds.heterogeneous and opts.cpu_kind != "any" and mine and kinds.role_of(cpu) != kinds.role_of(min(mine)):
            continue  # another CPU kind: "it ignores CPU kinds" above
        else:
            why.setdefault(_unused(topo, split, share, mode), set()).add(cpu)
    if mode in ("exclusive", "core-complex"):
        tshares = _torch_shares(topo, facts, dev, in_use, node)
        for cpu in sorted(missing):
            owner = next((i for i, c in tshares.items() if cpu in c), None)
            key = (f"torchrun gives to its rank #{owner + 1} of {len(tshares)} on node {node}"
                   if owner is not None else "torchrun leaves out of every rank's share")
            why.setdefault(key, set()).add(cpu)
    else:
        for cpu in sorted(missing):
            why.setdefault("torchrun leaves out", set()).add(cpu)
    for text, cpus in why.items():
        out.append(f"{'CPU' if len(cpus) == 1 else 'CPUs'} {format_cpulist(sorted(cpus))}: {text}")
    if why and mode == "exclusive":
        out.append(_exclusive_rules(topo, facts, dev, in_use, node, split))
    return out


def _unused(topo: Topology, split: NodeSplit, share: tuple[int, int], mode: str) -> str:
    """Why numatune binds a usable CPU of the node to no rank."""
    taken = set().union(*split.shares.values()) if split.shares else set()
    left = sorted(split.usable - taken)
    kinds = {topo.cpu_kinds.role_of(c) for c in split.usable}
    if mode == "exclusive" and len(kinds) > 1 and left:
        return (f"numatune leaves unused: its {len(physical_cores(topo, split.usable))} usable cores of mixed "
                f"CPU kinds do not split evenly among {share[1]} ranks, so every rank gets as many cores and the "
                f"{len(physical_cores(topo, left))} left over ({format_cpulist(left)}) stay free; torchrun gives "
                "the left-over cores to its first ranks")
    if left:
        return f"numatune binds no rank there (CPUs {format_cpulist(left)} of the node are in no rank's share)"
    return "numatune binds no rank there"


def _torch_shares(topo: Topology, facts: LaunchFacts, dev: PciDevice, in_use: Sequence[PciDevice],
                  node: int) -> dict[int, set[int]]:
    """torchrun's CPUs for every GPU it counts on the node, by its position there."""
    allowed = _allowed(topo, facts)
    ordered = list({d.bdf: d for d in [*in_use, dev]}.values())
    gpus = [d for d in ordered if torch_node(d) == node] or [dev]
    out: dict[int, set[int]] = {}
    for i, d in enumerate(gpus):
        try:
            out[i] = _exclusive(topo, d, gpus, node, allowed)
        except _Fails:
            out[i] = set()
    return out


def _exclusive_rules(topo: Topology, facts: LaunchFacts, dev: PciDevice, in_use: Sequence[PciDevice], node: int,
                     split: NodeSplit) -> str:
    """Both exclusive splits of the node, in numbers."""
    allowed = _allowed(topo, facts)
    tcores = len(physical_cores(topo, _node_cpus(topo, node, allowed)))
    _, tcount = _split_index(dev, in_use, node)
    tper, textra = divmod(tcores, tcount)
    sizes = [len(physical_cores(topo, c)) for _, c in sorted(split.shares.items())]
    usable = len(physical_cores(topo, split.usable))
    theirs = f"{tper} each" + (f", the first {textra} one more" if textra else "")
    left = usable - sum(sizes)
    mixed = len({topo.cpu_kinds.role_of(c) for c in split.usable}) > 1
    unused = (f"; {left} left unused" + (", mixed CPU kinds: every rank as many" if mixed else "")) if left > 0 else ""
    return (f"torchrun splits all {tcores} cores of node {node} it may run on among {tcount} GPU(s) ({theirs}); "
            f"numatune splits its {usable} usable cores among {len(sizes)} rank(s) "
            f"({', '.join(map(str, sizes))} core(s){unused})")


def _spread(topo: Topology, facts: LaunchFacts, cpus: set[int]) -> str:
    """"2 socket(s), 3 L3 group(s)": how many of each a CPU set touches."""
    pkg = {c.id: c.package for c in topo.cpus}
    llc = {cpu: min(g) for g in facts.cache_groups for cpu in g}
    text = f"{len({pkg.get(c) for c in cpus})} socket(s)"
    return text + (f", {len({llc.get(c) for c in cpus})} L3 group(s)" if facts.cache_groups else "")
