"""Facts known to be true of each real fixture tree (from the upstream INDEX rows in fixtures/README.md)."""

from __future__ import annotations

import pytest

from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root


def topo(host_of, name):
    return read_topology(host_of(name))


def cpus_of(t):
    return {n.id: n.cpus for n in t.nodes}


def test_power7_node_ids_with_holes(host_of):
    t = topo(host_of, "256ppc-8n8s4t")
    assert [n.id for n in t.nodes] == [0, 1, 4, 5, 8, 9, 12, 13]
    assert all(len(n.cpus) == 32 for n in t.nodes)
    assert cpus_of(t)[4] == tuple(range(64, 96))
    assert len(t.cpu.online) == 256 and t.cpu.threads_per_core == 4
    # POWER: package id -1 everywhere; hwloc (and slurmd) make a package of each core_siblings list
    assert len(t.cpu.sockets) == 64 and t.cpu.sockets[:2] == (0, 4)
    assert t.node(0).distances == {0: 10, 1: 20, 4: 40, 5: 40, 8: 40, 9: 40, 12: 40, 13: 40}
    assert t.node(13).distances[12] == 20


def test_arm_nul_terminated_files_and_odd_package_ids(host_of):
    t = topo(host_of, "128arm-2pa2n8cluster4co")
    assert cpus_of(t) == {i: tuple(range(32 * i, 32 * i + 32)) for i in range(4)}
    assert t.cpu.sockets == (36, 8442)
    assert t.cpu.architecture == "aarch64"
    assert t.node(0).distances == {0: 10, 1: 16, 2: 32, 3: 33}


def test_two_socket_with_nic_on_node1_nvme_unknown_and_dax(host_of):
    t = topo(host_of, "32em64t-2n8c+dax+nvme+mic+dimms")
    assert cpus_of(t) == {0: tuple(range(8)), 1: tuple(range(8, 16))}
    mlx = t.device("0000:82:00.0")
    assert (mlx.kind, mlx.numa_node, mlx.netdevs, mlx.rdma) == ("nic", 1, ("ib0",), ("mlx4_0",))
    nvme = t.device("0000:00:02.0")
    assert nvme.kind == "nvme" and nvme.numa_node is None
    assert nvme.inferred_node == 0 and nvme.inferred_from == "local_cpulist"
    assert t.device("0000:83:00.0").kind == "accelerator"
    assert t.device("0000:05:00.0").kind == "display"  # the BMC's ASPEED VGA is not a GPU
    assert {(d.name, d.target_node, d.mode, d.backing) for d in t.cxl.dax} == {
        ("dax0.0", 4, "device_dax", "nvdimm"),
        ("dax1.3", 5, "device_dax", "nvdimm"),
        ("dax1.4", 5, "kmem", "nvdimm"),
    }
    # The kernel's `offline` file says 16-127, but those are possible CPUs that are not present (hotplug
    # slots; `present` is 0-15): offline means present and not online, so there are none here.
    assert (t.cpu.offline, len(t.cpu.online)) == ((), 16)


def test_offline_cpus_without_topology(host_of):
    t = topo(host_of, "16em64t-4s2c2t-offlines")
    assert {c.id for c in t.cpus if not c.online} == {2, 5, 13, 14}
    assert set(t.cpu.offline) >= {2, 5, 13, 14}
    g = topo(host_of, "vm-offlineCPUs")
    assert g.cpu.online == (0, 1) and set(g.cpu.offline) == {2, 3}


def test_kernel_without_numa_is_one_node(host_of):
    t = topo(host_of, "20s390-2g6s4c")
    assert not t.numa_kernel
    assert [n.id for n in t.nodes] == [0]
    assert t.nodes[0].cpus == t.cpu.online and len(t.cpu.online) == 20
    # physical_package_id is -1 on every CPU: packages by their core_siblings lists, as hwloc (8 of them)
    assert len(t.cpu.sockets) == 8 and t.cpu.sockets[0] == 0


def test_empty_online_files_mean_online(host_of):
    """hwloc's ia64 tree: every per-CPU `online` file is empty and there is no cpu/online list; hwloc and
    slurmd -C read 128 CPUs online, 64 packages of 2 cores."""
    t = topo(host_of, "128ia64-17n4s2c")
    assert t.cpu.online == tuple(range(128)) and t.cpu.offline == ()
    assert len(t.cpu.sockets) == 64 and t.cpu.cores == 128 and t.cpu.threads_per_core == 1


