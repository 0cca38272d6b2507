"""Arena, where, place, pin and the torch helpers on this kernel (node 0; every NUMA kernel has it).

Multi-node moves, stripes and the CXL node are proven in the VM stage (tests/vm/guest/checks_placement.py),
where numa_maps checks the pages independently of numatune's own report.
"""

from __future__ import annotations

import mmap

import pytest

from numatune.errors import InputError, Unsupported
from numatune.placement import Arena, Stripe, place, where
from numatune.placement.arena import check_free
from numatune.placement.move import glibc_mmapped_chunk, has_cap_sys_nice, own_mapping
from numatune.placement.pages import span_of
from numatune.placement.pinning import pin, pin_outcome, pin_warnings
from numatune.placement.targets import Target, live_context
from numatune.system import memsys
from tests.placement.conftest import context_of

PS = memsys.page_size()
MIB = 1 << 20


def test_arena_binds_populates_and_verifies():
    with Arena(8 * MIB, "local") as a:
        r = a.report
        assert r.check.ok and r.populated and r.runs == 1
        assert dict(r.check.found) == {0: 8 * MIB // PS} and r.check.found.absent == 0
        assert memsys.get_mempolicy(a.addr) == (memsys.MPOL_BIND, frozenset({0}))
        assert a.verify().check.found == r.check.found


def test_arena_without_populate_leaves_pages_absent_until_touched():
    with Arena(4 * MIB, 0, populate=False) as a:
        assert a.report.check.found.absent == 4 * MIB // PS and not dict(a.report.check.found)
        buf = a.buffer(PS * 3)
        buf[0:1] = b"x"
        del buf
        assert dict(where(a)) == {0: 1}


def test_tensors_and_arrays_come_from_the_arena(torch, np):
    a = Arena(4 * MIB, "local")
    t = a.zeros((256, 256), torch.float32)
    assert a.addr <= t.data_ptr() < a.addr + a.nbytes and t.data_ptr() % 64 == 0
    assert float(t.abs().sum()) == 0.0 and t.shape == (256, 256)
    n = a.empty((10, 10), "float64")
    assert isinstance(n, np.ndarray) and n.__array_interface__["data"][0] == a.addr + 256 * 256 * 4
    assert dict(where(t)) == {0: 256 * 256 * 4 // PS}
    c = a.copy_of(torch.arange(10.0))
    assert c.tolist() == list(range(10)) and a.addr <= c.data_ptr() < a.addr + a.nbytes
    with pytest.raises(Exception, match="arena full"):
        a.empty((4 * MIB,), torch.float32)
    with pytest.raises(InputError, match="live tensors"):
        a.close()
    del t, n, c
    a.close()
    assert a.closed
    with pytest.raises(InputError, match="closed"):
        a.empty(1, "float32")


def test_arena_without_torch_makes_numpy_arrays_or_says_what_is_missing(np, monkeypatch):
    """Arena.empty(shape) with torch missing: a float32 numpy array (torch's default dtype); with numpy missing
    too: one InputError naming both, not a bare ModuleNotFoundError. A torch dtype without torch still raises."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with Arena(MIB, "local") as a:
        x = a.empty((4, 8))
        assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == (4, 8)
        z = a.zeros(16)
        assert z.dtype == np.float32 and not z.any()
        monkeypatch.setitem(sys.modules, "numpy", None)
        with pytest.raises(InputError, match="need torch or numpy"):
            a.empty((4,))
        assert len(a.buffer(128)) == 128  # a memoryview needs neither
        del x, z


def test_intra_op_threads_fault_pages_where_the_arena_says(torch):
    """The thread-policy pitfall: pages faulted by PyTorch's pool follow the range policy, not the thread's."""
    torch.set_num_threads(2)
    a = Arena(8 * MIB, 0, populate=False)
    t = a.empty((2 * MIB,), torch.float32)
    t.fill_(1.0)  # parallelised over the intra-op pool
    assert dict(where(t)) == {0: 8 * MIB // PS} and where(t).absent == 0


def test_an_arena_too_big_for_its_node_is_refused_before_any_fault():
    with pytest.raises(Unsupported, match=r"does not fit on node 0 \(local\)") as ei:
        Arena(1 << 50, "local")
    assert "OOM killer" in ei.value.hint
    t = Target("cxl", (2, 3), "test")
    check_free(t, [(0, 10 * MIB, (2, 3))], 0, free_of=lambda n: 6 * MIB)  # 12 MiB over the two: fits
    with pytest.raises(Unsupported, match="on nodes 2-3"):
        check_free(t, [(0, 10 * MIB, (2, 3))], 2 * MIB, free_of=lambda n: 6 * MIB)


def test_a_stripe_over_one_node_is_one_node(torch):
    with Arena(2 * MIB, Stripe([0])) as a:
        assert a.report.check.ok and a.report.check.expected == {0: 2 * MIB // PS}


def test_where_and_place_refuse_a_vanished_mapping():
    m = mmap.mmap(-1, 2 * PS, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m[:] = b"a" * (2 * PS)
    span = span_of(m)
    assert dict(where(span)) == {0: 2}
    m.close()
    with pytest.raises(InputError, match="no longer mapped"):
        where(span)
    with pytest.raises(InputError, match="no longer mapped"):
        place(span, 0)


def test_place_numpy_and_torch_and_the_shared_edge_rule(torch, np):
    arr = np.ones(5 * 10**6)  # 40 MB, above glibc's largest dynamic mmap threshold (32 MiB): its own mapping
    addr = arr.__array_interface__["data"][0]
    if glibc_mmapped_chunk(addr, PS) is None:
        # glibc served it from the heap after all (an mmap refused, or M_MMAP_THRESHOLD set: seen in a long session
        # with torch 2.15): its edge pages hold other objects, so moving it is refused, saying so
        with pytest.raises(InputError, match="edge page"):
            place(arr, "local")
        keep = mmap.mmap(-1, 5 * 10**6 * 8)  # then an array over a mapping of its own, as glibc would have made it
        arr = np.frombuffer(keep, dtype=np.float64)
        arr[:] = 1.0  # touched, as np.ones touches its pages
    r = place(arr, "local")
    assert r.ok and dict(r.check.found) == {0: r.pages} and any("own mapping" in n for n in r.notes)
    big = torch.from_numpy(np.frombuffer(mmap.mmap(-1, 40 * MIB), dtype=np.float32))  # a tensor on its own mapping
    assert place(big, 0).ok
    small = torch.ones(10)  # 40 bytes on the heap, next to other objects
    with pytest.raises(InputError, match="edge page") as ei:
        place(small, 0)
    assert "allow_shared_pages=True" in ei.value.hint
    r = place(small, 0, allow_shared_pages=True)
    assert r.ok and r.edge_pages == 1 and any("edge page" in n for n in r.notes)
    with pytest.raises(InputError, match="only CPU tensors"):
        place(torch.ones(2, device="meta"), 0)


def test_place_to_a_node_the_kernel_refuses_names_the_cgroup():
    """vm-two-socket says node 1 exists; this machine's kernel has no node 1, so mbind answers EINVAL."""
    if 1 in memsys.mems_allowed():
        pytest.skip("this machine really has node 1: the refusal needs a node the kernel lacks")
    ctx = context_of("vm-two-socket", cgroup="/user.slice/test")
    m = mmap.mmap(-1, PS, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m[0:1] = b"x"
    with pytest.raises(Unsupported) as ei:
        place(m, 1, context=ctx)
    assert "refused (EINVAL)" in ei.value.message and "cgroup /user.slice/test's cpuset.mems" in ei.value.message
    assert dict(where(m)) == {0: 1}  # nothing moved
    m.close()


def test_own_mapping_and_glibc_chunk_detection(np):
    maps = "7f0000000000-7f0000003000 rw-p 00000000 00:00 0\n7f0000003000-7f0000004000 rw-p 00000000 00:00 0\n"
    assert own_mapping(0x7F0000000000, 0x7F0000003000, maps)
    assert not own_mapping(0x7F0000000000, 0x7F0000002000, maps)
    assert not own_mapping(0x7E0000000000, 0x7E0000001000, maps)
    arr = np.ones(5 * 10**6)  # above glibc's largest dynamic mmap threshold (32 MiB)
    addr = arr.__array_interface__["data"][0]
    chunk = glibc_mmapped_chunk(addr, PS)
    assert chunk is not None and chunk[0] <= addr and addr + arr.nbytes <= chunk[1]
    assert glibc_mmapped_chunk(addr - addr % PS, PS) is None  # header not on the object's page: not read


def test_cap_sys_nice_from_status():
    assert has_cap_sys_nice("CapEff:\t000001ffffffffff\n")
    assert not has_cap_sys_nice("CapEff:\t0000000000000000\n")
    assert has_cap_sys_nice("CapEff:\t0000000000800000\n")  # bit 23 alone


def test_pin_says_clearly_when_cuda_is_missing(torch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal is for machines without it")
    a = Arena(MIB, "local")
    with pytest.raises(Unsupported, match="cannot pin: CUDA is not available on this machine") as ei:
        pin(a)
    assert "nothing was pinned" in ei.value.message
    calls = []
    r = pin(a, register=lambda addr, n: calls.append((addr, n)), zones={0: {"Normal": 100, "Movable": 0}})
    assert calls == [(a.addr, a.nbytes)] and r.ok and r.before == r.after == {0: MIB // PS}


def test_pin_outcome_on_recorded_statuses():
    """What long-term pinning does to a buffer on a ZONE_MOVABLE CXL node (3): pages leave for DRAM (0)."""
    before = [3, 3, 3, 3, -2]
    after = [0, 0, 3, 0, -2]
    moved = pin_outcome(before, after)
    assert moved == {(3, 0): 3}
    w = pin_warnings("bf16 weights", moved, {3: 1.0}, registered=True)
    assert len(w) == 1 and "3 page(s) node 3 -> 0" in w[0] and "ZONE_MOVABLE" in w[0] and "--no-movable" in w[0]
    assert pin_warnings("x", {}, {3: 1.0}, registered=False)[0].startswith("x is on ZONE_MOVABLE memory (node 3 100%)")
    assert pin_warnings("x", {}, {}, registered=True) == []


def test_live_context_reads_this_node():
    ctx = live_context()
    assert ctx.here in {n.id for n in ctx.topology.nodes}
    assert ctx.mems_allowed == memsys.mems_allowed()


def test_apply_gives_each_planned_item_its_region(torch):
    from numatune.placement import apply, latency_first

    items = [("m", 4_000_000, 1), ("v", 4_000_000, 1), ("w16", 2_000_002, 2)]  # sizes off page multiples
    plan = latency_first(items, 64 * MIB, dram_node=0)
    pm = apply(plan)
    assert pm.arena.report.check.ok
    assert pm.regions == {"m": (0, 4_000_000), "v": (4_001_792, 4_000_000), "w16": (8_003_584, 2_000_002)}
    w = pm.tensor("w16", (1_000_001,), torch.bfloat16)
    assert w.data_ptr() == pm.arena.addr + 8_003_584 and dict(where(w)) == {0: 489}
    with pytest.raises(InputError, match="the plan gave it 4000000"):
        pm.tensor("m", (1_000_001,), torch.float32)
    with pytest.raises(InputError, match="no item 'x'"):
        pm.tensor("x")


def test_arena_with_transparent_huge_pages_and_closed_arena():
    a = Arena(4 * MIB, 0, thp=True)
    assert a.report.check.ok and sum(a.report.check.found.values()) == 4 * MIB // PS
    a.close()
    a.close()  # idempotent
    with pytest.raises(InputError, match="closed"):
        a.verify()
    with pytest.raises(InputError, match="positive number of bytes"):
        Arena(0, 0)


def test_zoneinfo_of_a_real_cxl_guest_says_the_cxl_node_is_movable():
    """Recorded in the cxl VM (tests/placement/data/README.md): the daxctl-onlined CXL node 3 is all
    ZONE_MOVABLE, so pinning a buffer placed there would migrate it; DRAM nodes 0-2 are not."""
    from pathlib import Path

    from numatune.placement.pinning import movable_nodes
    from numatune.readers.zones import movable_share, parse_zoneinfo

    text = (Path(__file__).parent / "data" / "zoneinfo-vm-cxl-6.12.txt").read_text()
    zones = parse_zoneinfo(text)
    assert zones[3] == {"DMA": 0, "DMA32": 0, "Normal": 0, "Movable": 229376, "Device": 0}
    assert zones[2]["Normal"] == 257244 and zones[0]["DMA32"] == 244218
    assert movable_share(zones, 3) == 1.0 and movable_share(zones, 0) == 0.0 and movable_share(zones, 9) is None
    assert movable_nodes([0, 1, 2, 3], zones) == {3: 1.0}
    # a buffer half on DRAM node 1, half on CXL node 3: pinning moves the CXL half to node 1
    before, after = [1] * 4 + [3] * 4, [1] * 8
    moved = pin_outcome(before, after)
    assert moved == {(3, 1): 4}
    (w,) = pin_warnings("bf16 weights", moved, movable_nodes([1, 3], zones), registered=True)
    assert "4 page(s) node 3 -> 1" in w and "node(s) 3 are ZONE_MOVABLE" in w


def test_zones_through_host_on_a_saved_root_without_zoneinfo():
    from numatune.readers.zones import read_zones
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    assert read_zones(Host.open(fixture_root("vm-two-socket"))) == {}
