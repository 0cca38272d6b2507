"""`inspect --format svg`: a picture of the node drawn from the numatune.inspect/1 document.

Not lstopo's caches and PUs but what decides a training job's speed: sockets and NUMA nodes with
their CPU lists (collapsed, never one box per CPU), memory kind and size; CPU-less memory (CXL,
PMem, HBM, ...) drawn apart, linked to its initiators with the SLIT distance and HMAT figures;
GPUs, NICs, NVMe and CXL devices under the node and host bridge they hang off, each GPU's nearest
NIC with its path kind; the GPU/NIC path matrix; every node or device a finding names outlined in
the finding's severity colour with its code.

Pure and deterministic: the same document gives the same bytes (no clock, no randomness, no
font metrics: text is monospace, measured by its length). Drawn from the JSON document rather than
the model so `fleet --format html` can draw nodes it only knows by their reports; the one fact the
document lacks, which socket each node sits in, comes in as `sockets` when the model is at hand.
"""

from __future__ import annotations

import re

from numatune.cpulist import format_cpulist
from numatune.model.document import MAX_ID, MAX_SIZE, Doc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FONT = "DejaVu Sans Mono,Menlo,Consolas,monospace"
CH = 7.3  # width of one monospace character at 12 px (DejaVu Sans Mono: 0.602 em), rounded up
LINE = 15  # line height at 12 px
PAD = 10
NODE_W = 272  # a node column: 34 characters of 12 px text
DEV_W = NODE_W - 2 * PAD
GAP = 14
MAX_COLS = 4  # node columns per row of sockets (wider trees wrap)
COLS_CHARS = int((NODE_W - 2 * PAD) / CH)

SEVERITY = {"error": "#c62828", "warning": "#e07b00", "info": "#1f6fb5"}
SEVERITY_RANK = {"error": 2, "warning": 1, "info": 0}
KIND_LABEL = {"dram": "DRAM", "cxl": "CXL memory", "hbm": "HBM", "gpu": "GPU memory", "pmem": "PMem",
              "memoryless": "no memory", "unknown": "memory"}
KIND_FILL = {"dram": "#f4f7fb", "cxl": "#f5eefa", "hbm": "#eef8f1", "gpu": "#eef8f1", "pmem": "#fdf4e8",
             "memoryless": "#f4f4f4", "unknown": "#f4f4f4"}
DEVICE_STYLE = {  # kind -> (label, fill, stroke)
    "gpu": ("GPU", "#eaf6ec", "#2e7d32"),
    "nic": ("NIC", "#e8f1fb", "#1f5fa5"),
    "nvme": ("NVMe", "#fbf6e6", "#8a6d1c"),
    "cxl": ("CXL", "#f3e9f8", "#7b3fa0"),
    "accelerator": ("accel", "#e6f6f6", "#1f7a7a"),
    "display": ("display", "#f4f4f4", "#777777"),
}
OTHER_DEVICE = ("device", "#f4f4f4", "#777777")
PCIE_KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
PATH_FILL = {"X": "#e0e0e0", "PIX": "#cfe8d3", "PXB": "#dcefd6", "PHB": "#f3edc8", "NODE": "#f8ddbd",
             "SYS": "#f4c4c0"}
FABRIC_FILL = "#d9ccef"  # NVLink/XGMI: any cell the matrix names that is not a PCIe path kind
PATH_TEXT = {"PIX": "#1b5e20", "PXB": "#33691e", "PHB": "#6d5d00", "NODE": "#8a4b00", "SYS": "#a11d15"}
INK = "#222222"
MUTED = "#666666"
MAX_MBPS = 1e12  # a bandwidth (MB/s) or latency (ns) in a report beyond any machine's: its bound
#: What one picture draws at most (a real node has up to a few dozen NUMA nodes, GPUs and NICs): past these it
#: draws the first ones and says what it left out; inspect's text and --json list everything. A 1,000-node tree
#: drew a 188 MB SVG in 25 s (a million distance cells); 1,000 GPUs a box each.
MAX_NODES_DRAWN = 64
MAX_DEVICES_DRAWN = 128
MAX_MATRIX_DRAWN = 64  # GPUs and NICs in the path matrix's grid
MAX_FINDINGS_DRAWN = 200
MAX_WIRES = 32  # lines from CPU-less memory to its initiators (their labels are placed in lanes: cubic)


def esc(text: object) -> str:
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "\u2026"


def wrap(text: str, chars: int, sep: str = " ") -> list[str]:
    """Break at `sep` (", " for CPU lists) into lines of at most `chars`; a word longer than that is cut."""
    lines: list[str] = []
    cur = ""
    for word in text.split(sep):
        piece = word if not cur else cur + sep + word
        if len(piece) <= chars:
            cur = piece
            continue
        if cur:
            lines.append(cur + (sep.rstrip() if sep.strip() else ""))
        cur = word
        while len(cur) > chars:
            lines.append(cur[:chars])
            cur = cur[chars:]
    if cur or not lines:
        lines.append(cur)
    return lines


def gib(kib: int | None) -> str:
    if kib is None:
        return "size unknown"
    g = kib / 1048576
    if g >= 100:
        return f"{g:.0f} GiB"
    if g >= 1:
        return f"{g:.1f} GiB"
    return f"{kib / 1024:.0f} MiB"


def gbps(mbps: int | None) -> str:
    if mbps is None:
        return ""
    g = mbps / 1000
    return f"{g:.0f} GB/s" if g >= 10 else f"{g:.1f} GB/s"


