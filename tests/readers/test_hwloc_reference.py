"""Cross-check node ids and CPU sets against hwloc's lstopo (Debian's hwloc, written in C) on the same trees."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from numatune.cpulist import parse_cpumask
from numatune.readers.topology import read_topology
from tests.conftest import FIXTURES, fixture_root

# hwloc deliberately differs on these: it hides NVIDIA GPU memory nodes, repairs broken SRATs, and lists only
# the nodes with memory (5-10 of the synthetic initiator tree, whose nodes 0-3 are CPU-only and 4 a generic
# initiator).
DIFFERENT_BY_DESIGN = {"nvidiagpunumanodes", "8em64t-2s2ca2c-buggynuma", "fakememinitiators-1np2c+1npp+gi"}


def _with_node_tree(archive: Path) -> bool:
    """A node tree hwloc can read: lstopo builds nodes from nodeN/cpumap, which numatune never reads, so a
    `numatune snapshot` keeps it as an empty placeholder (it then drops CPU-less nodes); such captures
    (vm-cxl-switch, vm-cxl-pool) are left out of this cross-check."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    if not any(m.name.endswith("/sys/devices/system/node") for m in members):
        return False
    cpumaps = [m for m in members if m.name.endswith("/sys/devices/system/node/node0/cpumap")]
    return not cpumaps or cpumaps[0].size > 0


# Every machine archive with a NUMA node tree (the pcp-* samples hold only /proc files); hand-made trees
# are not machines to check against another reader.
TREES = sorted(p.name.removesuffix(".tar.gz") for p in FIXTURES.glob("*.tar.gz")
               if not p.name.startswith("handmade-") and _with_node_tree(p))


def hwloc_bitmap(text: str) -> frozenset[int]:
    """hwloc writes "0xffffffff,,0x0": 32-bit words, an empty word meaning zero."""
    words = [w.replace("0x", "") or "0" for w in text.split(",")]
    return parse_cpumask(",".join(w.zfill(8) for w in words))


def hwloc_nodes(root) -> dict[int, frozenset[int]]:
    out = subprocess.run(  # HWLOC_FSROOT, not -i: lstopo takes a tree without proc/ (nri-sample1) for a file
        ["lstopo", "--of", "xml", "-"], capture_output=True, text=True, timeout=60,
        env={"HWLOC_COMPONENTS": "-x86", "HWLOC_FSROOT": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, f"lstopo could not read {root.name}: {out.stderr.strip()[:300]}"
    nodes = {}
    for obj in ET.fromstring(out.stdout).iter("object"):
        if obj.get("type") == "NUMANode":
            nodes[int(obj.get("os_index"))] = hwloc_bitmap(obj.get("cpuset", "0x0"))
    return nodes


@pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")
@pytest.mark.parametrize("name", [t for t in TREES if t not in DIFFERENT_BY_DESIGN])
def test_nodes_and_cpus_agree_with_lstopo(name, host_of):
    ours = {n.id: frozenset(n.cpus) for n in read_topology(host_of(name)).nodes}
    theirs = hwloc_nodes(fixture_root(name))
    assert set(ours) == set(theirs)
    online = set(read_topology(host_of(name)).cpu.online)
    for node_id, cpus in ours.items():
        if cpus:  # hwloc gives CPU-less nodes the cpuset of their locality, not an empty one
            assert cpus & online == theirs[node_id] & online, node_id


def test_the_machines_are_found_from_the_archives():
    """No hand list: the machines that have a node tree are found, the ones without are not."""
    assert {"256ppc-8n8s4t", "vm-cxl", "nvidiagpunumanodes"} <= set(TREES)
    assert not {"pcp-8cpu-x86_64", "handmade-launch-2s4gpu-cxl"} & set(TREES)
    assert set(TREES) >= DIFFERENT_BY_DESIGN


def _with_cpu_tree(archive: Path) -> bool:
    """A CPU tree hwloc can read: it builds PUs, cores and packages from the per-CPU topology masks
    (thread_siblings, core_siblings / package_cpus), which a `numatune snapshot` leaves out (it keeps the
    lists numatune reads), so lstopo gives up on such captures (vm-cxl-switch, vm-cxl-pool)."""
    with tarfile.open(archive) as tar:
        return any(m.name.endswith("/sys/devices/system/cpu/cpu0/topology/thread_siblings") for m in tar)


CPU_TREES = sorted(p.name.removesuffix(".tar.gz") for p in FIXTURES.glob("*.tar.gz")
                   if not p.name.startswith("handmade-") and _with_cpu_tree(p))


def hwloc_cpus(root: Path) -> tuple[frozenset[int], int, int]:
    """(online CPUs, cores, packages) as lstopo reads the tree: its PUs, Cores and Packages."""
    out = subprocess.run(  # HWLOC_FSROOT, not -i: lstopo takes a tree without proc/ (nri-sample1) for a file
        ["lstopo", "--of", "xml", "-"], capture_output=True, text=True, timeout=60,
        env={"HWLOC_COMPONENTS": "-x86", "HWLOC_FSROOT": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, f"lstopo could not read {root.name}: {out.stderr.strip()[:300]}"
    objs = list(ET.fromstring(out.stdout).iter("object"))
    pus = frozenset(int(o.get("os_index")) for o in objs if o.get("type") == "PU")
    return pus, sum(o.get("type") == "Core" for o in objs), sum(o.get("type") == "Package" for o in objs)


@pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")
@pytest.mark.parametrize("name", CPU_TREES)
def test_online_cpus_cores_and_packages_agree_with_lstopo(name, host_of):
    """hwloc's reading where the kernel's files are empty or odd: an empty per-CPU `online` is online (128ia64),
    a physical_package_id of -1 is a package per core_siblings list (s390, POWER)."""
    cpu = read_topology(host_of(name)).cpu
    pus, cores, packages = hwloc_cpus(fixture_root(name))
    assert set(cpu.online) == pus
    assert cpu.cores == cores
    assert len(cpu.sockets) == packages


def test_the_cpu_trees_are_found_from_the_archives():
    assert {"128ia64-17n4s2c", "20s390-2g6s4c", "256ppc-8n8s4t", "x86_64-epyc_7451"} <= set(CPU_TREES)
    assert len(CPU_TREES) >= 20 and not {"pcp-8cpu-x86_64", "vm-cxl-switch"} & set(CPU_TREES)
