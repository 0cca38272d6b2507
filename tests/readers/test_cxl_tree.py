"""The CXL tree (host bridge -> switch -> memdev, links, decoders, interleave sets).

fixtures/vm-cxl-switch is a real 6.12 kernel behind QEMU's emulated switch; beside it,
its cxl-list.json is what ndctl's `cxl list` and the PCI link files said in the same boot.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from numatune.model.links import CXL2_X16_GBPS, gbps, generation, parse_gts
from numatune.readers.cxl import read_cxl
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vm" / "guest"))
import cxl_compare  # noqa: E402

SWITCH = "vm-cxl-switch"
LISTS = json.loads((fixture_root(SWITCH) / "cxl-list.json").read_text())
PCI = "sys/devices/pci0000:80/0000:80:00.0/0000:81:00.0/0000:82:00.0/0000:83:00.0"


def inspect_cxl(cli, root: Path) -> dict:
    result = cli("--root", str(root), "inspect", "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["cxl"]


def test_switch_tree_is_what_cxl_list_said(cli) -> None:
    cxl = inspect_cxl(cli, fixture_root(SWITCH))
    problems, facts = cxl_compare.compare(cxl, LISTS)
    assert problems == []
    assert facts["switches"] == [{"port": "port2", "upstream": "0000:81:00.0",
                                  "downstream": ["0000:82:00.0", "0000:82:01.0"]}]
    assert facts["regions"] == [{"region": "region0", "ways": 2,
                                 "members": [(0, "mem0", "decoder3.0"), (1, "mem1", "decoder4.0")]}]
    assert cxl_compare.compare_links(cxl, LISTS["pci_links"]) == []


def test_switch_tree_facts(host_of) -> None:
    cxl = read_cxl(host_of(SWITCH))
    roles = {p.name: p.role for p in cxl.ports}
    assert roles == {"root0": "root", "port1": "host-bridge", "port2": "switch",
                     "endpoint3": "endpoint", "endpoint4": "endpoint"}
    switch = cxl.port("port2")
    assert switch.link.upstream == "0000:80:00.0" and switch.link.downstream == "0000:81:00.0"
    assert (switch.link.width, switch.link.gts, switch.link.gbps) == (1, 2.5, 0.25)
    for mem in cxl.memdevs:
        assert mem.switches == ("port2",)
        assert mem.parent_dport in ("0000:82:00.0", "0000:82:01.0")
        assert mem.link.gbps == 0.25
    assert {m.name: m.serial for m in cxl.memdevs} == {"mem0": "0x4e540002", "mem1": "0x4e540001"}
    (region,) = cxl.regions
    assert [(m.position, m.memdev, m.switch) for m in region.members] == [(0, "mem0", "port2"), (1, "mem1", "port2")]
    assert region.nodes == (2,)
    by_port = {d.name: d.port for d in cxl.decoders}
    assert by_port["decoder2.0"] == "port2" and by_port["decoder3.0"] == "endpoint3"
    assert len(cxl.links) == 3 and cxl.port("port1").decoders_committed == 1


def test_one_device_tree_has_no_switch(host_of) -> None:
    cxl = read_cxl(host_of("vm-cxl"))
    assert [p.role for p in cxl.ports if p.role == "switch"] == []
    (mem,) = cxl.memdevs
    assert mem.switches == () and mem.parent_dport == "0000:80:00.0"


def test_switch_text_shows_switch_links_and_interleave(cli) -> None:
    out = cli("--root", str(fixture_root(SWITCH)), "inspect").stdout
    assert "port2: switch, upstream port 0000:81:00.0, link x1 2.5 GT/s (PCIe 1) 0.25 GB/s" in out
    assert "region0: 1.0 GiB pmem, 2-way x 256 B" in out
    assert "position 1: mem1 (decoder4.0) behind switch port2 port 0000:82:00.0" in out


@pytest.mark.parametrize(("speed", "width", "want", "gen"), [
    ("32.0 GT/s PCIe", 16, 63.02, "PCIe 5 / CXL 2.0"),
    ("64.0 GT/s PCIe", 16, 121.0, "PCIe 6 / CXL 3"),
    ("16.0 GT/s PCIe", 8, 15.75, "PCIe 4"),
    ("2.5 GT/s PCIe", 1, 0.25, "PCIe 1"),
    ("Unknown", 16, None, None),
    ("32.0 GT/s PCIe", 0, None, "PCIe 5 / CXL 2.0"),
    (None, None, None, None),
])
def test_link_rate(speed, width, want, gen) -> None:
    gts = parse_gts(speed)
    assert gbps(gts, width) == want
    assert generation(gts) == gen


def test_reference_link_is_cxl2_x16() -> None:
    assert CXL2_X16_GBPS == 63.0


@pytest.mark.parametrize("edit", ["width-1", "width-garbage", "no-link-files", "target-hole", "dport-dangling"])
def test_bad_cxl_files_give_no_traceback(cli, tmp_path, edit) -> None:
    root = fixture_copy(SWITCH, tmp_path)
    dev = root / PCI
    if edit == "width-1":
        (dev / "current_link_width").write_text("-1\n")
        (dev / "current_link_speed").write_text("Unknown\n")
    elif edit == "width-garbage":
        (dev / "current_link_width").write_text("unknown\n")
        (dev / "max_link_width").write_text("\n")
    elif edit == "no-link-files":
        for f in ("current_link_width", "current_link_speed", "max_link_width", "max_link_speed"):
            (dev / f).unlink()
    elif edit == "target-hole":
        region = next(root.glob("sys/devices/platform/*/root0/decoder0.0/region0"))
        (region / "target0").unlink()
    elif edit == "dport-dangling":
        port = next(root.glob("sys/devices/platform/*/root0/port1/port2"))
        (port / "dport0").unlink()
        (port / "dport0").symlink_to("../../../../pci0000:80/nowhere")
    result = cli("--root", str(root), "inspect", "--json")
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output + result.stderr
    cxl = json.loads(result.stdout)["cxl"]
    mem1 = next(m for m in cxl["memdevs"] if m["name"] == "mem1")
    if edit in ("width-1", "width-garbage"):
        assert mem1["link"]["width"] is None and mem1["link"]["gbps"] is None
    if edit == "no-link-files":
        assert mem1["link"] is None
    if edit == "target-hole":
        (region,) = cxl["regions"]
        assert [m["position"] for m in region["members"]] == [1]
    text = cli("--root", str(root), "inspect")
    assert text.exit_code in (0, 1) and "Traceback" not in text.output


def test_host_without_cxl(tmp_path) -> None:
    (tmp_path / "sys").mkdir()
    assert read_cxl(Host.open(str(tmp_path))).links == ()
    shutil.rmtree(tmp_path / "sys")


def test_picture_names_ways_switch_and_link_rates(cli, tmp_path) -> None:
    out = tmp_path / "node.svg"
    result = cli("--root", str(fixture_root(SWITCH)), "inspect", "-o", str(out))
    assert result.exit_code in (0, 1), result.output
    svg = out.read_text()
    assert "region0 (2-way)" in svg and "via switch port2" in svg
    assert "mem0 at 0000:84:00.0 (0.25 GB/s)" in svg or "mem0 at 0000:83:00.0 (0.25 GB/s)" in svg
