"""One identity per device: GPUi is the same device in inspect (text, JSON, SVG, HTML), launch, emit.

The expected order is worked out from the tree's own files by tests/gpu_oracle.py, not by numatune's
ordering function.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from numatune.system.host import natural_key
from tests.conftest import FIXTURES, fixture_copy, fixture_root, tree_fixtures, write_process
from tests.gpu_oracle import gpu_numbering, hex_key, kfd_nodes

DGX = "handmade-dgx-h100-ids"


def expected_gpus(root: Path, devices: list[dict]) -> list[str]:
    gpus = [(d["bdf"], int(d["vendor_id"], 16) if d["vendor_id"] else None)  # the JSON writes ids as "0x10de"
            for d in devices if d["kind"] == "gpu"]
    return gpu_numbering(root, gpus)


def _gpu_trees() -> list[str]:
    out = []
    for name in tree_fixtures():
        root = fixture_root(name)
        pci = root / "sys" / "bus" / "pci" / "devices"
        classes = [p / "class" for p in pci.iterdir()] if pci.is_dir() else []
        if any(c.is_file() and c.read_text().startswith(("0x0300", "0x0302")) for c in classes) or kfd_nodes(root):
            out.append(name)
    return out


GPU_TREES = _gpu_trees()


def test_the_gpu_trees_are_found():
    assert {"handmade-launch-2s4gpu-cxl", "topo-mi210-xgmi-pcie", DGX, "h100-vm-1gpu"} <= set(GPU_TREES)


@pytest.mark.parametrize("name", GPU_TREES)
def test_gpu_i_is_one_device_in_every_command(cli, name):
    root = fixture_root(name)
    r = str(root)
    doc = json.loads(cli("--root", r, "inspect", "--json").stdout)
    order = expected_gpus(root, doc["devices"])
    if not order:
        pytest.skip("display-class devices only")
    pm = doc["path_matrix"]
    inspect_json = {lab: bdf for lab, bdf in zip(pm["labels"], pm["devices"], strict=True) if lab.startswith("GPU")}
    assert inspect_json == {f"GPU{i}": b for i, b in enumerate(order)} or len(order) == 1
    if len(order) > 1:  # one GPU has no matrix; the legend and the picture still name it
        assert [x.split(" ")[2] for x in pm["names"] if x.startswith("GPU")] == order

    text = cli("--root", r, "inspect").stdout
    for i, bdf in enumerate(order):
        assert f"GPU{i} = {bdf} " in text, (name, i)
    svg = cli("--root", r, "inspect", "--format", "svg").stdout
    pictured = dict(re.findall(r">(GPU\d+)  [^<]*</text>\n<text[^>]*>([0-9a-f]+:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])", svg))
    assert pictured == {f"GPU{i}": b for i, b in enumerate(order)}, name
    if len(order) > 1:  # the legend under the picture's path matrix
        assert [b for b in re.findall(r">GPU\d+ = (\S+) ", svg)] == order, name
    html = cli("--root", r, "inspect", "--format", "html").stdout
    for i, bdf in enumerate(order):
        assert f"GPU{i} = {bdf} " in html, (name, i)

    slurm = json.loads(cli("--root", r, "emit", "slurm", "--json").stdout)
    gres = [g for g in slurm["gres"] if g["name"] == "gpu"]
    assert [g["bdf"] for g in gres] == order, name
    nvidia_info = root / "proc" / "driver" / "nvidia" / "gpus"
    for i, g in enumerate(gres):
        info = nvidia_info / g["bdf"] / "information"
        if info.is_file():  # File= is the driver's own minor number
            minor = re.search(r"Device Minor:\s*(\d+)", info.read_text()).group(1)
            assert g["file"] == f"/dev/nvidia{minor}"
        elif g["file"] and g["file"].startswith("/dev/nvidia"):
            assert g["file"] == f"/dev/nvidia{i}"

    for i, bdf in enumerate(order):
        out = cli("--root", r, "launch", "--json", "--cpu-bind", "none", "--mem-policy", "none", "--best-effort",
                  "--", "true", env={"LOCAL_RANK": str(i)})
        assert out.exit_code == 0, out.stderr
        assert json.loads(out.stdout)["gpu"]["bdf"] == bdf, (name, i)

    # findings and irq name a GPU as the views above do: GPUi, its address beside; never "GPU <address>"
    findings = doc["findings"] + json.loads(cli("--root", r, "check", "--json").stdout)["findings"]
    for f in findings:
        for i, bdf in enumerate(order):
            assert f"GPU {bdf}" not in f["message"], (name, f["code"], f["message"])
            if bdf in f["message"] and "GPU" in f["message"].split(bdf)[0][-6:]:
                assert f"GPU{i} {bdf}" in f["message"], (name, f["message"])
    irq = json.loads(cli("--root", r, "irq", "--json").stdout)
    labels = {d["bdf"]: d["label"] for d in irq["devices"] if d["kind"] == "gpu"}
    for i, bdf in enumerate(order):
        if bdf in labels:
            assert labels[bdf] == f"GPU{i} {bdf}", (name, labels[bdf])


@pytest.mark.parametrize("name", GPU_TREES)
def test_audit_names_a_rank_gpu_as_inspect_does(cli, tmp_path, name):
    """A hand-made process (pid 4242) with LOCAL_RANK=i on each GPU tree: audit's GPU is GPUi, the device
    the oracle puts i-th, in JSON (`label`) and text."""
    root = fixture_copy(name, tmp_path / "root")
    doc = json.loads(cli("--root", str(root), "inspect", "--json").stdout)
    order = expected_gpus(root, doc["devices"])
    if not order:
        pytest.skip("display-class devices only")
    for i, bdf in enumerate(order):
        write_process(root, 4242, f"LOCAL_RANK={i}\x00")
        r = cli("--root", str(root), "audit", "4242", "--json")
        assert r.exit_code == 0, r.stderr
        gpu = json.loads(r.stdout)["processes"][0]["gpu"]
        assert (gpu["bdf"], gpu["label"]) == (bdf, f"GPU{i}"), (name, i)
    assert f"GPU{len(order) - 1} {order[-1]} (node" in cli("--root", str(root), "audit", "4242").stdout


def _vendor_block(name: str) -> str:
    doc = (FIXTURES / "nvidia-smi-topo.md").read_text()
    return doc.split(f"## {name}\n", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0] + "\n"


def test_dgx_h100_numbering_matches_its_nvidia_smi(cli):
    """The hand-made DGX H100 tree (real bus ids and NIC names) against that machine's public topo -m:
    GPUi's NUMA affinity, and the NIC it reaches over PXB (nvidia-smi's NICk is mlx5_k on a DGX H100:
    the User Guide's port table pairs GPU0-7 with mlx5_0,3,4,5,6,9,10,11, the topo -m's PXB cells with
    NIC0,3,4,5,6,9,10,11)."""
    from numatune.analysis.vendor import parse_nvidia_smi_topo

    theirs = parse_nvidia_smi_topo(_vendor_block("dgx-h100-nvswitch-gpu-block"))
    doc = json.loads(cli("--root", str(fixture_root(DGX)), "inspect", "--json").stdout)
    pm = doc["path_matrix"]
    rdma = {d["bdf"]: d["rdma"] for d in doc["devices"]}
    labels, cells = pm["labels"], pm["cells"]
    for gpu in theirs.gpus:
        row = labels.index(gpu)
        assert str(pm["numa_nodes"][row]) == theirs.numa_affinity[gpu], gpu
        pxb = [col for col in theirs.labels if col.startswith("NIC") and theirs.cell(gpu, col) == "PXB"]
        ours = [pm["devices"][j] for j, c in enumerate(cells[row]) if labels[j].startswith("NIC") and c == "PXB"]
        assert [f"mlx5_{int(col[3:])}" for col in pxb] == [r for bdf in ours for r in rdma[bdf]], gpu
    # The test can fail: the directory listing's natural order (hex read as decimal) puts 9d second.
    gpus = [d["bdf"] for d in doc["devices"] if d["kind"] == "gpu"]
    natural = sorted(gpus, key=natural_key)
    assert natural[:2] == ["0000:1b:00.0", "0000:9d:00.0"] and natural != sorted(gpus, key=hex_key)


def test_launch_resolves_uuids_from_a_saved_nvml_record(cli, tmp_path):
    """The H100 snapshot's NVML record without /proc/driver/nvidia (as a container sees it): the UUID
    forms of CUDA_VISIBLE_DEVICES resolve, as audit resolves them."""
    import shutil

    root = fixture_copy("h100-vm-1gpu", tmp_path)
    shutil.rmtree(root / "proc" / "driver" / "nvidia")
    uuid = json.loads((root / "numatune" / "nvml.json").read_text())["gpus"][0]["uuid"]
    for value in (uuid, uuid[:12]):
        out = cli("--root", str(root), "launch", "--json", "--", "true", env={"CUDA_VISIBLE_DEVICES": value})
        assert out.exit_code == 0, out.stderr
        gpu = json.loads(out.stdout)["gpu"]
        assert gpu["bdf"] == "0000:00:06.0" and gpu["uuid"] == uuid


def test_one_device_name_in_every_view(cli, tmp_path):
    """A device pci.ids knows only the vendor of (QEMU's CXL type-3 device, 8086:0d93) is "Intel Corporation
    0d93" in the text tables, the picture and the HTML page alike (the text said "Intel Corporation")."""
    ids = tmp_path / "pci.ids"
    ids.write_text("# pci.ids, two lines of it\n8086  Intel Corporation\n\t10d3  82574L Gigabit Network Connection\n")
    env = {"NUMATUNE_PCI_IDS": str(ids)}
    r = str(fixture_root("vm-cxl"))
    text = cli("--root", r, "inspect", env=env).stdout
    svg = cli("--root", r, "inspect", "-f", "svg", env=env).stdout
    html = cli("--root", r, "inspect", "-f", "html", env=env).stdout
    for view in (text, svg, html):
        assert "Intel Corporation 0d93" in view
    row = next(line for line in text.splitlines() if "0000:81:00.0" in line and "cxl" in line)
    assert "Intel Corporation 0d93" in row
    assert "82574L Gigabit Network Connection" in text  # a device pci.ids names keeps its name


def test_a_dax_device_that_is_no_node_says_why_in_text_too(cli):
    """The picture lists "DAX memory that is not a NUMA node here"; the text's CXL tree says why beside it."""
    text = cli("--root", str(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), "inspect").stdout
    assert "dax1.4 (nvdimm, kmem) -> node 5 (not a NUMA node here: node 5 is offline)" in text
    assert "dax0.0 (nvdimm, device_dax) -> node 4 (not a NUMA node here: device DAX, not onlined as system RAM)" \
        in text
    svg = cli("--root", str(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), "inspect", "-f", "svg").stdout
    assert "DAX memory that is not a NUMA node here" in svg
