"""plan_launch on fixture trees: rank → GPU → node → CPUs → memory policy → argv, for every launcher."""

from __future__ import annotations

import pytest

from numatune.cpulist import format_cpulist
from numatune.errors import BindingError, ImpossibleRequest, InputError, UsageError
from numatune.live.bind import read_launch_devices, read_launch_topology
from numatune.model.launch import CpuBind, LaunchFacts, LaunchOptions, Numactl
from numatune.plan.launch import (
    RANK_VARS,
    detect_rank,
    normalize_bdf,
    parse_cpu_bind,
    parse_weights,
    pci_sort_key,
    plan_launch,
    slurm_tasks_on_node,
)
from numatune.readers.nodes import read_interleave_weights
from numatune.system.host import Host
from tests.conftest import fixture_root, tree_fixtures

HM = "handmade-launch-2s4gpu-cxl"
NEW_NUMACTL = Numactl("/usr/bin/numactl", "2.0.19", True, True)
OLD_NUMACTL = Numactl("/usr/bin/numactl", None, True, False)
UUID_AF = "GPU-5e1c0a37-3b2d-4c1e-9f00-00000000af03"


def load(name: str, *, kinds: bool = False, bdf: str | None = None):
    host = Host.open(fixture_root(name))
    topo = read_launch_topology(host, node_kinds=kinds)
    return topo, read_launch_devices(host, topo, bdf)


def facts(env: dict[str, str] | None = None, **kw) -> LaunchFacts:
    base = {"numactl": NEW_NUMACTL, "taskset": "/usr/bin/taskset", "kernel": "6.10.0", "env": env or {}}
    base.update(kw)
    return LaunchFacts(**base)


def plan(name: str, env: dict[str, str] | None = None, *, kinds: bool = False, fkw: dict | None = None, **opts):
    bdf = normalize_bdf(opts["gpu"]) if opts.get("gpu") else None
    topo, devices = load(name, kinds=kinds or opts.get("mem_policy") in ("cxl-spill", "weighted", "preferred-many"),
                         bdf=bdf)
    fkw = {"current_weights": read_interleave_weights(Host.open(fixture_root(name))), **(fkw or {})}
    return plan_launch(topo, devices, facts(env, **fkw), LaunchOptions(**opts), ("python", "train.py"))


