"""What `numatune probe` measured: one cell per (initiator node, memory node), and what was expected."""

from __future__ import annotations

from typing import NamedTuple


class Figure(NamedTuple):
    """Samples of one measurement; `best` is min for latency and max for bandwidth."""

    samples: tuple[float, ...]
    median: float
    best: float


class Expected(NamedTuple):
    distance: int | None  # SLIT initiator → target
    local_distance: int | None  # SLIT initiator → itself
    hmat_read_latency_ns: int | None  # only when the initiator is one HMAT lists for the target
    hmat_read_bandwidth_mbps: int | None


class CellPlacement(NamedTuple):
    ok: bool
    pages: int
    on_target: int
    elsewhere: dict[int, int]  # node (or -errno) → pages
    huge_share: float | None


class Cell(NamedTuple):
    initiator: int
    target: int
    target_kind: str  # dram | cxl | hbm | pmem | gpu | unknown ...
    cpu: int | None  # the CPU the latency thread ran on
    threads: int  # bandwidth threads
    status: str  # ok | failed (pages not on the target) | skipped (reason)
    reason: str | None
    placement: CellPlacement | None
    latency_ns: Figure | None
    read_gbps: Figure | None
    copy_gbps: Figure | None
    expected: Expected


class ProbeOptions(NamedTuple):
    initiators: tuple[int, ...] | None = None  # --nodes
    targets: tuple[int, ...] | None = None  # --targets
    size: int | None = None  # bytes per buffer set (latency buffer; bandwidth total per sample)
    time_budget: float | None = None  # seconds for the whole matrix
    threads: int | None = None  # bandwidth threads per initiator (default: one per core)
    samples: int = 5


class ProbeResult(NamedTuple):
    host: str
    initiators: tuple[int, ...]
    targets: tuple[int, ...]
    cells: tuple[Cell, ...]
    latency_available: bool
    latency_reason: str | None  # why not, when unavailable
    latency_bytes: int
    bandwidth_bytes: int
    llc_bytes: int | None
    time_budget: float
    elapsed: float
    numa_balancing: int | None
    demotion_enabled: bool | None
    transparent_hugepage: str | None
    memory_side_cache_bytes: int | None = None  # HMAT memory-side caches of the nodes (0: none listed)
    cxl_traffic: tuple = ()  # readers.perf.CxlTraffic per CXL PMU, counted while the matrix ran
    cxl_traffic_note: str | None = None  # why there are none (no CXL PMU, no permission, a saved tree)


class GpuDevice(NamedTuple):
    index: int  # CUDA ordinal (after CUDA_VISIBLE_DEVICES)
    name: str
    bdf: str | None  # PCI address as CUDA reports it, lower case
    numa_node: int | None  # from the topology reader (sysfs numa_node, else its inference); None: unknown
    node_from: str | None = None  # "sysfs numa_node" or "inferred from local_cpulist" (numa_node was -1)
    memory_node: int | None = None  # the node of the GPU's own memory (Grace HBM in NUMA mode; an APU's node)


class GpuPair(NamedTuple):
    """Copies between one node's pinned buffer and one GPU: {bytes per copy: Figure} per direction."""
    node: int
    gpu: int
    status: str  # ok | failed (pages not on the node, before or after pinning) | skipped (reason)
    reason: str | None
    placement: CellPlacement | None  # after pinning (before pinning it was checked too)
    h2d: dict[int, Figure]
    d2h: dict[int, Figure]
    cpu_node: int | None = None  # whose CPUs issued the copies: the node, or the nearest node with CPUs (SLIT)


class GpuProbe(NamedTuple):
    measured: bool
    reason: str | None  # why not, when not measured
    runtime: str | None  # "torch 2.x (CUDA 12.x)"
    register_api: str | None
    sizes: tuple[int, ...]
    samples: int
    gpus: tuple[GpuDevice, ...]
    pairs: tuple[GpuPair, ...]
    elapsed: float
