"""Locality verdicts on multi-node topologies (fixture trees) with hand-made numa_maps and threads.

The numa_maps text below is hand-made (shaped after fs/proc/task_mmu.c), not captured from a kernel;
the topologies are real trees from fixtures/ (ghw L5640: two sockets; hwloc fakeheteromemtiers:
QEMU with CPU-less PMem/unknown nodes).
"""

from __future__ import annotations

import pytest

from numatune.analysis.locality import Thresholds, audit_findings, judge
from numatune.model.process import GpuUse, ProcessInfo, ThreadInfo
from numatune.readers.procs import parse_numa_maps
from numatune.readers.topology import read_topology

PAGE = 4096


@pytest.fixture(scope="module")
def two_socket():
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    return read_topology(Host.open(fixture_root("intel-xeon-L5640-2node")))


@pytest.fixture(scope="module")
def tiers():
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    return read_topology(Host.open(fixture_root("fakeheteromemtiers")))


def maps(**pages_by_node: int) -> str:
    """One hand-made anon line per node: maps(N0=700, N1=300)."""
    lines = []
    for i, (key, pages) in enumerate(pages_by_node.items()):
        lines.append(f"7f00000{i:05x} default anon={pages} dirty={pages} {key}={pages} kernelpagesize_kB=4")
    return "\n".join(lines) + "\n"


def proc(text: str, cpus: list[int], allowed: list[int], **kw) -> ProcessInfo:
    threads = tuple(ThreadInfo(1000 + i, "python", cpu, tuple(allowed)) for i, cpu in enumerate(cpus))
    base = dict(pid=1000, comm="python", cmdline=("python", "train.py", "--lr", "1e-4"), ppid=1, state="S",
                threads=threads, cpus_allowed=tuple(allowed), mems_allowed=(0, 1), memory=parse_numa_maps(text))
    base.update(kw)
    return ProcessInfo(**base)


def test_all_local_is_ok(two_socket):
    a = judge(proc(maps(N0=1000), [0, 2, 4], [0, 2, 4, 6]), two_socket)
    assert a.locality.home_nodes == (0,) and a.locality.home_source == "threads"
    assert a.locality.verdict == "ok" and a.locality.remote_ratio == 0.0
    assert a.locality.fix.launch is None


def test_thirty_percent_remote_is_misplaced_with_fix(two_socket):
    p = proc(maps(N0=700, N1=300), [0, 2], [0, 2, 4, 6, 8, 10])
    a = judge(p, two_socket)
    loc = a.locality
    assert loc.verdict == "misplaced"
    assert loc.remote_ratio == pytest.approx(0.3) and loc.remote_bytes == 300 * PAGE
    assert "30.0%" in loc.reasons[0] and "remote node(s) 1" in loc.reasons[0]
    assert loc.fix.migratepages == "migratepages 1000 1 0"
    assert loc.fix.numactl == "numactl --cpunodebind=0 --membind=0 -- python train.py --lr 1e-4"
    assert loc.fix.launch == "numatune launch --node 0 --cpu-bind node --mem-policy bind -- python train.py --lr 1e-4"
    assert loc.fix.taskset is None  # already on node 0's CPUs only
    assert a.counters.source == "placement" and a.counters.remote_ratio == pytest.approx(0.3)


def test_ten_percent_remote_is_warning_and_thresholds_are_configurable(two_socket):
    p = proc(maps(N0=900, N1=100), [0], [0, 2])
    assert judge(p, two_socket).locality.verdict == "warning"
    assert judge(p, two_socket, Thresholds(remote_warning=0.15, remote_misplaced=0.5)).locality.verdict == "ok"
    p30 = proc(maps(N0=700, N1=300), [0], [0, 2])
    assert judge(p30, two_socket, Thresholds(remote_misplaced=0.5)).locality.verdict == "warning"
    with pytest.raises(ValueError):
        Thresholds(remote_warning=0.5, remote_misplaced=0.2)


