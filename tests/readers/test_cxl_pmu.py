"""CXL PMUs (cxl_pmu driver): discovery, event encoding, and saying plainly when there are none.

No machine here has a CXL PMU: the trees with one are HAND-MADE copies of the real vm-cxl-switch
capture with a /sys/bus/event_source/devices/cxl_pmu_memX.Y directory written as the kernel documents
it (type, cpumask, format/vid|gid|mask, events/NAME = "vid=...,gid=...,mask=...").
"""

from __future__ import annotations

import json

import pytest

from numatune.errors import PmuUnavailable
from numatune.readers.cxl import pmu_event, read_cxl_pmus
from numatune.readers.perf import CxlTraffic, cxl_pmus_absent_note, open_cxl_traffic, pack_system_attr
from numatune.render.probe_out import cxl_traffic_json, cxl_traffic_lines
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root

FORMATS = {"vid": "config:0-15", "gid": "config:16-31", "mask": "config:32-63", "edge": "config1:0"}
EVENTS = {"m2s_req_memrd": "vid=0x1e98,gid=0x10,mask=0x2", "m2s_rwd_memwr": "vid=0x1e98,gid=0x11,mask=0x2",
          "clock_ticks": "vid=0x1e98,gid=0x0,mask=0x1"}


def with_pmu(tmp_path, events: dict[str, str] = EVENTS, pmu_type: str = "42", cpumask: str = "0"):
    root = fixture_copy("vm-cxl-switch", tmp_path)
    base = root / "sys/bus/event_source/devices/cxl_pmu_mem0.0"
    (base / "format").mkdir(parents=True)
    (base / "events").mkdir()
    (base / "type").write_text(pmu_type + "\n")
    (base / "cpumask").write_text(cpumask + "\n")
    for name, text in FORMATS.items():
        (base / "format" / name).write_text(text + "\n")
    for name, text in events.items():
        (base / "events" / name).write_text(text + "\n")
    return root


def test_pmu_is_found_and_its_events_encoded(tmp_path) -> None:
    (pmu,) = read_cxl_pmus(Host.open(str(with_pmu(tmp_path))))
    assert (pmu.name, pmu.memdev, pmu.pmu_type, pmu.cpu) == ("cxl_pmu_mem0.0", "mem0", 42, 0)
    assert pmu.events == ("clock_ticks", "m2s_req_memrd", "m2s_rwd_memwr")
    assert pmu.read.name == "m2s_req_memrd" and pmu.read.config == 0x1e98 | 0x10 << 16 | 0x2 << 32
    assert pmu.write.config == 0x1e98 | 0x11 << 16 | 0x2 << 32
    assert cxl_pmus_absent_note((pmu,)) is None


def test_event_terms() -> None:
    assert pmu_event("x", "vid=0x1,edge", FORMATS).config1 == 1  # a bare term sets its bit
    assert pmu_event("x", "vid=0x1ffff", FORMATS).config == 0xffff  # masked to its field
    assert pmu_event("x", "nosuch=1", FORMATS) is None
    assert pmu_event("x", "vid=zz", FORMATS) is None


def test_inspect_lists_the_pmu_or_says_there_is_none(cli, tmp_path) -> None:
    out = cli("--root", str(with_pmu(tmp_path)), "inspect").stdout
    assert "CXL PMUs: cxl_pmu_mem0.0 (mem0: reads m2s_req_memrd, writes m2s_rwd_memwr)" in out
    doc = json.loads(cli("--root", str(with_pmu(tmp_path / "j")), "inspect", "--json").stdout)
    assert doc["cxl"]["pmus"][0]["read"]["name"] == "m2s_req_memrd"
    out = cli("--root", str(fixture_root("vm-cxl-switch")), "inspect").stdout
    assert "CXL PMUs: none (no /sys/bus/event_source/devices/cxl_pmu_*)" in out


def test_pmu_without_memory_events_is_said(tmp_path) -> None:
    pmus = read_cxl_pmus(Host.open(str(with_pmu(tmp_path, {"clock_ticks": "vid=0x1e98,gid=0x0,mask=0x1"}))))
    assert "document no memory read/write event" in cxl_pmus_absent_note(pmus)


@pytest.mark.parametrize(("pmu_type", "cpumask"), [("garbage", "0"), ("42", "x-y"), ("", "")])
def test_malformed_pmu_files_are_unknown(tmp_path, pmu_type, cpumask) -> None:
    (pmu,) = read_cxl_pmus(Host.open(str(with_pmu(tmp_path, pmu_type=pmu_type, cpumask=cpumask))))
    assert pmu.read is not None  # the events still parse
    assert pmu_type == "42" or pmu.pmu_type is None


def test_counters_need_the_live_node(tmp_path) -> None:
    root = Host.open(str(with_pmu(tmp_path)))
    with pytest.raises(PmuUnavailable, match="need the live node"):
        open_cxl_traffic(root, read_cxl_pmus(root))


def test_live_node_without_pmus_says_absent() -> None:
    live = Host.open("/")
    pmus = read_cxl_pmus(live)
    if pmus:
        pytest.skip("this machine has CXL PMUs")
    with pytest.raises(PmuUnavailable, match="no CXL PMU"):
        open_cxl_traffic(live, pmus)


def test_traffic_arithmetic_and_report() -> None:
    t = CxlTraffic("cxl_pmu_mem0.0", "mem0", 2.0, 31_250_000, None)  # 2 GB read in 2 s
    assert (t.read_gbps, t.write_gbps) == (1.0, None)
    assert cxl_traffic_lines((t,), None)[1] == "  mem0 (cxl_pmu_mem0.0): read 1.000, write -"
    assert cxl_traffic_json((), "no CXL PMU here") == {"devices": [], "unavailable_reason": "no CXL PMU here"}
    assert cxl_traffic_lines((), "no CXL PMU here") == ["CXL traffic per device: not measured — no CXL PMU here"]


def test_system_attr_layout() -> None:
    attr = pack_system_attr(42, 0x1234, 5, 6)
    assert len(attr) == 112
    assert int.from_bytes(attr[0:4], "little") == 42 and int.from_bytes(attr[8:16], "little") == 0x1234
    assert int.from_bytes(attr[40:48], "little") == 1  # disabled only: no exclude bits on a system-wide PMU
    assert int.from_bytes(attr[56:64], "little") == 5 and int.from_bytes(attr[64:72], "little") == 6
