"""A running process as `audit` sees it: threads, memory per node, GPU, access counters, locality.

Immutable `@record`s (cheap to define at import) filled by `numatune.readers.procs` /
`numatune.readers.perf` and judged by `numatune.analysis.locality`; nothing here reads the system.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from numatune.model._record import record

# Mapping kinds of the memory split, in display order.
MAPPING_KINDS = ("anon", "file", "heap", "stack", "shm", "hugetlb")

# Shared, read-only default for mapping fields (record defaults are shared between instances).
EMPTY_MAP: Mapping = MappingProxyType({})


@record
class PolicyUse:
    """One memory policy as numa_maps prints it ("bind:0", "weighted interleave:0-1") and its weight."""

    policy: str
    mappings: int
    bytes: int


@record
class MappingPlacement:
    """One mapping of numa_maps (`audit --mappings`): where its resident pages are against its policy.

    `off_policy_pages` counts pages on nodes the policy does not name; None when the policy names no
    nodes (default, local) or names them relative to the cpuset ("=relative").
    """

    start: int  # virtual address
    kind: str  # one of MAPPING_KINDS
    name: str  # basename of the mapped file ("" for anon/heap/stack)
    policy: str  # as numa_maps prints it: "bind:3", "interleave:0-1", "default"
    page_size: int  # bytes
    pages: Mapping[int, int] = EMPTY_MAP  # node -> resident pages
    off_policy_pages: int | None = None

    @property
    def bytes(self) -> int:
        return sum(self.pages.values()) * self.page_size


# `audit --mappings` keeps this many mappings one by one (the largest); the others are summed as they are read
# (Folded), so that 200,000 mappings cost what 16,384 do (about 100 MiB in text or JSON, where every one kept cost
# 740 MB). The kernel's default vm.max_map_count is 65,530; a training rank has a few thousand mappings.
MAX_LISTED_MAPPINGS = 16384
# Shared anonymous mappings (a CUDA process's host-allocator chunks) kept one by one, the largest; the rest summed.
MAX_CHUNKS = 256


@record
class Folded:
    """Mappings summed, not kept one by one: how many, their resident bytes, bytes per node, off-policy bytes."""

    mappings: int = 0
    bytes: int = 0
    by_node: Mapping[int, int] = EMPTY_MAP
    off_policy_bytes: int = 0


def fold_mappings(
    mappings: tuple[MappingPlacement, ...], min_size: int, beyond: Folded | None = None,
) -> tuple[list[MappingPlacement], tuple[int, int, dict[int, int], int]]:
    """Largest first; those under `min_size` bytes folded into (count, bytes, bytes by node, off-policy bytes),
    with `beyond` (the mappings the reader summed without keeping: none larger than a kept one) added."""
    ordered = sorted(mappings, key=lambda m: (-m.bytes, m.start))
    shown: list[MappingPlacement] = []
    count = total = off = 0
    by_node: dict[int, int] = {}
    for m in ordered:
        b = m.bytes
        if b >= min_size:
            shown.append(m)
            continue
        count += 1
        total += b
        off += (m.off_policy_pages or 0) * m.page_size
        for n, pages in m.pages.items():
            by_node[n] = by_node.get(n, 0) + pages * m.page_size
    if beyond is not None:
        count, total, off = count + beyond.mappings, total + beyond.bytes, off + beyond.off_policy_bytes
        for n, b in beyond.by_node.items():
            by_node[n] = by_node.get(n, 0) + b
    return shown, (count, total, dict(sorted(by_node.items())), off)


@record
class SharedAnon:
    """A process's shared anonymous mappings (mmap MAP_SHARED|MAP_ANONYMOUS, numa_maps
    `file=/dev/zero\\040(deleted)`), summed in one pass. In a process with a CUDA context they are most likely the
    CUDA host allocator's chunks (cudaHostAlloc, torch's pin_memory()): pinned, but nothing outside the process
    tells them from a plain shared mapping. The MAX_CHUNKS largest with resident pages are kept with their
    address; the others are only counted and summed."""

    mappings: int = 0  # every such mapping, resident or not (a forked worker inherits its rank's, without pages)
    resident: int = 0  # those with resident pages: the chunks
    by_node: Mapping[int, int] = EMPTY_MAP  # node -> resident bytes of them all
    largest: tuple[MappingPlacement, ...] = ()  # the MAX_CHUNKS largest resident ones, largest first
    # node -> resident bytes on nodes the mapping's policy does not name (default/local: every node): pages placed
    # where the allocating thread ran, not where a policy sent them
    unasked: Mapping[int, int] = EMPTY_MAP

    @property
    def bytes(self) -> int:
        return sum(self.by_node.values())


@record
class NumaMemory:
    """Resident memory of one address space by node, from /proc/PID/numa_maps."""

    by_node: Mapping[int, int] = EMPTY_MAP  # node -> bytes
    by_kind: Mapping[str, dict[int, int]] = EMPTY_MAP  # kind -> node -> bytes
    policies: tuple[PolicyUse, ...] = ()
    mappings: int = 0
    malformed_lines: int = 0
    by_mapping: tuple[MappingPlacement, ...] | None = None  # only when asked for (`audit --mappings`)
    mappings_beyond: Folded | None = None  # with a cap on by_mapping: the mappings summed, not kept
    # GPU device file (nvidiactl, nvidia0, nvidia-uvm, kfd, renderD128) -> node -> resident bytes: the driver's own
    # mappings (its control and doorbell pages, UVM's), not the user's pinned buffers
    driver: Mapping[str, dict[int, int]] = EMPTY_MAP
    driver_policies: Mapping[str, int] = EMPTY_MAP  # policy -> resident bytes of the driver mappings under it
    gpu_maps: tuple[str, ...] = ()  # the GPU device files it maps, resident or not (nvidia-uvm, kfd: a GPU context)
    # shared anonymous mappings (numa_maps `file=/dev/zero\040(deleted)`): in a process with a GPU context, most
    # likely the CUDA host allocator's chunks (cudaHostAlloc, torch pin_memory); summed, the largest kept
    shared_anon: SharedAnon = SharedAnon()
    # GPU device file -> node -> bytes of driver mappings a forked worker inherited from its rank (charged there):
    # left out of by_node and by_kind (see charge_driver_memory)
    inherited_driver: Mapping[str, dict[int, int]] = EMPTY_MAP

    @property
    def total(self) -> int:
        return sum(self.by_node.values())


@record
class ThreadInfo:
    tid: int
    comm: str
    cpu: int | None  # the CPU it last ran on (stat field 39)
    allowed_cpus: tuple[int, ...]
    state: str = ""


@record
class GpuUse:
    """The GPU a process uses, and how numatune knows."""

    bdf: str | None
    node: int | None
    source: str  # "fd /dev/nvidia3", "CUDA_VISIBLE_DEVICES=2,3 + LOCAL_RANK=1 (PCI bus order assumed)"
    index: int | None = None  # NVIDIA minor / render node number / visible-device index
    label: str | None = None  # GPUi of inspect (numatune.model.order), when the GPU is one of the machine's


@record
class AccessCounters:
    """Where the access ratio comes from; `notes` say why a better source was not used."""

    source: str  # pmu | numa_balancing | placement
    local: int | None = None
    remote: int | None = None
    by_node: Mapping[int, int] = EMPTY_MAP
    remote_ratio: float | None = None
    events: tuple[str, ...] = ()
    window_s: float | None = None
    notes: tuple[str, ...] = ()


@record
class ProcessInfo:
    pid: int
    comm: str
    cmdline: tuple[str, ...]
    ppid: int | None
    state: str
    threads: tuple[ThreadInfo, ...]
    cpus_allowed: tuple[int, ...]
    mems_allowed: tuple[int, ...]
    cgroup: str | None = None  # unified (v2) path, or the cpuset controller's path on v1
    cpuset_cpus: tuple[int, ...] | None = None  # effective cpuset of that cgroup, when readable
    cpuset_mems: tuple[int, ...] | None = None
    memory: NumaMemory = NumaMemory()
    kernel_thread: bool = False
    environ: Mapping[str, str] = EMPTY_MAP  # ONLY readers.procs.ENVIRON_KEYS
    gpus_open: tuple[GpuUse, ...] = ()  # every GPU device node it holds open
    gpu: GpuUse | None = None  # the one it uses, when it can be told
    rank: int | None = None
    rank_source: str | None = None  # "LOCAL_RANK", "SLURM_LOCALID", ...
    numa_faults: Mapping[int, int] = EMPTY_MAP  # NUMA-balancing hinting faults by node
    notes: tuple[str, ...] = ()
    gpu_context: GpuContext | None = None  # it holds a GPU context (not merely descriptors inherited across fork)


@record
class GpuContext:
    """A process holds a GPU context, and how numatune knows: NVML lists it as a compute process, or it maps
    /dev/nvidia-uvm (CUDA) or /dev/kfd (ROCm). A forked DataLoader worker inherits the open descriptors and the
    /dev/nvidiactl mappings of its rank, never these."""

    runtime: str  # "CUDA" | "ROCm"
    evidence: str  # "NVML lists it as a compute process on GPU 0", "it maps /dev/nvidia-uvm"


@record
class Fix:
    launch: str | None = None
    numactl: str | None = None
    migratepages: str | None = None
    taskset: str | None = None


@record
class LateBinding:
    """Signs that the process was bound after it started (audit code NT406): its threads created before the
    binding kept the old CPU mask, and memory it touched before the binding sits on another node."""

    bound_cpus: tuple[int, ...]  # the process's binding: the main thread's CPUs and threads pinned no wider
    bound_nodes: tuple[int, ...]  # the nodes of those CPUs
    threads: tuple[int, ...] = ()  # TIDs wider than the main thread whose allowed CPUs reach outside the binding
    old_cpus: tuple[int, ...] = ()  # the CPUs those threads may still run on
    remote_bytes: int = 0  # own pages on other DRAM nodes under the local (default) policy
    remote_nodes: tuple[int, ...] = ()
    cause: str = ""
    fix: str = ""  # "bind at exec: numatune launch ..."


@record
class Locality:
    home_nodes: tuple[int, ...]
    home_source: str  # "gpu" | "threads" | "none"
    remote_ratio: float
    slow_tier_ratio: float
    remote_bytes: int
    slow_tier_bytes: int
    threads_off_home: tuple[int, ...]  # TIDs whose last CPU is not on a home node
    verdict: str  # ok | warning | misplaced | n/a
    reasons: tuple[str, ...]
    fix: Fix = Fix()
    late_binding: LateBinding | None = None
    pinned: PinnedHost | None = None  # a GPU rank's pinned host buffers (None: no GPU, or none mapped)
    node_kinds: Mapping[int, tuple[str, str | None]] = EMPTY_MAP  # node holding its pages -> (kind, GPU BDF)


@record
class PinnedHost:
    """Likely pinned host memory of a process with a GPU context, seen from outside: its resident shared anonymous
    mappings, which is how the CUDA host allocator maps its chunks (cudaHostAlloc, cudaMallocHost, torch's
    pin_memory(); numa_maps `/dev/zero (deleted)`), and where they are against the node the rank's GPU is attached
    to. A chunk is not an allocation: the driver sub-allocates small pinned allocations in one chunk and PyTorch's
    host cache reuses chunks; which allocations a chunk serves, and whether the driver pinned it at all (a plain
    mmap(MAP_SHARED|MAP_ANONYMOUS) looks the same), only numatune.pinned_host_chunks() inside the process tells.
    Memory registered with cudaHostRegister is an ordinary private mapping and is not seen from outside."""

    gpu_cpu_node: int | None  # the node with CPUs the rank's GPU hangs off (where they belong); None: GPU unknown
    by_node: Mapping[int, int]  # node -> bytes
    devices: tuple[str, ...]  # the file numa_maps names them by: ("/dev/zero (deleted)",)
    wrong_bytes: int  # bytes on other nodes
    wrong_nodes: tuple[int, ...]
    cost: str | None = None  # the measured host-to-device bandwidth of those nodes against the right one (probe)
    how: str = ""  # how numatune infers they are pinned ("likely pinned: ...")
    chunks: tuple[MappingPlacement, ...] = ()  # the largest chunks (MAX_CHUNKS at most): address, pages per node
    h2d_gbps: Mapping[int, float] = EMPTY_MAP  # node -> probe's host-to-GPU GB/s for the nodes holding them
    chunk_count: int = 0  # every resident chunk (`chunks` lists the largest)
    cache_reuse: str | None = None  # NT440: PyTorch's host cache reusing chunks across nodes, where audit sees it


def charge_driver_memory(proc: ProcessInfo) -> ProcessInfo:
    """A worker without a GPU context of its own: the GPU driver mappings it shows (/dev/nvidiactl, /dev/nvidiaN)
    are its rank's, inherited across fork and shared with it, so they are charged to the rank only: moved out of
    the worker's memory by node and by kind into `memory.inherited_driver`. A process with a context keeps them."""
    mem = proc.memory
    if proc.gpu_context is not None or not mem.driver:
        return proc
    by_node = dict(mem.by_node)
    file = dict(mem.by_kind.get("file", {}))
    for nodes in mem.driver.values():
        for n, b in nodes.items():
            by_node[n] = by_node.get(n, 0) - b
            file[n] = file.get(n, 0) - b
    by_kind = {k: v for k, v in mem.by_kind.items() if k != "file"}
    if any(file.values()):
        by_kind["file"] = {n: b for n, b in file.items() if b}
    kinds = {k: by_kind[k] for k in mem.by_kind if k in by_kind}
    policies = tuple(u._replace(bytes=u.bytes - mem.driver_policies.get(u.policy, 0)) for u in mem.policies)
    return proc._replace(memory=mem._replace(
        by_node={n: b for n, b in by_node.items() if b}, by_kind=kinds, policies=policies, driver=EMPTY_MAP,
        driver_policies=EMPTY_MAP, inherited_driver=mem.driver))