def test_gpu_home_and_threads_off_home(two_socket):
    gpu = GpuUse("0000:05:00.0", 1, "fd /dev/nvidia1", 1)
    p = proc(maps(N0=800, N1=200), [0, 2, 3], list(range(12)), gpu=gpu)
    a = judge(p, two_socket)
    loc = a.locality
    assert loc.home_nodes == (1,) and loc.home_source == "gpu"
    assert loc.remote_ratio == pytest.approx(0.8) and loc.verdict == "misplaced"
    assert loc.threads_off_home == (1000, 1001)
    assert loc.fix.launch.startswith("numatune launch --gpu 0000:05:00.0 ")
    assert loc.fix.migratepages == "migratepages 1000 0 1"
    node1 = ",".join(str(c) for c in range(1, 24, 2))  # every odd CPU is on node 1 in this tree
    assert loc.fix.taskset == f"taskset -a -p -c {node1} 1000"
    codes = {f.code for f in audit_findings(two_socket, p)}
    assert codes == {"NT401", "NT404"}


def test_threads_pinned_one_per_core_get_no_taskset_a_that_would_undo_it(two_socket):
    """OpenMP-style pinning (each worker on a core of its own) off the GPU's node: `taskset -a` would put every
    thread on every CPU of node 1, so the live line is withheld and the fix is the restart."""
    gpu = GpuUse("0000:05:00.0", 1, "fd /dev/nvidia1", 1)
    p = proc(maps(N0=800, N1=200), [0, 2, 4], list(range(12)), gpu=gpu)
    # main thread keeps the wide mask; workers on CPUs 2 and 4 (node 0), one core each
    p = p._replace(threads=(p.threads[0], p.threads[1]._replace(allowed_cpus=(2,)),
                            p.threads[2]._replace(allowed_cpus=(4,))))
    loc = judge(p, two_socket).locality
    assert loc.fix.taskset is None and loc.fix.migratepages == "migratepages 1000 0 1"
    assert any("2 of 3 threads are pinned one per core" in r for r in loc.reasons)
    (nt404,) = [f for f in audit_findings(two_socket, p) if f.code == "NT404"]
    assert nt404.fix == loc.fix.launch and "taskset" not in nt404.fix
    # one worker pinned is not a per-core pinning scheme: the live line stays
    one = p._replace(threads=(p.threads[0], p.threads[1], p.threads[2]._replace(allowed_cpus=tuple(range(12)))))
    assert judge(one, two_socket).locality.fix.taskset.startswith("taskset -a -p -c ")


def test_slow_tier_without_policy_warns(tiers):
    p = proc(maps(N0=600, N6=400), [0, 1], [0, 1])
    loc = judge(p, tiers).locality
    assert loc.slow_tier_ratio == pytest.approx(0.4) and loc.remote_ratio == 0.0
    assert loc.verdict == "warning" and "slow-tier" in loc.reasons[0]
    assert loc.fix.migratepages == "migratepages 1000 6 0"


def test_slow_tier_asked_for_by_weighted_interleave_is_ok(tiers):
    text = "7f0000000000 weighted interleave:0,6 anon=1000 dirty=1000 N0=600 N6=400 kernelpagesize_kB=4\n"
    loc = judge(proc(text, [0], [0, 1]), tiers).locality
    assert loc.verdict == "ok" and "as its memory policy asks" in loc.reasons[0]


def test_remote_dram_and_slow_tier_are_separate(tiers):
    p = proc(maps(N0=500, N1=250, N6=250), [0], [0, 1])  # node 6: PMem (kmem DAX); node 4 is HBM
    loc = judge(p, tiers).locality
    assert loc.remote_ratio == pytest.approx(0.25) and loc.slow_tier_ratio == pytest.approx(0.25)
    assert loc.verdict == "misplaced"
    assert loc.fix.migratepages == "migratepages 1000 1,6 0"


