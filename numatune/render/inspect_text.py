"""Rich rendering of `inspect` for people: a summary, tables per subject, then findings."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from numatune.analysis.paths import LEGEND, PathMatrix
from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity
from numatune.model.topology import CpuKind, Topology

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def human_kib(kib: int | None) -> str:
    if kib is None:
        return "?"
    size = float(kib)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if unit != "KiB" else f"{int(size)} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_bytes(n: int | None) -> str:
    return "?" if n is None else human_kib(n // 1024)


def node_label(node: int | None, inferred: int | None = None) -> str:
    if node is not None:
        return str(node)
    if inferred is not None:
        return f"{inferred}?"
    return "-"


def render_inspect(topo: Topology, matrix: PathMatrix, findings: list[Finding]) -> Group:
    parts = [_summary(topo), _nodes_table(topo)]
    if len(topo.nodes) > 1 and any(n.distances for n in topo.nodes):
        parts.append(_distance_table(topo))
    if any(n.hmat for n in topo.nodes):
        parts.append(_hmat_table(topo))
    if topo.devices:
        parts.append(_devices_table(topo))
    if len(matrix.devices) > 1:
        parts.append(_matrix_table(matrix))
    if topo.cxl.present:
        parts.append(_cxl_tree(topo))
    parts.append(_settings(topo))
    parts.append(findings_table(findings))
    return Group(*parts)


def _summary(topo: Topology) -> Text:
    c = topo.cpu
    lines = Text()
    lines.append(f"{topo.source}", style="bold")
    lines.append(" (live)\n" if topo.live else " (saved tree)\n")
    kinds = topo.cpu_kinds
    if kinds.heterogeneous and len({k.name for k in kinds.kinds}) == len(kinds.kinds):
        lines.append("CPU: " + " + ".join(f"{len(k.cpus)}x {k.name or '?'}" for k in kinds.kinds))
    elif kinds.heterogeneous:
        lines.append(f"CPU: {c.model or 'unknown model'}: "
                     + " + ".join(f"{len(k.cpus)} {k.role}" for k in kinds.kinds) + " CPU(s)")
    else:
        lines.append(f"CPU: {c.model or 'unknown model'}")
    if c.architecture:
        lines.append(f" [{c.architecture}]")
    if kinds.heterogeneous:
        lines.append(f"\nCPU kinds, most performant first (grouped by {', '.join(kinds.grouped_by)}; "
                     + (f"ranked by {', then '.join(kinds.ranked_by)})" if kinds.ranked_by else "not ranked: "
                        "the kernel states no capacity or frequency for every kind)"))
        for k in kinds.kinds:
            lines.append(f"\n  {cpu_kind_line(k)}", style="yellow" if k.role == "efficiency" else None)
    lines.append(
        f"\n{len(c.sockets)} socket(s), {c.cores} core(s), {c.threads_per_core} thread(s)/core, "
        f"{len(c.online)} CPU(s) online"
    )
    if c.offline:
        lines.append(f", offline: {format_cpulist(c.offline)}", style="yellow")
    lines.append(f"\n{len(topo.nodes)} NUMA node(s)")
    if not topo.numa_kernel:
        lines.append(" (kernel without NUMA: one implicit node)")
    if topo.settings.release:
        lines.append(f"; kernel {topo.settings.release}")
    return lines


def cpu_kind_line(k: CpuKind) -> str:
    """One CPU kind on one line: rank, role, count, CPU list, part, capacity, max MHz."""
    facts = [f"{len(k.cpus)} CPU(s) {format_cpulist(k.cpus)}"]
    if k.part:
        facts.append(f"part {k.part}")
    if k.capacities:
        facts.append(f"capacity {_span(k.capacities)}")
    if k.max_mhz:
        facts.append(f"max {_span(k.max_mhz)} MHz")
    if k.base_mhz:
        facts.append(f"base {_span(k.base_mhz)} MHz")
    return f"#{k.rank} {k.role:<11} {k.name or '?'}: " + ", ".join(facts)


def _span(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _nodes_table(topo: Topology) -> Table:
    t = Table(title="NUMA nodes", title_justify="left")
    for col in ("node", "kind", "CPUs", "memory", "free", "tier", "huge pages", "weight"):
        t.add_column(col)
    for n in topo.nodes:
        huge = ", ".join(f"{h.total}x{human_kib(h.size_kib)}" for h in n.hugepages if h.total) or "-"
        t.add_row(
            str(n.id),
            n.kind,
            format_cpulist(n.cpus) or "-",
            human_kib(n.memory_total_kib),
            human_kib(n.memory_free_kib),
            "-" if n.tier is None else str(n.tier),
            huge,
            "-" if n.interleave_weight is None else str(n.interleave_weight),
        )
    return t


def _distance_table(topo: Topology) -> Table:
    ids = [n.id for n in topo.nodes]
    t = Table(title="Distances", title_justify="left", caption="SLIT; 10 = local", caption_justify="left")
    t.add_column("node")
    for i in ids:
        t.add_column(str(i), justify="right")
    for n in topo.nodes:
        t.add_row(str(n.id), *[str(n.distances.get(i, "-")) for i in ids])
    return t


def _hmat_table(topo: Topology) -> Table:
    t = Table(title="HMAT (best figures from the initiators)", title_justify="left")
    for col in ("target", "access", "initiators", "read ns", "write ns", "read MB/s", "write MB/s"):
        t.add_column(col)
    for n in topo.nodes:
        for e in n.hmat:
            t.add_row(
                str(n.id),
                f"access{e.access_class}",
                format_cpulist(e.initiators) or "-",
                *[str(v) if v is not None else "-" for v in (
                    e.read_latency_ns, e.write_latency_ns, e.read_bandwidth_mbps, e.write_bandwidth_mbps)],
            )
    return t


def _devices_table(topo: Topology) -> Table:
    t = Table(title="Devices (node? = inferred, - = unknown)", title_justify="left")
    for col in ("BDF", "kind", "node", "name", "interfaces", "link", "local CPUs"):
        t.add_column(col, no_wrap=col in ("BDF", "kind", "node"))
    for d in topo.devices:
        name = " ".join(x for x in (d.vendor_name, d.device_name) if x) or (
            f"{d.vendor_id or 0:04x}:{d.device_id or 0:04x}"
        )
        if d.nvidia and d.nvidia.model:
            name = d.nvidia.model
        link = ""
        if d.link.current_speed or d.link.current_width:
            link = f"{d.link.current_speed or '?'} x{d.link.current_width or '?'}"
        t.add_row(
            d.bdf,
            d.kind,
            node_label(d.numa_node, d.inferred_node),
            name,
            ", ".join(d.netdevs + d.rdma + d.nvme) or "-",
            link or "-",
            format_cpulist(d.local_cpus) or "-",
        )
    return t


def _matrix_table(m: PathMatrix) -> Table:
    t = Table(title="GPU/NIC paths", title_justify="left",
              caption="; ".join(f"{k}: {v}" for k, v in LEGEND.items() if k != "X"), caption_justify="left")
    t.add_column("")
    for label in m.labels:
        t.add_column(label)
    t.add_column("CPU affinity")
    t.add_column("NUMA affinity")
    for i, label in enumerate(m.labels):
        t.add_row(label, *m.cells[i], format_cpulist(m.local_cpus[i]) or "-", node_label(m.nodes[i]))
    return t


def _cxl_tree(topo: Topology) -> Tree:
    cxl = topo.cxl
    title = "CXL memory: memdev -> region -> DAX -> NUMA node" if cxl.memdevs or cxl.regions else (
        "DAX devices -> NUMA node")
    root = Tree(title)
    for mem in cxl.memdevs:
        root.add(
            f"{mem.name}: ram {human_bytes(mem.ram_size)}, pmem {human_bytes(mem.pmem_size)}, "
            f"serial {mem.serial or '?'}, fw {mem.firmware_version or '?'}, PCI {mem.pci_bdf or '?'} "
            f"(host node {node_label(mem.numa_node)})"
        )
    for region in cxl.regions:
        branch = root.add(
            f"{region.name}: {human_bytes(region.size)} {region.mode or '?'}, "
            f"{region.interleave_ways or '?'}-way x {region.interleave_granularity or '?'} B, "
            f"memdevs {', '.join(region.memdevs) or '?'}"
        )
        for name in region.dax:
            dax = next(d for d in cxl.dax if d.name == name)
            branch.add(f"{dax.name} ({dax.mode or '?'}) -> node {node_label(dax.target_node)}")
    for dax in cxl.dax:
        if not any(dax.name in r.dax for r in cxl.regions):
            root.add(f"{dax.name} ({dax.backing}, {dax.mode or '?'}) -> node {node_label(dax.target_node)}")
    for dec in cxl.decoders:
        if dec.size:
            root.add(
                f"{dec.name} [{dec.kind}] {human_bytes(dec.size)} mode {dec.mode or '-'} "
                f"ways {dec.interleave_ways or '-'} gran {dec.interleave_granularity or '-'} "
                f"targets {','.join(dec.targets) or '-'}"
            )
    return root


def _settings(topo: Topology) -> Text:
    s = topo.settings
    items = [
        ("numa_balancing", s.numa_balancing),
        ("transparent_hugepage", s.transparent_hugepage),
        ("zone_reclaim_mode", s.zone_reclaim_mode),
        ("demotion_enabled", s.demotion_enabled),
        ("weighted_interleave auto", s.weighted_interleave_auto),
        ("irqbalance running", s.irqbalance_running),
    ]
    shown = ", ".join(f"{k}={v}" for k, v in items if v is not None)
    return Text("Kernel: " + (shown or "no settings in this tree"))


def findings_table(findings: list[Finding]) -> Table | Text:
    if not findings:
        return Text("No findings.", style="green")
    t = Table(title="Findings", title_justify="left")
    for col in ("code", "severity", "finding", "fix"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(f.code, Text(f.severity.value, style=SEVERITY_STYLE[f.severity]), f.message, f.fix or "-")
    return t
