"""Guest workload for the placement checks: numatune.placement used as a training script would.

Usage: placer.py OUT.json SCENARIO...   (run with the host venv's python: numatune, torch, numpy)

Each scenario places something and records, beside numatune's own report, the kernel's view of the
object's address range: the /proc/self/numa_maps lines of the mappings inside it (mbind splits the
mappings at the range, so they cover the object exactly). The checks judge from numa_maps, not from
numatune's report. CXL pages are few (a few MiB): QEMU serves CXL memory as MMIO, slowly.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys
import time
import traceback
from typing import Any

PS = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20
# the cxl topology's nodes: 1 the CPUs' node (local), 2 a CPU-less HMAT node; overridable so that the
# scenarios can be smoke-run on a one-node machine (PLACER_FAR=0 PLACER_LOCAL=0 PLACER_CXL=0)
LOCAL = int(os.environ.get("PLACER_LOCAL", "1"))
FAR = int(os.environ.get("PLACER_FAR", "2"))

# fixed mmap threshold: glibc's dynamic one grows after frees, and the tensors here must each get a
# mapping of their own (as large training tensors do), so that place() needs no shared edge pages
ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD


def maps_in(start: int, end: int) -> list[str]:
    """numa_maps lines of the mappings from the one holding `start` up to `end`."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
            if lo <= start < hi:
                start = lo
                break
    out = []
    with open("/proc/self/numa_maps") as f:
        for line in f:
            addr = int(line.split(" ", 1)[0], 16)
            if start <= addr < end:
                out.append(line.strip())
    return out


def rng(obj: Any) -> tuple[int, int]:
    from numatune.placement import span_of

    s = span_of(obj)
    start = s.addr - s.addr % PS
    end = s.addr + s.nbytes
    return start, end + (-end % PS)