@record
class WorkerCheck:
    """A rank's worker (DataLoader, multiprocessing, compile worker: a descendant with the rank's variables) judged
    against its rank's binding: CPUs it may run on and memory nodes it uses outside the rank's (code NT408)."""

    rank_pid: int
    rank_cpus: tuple[int, ...]  # the rank's allowed CPUs
    rank_nodes: tuple[int, ...] | None  # the rank's memory nodes (its policy or cpuset); None: it binds no memory
    outside_cpus: tuple[int, ...] = ()  # CPUs the worker may run on that the rank may not
    outside_nodes: tuple[int, ...] = ()  # nodes its policy names or its pages sit on, outside the rank's
    outside_bytes: int = 0  # its own resident bytes on those nodes
    reason: str = ""
    fix: str = ""


# A process's place in a job (numatune.analysis.jobtree): a launcher above the ranks (torchrun, srun, mpirun, a
# shell that waits on its child), the rank (the process running the training program), a worker under its rank
# (fork, spawn, forkserver, DataLoader, compile), a helper of its rank (the resource tracker, torch_shm_manager, the
# forkserver, a program it runs), or a process outside any job.
ROLES = ("launcher", "rank", "worker", "helper", "process")
# Kinds of a rank's workers and helpers, as the kernel shows them (command line, comm, parent).
WORKER_KINDS = ("fork", "spawn", "forkserver", "dataloader", "compile")
HELPER_KINDS = ("resource_tracker", "torch_shm_manager", "forkserver", "subprocess")


