"""inspect --format svg/html and fleet --format html: valid, complete, deterministic, drawn by a real renderer."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

from numatune.render.envelope import SCHEMAS
from numatune.render.picture import SEVERITY, render_svg
from tests.conftest import fixture_root, tree_fixtures

NS = "{http://www.w3.org/2000/svg}"
BIG_TREES = ["256ppc-8n8s4t", "pcp-hpbl920gen8-480cpu", "topo-mi210-xgmi-pcie", "vm-cxl",
             "handmade-launch-2s4gpu-cxl", "32em64t-2n8c+dax+nvme+mic+dimms"]
GOLDEN_TREES = ["vm-cxl", "handmade-launch-2s4gpu-cxl", "topo-mi210-xgmi-pcie"]


def _run(cli, name: str, *args: str) -> str:
    r = cli("--root", str(fixture_root(name)), "inspect", *args)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def _texts(svg: str) -> list[str]:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{NS}text")]


@pytest.mark.parametrize("name", BIG_TREES + ["nvidiagpunumanodes", "fakeheteromemtiers", "vm-two-socket"])
def test_svg_is_valid_and_shows_every_node_and_device(cli, name):
    svg = _run(cli, name, "--format", "svg")
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    doc = json.loads(_run(cli, name, "--json"))
    texts = "\n".join(_texts(svg))
    titles = {t.text for t in root.iter(f"{NS}title")}
    for n in doc["nodes"]:
        assert f"node {n['id']}" in titles, n["id"]
    for d in doc["devices"]:
        assert d["bdf"] in texts, d["bdf"]
        assert any(t.endswith(d["bdf"]) for t in titles), d["bdf"]
    for f in doc["findings"]:
        assert f["code"] in texts
    assert float(root.get("width")) > 300 and float(root.get("height")) > 100


def test_same_tree_same_bytes(cli):
    assert _run(cli, "handmade-launch-2s4gpu-cxl", "-f", "svg") == _run(cli, "handmade-launch-2s4gpu-cxl", "-f", "svg")


@pytest.mark.parametrize("name", GOLDEN_TREES)
def test_svg_golden(cli, golden, name):
    golden(f"{name}/inspect.svg", _run(cli, name, "--format", "svg").replace(str(fixture_root(name)), name))


def _rect_titled(svg: str, title: str) -> ET.Element:
    for rect in ET.fromstring(svg).iter(f"{NS}rect"):
        t = rect.find(f"{NS}title")
        if t is not None and t.text == title:
            return rect
    raise AssertionError(f"no box titled {title!r}")


def test_gpus_and_nic_under_their_nodes_with_findings_marked(cli):
    """The two-socket four-GPU tree: GPUs 0-1 in node 0's box, GPUs 2-3 and the NIC in node 1's, the two GPUs
    that NT002 names outlined in the warning colour."""
    svg = _run(cli, "handmade-launch-2s4gpu-cxl", "--format", "svg")

    def box(title: str) -> tuple[float, float, float, float]:
        r = _rect_titled(svg, title)
        x, y = float(r.get("x")), float(r.get("y"))
        return x, y, x + float(r.get("width")), y + float(r.get("height"))

    def inside(inner: str, outer: str) -> bool:
        a, b = box(inner), box(outer)
        return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]

    for bdf in ("0000:3b:00.0", "0000:18:00.0"):
        assert inside(f"GPU {bdf}", "node 0") and not inside(f"GPU {bdf}", "node 1")
        assert _rect_titled(svg, f"GPU {bdf}").get("stroke") == SEVERITY["warning"]
    for title in ("GPU 0000:86:00.0", "GPU 0000:af:00.0", "NIC 0000:87:00.0"):
        assert inside(title, "node 1") and not inside(title, "node 0")
        assert _rect_titled(svg, title).get("stroke") not in SEVERITY.values()
    texts = _texts(svg)
    assert texts.count("NT002") == 2
    assert "nearest NIC: NIC0 PHB" in texts and "nearest NIC: NIC0 SYS" in texts


def test_cxl_node_drawn_apart_with_its_figures(cli, tmp_path):
    """`inspect -o node.svg` on the CXL guest: CPU-less nodes 2 and 3 in dashed boxes below the sockets, linked to
    their initiators with SLIT distance and HMAT latency/bandwidth (node 3 has no HMAT: said so)."""
    out = tmp_path / "node.svg"
    result = cli("--root", str(fixture_root("vm-cxl")), "inspect", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    svg = out.read_text()
    node3 = _rect_titled(svg, "node 3")
    assert node3.get("class") == "node memory" and node3.get("stroke-dasharray")
    assert float(node3.get("y")) > float(_rect_titled(svg, "node 1").get("y")) + float(
        _rect_titled(svg, "node 1").get("height"))
    texts = _texts(svg)
    assert "distance 28 \u00b7 250 ns \u00b7 20 GB/s" in texts  # node 2 to its HMAT initiator, node 0
    assert "node 2 \u2194 node 0" in texts
    assert texts.count("distance 20 \u00b7 no HMAT") == 2  # node 3: equally near both sockets
    assert "CXL memory 896 MiB  tier 22" in texts
    assert any("region0" in t for t in texts) and any("0000:81:00.0" in t for t in texts)
    assert "its memory: node 3" in texts  # on the CXL device's box, under node 1 where the device hangs off


def test_output_file_format_follows_the_suffix(cli, tmp_path):
    root = str(fixture_root("vm-two-socket"))
    for name, check in (("a.svg", lambda t: ET.fromstring(t).tag == f"{NS}svg"),
                        ("a.html", lambda t: t.startswith("<!DOCTYPE html>") and "<svg" in t),
                        ("a.json", lambda t: json.loads(t)["schema"] == SCHEMAS["inspect"]),
                        ("a.txt", lambda t: "NUMA nodes" in t and "\x1b[" not in t)):
        r = cli("--root", root, "inspect", "-o", str(tmp_path / name))
        assert r.exit_code == 0 and r.stdout == "", r.stderr
        assert check((tmp_path / name).read_text()), name
    r = cli("--root", root, "inspect", "--format", "json", "-o", str(tmp_path / "b.svg"))  # they disagree: exit 2
    assert r.exit_code == 2 and not (tmp_path / "b.svg").exists(), r.stderr
    r = cli("--root", root, "inspect", "--format", "json", "-o", str(tmp_path / "b.out"))  # no format named: --format
    assert json.loads((tmp_path / "b.out").read_text())["schema"] == SCHEMAS["inspect"]
    r = cli("--root", root, "inspect", "-o", str(tmp_path / "missing" / "x.svg"))
    assert r.exit_code == 3 and r.stderr.startswith("numatune: error: cannot write"), r.stderr


def test_html_is_self_contained(cli):
    html = _run(cli, "handmade-launch-2s4gpu-cxl", "--format", "html")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    lowered = html.lower()
    for fetch in ("<script", "<link", "src=", "@import", "url("):
        assert fetch not in lowered, fetch
    assert lowered.count("http") == lowered.count('xmlns="http://www.w3.org/2000/svg"')
    svg = html[html.index("<svg"): html.index("</svg>") + 6]
    ET.fromstring(svg)
    for heading in ("NUMA nodes", "Distances", "HMAT", "Devices", "GPU/NIC paths", "Findings"):
        assert f"<h2>{heading}" in html
    assert html.count("NT002") >= 4  # twice on the picture, twice in the table


def test_fleet_html_one_row_per_group_with_its_picture(cli, tmp_path):
    for name in ("vm-two-socket", "vm-cxl", "handmade-launch-2s4gpu-cxl"):
        (tmp_path / f"{name}.json").write_text(_run(cli, name, "--json"))
    (tmp_path / "copy.json").write_text((tmp_path / "vm-cxl.json").read_text())
    r = cli("fleet", str(tmp_path), "--format", "html")
    assert r.exit_code == 0, r.stderr
    html = r.stdout
    assert "numatune fleet: 4 nodes, 3 topologies" in html
    assert html.count("<svg") == 3 and html.count("</svg>") == 3
    for g in ("group A", "group B", "group C"):
        assert g in html
    for start in range(3):
        i = [k for k in range(len(html)) if html.startswith("<svg", k)][start]
        ET.fromstring(html[i: html.index("</svg>", i) + 6])


def _png_size_and_ink(data: bytes) -> tuple[int, int, float]:
    """(width, height, share of non-white pixels) of an 8-bit RGB(A) PNG, decoded with zlib alone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos: pos + 8])
        body = data[pos + 8: pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    ink = 0
    for row in range(height):
        f = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1: (row + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        ink += sum(1 for x in range(0, stride, bpp) if min(line[x: x + 3]) < 200)
        prev = line
    return width, height, ink / (width * height)


@pytest.mark.skipif(shutil.which("rsvg-convert") is None,
                    reason="rsvg-convert not installed (Debian librsvg2-bin; scripts/test.sh installs it)")
@pytest.mark.parametrize("name", ["handmade-launch-2s4gpu-cxl", "vm-cxl", "256ppc-8n8s4t"])
def test_rendered_by_rsvg(cli, tmp_path, name):
    svg = tmp_path / "node.svg"
    svg.write_text(_run(cli, name, "--format", "svg"))
    png = tmp_path / "node.png"
    subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], check=True, timeout=60)
    width, height = struct.unpack(">II", png.read_bytes()[16:24])
    root = ET.fromstring(svg.read_text())
    assert abs(width - float(root.get("width"))) <= 1 and abs(height - float(root.get("height"))) <= 1
    assert 500 <= width <= 2400 and 200 <= height <= 4000, (width, height)
    small = tmp_path / "small.png"  # decoding in pure Python: a quarter-size rendering is enough to see ink
    subprocess.run(["rsvg-convert", "-z", "0.25", str(svg), "-o", str(small)], check=True, timeout=60)
    _w, _h, ink = _png_size_and_ink(small.read_bytes())
    assert 0.02 < ink < 0.6, ink  # text and boxes drawn, not a blank (or black) page