class Svg:
    """An SVG body being written; `w` and `h` grow to what was drawn."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.w = 0.0
        self.h = 0.0

    def grow(self, x: float, y: float) -> None:
        self.w = max(self.w, x)
        self.h = max(self.h, y)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str, *, sw: float = 1,
             rx: float = 4, dash: bool = False, cls: str = "", title: str = "") -> None:
        extra = ' stroke-dasharray="5 3"' if dash else ""
        extra += f' class="{cls}"' if cls else ""
        body = f"<title>{esc(title)}</title>" if title else ""
        end = f">{body}</rect>" if body else "/>"
        self.parts.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx:g}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="{sw:g}"{extra}{end}')
        self.grow(x + w, y + h)

    def text(self, x: float, y: float, s: str, *, size: int = 12, weight: str = "", fill: str = INK,
             anchor: str = "", cls: str = "", grow: bool = True) -> None:
        attrs = f' font-size="{size}"' if size != 12 else ""
        attrs += f' font-weight="{weight}"' if weight else ""
        attrs += f' fill="{fill}"' if fill != INK else ""
        attrs += f' text-anchor="{anchor}"' if anchor else ""
        attrs += f' class="{cls}"' if cls else ""
        self.parts.append(f'<text x="{x:g}" y="{y:g}"{attrs}>{esc(s)}</text>')
        width = len(s) * CH * size / 12
        if grow:
            self.grow(x + (width / 2 if anchor == "middle" else 0 if anchor == "end" else width), y + 4)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, *, sw: float = 1.5,
             dash: bool = False) -> None:
        extra = ' stroke-dasharray="6 4"' if dash else ""
        self.parts.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{stroke}" '
                          f'stroke-width="{sw:g}"{extra}/>')

    def pill(self, x_right: float, y: float, label: str, color: str) -> None:
        """A finding code badge whose right edge is at x_right, vertically centred on y (a box's top border: it
        covers no text)."""
        w = len(label) * CH * 11 / 12 + 10
        self.rect(x_right - w, y - 7, w, 14, color, color, rx=7)
        self.text(x_right - w / 2, y + 4, label, size=11, weight="bold", fill="#ffffff", anchor="middle")


def _findings_by_subject(doc: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in doc.get("findings") or []:
        subject = str(f.get("subject") or "")
        m = re.fullmatch(r"node (\d+)", subject)
        key = f"node {m.group(1)}" if m else subject
        out.setdefault(key, []).append(f)
    for items in out.values():
        items.sort(key=lambda f: (-SEVERITY_RANK.get(f.get("severity"), 0), f.get("code", "")))
    return out


def _outline(findings: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """The severity colour of the worst finding and the codes, once each."""
    if not findings:
        return None, []
    codes: list[str] = []
    for f in findings:
        if f.get("code") not in codes:
            codes.append(f.get("code"))
    return SEVERITY.get(findings[0].get("severity"), SEVERITY["info"]), codes


def _device_labels(doc: Mapping[str, Any]) -> dict[str, str]:
    """BDF -> the path matrix's label (GPU0, NIC3); other devices are named by kind only."""
    pm = doc.get("path_matrix") or {}
    return dict(zip(pm.get("devices") or [], pm.get("labels") or [], strict=False))


