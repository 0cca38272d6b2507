"""Time a CPU Adam step with its data in local DRAM, on CXL, interleaved over both, and as the
latency-first plan places it: the measurement behind the study's ~4x (arXiv 2507.03305: 1.08x at
1.8M elements on CXL, 3.8x at 68M, 4.2x at 545M). Run it on your CXL machine:

    .venv/bin/python benchmarks/bench_placement.py                       # 1M, 16M, 68M elements
    .venv/bin/python benchmarks/bench_placement.py --sizes 1.8e6,6.8e7,5.45e8 --steps 10
    .venv/bin/python benchmarks/bench_placement.py --dram-budget 1G      # make the plan straddle

Each variant holds the fp32 parameter, its gradient, exp_avg and exp_avg_sq (16 B per element) in
memory placed before the first touch (an Arena, or an mbind(MPOL_INTERLEAVE) range for
`interleave`), checks where the pages are, then times torch.optim.Adam.step (median of --steps after
one warm-up). Variants that need a CXL node are skipped, saying so, where there is none. In the VM
the figures prove only the mechanics: QEMU serves CXL memory as MMIO.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import compile_package  # noqa: E402


def _interleaved(nbytes: int, nodes: tuple[int, ...]):  # noqa: ANN202 - (mmap, address)
    import ctypes

    from numatune.system import memsys

    ps = memsys.page_size()
    size = nbytes + (-nbytes % ps)
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    c = ctypes.c_char.from_buffer(m)
    addr = ctypes.addressof(c)
    del c
    memsys.mbind(addr, size, memsys.MPOL_INTERLEAVE, nodes)
    return m, addr


def build(variant: str, n: int, args: argparse.Namespace, ctx):  # noqa: ANN001, ANN201
    """(tensors p, grad, exp_avg, exp_avg_sq; what holds them; where the pages are)."""
    import torch

    from numatune.placement import Arena, apply, latency_first, where

    nbytes = 4 * n
    if variant in ("dram", "cxl"):
        holder = Arena(4 * nbytes + 4 * 64, "local" if variant == "dram" else "cxl", context=ctx)
        ts = [holder.zeros((n,), torch.float32) for _ in range(4)]
    elif variant == "interleave":
        local = ctx.here
        nodes = (local, *(m.id for m in ctx.topology.nodes if m.kind == "cxl" and m.memory_total_kib))
        holder, _ = _interleaved(4 * nbytes, nodes)
        ts = [torch.frombuffer(holder, dtype=torch.float32, count=n, offset=i * nbytes) for i in range(4)]
        for t in ts:
            t.zero_()
    else:  # plan
        items = [("param (fp32 master)", nbytes, 1), ("grad (fp32)", nbytes, 1), ("exp_avg", nbytes, 1),
                 ("exp_avg_sq", nbytes, 1)]
        plan = latency_first(items, args.dram_budget, context=ctx)
        holder = apply(plan, context=ctx)
        ts = [holder.tensor(name, (n,), torch.float32).zero_() for name, _, _ in items]
    placed = {}
    for t in ts:
        for node, pages in where(t).items():
            placed[node] = placed.get(node, 0) + pages
    return ts, holder, placed


def time_step(ts, steps: int) -> float:  # noqa: ANN001
    import torch

    p = torch.nn.Parameter(ts[0])
    p.grad = ts[1]
    p.grad.normal_()
    opt = torch.optim.Adam([p], lr=1e-3, foreach=False)
    opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": ts[2], "exp_avg_sq": ts[3]}
    opt.step()  # warm-up
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e6,1.6e7,6.8e7", help="elements per tensor, comma separated")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--variants", default="dram,cxl,interleave,plan")
    ap.add_argument("--dram-budget", type=float, default=None, help="bytes of DRAM the plan may use")
    args = ap.parse_args()
    compile_package()
    try:
        import torch
    except ImportError:
        print("bench_placement needs PyTorch: pip install torch==2.13.0", file=sys.stderr)
        return 2
    from numatune.errors import NumatuneError
    from numatune.placement import live_context

    if args.dram_budget is not None:
        args.dram_budget = int(args.dram_budget)
    ctx = live_context()
    has_cxl = any(n.kind == "cxl" and n.memory_total_kib for n in ctx.topology.nodes)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; calling thread on node {ctx.here}; "
          f"nodes {', '.join(f'{n.id}:{n.kind}' for n in ctx.topology.nodes)}")
    print(f"{'elements':>12} {'variant':>10} {'step ms':>10} {'vs dram':>8}  pages per node")
    for size in (int(float(s)) for s in args.sizes.split(",")):
        base = None
        for v in variants:
            if v in ("cxl", "interleave") and not has_cxl:
                print(f"{size:>12} {v:>10} {'-':>10} {'-':>8}  skipped: no CXL memory node on this machine")
                continue
            try:
                ts, holder, placed = build(v, size, args, ctx)
            except NumatuneError as exc:
                print(f"{size:>12} {v:>10} {'-':>10} {'-':>8}  skipped: {exc.message}")
                continue
            ms = time_step(ts, args.steps) * 1000
            base = ms if v == "dram" else base
            ratio = f"{ms / base:.2f}x" if base else "-"
            print(f"{size:>12} {v:>10} {ms:>10.2f} {ratio:>8}  {placed}")
            del ts
            arena = getattr(holder, "arena", holder)
            with contextlib.suppress(NumatuneError, BufferError):  # still referenced: freed with the process
                arena.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