def test_render_without_sockets_or_devices():
    """fleet draws from reports alone (no socket map); a minimal document still draws."""
    doc = {"source": "x", "cpu": {"online": [0, 1], "sockets": [0]}, "nodes": [{"id": 0, "cpus": [0, 1],
           "memory_total_kib": 1048576, "kind": "dram"}], "devices": [], "findings": []}
    root = ET.fromstring(render_svg(doc))
    assert "NUMA nodes with CPUs" in ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def _big_doc(cli) -> dict:
    """The 2-socket tree's report grown to 256 CPUs, 8 GPUs and 8 NICs (one pair per PCIe switch) with an
    NVLink-style fabric between the GPUs: the size the picture must stay readable at (made here, labelled)."""
    import copy

    doc = json.loads(_run(cli, "handmade-launch-2s4gpu-cxl", "--json"))
    doc["nodes"][0]["cpus"] = list(range(0, 64)) + list(range(128, 192))
    doc["nodes"][1]["cpus"] = list(range(64, 128)) + list(range(192, 256))
    gpu = next(d for d in doc["devices"] if d["kind"] == "gpu")
    nic = next(d for d in doc["devices"] if d["kind"] == "nic")
    devices = []
    for i in range(8):
        bridge = f"pci0000:{0x10 + 0x20 * i:02x}"
        devices.append({**copy.deepcopy(gpu), "bdf": f"0000:{0x18 + 0x20 * i:02x}:00.0", "numa_node": i // 4,
                        "host_bridge": bridge})
        devices.append({**copy.deepcopy(nic), "bdf": f"0000:{0x19 + 0x20 * i:02x}:00.0", "numa_node": i // 4,
                        "host_bridge": bridge, "netdevs": [f"ibp{i}s0"], "rdma": [f"mlx5_{i}"],
                        "vendor_name": "Mellanox Technologies", "device_name": "MT2910 Family [ConnectX-7]"})
    doc["devices"] = devices
    order = [d for d in devices if d["kind"] == "gpu"] + [d for d in devices if d["kind"] == "nic"]

    def path(a: dict, b: dict) -> str:
        if a is b:
            return "X"
        if a["kind"] == b["kind"] == "gpu":
            return "NV18"
        if a["host_bridge"] == b["host_bridge"]:
            return "PIX"
        return "NODE" if a["numa_node"] == b["numa_node"] else "SYS"

    doc["path_matrix"] = {"labels": [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(8)],
                          "devices": [d["bdf"] for d in order], "cells": [[path(a, b) for b in order] for a in order],
                          "numa_nodes": [d["numa_node"] for d in order]}
    doc["findings"] = [{"code": "NT001", "severity": "error", "subject": "0000:79:00.0", "message": "made up",
                        "fix": ""}]
    return doc


