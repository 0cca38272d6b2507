"""launch --nic: each rank's own NIC from the PCIe path, on the hand-made rail-aligned tree and real trees."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from numatune.errors import BindingError
from numatune.live.bind import read_launch_devices, read_launch_topology, read_rdma_ports
from numatune.model.launch import LaunchFacts, LaunchOptions, Numactl
from numatune.plan.launch import normalize_bdf, plan_launch
from numatune.system.host import Host
from tests.conftest import PROJECT, fixture_root
from tests.handmade_rail import build_rail

NUMACTL = Numactl("/usr/bin/numactl", "2.0.19", True, True)


def plan(root, env: dict[str, str], **opts):
    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    bdf = normalize_bdf(opts["gpu"]) if opts.get("gpu") else None
    devices = read_launch_devices(host, topo, bdf, nics=True)
    facts = LaunchFacts(env=env, numactl=NUMACTL, kernel="6.10.0",
                        rdma_ports=read_rdma_ports(host, [d for d in devices if d.kind == "nic"]))
    return plan_launch(topo, devices, facts, LaunchOptions(**opts), ("python", "train.py"))


def ranks(size: int) -> list[dict[str, str]]:
    return [{"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(size)} for r in range(size)]


@pytest.fixture(scope="module")
def rail(tmp_path_factory):
    return build_rail(tmp_path_factory.mktemp("rail"))


def test_rail_aligned_each_gpu_gets_the_nic_under_its_switch(rail):
    seen = []
    for r, env in enumerate(ranks(8)):
        p = plan(rail, env, nic="auto")
        assert p.nic.rdma == f"mlx5_{r}" and p.nic.path == "PXB" and p.nic.shared_with == ()
        assert int(p.nic.bdf[5:7], 16) // 0x40 == int(p.gpu.bdf[5:7], 16) // 0x40  # one switch per 0x40 buses
        assert p.env["UCX_NET_DEVICES"] == f"mlx5_{r}:1" and p.env["NCCL_IB_HCA"] == f"=mlx5_{r}:1"
        assert "NCCL_SOCKET_IFNAME" not in p.env and not [w for w in p.warnings if "overlap" not in w]
        assert any(x.startswith(f"nic: mlx5_{r} ") and "under its PCIe switch" in x for x in p.reasons)
        seen.append(p.nic.bdf)
    assert len(set(seen)) == 8


def test_two_gpus_per_nic_share_it_with_a_warning(tmp_path):
    root = build_rail(tmp_path, nics=1)
    p0, p1 = (plan(root, env, nic="auto") for env in ranks(8)[:2])
    assert p0.nic.rdma == p1.nic.rdma == "mlx5_0"
    assert p0.nic.shared_with == (p1.gpu.bdf,)
    assert any("must share NIC mlx5_0" in w for w in p0.warnings)


def test_nic_across_the_socket_is_a_warning(tmp_path):
    root = build_rail(tmp_path, nic_sockets=(0,))
    p = plan(root, ranks(8)[5], nic="auto")
    assert p.node == 1 and p.nic.path == "SYS" and p.nic.rdma in {f"mlx5_{i}" for i in range(4)}
    assert any("across the socket" in w and "SYS" in w for w in p.warnings)


def test_tcp_exports_the_netdev_and_named_nic_and_job_settings(rail):
    p = plan(rail, ranks(8)[2], nic="auto", nic_transport="tcp")
    assert p.env["NCCL_SOCKET_IFNAME"] == f"={p.nic.netdev}" and p.env["GLOO_SOCKET_IFNAME"] == p.nic.netdev
    assert p.nic.netdev == "ibp85s0" and "UCX_NET_DEVICES" not in p.env
    named = plan(rail, ranks(8)[0], nic="mlx5_7")
    assert named.nic.rdma == "mlx5_7" and named.nic.path == "SYS" and named.env["UCX_NET_DEVICES"] == "mlx5_7:1"
    kept = plan(rail, {**ranks(8)[0], "NCCL_IB_HCA": "mlx5_5"}, nic="auto")
    assert "NCCL_IB_HCA" not in kept.env and kept.env["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert any("NCCL_IB_HCA=mlx5_5 already set: left alone" in r for r in kept.reasons)
    with pytest.raises(BindingError, match="--nic mlx5_9: no such NIC in this root"):
        plan(rail, ranks(8)[0], nic="mlx5_9")
    assert plan(rail, ranks(8)[0]).nic is None  # opt-in


def test_real_trees_with_rdma_nics():
    # Xeon Phi (coprocessor) and a ConnectX-3 (mlx4_0) on node 1 of a real E5-2680 pair
    p = plan(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms"), {}, gpu="0000:83:00.0", nic="auto")
    assert p.node == 1 and p.nic.rdma == "mlx4_0" and p.nic.bdf == "0000:82:00.0" and p.nic.path != "SYS"
    assert p.env["NCCL_IB_HCA"] == "=mlx4_0:1"
    # the R910's QLogic HCA (qib0) sits on node 2: --node 2 takes it, node 0 is told it crosses the socket
    r910 = fixture_root("40intel64-2g2n4c+pcilocality")
    near = plan(r910, {}, node=2, nic="auto")
    assert near.nic.rdma == "qib0" and near.nic.path == "NODE" and not near.warnings
    far = plan(r910, {}, node=0, nic="auto")
    assert far.nic.rdma == "qib0" and any("across the socket" in w for w in far.warnings)


def test_no_rdma_nic_is_said_and_sets_nothing():
    p = plan(fixture_root("handmade-launch-2s4gpu-cxl"), ranks(4)[0], nic="auto")
    assert p.nic is None and not any(k in p.env for k in ("UCX_NET_DEVICES", "NCCL_IB_HCA"))
    assert any("no RDMA NIC in this root" in w for w in p.warnings)


def test_cli_json_plan_and_emitted_wrapper_carry_the_nic(rail, tmp_path):
    env = {"PYTHONPATH": str(PROJECT), "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    base = [sys.executable, "-m", "numatune", "--root", str(rail), "launch", "--nic", "auto"]
    res = subprocess.run([*base, "--dry-run", "--json", "--", "python", "x"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "numatune.launch/2"
    assert doc["nic"]["rdma"] == "mlx5_3" and doc["nic"]["path"] == "PXB"
    assert doc["env"]["UCX_NET_DEVICES"] == "mlx5_3:1" and doc["torchrun"]["mode"] == "node"
    text = subprocess.run([*base, "--dry-run", "--", "python", "x"], env=env, capture_output=True, text=True,
                          timeout=60).stdout
    # the NIC's variables go before the binder, whichever this host has where (numactl, maybe not in /usr/bin)
    assert f"env OMP_NUM_THREADS=1 UCX_NET_DEVICES=mlx5_3:1 NCCL_IB_HCA==mlx5_3:1 {doc['argv'][0]} " in text
    wrap = tmp_path / "rank.sh"
    res = subprocess.run([*base, "--emit", str(wrap), "--", "python", "x"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "'--nic' 'auto'" in wrap.read_text()  # each rank's launch picks its own NIC where it runs


def test_dgx_h100_each_gpu_gets_the_nic_the_user_guide_pairs_it_with():
    # the hand-made DGX H100 identity tree: GPU i serves the ConnectX-7 on its row of the User Guide's table
    from tests.handmade_dgx_h100 import PAIRS

    root = fixture_root("handmade-dgx-h100-ids")
    for r, (gpu_bus, nic_bus, rdma, netdev, node) in enumerate(PAIRS):
        p = plan(root, {"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "8"}, nic="auto")
        assert p.gpu.bdf == f"0000:{gpu_bus:02x}:00.0" and p.node == node
        assert (p.nic.rdma, p.nic.netdev, p.nic.bdf) == (rdma, netdev, f"0000:{nic_bus:02x}:00.0")
        assert p.nic.path == "PXB" and not [w for w in p.warnings if "overlap" not in w]
        tcp = plan(root, {"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "8"}, nic="auto", nic_transport="tcp")
        assert tcp.env["NCCL_SOCKET_IFNAME"] == f"={netdev}"


def _pci(bdf: str, kind: str, node: int | None, bridge: str, rdma: tuple[str, ...] = ()):
    """A hand-made device record (the shape of the EPYC NPS4 case: no fixture has its NIC layout)."""
    from numatune.model.topology import PciDevice

    return PciDevice(bdf=bdf, path=f"/sys/devices/{bridge}/{bdf}", class_code=0x020700 if kind == "nic" else 0x030200,
                     vendor_id=0x15B3 if kind == "nic" else 0x10DE, device_id=1, kind=kind, numa_node=node,
                     ancestors=(), host_bridge=bridge, rdma=rdma)


def test_among_equally_far_nics_the_nearer_node_wins_and_the_warning_says_where():
    """Both NICs are SYS from the GPU (other NUMA nodes); one is on the same socket (SLIT 12), one across
    it (32). PCI order used to pick the far one and then warn about it."""
    from numatune.plan.nic import choose_nic

    gpu = _pci("0000:c1:00.0", "gpu", 0, "pci0000:c0")
    far = _pci("0000:05:00.0", "nic", 5, "pci0000:00", ("mlx5_0",))
    near = _pci("0000:41:00.0", "nic", 1, "pci0000:40", ("mlx5_1",))
    slit = {(0, 1): 12, (0, 5): 32}
    for dev, in_use, node in ((gpu, [gpu], 0), (None, [], 0)):
        reasons, warnings = [], []
        choice = choose_nic("auto", "rdma", dev, in_use, node, [gpu, far, near], reasons, warnings,
                            distance=lambda a, b: slit.get((a, b)))
        assert choice.rdma == "mlx5_1", reasons
        assert any("is on node 1" in w for w in warnings)
    unknown = _pci("0000:06:00.0", "nic", None, "pci0000:00", ("mlx5_2",))
    reasons, warnings = [], []
    choose_nic("mlx5_2", "rdma", gpu, [gpu], 0, [gpu, unknown], reasons, warnings)
    assert warnings and "no known NUMA node" in warnings[0] and "across the socket" not in warnings[0]
