"""The one rank → GPU → node resolver: launch and audit agree on every fixture, and the cases where
they used to disagree (32-bit PCI domains, UUID prefixes, vendor filtering, MVAPICH, cgroup namespaces)."""

from __future__ import annotations

import pytest

from numatune.errors import BindingError
from numatune.live.bind import cgroup_cpuset, read_launch_devices, read_launch_topology
from numatune.model.launch import CpuBind, LaunchFacts, LaunchOptions, RankInfo
from numatune.model.resolve import ENV_KEYS, cgroup_cpuset_dirs, gpu_order, pci_sort_key, rank_gpu
from numatune.plan.launch import choose_gpu as launch_gpu
from numatune.plan.launch import detect_rank
from numatune.readers.procs import ENVIRON_KEYS, local_rank
from numatune.readers.procs import choose_gpu as audit_gpu
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root, tree_fixtures
from tests.gpu_oracle import gpu_numbering, hex_key, selected


def _envs(topo) -> list[dict[str, str]]:
    gpus, _ = gpu_order(topo.devices)
    n = len(gpus)
    envs: list[dict[str, str]] = [{"LOCAL_RANK": str(r)} for r in range(n + 1)]
    envs.append({"MV2_COMM_WORLD_LOCAL_RANK": "0"})
    if n >= 2:
        backwards = ",".join(str(i) for i in reversed(range(n)))
        envs += [{"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": backwards},
                 {"SLURM_LOCALID": "0", "ROCR_VISIBLE_DEVICES": "1"},
                 {"LOCAL_RANK": "0", "HIP_VISIBLE_DEVICES": "1,0"}]
    uuids = [g.nvidia.uuid for g in gpus if g.nvidia and g.nvidia.uuid]
    if uuids:
        envs += [{"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": uuids[-1]},
                 {"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": uuids[-1][:12]}]  # a unique prefix, as CUDA accepts
    return envs


@pytest.mark.parametrize("name", tree_fixtures())
def test_launch_and_audit_resolve_the_same_gpu(name):
    """Both resolve every environment to the GPU that tests/gpu_oracle.py selects from the tree's own files
    (hex PCI order for NVIDIA, KFD node order for AMD): not to whatever one shared function returns."""
    root = fixture_root(name)
    host = Host.open(root)
    topo = read_topology(host, pci_ids=None, settings=False)
    launch_topo = read_launch_topology(host, node_kinds=False)
    devices = read_launch_devices(host, launch_topo)
    gpus = [d for d in topo.devices if d.kind == "gpu"]
    if gpus:
        order = gpu_numbering(root, [(d.bdf, d.vendor_id) for d in gpus])
    else:  # no GPU: accelerators (NEC Vector Engines) in PCI order
        order = sorted((d.bdf for d in topo.devices if d.kind == "accelerator"), key=hex_key)
    vendor = {d.bdf: d.vendor_id for d in topo.devices}
    uuid = {d.bdf: d.nvidia.uuid for d in topo.devices if d.nvidia and d.nvidia.uuid}
    for env in _envs(topo):
        rank, _ = local_rank(env)
        info = detect_rank(env, LaunchOptions(cpu_bind=CpuBind("none")))
        assert info.rank == (rank if rank is not None else 0)
        try:
            dev, _, _ = launch_gpu(env, LaunchOptions(), RankInfo(info.rank, info.rank_source, None, None), devices)
            launched = dev.bdf
        except BindingError:
            launched = None
        audited, note = audit_gpu((), env, rank, topo)
        assert rank is not None  # every environment of _envs names a local rank
        expected = selected(env, rank, order, vendor, uuid)
        assert launched == expected, (name, env)
        assert (audited.bdf if audited else None) == expected, (name, env, note)
        if launched is None and order:
            assert note  # audit says why, as launch raised


