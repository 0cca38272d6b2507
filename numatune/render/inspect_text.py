"""`inspect` for people: a summary, tables per subject, then findings.

The tables are built once as plain specs (`_Table`) and drawn through rich (render.table: rich's look in
time linear in the cells), or, when the output is not a terminal and every part fits the width unwrapped,
by `plain_inspect`, which draws rich's heavy-head box itself and prints the same bytes (tests compare the
two on every fixture). Importing rich costs more than reading a 256-CPU tree; it is paid only where it
buys something: colour on a terminal, wrapped cells, the CXL tree.
"""

from __future__ import annotations

from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity
from numatune.model.gpumem import GpuMemoryLayout, gpu_memory_layout
from numatune.model.paths import LEGEND, PathMatrix, device_name, fabric_label
from numatune.model.topology import (
    HMAT_UNKNOWN,
    CpuKind,
    CxlDecoder,
    CxlLink,
    CxlMemdev,
    CxlPort,
    CxlTopology,
    Topology,
)

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


class _Table:
    """What a table shows, for either renderer: columns (header, justify, no_wrap), rows, title, caption."""

    __slots__ = ("title", "caption", "columns", "rows", "styles", "overflow")

    def __init__(self, title: str, columns: list[tuple[str, str, bool]], caption: str | None = None,
                 overflow: str = "ellipsis") -> None:
        self.title, self.caption, self.columns, self.overflow = title, caption, columns, overflow
        self.rows: list[list[str]] = []
        self.styles: dict[tuple[int, int], str] = {}  # (row, column) -> rich style

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))


def _cols(*names: str, justify: str = "left", no_wrap: tuple[str, ...] = ()) -> list[tuple[str, str, bool]]:
    return [(n, justify, n in no_wrap) for n in names]


def _parts(topo: Topology, matrix: PathMatrix, findings: list[Finding], blocks: bool = False) -> list:
    """The sections in order: text as [(chunk, style)], `_Table`s, and the CXL topology as ("tree", topo).
    blocks: the findings as text blocks (render.finding_text, as `check` prints them) instead of a table,
    for files and pipes, where a table row is one line as long as its message and fix together."""
    parts = [_summary(topo), _nodes_table(topo)]
    if len(topo.nodes) > 1 and any(n.distances for n in topo.nodes):
        empty = _empty_nodes(topo)
        parts.append(_distance_table(topo, set(empty)))
        if empty:
            parts.append([(f"Distances: empty nodes {format_cpulist(empty)} (no CPUs, no memory) left out; "
                           "--json has every distance", "")])
    if any(n.hmat for n in topo.nodes):
        parts.append(_hmat_table(topo))
    if topo.devices:
        parts.append(_devices_table(topo))
    layout = gpu_memory_layout(topo)
    if layout.mode in ("numa", "cdmm", "apu") or (layout.clustering and layout.gpus):
        parts.append([(gpu_memory_text(layout), "")])
    if len(matrix.devices) > 1 and matrix.cells:
        parts.append(_matrix_table(matrix))
    if matrix.cells_note:
        parts.append([(f"{matrix.cells_note}; the legend below numbers them all", "yellow")])
    if matrix.legend:
        parts.append([("\n".join(("Legend:", *(f"  {x}" for x in matrix.legend))), "")])
    if matrix.order_note:
        parts.append([(f"GPU order: {matrix.order_note}", "yellow")])
    if matrix.links or (matrix.nvswitch and matrix.cells):
        parts.append(_links_table(matrix))
    if matrix.nvswitch and not matrix.cells:  # no pairs beyond the matrix's bound: the group, once
        parts.append([(f"NVSwitch: {len(matrix.nvswitch)} GPUs on one NVSwitch fabric, every pair NV# of the fewer "
                       "NVLinks (--json: path_matrix.nvswitch)", "")])
    if any(g.fabric_state or g.domain for g in topo.fabric.nvml_gpus):
        parts.append(_nvlink_domain_table(topo))
    if matrix.nvlink == "not visible":
        parts.append([(f"NVLink: not visible ({matrix.nvlink_note}); NVIDIA GPU pairs show their PCIe path only",
                       "yellow")])
    if topo.cxl.present:
        parts.append(("tree", topo))
    parts.append([("Kernel: " + _settings(topo), "")])
    if blocks:
        from numatune.model.order import device_names
        from numatune.render.finding_text import findings_text

        parts.append([(findings_text(findings, device_names(topo.devices)), "")])
    else:
        parts.append(_findings_spec(findings) if findings else [("No findings.", "green")])
    return parts