def test_eight_gpus_eight_nics_256_cpus_stay_readable(cli):
    svg = render_svg(_big_doc(cli), {0: 0, 1: 1})
    root = ET.fromstring(svg)
    assert float(root.get("width")) <= 1300  # two sockets side by side, the 16x16 path matrix below
    texts = _texts(svg)
    assert "CPUs 0-63,128-191 (128)" in texts and "CPUs 64-127,192-255 (128)" in texts
    assert "NV18 to GPU 1-7" in texts and "NV18 to GPU 0-6" in texts  # fabric peers, collapsed
    assert sum(t.startswith("nearest NIC: NIC") and t.endswith(" PIX") for t in texts) == 8
    assert any(t == "NIC3  ConnectX-7" for t in texts)
    assert _rect_titled(svg, "NIC 0000:79:00.0").get("stroke") == SEVERITY["error"]
    assert _text_fits(root) > 60


def _text_fits(root: ET.Element) -> int:
    """No text runs out of the node or device box it is written in (monospace: characters x CH x size / 12);
    returns how many texts were checked."""
    from numatune.render.picture import CH

    boxes = [(float(r.get("x")), float(r.get("y")), float(r.get("x")) + float(r.get("width")),
              float(r.get("y")) + float(r.get("height"))) for r in root.iter(f"{NS}rect")
             if "device" in (r.get("class") or "") or "node" in (r.get("class") or "")]
    checked = 0
    for t in root.iter(f"{NS}text"):
        x, y = float(t.get("x")), float(t.get("y"))
        inner = [b for b in boxes if b[0] <= x <= b[2] and b[1] <= y <= b[3]]
        if inner and not t.get("text-anchor"):
            box = min(inner, key=lambda b: b[2] - b[0])
            width = len("".join(t.itertext())) * CH * float(t.get("font-size") or 12) / 12
            assert x + width <= box[2], ("".join(t.itertext()), x + width, box[2])
            checked += 1
    return checked


