"""Target resolution on fixture trees (pure): local, GPU-local through launch's resolver, dram, cxl,
nearest CXL, node lists, bandwidth-weighted stripes and their layout."""

from __future__ import annotations

import pytest

from numatune.errors import BindingError, InputError, Unsupported
from numatune.placement.targets import (
    MAX_STRIPE_RUNS,
    Stripe,
    check_allowed,
    layout_for,
    resolve,
    stripe_chunk,
    stripe_counts,
    stripe_layout,
)
from tests.placement.conftest import HM, context_of

PS = 4096
MIB = 1 << 20


def test_local_dram_cxl_and_nodes():
    ctx = context_of(HM, here=1)
    assert resolve("local", ctx).nodes == (1,)
    assert resolve("dram", ctx).nodes == (0, 1)
    # "cxl" is the caller's socket: node 1 has CXL node 3 (SLIT 14); node 2 (SLIT 24) is behind socket 0
    cxl = resolve("cxl", ctx)
    assert cxl.nodes == (3,) and "far-socket CXL node(s) 2 left out" in cxl.reason
    assert resolve("cxl", context_of(HM, here=0)).nodes == (2,)
    every = resolve("cxl:all", ctx)
    assert every.nodes == (2, 3) and "far-socket CXL node(s) 2 for node 1" in every.reason
    near = resolve("cxl:nearest", ctx)  # node 1 is at distance 14 from node 3, 24 from node 2
    assert near.nodes == (3,) and "nearest to node 1" in near.reason
    assert resolve("cxl:nearest", context_of(HM, here=0)).nodes == (2,)
    assert resolve(3, ctx).nodes == (3,)
    assert resolve([3, 2, 3], ctx).nodes == (2, 3)
    assert resolve("2,3", ctx).nodes == (2, 3)
    assert resolve("node:2", ctx).spec == "node 2"


def test_gpu_local_uses_launchs_resolver_and_cuda_visible_devices():
    ctx = context_of(HM)
    # PCI bus order: 18:00.0, 3b:00.0 (node 0), 86:00.0, af:00.0 (node 1)
    t = resolve(("local", 2), ctx)
    assert t.nodes == (1,) and "0000:86:00.0" in t.spec and "numa_node of 0000:86:00.0" in t.reason
    assert resolve(("local", "0000:3b:00.0"), ctx).nodes == (0,)
    # a CUDA index counts visible devices: cuda:0 with CUDA_VISIBLE_DEVICES=3 is the 4th GPU (node 1)
    vis = context_of(HM, env={"CUDA_VISIBLE_DEVICES": "3"})
    assert resolve(("local", 0), vis).nodes == (1,)

    class Dev:  # a torch.device stand-in
        type, index = "cuda", 1

    assert resolve(("local", Dev()), ctx).nodes == (0,)
    with pytest.raises(BindingError, match=r"no such GPU \(local rank 7 but this root has 4 gpu"):
        resolve(("local", 7), ctx)
    # no GPU at all: said so in the API's words (launch's would name --gpu and --node)
    with pytest.raises(BindingError, match=r"target \('local', 0\): this machine has no GPU or accelerator$") as info:
        resolve(("local", 0), context_of("intel-xeon-L5640-2node"))
    assert "--" not in info.value.hint


def test_stripe_shares_come_from_the_callers_hmat_row_or_are_given():
    ctx = context_of(HM)
    s = resolve(Stripe("cxl"), ctx)  # node 0's socket: CXL node 2 only
    assert s.striped and s.shares == ((2, 1.0),) and "far-socket CXL node(s) 3 left out" in s.reason
    assert s.share_source == "HMAT read bandwidth from node 0: node 2 30000 MB/s"
    # both, from node 0: HMAT lists node 0 as an initiator of node 2 only, so no figure for node 3 from here;
    # node 3's figure for its own socket (30000 MB/s) is not used for node 0
    both = resolve("stripe:cxl:all", ctx)
    assert both.shares == ((2, 0.5), (3, 0.5)) and "far-socket CXL node(s) 3 for node 0" in both.reason
    assert both.share_source == "equal shares: HMAT gives no bandwidth from node 0 to node(s) 3"
    g = resolve("stripe:2=1,3=3", ctx)
    assert g.shares == ((2, 0.25), (3, 0.75)) and g.share_source == "given"
    b = resolve("stripe:2,3", ctx, bandwidths={2: 10000, 3: 30000})
    assert b.shares == ((2, 0.25), (3, 0.75)) and b.share_source == "caller's bandwidth figures"
    # vm-cxl: node 3 (CXL) has no HMAT entry: equal shares, said so
    e = resolve("stripe:2,3", context_of("vm-cxl"))
    assert e.shares == ((2, 0.5), (3, 0.5)) and "HMAT gives no bandwidth from node 0 to node(s)" in e.share_source


def test_bad_targets_are_clear_errors():
    ctx = context_of(HM)
    with pytest.raises(InputError, match="node 9 is not in this root"):
        resolve(9, ctx)
    with pytest.raises(InputError, match="expected 'local'"):
        resolve("fast", ctx)
    with pytest.raises(InputError, match="stripe:NODE=SHARE"):
        resolve("stripe:2=x", ctx)
    with pytest.raises(Unsupported, match=r"no CXL memory node in this root \(nodes 0:dram, 1:dram\)"):
        resolve("cxl", context_of("vm-two-socket"))
    with pytest.raises(InputError, match="cannot tell which node"):
        resolve("local", context_of(HM, here=None))