def test_the_oracle_can_tell_kfd_order_from_pci_order():
    """On the MI210 tree the oracle's GPU0 (KFD node 2) is not the first in PCI order: the test above would
    fail if numatune numbered AMD GPUs by PCI address (or NVIDIA ones by directory name)."""
    root = fixture_root("topo-mi210-xgmi-pcie")
    gpus = [d for d in read_topology(Host.open(root), pci_ids=None, settings=False).devices if d.kind == "gpu"]
    order = gpu_numbering(root, [(d.bdf, d.vendor_id) for d in gpus])
    assert order[0] == "0000:63:00.0" and order != sorted(order, key=hex_key)
    env = {"LOCAL_RANK": "0", "HIP_VISIBLE_DEVICES": "1,0"}
    vendor = {d.bdf: d.vendor_id for d in gpus}
    assert selected(env, 0, order, vendor, {}) == order[1] == "0000:43:00.0"


def test_gpu_order_is_numeric_on_wide_pci_domains():
    # Domains wider than 16 bits (VMD, Hyper-V): "10000" sorts after "2000" as a number, not as text.
    bdfs = ["10000:00:04.0", "2000:00:01.0", "0000:af:00.0", "0000:18:00.0"]
    assert sorted(bdfs, key=pci_sort_key) == ["0000:18:00.0", "0000:af:00.0", "2000:00:01.0", "10000:00:04.0"]
    assert sorted(bdfs) != sorted(bdfs, key=pci_sort_key)


def test_real_32bit_domain_tree_orders_numerically():
    host = Host.open(fixture_root("2pa-pcidomain32bits"))
    names = host.listdir("/sys/bus/pci/devices")
    ordered = sorted(names, key=pci_sort_key)
    assert ordered[-2:] == ["10000:00:00.0", "10000:00:04.0"]
    topo = read_topology(host, pci_ids=None, settings=False)
    assert [d.bdf for d in topo.devices] and all(pci_sort_key(d.bdf)[0] in (0, 0x10000) for d in topo.devices)


def test_cuda_visible_devices_counts_nvidia_gpus_only():
    # Real records from two trees on one list: CUDA enumerates the NVIDIA GPUs, ROCm the AMD ones.
    nv = read_topology(Host.open(fixture_root("handmade-launch-2s4gpu-cxl")), pci_ids=None, settings=False).gpus
    amd = read_topology(Host.open(fixture_root("topo-mi210-xgmi-pcie")), pci_ids=None, settings=False).gpus
    mixed = (*amd, *nv)
    first_nvidia = sorted(nv, key=lambda d: pci_sort_key(d.bdf))[0]
    # ROCm counts AMD GPUs in KFD node order (ROCr walks the KFD nodes upwards), not PCI order: on the
    # MI210 tree the first GPU node (KFD node 2) is 0000:63:00.0, while PCI order starts at 0000:03:00.0.
    first_amd = min(amd, key=lambda d: d.amd_kfd_node)
    assert first_amd.bdf == "0000:63:00.0" != sorted(amd, key=lambda d: pci_sort_key(d.bdf))[0].bdf
    assert rank_gpu({"CUDA_VISIBLE_DEVICES": "0"}, 0, mixed)[0] == first_nvidia
    assert rank_gpu({"ROCR_VISIBLE_DEVICES": "0"}, 0, mixed)[0] == first_amd
    assert rank_gpu({"HIP_VISIBLE_DEVICES": "0"}, 0, amd)[0] == first_amd
    assert "differs from PCI bus order" in rank_gpu({"HIP_VISIBLE_DEVICES": "0"}, 0, amd)[2]


def test_mvapich_local_rank_is_known_to_launch_and_audit():
    env = {"MV2_COMM_WORLD_LOCAL_RANK": "3"}
    assert local_rank(env) == (3, "MV2_COMM_WORLD_LOCAL_RANK")
    assert detect_rank(env, LaunchOptions()).rank == 3
    assert "MV2_COMM_WORLD_LOCAL_RANK" in ENV_KEYS and ENVIRON_KEYS == ENV_KEYS


def test_cgroup_paths_from_a_namespace_name_no_directory():
    assert cgroup_cpuset_dirs("0::/../../user.slice/x.scope\n") == []
    dirs = cgroup_cpuset_dirs("0::/job/step_0\n")
    assert [d for d, _, _ in dirs] == ["/sys/fs/cgroup/job/step_0", "/sys/fs/cgroup/job", "/sys/fs/cgroup"]
    v1 = cgroup_cpuset_dirs("4:cpuset:/slurm/uid_1/job_2\n1:name=systemd:/x\n")
    assert v1[0] == ("/sys/fs/cgroup/cpuset/slurm/uid_1/job_2", "cpuset.effective_cpus", "cpuset.effective_mems")