@pytest.mark.parametrize("name", BIG_TREES)
def test_text_stays_in_its_box(cli, name):
    assert _text_fits(ET.fromstring(_run(cli, name, "-f", "svg"))) >= 2


def test_dax_memory_that_is_no_node_is_listed(cli):
    texts = _texts(_run(cli, "32em64t-2n8c+dax+nvme+mic+dimms", "-f", "svg"))
    assert "dax0.0  nvdimm, device_dax, 100 GiB, nd:region0, target node 4" in texts
    assert any(t.startswith("dax1.4  nvdimm, kmem") for t in texts)


def test_readme_picture_is_current(cli):
    """docs/inspect-2s4gpu-cxl.svg (shown in the README) is what this version draws for that fixture."""
    from tests.conftest import PROJECT

    archive = "fixtures/handmade-launch-2s4gpu-cxl.tar.gz"
    r = cli("--root", str(PROJECT / archive), "inspect", "-f", "svg")
    assert r.exit_code == 0, r.stderr
    committed = (PROJECT / "docs" / "inspect-2s4gpu-cxl.svg").read_text()
    assert r.stdout.replace(str(PROJECT / archive), archive) == committed, (
        "regenerate: NUMATUNE_PCI_IDS= numatune --root fixtures/handmade-launch-2s4gpu-cxl.tar.gz inspect "
        "-o docs/inspect-2s4gpu-cxl.svg")
    assert "docs/inspect-2s4gpu-cxl.svg" in (PROJECT / "README.md").read_text()


def test_links_never_cross_a_row_of_boxes(cli):
    """A CPU-less node whose initiator sits in an upper line of boxes (8 nodes in one socket, 4 a line) is not
    wired across the lower line: the figures go in its box. One whose initiator is in the bottom line is wired.
    (The POWER7 tree's report plus two hand-made CPU-less nodes.)"""
    doc = json.loads(_run(cli, "256ppc-8n8s4t", "--json"))
    for nid, initiator in ((20, 0), (21, 12)):
        doc["nodes"].append({"id": nid, "cpus": [], "memory_total_kib": 1 << 26, "kind": "cxl", "tier": 22,
                             "distances": {str(n["id"]): 30 for n in doc["nodes"]} | {str(nid): 10},
                             "hmat": [{"access_class": 1, "initiators": [initiator], "read_latency_ns": 300,
                                       "read_bandwidth_mbps": 25000}]})
    svg = render_svg(doc, {n["id"]: -1 for n in doc["nodes"] if n["cpus"]})
    texts = _texts(svg)
    at = texts.index("to node 0:")  # node 0 is in the upper line: the figures are written in node 20's box
    assert texts[at + 1] == "  distance 30 \u00b7 300 ns \u00b7 25 GB/s"
    assert "node 21 \u2194 node 12" in texts and "node 20 \u2194 node 0" not in texts  # node 12 in the lower line
    assert len(list(ET.fromstring(svg).iter(f"{NS}line"))) == 1 + sum(t.startswith("pci") for t in texts)