def record(obj: Any, **extra: Any) -> dict[str, Any]:
    start, end = rng(obj)
    return {"range": [start, end], "pages": (end - start) // PS, "numa_maps": maps_in(start, end), **extra}


def cxl_node() -> int:
    from numatune.placement import live_context

    if "PLACER_CXL" in os.environ:
        return int(os.environ["PLACER_CXL"])
    ctx = live_context()
    return next(n.id for n in ctx.topology.nodes if n.kind == "cxl")


# -- scenarios -----------------------------------------------------------------------------------------
def arenas() -> dict[str, Any]:
    from numatune.placement import Arena, Stripe

    cxl = cxl_node()
    out = {"cxl_node": cxl}
    keep = []
    from numatune.cpulist import parse_cpulist

    with open("/sys/devices/system/node/node0/cpulist") as f:
        node0_cpus = parse_cpulist(f.read())
    own_cpus = os.sched_getaffinity(0)
    for name, size, target in (("local", 8 * MIB, "local"), ("node0", 8 * MIB, 0), ("cxl", 2 * MIB, "cxl"),
                               ("stripe_given", 4 * MIB, Stripe([FAR, cxl], {FAR: 3, cxl: 1})),
                               ("stripe_hmat", 6 * MIB, Stripe([0, FAR]))):
        # A stripe's shares come from the caller's HMAT row, and the kernel shows each target's figures
        # for its best initiator only (node 0 for nodes 0 and 2 here): that stripe is made from node 0.
        os.sched_setaffinity(0, node0_cpus if name == "stripe_hmat" else own_cpus)
        a = Arena(size, target)
        keep.append(a)
        out[name] = record(a, report=a.report.describe(), ok=a.report.check.ok,
                           shares=[list(s) for s in a.target.shares], source=a.target.share_source,
                           found=dict(a.report.check.found))
    os.sched_setaffinity(0, own_cpus)
    return out


def thread_pool() -> dict[str, Any]:
    import torch

    from numatune.placement import Arena, where

    torch.set_num_threads(4)
    a = Arena(16 * MIB, FAR, populate=False)
    t = a.empty((4 * MIB,), torch.float32)
    t.fill_(1.0)  # faulted in by the intra-op pool, whose threads' own policy is the process's bind:0
    torch.add(t, 1.0, out=t)
    return record(t, where=dict(where(t)), threads=torch.get_num_threads(), sum=float(t.sum()))


def place_numpy() -> dict[str, Any]:
    import numpy as np

    from numatune.placement import place

    a = np.arange(512 * 1024, dtype=np.float32)  # 2 MiB, faulted on node 0 (bind:0 process)
    before = record(a)
    r = place(a, FAR)
    return record(a, before=before["numa_maps"], report=r.describe(), moved=r.moved, node=FAR,
                  intact=bool((a == np.arange(512 * 1024, dtype=np.float32)).all()))


def place_torch() -> dict[str, Any]:
    import torch

    from numatune.placement import place

    cxl = cxl_node()
    t = torch.arange(512 * 1024, dtype=torch.float32)  # 2 MiB, faulted on node 0 (bind:0 process)
    before = record(t)
    r = place(t, "cxl")
    return record(t, before=before["numa_maps"], report=r.describe(), moved=r.moved, node=cxl,
                  intact=bool((t == torch.arange(512 * 1024, dtype=torch.float32)).all()))


def no_rebalance() -> dict[str, Any]:
    import numpy as np

    from numatune.placement import Stripe, place

    a = np.ones(1024 * 1024, dtype=np.float32)  # 4 MiB on node 0
    r1 = place(a, [0, FAR])
    first = record(a, report=r1.describe(), notes=list(r1.notes), moved=r1.moved)
    r2 = place(a, Stripe([0, FAR], {0: 1, FAR: 1}))
    return {"bind_set": first, "stripe": record(a, report=r2.describe(), moved=r2.moved)}


def refusals() -> dict[str, Any]:
    import numpy as np

    from numatune.errors import NumatuneError
    from numatune.placement import place

    out: dict[str, Any] = {}
    small = np.ones(10, dtype=np.float32)  # 40 bytes on the heap, next to other objects
    try:
        place(small, FAR)
        out["edge"] = {"raised": None}
    except NumatuneError as exc:
        out["edge"] = {"raised": type(exc).__name__, "message": exc.message, "hint": exc.hint}
    m = mmap.mmap(-1, 4 * PS, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m[:] = b"v" * (4 * PS)
    c = ctypes.c_char.from_buffer(m)
    addr = ctypes.addressof(c)
    del c
    m.close()
    try:
        place((addr, 4 * PS), FAR)
        out["vanished"] = {"raised": None}
    except NumatuneError as exc:
        out["vanished"] = {"raised": type(exc).__name__, "message": exc.message}
    return out


def forked() -> dict[str, Any]:
    import numpy as np

    from numatune.placement import place

    a = np.ones(256 * 1024, dtype=np.float32)  # 1 MiB on node 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a DataLoader-like worker: maps the same pages, waits
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        r1 = place(a, FAR, strict=False)
        first = record(a, report=r1.describe(), unmovable=r1.unmovable, ok=r1.ok)
        r2 = place(a, FAR, move_shared=True)  # root in the guest: CAP_SYS_NICE
        second = record(a, report=r2.describe(), ok=r2.ok)
    finally:
        os.write(w, b"x")
        os.waitpid(pid, 0)
    return {"without": first, "move_shared": second}


def plan_apply() -> dict[str, Any]:
    from numatune.placement import apply, latency_first, live_context, where

    cxl = cxl_node()
    ctx = live_context()
    plan = latency_first([("adam state", 3 * MIB, 1), ("bf16 weights", 2 * MIB, 2)], dram_budget=4 * MIB,
                         dram_node=LOCAL, cxl_free={cxl: 512 * MIB})
    pm = apply(plan, context=ctx)
    off, nbytes = pm.regions["bf16 weights"]
    w = pm.arena.at(off, (nbytes // 4,), "float32")  # numpy: the torch import is slow in the TCG guest
    return {"cxl_node": cxl, "arena": record(pm.arena, ok=pm.arena.report.check.ok),
            "weights": record(w, where=dict(where(w))),
            "parts": [[p.item, p.tier, p.nbytes, p.offset] for p in plan.parts]}


def optimizer() -> dict[str, Any]:
    import torch

    from numatune.placement import place_optimizer_state, where

    model = torch.nn.Linear(512, 512)
    opt = torch.optim.AdamW(model.parameters())
    arena, n = place_optimizer_state(opt, FAR)
    for _ in range(2):
        model(torch.randn(8, 512)).sum().backward()
        opt.step()
        opt.zero_grad()
    inside = all(arena.addr <= opt.state[p][k].data_ptr() < arena.addr + arena.nbytes
                 for p in model.parameters() for k in ("exp_avg", "exp_avg_sq"))
    return record(arena, tensors=n, inside=inside, where=dict(where(arena)),
                  step=float(opt.state[model.weight]["step"]))


def bench() -> dict[str, Any]:
    """benchmarks/bench_placement.py's variants at 1e5 elements (mechanics only: QEMU's CXL is MMIO)."""
    import argparse
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import bench_placement

    from numatune.placement import live_context

    ctx = live_context()
    args = argparse.Namespace(dram_budget=64 * MIB)  # the guest's 1 GiB nodes: the default reserve is 2 GiB
    rows = {}
    for variant in ("dram", "cxl", "interleave", "plan"):
        ts, holder, placed = bench_placement.build(variant, 100_000, args, ctx)
        rows[variant] = {"placed": placed, "step_ms": round(bench_placement.time_step(ts, 1) * 1000, 2)}
    return {"cxl_node": cxl_node(), "rows": rows}


def zones() -> dict[str, Any]:
    from numatune.readers.zones import movable_share, read_zones
    from numatune.system.host import Host

    z = read_zones(Host.open("/"))
    cxl = cxl_node()
    with open("/proc/zoneinfo") as f:
        text = f.read()
    return {"cxl_node": cxl, "movable_share": movable_share(z, cxl), "zones": {str(k): v for k, v in z.items()},
            "zoneinfo": text}


def cgroup() -> dict[str, Any]:
    """Run inside a cgroup whose cpuset.mems excludes the CXL node (the check puts this process there)."""
    from numatune.errors import NumatuneError
    from numatune.placement import live_context, place

    with open("/proc/self/status") as f:
        mems = f.read().split("Mems_allowed_list:")[1].split()[0]
    out: dict[str, Any] = {"mems_allowed": mems}
    cxl = cxl_node()
    m = mmap.mmap(-1, 4 * PS, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m[:] = b"c" * (4 * PS)
    for name, ctx in (("checked", None), ("kernel", live_context()._replace(mems_allowed=None))):
        try:
            place(m, cxl, context=ctx)
            out[name] = {"raised": None}
        except NumatuneError as exc:
            out[name] = {"raised": type(exc).__name__, "message": exc.message}
    out["after"] = record(m)
    return out


SCENARIOS = {f.__name__: f for f in (arenas, thread_pool, place_numpy, place_torch, no_rebalance, refusals, forked,
                                     plan_apply, optimizer, bench, zones, cgroup)}


def main() -> int:
    out_path, names = sys.argv[1], sys.argv[2:]
    results: dict[str, Any] = {"pid": os.getpid()}
    for name in names:
        t0 = time.monotonic()
        try:
            results[name] = SCENARIOS[name]()
        except Exception:  # recorded for the check to show
            results[name] = {"error": traceback.format_exc()}
        results[name + "_seconds"] = round(time.monotonic() - t0, 1)
        with open(out_path + ".tmp", "w") as f:
            json.dump(results, f, default=str)
        os.replace(out_path + ".tmp", out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