def test_cpuset_mems_outside_is_refused_naming_the_cgroup():
    ctx = context_of(HM, mems=frozenset({0, 1}), cgroup="/slurm/job42")
    with pytest.raises(Unsupported) as ei:
        check_allowed(resolve("cxl:all", ctx), ctx)
    assert "node(s) 2-3 are outside the memory nodes 0-1 that cgroup /slurm/job42 allows" in ei.value.message
    check_allowed(resolve("local", ctx), ctx)  # node 0 is allowed


def test_local_on_a_memoryless_cpu_node_takes_the_nearest_memory():
    ctx = context_of(HM, here=1)
    topo = ctx.topology
    nodes = tuple(n._replace(memory_total_kib=0) if n.id == 1 else n for n in topo.nodes)
    ctx = ctx._replace(topology=topo._replace(nodes=nodes))
    t = resolve("local", ctx)
    assert t.nodes == (0,) and "node 1 has no memory" in t.reason


@pytest.mark.parametrize(("n", "shares", "want"), [
    (10, [(2, 0.5), (3, 0.5)], {2: 5, 3: 5}),
    (7, [(2, 0.25), (3, 0.75)], {2: 2, 3: 5}),
    (3, [(2, 1 / 3), (3, 1 / 3), (4, 1 / 3)], {2: 1, 3: 1, 4: 1}),
    (1, [(2, 0.9), (3, 0.1)], {2: 1, 3: 0}),
])
def test_stripe_counts_are_proportional_and_complete(n, shares, want):
    assert stripe_counts(n, shares) == want


def test_stripe_layout_spreads_chunks_and_covers_the_range():
    runs = stripe_layout(8 * MIB, [(2, 0.25), (3, 0.75)], MIB)
    assert runs[0][0] == 0 and sum(ln for _, ln, _ in runs) == 8 * MIB
    per = {}
    for _, ln, node in runs:
        per[node] = per.get(node, 0) + ln
    assert per == {2: 2 * MIB, 3: 6 * MIB}
    assert [n for _, _, n in runs] == [3, 2, 3, 2, 3]  # dealt, not two halves: 3,2,3,3,3,2,3,3 merged
    # a bind is one run; a big stripe stays under MAX_STRIPE_RUNS mappings
    t = resolve(Stripe([2, 3]), context_of(HM))
    big = layout_for(t, 100 << 30, PS)
    assert len(big) <= MAX_STRIPE_RUNS and big[-1][0] + big[-1][1] == 100 << 30
    assert layout_for(resolve("cxl:all", context_of(HM)), 3 * PS, PS) == [(0, 3 * PS, (2, 3))]


def test_stripe_chunk_rule():
    assert stripe_chunk(4 * MIB, PS) == 16384  # small ranges: 256 chunks, page multiples
    assert stripe_chunk(1 << 30, PS) == 2 * MIB  # a huge page
    c = stripe_chunk(100 << 30, PS)
    assert c % (2 * MIB) == 0 and (100 << 30) / c <= MAX_STRIPE_RUNS
    assert stripe_chunk(PS, PS) == PS
    assert stripe_chunk(1 << 30, PS, 64 * 1024) == 64 * 1024
    with pytest.raises(InputError, match="multiple of the page size"):
        resolve(Stripe([2, 3], chunk=1000), context_of(HM))


def test_placement_imports_without_click_rich_torch_or_numpy():
    import subprocess
    import sys

    from tests.conftest import imports_of

    code = imports_of("import numatune.placement as p; p.latency_first", ("click", "rich", "torch", "numpy"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# A hand-made numatune.probe/1 document (only the fields probe_bandwidths reads), labelled as such.
PROBE_DOC = {
    "schema": "numatune.probe/1",
    "initiators": [0, 1],
    "cells": [
        {"initiator": 0, "target": 2, "status": "ok", "read_gbps": {"median": 24.0}, "copy_gbps": {"median": 30.0}},
        {"initiator": 0, "target": 3, "status": "ok", "read_gbps": None, "copy_gbps": {"median": 8.0}},
        {"initiator": 1, "target": 2, "status": "ok", "read_gbps": {"median": 12.0}},
        {"initiator": 1, "target": 3, "status": "failed", "read_gbps": {"median": 99.0}},
    ],
}


def test_probe_bandwidths_feed_the_stripe():
    from numatune.placement.targets import probe_bandwidths

    assert probe_bandwidths(PROBE_DOC) == {2: 24000.0, 3: 8000.0}  # read, else copy; MB/s
    assert probe_bandwidths(PROBE_DOC, 1) == {2: 12000.0}  # failed cells are not figures
    with pytest.raises(InputError, match="numatune.probe/1"):
        probe_bandwidths({"schema": "numatune.inspect/1"})
    with pytest.raises(InputError, match="no measured bandwidth from node 5"):
        probe_bandwidths(PROBE_DOC, 5)
    t = resolve("stripe:cxl:all", context_of(HM), bandwidths=probe_bandwidths(PROBE_DOC))
    assert t.shares == ((2, 0.75), (3, 0.25)) and t.share_source == "caller's bandwidth figures"
