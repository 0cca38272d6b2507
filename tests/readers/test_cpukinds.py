"""CPU kinds on real hybrid trees, checked against hwloc's own CPU kinds for the same trees.

References: the GB10 tree's upstream EXPECTED-lstopo.xml (hwloc master, MIDR-aware) and Debian
hwloc 2.9.0's `lstopo --cpukinds` kept as EXPECTED-lstopo-cpukinds.txt (see fixtures/README.md).
hwloc numbers kinds by efficiency, 0 = least performant; numatune ranks 0 = most performant.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from numatune.errors import ParseError
from numatune.model.topology import Cpu
from numatune.readers.cpukinds import arm_part_name, group_cpu_kinds, parse_cpuinfo_midr
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root
from tests.readers.test_hwloc_reference import hwloc_bitmap

_KIND = re.compile(r"^CPU kind #\d+ efficiency (\d+) cpuset (\S+)$")


def lstopo_cpukinds(name: str) -> list[frozenset[int]]:
    """hwloc's kinds from EXPECTED-lstopo-cpukinds.txt, most performant first."""
    kinds = []
    for line in (fixture_root(name) / "EXPECTED-lstopo-cpukinds.txt").read_text().splitlines():
        m = _KIND.match(line)
        if m:
            kinds.append((int(m.group(1)), hwloc_bitmap(m.group(2))))
    return [cpus for _, cpus in sorted(kinds, reverse=True)]


def kinds_of(name: str):
    return read_topology(Host.open(fixture_root(name)), devices=False, settings=False).cpu_kinds


def test_gb10_matches_hwlocs_midr_kinds():
    """hwloc master on GB10: two kinds by MIDR (X925 5-9,15-19 ranked above A725 0-4,10-14)."""
    root = ET.parse(fixture_root("nvidia-dgx-gb10") / "EXPECTED-lstopo.xml").getroot()
    expected = sorted(
        ((int(k.get("forced_efficiency")), hwloc_bitmap(k.get("cpuset")),
          next(i.get("value") for i in k.iter("info") if i.get("name") == "CPUPart"))
         for k in root.iter("cpukind")),
        reverse=True,
    )
    kinds = kinds_of("nvidia-dgx-gb10")
    assert [frozenset(k.cpus) for k in kinds.kinds] == [cpus for _, cpus, _ in expected]
    assert [k.part.split(":")[1] for k in kinds.kinds] == [part for _, _, part in expected]
    assert [min(k.capacities) for k in kinds.kinds] == [eff for eff, _, _ in expected]
    assert [k.name for k in kinds.kinds] == ["Cortex-X925", "Cortex-A725"]
    assert [k.role for k in kinds.kinds] == ["performance", "efficiency"]
    assert kinds.grouped_by == ("MIDR",) and kinds.ranked_by == ("cpu_capacity",)
    assert kinds.kinds[0].max_mhz == (3900,) and kinds.kinds[1].max_mhz == (2808,)


def test_gb10_without_midr_registers_matches_hwloc_2_9():
    """Without MIDR (hwloc 2.9), capacity splits GB10 into five kinds; numatune's MIDR kinds are unions of them."""
    hwloc = lstopo_cpukinds("nvidia-dgx-gb10")
    assert len(hwloc) == 5
    kinds = kinds_of("nvidia-dgx-gb10")
    for k in kinds.kinds:
        assert frozenset(k.cpus) == frozenset().union(*(h for h in hwloc if h <= frozenset(k.cpus)))


@pytest.mark.parametrize("name", ["20em64t-hybrid-1p6c2t+2ca4co1t", "nri-sample1-alderlake"])
def test_intel_hybrid_matches_lstopo(name):
    kinds = kinds_of(name)
    assert [frozenset(k.cpus) for k in kinds.kinds] == lstopo_cpukinds(name)
    assert [k.role for k in kinds.kinds] == ["performance", "efficiency"]


def test_raptor_lake_turbo_max_cores_stay_one_kind():
    """i7-1370P: P-cores 4,5,8,9 boost to 5.2 GHz, the others 5.0 (Turbo Boost Max 3.0): one kind, as hwloc."""
    k = kinds_of("20em64t-hybrid-1p6c2t+2ca4co1t")
    assert k.kinds[0].cpus == tuple(range(12)) and k.kinds[0].max_mhz == (5000, 5200)
    assert k.kinds[0].base_mhz == (1900,) and k.kinds[1].base_mhz == (1400,)
    assert k.ranked_by == ("base frequency",)


def test_alder_lake_pmu_devices_name_the_kinds():
    k = kinds_of("nri-sample1-alderlake")
    assert [(k.name, k.part, k.cpus) for k in k.kinds] == [
        ("Intel Core (P-core)", "cpu_core", tuple(range(8))),
        ("Intel Atom (E-core)", "cpu_atom", tuple(range(8, 16))),
    ]
    assert k.ranked_by == ("core type",)


