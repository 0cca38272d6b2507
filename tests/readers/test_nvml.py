"""NVML facts: the real H100 record replays from a saved root, agrees with nvidia-smi of the same
moment, finds a process's GPU without /proc/PID/fd; NVLink/NVSwitch pairs from records; the
`nvidia-smi topo -m` parser on real outputs of several machines."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from numatune.analysis.vendor import compare_with_nvidia_smi, parse_nvidia_smi_topo
from numatune.errors import ParseError
from numatune.model.paths import path_matrix
from numatune.readers import nvml
from numatune.readers.nvml import FORMAT, fabric_from_record, nvml_bdf
from numatune.readers.procs import read_process
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import FIXTURES, fixture_copy, fixture_root

H100 = "h100-vm-1gpu"


def vendor_output(name: str) -> str:
    """A real `nvidia-smi topo -m` output: from fixtures/nvidia-smi-topo.md (other machines), or the H100's."""
    if name == H100:
        return (fixture_root(H100) / "numatune" / "vendor" / "nvidia-smi-topo-m.txt").read_text()
    doc = (FIXTURES / "nvidia-smi-topo.md").read_text()
    block = doc.split(f"## {name}\n", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    return block + "\n"


def _topo(name: str):
    return read_topology(Host.open(fixture_root(name)), pci_ids=None)


def test_saved_record_replays_uuid_fabric_and_processes():
    topo = _topo(H100)
    assert topo.fabric.nvlink == "saved" and topo.fabric.driver_version == "580.159.04"
    (gpu,) = topo.fabric.nvml_gpus
    assert gpu.bdf == "0000:00:06.0" and gpu.uuid == "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2"
    assert gpu.fabric_state == "not-supported" and gpu.nvlinks_active == 0 and gpu.processes == (1248,)
    assert topo.fabric.links == () and topo.fabric.peer_memory == ""  # /proc/modules: no nvidia_peermem


def test_record_agrees_with_nvidia_smi_q_of_the_same_moment():
    xml = ET.parse(fixture_root(H100) / "numatune" / "vendor" / "nvidia-smi-q.xml").getroot()
    gpu = xml.find("gpu")
    (ours,) = _topo(H100).fabric.nvml_gpus
    assert ours.uuid == gpu.findtext("uuid")
    assert ours.bdf == nvml_bdf(gpu.findtext("pci/pci_bus_id")) == gpu.get("id").lower().replace("00000000:", "0000:")
    assert list(ours.processes) == [int(p.findtext("pid")) for p in gpu.iter("process_info")]


def test_matrix_agrees_with_nvidia_smi_topo_m_of_the_same_moment():
    topo = _topo(H100)
    vendor = parse_nvidia_smi_topo(vendor_output(H100))  # with its ANSI underline
    assert vendor.labels == ("GPU0",) and vendor.cpu_affinity == {"GPU0": "0-15"}
    assert compare_with_nvidia_smi(topo, path_matrix(topo), vendor) == []


def test_audit_finds_the_gpu_from_nvml_without_proc_fd():
    host = Host.open(fixture_root(H100))
    assert not host.exists("/proc/1248/fd")
    proc = read_process(host, 1248, read_topology(host, pci_ids=None))
    assert proc.gpu.bdf == "0000:00:06.0" and proc.gpu.source.startswith("NVML")


def test_snapshot_of_a_saved_root_keeps_the_record(cli, tmp_path):
    out = tmp_path / "h100.tar.gz"
    result = cli("--root", str(fixture_root(H100)), "snapshot", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    doc = json.loads(cli("--root", str(out), "inspect", "--json").stdout)
    assert doc["path_matrix"]["nvlink"]["state"] == "saved"
    assert doc["gpu_fabric"]["nvml_gpus"][0]["uuid"] == "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2"


def test_nvidia_gpus_without_nvml_say_nvlink_is_not_visible(cli):
    doc = json.loads(cli("--root", str(fixture_root("handmade-launch-2s4gpu-cxl")), "inspect", "--json").stdout)
    assert doc["path_matrix"]["nvlink"]["state"] == "not visible"
    assert "NT015" in {f["code"] for f in doc["findings"]}
    out = cli("--root", str(fixture_root("handmade-launch-2s4gpu-cxl")), "inspect").stdout
    assert "NVLink: not visible" in out


def test_malformed_saved_record_is_one_clear_error(tmp_path, cli):
    root = fixture_copy(H100, tmp_path)
    (root / "numatune" / "nvml.json").write_text("{not json")
    result = cli("--root", str(root), "inspect", "--json")
    assert result.exit_code == 3 and "malformed /numatune/nvml.json" in result.stderr
    (root / "numatune" / "nvml.json").write_text('{"format": "other"}')
    with pytest.raises(ParseError, match="not an NVML record"):
        read_topology(Host.open(root), pci_ids=None)


# -- NVLink and NVSwitch pairs from records --------------------------------------------------------------
def _gpu(index: int, bus: str, links: list[dict]) -> dict:
    return {"index": index, "uuid": f"GPU-{index}", "pci": {"bus_id": bus}, "nvlinks": links,
            "fabric": {"state": 3, "status": 0}, "compute_processes": []}


def _link(n: int, peer: str, remote_type: int) -> dict:
    return {"link": n, "state": "active", "remote_pci": {"bus_id": peer}, "remote_device_type": remote_type}


def test_bridge_pair_counts_links_once_as_nv_n():
    # Hand-made record in NVML's format: two GPUs joined by 2 NVLinks (an NVLink bridge, as the 2x TITAN
    # RTX of fixtures/nvidia-smi-topo/nvlink-bridge-2x-titan-rtx.txt, where nvidia-smi prints NV2).
    a, b = "00000000:18:00.0", "00000000:3B:00.0"
    doc = {"format": FORMAT, "gpus": [_gpu(0, a, [_link(0, b, 0), _link(1, b, 0)]),
                                      _gpu(1, b, [_link(0, a, 0), _link(1, a, 0)])]}
    fabric = fabric_from_record(doc, "test", "nvml")
    (link,) = fabric.links
    assert (link.a, link.b, link.kind, link.count) == ("0000:18:00.0", "0000:3b:00.0", "nvlink", 2)
    vendor = parse_nvidia_smi_topo(vendor_output("nvlink-bridge-2x-titan-rtx"))
    from numatune.model.paths import fabric_label

    assert fabric_label(link) == vendor.cell("GPU0", "GPU1") == "NV2"


def test_nvswitch_gpus_show_nv18_like_a_dgx_h100():
    # Hand-made record: 8 GPUs, 18 active links each to NVSwitch ports (remote type 2), as a DGX H100.
    buses = [f"00000000:{b}:00.0" for b in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]
    switch = "00000000:05:00.0"
    doc = {"format": FORMAT, "gpus": [_gpu(i, bus, [_link(n, switch, 2) for n in range(18)])
                                      for i, bus in enumerate(buses)]}
    fabric = fabric_from_record(doc, "test", "nvml")
    assert fabric.links == () and [(m.bdf[5:7], m.count) for m in fabric.nvswitch] == [(b.lower(), 18) for b in (
        "18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]  # one group of 8, not 28 pairs
    vendor = parse_nvidia_smi_topo(vendor_output("dgx-h100-nvswitch-gpu-block"))
    from numatune.model.paths import fabric_label

    cells = {vendor.cell(f"GPU{i}", f"GPU{j}") for i in range(8) for j in range(8) if i != j}
    pair = fabric.link(fabric.nvswitch[3].bdf, fabric.nvswitch[0].bdf)
    assert (pair.a, pair.b, pair.kind) == (fabric.nvswitch[0].bdf, fabric.nvswitch[3].bdf, "nvswitch")
    assert cells == {fabric_label(pair)} == {"NV18"}


def test_fabric_not_ready_is_nt019(tmp_path):
    from numatune.analysis.topology_findings import check_nvswitch_fabric

    doc = {"format": FORMAT, "gpus": [_gpu(0, "00000000:18:00.0", []) | {"fabric": {"state": 1, "status": 0}}]}
    topo = _topo(H100)._replace(fabric=fabric_from_record(doc, "test", "nvml"))
    (finding,) = check_nvswitch_fabric(topo)
    assert finding.code == "NT019" and "not-started" in finding.message


def test_live_without_pynvml_says_why(monkeypatch):
    monkeypatch.setattr(nvml, "_LIVE", None)
    monkeypatch.setattr(nvml, "_LIVE_NOTE", "")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails as when not installed
    doc, note = nvml.live_record()
    assert doc is None and "numatune[nvidia]" in note


# -- nvidia-smi topo -m on real outputs ------------------------------------------------------------------
def test_parser_reads_a_dgx_h100_block_with_lost_tabs():
    m = parse_nvidia_smi_topo(vendor_output("dgx-h100-nvswitch-gpu-block"))
    assert m.gpus == tuple(f"GPU{i}" for i in range(8)) and len(m.labels) == 20
    assert m.cell("GPU0", "NIC0") == "PXB" and m.cell("GPU5", "NIC9") == "PXB" and m.cell("GPU6", "NIC10") == "PXB"
    assert m.cpu_affinity["GPU4"] == "56-111,168-223" and m.numa_affinity["GPU7"] == "1"


def test_parser_reads_nvlink_pair_with_rdma_nics_and_blank_affinity():
    m = parse_nvidia_smi_topo(vendor_output("nvlink-2gpu-8nic-vm"))
    assert m.cell("GPU0", "GPU1") == "NV12" and m.cell("NIC6", "GPU1") == "PXB" and m.cell("NIC0", "NIC1") == "PIX"
    assert m.cpu_affinity == {}  # blank in that VM: not guessed from shifted columns


def test_parser_reads_pcie_only_pair():
    m = parse_nvidia_smi_topo(vendor_output("pcie-2gpu-phb"))
    assert m.cell("GPU1", "GPU0") == "PHB" and m.cpu_affinity == {"GPU0": "0-11", "GPU1": "0-11"}


def test_parser_refuses_text_without_a_matrix():
    with pytest.raises(ValueError, match="no `nvidia-smi topo -m` header"):
        parse_nvidia_smi_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