def render_inspect(topo: Topology, matrix: PathMatrix, findings: list[Finding],  # noqa: ANN201 - rich Group
                   blocks: bool = False):
    from rich.console import Group

    return Group(*(_rich(part) for part in _parts(topo, matrix, findings, blocks)))


def print_inspect(topo: Topology, matrix: PathMatrix, findings: list[Finding], color: bool = True) -> None:
    """Print the report to stdout: drawn here when rich would print the same bytes, else by rich."""
    import os
    import sys

    width = plain_width(sys.stdout, os.environ)
    if width is None:  # a terminal: rich draws
        from numatune.render.console import make_console

        make_console(color).print(render_inspect(topo, matrix, findings))
        return
    from numatune.render.printable import echo

    echo(inspect_file_text(topo, matrix, findings, width))


def inspect_file_text(topo: Topology, matrix: PathMatrix, findings: list[Finding], width: int) -> str:
    """The report for a file or pipe, WIDTH columns at most: findings as blocks, no trailing blanks, no colour."""
    text = plain_inspect(topo, matrix, findings, width, blocks=True)
    if text is None:
        import io

        from rich.console import Console

        buf = io.StringIO()
        Console(file=buf, width=width, no_color=True, color_system=None, highlight=False, emoji=False, markup=False,
                soft_wrap=False).print(render_inspect(topo, matrix, findings, blocks=True))
        text = buf.getvalue()
    from numatune.render.finding_text import WIDTH, wrap_words

    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        line = line.rstrip()
        # a note: wrapped on blanks, never cut (the first line, the root's path, stays whole)
        if i and len(line) > WIDTH and not line.startswith((" ", *_DRAWN)):
            out += wrap_words(line, WIDTH, "", "  ")
        else:
            out.append(line)
    return "\n".join(out)


_DRAWN = tuple("┏┃┡│└├┓┗━─╇┩┳")  # the first character of a table's or the CXL tree's lines


def plain_width(stream, environ) -> int | None:  # noqa: ANN001 - a text file, os.environ
    """The width rich lays out for on STREAM (numatune.render.console.output_width), or None when rich
    must draw (a terminal: colour)."""
    from numatune.render.console import output_width

    return output_width(stream, environ)


def plain_inspect(topo: Topology, matrix: PathMatrix, findings: list[Finding], width: int,
                  blocks: bool = False) -> str | None:
    """What rich prints for `render_inspect` on a WIDTH-column non-terminal, or None when only rich can
    lay it out (a cell, title or caption wider than the table, non-ASCII text, the CXL tree). Text lines
    are wrapped as rich wraps them."""
    out: list[str] = []
    for part in _parts(topo, matrix, findings, blocks):
        if isinstance(part, tuple):
            return None
        if isinstance(part, list):
            text = "".join(chunk for chunk, _style in part)
            if not text.isascii() or "\t" in text:
                return None
            for line in text.split("\n"):
                out += _wrap(line, width)
            continue
        drawn = _plain_table(part, width)
        if drawn is None:
            return None
        out += drawn
    return "\n".join(out) + "\n"


def _wrap(line: str, width: int) -> list[str]:
    """An ASCII line as rich wraps it (rich._wrap.divide_line, then Text.wrap with overflow "fold"):
    greedy on words with their trailing blanks, a word longer than the width folded, trailing blanks
    kept up to the width."""
    breaks, offset = [], 0
    for start, word in _words(line):
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            pieces = [word[i:i + width] for i in range(0, len(word), width)]
            for i, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if i == len(pieces) - 1:
                    offset = len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    out = []
    for a, b in zip([0, *breaks], [*breaks, len(line)], strict=True):
        piece = line[a:b]
        if len(piece) > width:
            piece = piece[:len(piece) - min(len(piece) - len(piece.rstrip()), len(piece) - width)][:width]
        out.append(piece)
    return out


