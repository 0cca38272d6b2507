"""Cross-check node ids and CPU sets against hwloc's lstopo (Debian's hwloc, written in C) on the same trees."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from numatune.cpulist import parse_cpumask
from numatune.readers.topology import read_topology
from tests.conftest import fixture_root

# hwloc deliberately differs on these: it hides NVIDIA GPU memory nodes and repairs broken SRATs.
DIFFERENT_BY_DESIGN = {"nvidiagpunumanodes", "8em64t-2s2ca2c-buggynuma"}
TREES = [
    "256ppc-8n8s4t", "128arm-2pa2n8cluster4co", "128ia64-17n4s2c", "32em64t-2n8c+dax+nvme+mic+dimms",
    "fakeheteromemtiers", "memorysidecaches", "16em64t-4s2c2t-offlines", "intel-xeon-L5640-2node",
    "40intel64-2g2n4c+pcilocality", "32intel64-2p8co2t+8ve", "dev-1node-x86",
]


def hwloc_bitmap(text: str) -> frozenset[int]:
    """hwloc writes "0xffffffff,,0x0": 32-bit words, an empty word meaning zero."""
    words = [w.replace("0x", "") or "0" for w in text.split(",")]
    return parse_cpumask(",".join(w.zfill(8) for w in words))


def hwloc_nodes(root) -> dict[int, frozenset[int]]:
    out = subprocess.run(
        ["lstopo", "-i", str(root), "--of", "xml", "-"], capture_output=True, text=True, timeout=60,
        env={"HWLOC_COMPONENTS": "-x86", "PATH": "/usr/bin:/bin"},
    )
    if out.returncode != 0:
        pytest.skip(f"lstopo could not read {root.name}: {out.stderr.strip()[:200]}")
    nodes = {}
    for obj in ET.fromstring(out.stdout).iter("object"):
        if obj.get("type") == "NUMANode":
            nodes[int(obj.get("os_index"))] = hwloc_bitmap(obj.get("cpuset", "0x0"))
    return nodes


@pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")
@pytest.mark.parametrize("name", TREES)
def test_nodes_and_cpus_agree_with_lstopo(name, host_of):
    assert name not in DIFFERENT_BY_DESIGN
    ours = {n.id: frozenset(n.cpus) for n in read_topology(host_of(name)).nodes}
    theirs = hwloc_nodes(fixture_root(name))
    assert set(ours) == set(theirs)
    online = set(read_topology(host_of(name)).cpu.online)
    for node_id, cpus in ours.items():
        if cpus:  # hwloc gives CPU-less nodes the cpuset of their locality, not an empty one
            assert cpus & online == theirs[node_id] & online, node_id