def test_access_counters_sources(two_socket):
    p = proc(maps(N0=1000), [0], [0, 2], numa_faults={0: 20, 1: 80})
    off = judge(p, two_socket, balancing_mode=0)
    assert off.counters.source == "placement"
    assert any("NUMA balancing is off" in n for n in off.counters.notes)
    on = judge(p, two_socket, balancing_mode=1)
    assert on.counters.source == "numa_balancing" and on.counters.remote_ratio == pytest.approx(0.8)
    assert on.locality.verdict == "warning"
    pmu = judge(p, two_socket, balancing_mode=1, pmu=(100, 300, ("node-loads", "node-load-misses"), 2.0))
    assert pmu.counters.source == "pmu" and pmu.counters.remote_ratio == pytest.approx(0.75)
    assert pmu.locality.verdict == "misplaced"
    vm = judge(p, two_socket, balancing_mode=0, pmu_note="not supported in this VM")
    assert "not supported in this VM" in vm.counters.notes


def test_kernel_thread_is_not_judged(two_socket):
    p = proc("", [0], [0], kernel_thread=True, cmdline=())
    a = judge(p, two_socket)
    assert a.locality.verdict == "n/a" and "kernel thread" in a.locality.reasons[0]
    assert audit_findings(two_socket, p) == []


def test_shared_file_pages_on_the_other_socket_do_not_judge_placement(two_socket):
    """Libraries sit in the page cache wherever the first reader faulted them (seen in the VM harness)."""
    text = maps(N0=8000) + (
        "7f1000000000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=900 mapmax=40 N1=900 "
        "kernelpagesize_kB=4\n"
    )
    loc = judge(proc(text, [0, 2], [0, 2, 4]), two_socket).locality
    assert loc.verdict == "ok" and loc.remote_ratio == 0.0 and loc.fix.launch is None
    assert any(r.startswith("not counted: 3.5 MiB of file pages") and "node(s) 1" in r for r in loc.reasons)


def test_a_process_with_only_file_mappings_is_judged_on_them(two_socket):
    text = "7f1000000000 default file=/data/shard.bin mapped=1000 N1=1000 kernelpagesize_kB=4\n"
    loc = judge(proc(text, [0], [0]), two_socket).locality
    assert loc.remote_ratio == 1.0 and loc.verdict == "misplaced"


# -- CPU kinds: a rank on efficiency cores (NT405), on the real DGX Spark GB10 tree ------------------------------
@pytest.fixture(scope="module")
def gb10():
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    return read_topology(Host.open(fixture_root("nvidia-dgx-gb10")))


def test_pinned_to_a725_cores_is_nt405_with_a_fix_to_the_x925_cores(gb10):
    p = proc(maps(N0=1000), [0, 1], [0, 1, 2, 3, 4], pid=1000)
    a = judge(p, gb10)
    assert a.locality.verdict == "warning"
    assert any("only on efficiency cores (Cortex-A725 CPUs 0-4)" in r for r in a.locality.reasons)
    assert a.locality.fix.taskset == "taskset -a -p -c 5-9,15-19 1000"
    assert "--cpu-bind exclusive --cpu-kind performance" in a.locality.fix.launch
    assert a.locality.fix.numactl.startswith("numactl --physcpubind=5-9,15-19 --membind=0")
    (f,) = [f for f in audit_findings(gb10, p) if f.code == "NT405"]
    assert f.severity.value == "warning" and f.fix == "taskset -a -p -c 5-9,15-19 1000"


def test_rank_whose_main_thread_ran_on_an_a725_core_is_nt405(gb10):
    threads = (ThreadInfo(1000, "python", 12, tuple(range(20))), ThreadInfo(1001, "python", 7, tuple(range(20))))
    p = proc(maps(N0=1000), [], list(range(20)), threads=threads, rank=0, rank_source="LOCAL_RANK")
    assert [f.code for f in audit_findings(gb10, p)] == ["NT405"]
    helper = p._replace(rank=None, rank_source=None)  # not a rank: a helper floating over every core is fine
    assert audit_findings(gb10, helper) == []