def _words(line: str) -> list[tuple[int, str]]:
    r"""(start, text) of each match of r"\s*\S+\s*" in LINE: a word with its blanks (str methods, not `re`)."""
    words = line.split()
    starts, pos = [], 0
    for w in words:
        pos = line.find(w, pos)
        starts.append(pos)
        pos += len(w)
    if starts:
        starts[0] = 0  # the first match takes the line's leading blanks too
    ends = [*starts[1:], len(line)]
    return [(start, line[start:end]) for start, end in zip(starts, ends[:len(starts)], strict=True)]


def _plain_table(t: _Table, width: int) -> list[str] | None:
    cells = [[h for h, _j, _w in t.columns], *t.rows]
    if not all(c.isascii() and "\n" not in c for row in cells for c in row):
        return None
    widths = [max(len(row[i]) for row in cells) for i in range(len(t.columns))]
    total = sum(widths) + 3 * len(widths) + 1
    if total > width or len(t.title) > total or (t.caption is not None and len(t.caption) > total):
        return None

    def line(left: str, fill: str, mid: str, right: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def row(values: list[str], bar: str) -> str:
        padded = (v.rjust(w) if j == "right" else v.ljust(w) for v, w, (_h, j, _n) in zip(values, widths, t.columns,
                                                                                         strict=True))
        return bar + " " + f" {bar} ".join(padded) + " " + bar

    lines = [t.title.ljust(total), line("┏", "━", "┳", "┓"), row(cells[0], "┃"), line("┡", "━", "╇", "┩")]
    lines += [row(r, "│") for r in t.rows]
    lines.append(line("└", "─", "┴", "┘"))
    if t.caption is not None:
        lines.append(t.caption.ljust(total))
    return lines


def _rich(part):  # noqa: ANN001, ANN202 - a section -> a rich renderable
    from rich.text import Text

    if isinstance(part, tuple):
        return _cxl_tree(part[1])
    if isinstance(part, list):
        text = Text()
        for chunk, style in part:
            text.append(chunk, style=style or None)
        return text
    return _rich_table(part)


def _rich_table(spec: _Table):  # noqa: ANN202 - render.table.Table, rich's look in linear time
    from rich.text import Text

    from numatune.render.table import Table

    t = Table(title=spec.title, title_justify="left", caption=spec.caption,
              caption_justify="left" if spec.caption is not None else "center")
    for header, justify, no_wrap in spec.columns:
        t.add_column(header, justify=justify, no_wrap=no_wrap, overflow=spec.overflow)
    for r, cells in enumerate(spec.rows):
        t.add_row(*(Text(c, style=spec.styles[(r, i)]) if (r, i) in spec.styles else c for i, c in enumerate(cells)))
    return t


def _summary(topo: Topology) -> list[tuple[str, str]]:
    c = topo.cpu
    lines = [(f"{topo.source}", "bold"), (" (live)\n" if topo.live else " (saved tree)\n", "")]
    kinds = topo.cpu_kinds
    if kinds.heterogeneous and len({k.name for k in kinds.kinds}) == len(kinds.kinds):
        tail = "CPU: " + " + ".join(f"{len(k.cpus)}x {k.name or '?'}" for k in kinds.kinds)
    elif kinds.heterogeneous:
        tail = (f"CPU: {c.model or 'unknown model'}: "
                + " + ".join(f"{len(k.cpus)} {k.role}" for k in kinds.kinds) + " CPU(s)")
    else:
        tail = f"CPU: {c.model or 'unknown model'}"
    if c.architecture:
        tail += f" [{c.architecture}]"
    if kinds.heterogeneous:
        tail += (f"\nCPU kinds, most performant first (grouped by {', '.join(kinds.grouped_by)}; "
                 + (f"ranked by {', then '.join(kinds.ranked_by)})" if kinds.ranked_by else "not ranked: "
                    "the kernel states no capacity or frequency for every kind)"))
        lines.append((tail, ""))
        for k in kinds.kinds:
            lines.append((f"\n  {cpu_kind_line(k)}", "yellow" if k.role == "efficiency" else ""))
        tail = ""
    tail += (f"\n{len(c.sockets)} socket(s), {c.cores} core(s), {c.threads_per_core} thread(s)/core, "
             f"{len(c.online)} CPU(s) online")
    lines.append((tail, ""))
    if c.offline:
        lines.append((f", offline: {format_cpulist(c.offline)}", "yellow"))
    tail = f"\n{len(topo.nodes)} NUMA node(s)"
    if not topo.numa_kernel:
        tail += " (kernel without NUMA: one implicit node)"
    if topo.settings.release:
        tail += f"; kernel {topo.settings.release}"
    lines.append((tail, ""))
    return lines


def cpu_kind_line(k: CpuKind) -> str:
    """One CPU kind on one line: rank, role, count, CPU list, part, capacity, max and base MHz."""
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


def _nodes_table(topo: Topology) -> _Table:
    t = _Table("NUMA nodes", _cols("node", "kind", "CPUs", "memory", "free", "tier", "huge pages", "weight"))
    labels = gpu_labels(topo)
    for n in topo.nodes:
        huge = ", ".join(f"{h.total}x{human_kib(h.size_kib)}" for h in n.hugepages if h.total) or "-"
        kind = n.kind
        if n.gpu is not None:
            kind = f"{kind} {labels.get(n.gpu, n.gpu)}{' MIG' if n.mig_placeholder else ''}"
        t.add_row(
            str(n.id),
            kind,
            format_cpulist(n.cpus) or "-",
            human_kib(n.memory_total_kib),
            human_kib(n.memory_free_kib),
            "-" if n.tier is None else str(n.tier),
            huge,
            "-" if n.interleave_weight is None else str(n.interleave_weight),
        )
    return t


def gpu_labels(topo: Topology) -> dict[str, str]:
    from numatune.model.order import labels

    return labels(topo.devices) if any(n.gpu for n in topo.nodes) else {}


MODE_TITLE = {"numa": "NUMA mode", "cdmm": "CDMM mode", "apu": "APU", "discrete": "discrete GPUs",
              "none": "no GPU"}


def gpu_memory_text(layout: GpuMemoryLayout) -> str:
    """The machine's GPU-memory mode, its sub-NUMA clustering, and each GPU's CPU node and memory node."""
    lines = [f"GPU memory: {MODE_TITLE.get(layout.mode, layout.mode)}: {layout.mode_evidence}"]
    if layout.clustering:
        per = "; ".join(f"socket {p}: nodes {format_cpulist(ns)}" for p, ns in layout.nodes_per_socket.items())
        lines.append(f"Sub-NUMA clustering: {layout.clustering} ({per})")
    for g in layout.gpus:
        cpu = "unknown" if g.cpu_node is None else f"node {g.cpu_node} ({g.cpu_node_from})"
        if g.memory_node is None:
            mem = "its own (not a NUMA node)"
        elif g.memory_node_from == "apu":
            mem = f"node {g.memory_node} (shared with the CPUs: an APU)"
        else:
            mem = f"node {g.memory_node} ({g.memory_node_from})"
        line = f"  {g.label} {g.bdf}: CPUs on {cpu}; GPU memory {mem}"
        if g.placeholder_nodes:
            line += f"; MIG placeholders {format_cpulist(g.placeholder_nodes)}"
        reported = [f"sysfs {'-1' if g.sysfs_node is None else g.sysfs_node}"]
        if g.nvml_node is not None:
            reported.append(f"NVML {g.nvml_node}")
        line += f"; reported node: {', '.join(reported)}"
        if layout.clustering and len(g.same_socket) > 1:
            line += f"; same-socket nodes {','.join(map(str, g.same_socket))}"
        lines.append(line)
        lines += [f"    {note}" for note in g.notes]
    return "\n".join(lines)


def _empty_nodes(topo: Topology) -> list[int]:
    """Nodes without CPUs or memory (a Grace GPU's MIG placeholders: 28 of a GB200 tray's 34); none when all are."""
    empty = [n.id for n in topo.nodes if not n.cpus and n.memory_total_kib == 0]
    return empty if len(empty) < len(topo.nodes) else []


def _distance_table(topo: Topology, empty: set[int]) -> _Table:
    """The SLIT matrix over the nodes that hold CPUs or memory: the `empty` ones are named under it."""
    shown = [n for n in topo.nodes if n.id not in empty]
    ids = [n.id for n in shown]
    t = _Table("Distances", _cols("node") + _cols(*(str(i) for i in ids), justify="right"), "SLIT; 10 = local")
    for n in shown:
        t.add_row(str(n.id), *[str(n.distances.get(i, "-")) for i in ids])
    return t


def _hmat_table(topo: Topology) -> _Table:
    zero = any(e.unknown_reason for n in topo.nodes for e in n.hmat)
    t = _Table("HMAT (best figures from the initiators)",
               _cols("target", "access", "initiators", "read ns", "write ns", "read MB/s", "write MB/s"),
               caption=HMAT_UNKNOWN if zero else None)
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


def _devices_table(topo: Topology) -> _Table:
    t = _Table("Devices (node? = inferred, - = unknown)",
               _cols("BDF", "kind", "node", "name", "interfaces", "link", "local CPUs",
                     no_wrap=("BDF", "kind", "node")))
    for d in topo.devices:
        name = device_name(d)
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


def _matrix_table(m: PathMatrix) -> _Table:
    t = _Table("GPU/NIC paths", _cols("", *m.labels, "CPU affinity", "NUMA affinity"),
               "; ".join(f"{k}: {v}" for k, v in LEGEND.items() if k != "X"))
    for i, label in enumerate(m.labels):
        t.add_row(label, *m.cells[i], format_cpulist(m.local_cpus[i]) or "-", node_label(m.nodes[i]))
    return t


def _links_table(m: PathMatrix) -> _Table:
    """GPU-to-GPU fabric links with what the matrix cell cannot hold: link count, KFD weight, bandwidth."""
    label = {bdf.lower(): name for bdf, name in zip(m.devices, m.labels, strict=True)}
    t = _Table("GPU fabric links", _cols("pair", "link", "links", "weight", "bandwidth MB/s (one / all)", "source"))
    for x in m.pairs():
        bw = "-"
        if x.min_bandwidth_mbps or x.max_bandwidth_mbps:
            bw = f"{x.min_bandwidth_mbps or '?'} / {x.max_bandwidth_mbps or '?'}"
        t.add_row(
            f"{label.get(x.a, x.a)}-{label.get(x.b, x.b)}",
            fabric_label(x),
            "?" if x.count is None else str(x.count),
            "-" if x.weight is None else str(x.weight),
            bw,
            x.source,
        )
    return t


def _nvlink_domain_table(topo: Topology) -> _Table:
    """Each NVIDIA GPU's NVLink domain (cluster UUID.clique) and fabric health (NVML fabric info)."""
    from numatune.model.nvfabric import decode_health
    from numatune.model.order import gpu_names

    names = gpu_names(topo.devices)
    t = _Table("NVLink domain", _cols("GPU", "domain (cluster UUID.clique)", "fabric", "health"),
               "health: NVML's health mask and summary decoded (model.nvfabric); --json: gpu_fabric.nvml_gpus")
    for g in topo.fabric.nvml_gpus:
        state = g.fabric_state or "?"
        if g.fabric_status not in (None, "success"):
            state += f", {g.fabric_status}"
        if g.health:
            health = "; ".join(g.health)
        elif g.health_mask is not None or g.health_summary is not None:
            fields = decode_health(g.health_mask)
            known = g.health_summary not in (None, "not supported") or any(
                v not in ("not supported",) for v in fields.values())
            health = (g.health_summary if g.health_summary not in (None, "not supported") else "good") \
                if known else "not supported"
        else:
            health = "unknown"
        t.add_row(names.get(g.bdf.lower(), f"GPU {g.bdf}"), g.domain or "none", state, health)
        if g.health:
            t.styles[(len(t.rows) - 1, 3)] = "yellow"
    return t


def _unplaced(dax, topo: Topology) -> str:  # noqa: ANN001 - a CxlDax
    """Why a DAX device's memory is no NUMA node of this tree, as the picture's "DAX memory that is not a NUMA
    node here" says it ("" when it is one)."""
    if dax.target_node is not None and topo.node(dax.target_node) is not None:
        return ""
    if dax.target_node is None or dax.mode != "kmem":
        return " (not a NUMA node here: device DAX, not onlined as system RAM)"
    if topo.node(dax.target_node) is None:
        return f" (not a NUMA node here: node {dax.target_node} is offline)"
    return ""


def _cxl_tree(topo: Topology):  # noqa: ANN202 - rich Tree
    from rich.tree import Tree

    cxl = topo.cxl
    title = "CXL memory: host bridge -> switch -> memdev, region -> DAX -> NUMA node" if (
        cxl.memdevs or cxl.regions) else "DAX devices -> NUMA node"
    root = Tree(title)
    placed: set[str] = set()
    for port in cxl.ports:
        if port.role == "root" or (port.parent is None and port.role != "endpoint"):
            _cxl_port_branch(root, cxl, port, placed)
    for mem in cxl.memdevs:
        if mem.name not in placed:
            root.add(_memdev_line(mem))
    for region in cxl.regions:
        branch = root.add(
            f"{region.name}: {human_bytes(region.size)} {region.mode or '?'}, "
            f"{region.interleave_ways or '?'}-way x {region.interleave_granularity or '?'} B, "
            f"memdevs {', '.join(region.memdevs) or '?'}"
        )
        for m in region.members:
            behind = f"switch {m.switch} " if m.switch else ""
            branch.add(f"position {m.position}: {m.memdev or '?'} ({m.decoder}) behind {behind}"
                       f"port {m.dport or '?'} on {m.host_bridge or '?'}")
        for name in region.dax:
            dax = next(d for d in cxl.dax if d.name == name)
            branch.add(f"{dax.name} ({dax.mode or '?'}) -> node {node_label(dax.target_node)}{_unplaced(dax, topo)}")
    for dax in cxl.dax:
        if not any(dax.name in r.dax for r in cxl.regions):
            root.add(f"{dax.name} ({dax.backing}, {dax.mode or '?'}) -> node {node_label(dax.target_node)}"
                     f"{_unplaced(dax, topo)}")
    for dec in cxl.decoders:
        if dec.size and dec.port is None:
            root.add(_decoder_line(dec))
    if cxl.memdevs:
        root.add(_pmu_line(cxl))
    return root


def _pmu_line(cxl: CxlTopology) -> str:
    if not cxl.pmus:
        return ("CXL PMUs: none (no /sys/bus/event_source/devices/cxl_pmu_*): per-device CXL traffic cannot be "
                "measured (probe, audit --watch)")
    parts = []
    for p in cxl.pmus:
        events = ", ".join(f"{what} {e.name}" for what, e in (("reads", p.read), ("writes", p.write)) if e)
        parts.append(f"{p.name} ({p.memdev or '?'}: {events or 'no read/write event'})")
    return "CXL PMUs: " + "; ".join(parts)


def link_text(link: CxlLink | None) -> str:
    """"x16 32.0 GT/s (PCIe 5 / CXL 2.0) 63.0 GB/s per direction", with the maximum when it trained lower."""
    if link is None:
        return "link not readable"
    width = f"x{link.width}" if link.width else "x?"
    text = f"{width} {link.gts:g} GT/s" if link.gts else f"{width} ?GT/s"
    if link.generation:
        text += f" ({link.generation})"
    if link.gbps is not None:
        text += f" {link.gbps:g} GB/s per direction"
    if (link.max_width, link.max_gts) != (link.width, link.gts) and (link.max_width or link.max_gts):
        text += f" [max x{link.max_width or '?'} {link.max_gts or '?'} GT/s]"
    return text


def _memdev_line(mem: CxlMemdev) -> str:
    link = f", link {link_text(mem.link)}" if mem.pci_bdf else ""
    return (
        f"{mem.name}{f' ({mem.port})' if mem.port else ''}: ram {human_bytes(mem.ram_size)}, "
        f"pmem {human_bytes(mem.pmem_size)}, serial {mem.serial or '?'}, fw {mem.firmware_version or '?'}, "
        f"PCI {mem.pci_bdf or '?'} (host node {node_label(mem.numa_node)}){link}"
    )


def _decoder_line(dec: CxlDecoder) -> str:
    return (
        f"{dec.name} [{dec.kind}] {human_bytes(dec.size)} mode {dec.mode or '-'} "
        f"ways {dec.interleave_ways or '-'} gran {dec.interleave_granularity or '-'} "
        f"targets {','.join(dec.targets) or '-'}{f' region {dec.region}' if dec.region else ''}"
    )


def _cxl_port_branch(parent, cxl: CxlTopology, port: CxlPort, placed: set[str]) -> None:  # noqa: ANN001 - rich Tree
    if port.name in placed:
        return
    placed.add(port.name)
    committed = f", {port.decoders_committed} decoder(s) committed" if port.decoders_committed else ""
    if port.role == "root":
        label = f"{port.name}: CXL root {port.uport or '?'}{committed}"
    elif port.role == "host-bridge":
        label = f"{port.name}: host bridge {port.uport or '?'}{committed}"
    elif port.role == "switch":
        label = f"{port.name}: switch, upstream port {port.uport or '?'}, link {link_text(port.link)}{committed}"
    elif port.role == "endpoint":
        mem = cxl.memdev(port.uport)
        if mem is not None:
            placed.add(mem.name)
        label = _memdev_line(mem) if mem else f"{port.name}: endpoint {port.uport or '?'}"
    else:
        label = f"{port.name}: {port.kind} {port.uport or '?'}{committed}"
    branch = parent.add(label)
    for dec in cxl.decoders:
        if dec.port == port.name and dec.size:
            branch.add(_decoder_line(dec))
    children = [p for p in cxl.ports if p.parent == port.name]
    if port.role in ("root",):  # the host bridges are its dports: no extra level
        for child in children:
            _cxl_port_branch(branch, cxl, child, placed)
        return
    kind = "root port" if port.role == "host-bridge" else "downstream port"
    for dport in port.dport_targets:
        below = [c for c in children if c.parent_dport == dport.target]
        sub = branch.add(f"{kind} {dport.target}")
        for child in below:
            _cxl_port_branch(sub, cxl, child, placed)
    for child in children:
        _cxl_port_branch(branch, cxl, child, placed)


def _settings(topo: Topology) -> str:
    s = topo.settings
    items = [
        ("numa_balancing", s.numa_balancing),
        ("transparent_hugepage", s.transparent_hugepage),
        ("zone_reclaim_mode", s.zone_reclaim_mode),
        ("demotion_enabled", s.demotion_enabled),
        ("weighted_interleave auto", s.weighted_interleave_auto),
        ("irqbalance running", s.irqbalance_running),
    ]
    return ", ".join(f"{k}={v}" for k, v in items if v is not None) or "no settings in this tree"


def _findings_spec(findings: list[Finding]) -> _Table:
    t = _Table("Findings", _cols("code", "severity", "finding", "fix"), overflow="fold")
    for r, f in enumerate(findings):
        t.add_row(f.code, f.severity.value, f.message, f.fix or "-")
        t.styles[(r, 1)] = SEVERITY_STYLE[f.severity]
    return t


def findings_table(findings: list[Finding], terminal: bool = True):  # noqa: ANN201 - rich Table or Text
    """The findings as a table on a terminal; off it (terminal=False) as check's blocks (render.finding_text)."""
    if not terminal:
        from rich.text import Text

        from numatune.render.finding_text import findings_text

        return Text(findings_text(findings))
    if not findings:
        from rich.text import Text

        return Text("No findings.", style="green")
    return _rich_table(_findings_spec(findings))
