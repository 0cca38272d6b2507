"""`inspect --format html` and `fleet --format html`: one self-contained file (inline CSS and SVG, no script,
no fetch) to attach to a ticket: the picture, then the tables and the findings, all from the inspect document."""

from __future__ import annotations

from numatune.cpulist import format_cpulist
from numatune.model.topology import HMAT_UNKNOWN
from numatune.render.picture import (
    KIND_LABEL,
    MAX_MATRIX_DRAWN,
    MAX_NODES_DRAWN,
    PATH_FILL,
    SEVERITY,
    device_name,
    esc,
    gib,
    render_svg,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from numatune.analysis.fleet import Fleet, Group

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#222;margin:24px;max-width:1500px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;color:#444}
p.sub{color:#666;margin:0 0 16px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px}
th,td{border-bottom:1px solid #e3e3e3;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600;border-bottom:1px solid #999}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,td.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
.sev{font-weight:700}
.picture{overflow-x:auto;border:1px solid #e3e3e3;padding:8px;background:#fff}
.picture svg{max-width:100%;height:auto}
"""


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = (),
           mono: Sequence[int] = ()) -> str:
    """Cells are escaped here; a cell given as ("raw", html) is inserted as is."""
    numeric, mono = frozenset(numeric), frozenset(mono)  # looked up once a cell: a tuple of N columns was N^3
    out = ["<table>", "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = "num" if i in numeric else "mono" if i in mono else ""
            attr = f' class="{cls}"' if cls else ""
            body = cell[1] if isinstance(cell, tuple) else esc(cell)
            cells.append(f"<td{attr}>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _v(value: Any) -> str:
    return "-" if value is None else str(value)


def findings_table(findings: Sequence[Mapping[str, Any]], with_count: bool = False) -> str:
    if not findings:
        return "<p>No findings.</p>"
    rows = []
    for f in findings:
        sev = str(f.get("severity", ""))
        badge = ("raw", f'<span class="sev" style="color:{SEVERITY.get(sev, "#222")}">{esc(sev)}</span>')
        row = [f.get("code", ""), badge]
        if with_count:
            row.append(f"{f.get('count')}")
        else:
            row.append(f.get("subject") or "-")
        row += [f.get("message", ""), f.get("fix") or "-"] if not with_count else [f.get("message", "")]
        rows.append(row)
    head = ["code", "severity", "nodes" if with_count else "subject", "finding"] + ([] if with_count else ["fix"])
    return _table(head, rows, mono=(0, 2) if not with_count else (0,))


def inspect_sections(doc: Mapping[str, Any]) -> list[str]:
    """The tables of `inspect` (nodes, distances, HMAT, devices, paths, CXL, settings, findings)."""
    nodes = doc.get("nodes") or []
    out = ["<h2>NUMA nodes</h2>", _table(
        ["node", "kind", "CPUs", "memory", "free", "tier", "weight"],
        [[str(n["id"]), KIND_LABEL.get(n.get("kind"), n.get("kind")), format_cpulist(n.get("cpus") or []) or "-",
          gib(n.get("memory_total_kib")), gib(n.get("memory_free_kib")), _v(n.get("tier")),
          _v(n.get("interleave_weight"))] for n in nodes], numeric=(0, 3, 4, 5, 6), mono=(2,))]
    shown = nodes[:MAX_NODES_DRAWN]  # as the picture: N^2 cells, the first nodes only (--json has every one)
    ids = [n["id"] for n in shown]
    if len(nodes) > 1 and any(n.get("distances") for n in shown):
        out += ["<h2>Distances (SLIT; 10 = local)</h2>", _table(
            ["node"] + [str(i) for i in ids],
            [[str(n["id"])] + [_v((n.get("distances") or {}).get(str(i))) for i in ids] for n in shown],
            numeric=tuple(range(1, len(ids) + 1)))]
        if len(nodes) > len(shown):
            out.append(f'<p class="sub">Distances between the first {len(shown)} of {len(nodes):,} nodes; '
                       "inspect's text and --json have them all</p>")
    hmat = [(n["id"], e) for n in nodes for e in n.get("hmat") or []]
    if hmat:
        out += ["<h2>HMAT (best figures from the initiators)</h2>", _table(
            ["target", "access", "initiators", "read ns", "write ns", "read MB/s", "write MB/s"],
            [[str(t), f"access{e.get('access_class')}", format_cpulist(e.get("initiators") or []) or "-",
              _v(e.get("read_latency_ns")), _v(e.get("write_latency_ns")), _v(e.get("read_bandwidth_mbps")),
              _v(e.get("write_bandwidth_mbps"))] for t, e in hmat], numeric=(0, 3, 4, 5, 6))]
        if any(e.get("unknown_reason") for _, e in hmat):
            out.append(f"<p>{esc(HMAT_UNKNOWN)}</p>")
    devices = doc.get("devices") or []
    if devices:
        rows = []
        for d in devices:
            node = d.get("numa_node")
            node_s = str(node) if node is not None else (
                f"{d['inferred_node']}?" if d.get("inferred_node") is not None else "-")
            link = d.get("link") or {}
            link_s = (f"{link.get('current_speed') or '?'} x{link.get('current_width') or '?'}"
                      if link.get("current_speed") or link.get("current_width") else "-")
            rows.append([d["bdf"], d["kind"], node_s, device_name(d),
                         ", ".join(list(d.get("netdevs") or []) + list(d.get("rdma") or [])
                                   + list(d.get("nvme") or [])) or "-",
                         link_s, format_cpulist(d.get("local_cpus") or []) or "-", d.get("host_bridge") or "-"])
        out += ["<h2>Devices (node? = inferred)</h2>", _table(
            ["BDF", "kind", "node", "name", "interfaces", "link", "local CPUs", "host bridge"], rows,
            mono=(0, 6, 7))]
    pm = doc.get("path_matrix") or {}
    labels, matrix = pm.get("labels") or [], pm.get("cells") or []
    if len(labels) > MAX_MATRIX_DRAWN and matrix:
        out += ["<h2>GPU/NIC paths</h2>", f'<p class="sub">{len(labels):,} GPUs and NICs: the matrix is shown up to '
                f"{MAX_MATRIX_DRAWN}; inspect's text and --json have it</p>"]
    elif len(labels) > 1 and matrix:
        rows = []
        for i, lab in enumerate(labels):
            cells = []
            for cell in matrix[i] if i < len(matrix) else []:
                fill = PATH_FILL.get(cell, "#d9ccef")
                cells.append(("raw", f'<span style="background:{fill};padding:1px 4px">{esc(cell)}</span>'))
            rows.append([lab, *cells, _v((pm.get("numa_nodes") or [None] * len(labels))[i])])
        legend = "; ".join(f"{k}: {v}" for k, v in (pm.get("legend") or {}).items() if k != "X")
        out += ["<h2>GPU/NIC paths</h2>", _table(["", *labels, "NUMA node"], rows),
                f'<p class="sub">{esc(legend)}</p>']
    if pm.get("cells_note"):
        out += [f'<p class="sub">{esc(pm["cells_note"])}</p>']
    if pm.get("names"):  # the numbering every command uses: GPUi = BDF and model, NICi = BDF, RDMA, netdev
        out += ['<p class="sub">' + "<br>".join(esc(x) for x in pm["names"]) + "</p>"]
    if pm.get("order_note"):
        out += [f'<p class="sub">GPU order: {esc(pm["order_note"])}</p>']
    cxl = doc.get("cxl") or {}
    if cxl.get("memdevs") or cxl.get("regions") or cxl.get("dax"):
        rows = [[m.get("name"), "memdev", f"ram {gib((m.get('ram_size') or 0) // 1024)}, pmem "
                 f"{gib((m.get('pmem_size') or 0) // 1024)}", f"PCI {m.get('pci_bdf') or '?'}"]
                for m in cxl.get("memdevs") or []]
        rows += [[r.get("name"), "region", f"{gib((r.get('size') or 0) // 1024)} {r.get('mode') or '?'}",
                  f"memdevs {', '.join(r.get('memdevs') or []) or '?'} \u2192 nodes "
                  f"{', '.join(str(x) for x in r.get('nodes') or []) or '-'}"] for r in cxl.get("regions") or []]
        rows += [[x.get("name"), f"dax ({x.get('backing')})", f"{gib((x.get('size') or 0) // 1024)} "
                  f"{x.get('mode') or '?'}", f"\u2192 node {_v(x.get('target_node'))}"] for x in cxl.get("dax") or []]
        out += ["<h2>CXL and DAX memory</h2>", _table(["name", "what", "size", "where"], rows, mono=(0,))]
    settings = doc.get("settings") or {}
    shown = [[k, str(v)] for k, v in settings.items() if v is not None]
    if shown:
        out += ["<h2>Kernel</h2>", _table(["setting", "value"], shown, mono=(0, 1))]
    out += ["<h2>Findings</h2>", findings_table(doc.get("findings") or [])]
    return out


def inspect_html(doc: Mapping[str, Any], sockets: Mapping[int, int | None] | None = None) -> str:
    title = f"numatune inspect: {doc.get('source', '')}"
    cpu = doc.get("cpu") or {}
    sub = (f"{esc(cpu.get('model') or 'unknown CPU model')} \u00b7 numatune {esc(doc.get('numatune_version', ''))}"
           f" \u00b7 {'live node' if doc.get('live') else 'saved tree'}")
    body = [f"<h1>{esc(title)}</h1>", f'<p class="sub">{sub}</p>',
            f'<div class="picture">{_inline(render_svg(doc, sockets))}</div>', *inspect_sections(doc)]
    return _page(title, body)


def _inline(svg: str) -> str:
    return svg.rstrip("\n")


def _example_picture(g: Group) -> str:
    """The picture of a group's first report, or why it is not drawn: a stranger's report whose fields the
    picture reads have other types than inspect --json writes (render.picture.check_picture)."""
    if not g.example:
        return ""
    from numatune.errors import InputError
    from numatune.model.document import Doc
    from numatune.render.picture import check_picture

    try:
        check_picture(Doc(g.example, f"the report of {g.nodes[0]}"))
    except InputError as exc:
        return f'<p class="sub">picture not drawn: {esc(exc.message)}</p>'
    return f'<div class="picture">{_inline(render_svg(g.example, title=f"group {g.id}: {g.nodes[0]}"))}</div>'


def fleet_html(fleet: Fleet, unreadable: Sequence[tuple[str, str]]) -> str:
    """One row per topology group: who is in it, how it differs from the reference, its findings, its picture
    (drawn from the group's first node's report)."""
    kinds = "topology" if len(fleet.groups) == 1 else "topologies"
    title = f"numatune fleet: {fleet.total} nodes, {len(fleet.groups)} {kinds}"
    body = [f"<h1>{esc(title)}</h1>"]
    if fleet.outliers:
        body.append(f'<p class="sub">outliers ({len(fleet.outliers)}): {esc(", ".join(fleet.outliers))}</p>')
    for note in fleet.notes:
        body.append(f'<p class="sub">note: {esc(note)}</p>')
    rows = []
    for g in fleet.groups:
        tag = "reference" if g is fleet.groups[0] else "outliers"
        who = (f"<b>group {esc(g.id)}</b> ({tag})<br><code>{esc(g.fingerprint)}</code><br>"
               f"{len(g.nodes)} node{'s' if len(g.nodes) != 1 else ''}: {esc(', '.join(g.nodes))}")
        shape = "<br>".join(f"{esc(k)}: {esc(v)}" for k, v in g.shape.items())
        if g.differs:
            shape += "<br><b>differs from group A:</b><br>" + "<br>".join(
                f"{esc(k)}: {esc(a if a is not None else '(absent)')} \u2192 {esc(b if b is not None else '(absent)')}"
                for k, a, b in g.differs)
        shape += "<br>kernels: " + esc(", ".join(f"{k} x{v}" for k, v in g.kernels.items()))
        found = findings_table([{"code": f.code, "severity": f.severity, "message": f.message,
                                 "count": f"{len(f.nodes)}/{len(g.nodes)}"} for f in g.findings], with_count=True)
        picture = _example_picture(g)
        rows.append(f"<tr><td>{who}</td><td>{shape}</td><td>{found}</td></tr>"
                    f"<tr><td colspan=\"3\">{picture}</td></tr>")
    body.append("<table>\n<tr><th>group</th><th>shape</th><th>findings</th></tr>\n" + "\n".join(rows) + "\n</table>")
    fabric = fleet.fabric
    if fabric is not None and (fabric.domains or fabric.split or fabric.unplaced):
        typical = fabric.typical
        body.append(f"<h2>NVLink domains</h2><p class=\"sub\">{len(fabric.domains)} domain(s), keyed by cluster UUID "
                    f"and clique; typical size {typical} nodes</p>")
        domain_rows = []
        for d in fabric.domains:
            tags = ", ".join(t for t, on in (("partial", d.size < typical), ("degraded", bool(d.excluded))) if on)
            domain_rows.append([d.key, str(d.size), str(len(d.healthy)), tags or "-", ", ".join(d.healthy),
                                "; ".join(f"{n}: {w}" for n, w in d.excluded) or "-"])
        for name, domains in fabric.split:
            domain_rows.append(["-", "1", "0", "GPUs disagree", "", f"{name}: {', '.join(domains)}"])
        for name, why in fabric.unplaced:
            domain_rows.append(["-", "1", "0", "no domain", "", f"{name}: {why}"])
        body.append(_table(["domain (cluster UUID.clique)", "nodes", "healthy", "", "healthy nodes", "not healthy"],
                           domain_rows, numeric=(1, 2), mono=(0,)))
        body += [f'<p class="sub">{esc(note)}</p>' for note in fabric.notes]
    if unreadable:
        from numatune.render.fleet_out import unlisted

        body += ["<h2>Unreadable</h2>", _table(["source", "reason"], [[w, r] for w, r in unreadable], mono=(0,))]
        if unlisted(unreadable):
            body.append(f'<p class="sub">{unlisted(unreadable):,} more, counted, not listed</p>')
    return _page(title, body)
