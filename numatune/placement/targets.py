"""Where a buffer should go: a target spec resolved against the topology into nodes (or stripes).

Specs (what `Arena(..., target)`, `place(obj, target)` and the plan accept):
- "local": DRAM of the node the calling thread runs on (its only node when its CPUs are on one);
- ("local", gpu): DRAM of a GPU's node, `gpu` as `launch --gpu` takes it (index, BDF, UUID) or a
  torch.device; an index honours CUDA_VISIBLE_DEVICES like `launch` does (the same resolver);
- "dram": every DRAM node (MPOL_BIND over a set allocates from the nearest of them first);
- "cxl": the CXL nodes on the calling thread's socket (every CXL node, the far ones named in the
  reason, when that socket has none); "cxl:all": every CXL node; "cxl:nearest": the CXL node nearest
  to the calling thread's node;
- a node or a node list: 3, [2, 3], "2,3", "node:3";
- a stripe: Stripe([2, 3]), Stripe("cxl") (the caller's socket, as "cxl"), "stripe:cxl", "stripe:cxl:all",
  "stripe:2,3" (shares by bandwidth seen from the caller's node: HMAT's row for that node, or figures
  the caller passes, e.g. from `numatune probe`), "stripe:2=1,3=2" (shares given). A far-socket CXL
  node in a stripe is named in the reason (numatune.plan.cxl).

A stripe gives each node a share of the range in chunks, each chunk bound to one node: it does not
depend on the system-wide weighted-interleave weights (shared with every other job, Linux 6.9+), and
`MPOL_MF_MOVE` then moves every misplaced page, because each chunk's mask is a single node.
Pure except `live_context()`, which reads the live node through Host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.errors import InputError, Unsupported
from numatune.model.document import MAX_ID, Doc
from numatune.model.topology import NumaNode, PciDevice, Topology
from numatune.numbers import maybe_int, parse_int
from numatune.plan.cxl import CxlChoice, caller_weights, default_cxl, far_of

MIB = 1 << 20
HUGE = 2 * MIB
MAX_STRIPE_RUNS = 4096  # mappings one stripe may create (each chunk is its own VMA; vm.max_map_count is 65,530)


class Stripe(NamedTuple):
    """Stripe over `nodes` ("cxl" or ids); `weights` {node: share} overrides bandwidth; `chunk` in bytes."""

    nodes: Any = "cxl"
    weights: Mapping[int, float] | None = None
    chunk: int | None = None


class Target(NamedTuple):
    """A resolved target: bind to `nodes`, or (when `shares` is set) stripe over them."""

    spec: str  # normalised spec, for reports ("local", "gpu 0000:18:00.0", "cxl", "nodes 2,3", "stripe 2,3")
    nodes: tuple[int, ...]
    reason: str  # how the nodes were chosen
    shares: tuple[tuple[int, float], ...] = ()  # stripe: (node, fraction), fractions sum to 1
    share_source: str = ""  # "HMAT read bandwidth" | "given" | "caller's bandwidth figures" | "equal (...)"
    chunk: int | None = None  # stripe chunk bytes (None: chosen from the size)

    @property
    def striped(self) -> bool:
        return bool(self.shares)

    def describe(self) -> str:
        if self.striped:
            parts = ", ".join(f"node {n} {s:.0%}" for n, s in self.shares)
            return f"{self.spec}: stripe {parts} ({self.share_source})"
        if self.spec.startswith("node"):
            return self.spec
        return f"{self.spec} (node{'s' if len(self.nodes) > 1 else ''} {format_cpulist(self.nodes)})"


class LiveContext(NamedTuple):
    """What resolving needs from the running process (or a test's stand-in)."""

    topology: Topology
    here: int | None  # node of the calling thread
    here_reason: str
    devices: tuple[PciDevice, ...] = ()
    env: Mapping[str, str] = {}
    mems_allowed: frozenset[int] | None = None
    cgroup: str | None = None  # cgroup path whose cpuset.mems limits us (for messages)

    def local(self, gpu: Any = None) -> Target:
        """The local DRAM target (of `gpu`'s node when given): what a latency-first memory plan fills first."""
        return resolve(("local", gpu) if gpu is not None else "local", self)


# -- resolution --------------------------------------------------------------------------------------------
def resolve(spec: Any, ctx: LiveContext, *, bandwidths: Mapping[int, float] | None = None) -> Target:
    """Resolve a target spec; raises InputError / Unsupported with the nodes this root has."""
    if isinstance(spec, Target):
        target = spec
    elif isinstance(spec, Stripe):
        target = _stripe(spec, ctx, bandwidths)
    elif isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "local":
        target = _gpu_local(spec[1], ctx)
    elif isinstance(spec, bool):
        raise InputError(f"target {spec!r}: expected 'local', 'dram', 'cxl', a node list or a Stripe")
    elif isinstance(spec, int):
        target = Target(f"node {spec}", (spec,), "given")
    elif isinstance(spec, (list, tuple, set, frozenset)) and spec and all(isinstance(n, int) for n in spec):
        nodes = tuple(sorted(set(spec)))
        target = Target(f"nodes {format_cpulist(nodes)}", nodes, "given")
    elif isinstance(spec, str):
        target = _from_string(spec.strip(), ctx, bandwidths)
    else:
        raise InputError(f"target {spec!r}: expected 'local', ('local', gpu), 'dram', 'cxl', 'cxl:nearest', "
                         "a node list or a Stripe")
    check_nodes(target, ctx.topology)
    return target


def _from_string(text: str, ctx: LiveContext, bandwidths: Mapping[int, float] | None) -> Target:
    topo = ctx.topology
    low = text.lower()
    if low == "local":
        node = _local_node(ctx)
        return Target("local", (node,), ctx.here_reason if node == ctx.here else
                      f"{ctx.here_reason}; node {ctx.here} has no memory, nearest node with memory is {node}")
    if low == "dram":
        nodes = tuple(n.id for n in topo.nodes if n.kind == "dram" and n.memory_total_kib != 0)
        if not nodes:
            raise Unsupported(f"no DRAM node with memory in this root (nodes {_kinds(topo)})")
        return Target("dram", nodes, "every DRAM node (the kernel fills the nearest first)")
    if low == "cxl":
        pick = _caller_cxl(ctx)
        return Target("cxl", pick.nodes, pick.reason + " (the kernel fills the nearest first)")
    if low == "cxl:all":
        nodes = cxl_nodes(topo)
        far = _far(ctx, nodes)
        return Target("cxl:all", nodes, "every CXL node (the kernel fills the nearest first)" + far)
    if low == "cxl:nearest":
        from numatune.plan.launch import nearest_cxl_node

        cxl_nodes(topo)
        here = _local_node(ctx)
        node = nearest_cxl_node(topo, here)
        if node is None:
            raise Unsupported(f"no CXL node near node {here} (nodes {_kinds(topo)})")
        return Target("cxl:nearest", (node,), f"the CXL node nearest to node {here} (SLIT distance)")
    if low.startswith("stripe:"):
        body = text.split(":", 1)[1].strip()
        if body.lower() in ("cxl", "cxl:all"):
            return _stripe(Stripe(body.lower()), ctx, bandwidths)
        if "=" in body:
            weights = {}
            for part in body.split(","):
                node, _, w = part.partition("=")
                try:
                    if (number := maybe_int(node, "target") if len(node) <= 9 else None) is None:
                        raise ValueError(node)
                    weights[number] = float(w)
                except ValueError:
                    raise InputError(f"target {text!r}: expected stripe:NODE=SHARE,... (stripe:2=1,3=2)") from None
            return _stripe(Stripe(tuple(weights), weights), ctx, bandwidths)
        return _stripe(Stripe(_nodelist(body, text)), ctx, bandwidths)
    if low.startswith("node:") or low.startswith("nodes:"):
        low = low.split(":", 1)[1]
    nodes = tuple(sorted(_nodelist(low, text)))
    return Target(f"node{'s' if len(nodes) > 1 else ''} {format_cpulist(nodes)}", nodes, "given")


def _nodelist(text: str, spec: str) -> frozenset[int]:
    try:
        nodes = parse_cpulist(text)
    except ValueError:
        nodes = frozenset()
    if not nodes:
        raise InputError(f"target {spec!r}: expected 'local', 'dram', 'cxl', 'cxl:all', 'cxl:nearest', a node "
                         "list (2,3) or stripe:NODES")
    return nodes


def _kinds(topo: Topology) -> str:
    return ", ".join(f"{n.id}:{n.kind}" for n in topo.nodes) or "none"


def cxl_nodes(topo: Topology) -> tuple[int, ...]:
    nodes = tuple(n.id for n in topo.nodes if n.kind == "cxl" and n.memory_total_kib != 0)
    if not nodes:
        raise Unsupported(f"no CXL memory node in this root (nodes {_kinds(topo)})",
                          hint="CXL memory shows as a CPU-less node once its DAX device is onlined as system RAM "
                               "(daxctl reconfigure-device --mode=system-ram)")
    return nodes


def _local_node(ctx: LiveContext) -> int:
    """The caller's node, or the nearest node with memory when that node has none."""
    if ctx.here is None:
        raise InputError("cannot tell which node the calling thread runs on: pass a node or ('local', gpu)")
    here = ctx.topology.node(ctx.here)
    if here is None:
        raise InputError(f"node {ctx.here} ({ctx.here_reason}) is not in this root")
    if here.memory_total_kib != 0:
        return here.id
    with_mem = [n for n in ctx.topology.nodes if n.memory_total_kib != 0 and n.kind == "dram"]
    if not with_mem:
        raise Unsupported(f"node {here.id} has no memory and no DRAM node has any")
    return min(with_mem, key=lambda n: (here.distances.get(n.id, 1 << 30), n.id)).id


def _gpu_local(gpu: Any, ctx: LiveContext) -> Target:
    """The DRAM node of a GPU, found exactly as `launch` finds it (plan.launch.choose_gpu/choose_node)."""
    from numatune.model.launch import LaunchOptions, RankInfo
    from numatune.plan.launch import choose_gpu, choose_node

    if isinstance(gpu, (int, str)):
        index: Any = gpu
    else:  # torch.device("cuda", 1) -> 1
        if getattr(gpu, "type", None) not in ("cuda", "hip"):
            raise InputError(f"('local', {gpu!r}): not a GPU device")
        index = gpu.index if gpu.index is not None else 0
    if isinstance(index, str) and index.isascii() and index.isdigit() and len(index) <= 9:
        index = parse_int(index, "gpu")
    from numatune.errors import BindingError

    warnings: list[str] = []
    try:
        if isinstance(index, int):
            # a CUDA index counts the visible devices, as a rank's index does in launch
            rank = RankInfo(index, f"GPU index {index}", None, None)
            dev, choice, _ = choose_gpu(ctx.env, LaunchOptions(), rank, ctx.devices)
        else:
            rank = RankInfo(0, "--gpu", None, None)
            dev, choice, _ = choose_gpu(ctx.env, LaunchOptions(gpu=str(index)), rank, ctx.devices)
    except BindingError as exc:
        from numatune.model.order import gpu_order

        if not gpu_order(ctx.devices)[0]:  # launch's words would name its options (--gpu, --node)
            raise BindingError(f"target ('local', {gpu!r}): this machine has no GPU or accelerator",
                               hint='place on a node instead: "local" (this thread\'s node) or a node list '
                                    "such as (0,)") from None
        raise BindingError(f"target ('local', {gpu!r}): no such GPU ({exc.message})", hint=exc.hint) from None
    node, source = choose_node(ctx.topology, LaunchOptions(), dev, warnings)
    target_ctx = ctx._replace(here=node, here_reason=source)
    mem = _local_node(target_ctx)
    reason = f"GPU {choice.bdf} from {choice.source}; {source}" + (f"; {'; '.join(warnings)}" if warnings else "")
    if mem != node:
        reason += f"; node {node} has no memory, nearest node with memory is {mem}"
    return Target(f"local of GPU {choice.bdf}", (mem,), reason)


def _caller_node(ctx: LiveContext) -> int | None:
    """The caller's node with memory (as "local" resolves it), None when unknown."""
    try:
        return _local_node(ctx)
    except (InputError, Unsupported):
        return None


def _caller_cxl(ctx: LiveContext) -> CxlChoice:
    """The CXL nodes on the caller's socket (every one, far ones named, when it has none)."""
    cxl_nodes(ctx.topology)  # none at all: the usual error
    return default_cxl(ctx.topology, _caller_node(ctx))


def _far(ctx: LiveContext, nodes: Sequence[int]) -> str:
    node = _caller_node(ctx)
    far = far_of(ctx.topology, node, nodes)
    return f"; far-socket CXL node(s) {format_cpulist(far)} for node {node} (every access crosses the " \
           "inter-socket link)" if far else ""


def _stripe(spec: Stripe, ctx: LiveContext, bandwidths: Mapping[int, float] | None) -> Target:

    topo = ctx.topology
    if isinstance(spec.nodes, str):
        if spec.nodes.lower() not in ("cxl", "cxl:all"):
            return _stripe(spec._replace(nodes=_nodelist(spec.nodes, spec.nodes)), ctx, bandwidths)
        if spec.nodes.lower() == "cxl":
            pick = _caller_cxl(ctx)
            nodes, label, chosen = pick.nodes, "stripe cxl", pick.reason
        else:
            nodes = cxl_nodes(topo)
            label, chosen = "stripe cxl:all", "every CXL node" + _far(ctx, nodes)
    else:
        nodes = tuple(sorted(set(spec.nodes)))
        label = f"stripe {format_cpulist(nodes)}"
        chosen = "given" + _far(ctx, nodes)
    if not nodes:
        raise InputError("a stripe needs at least one node")
    if spec.weights is not None:
        weights = {n: float(spec.weights.get(n, 0)) for n in nodes}
        source = "given"
    elif bandwidths is not None and all(bandwidths.get(n) for n in nodes):
        weights = {n: float(bandwidths[n]) for n in nodes}
        source = "caller's bandwidth figures"
    else:  # HMAT's row of the caller's node: what each node's own nearest CPUs get says nothing for this caller
        weights, source = caller_weights(topo, _caller_node(ctx), nodes)
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise InputError(f"stripe weights {weights} must be >= 0 with a positive total")
    total = sum(weights.values())
    shares = tuple((n, weights[n] / total) for n in nodes if weights[n] > 0)
    if spec.chunk is not None and (spec.chunk <= 0 or spec.chunk % os.sysconf("SC_PAGE_SIZE")):
        raise InputError(f"stripe chunk {spec.chunk} must be a positive multiple of the page size")
    return Target(label, tuple(n for n, _ in shares), chosen, shares, source, spec.chunk)


def check_nodes(target: Target, topo: Topology) -> None:
    for nid in target.nodes:
        n: NumaNode | None = topo.node(nid)
        if n is None:
            raise InputError(f"target {target.spec}: node {nid} is not in this root (nodes {_kinds(topo)})")
        if n.memory_total_kib == 0:
            raise Unsupported(f"target {target.spec}: node {nid} has no memory (MemTotal 0)")


def check_allowed(target: Target, ctx: LiveContext) -> None:
    """Refuse nodes outside this task's cpuset.mems before the kernel answers EINVAL, naming the cgroup."""
    if ctx.mems_allowed is None:
        return
    outside = [n for n in target.nodes if n not in ctx.mems_allowed]
    if outside:
        where = f"cgroup {ctx.cgroup}" if ctx.cgroup else "this task's cpuset"
        raise Unsupported(
            f"target {target.spec}: node(s) {format_cpulist(outside)} are outside the memory nodes "
            f"{format_cpulist(ctx.mems_allowed)} that {where} allows (cpuset.mems); the kernel would answer EINVAL",
            hint="add the nodes to the cgroup's cpuset.mems (or ask the job scheduler for them), or choose another "
                 "target",
        )


#: No memory a CPU reads is faster than this (GB/s; HBM3e is ~5,000 a package): a probe figure above it, or not
#: a finite number, is no measurement (1e308 GB/s overflowed the shares' arithmetic).
MAX_GBPS = 1e6


def probe_bandwidths(doc: Mapping[str, Any] | Doc, initiator: int | None = None) -> dict[int, float]:
    """{memory node: MB/s} from a `numatune probe --json` document (numatune.probe/1): the median read
    bandwidth (else copy bandwidth) measured from `initiator` (default: the first one probed). Every field is
    read through model.document (DOC may be a Doc naming its file): a wrong type, or a figure that is not a
    finite number of at most MAX_GBPS, is InputError naming the field."""
    from numatune.render.envelope import SCHEMAS, is_document

    view = doc if isinstance(doc, Doc) else Doc(doc, "the probe document")
    if not is_document(view.value, "probe"):
        raise InputError(f"{view.file}: expected a {SCHEMAS['probe']} document (numatune probe --json)")
    inits = [i.int(lo=0, hi=MAX_ID) for i in view.list("initiators")]
    if initiator is None:
        if not inits:
            raise InputError(f"{view.file}: the probe document lists no initiator")
        initiator = inits[0]
    out: dict[int, float] = {}
    for cell in view.list("cells"):
        if cell.int("initiator", 0, MAX_ID) != initiator or cell.text("status") != "ok":
            continue
        target = cell.int("target", 0, MAX_ID)
        for key in ("read_gbps", "copy_gbps"):
            median = cell.mapping(key).number("median", 0.0, MAX_GBPS)
            if median and target is not None:  # a node id, as probe --json writes it
                out[target] = median * 1000.0  # GB/s (1e9) -> MB/s as HMAT counts
                break
    if not out:
        raise InputError(f"{view.file}: the probe document has no measured bandwidth from node {initiator}")
    return out


# -- stripe layout ------------------------------------------------------------------------------------------
def stripe_chunk(nbytes: int, page: int, chunk: int | None = None) -> int:
    """Chunk size: 2 MiB (a huge page) for large ranges, smaller for small ones (so every node gets a
    share), and large enough that the stripe needs at most MAX_STRIPE_RUNS mappings."""
    if chunk:
        return chunk
    c = max(-(-nbytes // MAX_STRIPE_RUNS), min(HUGE, nbytes // 256))
    step = HUGE if c >= HUGE else page
    return max(page, -(-c // step) * step)


def stripe_counts(n_chunks: int, shares: Sequence[tuple[int, float]]) -> dict[int, int]:
    """Chunks per node, proportional to the shares (largest remainder; sums to n_chunks)."""
    raw = [(node, n_chunks * s) for node, s in shares]
    counts = {node: int(x) for node, x in raw}
    left = n_chunks - sum(counts.values())
    for node, _frac in sorted(raw, key=lambda t: (-(t[1] - int(t[1])), t[0]))[:left]:
        counts[node] += 1
    return counts


def stripe_layout(nbytes: int, shares: Sequence[tuple[int, float]], chunk: int) -> list[tuple[int, int, int]]:
    """[(offset, length, node)] covering [0, nbytes): chunks dealt in smooth weighted round robin (so
    every part of the range is spread over the nodes), adjacent chunks of one node merged."""
    n = -(-nbytes // chunk)
    counts = stripe_counts(n, shares)
    order = [node for node, _ in shares]
    current = dict.fromkeys(order, 0)
    total = n
    runs: list[tuple[int, int, int]] = []
    for i in range(n):
        for node in order:
            current[node] += counts[node]
        pick = max(order, key=lambda nd: (current[nd], -order.index(nd)))
        current[pick] -= total
        off = i * chunk
        length = min(chunk, nbytes - off)
        if runs and runs[-1][2] == pick:
            o, ln, _ = runs[-1]
            runs[-1] = (o, ln + length, pick)
        else:
            runs.append((off, length, pick))
    return runs


# -- the live context ---------------------------------------------------------------------------------------
_TOPOLOGY: Topology | None = None


def live_context(*, devices: bool = False, topology: Topology | None = None,
                 environ: Mapping[str, str] | None = None) -> LiveContext:
    """Topology (read once per process, CXL scan included), the calling thread's node, the cpuset."""
    global _TOPOLOGY
    from numatune.system.host import Host

    host = Host.open("/")
    if topology is None:
        if _TOPOLOGY is None:
            from numatune.readers.topology import read_topology

            _TOPOLOGY = read_topology(host, devices=False, cxl=True, settings=False)
        topology = _TOPOLOGY
    here, why = _here(host, topology)
    devs: tuple[PciDevice, ...] = ()
    if devices:
        from numatune.live.bind import read_launch_devices

        devs = tuple(read_launch_devices(host, topology))
    from numatune.plan.launch import ENV_KEYS
    from numatune.readers.procs import parse_cgroup
    from numatune.system import memsys

    env = environ if environ is not None else os.environ
    try:
        mems: frozenset[int] | None = memsys.mems_allowed()
    except Exception:  # noqa: BLE001 - no NUMA syscalls: the kernel will say so on the real call
        mems = None
    cg = parse_cgroup(host.read_optional("/proc/self/cgroup") or "", "/proc/self/cgroup")
    return LiveContext(topology, here, why, devs, {k: env[k] for k in ENV_KEYS if k in env}, mems, cg)


def _here(host: Any, topo: Topology) -> tuple[int | None, str]:
    allowed = os.sched_getaffinity(0)
    nodes = {topo.node_of_cpu(c) for c in allowed} - {None}
    if len(nodes) == 1:
        node = nodes.pop()
        return node, f"the calling thread's CPUs {format_cpulist(allowed)} are on node {node}"
    stat = host.read_optional("/proc/thread-self/stat") or ""
    fields = stat.rpartition(")")[2].split()
    cpu = maybe_int(fields[36], "/proc/thread-self/stat") if len(fields) > 36 else None
    node = topo.node_of_cpu(cpu) if cpu is not None else None
    if node is None:
        return None, "the calling thread's node is unknown"
    return node, (f"the calling thread runs on CPU {cpu} (node {node}) now, but may run on nodes "
                  f"{format_cpulist(nodes)}: bind it (numatune launch) or name the node")


def layout_for(target: Target, nbytes: int, page: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """[(offset, length, nodes)] for a range of `nbytes` (page multiple): one run for a bind, chunks for a stripe."""
    if not target.striped:
        return [(0, nbytes, tuple(target.nodes))]
    chunk = stripe_chunk(nbytes, page, target.chunk)
    return [(o, ln, (n,)) for o, ln, n in stripe_layout(nbytes, target.shares, chunk)]


def reset_cache() -> None:
    """Forget the topology read by live_context (after memory hot-plug, or in tests)."""
    global _TOPOLOGY
    _TOPOLOGY = None


def nodes_in(iterable: Iterable[int]) -> str:
    return format_cpulist(sorted(set(iterable))) or "none"