def test_pinned_to_x925_cores_is_fine(gb10):
    p = proc(maps(N0=1000), [5, 6], [5, 6, 7, 8, 9], rank=0, rank_source="LOCAL_RANK")
    a = judge(p, gb10)
    assert a.locality.verdict == "ok" and not audit_findings(gb10, p)


def test_symmetric_cpu_never_reports_efficiency_cores(two_socket):
    p = proc(maps(N0=1000), [0], [0], rank=0, rank_source="LOCAL_RANK")
    assert "NT405" not in [f.code for f in audit_findings(two_socket, p)]


# -- pinned host buffers: a CUDA process's shared anonymous memory ------------------------------------------
SHARED = "7f{:010x} bind:{node} file=/dev/zero\\040(deleted) dirty={n} N{node}={n} kernelpagesize_kB=4\n"
CTL = "7e{:010x} default file=/dev/nvidiactl dirty={n} mapped={n} N{node}={n} kernelpagesize_kB=4\n"


def cuda_rank(text: str, gpu_node: int, context: bool = True) -> ProcessInfo:
    from numatune.model.process import GpuContext

    gpu = GpuUse("0000:05:00.0", gpu_node, "fd /dev/nvidia1", 1)
    ctx = GpuContext("CUDA", "it maps /dev/nvidia-uvm") if context else None
    return proc(maps(N1=400000) + text, [1], list(range(1, 24, 2)), gpu=gpu, gpu_context=ctx)


def test_shared_anonymous_chunks_of_a_cuda_process_on_the_other_node_are_nt407(two_socket):
    """Today's stack (driver 580, CUDA 13): the CUDA host allocator's chunks are shared anonymous mappings; here 64 MiB
    of them sit on node 0, as their policy (bind:0) asked, while the rank's GPU hangs off node 1; the driver's 70 MiB
    of /dev/nvidiactl pages on node 0 are not chunks. Likely pinned, never said to be confirmed."""
    text = SHARED.format(0, node=0, n=16384) + SHARED.format(1 << 24, node=1, n=512) + CTL.format(0, node=0, n=17920)
    a = judge(cuda_rank(text, 1), two_socket, h2d={"0000:05:00.0": {0: 21.5, 1: 25.1}})
    pin = a.locality.pinned
    assert pin.gpu_cpu_node == 1 and pin.by_node == {0: 64 << 20, 1: 2 << 20}
    assert pin.wrong_nodes == (0,) and pin.wrong_bytes == 64 << 20
    assert [(m.start, m.bytes) for m in pin.chunks] == [(0x7f0000000000, 64 << 20), (0x7f0001000000, 2 << 20)]
    assert pin.chunk_count == 2 and pin.cache_reuse is None  # the policy sent them there: not the host cache
    assert pin.how == ("likely pinned: shared anonymous memory of a CUDA process, the way the CUDA host allocator "
                       "maps its chunks (cudaHostAlloc, torch's pin_memory()) (it maps /dev/nvidia-uvm)")
    assert pin.h2d_gbps == {0: 21.5, 1: 25.1}
    assert pin.cost == "probe measured host-to-GPU copies at 25.1 GB/s from node 1 and 21.5 GB/s from node 0"
    assert a.locality.verdict == "warning"
    assert any(r.startswith("likely pinned host chunks (shared anonymous memory of a CUDA process") and "64 of 66 MiB"
               in r for r in a.locality.reasons)
    found = [f.code for f in audit_findings(two_socket, cuda_rank(text, 1))]
    assert found.count("NT407") == 1 and "NT440" not in found


DEFAULT_CHUNK = "7f{:010x} default file=/dev/zero\\040(deleted) dirty={n} N{node}={n} kernelpagesize_kB=4\n"