@record
class ProcEntry:
    """What the job tree needs of one process (numatune.analysis.jobtree): read for every process of the node by
    `audit --ranks`, or taken from a ProcessInfo (the same attribute names)."""

    pid: int
    ppid: int | None
    comm: str
    cmdline: tuple[str, ...]  # bounded by the reader (procs.MAX_ARGS arguments of procs.MAX_ARG characters)
    environ: Mapping[str, str] = EMPTY_MAP  # ONLY readers.procs.ENVIRON_KEYS


@record
class JobPlace:
    """A process's place in the job tree: its role, the rank it belongs to (a worker's or helper's; a rank's own
    PID for a rank), what kind of launcher, worker or helper it is, the job (the PID of the job's topmost process),
    and for a rank without rank variables of its own the local rank inferred and from where."""

    role: str  # one of ROLES
    rank_pid: int | None = None
    kind: str | None = None  # a launcher's name (torchrun, srun, a shell's comm); a worker's or helper's kind
    job: int | None = None
    rank: int | None = None  # a rank's local rank (its own variable, or inferred)
    rank_source: str | None = None  # the variable (LOCAL_RANK) or `--local-rank` (command line)
    inferred: str | None = None  # None: its own environment; "children": set at run time, seen in its children;
    #                              "command line": passed by its launcher as --local-rank=N


@record
class ProcessAudit:
    process: ProcessInfo
    locality: Locality
    counters: AccessCounters
    role: str = "process"  # one of ROLES
    rank_pid: int | None = None  # a worker's or helper's rank
    worker: WorkerCheck | None = None  # a worker against its rank's binding
    place: JobPlace | None = None  # its place in the job tree (kind, job, an inferred rank)
