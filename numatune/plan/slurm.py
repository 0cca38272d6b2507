"""Slurm's view of a node: its abstract core numbering, the slurm.conf node line and gres.conf lines.

Pure: topology in, lines out. Slurm numbers cores and CPUs its own way (slurmd's xcpuinfo.c,
`xcpuinfo_hwloc_topo_get`), not as Linux does:

- sockets are hwloc Package objects with at least one core, in hwloc's logical order (by their
  lowest online CPU); with `SlurmdParameters=numa_node_as_socket` the NUMA nodes instead;
- cores are numbered socket after socket; inside a socket in hwloc's tree order, which sorts
  each level (die, L3 cache, NUMA group, cluster) by its lowest CPU before the cores in it;
- ThreadsPerCore = online CPUs // cores and CoresPerSocket = cores // sockets (integer division,
  with an error logged when it does not divide); abstract CPU id = core * ThreadsPerCore + thread;
- offline CPUs do not exist for hwloc: a core with no online thread is gone and numbering closes up;
- machine CPU ids >= the online CPU count are left out of the map (slurmd skips them).

gres.conf `Cores=` lists abstract core indices and must cover exactly one whole socket (or all
cores): Slurm's `_check_core_range_matches_sock` rejects anything else. tests/data/slurmd/ holds
real slurmd's maps for fixture trees; tests/plan/test_slurm.py checks this module against them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from numatune.cpulist import format_cpulist
from numatune.model._record import record
from numatune.model.topology import PciDevice, Topology
from numatune.numbers import MAX_DIGITS, maybe_int


@record
class SlurmCore:
    index: int  # Slurm's abstract core index on the node
    socket: int  # Slurm's socket index (0..Sockets-1)
    cpus: tuple[int, ...]  # Linux CPU ids of its online threads, in thread order


@record
class SlurmLayout:
    """How slurmd numbers this node, or why it cannot be derived (`problem`)."""

    unit: str  # "package" | "numa"
    sockets: tuple[tuple[SlurmCore, ...], ...]  # cores of each Slurm socket, in Slurm order
    threads_per_core: int  # Slurm's: online CPUs // cores
    cores_per_socket: int  # Slurm's: cores // sockets
    cpus: int  # online CPUs (slurmd's CPUs=)
    notes: tuple[str, ...] = ()  # where slurmd will log errors or misnumber
    problem: str = ""  # non-empty: sockets unknown, no Cores= can be written

    @property
    def cores(self) -> tuple[SlurmCore, ...]:
        return tuple(c for s in self.sockets for c in s)

    def socket_cores(self, socket: int) -> tuple[int, ...]:
        return tuple(c.index for c in self.sockets[socket])

    def abstract_cpu(self) -> dict[int, int]:
        """Linux CPU id -> Slurm abstract CPU id, as slurmd's block map (inverse) has it."""
        out: dict[int, int] = {}
        t = self.threads_per_core
        for core in self.cores:
            for i, cpu in enumerate(core.cpus[:t]):
                absid = core.index * t + i
                if cpu < self.cpus and absid < self.cpus:
                    out[cpu] = absid
        return out

    def socket_of_cpu(self, cpu: int) -> int | None:
        for s, cores in enumerate(self.sockets):
            if any(cpu in c.cpus for c in cores):
                return s
        return None


def slurmd_ecores(topo: Topology) -> frozenset[int]:
    """The CPUs slurmd >= 23.02 ignores on hybrid x86: the kinds (`Topology.cpu_kinds`) whose PMU device is
    cpu_atom, hwloc's CoreType=IntelAtom, when cpu_core ones exist too; empty on any other CPU."""
    kinds = topo.cpu_kinds.kinds
    if not {"cpu_core", "cpu_atom"} <= {k.part for k in kinds}:
        return frozenset()
    return frozenset(c for k in kinds if k.part == "cpu_atom" for c in k.cpus)


