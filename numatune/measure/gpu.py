"""probe --gpu: host↔GPU copy bandwidth from a pinned buffer on each node to each GPU (torch, live only).

Order matters: the buffer is bound to its node (memsys.mbind through bench.Buffer), first-touched and
checked page by page (move_pages) first; only then registered with CUDA (placement.pinning's
cudaHostRegister), and checked again, because long-term pinning migrates pages out of ZONE_MOVABLE
(CXL memory onlined as movable silently moves to DRAM). A pair whose pages are not all on the node is
failed, never timed. torch is imported only here, only under --gpu.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from numatune.model.probe import CellPlacement, Figure, GpuDevice, GpuPair, GpuProbe
from numatune.model.topology import Topology

SIZES = (4 << 20, 64 << 20, 256 << 20)
SAMPLES = 5


def cuda_runtime() -> tuple[str | None, str]:
    """(name of a usable runtime, "") or (None, why not), without initialising a GPU context."""
    import importlib.util

    reasons = []
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch

            if torch.cuda.is_available():
                return f"torch {torch.__version__} (CUDA {torch.version.cuda})", ""
            reasons.append(f"torch {torch.__version__} sees no CUDA device")
        except Exception as exc:  # noqa: BLE001 - a broken torch install is a reason, not a crash
            reasons.append(f"torch failed to import ({type(exc).__name__})")
    else:
        reasons.append("torch is not installed")
    if importlib.util.find_spec("cuda") is None:
        reasons.append("cuda-python is not installed")
    else:
        reasons.append("cuda-python is installed but only torch is used for copies")
    return None, "no CUDA runtime importable: " + "; ".join(reasons)


def not_measured(reason: str) -> GpuProbe:
    return GpuProbe(False, reason, None, None, (), 0, (), (), 0.0)


def _bdf(props) -> str | None:  # noqa: ANN001 - torch._CudaDeviceProperties
    try:
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:  # older torch: no PCI ids
        return None


def gpu_devices(topo: Topology) -> list[GpuDevice]:
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        bdf = _bdf(props)
        dev = topo.device(bdf) if bdf else None
        if dev is None or dev.node is None:
            out.append(GpuDevice(i, props.name, bdf, None, None, dev.memory_node if dev else None))
        else:
            how = "sysfs numa_node" if dev.numa_node is not None else f"inferred from {dev.inferred_from}"
            out.append(GpuDevice(i, props.name, bdf, dev.node, how, dev.memory_node))
    return out


def issuing_node(topo: Topology, node: int) -> int | None:
    """Whose CPUs issue the copies of a buffer on `node`: the node itself when it has CPUs, else (a CPU-less
    GPU-memory, CXL or HBM node) the nearest node with CPUs by SLIT, as a process placed there would run."""
    from numatune.plan.cxl import nearest_cpu_node

    n = topo.node(node)
    if n is None:
        return None
    return n.id if n.cpus else nearest_cpu_node(topo, n)


def _place(p) -> CellPlacement:  # noqa: ANN001 - bench.Placement
    return CellPlacement(p.ok, p.pages, p.on_target, dict(p.elsewhere), p.huge_share)


def _time(torch, dst, src, samples: int) -> Figure:  # noqa: ANN001 - torch module and tensors
    """One warm-up copy, then `samples` copies each between CUDA events; GB/s = bytes / s / 1e9."""
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    rates = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src, non_blocking=True)
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        rates.append(src.numel() / (ms / 1e3) / 1e9)
    from numatune.analysis.stats import median

    return Figure(tuple(rates), median(rates), max(rates))


def measure(topo: Topology, nodes: Sequence[int], runtime: str, *, sizes: Sequence[int] = SIZES,
            samples: int = SAMPLES, progress: Callable[[str, int, int], None] | None = None) -> GpuProbe:
    import torch

    from numatune.errors import NumatuneError
    from numatune.measure.bench import Buffer
    from numatune.placement.pinning import cuda_register

    t0 = time.perf_counter()
    api, register = cuda_register()
    rt = torch.cuda.cudart()
    gpus = gpu_devices(topo)
    size = max(sizes)
    pairs: list[GpuPair] = []
    affinity = os.sched_getaffinity(0)
    total, step = len(nodes) * len(gpus), 0
    for n in nodes:
        issuer = issuing_node(topo, n)
        node = topo.node(issuer) if issuer is not None else None
        cpus = set(node.cpus) & affinity if node else set()
        fail: tuple[str, str, CellPlacement | None] | None = None
        buf = host = None
        registered = False
        target = topo.node(n)
        free = target.memory_free_kib * 1024 if target and target.memory_free_kib is not None else None
        try:
            if free is not None and free < size + (64 << 20):  # MPOL_BIND on a full node ends in the OOM killer
                raise MemoryError(f"node {n} has {free >> 20} MiB free, {(size >> 20) + 64} MiB needed")
            if cpus:  # issue the copies from the node's (or nearest) CPUs; the DMA reads the buffer, not the CPU
                os.sched_setaffinity(0, cpus)
            buf = Buffer(size, n)
            buf.touch()
            before = buf.verify()
            if not before.ok:
                fail = ("failed", "pages not on the node before pinning", _place(before))
            else:
                register(buf.addr, size)
                registered = True
                after = buf.verify()
                if not after.ok:
                    fail = ("failed", "pinning moved pages off the node (ZONE_MOVABLE memory?)", _place(after))
                else:
                    placed = _place(after)
                    host = torch.frombuffer(buf.map, dtype=torch.uint8)
        except (NumatuneError, OSError, MemoryError) as exc:
            fail = ("skipped", getattr(exc, "message", None) or str(exc) or type(exc).__name__, None)
        for g in gpus:
            step += 1
            if progress:
                progress(f"node {n} ↔ GPU {g.index}", step, total)
            if fail is not None:
                pairs.append(GpuPair(n, g.index, fail[0], fail[1], fail[2], {}, {}, issuer))
                continue
            h2d, d2h = {}, {}
            try:
                with torch.cuda.device(g.index):
                    dev = torch.empty(size, dtype=torch.uint8, device=f"cuda:{g.index}")
                    for s in sorted(sizes):
                        h2d[s] = _time(torch, dev[:s], host[:s], samples)
                        d2h[s] = _time(torch, host[:s], dev[:s], samples)
                    del dev
                    torch.cuda.empty_cache()
            except RuntimeError as exc:  # CUDA out of memory, device error: say it, go on
                pairs.append(GpuPair(n, g.index, "skipped", f"CUDA: {str(exc).splitlines()[0]}", placed, {}, {},
                                     issuer))
                continue
            pairs.append(GpuPair(n, g.index, "ok", None, placed, h2d, d2h, issuer))
        del host
        if registered:
            rt.cudaHostUnregister(buf.addr)
        if buf is not None:
            buf.close()
        os.sched_setaffinity(0, affinity)
    return GpuProbe(True, None, runtime, api, tuple(sorted(sizes)), samples, tuple(gpus), tuple(pairs),
                    time.perf_counter() - t0)
