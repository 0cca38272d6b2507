"""Slurm's abstract core numbering, checked against what real slurmd printed for the same trees.

tests/data/slurmd/<tree>.txt: `slurmd -C` and slurmd's debug4 CPU map ("CPU map[ABS]=>LINUX S:C:T") from
Debian 12's slurmd 22.05.8 / hwloc 2.9 reading the fixture through HWLOC_FSROOT (regen.sh says how).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numatune.plan.slurm import gpus_in_bus_order, gres_lines, slurm_layout
from numatune.readers.sched import read_cpu_groups, read_render_nodes
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import PROJECT, fixture_root

SLURMD = PROJECT / "tests" / "data" / "slurmd"
REFERENCE_TREES = sorted(p.stem for p in SLURMD.glob("*.txt"))


def _layout(name: str, **kw):
    host = Host.open(fixture_root(name))
    topo = read_topology(host)
    return topo, slurm_layout(topo, read_cpu_groups(host, topo), **kw), host


def slurmd_reference(path: Path) -> tuple[dict[str, int], dict[int, tuple[int, int, int, int]]]:
    """(slurmd -C counts, abstract CPU -> (Linux CPU, socket, core in socket, thread))."""
    text = path.read_text()
    m = re.search(r"CPUs=(\d+) Boards=(\d+) SocketsPerBoard=(\d+) CoresPerSocket=(\d+) ThreadsPerCore=(\d+)", text)
    assert m, path
    cpus, boards, sockets, cps, tpc = map(int, m.groups())
    counts = {"CPUs": cpus, "Sockets": boards * sockets, "CoresPerSocket": cps, "ThreadsPerCore": tpc}
    cpu_map = {int(a): (int(mac), int(s), int(c), int(t)) for a, mac, s, c, t in
               re.findall(r"^CPU map\[(\d+)\]=>(\d+) S:C:T (\d+):(\d+):(\d+)$", text, re.M)}
    return counts, cpu_map


def test_reference_outputs_cover_smt_offline_cpus_and_node_id_holes():
    assert {"16em64t-4s2c2t-offlines", "nvidiagpunumanodes", "memorysidecaches", "vm-offlineCPUs",
            "32intel64-2p8co2t+8ve", "vm-two-socket", "vm-cxl"} <= set(REFERENCE_TREES)


@pytest.mark.parametrize("name", REFERENCE_TREES)
def test_counts_and_abstract_map_match_real_slurmd(name):
    counts, cpu_map = slurmd_reference(SLURMD / f"{name}.txt")
    _, layout, _ = _layout(name)
    assert not layout.problem
    assert (layout.cpus, len(layout.sockets), layout.cores_per_socket, layout.threads_per_core) == (
        counts["CPUs"], counts["Sockets"], counts["CoresPerSocket"], counts["ThreadsPerCore"])
    assert cpu_map, "slurmd printed no CPU map"
    ours = layout.abstract_cpu()
    where = {cpu: (s, j, core.cpus.index(cpu)) for s, cores in enumerate(layout.sockets)
             for j, core in enumerate(cores) for cpu in core.cpus}
    for absid, (linux, s, c, t) in cpu_map.items():
        assert ours[linux] == absid, (linux, absid)
        assert where[linux] == (s, c, t), linux
    # every CPU slurmd can map, we map the same way, and no more (slurmd skips Linux ids >= its CPU count)
    assert set(ours) == {linux for linux, *_ in cpu_map.values()}


def test_sub_numa_clusters_order_cores_node_by_node():
    """memorysidecaches: SNC2, node 0 = CPUs 0,4,8.. and node 2 = 2,6,10.. of socket 0; hwloc (and so Slurm)
    numbers node 0's cores first, which sorting by CPU id would get wrong."""
    _, layout, _ = _layout("memorysidecaches")
    firsts = [c.cpus[0] for c in layout.sockets[0]]
    assert firsts[:3] == [0, 4, 8] and firsts[10:12] == [2, 6]