def slurm_layout(topo: Topology, groups: Iterable[frozenset[int]] = (), *, numa_as_socket: bool = False,
                 allow_ecores: bool = False) -> SlurmLayout:
    """Slurm's sockets and abstract cores. `groups`: extra hwloc levels inside a package that order its
    cores (L3 caches, clusters: `readers.cpus.read_cpu_groups`); dies and NUMA nodes come from `topo`.
    On hybrid x86, E-cores (`slurmd_ecores`) are left out as slurmd >= 23.02 does (`_remove_ecores`) unless
    `allow_ecores`."""
    online = [c for c in topo.cpus if c.online]
    ecore_note = ""
    atom = slurmd_ecores(topo)
    if not allow_ecores and atom:
        ecores = [c.id for c in online if c.id in atom]
        online = [c for c in online if c.id not in atom]
        ecore_note = (f"E-cores (Linux CPUs {format_cpulist(ecores)}) left out: slurmd >= 23.02 ignores them unless "
                      "SlurmdParameters=allow_ecores (then use --allow-ecores)")
    unit = "numa" if numa_as_socket else "package"
    if not online:
        return SlurmLayout(unit, (), 1, 0, 0, problem="no online CPU with topology in this root")
    online_ids = {c.id for c in online}
    if not numa_as_socket and any(c.package is None or c.package < 0 for c in online):
        return SlurmLayout(unit, (), 1, 0, len(online), problem=(
            "physical_package_id is unknown (-1 or missing): Slurm's sockets come from hwloc (on POWER from the "
            "device tree); run `slurmd -C` on the node for the socket layout"))
    node_sets = [frozenset(n.cpus) & online_ids for n in topo.nodes if set(n.cpus) & online_ids]
    if numa_as_socket and not node_sets:
        return SlurmLayout(unit, (), 1, 0, len(online), problem="no NUMA node with CPUs: numa_node_as_socket has "
                                                                 "nothing to use")
    cores: dict[tuple[int, ...], None] = {}
    for c in sorted(online, key=lambda c: c.id):
        cores.setdefault(tuple(s for s in (c.siblings or (c.id,)) if s in online_ids) or (c.id,))
    if numa_as_socket:
        socket_sets = node_sets
    else:
        by_pkg: dict[int, set[int]] = {}
        for c in online:
            by_pkg.setdefault(c.package, set()).add(c.id)  # type: ignore[arg-type]
        socket_sets = [frozenset(v) for v in by_pkg.values()]
    socket_sets = sorted(socket_sets, key=min)
    dies: dict[tuple[int | None, int], set[int]] = {}
    for c in online:
        if c.die is not None:
            dies.setdefault((c.package, c.die), set()).add(c.id)
    levels = [frozenset(v) for v in dies.values()] + node_sets + [frozenset(g) & online_ids for g in groups]
    out_sockets: list[tuple[SlurmCore, ...]] = []
    index = 0
    for sset in socket_sets:
        mine = [core for core in cores if core[0] in sset]
        inside = [g & sset for g in levels if g & sset and (g & sset) != sset]

        def key(core: tuple[int, ...], inside: list[frozenset[int]] = inside) -> tuple[int, ...]:
            enclosing = sorted((g for g in inside if core[0] in g), key=len, reverse=True)
            return (*(min(g) for g in enclosing), core[0])

        placed = []
        for core in sorted(mine, key=key):
            placed.append(SlurmCore(index, len(out_sockets), core))
            index += 1
        out_sockets.append(tuple(placed))
    total_cores = index
    threads = max(len(online) // total_cores, 1)
    cps = total_cores // len(out_sockets)
    notes = []
    if len(online) % total_cores:
        notes.append(f"{len(online)} online CPUs are not a multiple of {total_cores} cores (offline SMT siblings?): "
                     f"slurmd logs an error and counts ThreadsPerCore={threads}")
    if total_cores % len(out_sockets) or len({len(s) for s in out_sockets}) > 1:
        notes.append(f"sockets have unequal online cores ({', '.join(str(len(s)) for s in out_sockets)}): slurmd "
                     f"assumes CoresPerSocket={cps} and its socket boundaries will not match the hardware")
    beyond = sorted(c for c in online_ids if c >= len(online))
    if beyond:
        notes.append(f"CPU ids {format_cpulist(beyond)} are >= the {len(online)} online CPUs: slurmd leaves them "
                     "out of its abstract CPU map (binding to them misbehaves); renumber or online the missing CPUs")
    if ecore_note:
        notes.insert(0, ecore_note)
    return SlurmLayout(unit, tuple(out_sockets), threads, cps, len(online), tuple(notes))


# -- slurm.conf ---------------------------------------------------------------------------------
@record
class NodeLine:
    name: str
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int | None
    gpus: int
    cpu_spec: tuple[int, ...] = ()  # abstract CPU ids (CpuSpecList)
    mem_spec_mib: int | None = None

    def text(self) -> str:
        parts = [f"NodeName={self.name}"]
        if self.cpus:
            parts.append(f"CPUs={self.cpus}")
        if self.sockets:  # unknown layout: leave the counts to slurmd rather than guess them
            parts += [f"Sockets={self.sockets}", f"CoresPerSocket={self.cores_per_socket}",
                      f"ThreadsPerCore={self.threads_per_core}"]
        if self.real_memory_mib is not None:
            parts.append(f"RealMemory={self.real_memory_mib}")
        if self.gpus:
            parts.append(f"Gres=gpu:{self.gpus}")
        if self.cpu_spec:
            parts.append(f"CpuSpecList={format_cpulist(self.cpu_spec)}")
        if self.mem_spec_mib is not None:
            parts.append(f"MemSpecLimit={self.mem_spec_mib}")
        return " ".join(parts)


def gpu_memory_kib(topo: Topology) -> int:
    """The memory of the GPU-memory nodes (a Grace GPU's HBM, POWER9's): in MemTotal, but not host memory."""
    return sum(n.memory_total_kib or 0 for n in topo.nodes if n.kind == "gpu")


def real_memory_mib(topo: Topology, meminfo_total_kib: int | None) -> int | None:
    """RealMemory in MiB: the kernel's total RAM (/proc/meminfo MemTotal, else the nodes') less the GPU-memory
    nodes, which MemTotal counts on Grace and POWER9 in NUMA mode (slurmd detects more; it accepts less)."""
    if meminfo_total_kib is not None:
        return max(0, meminfo_total_kib - gpu_memory_kib(topo)) // 1024
    known = [n.memory_total_kib for n in topo.nodes if n.memory_total_kib is not None and n.kind != "gpu"]
    return sum(known) // 1024 if known else None


def housekeeping_cpus(topo: Topology, reserve_cores: int, isolated: Iterable[int] = ()) -> tuple[int, ...]:
    """The CPUs `--reserve-cores N` keeps for the system in a scheduler's config (slurm CpuSpecList, kubelet
    reservedSystemCPUs): N physical cores of every node with CPUs (the first; on hybrid CPUs the least
    performant), the ones `launch --reserve-cores` and `irq plan --reserve-cores` leave to interrupts and
    daemons; never every online CPU of a node (too_small_to_reserve: jobs and pods would get none there)."""
    from numatune.plan.irq import housekeeping_cores

    skip = set(too_small_to_reserve(topo, reserve_cores, isolated))
    per_node = housekeeping_cores(topo, reserve_cores, isolated)  # isolcpus are for work, not daemons
    return tuple(sorted(c for nid, cores in per_node.items() if nid not in skip for core in cores for c in core))


def too_small_to_reserve(topo: Topology, reserve_cores: int, isolated: Iterable[int] = ()) -> list[int]:
    """The nodes whose every online CPU `--reserve-cores N` would take (a 1-CPU VM): left unreserved."""
    from numatune.plan.irq import housekeeping_cores

    online = {c.id for c in topo.cpus if c.online}
    out = []
    for nid, cores in housekeeping_cores(topo, reserve_cores, isolated).items():
        node = topo.node(nid)
        usable = set(node.cpus) & online if node is not None else set()
        if usable and usable <= {c for core in cores for c in core}:
            out.append(nid)
    return out


# -- gres.conf ----------------------------------------------------------------------------------
@record
class GresLine:
    index: int  # Slurm's GPU index: PCI bus order
    bdf: str
    name: str  # "gpu" | "nic"
    file: str | None
    cores: tuple[int, ...]  # abstract core indices (empty: not known)
    links: tuple[int, ...] = ()
    note: str = ""
    stand_in: bool = False  # a non-GPU PCI device standing in for a GPU (testing Cores= binding without GPUs)

    def text(self, node_name: str) -> str:
        parts = [f"NodeName={node_name}", f"Name={self.name}"]
        if self.file:
            parts.append(f"File={self.file}")
        if self.cores:
            parts.append(f"Cores={format_cpulist(self.cores)}")
        if self.links:
            parts.append("Links=" + ",".join(str(n) for n in self.links))
        return " ".join(parts)


def gpus_in_bus_order(topo: Topology) -> list[PciDevice]:
    """Slurm's GPU device index: GPUs sorted by PCI bus id (gres.conf(5), Links)."""
    from numatune.model.order import gpu_order

    gpus, kind = gpu_order(topo.devices)
    return gpus if kind == "gpu" else []


def cpu_node_of(topo: Topology, node: int | None) -> int | None:
    """The node whose CPUs serve a device on `node`: itself, or the nearest node with CPUs by SLIT distance."""
    if node is None:
        return None
    n = topo.node(node)
    if n is None:
        return None
    if n.cpus:
        return node
    candidates = [m for m in topo.nodes if m.cpus and m.id in n.distances]
    if not candidates:
        return None
    return min(candidates, key=lambda m: (n.distances[m.id], m.id)).id


def device_cores(topo: Topology, layout: SlurmLayout, dev: PciDevice) -> tuple[tuple[int, ...], str]:
    """(Cores= for a device: every core of the Slurm socket(s) its node's CPUs are on, why not when empty)."""
    if layout.problem:
        return (), layout.problem
    if len(layout.sockets) == 1:
        return (), ("one socket: every core is as close as any other, and gres.conf(5) asks to leave Cores= out "
                    "then (faster scheduling)")
    node = cpu_node_of(topo, dev.node)
    if node is None:
        return (), "its NUMA node is unknown (numa_node -1 and nothing to infer it from)"
    cpus = [c for c in topo.node(node).cpus if layout.socket_of_cpu(c) is not None]  # type: ignore[union-attr]
    sockets = sorted({layout.socket_of_cpu(c) for c in cpus} - {None})  # type: ignore[arg-type]
    if not sockets:
        return (), f"node {node} has no online CPU"
    if len(sockets) == len(layout.sockets):
        return tuple(c.index for c in layout.cores), ""
    return tuple(i for s in sockets for i in layout.socket_cores(s)), ""


def gpu_device_file(dev: PciDevice, index: int, render_nodes: Mapping[str, str]) -> tuple[str | None, str]:
    """(File= for a GPU, a note when it is a guess): /dev/nvidiaN from the driver's minor, AMD's DRM render node."""
    if dev.nvidia is not None and dev.nvidia.minor is not None:
        return f"/dev/nvidia{dev.nvidia.minor}", ""
    if dev.bdf in render_nodes:
        return f"/dev/dri/{render_nodes[dev.bdf]}", ""
    if dev.vendor_id == 0x10DE:
        return f"/dev/nvidia{index}", ("no /proc/driver/nvidia/gpus/*/information in this root: minor number assumed "
                                        "to follow PCI bus order; check `nvidia-smi -q | grep Minor`")
    return None, "no device file known (no NVIDIA minor number, no DRM render node)"


def gres_lines(topo: Topology, layout: SlurmLayout, render_nodes: Mapping[str, str],
               links: Mapping[tuple[str, str], int] | None = None) -> list[GresLine]:
    """One gres.conf line per GPU, in Slurm's index order. `links`: direct GPU-GPU link counts (NVLink/XGMI)
    keyed by BDF pair; Links= is written only when some pair has one (Slurm's AutoDetect counts the same)."""
    gpus = gpus_in_bus_order(topo)
    with_links = bool(links) and any(links.get((a.bdf, b.bdf), 0) for a in gpus for b in gpus)  # type: ignore[union-attr]
    out = []
    for i, g in enumerate(gpus):
        file, file_note = gpu_device_file(g, i, render_nodes)
        cores, core_note = device_cores(topo, layout, g)
        row: tuple[int, ...] = ()
        if with_links:
            row = tuple(-1 if h.bdf == g.bdf else (links or {}).get((g.bdf, h.bdf), 0) for h in gpus)
        note = "; ".join(x for x in (file_note, f"no Cores=: {core_note}" if core_note else "") if x)
        out.append(GresLine(i, g.bdf, "gpu", file, cores, row, note))
    return out


def fabric_link_counts(topo: Topology) -> tuple[dict[tuple[str, str], int], str]:
    """(BDF pair -> direct GPU-GPU link count as Slurm's Links= counts it, a note) from the topology's GPU fabric
    (`topo.fabric.links`: XGMI from KFD io_links, NVLink from NVML; absent until the fabric reader is present).

    slurmd's NVML plugin counts, per GPU, the active NVLinks whose far end is another GPU's bus id: an NVSwitch
    system therefore gets 0 everywhere, and so do its lines here, to agree with AutoDetect."""
    fabric = getattr(topo, "fabric", None)
    out: dict[tuple[str, str], int] = {}
    switched = bool(getattr(fabric, "nvswitch", ()))  # one group of GPUs (topology.NvSwitchMember), never pairs
    for link in getattr(fabric, "links", ()) or ():
        n = link.count or 1
        out[(link.a, link.b)] = out[(link.b, link.a)] = n
    note = ("GPUs share an NVSwitch fabric: every pair is equally connected and Slurm's Links= counts only direct "
            "GPU-GPU NVLinks (AutoDetect gives 0), so none are written" if switched and not out else "")
    return out, note


def autodetect_note(topo: Topology, lines: Sequence[GresLine], one_socket: bool = False) -> str:
    """When Slurm's own GPU autodetection would give the same File= and Cores= (and which plugin)."""
    gpus = gpus_in_bus_order(topo)
    if not gpus:
        return ""
    if all(g.vendor_id == 0x10DE for g in gpus):
        plugin = "AutoDetect=nvml (or AutoDetect=nvidia, Slurm >= 24.11, without NVML)"
        source = "NVML's CPU affinity of each GPU"
    elif all(g.vendor_id == 0x1002 for g in gpus):
        plugin, source = "AutoDetect=rsmi", "ROCm SMI's CPU affinity of each GPU"
        if any(line.links for line in lines):  # gpu_rsmi.c: gres_links_create_empty, only PCI order
            return (f"{plugin} would give the same File= and Cores= ({source}) but records no XGMI links (Links= "
                    "all 0): use these lines without AutoDetect to keep the XGMI Links=")
    else:
        return "mixed GPU vendors: no single AutoDetect plugin covers them; keep these lines"
    if any((not line.cores and not one_socket) or not line.file for line in lines):
        return f"{plugin} would find the GPUs, but these lines are incomplete here (see notes)"
    return (f"{plugin} would give the same File= and Cores= ({source}, mapped to abstract cores); with AutoDetect "
            "these lines are a cross-check: slurmd drains the node when they disagree")


@record
class SlurmEmit:
    """What `numatune emit slurm` tells Slurm about one node (rendered by render.emit_out)."""

    source: str
    layout: SlurmLayout
    node: NodeLine
    gres: tuple[GresLine, ...]
    nic_gres: tuple[GresLine, ...]
    autodetect: str
    notes: tuple[str, ...]
    memory_mib: int | None  # the memory slurmd detects (MemTotal): a RealMemory above it drains the node


MAX_HOSTS = 1 << 20  # the hosts one hostlist may name: "node[0-99999999999]" is refused, not expanded
MAX_HOST_CHARS = 16 << 20  # ... and the characters of their names together (a long prefix times many hosts)

_Range = tuple[int, int, int]  # first, last, width (zero padding)


def _hostlist_parts(expr: str) -> list[list[str | tuple[_Range, ...]]]:
    """Each comma-separated expression of a hostlist as its literal pieces and bracket groups: one scan,
    no backtracking (a regular expression over `a[a[a[...` that never closes took 33 s on 320 KB).
    InputError for an unclosed, nested or stray bracket and for a range that is not numbers."""
    import re  # here: the report paths that import this module start without `re`

    from numatune.errors import InputError

    parts: list[list[str | tuple[_Range, ...]]] = []
    pieces: list[str | tuple[_Range, ...]] = []
    marks = [m.start() for m in re.finditer(r"[,\[\]]", expr)] + [len(expr)]
    k = lit = 0
    while True:
        i = marks[k]
        if expr[lit:i]:
            pieces.append(expr[lit:i])
        if i == len(expr) or expr[i] == ",":
            if pieces:
                parts.append(pieces)
            if i == len(expr):
                return parts
            pieces, k, lit = [], k + 1, i + 1
            continue
        close = k + 1
        while expr[i] == "[" and marks[close] < len(expr) and expr[marks[close]] == ",":
            close += 1
        if expr[i] == "]" or marks[close] == len(expr) or expr[marks[close]] == "[":
            raise InputError(f"bad hostlist {expr[:80]!r}: the bracket at character {i + 1} "
                             + ("closes nothing" if expr[i] == "]" else "is not closed" if marks[close] == len(expr)
                                else "holds another (nested brackets are not Slurm's)"))
        pieces.append(tuple(_host_range(r, expr) for r in expr[i + 1:marks[close]].split(",")))
        k, lit = close + 1, marks[close] + 1


def _host_range(r: str, expr: str) -> _Range:
    from numatune.errors import InputError

    lo, _, hi = r.partition("-")
    first = maybe_int(lo, "hostlist") if lo.isdigit() else None
    last = maybe_int(hi, "hostlist") if hi.isdigit() else first if not hi else None
    if first is None or last is None:
        raise InputError(f"bad hostlist range {r[:40]!r} in {expr[:80]!r}")
    return first, last, len(lo)


def _count(ranges: tuple[_Range, ...]) -> tuple[int, int]:
    """(how many numbers a bracket group names, the most characters one of them takes)."""
    return sum(max(0, last - first + 1) for first, last, _ in ranges), \
        max((max(w, len(str(last))) for first, last, w in ranges if last >= first), default=0)


def expand_hostlist(expr: str, limit: int = MAX_HOSTS) -> list[str]:
    """Slurm hostlist: "a[01-03,7],b" -> a01 a02 a03 a7 b (zero padding kept; several groups, as in
    "r[1-2]n[1-3]", name every combination; nested brackets are not Slurm's). InputError for one naming more
    than `limit` hosts, or more than MAX_HOST_CHARS characters of names, counted before any is made."""
    from itertools import product

    from numatune.errors import InputError

    parts = _hostlist_parts(expr)
    hosts = chars = 0
    for pieces in parts:
        n, width = 1, 0
        for piece in pieces:
            count, w = (1, len(piece)) if isinstance(piece, str) else _count(piece)
            n, width = min(n * count, limit + 1), width + w
        hosts, chars = hosts + n, chars + n * width
        if hosts > limit or chars > MAX_HOST_CHARS:
            raise InputError(f"hostlist {expr[:80]!r} names more than {limit} hosts"
                             + (", which no cluster has" if limit == MAX_HOSTS else "") if hosts > limit else
                             f"hostlist {expr[:80]!r} names more than {MAX_HOST_CHARS >> 20} MiB of host names")
    names: list[str] = []
    for pieces in parts:
        choices = [(piece,) if isinstance(piece, str) else
                   [f"{i:0{w}d}" for first, last, w in piece for i in range(first, last + 1)] for piece in pieces]
        names += ["".join(combo) for combo in product(*choices)]
    return names


def first_host(expr: str) -> str | None:
    """The first name a hostlist gives, without naming the others."""
    for pieces in _hostlist_parts(expr):
        name = []
        for piece in pieces:
            if not isinstance(piece, str):
                first = next(((f, w) for f, last, w in piece if last >= f), None)
                if first is None:
                    break
                piece = f"{first[0]:0{first[1]}d}"
            name.append(piece)
        else:
            return "".join(name)
    return None


def in_hostlist(name: str, expr: str) -> bool:
    """Whether a hostlist names `name`, without expanding it: each expression is matched piece by piece over
    the positions of `name` (work bounded by the expression's length times the name's)."""
    for pieces in _hostlist_parts(expr):
        if sum(len(p) if isinstance(p, str) else 1 for p in pieces) > len(name):
            continue  # each group takes at least one character
        at = {0}
        for piece in pieces:
            if isinstance(piece, str):
                at = {i + len(piece) for i in at if name.startswith(piece, i)}
            else:
                at = {j for i in at for j in _numbers_at(name, i, piece)}
            if not at:
                break
        if len(name) in at:
            return True
    return False


def _numbers_at(name: str, i: int, ranges: tuple[_Range, ...]) -> list[int]:
    """The ends of the numbers of `ranges` (as Slurm writes them: zero-padded to the width) that start at i."""
    run = i
    while run < len(name) and run - i < MAX_DIGITS and "0" <= name[run] <= "9":
        run += 1
    out = []
    for j in range(i + 1, run + 1):
        digits = name[i:j]
        value = maybe_int(digits, "hostlist") or 0
        if any(first <= value <= last and len(digits) == max(w, len(str(value))) for first, last, w in ranges):
            out.append(j)
    return out