def test_chunks_outside_a_rank_s_binding_that_no_policy_asked_for_are_the_host_cache_nt440(two_socket):
    """pytorch#160420's shape from outside: the rank is bound to its GPU's node 1 (its CPUs are node 1's), yet 64 MiB
    of its chunks are on node 0 under the default policy: allocated before the binding (or by a thread elsewhere) and
    kept in use by PyTorch's host cache; pinned pages never migrate. Named by cause (NT440), not only by place."""
    text = DEFAULT_CHUNK.format(0, node=0, n=16384) + DEFAULT_CHUNK.format(1 << 24, node=1, n=512)
    rank = cuda_rank(text, 1)
    assert set(rank.cpus_allowed) == set(two_socket.node(1).cpus)
    pin = judge(rank, two_socket).locality.pinned
    assert pin.cache_reuse.startswith("64 MiB of its 66 MiB of likely pinned chunks are outside its binding (CPUs on "
                                      "node(s) 1; node 0 64 MiB) and no memory policy sent them there")
    assert "PyTorch's host cache (CachingHostAllocator)" in pin.cache_reuse and "pytorch#197868" in pin.cache_reuse
    found = {f.code: f for f in audit_findings(two_socket, rank)}
    assert "NT440" in found and "NT407" not in found  # the cause named once, in place of the place
    assert "torch.accelerator.empty_host_cache()" in found["NT440"].fix and "numatune launch" in found["NT440"].fix
    unbound = rank._replace(cpus_allowed=tuple(range(24)))  # not bound: nothing says when they were allocated
    codes = [f.code for f in audit_findings(two_socket, unbound)]
    assert "NT407" in codes and "NT440" not in codes


def test_a_process_driving_gpus_on_two_nodes_with_one_node_s_chunks_is_nt440():
    """pytorch#197868's setup: one process drives GPUs on nodes 0 and 1 (NVML lists it on GPU0 and GPU2 of the
    hand-made 2-socket 4-GPU tree) and every chunk of its host cache is on node 0: node 1's copies come from node-0
    blocks."""
    from numatune.model.process import GpuContext
    from numatune.model.topology import NvmlGpu
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    topo = read_topology(Host.open(fixture_root("handmade-launch-2s4gpu-cxl")))
    gpus = [d for d in topo.devices if d.kind == "gpu"]
    on = {d.node: d for d in gpus}
    nvml = tuple(NvmlGpu(i, d.bdf, processes=(1000,)) for i, d in enumerate((on[0], on[1])))
    topo = topo._replace(fabric=topo.fabric._replace(nvml_gpus=nvml))
    text = DEFAULT_CHUNK.format(0, node=0, n=32768) + DEFAULT_CHUNK.format(1 << 28, node=0, n=32768)
    cpus = list(topo.node(0).cpus) + list(topo.node(1).cpus)
    ctx = GpuContext("CUDA", "NVML lists it as a compute process on GPU 0")
    p = proc(text, cpus[:1], cpus, gpu=GpuUse(on[0].bdf, 0, "NVML", 0), gpu_context=ctx)
    pin = judge(p, topo).locality.pinned
    assert pin.by_node == {0: 256 << 20} and pin.wrong_bytes == 0  # on its first GPU's node: NT407 sees nothing
    assert pin.cache_reuse.startswith(f"it drives GPUs on nodes 0-1 (NVML lists it on {on[0].bdf}, {on[1].bdf}) but "
                                      "node(s) 1 hold none of its likely pinned chunks (node 0 256 MiB)")
    assert [f.code for f in audit_findings(topo, p) if f.code in ("NT407", "NT440")] == ["NT440"]
    both = DEFAULT_CHUNK.format(0, node=0, n=32768) + DEFAULT_CHUNK.format(1 << 28, node=1, n=32768)
    assert judge(p._replace(memory=parse_numa_maps(both)), topo).locality.pinned.cache_reuse is None