def test_offline_cpus_close_up_the_numbering_and_are_reported():
    _, layout, _ = _layout("16em64t-4s2c2t-offlines")
    assert [len(s) for s in layout.sockets] == [2, 1, 2, 2]  # package P#1 lost a core to offline CPUs
    assert layout.threads_per_core == 1  # 12 CPUs // 7 cores, as slurmd logs
    assert any("not a multiple" in n for n in layout.notes) and any("unequal" in n for n in layout.notes)


def test_package_ids_of_minus_one_are_packages_by_their_cpu_lists_as_hwloc_and_slurmd_read_them():
    """256ppc: physical_package_id is -1 on every CPU; hwloc (and so slurmd) makes a package of each
    core_siblings list: 64 sockets of one 4-thread core."""
    _, layout, _ = _layout("256ppc-8n8s4t")
    assert not layout.problem
    assert (len(layout.sockets), layout.cores_per_socket, layout.threads_per_core) == (64, 1, 4)


def test_handmade_smt_tree_hand_derived():
    """handmade-launch-2s4gpu-cxl (hwloc cannot read it: no sysfs masks): 2 sockets x 4 cores x 2 threads,
    socket 0 = CPUs 0-3,8-11 with siblings (n, n+8). Derived by hand from Slurm's rules."""
    topo, layout, host = _layout("handmade-launch-2s4gpu-cxl")
    assert (len(layout.sockets), layout.cores_per_socket, layout.threads_per_core) == (2, 4, 2)
    abs_of = layout.abstract_cpu()
    assert [abs_of[c] for c in (0, 8, 1, 9, 4, 12, 7, 15)] == [0, 1, 2, 3, 8, 9, 14, 15]
    lines = gres_lines(topo, layout, read_render_nodes(host, topo.devices))
    assert [(g.bdf, g.file, g.cores) for g in lines] == [
        ("0000:18:00.0", "/dev/nvidia0", (0, 1, 2, 3)), ("0000:3b:00.0", "/dev/nvidia1", (0, 1, 2, 3)),
        ("0000:86:00.0", "/dev/nvidia2", (4, 5, 6, 7)), ("0000:af:00.0", "/dev/nvidia3", (4, 5, 6, 7))]


def slurm_accepts(cores: set[int], cores_per_socket: int, sockets: int) -> bool:
    """gres.c _check_core_range_matches_sock: all cores, or exactly the cores of one socket."""
    if len(cores) == cores_per_socket * sockets:
        return True
    for i in range(sockets):
        inside = {c for c in cores if i * cores_per_socket <= c < (i + 1) * cores_per_socket}
        if inside and not (len(inside) == cores_per_socket == len(cores)):
            return False
    return bool(cores)


def test_gpu_cores_are_the_gpus_socket_by_slurmds_own_map():
    """nvidiagpunumanodes (POWER9, SMT4, node ids 0,8,250-255, 6 GPUs): each GPU's Cores= is one socket Slurm
    accepts, and slurmd's own map turns those abstract cores into CPUs of the GPU's NUMA node."""
    topo, layout, host = _layout("nvidiagpunumanodes")
    _, cpu_map = slurmd_reference(SLURMD / "nvidiagpunumanodes.txt")
    lines = gres_lines(topo, layout, read_render_nodes(host, topo.devices))
    gpus = gpus_in_bus_order(topo)
    assert len(lines) == len(gpus) == 6
    checked = 0
    for line, gpu in zip(lines, gpus, strict=True):
        assert slurm_accepts(set(line.cores), layout.cores_per_socket, len(layout.sockets))
        node_cpus = set(topo.node(gpu.node).cpus)
        for core in line.cores:
            for t in range(layout.threads_per_core):
                absid = core * layout.threads_per_core + t
                if absid in cpu_map:  # slurmd 22.05 maps no Linux CPU id >= 32 here (socket 1: CPUs 88-103)
                    assert cpu_map[absid][0] in node_cpus
                    checked += 1
    assert checked == 3 * 16  # the three GPUs of node 0, 4 cores x 4 threads each
    assert any("88-103" in n for n in layout.notes)