def test_pci_domain_wider_than_16_bits(host_of):
    t = topo(host_of, "2pa-pcidomain32bits")
    bdfs = host_of("2pa-pcidomain32bits").listdir("/sys/bus/pci/devices")
    assert any(b.startswith("10000:") for b in bdfs)
    assert all(d.numa_node is None for d in t.devices)


def test_buggy_firmware_all_nodes_same_cpus(host_of):
    t = topo(host_of, "8em64t-2s2ca2c-buggynuma")
    assert len(t.nodes) == 8
    assert len({n.cpus for n in t.nodes}) == 1


def test_power9_gpu_memory_nodes_and_distance_order(host_of):
    t = topo(host_of, "nvidiagpunumanodes")
    assert [n.id for n in t.nodes] == [0, 8, 250, 251, 252, 253, 254, 255]
    assert {n.id: n.kind for n in t.nodes if not n.cpus} == {i: "gpu" for i in range(250, 256)}
    # node8's row "40 10 80 ..." lines up with the online list [0, 8, 250...], not with 0..N
    assert t.node(8).distances[0] == 40 and t.node(8).distances[8] == 10
    assert len(t.gpus) == 6
    assert all(d.vendor_id == 0x10DE for d in t.gpus)


def test_hmat_access1_and_cpuless_nodes(host_of):
    t = topo(host_of, "fakeheteromemtiers")
    assert [n.id for n in t.nodes] == [0, 1, 2, 4, 6, 8, 9]
    assert {n.id for n in t.nodes if not n.cpus} == {4, 6, 8, 9}
    n4 = t.node(4)
    assert n4.hmat and n4.hmat[0].access_class == 1 and n4.hmat[0].initiators == (1,)
    # QEMU's HMAT gave bandwidths but left the latencies at 0: unknown, with the reason
    assert n4.hmat[0].read_bandwidth_mbps == 10000 and n4.hmat[0].read_latency_ns is None
    assert n4.hmat[0].write_latency_ns is None
    assert n4.hmat[0].unknown_reason == "read_latency, write_latency 0 in sysfs: not provided by the firmware's HMAT"
    assert {d.backing for d in t.cxl.dax} == {"hmem", "nvdimm"}


def test_memory_side_caches_from_real_optane_2lm(host_of):
    t = topo(host_of, "memorysidecaches")
    assert len(t.nodes) == 4 and all(n.memory_side_caches for n in t.nodes)
    assert all(e.access_class == 0 for n in t.nodes for e in n.hmat)


def test_gpu_numa_node_minus_one(host_of):
    t = topo(host_of, "vm-accel-nvidia-p100")
    gpu = t.device("0000:06:00.0")
    assert gpu.kind == "gpu" and gpu.vendor_id == 0x10DE and gpu.numa_node is None
    assert [d.kind for d in t.devices if d.bdf == "0000:04:00.0"] == ["display"]  # virtio-gpu


def test_amd_kfd_gpus_split_over_two_cpu_agents_but_no_node_is_invented(host_of):
    # The KFD has two CPU agents; the tree has no CPU or node directory (one implicit node): the GPUs
    # keep their CPU agent, and no node 1 that the tree does not have is inferred.
    t = topo(host_of, "topo-mi210-xgmi-pcie")
    assert len(t.gpus) == 8
    agents = [g.kfd_cpu_agent for g in t.gpus]
    assert agents.count(0) == 4 and agents.count(1) == 4
    assert all(g.inferred_node is None and g.node is None for g in t.gpus)
    assert {n.id for n in t.nodes} == {0}


def test_functions_of_one_card_may_disagree(host_of):
    t = topo(host_of, "intel-xeon-L5640-2node")
    assert cpus_of(t)[0] == tuple(range(0, 24, 2))
    assert t.device("0000:05:00.0").numa_node == 0
    assert t.device("0000:05:00.1").numa_node == 1


def test_infiniband_on_node_2_of_four(host_of):
    t = topo(host_of, "40intel64-2g2n4c+pcilocality")
    ib = [d for d in t.nics if d.numa_node == 2]
    assert len(ib) == 1 and len(t.nodes) == 4


def test_this_machines_capture(host_of):
    t = topo(host_of, "dev-1node-x86")
    assert [n.id for n in t.nodes] == [0]
    assert t.memory_tiers == {4: (0,)}
    assert t.settings.weighted_interleave_auto is True  # spelt __auto_type on this kernel
    nic = t.nics[0]
    assert nic.netdevs == ("eth0",) and nic.numa_node is None