def _nearest_nics(doc: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """GPU BDF -> (NIC label, path kind) of its nearest NIC by the PCIe path kinds (ties: first NIC)."""
    pm = doc.get("path_matrix") or {}
    labels, devices, cells = pm.get("labels") or [], pm.get("devices") or [], pm.get("cells") or []
    rank = {k: i for i, k in enumerate(PCIE_KINDS)}
    out = {}
    for i, label in enumerate(labels):
        if not label.startswith("GPU") or i >= len(cells):
            continue
        best = None
        for j, cell in enumerate(cells[i][:len(labels)]):  # the row, not every label: work bounded by the cells
            if labels[j].startswith("NIC") and cell in rank and (best is None or rank[cell] < rank[best[1]]):
                best = (labels[j], cell)
        if best and i < len(devices):
            out[devices[i]] = best
    return out


def _fabric(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """GPU BDF -> ["XGMI to GPU 1-3 · 50 GB/s", ...]: peers over a fabric (matrix cells that are not PCIe path
    kinds), grouped by link kind so eight all-to-all GPUs take one line each; the bandwidth when the links
    (path_matrix.links) give one figure for the group."""
    pm = doc.get("path_matrix") or {}
    labels, devices, cells = pm.get("labels") or [], pm.get("devices") or [], pm.get("cells") or []
    bandwidth: dict[tuple[str, str], int | None] = {}
    for link in pm.get("links") or []:
        a, b = str(link.get("a", "")).lower(), str(link.get("b", "")).lower()
        bandwidth[(a, b)] = bandwidth[(b, a)] = link.get("max_bandwidth_mbps")
    out: dict[str, list[str]] = {}
    for i, row in enumerate(cells):
        by_kind: dict[str, list[int]] = {}
        figures: dict[str, set[int | None]] = {}
        for j, cell in enumerate(row):
            if i != j and cell not in PCIE_KINDS and j < len(labels) and labels[j].startswith("GPU"):
                by_kind.setdefault(cell, []).append(int(labels[j][3:]) if labels[j][3:].isdigit() else j)
                figures.setdefault(cell, set()).add(bandwidth.get((devices[i].lower(), devices[j].lower())))
        if by_kind and i < len(devices):
            out[devices[i]] = [
                f"{kind} to GPU {format_cpulist(peers)}"
                + (f" \u00b7 {gbps(next(iter(figures[kind])))}" if len(figures[kind]) == 1 and None not in figures[kind]
                   else "")
                for kind, peers in sorted(by_kind.items())]
    gpu_fabric = doc.get("gpu_fabric")
    nvml_gpus = gpu_fabric.get("nvml_gpus") if isinstance(gpu_fabric, dict) else None
    for g in nvml_gpus if isinstance(nvml_gpus, list) else ():
        if not isinstance(g, dict) or not isinstance(g.get("bdf"), str) or not isinstance(g.get("domain"), str):
            continue
        uuid, _, clique = g["domain"].rpartition(".")
        health = [h for h in g["health"] if isinstance(h, str)] if isinstance(g.get("health"), list) else []
        key = next((d for d in devices if isinstance(d, str) and d.lower() == g["bdf"].lower()), g["bdf"])
        out.setdefault(key, []).append(f"NVLink domain \u2026{uuid[-8:]}.{clique}, "
                                       + ("; ".join(health) if health else "healthy"))
    return out


def device_name(d: Mapping[str, Any]) -> str:
    """Short: the driver's model name, else pci.ids' marketing name in brackets ("MT2910 Family [ConnectX-7]"
    -> "ConnectX-7"), else the device name, else vendor:device ids."""
    nvidia = d.get("nvidia") or {}
    if nvidia.get("model"):
        return nvidia["model"]
    name = d.get("device_name") or ""
    m = re.search(r"\[([^\]]+)\]\s*$", name)
    if m:
        return m.group(1)
    if name:
        return name
    if d.get("vendor_name"):
        return f"{d['vendor_name']} {(d.get('device_id') or '0x0000')[2:]}"
    return f"{(d.get('vendor_id') or '0x0000')[2:]}:{(d.get('device_id') or '0x0000')[2:]}"


def _cxl_memory_of(doc: Mapping[str, Any]) -> dict[str, list[int]]:
    """CXL device BDF -> the NUMA nodes its memory became (memdev -> region -> node)."""
    cxl = doc.get("cxl") or {}
    out: dict[str, list[int]] = {}
    for mem in cxl.get("memdevs") or []:
        for region in cxl.get("regions") or []:
            if mem.get("pci_bdf") and mem.get("name") in (region.get("memdevs") or []):
                out.setdefault(mem["pci_bdf"], []).extend(n for n in region.get("nodes") or [] if n is not None)
    return out


def _device_lines(d: Mapping[str, Any], label: str, nearest: tuple[str, str] | None,
                  fabric: list[str], memory_nodes: list[int] | tuple[int, ...] = ()) -> list[tuple[str, str]]:
    """(text, colour) lines of one device box."""
    kind_label = DEVICE_STYLE.get(d["kind"], OTHER_DEVICE)[0]
    lines = [(fit(f"{label or kind_label}  {device_name(d)}", COLS_CHARS - 2), INK)]
    link = d.get("link") or {}
    speed = (link.get("current_speed") or "").replace(" PCIe", "")
    second = d["bdf"]
    if link.get("current_width"):
        second += f"  x{link['current_width']} {speed}".rstrip()
    if d.get("numa_node") is None:  # numa_node -1: say so, with numatune's guess
        second += f"  node {d['inferred_node']}?" if d.get("inferred_node") is not None else "  node ?"
    lines.append((fit(second, COLS_CHARS - 2), MUTED))
    names = list(d.get("netdevs") or []) + list(d.get("rdma") or []) + list(d.get("nvme") or [])
    if names:
        lines.append((fit(" ".join(names), COLS_CHARS - 2), MUTED))
    if nearest:
        lines.append((f"nearest NIC: {nearest[0]} {nearest[1]}", PATH_TEXT.get(nearest[1], INK)))
    if memory_nodes:
        lines.append((f"its memory: node {format_cpulist(memory_nodes)}", "#5b2d82"))
    for link in fabric:
        lines.extend((line, "#5b3f9a") for line in wrap(link, COLS_CHARS - 2, ","))
    return lines


class _Column:
    """One NUMA node (or a pseudo node for devices whose node is not in the tree) and its devices."""

    def __init__(self, key: str, title: str, node: Mapping[str, Any] | None, devices: list[Mapping[str, Any]]):
        self.key = key
        self.title = title
        self.node = node
        self.devices = devices
        self.notes: list[str] = []  # muted lines under the title (pseudo nodes say what they are)
        self.x = 0.0
        self.y = 0.0
        self.h = 0.0


def _node_head(node: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    if node is None:
        return []
    cpus = format_cpulist(node.get("cpus") or [])
    out = []
    if cpus:
        count = len(node.get("cpus") or [])
        for i, part in enumerate(wrap(f"CPUs {cpus} ({count})", COLS_CHARS, ",")):
            out.append((part if i == 0 else "  " + part, INK))
        for kind in node.get("cpu_kinds_here") or []:  # hybrid CPUs: which of this node's CPUs are which kind
            out += [(("  " if i else "") + line, "#1f5f5f") for i, line in enumerate(wrap(kind, COLS_CHARS - 2))]
    elif node.get("cpus_unknown"):
        out.append(("CPUs not in this tree", MUTED))
    else:
        out.append(("no CPUs", MUTED))
    mem = _memory_text(node)
    if node.get("tier") is not None:
        mem += f"  tier {node['tier']}"
    out.append((mem, INK))
    return out


def _kinds_of(kinds: list[Mapping[str, Any]], cpus: list[int]) -> list[str]:
    """"Cortex-X3 (performance): 0-1" for each CPU kind that has CPUs on this node, most performant first."""
    here = set(cpus)
    out = []
    for k in sorted(kinds, key=lambda k: (k.get("rank", 0), min(k.get("cpus") or [0]))):
        mine = sorted(here.intersection(k.get("cpus") or []))
        if mine:
            name = k.get("name") or k.get("part") or f"kind {k.get('rank')}"
            out.append(f"{name} ({k.get('role') or 'unranked'}): {format_cpulist(mine)}")
    return out


def _memory_text(node: Mapping[str, Any]) -> str:
    """"DRAM 125 GiB", "CXL memory 64.0 GiB"; a memoryless node says only that."""
    if node.get("kind") == "memoryless":
        return "no memory"
    return f"{KIND_LABEL.get(node.get('kind'), node.get('kind') or 'memory')} {gib(node.get('memory_total_kib'))}"


def _bridges(devices: list[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    order: list[str] = []
    by: dict[str, list[Mapping[str, Any]]] = {}
    for d in devices:
        hb = d.get("host_bridge") or (f"KFD CPU agent {d['kfd_cpu_agent']}" if d.get("kfd_cpu_agent") is not None
                                      else "host bridge unknown")
        if hb not in by:
            order.append(hb)
            by[hb] = []
        by[hb].append(d)
    return [(hb, by[hb]) for hb in order]


def _column_height(col: _Column, dev_lines: dict[str, list[tuple[str, str]]]) -> float:
    h = PAD + LINE + (len(_node_head(col.node)) + len(col.notes)) * LINE + 6
    for _hb, devs in _bridges(col.devices):
        h += LINE + 5
        for d in devs:
            h += len(dev_lines[d["bdf"]]) * LINE + 8 + 9
    return h + PAD - 6 + 6


def check_picture(doc: Doc) -> None:
    """Every field of an inspect report render_svg reads beyond those analysis.diff.check_inspect_document
    proves (it is drawn from a stranger's report in `fleet --format html`), by type and range
    (model.document): InputError naming the field, never a Python error mid-drawing."""
    doc.scalar("source")
    cpu = doc.mapping("cpu")
    cpu.str("model")
    cpu.scalar("cores")
    for kind in doc.mapping("cpu_kinds").records("kinds"):
        kind.int("rank", -MAX_ID, MAX_ID)
        kind.scalar("part")
    for finding in doc.records("findings"):
        finding.scalar("subject")
    pm = doc.mapping("path_matrix")
    for link in pm.records("links"):
        link.scalar("a")
        link.scalar("b")
        link.number("max_bandwidth_mbps", 0, MAX_MBPS)
    pm.strs("names")
    pm.scalar("order_note")
    for node in doc.records("nodes"):
        node.str("kind_evidence")
        for entry in node.records("hmat"):
            entry.scalar("access_class")
            entry.ints("initiators", 0, MAX_ID)
            entry.number("read_latency_ns", 0, MAX_MBPS)
            entry.number("read_bandwidth_mbps", 0, MAX_MBPS)
            entry.scalar("unknown_reason")
    for device in doc.records("devices"):
        device.str("kind", required=True)
        device.str("bdf", required=True)
        device.mapping("nvidia").str("model")
        for key in ("device_name", "vendor_name", "vendor_id", "device_id"):
            device.str(key)
        link = device.mapping("link")
        link.str("current_speed")
        link.scalar("current_width")
        device.str("host_bridge")
        device.scalar("kfd_cpu_agent")
    cxl = doc.mapping("cxl")
    for memdev in cxl.records("memdevs"):
        memdev.str("pci_bdf")
        memdev.mapping("link").number("gbps", 0, MAX_MBPS)
    for region in cxl.records("regions"):
        for member in region.records("members"):
            member.str("switch")
    for dax in cxl.records("dax"):
        dax.int("target_node", -1, MAX_ID)
        for key in ("name", "backing", "mode"):
            dax.str(key)
        dax.scalar("region")
        dax.int("size", 0, MAX_SIZE)


def render_svg(doc: Mapping[str, Any], sockets: Mapping[int, int | None] | None = None,
               *, title: str | None = None) -> str:
    """The picture as a standalone SVG document (text, trailing newline).

    sockets: node id -> socket (physical package id) for nodes with CPUs, from the model; without it
    the nodes with CPUs are drawn in one frame.
    """
    svg = Svg()
    by_subject = _findings_by_subject(doc)
    labels = _device_labels(doc)
    nearest = _nearest_nics(doc)
    fabric = _fabric(doc)
    nodes = list(doc.get("nodes") or [])
    all_ids = {n["id"] for n in nodes}
    left_out = [f"{len(nodes) - MAX_NODES_DRAWN:,} of {len(nodes):,} NUMA nodes"] * (len(nodes) > MAX_NODES_DRAWN)
    nodes = nodes[:MAX_NODES_DRAWN]
    cpu = doc.get("cpu") or {}
    if not (cpu.get("online") or cpu.get("offline")):  # a tree without /sys/devices/system/cpu
        nodes = [{**n, "cpus_unknown": True} for n in nodes]
    kinds = (doc.get("cpu_kinds") or {}).get("kinds") or []
    if len(kinds) > 1:  # heterogeneous CPUs (cpu_kinds, when the document has them)
        nodes = [{**n, "cpu_kinds_here": _kinds_of(kinds, n.get("cpus") or [])} for n in nodes]
    node_ids = {n["id"] for n in nodes}
    every = list(doc.get("devices") or [])
    devices = [d for d in every if _home(d) in node_ids or _home(d) not in all_ids][:MAX_DEVICES_DRAWN]
    if len(devices) < len(every):
        left_out.append(f"{len(every) - len(devices):,} of {len(every):,} devices")
    cxl_memory = _cxl_memory_of(doc)
    dev_lines = {d["bdf"]: _device_lines(d, labels.get(d["bdf"], ""), nearest.get(d["bdf"]), fabric.get(d["bdf"], []),
                                         cxl_memory.get(d["bdf"], []))
                 for d in devices}

    # Which node each device hangs off: the kernel's, else the inferred one (drawn with "?").
    placed: dict[str, list[Mapping[str, Any]]] = {}
    for d in devices:
        node = _home(d)
        placed.setdefault("node ?" if node is None else f"node {node}", []).append(d)

    cpu_nodes = [n for n in nodes if n.get("cpus") or placed.get(f"node {n['id']}") or len(nodes) == 1]
    memory_nodes = [n for n in nodes if n not in cpu_nodes]

    # Frames: a socket per package; nodes without CPUs but with devices, and pseudo nodes, in their own.
    frames: list[tuple[str, list[_Column]]] = []
    frame_of: dict[str, list[_Column]] = {}
    for n in cpu_nodes:
        sock = sockets.get(n["id"]) if sockets is not None else None
        if n.get("cpus_unknown"):
            name = "NUMA nodes (no CPU topology)"
        elif sockets is None:
            name = "NUMA nodes with CPUs" if n.get("cpus") else "nodes without CPUs"
        elif not n.get("cpus"):
            name = "nodes without CPUs"
        else:
            name = f"socket {sock}" if sock is not None and sock >= 0 else "socket (package id unknown)"
        if name not in frame_of:
            frame_of[name] = []
            frames.append((name, frame_of[name]))
        title_n = f"node {n['id']}"
        frame_of[name].append(_Column(title_n, title_n, n, placed.get(title_n, [])))
    extra = [k for k in placed if k == "node ?" or int(k.split()[1]) not in node_ids]
    if extra:
        cols = []
        for k in sorted(extra, key=lambda k: (k == "node ?", int(k.split()[1]) if k != "node ?" else 0)):
            name = "node unknown" if k == "node ?" else f"{k}? (inferred)"
            cols.append(_Column(k, name, None, placed[k]))
            cols[-1].notes = (["numa_node -1, no guess"] if k == "node ?" else
                              ["not a NUMA node in this tree"])
        frames.append(("devices on unknown nodes", cols))

    y = _title(svg, doc, title)
    if left_out:
        svg.text(0, y + 10, f"Not drawn: {' and '.join(left_out)} (the picture draws at most {MAX_NODES_DRAWN} nodes "
                 f"and {MAX_DEVICES_DRAWN} devices; inspect's text and --json list them all)", fill=SEVERITY["warning"])
        y += LINE + 4
    y += 8
    column_of: dict[int, _Column] = {}
    rows: list[list[tuple[str, list[_Column]]]] = [[]]
    used = 0
    for name, cols in frames:
        width = min(len(cols), MAX_COLS)
        if rows[-1] and used + width > MAX_COLS:
            rows.append([])
            used = 0
        rows[-1].append((name, cols))
        used += width

    row_layouts: list[tuple[float, list[_Column]]] = []
    for row in rows:
        x = 0.0
        row_top = y
        row_bottom = y
        row_cols: list[_Column] = []
        for name, cols in row:
            per = min(len(cols), MAX_COLS)
            fw = per * NODE_W + (per - 1) * GAP + 2 * PAD
            fy = row_top + 22
            lines = [cols[i:i + per] for i in range(0, len(cols), per)]
            cy = fy + PAD
            for line_cols in lines:
                hmax = max(_column_height(c, dev_lines) for c in line_cols)
                for i, c in enumerate(line_cols):
                    c.x, c.y, c.h = x + PAD + i * (NODE_W + GAP), cy, hmax
                    if c.node is not None:
                        column_of[c.node["id"]] = c
                cy += hmax + GAP
            fh = cy - GAP + PAD - fy
            svg.text(x + 2, row_top + 14, fit(name, int((fw - 4) / CH)), weight="bold", fill=MUTED)
            svg.rect(x, fy, fw, fh, "#ffffff", "#9e9e9e", rx=6)
            for c in cols:
                _draw_column(svg, c, by_subject, dev_lines)
            row_cols += lines[-1]  # the memory band's lines reach only the bottom line of boxes
            row_bottom = max(row_bottom, fy + fh)
            x += fw + GAP * 2
        row_layouts.append((row_bottom, row_cols))
        y = row_bottom + GAP

    y = _memory_band(svg, doc, memory_nodes, column_of, row_layouts, y, by_subject)
    y = _unplaced_dax(svg, doc, all_ids, y)
    y = _panels(svg, doc, nodes, y + 6)
    y = _findings(svg, doc, y + 6)
    width = max(svg.w, 400) + 12
    height = svg.h + 12
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
            f'viewBox="-6 -6 {width:g} {height:g}" font-family="{FONT}" font-size="12" fill="{INK}">\n'
            f'<rect x="-6" y="-6" width="{width:g}" height="{height:g}" fill="#ffffff"/>\n')
    return head + "\n".join(svg.parts) + "\n</svg>\n"


def _home(d: Mapping[str, Any]) -> Any:
    """The node a device hangs off: the kernel's, else the inferred one (drawn with "?"); None when neither."""
    return d.get("numa_node") if d.get("numa_node") is not None else d.get("inferred_node")


def _title(svg: Svg, doc: Mapping[str, Any], title: str | None) -> float:
    cpu = doc.get("cpu") or {}
    # The source is a path of any length: it does not widen the picture (so goldens do not depend on it).
    svg.text(0, 14, title if title is not None else str(doc.get("source", "")), size=15, weight="bold", grow=False)
    model = cpu.get("model") or "unknown CPU model"
    settings = doc.get("settings") or {}
    facts = [f"{len(cpu.get('sockets') or [])} socket(s)", f"{cpu.get('cores', '?')} cores",
             f"{cpu.get('threads_per_core', '?')} thread(s)/core", f"{len(cpu.get('online') or [])} CPUs online",
             f"{len(doc.get('nodes') or [])} NUMA node(s)"] if cpu.get("online") or cpu.get("offline") else [
             "CPU topology not in this tree", f"{len(doc.get('nodes') or [])} NUMA node(s)"]
    if cpu.get("offline"):
        facts.append(f"offline {format_cpulist(cpu['offline'])}")
    if settings.get("release"):
        facts.append(f"kernel {settings['release']}")
    svg.text(0, 32, fit(model, 110), fill=MUTED)
    svg.text(0, 48, fit(" \u00b7 ".join(facts), 130), fill=MUTED)
    return 56


def _draw_column(svg: Svg, c: _Column, by_subject: dict[str, list[dict[str, Any]]],
                 dev_lines: dict[str, list[tuple[str, str]]]) -> None:
    node = c.node
    fill = KIND_FILL.get(node.get("kind"), "#f4f4f4") if node else "#fafafa"
    color, codes = _outline(by_subject.get(c.key, []) if node else [])
    svg.rect(c.x, c.y, NODE_W, c.h, fill, color or ("#607d8b" if node else "#9e9e9e"),
             sw=2.5 if color else 1.2, dash=node is None, cls="node", title=c.title)
    ty = c.y + PAD + 11
    svg.text(c.x + PAD, ty, c.title if node is None else fit(c.title, COLS_CHARS), weight="bold")
    if codes:
        svg.pill(c.x + NODE_W - 8, c.y, " ".join(codes), color)
    for text, ink in [(note, MUTED) for note in c.notes] + _node_head(node):
        ty += LINE
        svg.text(c.x + PAD, ty, text, fill=ink)
    ty += 6
    for hb, devs in _bridges(c.devices):
        ty += LINE
        svg.text(c.x + PAD, ty - 2, hb, size=11, fill=MUTED)
        svg.line(c.x + PAD + len(hb) * CH * 11 / 12 + 6, ty - 6, c.x + NODE_W - PAD, ty - 6, "#c7c7c7", sw=1)
        ty += 5
        for d in devs:
            lines = dev_lines[d["bdf"]]
            h = len(lines) * LINE + 8
            label, dfill, dstroke = DEVICE_STYLE.get(d["kind"], OTHER_DEVICE)
            color, codes = _outline(by_subject.get(d["bdf"], []))
            svg.rect(c.x + PAD, ty, DEV_W, h, dfill, color or dstroke, sw=2.5 if color else 1, rx=3,
                     cls=f"device {d['kind']}", title=f"{label} {d['bdf']}")
            ly = ty + 4
            for i, (text, ink) in enumerate(lines):
                ly += LINE
                svg.text(c.x + PAD + 6, ly - 3, text, fill=ink, weight="bold" if i == 0 else "")
            if codes:
                svg.pill(c.x + PAD + DEV_W - 6, ty, " ".join(codes), color)
            ty += h + 9


def _initiator_links(n: Mapping[str, Any], cpu_ids: list[int]) -> list[tuple[int, str]]:
    """(initiator node, label) for a CPU-less node: HMAT's initiators (access1, else access0), else the nearest
    nodes with CPUs by SLIT distance."""
    dist = n.get("distances") or {}
    hmat = n.get("hmat") or []
    entries = [e for e in hmat if e.get("access_class") == 1] or [e for e in hmat if e.get("access_class") == 0]
    links: dict[int, str] = {}
    for e in entries:
        for i in e.get("initiators") or []:
            if i in cpu_ids and i not in links:
                figures = []
                if e.get("read_latency_ns") is not None:
                    figures.append(f"{e['read_latency_ns']} ns")
                if e.get("read_bandwidth_mbps") is not None:
                    figures.append(gbps(e["read_bandwidth_mbps"]))
                if not figures and e.get("unknown_reason"):
                    figures.append("HMAT figures unknown")  # listed, left at 0 by the firmware
                links[i] = " \u00b7 ".join(figures)
    if not links:
        known = {i: dist[str(i)] for i in cpu_ids if str(i) in dist}
        if known:
            best = min(known.values())
            links = {i: "" for i, v in known.items() if v == best}
    out = []
    for i in sorted(links):
        d = dist.get(str(i))
        parts = [f"distance {d}" if d is not None else "distance ?"] + ([links[i]] if links[i] else ["no HMAT"])
        out.append((i, " \u00b7 ".join(parts)))
    return out


def _memory_via(doc: Mapping[str, Any], node_id: int) -> str:
    """How a CPU-less node's memory got there: DAX device, CXL region and memdevs."""
    cxl = doc.get("cxl") or {}
    via = []
    for dax in cxl.get("dax") or []:
        if dax.get("target_node") == node_id:
            via.append(f"{dax.get('name')} ({', '.join(x for x in (dax.get('backing'), dax.get('mode')) if x)})")
    for region in cxl.get("regions") or []:
        if node_id in (region.get("nodes") or []):
            ways = f" ({region['interleave_ways']}-way)" if (region.get("interleave_ways") or 0) > 1 else ""
            via.append(f"{region.get('name')}{ways} \u2190 {', '.join(region.get('memdevs') or []) or '?'}")
            switches = sorted({m["switch"] for m in region.get("members") or [] if m.get("switch")})
            if switches:
                via.append(f"via switch {', '.join(switches)}")
            for mem in cxl.get("memdevs") or []:
                if mem.get("name") in (region.get("memdevs") or []) and mem.get("pci_bdf"):
                    link = mem.get("link") or {}
                    rate = f" ({link['gbps']:g} GB/s)" if link.get("gbps") is not None else ""
                    via.append(f"{mem['name']} at {mem['pci_bdf']}{rate}")
    return "; ".join(via)


def _memory_band(svg: Svg, doc: Mapping[str, Any], memory_nodes: list[Mapping[str, Any]],
                 column_of: dict[int, _Column], row_layouts: list[tuple[float, list[_Column]]], y: float,
                 by_subject: dict[str, list[dict[str, Any]]]) -> float:
    """CPU-less memory in dashed boxes under the last row of nodes, each linked to its initiators there by a
    line labelled with the SLIT distance and the HMAT figures (initiators in other rows are named in the box)."""
    if not memory_nodes:
        return y
    cpu_ids = [n["id"] for n in doc.get("nodes") or [] if n.get("cpus")]
    links = {n["id"]: _initiator_links(n, cpu_ids) for n in memory_nodes}
    last_cols = row_layouts[-1][1] if row_layouts else []
    last_keys = {c.node["id"] for c in last_cols if c.node is not None}
    slot_x = sorted({c.x for c in last_cols}) or [0.0]
    # A box goes under its first initiator's column when that is free, else into the next free slot.
    slots: dict[int, int] = {}
    for n in memory_nodes:
        want = 0
        for i, _label in links[n["id"]]:
            if i in last_keys and column_of[i].x in slot_x:
                want = slot_x.index(column_of[i].x)
                break
        while want in slots.values():
            want += 1
        slots[n["id"]] = want

    def slot_left(s: int) -> float:
        return slot_x[s] if s < len(slot_x) else slot_x[-1] + (s - len(slot_x) + 1) * (NODE_W + GAP)

    # Lines to the initiators in the last row; when that makes a thicket (GPU memory nodes equally far from
    # every socket), nodes without a preferred initiator (no HMAT, several equally near) say it in words.
    wired = {k: {i for i, _label in v if i in last_keys} for k, v in links.items()}
    if sum(len(v) for v in wired.values()) > 8:
        for n in memory_nodes:
            if not n.get("hmat") and len(wired[n["id"]]) > 1:
                wired[n["id"]] = set()
    budget = MAX_WIRES  # still a thicket (HMAT naming many initiators): the first ones drawn, the rest in words
    for n in memory_nodes:
        keep = sorted(wired[n["id"]])[:max(budget, 0)]
        wired[n["id"]], budget = set(keep), budget - len(keep)
    box_lines = {n["id"]: _memory_lines(doc, n, links[n["id"]], wired[n["id"]]) for n in memory_nodes}
    band_h = max(PAD + LINE * (len(lines) + 1) + PAD - 4 for lines in box_lines.values())
    # The links: (x at the box, x at the node, node bottom, label); labels go in lanes that do not overlap.
    wires = []
    ends: dict[int, int] = {}
    for n in memory_nodes:
        drawn = [(i, label) for i, label in links[n["id"]] if i in wired[n["id"]]]
        for k, (i, label) in enumerate(drawn):
            col = column_of[i]
            ends[i] = ends.get(i, 0) + 1
            x1 = slot_left(slots[n["id"]]) + NODE_W / 2 + (k - (len(drawn) - 1) / 2) * 28
            x2 = col.x + NODE_W / 2 + (ends[i] - 1) * 28
            wires.append((n, x1, x2, col.y + col.h, f"node {n['id']} \u2194 node {i}", label))
    placed, band_top = _label_lanes(wires, y)
    for n in memory_nodes:
        x = slot_left(slots[n["id"]])
        color, codes = _outline(by_subject.get(f"node {n['id']}", []))
        svg.rect(x, band_top, NODE_W, band_h, KIND_FILL.get(n.get("kind"), "#f4f4f4"), color or "#7b3fa0",
                 sw=2.5 if color else 1.3, dash=True, cls="node memory", title=f"node {n['id']}")
        ty = band_top + PAD + 11
        svg.text(x + PAD, ty, f"node {n['id']}", weight="bold")
        svg.text(x + PAD + (len(f"node {n['id']}") + 2) * CH, ty, "no CPUs", fill=MUTED)
        if codes:
            svg.pill(x + NODE_W - 8, band_top, " ".join(codes), color)
        for text, ink in box_lines[n["id"]]:
            ty += LINE
            svg.text(x + PAD, ty, text, fill=ink)
    for (n, x1, x2, y2, _who, _label), _lane, _w in placed:
        svg.line(x1, band_top, x2, y2, "#7b3fa0", sw=1.6, dash=n.get("kind") != "dram")
    for (_n, _x1, _x2, _y2, who, label), (lx, ly), width in placed:
        svg.rect(lx - width / 2, ly - 16, width, 32, "#ffffff", "#d5c6e3", rx=3, cls="link-label")
        svg.text(lx, ly - 3, who, size=11, anchor="middle", fill=MUTED)
        svg.text(lx, ly + 11, label, size=11, anchor="middle", fill="#5b2d82", weight="bold")
    return band_top + band_h + GAP


def _label_lanes(wires: list[tuple], y: float) -> tuple[list[tuple], float]:
    """Place each link's label on its line, in lanes (rows 38 px apart) below Y, so that no two label boxes
    overlap: a label sits where its line crosses its lane, which moves with the number of lanes (the lines
    end at the memory boxes under the last lane), so lanes are filled again with one lane more until every
    label fits. Returns ((wire, (x, y) of the label's centre, width) for each wire, the memory band's top)."""
    lanes = 0
    while True:
        band_top = y + 24 + 38 * lanes + 10
        used: list[list[tuple[float, float]]] = [[] for _ in range(lanes)]
        placed = []
        for wire in wires:
            _n, x1, x2, y2, who, label = wire
            width = max(len(label), len(who)) * CH * 11 / 12 + 10
            for lane in range(lanes):
                ly = y + 24 + 38 * lane + 16  # the label's centre, on its line
                t = (band_top - ly) / (band_top - y2) if band_top != y2 else 0.5
                lx = x1 + (x2 - x1) * t
                span = (lx - width / 2 - 6, lx + width / 2 + 6)
                if all(span[1] < a or span[0] > b for a, b in used[lane]):
                    used[lane].append(span)
                    placed.append((wire, (lx, ly), width))
                    break
            else:
                break
        if len(placed) == len(wires) or lanes > len(wires):
            return placed, band_top
        lanes += 1


def _unplaced_dax(svg: Svg, doc: Mapping[str, Any], node_ids: set[int], y: float) -> float:
    """DAX devices whose memory is not a NUMA node of this tree (device DAX, or a node that is offline)."""
    rows = [d for d in (doc.get("cxl") or {}).get("dax") or [] if d.get("target_node") not in node_ids]
    if not rows:
        return y
    svg.text(0, y + 12, "DAX memory that is not a NUMA node here", weight="bold", fill=MUTED)
    y += 16
    for d in rows:
        size = gib(d["size"] // 1024) if d.get("size") is not None else "size unknown"
        target = d.get("target_node")
        svg.text(0, y + 12, f"{d.get('name')}  {d.get('backing')}, {d.get('mode') or 'mode ?'}, {size}"
                 f"{'' if d.get('region') is None else ', ' + str(d['region'])}"
                 f"{'' if target is None else f', target node {target}'}")
        y += LINE
    return y + 8


def _memory_lines(doc: Mapping[str, Any], n: Mapping[str, Any], links: list[tuple[int, str]],
                  wired: set[int]) -> list[tuple[str, str]]:
    out = [(_memory_text(n)
            + (f"  tier {n['tier']}" if n.get("tier") is not None else ""), INK)]
    if n.get("kind_evidence"):
        evidence = n["kind_evidence"]
        for bdf, label in _device_labels(doc).items():  # GPU memory: name the GPU as its box does
            evidence = evidence.replace(f"GPU {bdf}", f"{label} {bdf}")
        out += [(line, MUTED) for line in wrap(evidence, COLS_CHARS)][:2]
    via = _memory_via(doc, n["id"])
    if via:
        out += [(line, MUTED) for line in wrap("via " + via, COLS_CHARS, "; ")]
    unwired: dict[str, list[int]] = {}
    for i, label in links:
        if i not in wired:
            unwired.setdefault(label, []).append(i)
    for label, ids in unwired.items():
        who = f"node {ids[0]}" if len(ids) == 1 else f"nodes {format_cpulist(ids)}"
        out += [(f"to {who}:", "#5b2d82")] + [("  " + line, "#5b2d82") for line in wrap(label, COLS_CHARS - 2)]
    if not links:
        out.append(("no initiator with CPUs known", MUTED))
    return out


def _grid(svg: Svg, x0: float, y: float, title: str, labels: list[str], cells: list[list[str]],
          fill: Any, ink: Any, cw: float) -> tuple[float, float]:
    """A labelled square matrix of coloured cells at (x0, y); returns its bottom and right edge."""
    chh = 20
    cw = max(cw, max(len(lab) for lab in labels) * CH * 11 / 12 + 10)
    svg.text(x0, y + 12, title, weight="bold", fill=MUTED)
    top = y + 22
    lw = max(len(lab) for lab in labels) * CH * 11 / 12 + 10
    for j, lab in enumerate(labels):
        svg.text(x0 + lw + j * cw + (cw - 2) / 2, top + 14, lab, size=11, anchor="middle", weight="bold")
    for i, lab in enumerate(labels):
        ry = top + chh * (i + 1)
        svg.text(x0, ry + 14, lab, size=11, weight="bold")
        for j, cell in enumerate(cells[i] if i < len(cells) else []):
            svg.rect(x0 + lw + j * cw, ry, cw - 2, chh - 2, fill(cell), "#ffffff", sw=0, rx=2)
            svg.text(x0 + lw + j * cw + (cw - 2) / 2, ry + 13, "" if cell == "X" else cell, size=10,
                     anchor="middle", fill=ink(cell))
    return top + chh * (len(labels) + 1), x0 + lw + len(labels) * cw


def _distance_fill(far: int) -> Any:
    """10 (local) pale blue-grey, the farthest distance in the tree a muted red, linear in between."""
    def fill(cell: str) -> str:
        if not cell.isdigit() or far <= 10:
            return "#eef2f6"
        t = min(max((int(cell) - 10) / (far - 10), 0.0), 1.0)
        lo, hi = (0xee, 0xf2, 0xf6), (0xe9, 0xa3, 0x9c)
        return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(lo, hi, strict=True))
    return fill


def _panels(svg: Svg, doc: Mapping[str, Any], nodes: list[Mapping[str, Any]], y: float) -> float:
    """The SLIT distances (between the nodes drawn) and the GPU/NIC path matrix, side by side."""
    x = 0.0
    bottom = y
    if len(nodes) > 1 and any(n.get("distances") for n in nodes):
        ids = [n["id"] for n in nodes]
        cells = [[str((n.get("distances") or {}).get(str(i), "-")) for i in ids] for n in nodes]
        far = max((int(c) for row in cells for c in row if c.isdigit()), default=10)
        labels = [f"node {i}" if len(ids) <= 4 else str(i) for i in ids]
        cw = 40 if len(ids) <= 4 else 28
        gb, right = _grid(svg, x, y, "NUMA distances (SLIT, 10 = local)", labels, cells, _distance_fill(far),
                          lambda _c: INK, cw)
        bottom = max(bottom, gb)
        x = max(right, len("NUMA distances (SLIT, 10 = local)") * CH) + 48
    pm = doc.get("path_matrix") or {}
    labels, cells = list(pm.get("labels") or []), [list(r) for r in pm.get("cells") or []]
    if len(labels) > MAX_MATRIX_DRAWN or (len(labels) > 1 and not cells):
        svg.text(x, y + 12, "GPU/NIC paths", weight="bold", fill=MUTED)
        svg.text(x, y + 12 + LINE, f"{len(labels):,} GPUs and NICs: the matrix is drawn up to {MAX_MATRIX_DRAWN}; "
                 "inspect's text and --json have it", size=11, fill=SEVERITY["warning"])
        bottom = max(bottom, _device_legend(svg, pm, x, y + 12 + LINE) + 4)
    elif len(labels) > 1:
        fabric = any(c not in PCIE_KINDS for row in cells for c in row)
        title = "GPU/NIC paths" + (" (fabric links in violet)" if fabric else "")
        gb, _right = _grid(svg, x, y, title, labels, cells, lambda c: PATH_FILL.get(c, FABRIC_FILL),
                   lambda c: PATH_TEXT.get(c, "#3f2a73"), 44)
        ly = gb + 14
        legend = [("PIX", "1 PCIe bridge"), ("PXB", "PCIe bridges"), ("PHB", "host bridge"),
                  ("NODE", "host bridges, 1 node"), ("SYS", "across sockets")]
        if fabric:
            legend.append(("NV#/XGMI", "GPU fabric link"))
        lx = x
        for k, (kind, meaning) in enumerate(legend):
            if k in (3, 6) and len(labels) < 8 or k == 5 and len(labels) >= 8:  # a narrow matrix: more lines
                lx, ly = x, ly + 16
            svg.rect(lx, ly - 10, 12, 12, PATH_FILL.get(kind, FABRIC_FILL), "#ffffff", sw=0, rx=2)
            svg.text(lx + 16, ly, f"{kind} {meaning}", size=11, fill=MUTED)
            lx += 16 + len(f"{kind} {meaning}") * CH * 11 / 12 + 14
        ly = _device_legend(svg, pm, x, ly)
        bottom = max(bottom, ly + 4)
    return bottom + 10 if bottom > y else y


def _device_legend(svg: Svg, pm: Mapping[str, Any], x: float, y: float) -> float:
    """nvidia-smi's legend under the matrix: GPUi = BDF and model, NICi = BDF, RDMA device, netdev (the
    numbering of every command), and where the GPU numbers differ from PCI bus order; returns its bottom."""
    names = list(pm.get("names") or [])
    if not names:
        return y
    y += 20
    svg.text(x, y, "Devices (the same GPUi/NICi in inspect, launch, audit and emit)", size=11, weight="bold",
             fill=MUTED)
    for name in names[:MAX_MATRIX_DRAWN]:
        y += 14
        svg.text(x, y, name, size=11, fill=MUTED)
    if len(names) > MAX_MATRIX_DRAWN:
        y += 14
        svg.text(x, y, f"... and {len(names) - MAX_MATRIX_DRAWN:,} more (inspect lists them)", size=11, fill=MUTED)
    for line in wrap(f"GPU order: {pm['order_note']}", 100) if pm.get("order_note") else []:
        y += 14
        svg.text(x, y, line, size=11, fill=MUTED)
    return y


def _findings(svg: Svg, doc: Mapping[str, Any], y: float) -> float:
    findings = doc.get("findings") or []
    chars = max(70, int((max(svg.w, 700) - 10 - 16 * CH) / CH))
    if not findings:
        svg.text(0, y + 12, "No findings.", fill="#2e7d32", weight="bold")
        return y + 20
    svg.text(0, y + 12, "Findings (outlined above where they name a node or device)", weight="bold", fill=MUTED)
    y += 20
    for f in findings[:MAX_FINDINGS_DRAWN]:
        color = SEVERITY.get(f.get("severity"), SEVERITY["info"])
        head = f"{f.get('code')} {f.get('severity')}"
        svg.rect(0, y + 1, 4, 14, color, color, rx=1)
        svg.text(10, y + 12, head, weight="bold", fill=color)
        subject = f" [{f['subject']}]" if f.get("subject") else ""
        for line in wrap(str(f.get("message", "")) + subject, chars):
            svg.text(10 + 16 * CH, y + 12, line)
            y += LINE
        y += 3
    if len(findings) > MAX_FINDINGS_DRAWN:
        svg.text(10, y + 12, f"... and {len(findings) - MAX_FINDINGS_DRAWN:,} more findings (inspect lists them all)",
                 fill=MUTED)
        y += LINE + 3
    return y


def sockets_of(topo: Any) -> dict[int, int | None]:
    """Node id -> the physical package of its CPUs (the first CPU's; None when the tree does not say)."""
    out: dict[int, int | None] = {}
    for cpu in topo.cpus:
        if cpu.node is not None and cpu.node not in out:
            out[cpu.node] = cpu.package
    for n in topo.nodes:
        if n.cpus and n.id not in out:
            out[n.id] = None
    return out