def test_numa_as_socket_numbers_sockets_by_node():
    topo, layout, host = _layout("memorysidecaches", numa_as_socket=True)
    assert len(layout.sockets) == 4 and layout.cores_per_socket == 10
    # sockets in order of their lowest CPU: nodes 0 (0,4,..), 1 (1,5,..), 2, 3
    assert [{c for core in s for c in core.cpus} for s in layout.sockets] == [set(topo.node(i).cpus) for i in range(4)]


def test_hostlist_and_config_lines(tmp_path):
    from numatune.plan.slurm import expand_hostlist
    from numatune.readers.schedconf import gres_lines as read_gres
    from numatune.readers.schedconf import slurm_node_lines

    assert expand_hostlist("gpu[01-03,7],login") == ["gpu01", "gpu02", "gpu03", "gpu7", "login"]
    assert expand_hostlist("/dev/nvidia[0-1]") == ["/dev/nvidia0", "/dev/nvidia1"]
    conf = tmp_path / "slurm.conf"
    conf.write_text("# c\nnodename=DEFAULT RealMemory=1000 # trailing\n"
                    "NodeName=n[1-2] Sockets=2 \\\n  CoresPerSocket=4\n")
    [(number, node)] = slurm_node_lines(conf)
    assert number == 3 and node == {"realmemory": "1000", "nodename": "n[1-2]", "sockets": "2", "corespersocket": "4"}
    gres = tmp_path / "gres.conf"
    gres.write_text("AutoDetect=nvml\nName=gpu File=/dev/nvidia[0-3]\n")
    assert [p for _, p in read_gres(gres)] == [{"autodetect": "nvml"}, {"name": "gpu", "file": "/dev/nvidia[0-3]"}]


def test_cache_groups_order_cores_inside_a_socket():
    """hwloc sorts each level by its lowest CPU: with L3 A = CPUs {0,2} and B = {1,3} in one package, Slurm's
    cores are 0,2 (cache A) then 1,3 (cache B), not 0,1,2,3. Hand-built topology (no fixture has such caches)."""
    from numatune.model.topology import Cpu, CpuSummary, NumaNode, Topology

    cpus = tuple(Cpu(i, True, package=0, core=i, node=0, siblings=(i,)) for i in range(4))
    topo = Topology("hand-made", False, CpuSummary(None, None, None, (0,), 4, 1, (0, 1, 2, 3), (), (0, 1, 2, 3)),
                    cpus, (NumaNode(0, (0, 1, 2, 3), 1024),), True)
    assert [c.cpus for c in slurm_layout(topo).cores] == [(0,), (1,), (2,), (3,)]
    layout = slurm_layout(topo, (frozenset({0, 2}), frozenset({1, 3})))
    assert [c.cpus for c in layout.cores] == [(0,), (2,), (1,), (3,)]
    assert layout.abstract_cpu() == {0: 0, 2: 1, 1: 2, 3: 3}


def test_links_from_the_gpu_fabric_as_slurm_counts_them():
    """Links= per GPU: -1 for itself, the direct link count to each other GPU in Slurm's index order; an
    NVSwitch pair is not a direct link (slurmd's NVML plugin counts 0 for it). The fabric is hand-built here:
    the fabric reader (topo.fabric) fills it on real nodes."""
    from types import SimpleNamespace

    from numatune.plan.slurm import fabric_link_counts

    topo, layout, host = _layout("handmade-launch-2s4gpu-cxl")
    a, b, c, d = (g.bdf for g in gpus_in_bus_order(topo))
    link = SimpleNamespace
    fabric = SimpleNamespace(links=(link(a=a, b=b, kind="nvlink", count=4), link(a=c, b=d, kind="xgmi", count=None)),
                             nvswitch=(link(bdf=a, count=18), link(bdf=c, count=18)))
    counts, note = fabric_link_counts(SimpleNamespace(fabric=fabric))
    assert counts == {(a, b): 4, (b, a): 4, (c, d): 1, (d, c): 1} and note == ""
    lines = gres_lines(topo, layout, {}, counts)
    assert [g.links for g in lines] == [(-1, 4, 0, 0), (4, -1, 0, 0), (0, 0, -1, 1), (0, 0, 1, -1)]
    assert lines[0].text("n").endswith("Links=-1,4,0,0")
    only_switch = SimpleNamespace(links=(), nvswitch=(link(bdf=a, count=18), link(bdf=b, count=18)))
    counts, note = fabric_link_counts(SimpleNamespace(fabric=only_switch))
    assert counts == {} and "NVSwitch" in note
    assert fabric_link_counts(topo) == ({}, "")  # no fabric on this topology