def test_phone_soc_four_parts_two_tied():
    """X3 > A715 = A710 > A510: A715 and A710 share capacity 855 and 2803 MHz, so they share a rank."""
    kinds = kinds_of("arm-A510-A710-A715-X3")
    assert [(k.rank, k.name, k.cpus) for k in kinds.kinds] == [
        (0, "Cortex-X3", (7,)), (1, "Cortex-A715", (3, 4)), (1, "Cortex-A710", (5, 6)), (2, "Cortex-A510", (0, 1, 2)),
    ]
    hwloc = lstopo_cpukinds("arm-A510-A710-A715-X3")  # capacity only: 1024, 855, 280
    assert hwloc == [frozenset({7}), frozenset({3, 4, 5, 6}), frozenset({0, 1, 2})]
    assert kinds.ranked_by == ("cpu_capacity", "max frequency")


@pytest.mark.parametrize(
    "name", ["128arm-2pa2n8cluster4co", "dev-1node-x86", "256ppc-8n8s4t", "intel-xeon-L5640-2node"]
)
def test_symmetric_trees_have_one_kind(name):
    topo = read_topology(Host.open(fixture_root(name)), devices=False, settings=False)
    assert len(topo.cpu_kinds.kinds) == 1
    assert topo.cpu_kinds.kinds[0].cpus == topo.cpu.online
    assert not topo.cpu_kinds.heterogeneous and topo.cpu_kinds.grouped_by == ()


def test_kunpeng_one_kind_agrees_with_lstopo():
    (only,) = kinds_of("128arm-2pa2n8cluster4co").kinds
    assert only.name == "HiSilicon TSV110 (Kunpeng 920)" and only.capacities == (1024,)


def test_cpuinfo_midr_equals_the_midr_registers():
    """/proc/cpuinfo's per-processor fields rebuild exactly the MIDR_EL1 the kernel exports."""
    for name in ("nvidia-dgx-gb10", "arm-A510-A710-A715-X3"):
        root = fixture_root(name)
        from_cpuinfo = parse_cpuinfo_midr((root / "proc/cpuinfo").read_text())
        regs = {
            int(p.parent.parent.parent.name[3:]): int(p.read_text().replace("\0", "").strip(), 16)
            for p in root.glob("sys/devices/system/cpu/cpu*/regs/identification/midr_el1")
        }
        assert from_cpuinfo == regs and len(regs) >= 8


def test_midr_from_cpuinfo_when_regs_are_absent(tmp_path):
    """Kernels before 4.11 have no regs/identification: the kinds come from /proc/cpuinfo, the same."""

    tree = fixture_copy("nvidia-dgx-gb10", tmp_path)
    for regs in tree.glob("sys/devices/system/cpu/cpu*/regs"):
        shutil.rmtree(regs)
    assert read_topology(Host.open(tree), devices=False).cpu_kinds == kinds_of("nvidia-dgx-gb10")


def test_malformed_capacity_is_a_parse_error(tmp_path):
    """Hand-made from the GB10 tree: a cpu_capacity that is not a number names the file."""

    tree = fixture_copy("nvidia-dgx-gb10", tmp_path)
    (tree / "sys/devices/system/cpu/cpu3/cpu_capacity").write_text("big\n")
    with pytest.raises(ParseError, match="cpu3/cpu_capacity"):
        read_topology(Host.open(tree), devices=False)


def test_offline_cpus_are_in_no_kind():
    topo = read_topology(Host.open(fixture_root("16em64t-4s2c2t-offlines")), devices=False)
    (only,) = topo.cpu_kinds.kinds
    assert only.cpus == topo.cpu.online and 2 not in only.cpus


def test_unranked_when_nothing_orders_the_kinds():
    """Two MIDRs and no capacity or frequency: two kinds, neither called performance."""
    cpus = (Cpu(0, True, midr=0x410FD851), Cpu(1, True, midr=0x410FD871))
    kinds = group_cpu_kinds(cpus)
    assert [k.role for k in kinds.kinds] == ["unranked", "unranked"] and kinds.ranked_by == ()


def test_part_names():
    assert arm_part_name(0x410FD4F0) == "Neoverse V2"
    assert arm_part_name(0x410FD850) == "Cortex-X925"
    assert arm_part_name(0x4E0F0040) == "NVIDIA Carmel"
    assert arm_part_name(0x420F1000) == "ARM implementer 0x42 part 0x100"


def test_gb10_without_midr_groups_as_hwloc_without_midr():
    """MIDR left out (hwloc 2.9, or HWLOC_CPUKINDS=midr=0): capacity and CPPC frequencies make hwloc's five kinds."""
    topo = read_topology(Host.open(fixture_root("nvidia-dgx-gb10")), devices=False)
    kinds = group_cpu_kinds(tuple(c._replace(midr=None) for c in topo.cpus))
    assert [frozenset(k.cpus) for k in kinds.kinds] == lstopo_cpukinds("nvidia-dgx-gb10")
    assert kinds.ranked_by == ("cpu_capacity",)
    assert [k.base_mhz for k in kinds.kinds] == [(3900,)] * 3 + [(2808,)] * 2  # acpi_cppc/nominal_freq, as hwloc