# -- rank → GPU → node -------------------------------------------------------------------------------------------
def test_exclusive_splits_each_nodes_cores_among_its_gpus_without_overlap():
    cpus = {}
    for rank in range(4):
        p = plan(HM, {"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "4"}, cpu_bind=CpuBind("exclusive"))
        cpus[rank] = p.cpus
        assert p.node == (0 if rank < 2 else 1)
        bind = f"--physcpubind={format_cpulist(p.cpus)}"
        assert p.argv[:4] == ("/usr/bin/numactl", bind, f"--membind={p.node}", "--")
        assert p.argv[4:] == ("python", "train.py")
        assert p.env == {"OMP_NUM_THREADS": "2"}  # one thread per physical core of its share (2 cores, 4 CPUs)
    assert cpus == {0: (0, 1, 8, 9), 1: (2, 3, 10, 11), 2: (4, 5, 12, 13), 3: (6, 7, 14, 15)}


@pytest.mark.parametrize("var", [k for k, _ in RANK_VARS])
def test_every_launchers_local_rank_variable(var):
    p = plan(HM, {var: "2"})
    assert p.rank.rank == 2 and p.rank.rank_source.startswith(f"{var}=2")
    assert p.gpu.bdf == "0000:86:00.0" and p.node == 1
    assert p.cpus == (4, 5, 6, 7, 12, 13, 14, 15)


@pytest.mark.parametrize(
    ("env", "size"),
    [
        ({"LOCAL_WORLD_SIZE": "4"}, 4),
        ({"SLURM_NTASKS_PER_NODE": "3"}, 3),
        ({"SLURM_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "2"}, 2),
        ({"SLURM_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "1"}, 4),
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, 8),
        ({"MPI_LOCALNRANKS": "5"}, 5),
        ({"PMI_LOCAL_SIZE": "6"}, 6),
        ({"PMIX_LOCAL_SIZE": "7"}, 7),
    ],
)
def test_every_launchers_local_size_variable(env, size):
    assert detect_rank({"LOCAL_RANK": "1", **env}, LaunchOptions()).local_size == size


def test_rank_defaults_to_zero_and_bad_values_are_input_errors():
    assert detect_rank({}, LaunchOptions()).rank == 0
    assert detect_rank({"LOCAL_RANK": "3"}, LaunchOptions(rank=1)).rank == 1
    with pytest.raises(InputError, match="LOCAL_RANK='x'"):
        detect_rank({"LOCAL_RANK": "x"}, LaunchOptions())
    with pytest.raises(InputError, match="not below the local world size"):
        detect_rank({"LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "4"}, LaunchOptions())
    assert slurm_tasks_on_node("2(x3),1", 3) == 1 and slurm_tasks_on_node("bad", 0) is None


def test_slurm_tasks_per_node_is_counted_not_spelled_out():
    """issue 47: '2(x999999999)' with a large SLURM_NODEID built a list as long as the node id (1.6 GB); the
    parts are added, so the cost follows the text, never the repeat count, and the memory stays flat."""
    import tracemalloc

    from tests.limits import growth

    assert slurm_tasks_on_node("2(x999999999)", 999999998) == 2
    assert slurm_tasks_on_node("2(x999999999),5", 999999999) == 5
    assert slurm_tasks_on_node("2(x999999999)", 999999999) is None  # past the job's nodes
    assert slurm_tasks_on_node("4(x2),2", -1) is None
    tracemalloc.start()
    try:
        env = {"SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "2(x999999999)", "SLURM_NODEID": "999999998"}
        assert detect_rank(env, LaunchOptions()).local_size == 2
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    ratio = growth(lambda n: ",".join(["1(x999999999)"] * n) + ",3", lambda text: slurm_tasks_on_node(
        text, text.count(",") * 999999999), 2000)
    assert ratio < 8, ratio


def test_a_local_size_no_node_can_hold_is_refused():
    with pytest.raises(InputError, match="more processes than a Linux node can run"):
        detect_rank({"SLURM_TASKS_PER_NODE": "999999999", "SLURM_NODEID": "0"}, LaunchOptions())
    with pytest.raises(InputError, match="more processes than a Linux node can run"):
        detect_rank({"LOCAL_WORLD_SIZE": str((1 << 22) + 1)}, LaunchOptions())
    assert detect_rank({"LOCAL_WORLD_SIZE": "70000"}, LaunchOptions()).local_size == 70000  # counted, never listed


def test_cuda_visible_devices_indices_and_ordering_note():
    p = plan(HM, {"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "3,2,1,0"})
    assert p.gpu.bdf == "0000:af:00.0" and p.node == 1
    assert "CUDA_DEVICE_ORDER unset" in p.gpu.ordering and "same model" in p.gpu.ordering
    p = plan(HM, {"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert p.gpu.bdf == "0000:3b:00.0" and p.node == 0
    assert p.gpu.ordering.startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID")
    with pytest.raises(BindingError, match="names GPU 7"):
        plan(HM, {"CUDA_VISIBLE_DEVICES": "7"})
    with pytest.raises(BindingError, match="hides every GPU"):
        plan(HM, {"CUDA_VISIBLE_DEVICES": ""})


def test_cuda_visible_devices_uuids_full_and_prefix():
    p = plan(HM, {"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": f"GPU-5e1c0a07-3b2d-4c1e-9f00-000000001800,{UUID_AF}"})
    assert p.gpu.bdf == "0000:af:00.0" and p.gpu.uuid == UUID_AF and p.node == 1
    assert "no ordering assumed" in p.gpu.ordering
    p = plan(HM, {"SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": "GPU-5e1c0a27"})  # srun: one GPU per task
    assert p.gpu.bdf == "0000:86:00.0" and p.node == 1
    with pytest.raises(BindingError, match="matches 0 GPUs"):
        plan(HM, {"CUDA_VISIBLE_DEVICES": "GPU-ffffffff"})
    with pytest.raises(BindingError, match="MIG"):
        plan(HM, {"CUDA_VISIBLE_DEVICES": "MIG-5e1c0a37-3b2d-4c1e-9f00-00000000af03"})
    with pytest.raises(BindingError, match="no GPU UUIDs are known"):
        plan("nvidiagpunumanodes", {"CUDA_VISIBLE_DEVICES": "GPU-12345678"})


def test_gpu_option_index_bdf_uuid_and_any_pci_device():
    assert plan(HM, gpu="2").gpu.bdf == "0000:86:00.0"
    assert plan(HM, gpu=UUID_AF).node == 1
    nic = plan(HM, gpu="87:00.0", rank=1)  # a NIC: any PCI function may be named
    assert nic.gpu.kind == "nic" and nic.node == 1
    bridge = plan(HM, gpu="0000:17:00.0")  # a root port numatune does not report
    assert bridge.gpu.kind == "bridge" and bridge.node == 0
    with pytest.raises(ImpossibleRequest, match="no PCI device"):  # a binding error; the command line's exit 2
        plan(HM, gpu="0000:99:00.0")
    with pytest.raises(ImpossibleRequest, match="--gpu 9: this root has 4 GPU"):
        plan(HM, gpu="9")
    assert issubclass(ImpossibleRequest, BindingError)  # best effort and numatune.bind() treat it as one


def test_node_option_skips_the_gpu_and_overrides():
    p = plan(HM, {"LOCAL_RANK": "3"}, node=0)
    assert p.gpu is None and p.node == 0 and p.node_source == "--node"
    with pytest.raises(ImpossibleRequest, match="--node 5: node 5 does not exist"):  # launch exits 2 for it
        plan(HM, node=5)


def test_power9_gpus_without_numa_node_use_local_cpus_with_a_warning():
    p = plan("nvidiagpunumanodes", {"LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "6"}, cpu_bind=CpuBind("exclusive"))
    assert p.gpu.bdf == "0035:04:00.0" and p.node == 8
    assert p.gpu.inferred_from == "local_cpulist"
    assert any("numa_node -1" in w for w in p.warnings)
    # node 8: 4 SMT4 cores shared by 3 GPUs → one core (4 threads) each; rank 4 is the second on node 8
    assert len(p.cpus) == 4 and p.cpus == tuple(range(p.cpus[0], p.cpus[0] + 4))
    with pytest.raises(BindingError, match="no CPUs"):
        plan("nvidiagpunumanodes", node=250)  # GPU memory node


def test_vm_gpu_with_numa_node_minus_one_on_a_one_node_guest():
    p = plan("vm-accel-nvidia-p100")
    assert p.gpu.bdf == "0000:06:00.0" and p.node == 0
    assert "the only node with CPUs" in p.node_source and p.warnings


def test_amd_kfd_gpus_on_two_nodes_via_rocr_visible_devices():
    p = plan("topo-mi210-xgmi-pcie", {"LOCAL_RANK": "1", "ROCR_VISIBLE_DEVICES": "4,5"},
             cpu_bind=CpuBind("none"), mem_policy="none", best_effort=True)
    # ROCm's indices count GPUs in KFD node order (nodes 2-9 = 63, 43, 03, 26, e3, c3, 83, a3 in this
    # tree's properties' location_id), not PCI order: index 5 is KFD node 7, 0000:c3:00.0.
    assert p.gpu.bdf == "0000:c3:00.0" and p.gpu.inferred_node is None
    assert "KFD topology node order" in p.gpu.ordering
    assert "GPU5 = 0000:c3:00.0 (PCI order: 0000:a3:00.0)" in p.gpu.ordering  # said, not assumed away
    assert any("KFD CPU agent 1" in w for w in p.warnings)  # explained, not shown as a node the tree lacks
    first = plan("topo-mi210-xgmi-pcie", {"HIP_VISIBLE_DEVICES": "0"}, cpu_bind=CpuBind("none"),
                 mem_policy="none", best_effort=True)
    assert first.gpu.bdf == "0000:63:00.0"
    with pytest.raises(BindingError, match="cannot be inferred .*KFD CPU agent 0"):
        plan("topo-mi210-xgmi-pcie", {"HIP_VISIBLE_DEVICES": "0"}, mem_policy="none")


def test_accelerators_stand_in_for_gpus_and_a_bdf_names_a_display():
    p = plan("32em64t-2n8c+dax+nvme+mic+dimms")
    assert p.gpu.bdf == "0000:83:00.0" and p.gpu.kind == "accelerator" and p.node == 1
    assert p.cpus == tuple(range(8, 16))
    d = plan("32em64t-2n8c+dax+nvme+mic+dimms", gpu="05:00.0")
    assert d.gpu.kind == "display" and d.node == 0 and d.cpus == tuple(range(8))
    ve = plan("32intel64-2p8co2t+8ve", {"OMPI_COMM_WORLD_LOCAL_RANK": "5", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"},
              cpu_bind=CpuBind("exclusive"))
    assert ve.gpu.bdf == "0000:3f:00.0" and ve.node == 0 and ve.cpus == (5, 21)


# -- CPUs ----------------------------------------------------------------------------------------------------------
def test_isolcpus_allowed_cpus_and_reserved_cores_are_left_out():
    p = plan(HM, {"LOCAL_RANK": "0"}, fkw={"isolated": frozenset({3, 11}), "allowed_cpus": frozenset(range(1, 16)),
                                          "allowed_source": "test"}, reserve_cores=1)
    # core 0 (0,8) reserved, cpu 0 not allowed anyway, core 3 (3,11) isolated
    assert p.cpus == (1, 2, 9, 10)
    assert any("isolcpus 3,11" in r for r in p.reasons) and any("allowed CPUs" in r for r in p.reasons)
    assert plan(HM, fkw={"isolated": frozenset({3, 11})}, allow_isolated=True).cpus == (0, 1, 2, 3, 8, 9, 10, 11)
    with pytest.raises(BindingError, match="no usable CPU on node 0"):
        plan(HM, fkw={"allowed_cpus": frozenset({4, 5})})
    with pytest.raises(BindingError, match="reserve-cores 4"):
        plan(HM, reserve_cores=4)


def test_socket_and_cores_n():
    assert plan(HM, cpu_bind=CpuBind("socket")).cpus == (0, 1, 2, 3, 8, 9, 10, 11)
    p = plan(HM, {"LOCAL_RANK": "1"}, cpu_bind=CpuBind("cores", 2))
    assert p.cpus == (2, 3, 10, 11) and p.cpu_mode == "cores:2"
    with pytest.raises(BindingError, match="cores:3"):
        plan(HM, {"LOCAL_RANK": "1"}, cpu_bind=CpuBind("cores", 3))
    with pytest.raises(BindingError, match="3 usable core"):
        plan(HM, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, node=0, reserve_cores=1,
             cpu_bind=CpuBind("exclusive"), local_size=4)


def test_omp_num_threads_is_left_alone_when_set():
    p = plan(HM, {"OMP_NUM_THREADS": "3"})
    assert p.env == {} and any("already set" in r for r in p.reasons)
    assert plan(HM, cpu_bind=CpuBind("none")).env == {}


# -- memory ----------------------------------------------------------------------------------------------------------
def test_cxl_spill_binds_local_dram_and_the_nearest_cxl_node():
    assert plan(HM, {"LOCAL_RANK": "0"}, mem_policy="cxl-spill").memory.nodes == (0, 2)
    p = plan(HM, {"LOCAL_RANK": "3"}, mem_policy="cxl-spill")
    assert p.memory.nodes == (1, 3) and "--membind=1,3" in p.argv
    with pytest.raises(BindingError, match="no CXL memory node"):
        plan("32intel64-2p8co2t+8ve", mem_policy="cxl-spill")
    fallback = plan("32intel64-2p8co2t+8ve", mem_policy="cxl-spill", best_effort=True)
    assert fallback.unbound and fallback.method == "exec" and fallback.argv == ("python", "train.py")
    assert "running unbound" in fallback.warnings[-1]


def test_weighted_interleave_weights_from_hmat_kernel_or_option():
    p = plan(HM, {"LOCAL_RANK": "0"}, mem_policy="weighted")
    assert p.memory.nodes == (0, 2) and p.memory.weights == {0: 1, 2: 1}  # the kernel's, HMAT suggests 4:1
    assert any("suggests weights 0:4,2:1" in w and "echo 4 > /sys/kernel/mm/mempolicy/weighted_interleave/node0" in w
               for w in p.warnings)
    assert p.argv[:3] == ("/usr/bin/numactl", "--physcpubind=0-3,8-11", "--weighted-interleave=0,2")
    # --weights states what the system-wide weights must be; launch never writes them.
    with pytest.raises(BindingError, match="kernel's weights are 0:1,2:1; numatune does not change") as exc:
        plan(HM, {"LOCAL_RANK": "0"}, mem_policy="weighted", weights={0: 4, 2: 1})
    assert exc.value.hint == ("set them once per node, as root: "
                              "echo 4 > /sys/kernel/mm/mempolicy/weighted_interleave/node0")
    q = plan(HM, {"LOCAL_RANK": "0"}, mem_policy="weighted", weights={0: 4, 2: 1}, best_effort=True)
    assert q.memory.weights == {0: 1, 2: 1} and not q.unbound and "differ from the kernel's 0:1,2:1" in q.warnings[-1]
    same = plan(HM, mem_policy="weighted", weights={0: 1, 2: 1})
    assert same.memory.weights_source == "--weights (the kernel's match)"
    r = plan(HM, mem_policy="weighted", fkw={"current_weights": {0: 4, 1: 4, 2: 1, 3: 1}})
    assert r.memory.weights == {0: 4, 2: 1} and "matches" in r.memory.weights_source and not r.warnings
    with pytest.raises(BindingError, match="no weight for node"):
        plan(HM, mem_policy="weighted", weights={0: 4})


def test_kernel_and_numactl_support_are_checked():
    with pytest.raises(BindingError, match="needs Linux 6.9"):
        plan(HM, mem_policy="weighted", fkw={"kernel": "6.8.0-45-generic"})
    with pytest.raises(BindingError, match="needs Linux 5.15"):
        plan(HM, mem_policy="preferred-many", fkw={"kernel": "5.10.0"})
    old = plan(HM, mem_policy="weighted", fkw={"numactl": OLD_NUMACTL})
    assert old.method == "direct" and old.argv == ("python", "train.py")
    assert any("needs numactl 2.0.19" in r for r in old.reasons)
    with pytest.raises(BindingError, match="--via numactl"):
        plan(HM, mem_policy="weighted", via="numactl", fkw={"numactl": OLD_NUMACTL})
    with pytest.raises(BindingError, match="no set_mempolicy"):
        plan(HM, mem_policy="weighted", fkw={"numactl": None, "direct_ok": False})


def test_other_policies_and_methods():
    assert plan(HM, mem_policy="interleave").memory.nodes == (0, 1)
    assert plan(HM, mem_policy="preferred").argv[2] == "--preferred=0"
    assert plan(HM, mem_policy="preferred-many").argv[2] == "--preferred-many=0,2"
    assert plan(HM, mem_policy="bind", mem_nodes=(0, 2)).argv[2] == "--membind=0,2"
    t = plan(HM, mem_policy="none", fkw={"numactl": None})
    assert t.method == "taskset" and t.argv == ("/usr/bin/taskset", "-c", "0-3,8-11", "python", "train.py")
    assert plan(HM, fkw={"numactl": None}).method == "direct"
    assert plan(HM, mem_policy="none", cpu_bind=CpuBind("none")).method == "exec"
    with pytest.raises(BindingError, match="taskset cannot set a memory policy"):
        plan(HM, via="taskset")
    with pytest.raises(BindingError, match="allowed nodes"):
        plan(HM, fkw={"allowed_mems": frozenset({1})})


# -- option parsing --------------------------------------------------------------------------------------------------
def test_option_parsers():
    assert parse_cpu_bind("cores:4") == CpuBind("cores", 4)
    for bad in ("cores:0", "cores", "numa"):
        with pytest.raises(UsageError):
            parse_cpu_bind(bad)
    assert parse_weights("0:4,2:1") == {0: 4, 2: 1}
    for bad in ("0=4", "0:0", "0:256", "a:1"):
        with pytest.raises(UsageError):
            parse_weights(bad)
    assert normalize_bdf("AF:00.0") == "0000:af:00.0" and normalize_bdf("10000:01:00.1") == "10000:01:00.1"
    assert normalize_bdf("gpu0") is None
    assert sorted(["10000:00:01.0", "0000:af:00.0", "0000:18:00.0"], key=pci_sort_key) == [
        "0000:18:00.0", "0000:af:00.0", "10000:00:01.0"]


def test_a_binding_kept_inside_restricted_cpus_says_whose_they_are():
    """Inside srun the allowed CPUs are the job step's: the plan keeps inside them and the summary says so."""
    from numatune.render.launch_text import summary_line

    slurm = "Slurm job 7 step 0's CPUs, sched_getaffinity"
    p = plan(HM, {"LOCAL_RANK": "0"}, fkw={"allowed_cpus": frozenset({1, 2, 9}), "allowed_source": slurm})
    assert p.cpus == (1, 2, 9)
    assert p.confined == f"the allowed CPUs 1-2,9 ({slurm})"
    assert summary_line(p).endswith(f", inside the allowed CPUs 1-2,9 ({slurm})")
    assert plan(HM, {"LOCAL_RANK": "0"}).confined == ""  # every CPU allowed: nothing to say
    with pytest.raises(BindingError, match=r"outside the allowed CPUs 4-5 \(Slurm job 7 step 0's CPUs"):
        plan(HM, {"LOCAL_RANK": "0"}, fkw={"allowed_cpus": frozenset({4, 5}), "allowed_source": slurm})


# -- ranks that share a node share its cores ---------------------------------------------------------------------
LAUNCHER_VARS = {
    "srun": ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    "mpirun": ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "torchrun": ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),  # torchrun sets OMP_NUM_THREADS=1 itself; here it is unset
}


@pytest.mark.parametrize("name", tree_fixtures())
def test_openmp_threads_of_the_ranks_sharing_a_node_never_exceed_its_cores(name):
    """Every launcher's variables, 3 and 8 local ranks, node/socket/exclusive binding: the OMP_NUM_THREADS launch
    gives the ranks bound to the same CPUs sum to no more than their physical cores (one each when there are more
    ranks than cores). srun and mpirun set no OMP_NUM_THREADS: the DGX H100 gave 4 ranks x 112 on node 0's 112 CPUs."""
    from numatune.errors import NumatuneError
    from numatune.plan.cores import physical_cores

    topo, devices = load(name)
    with_cpus = [n.id for n in topo.nodes if set(n.cpus) & set(topo.cpu.online)]
    gpus = [d for d in devices if d.kind == "gpu"]
    planned = 0
    for rank_var, size_var in LAUNCHER_VARS.values():
        for mode in ("node", "socket", "exclusive"):
            for size in (3, 8):
                groups: dict[frozenset[int], list[int]] = {}
                for rank in range(size):
                    env = {rank_var: str(rank), size_var: str(size)}
                    opts = {"cpu_bind": CpuBind(mode), "mem_policy": "none"}  # threads, not memory, are checked
                    if not gpus:
                        opts["node"] = with_cpus[0] if with_cpus else 0
                    try:
                        p = plan_launch(topo, devices, facts(env), LaunchOptions(**opts), ("python", "train.py"))
                    except NumatuneError:
                        continue  # a rank this machine cannot bind (no CPU topology, more ranks than GPUs)
                    planned += 1
                    # ranks bound to overlapping CPUs: one node's (node, exclusive) or one socket's (socket)
                    key = frozenset(p.cpus) if mode == "socket" else frozenset(topo.node(p.node).cpus)
                    groups.setdefault(key, []).append(int(p.env["OMP_NUM_THREADS"]))
                for cpus, threads in groups.items():
                    cores = len(physical_cores(topo, set(cpus) & set(topo.cpu.online)))
                    assert sum(threads) <= max(cores, len(threads)), (name, rank_var, mode, size, threads, cores)
    assert planned or not with_cpus, name


def test_srun_ranks_on_the_dgx_share_node_0_and_the_dry_run_says_so():
    p = plan("handmade-dgx-h100-ids", {"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "8"})
    assert p.node == 0 and p.env == {"OMP_NUM_THREADS": "14"}  # 56 cores of node 0 / 4 ranks (was 112 each)
    assert ("sharing: 4 rank(s) on node 0, one per GPU in use there (0000:1b:00.0, 0000:43:00.0, 0000:52:00.0, "
            "0000:61:00.0; the GPUs of the 8 local rank(s) from SLURM_NTASKS_PER_NODE=8 (Slurm))") in p.reasons
    assert any(w.startswith("--cpu-bind node: the 4 ranks on node 0 overlap") for w in p.warnings)
    mpi = plan(HM, {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}, node=0)
    assert "all 3 local rank(s) from OMPI_COMM_WORLD_LOCAL_SIZE=3 (Open MPI) are assumed to share it" in \
        next(r for r in mpi.reasons if r.startswith("sharing:"))
    alone = plan(HM, {}, node=0)
    assert next(r for r in alone.reasons if r.startswith("sharing:")).startswith("sharing: 1 rank on node 0 assumed")
    assert not any("overlap" in w for w in alone.warnings)
    exclusive = plan("handmade-dgx-h100-ids", {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"},
                     cpu_bind=CpuBind("exclusive"))
    assert len(exclusive.cpus) == 28 and exclusive.env == {"OMP_NUM_THREADS": "14"}  # one per core, not per CPU