def test_hybrid_e_cores_are_left_out_as_slurmd_does():
    """slurmd >= 23.02 (_remove_ecores) drops Intel E-cores unless SlurmdParameters=allow_ecores. Hand-built
    hybrid topology: P-cores 0-3 (SMT pairs 0-1, 2-3), E-cores 4-7."""
    from numatune.model.topology import Cpu, CpuSummary, NumaNode, Topology
    from numatune.readers.cpukinds import group_cpu_kinds

    cpus = tuple(Cpu(i, True, package=0, core=i // 2 if i < 4 else i, node=0,
                     siblings=(i - i % 2, i - i % 2 + 1) if i < 4 else (i,), core_type="core" if i < 4 else "atom")
                 for i in range(8))
    topo = Topology("hand-made", False, CpuSummary(None, None, None, (0,), 6, 2, tuple(range(8)), (), tuple(range(8))),
                    cpus, (NumaNode(0, tuple(range(8)), 1024),), True, cpu_kinds=group_cpu_kinds(cpus))
    layout = slurm_layout(topo)
    assert (layout.cpus, layout.cores_per_socket, layout.threads_per_core) == (4, 2, 2)
    assert "E-cores (Linux CPUs 4-7) left out" in layout.notes[0]
    both = slurm_layout(topo, allow_ecores=True)
    assert (both.cpus, both.cores_per_socket, both.threads_per_core) == (8, 6, 1)  # 8 // 6: slurmd's own arithmetic


def test_e_cores_are_the_cpu_kinds_of_intel_atom_only():
    """The E-cores slurmd drops are the cpu_atom kind of Topology.cpu_kinds (hwloc's CoreType=IntelAtom): on
    the Alder Lake tree CPUs 8-15; Arm efficiency kinds (GB10's A725) and kinds without PMU devices stay."""
    topo, layout, _ = _layout("nri-sample1-alderlake")
    assert [k.cpus for k in topo.cpu_kinds.kinds if k.part == "cpu_atom"] == [tuple(range(8, 16))]
    assert layout.cpus == 8 and "E-cores (Linux CPUs 8-15) left out" in layout.notes[0]
    assert _layout("nri-sample1-alderlake", allow_ecores=True)[1].cpus == 16
    for name in ("nvidia-dgx-gb10", "20em64t-hybrid-1p6c2t+2ca4co1t"):
        topo, layout, _ = _layout(name)
        assert topo.cpu_kinds.heterogeneous and layout.cpus == len(topo.cpu.online)
        assert not any("E-cores" in n for n in layout.notes)


def test_reserved_cores_are_the_least_performant_ones_as_irq_plan_leaves_them():
    """--reserve-cores on the Alder Lake tree: E-cores 8-9 are kept for the system by launch, irq plan and emit
    alike; slurmd leaves E-cores out, so CpuSpecList names none and says why; with --allow-ecores it maps them."""
    from numatune.commands.emit import slurm_emit
    from numatune.plan.irq import housekeeping_cores, physical_cores
    from numatune.plan.launch import without_reserved

    topo, layout, host = _layout("nri-sample1-alderlake")
    cores = housekeeping_cores(topo, 2)[0]
    assert cores == [(8,), (9,)]
    everything = physical_cores(topo, topo.node(0).cpus)
    assert set(everything) - set(without_reserved(topo, everything, 2)) == set(cores)
    out = slurm_emit(host, topo, reserve_cores=2)
    assert out.node.cpu_spec == () and any("8-9 are E-cores slurmd leaves out" in n for n in out.notes)
    assert not any("partial" in n for n in out.notes)
    both = slurm_emit(host, topo, reserve_cores=2, allow_ecores=True)
    assert both.node.cpu_spec == (4, 5)  # Linux CPUs 8-9 in slurmd's numbering with E-cores counted