def test_driver_mappings_alone_and_shared_memory_without_a_context_are_not_pinned_buffers(two_socket):
    ctl = CTL.format(0, node=0, n=17920)  # 70 MiB of the driver's own pages on the other node
    assert judge(cuda_rank(ctl, 1), two_socket).locality.pinned is None
    shared = SHARED.format(0, node=0, n=16384)
    worker = judge(cuda_rank(shared, 1, context=False), two_socket).locality  # a forked worker: no context
    assert worker.pinned is None and not any("pinned" in r for r in worker.reasons)
    assert "NT407" not in {f.code for f in audit_findings(two_socket, cuda_rank(shared, 1, context=False))}


def test_pinned_buffers_on_the_gpu_s_node_are_priced_not_flagged(two_socket):
    a = judge(cuda_rank(SHARED.format(0, node=1, n=65536), 1), two_socket, h2d={"0000:05:00.0": {1: 54.6}})
    pin = a.locality.pinned
    assert pin.by_node == {1: 256 << 20} and pin.wrong_bytes == 0 and pin.cost is None
    assert pin.h2d_gbps == {1: 54.6}
    assert not any(r.startswith("likely pinned host chunks") for r in a.locality.reasons)
    no_gpu = judge(cuda_rank(SHARED.format(0, node=1, n=512), 1)._replace(gpu=None), two_socket).locality.pinned
    assert no_gpu.gpu_cpu_node is None and no_gpu.by_node == {1: 2 << 20} and no_gpu.wrong_nodes == ()


def test_pages_on_a_gpu_memory_node_are_said_where_they_are_not_called_home():
    """A GPU-memory node (Grace HBM; the superchip guest's, tests/vm) is neither remote DRAM nor a slow tier, but a
    process whose pages sit there is not told "all resident memory on home": the reason names the node and the GPU."""
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    topo = read_topology(Host.open(fixture_root("handmade-gb200-numa")))
    hbm = next(n for n in topo.nodes if n.kind == "gpu" and n.memory_total_kib)
    cpus = list(topo.node(0).cpus[:2])
    loc = judge(proc(maps(**{f"N{hbm.id}": 1000}), cpus, cpus), topo).locality
    assert loc.verdict == "ok" and loc.remote_ratio == 0.0 and loc.slow_tier_ratio == 0.0
    line = next(r for r in loc.reasons if "GPU/HBM memory node" in r)
    assert f"100.0% of its memory is on GPU/HBM memory node(s) {hbm.id} (GPU memory of {hbm.gpu})" in line
    assert not any(r.startswith("all resident memory") for r in loc.reasons)
    text = f"7f0000000000 bind:{hbm.id} anon=1000 dirty=1000 N{hbm.id}=1000 kernelpagesize_kB=4\n"
    assert "as its memory policy asks" in next(r for r in judge(proc(text, cpus, cpus), topo).locality.reasons
                                               if "GPU/HBM" in r)


def test_a_worker_with_its_own_cuda_context_and_chunks_off_its_binding_is_nt440(two_socket):
    """A spawn worker that uses CUDA itself (its own context, no GPU of the rank's) inherits the rank's binding to
    node 1; 8 MiB of its chunks sit on node 0 under the default policy: the same cause, judged on the worker's node."""
    from numatune.model.process import GpuContext

    text = DEFAULT_CHUNK.format(0, node=0, n=2048) + DEFAULT_CHUNK.format(1 << 24, node=1, n=512)
    worker = proc(maps(N1=4000) + text, [1], list(two_socket.node(1).cpus),
                  gpu_context=GpuContext("CUDA", "it maps /dev/nvidia-uvm"))
    pin = judge(worker, two_socket).locality.pinned
    assert pin.gpu_cpu_node is None and pin.wrong_bytes == 0  # no GPU known: NT407 cannot say
    assert pin.cache_reuse.startswith("8 MiB of its 10 MiB of likely pinned chunks are outside its binding (CPUs on "
                                      "node(s) 1; node 0 8 MiB)")
    assert "NT440" in {f.code for f in audit_findings(two_socket, worker)}