def test_gpu_memory_nodes_name_their_gpu(cli):
    """POWER9 + NVLink GPUs: six CPU-less GPU-memory nodes, each equally far (80) from both sockets and without
    HMAT: no thicket of twelve lines; each box names its GPU as the GPU's box does and the shared distance."""
    svg = _run(cli, "nvidiagpunumanodes", "-f", "svg")
    texts = _texts(svg)
    assert "NVIDIA GPU5 0035:05:00.0 memory" in texts and "GPU5  10de:0000" in texts
    assert texts.count("to nodes 0,8:") == 6
    assert not any("\u2194" in t for t in texts)


def test_xgmi_fabric_drawn_from_the_path_matrix(cli):
    """The MI210 tree: two groups of four GPUs joined by XGMI (from the KFD io_links), grouped under their KFD CPU
    agent; each GPU names its fabric peers and the link bandwidth; the matrix cells are violet."""
    svg = _run(cli, "topo-mi210-xgmi-pcie", "-f", "svg")
    texts = _texts(svg)
    assert "XGMI to GPU 1-3 \u00b7 50 GB/s" in texts and "XGMI to GPU 4-6 \u00b7 50 GB/s" in texts
    assert "KFD CPU agent 0" in texts and "KFD CPU agent 1" in texts
    assert texts.count("XGMI") == 24  # 2 x 4 x 3 matrix cells
    assert "NV#/XGMI GPU fabric link" in texts


def test_cpu_kinds_per_node_when_the_report_has_them():
    """Hybrid CPUs (the document's cpu_kinds, when present): each node lists which of its CPUs are which kind,
    most performant first; one kind adds nothing. (A hand-made document.)"""
    doc = {"source": "hybrid", "cpu": {"online": list(range(8)), "sockets": [0]},
           "nodes": [{"id": 0, "cpus": list(range(8)), "memory_total_kib": 1 << 24, "kind": "dram"}],
           "cpu_kinds": {"kinds": [
               {"rank": 1, "role": "efficiency", "cpus": [4, 5, 6, 7], "name": "Cortex-A510"},
               {"rank": 0, "role": "performance", "cpus": [0, 1, 2, 3], "name": "Cortex-X3"}]},
           "devices": [], "findings": []}
    texts = _texts(render_svg(doc, {0: 0}))
    at = texts.index("CPUs 0-7 (8)")
    assert texts[at + 1: at + 3] == ["Cortex-X3 (performance): 0-3", "Cortex-A510 (efficiency): 4-7"]
    doc["cpu_kinds"]["kinds"] = doc["cpu_kinds"]["kinds"][:1]
    assert not any("Cortex" in t for t in _texts(render_svg(doc, {0: 0})))


def test_cpu_kinds_drawn_from_a_real_hybrid_report(cli):
    """The field names inspect writes are the ones the picture reads: the GB10 tree's node lists its X925 and
    A725 CPUs as `inspect` groups them."""
    texts = _texts(_run(cli, "nvidia-dgx-gb10", "--format", "svg"))
    at = texts.index("CPUs 0-19 (20)")
    drawn = " ".join(t.strip() for t in texts[at + 1: at + 5])  # a kind wraps onto two lines in the node box
    assert drawn == "Cortex-X925 (performance): 5-9,15-19 Cortex-A725 (efficiency): 0-4,10-14"


def _boxes_overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize("name", tree_fixtures())
def test_link_labels_never_overlap(cli, name):
    """Every link label's box (class link-label) against every other: none intersect, on every fixture (the
    CXL trees' "distance 20 · no HMAT" labels were placed by the midpoint of their line, then drawn where the
    line crosses their lane, over their neighbours). Each label's text fits its box."""
    from numatune.render.picture import CH

    root = ET.fromstring(_run(cli, name, "-f", "svg"))
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
             for r in root.iter(f"{NS}rect") if r.get("class") == "link-label"]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _boxes_overlap(a, b), (name, a, b)
    texts = list(root.iter(f"{NS}text"))
    for box in boxes:
        inside = [t for t in texts if box[0] <= float(t.get("x")) <= box[0] + box[2]
                  and box[1] <= float(t.get("y")) <= box[1] + box[3] and t.get("text-anchor") == "middle"]
        assert len(inside) >= 2, (name, box)
        for t in inside:
            assert len("".join(t.itertext())) * CH * 11 / 12 <= box[2], (name, "".join(t.itertext()), box)
    if name in ("vm-cxl-switch", "vm-cxl-pool", "handmade-cxl-8gpu-x8link"):
        assert boxes, name  # the trees whose labels overlapped do draw labels