@pytest.mark.parametrize("name", ["memorysidecaches", "fakememinitiators-1np2c+1npp+gi"])
def test_generic_initiator_and_hmat_in_both_classes(host_of, name):
    t = topo(host_of, name)
    classes = {e.access_class for n in t.nodes for e in n.hmat}
    assert classes


# -- real-kernel trees captured by `numatune snapshot` in the VM harness (Debian 6.12 under QEMU) -------

def test_vm_two_socket_nic_and_nvme_on_node_1(host_of):
    t = topo(host_of, "vm-two-socket")
    assert cpus_of(t) == {0: (0, 1), 1: (2, 3)}
    assert t.node(0).distances == {0: 10, 1: 21}
    assert t.memory_tiers == {4: (0, 1)}
    nic = t.nics[0]
    assert nic.numa_node == 1 and nic.local_cpus == (2, 3) and nic.netdevs
    assert nic.host_bridge == "pci0000:40"  # the PCIe expander bridge QEMU put on node 1


def test_vm_cxl_chain_memdev_region_dax_node(host_of):
    t = topo(host_of, "vm-cxl")
    assert {n.id: n.kind for n in t.nodes} == {0: "dram", 1: "dram", 2: "unknown", 3: "cxl"}
    (mem,) = t.cxl.memdevs
    assert mem.pci_bdf == "0000:81:00.0" and mem.numa_node == 1 and mem.pmem_size == 1 << 30
    (region,) = t.cxl.regions
    assert (region.memdevs, region.dax, region.nodes, region.mode) == (("mem0",), ("dax0.0",), (3,), "pmem")
    assert {d.kind for d in t.cxl.decoders} == {"root", "switch", "endpoint"}
    (dax,) = t.cxl.dax
    assert (dax.target_node, dax.mode, dax.backing) == (3, "kmem", "cxl")
    # the slow HMAT node and the CXL node sit in a lower tier than DRAM
    assert t.memory_tiers[4] == (0, 1) and set(t.memory_tiers[22]) == {2, 3}
    slow = t.node(2).hmat[0]
    assert (slow.read_latency_ns, slow.read_bandwidth_mbps, slow.initiators) == (250, 20480, (0,))
    assert any(d.kind == "cxl" and d.bdf == "0000:81:00.0" for d in t.devices)


# -- roots that are not machines -------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["check"], ["inspect", "--json"], ["irq"], ["emit", "slurm"],
                                  ["launch", "--node", "0", "--dry-run", "--", "true"]], ids=lambda a: a[0])
def test_a_root_with_nothing_of_a_machine_is_refused(cli, tmp_path, args):
    """An empty saved tree (sys/ and proc/ with nothing in them) and `--root /proc` passed `check` ("PASS, 0
    CPUs"): now exit 3 saying what is missing."""
    import os

    from tests.conftest import NOT_MACHINES

    empty = tmp_path / "empty"
    (empty / "sys").mkdir(parents=True)
    (empty / "proc").mkdir()
    roots = [str(empty), *(str(fixture_root(n)) for n in NOT_MACHINES)]
    if os.path.isdir("/proc/sys"):
        roots.append("/proc")
    for root in roots:
        r = cli("--root", root, *args)
        assert r.exit_code == 3, (root, r.exit_code, r.stderr)
        assert r.stderr.startswith(f"numatune: error: {root} is not a machine: no CPUs (sys/devices/system/cpu)")
        assert r.stdout == ""


def test_a_partial_capture_is_still_read():
    """A corpus's /proc/interrupts alone, or a KFD topology alone, is part of a machine: read, not refused."""
    for name in ("pcp-16cpu-s390x", "topo-mi210-xgmi-pcie"):
        topo = read_topology(Host.open(fixture_root(name)))
        assert not topo.cpus


def test_a_tree_whose_nodes_are_gone_is_refused(cli, tmp_path):
    """node/online lists node 0 but no node0 directory is there (a capture that lost them): one node was
    assumed ("no NUMA information in this kernel") and check passed; now exit 3 saying what is missing."""
    import shutil

    from tests.conftest import fixture_copy

    root = fixture_copy("dev-1node-x86", tmp_path / "copy")
    for node in (root / "sys/devices/system/node").glob("node[0-9]*"):
        shutil.rmtree(node)
    r = cli("--root", str(root), "check")
    assert r.exit_code == 3 and "is not a machine: no NUMA nodes (sys/devices/system/node/online lists 0" in \
        r.stderr, r.stderr