def test_launch_in_a_cgroup_namespace_reads_no_cpuset_instead_of_failing(tmp_path):
    # Hand-made tree: /proc/self/cgroup as a process inside a cgroup namespace sees its parent's path.
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/../../system.slice/docker-1.scope\n")
    (tmp_path / "sys").mkdir()
    assert cgroup_cpuset(Host.open(tmp_path)) == (None, None)


def test_real_cgroup_of_a_fixture_is_read_by_both(host_of):
    host = host_of("2pa-pcidomain32bits")
    text = host.read_text("/proc/self/cgroup")
    assert cgroup_cpuset_dirs(text)  # a real v1/v2 line names directories


def test_audit_reports_a_list_without_a_rank():
    topo = read_topology(Host.open(fixture_root("handmade-launch-2s4gpu-cxl")), pci_ids=None, settings=False)
    gpu, note = audit_gpu((), {"CUDA_VISIBLE_DEVICES": "0,1"}, None, topo)
    assert gpu is None and "no local rank" in note
    with pytest.raises(BindingError):
        rank_gpu({"CUDA_VISIBLE_DEVICES": "0,1"}, None, topo.devices)
    assert LaunchFacts  # the launch facts type is what launch passes; imported to keep one name space


def _devices(name: str):
    return read_topology(Host.open(fixture_root(name))).devices


def test_ranks_that_each_see_one_gpu_split_their_node_by_their_own_gpus():
    """Slurm --gpus-per-task: rank r sees only GPU4+r. They were assumed to hold GPU0.. (another socket),
    so both ranks got the whole of node 1's cores: overlapping exclusive CPUs."""
    devices = _devices("handmade-dgx-h100-ids")
    gpus, _ = gpu_order(devices)
    held = []
    for r in (0, 1):
        dev, source, _, in_use = rank_gpu({"CUDA_VISIBLE_DEVICES": str(4 + r)}, r, devices, local_size=2)
        assert dev == gpus[4 + r] and in_use == gpus[4:6] and "GPU4-GPU5" in source
        held.append(in_use)
    assert held[0] == held[1]
    dev, source, _, in_use = rank_gpu({"CUDA_VISIBLE_DEVICES": "1"}, 3, devices, local_size=4)
    assert in_use == gpus[:4] and "assumed to be GPU0" in source  # GPU1 cannot be rank 3's of a rank-ordered set


def test_rocm_applies_rocr_visible_devices_before_hip_visible_devices():
    devices = _devices("topo-mi210-xgmi-pcie")
    gpus, _ = gpu_order(devices)
    for second in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        dev, source, _, _ = rank_gpu({"ROCR_VISIBLE_DEVICES": "4,5,6,7", second: "1"}, 0, devices)
        assert dev == gpus[5] and "an index into ROCR_VISIBLE_DEVICES=4,5,6,7" in source


def test_cuda_stops_enumerating_at_the_first_entry_naming_no_device():
    devices = _devices("handmade-dgx-h100-ids")
    gpus, _ = gpu_order(devices)
    assert rank_gpu({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, 0, devices)[0] == gpus[0]
    assert rank_gpu({"CUDA_VISIBLE_DEVICES": "3,9,1"}, 0, devices)[0] == gpus[3]
    assert rank_gpu({"CUDA_VISIBLE_DEVICES": "1,2,-1,3"}, 1, devices)[0] == gpus[2]
    with pytest.raises(BindingError, match="local rank 2 but CUDA_VISIBLE_DEVICES lists 2 GPU"):
        rank_gpu({"CUDA_VISIBLE_DEVICES": "1,2,-1,3"}, 2, devices)
    with pytest.raises(BindingError, match="hides every GPU"):
        rank_gpu({"CUDA_VISIBLE_DEVICES": "-1"}, 0, devices)
