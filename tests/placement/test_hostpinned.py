"""numatune.pinned_host_memory(): the process's pinned host ranges from the CUDA runtime, on this kernel.

No GPU here: the CUDA driver is replaced by a `query` over real mappings of this process (a shared anonymous
mmap as cudaHostAlloc makes, a private one as cudaHostRegister pins), and, where a C compiler is installed,
by a stand-in libcuda.so.1 built in the test (it answers cuPointerGetAttribute from a table) so that the
ctypes path runs too. The real driver is exercised by scripts/gpu-check on a GPU node.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import shutil
import subprocess
import sys
import textwrap

import pytest

import numatune
from numatune.errors import Unsupported
from numatune.placement.hostpinned import SHARED_ANON, pinned_host_memory

MiB = 1 << 20


def address(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def touched(size: int, flags: int = mmap.MAP_SHARED) -> mmap.mmap:
    m = mmap.mmap(-1, size, flags=flags)
    for off in range(0, size, 4096):
        m[off] = 1
    return m


def table(*ranges: tuple[int, int]):
    """A query answering as the CUDA driver does for pinned host ranges: the range holding an address."""
    return lambda addr: next(((s, n) for s, n in ranges if s <= addr < s + n), None)


def test_a_shared_anonymous_buffer_is_host_allocated_with_its_nodes():
    buf = touched(4 * MiB)  # mmap(MAP_SHARED|MAP_ANONYMOUS): /proc/self/maps says /dev/zero (deleted), rw-s
    start = address(buf)
    ranges = pinned_host_memory(query=table((start, 4 * MiB)))
    (r,) = [r for r in ranges if r.start == start]
    assert r.size == 4 * MiB and r.kind == "host-allocated" and r.mapping == SHARED_ANON
    assert r.pages.present == 1024 and r.nodes and r.pages.absent == 0
    assert all(isinstance(n, int) and n >= 0 for n in r.nodes)
    assert pinned_host_memory(query=table()) == []  # nothing pinned: nothing listed
    buf.close()


def vma_of(addr: int) -> tuple[int, int]:
    """(start, end) of the /proc/self/maps line holding `addr` (the kernel merges neighbouring anonymous maps)."""
    from numatune.readers.procs import parse_maps

    with open("/proc/self/maps") as fh:
        return next((lo, hi) for lo, hi, _, _ in parse_maps(fh.read()) if lo <= addr < hi)


def test_registered_memory_is_found_at_a_mapping_s_start_or_at_an_address_given():
    whole = touched(2 * MiB, mmap.MAP_PRIVATE)  # cudaHostRegister of a whole mapping (an Arena, an mmap)
    lo, hi = vma_of(address(whole))
    ranges = {r.start: r for r in pinned_host_memory(query=table((lo, hi - lo)))}
    assert ranges[lo].kind == "registered" and ranges[lo].mapping == "" and ranges[lo].size == hi - lo
    assert ranges[lo].pages.present >= 512  # the 2 MiB touched here, and whatever else the kernel merged in
    part = touched(8 * MiB, mmap.MAP_PRIVATE)
    b = address(part) + 2 * MiB  # not a mapping's start
    assert b not in {r.start for r in pinned_host_memory(query=table((b, MiB)))}  # not asked about
    given = {r.start: r for r in pinned_host_memory(b + 4096, query=table((b, MiB)))}
    assert given[b].size == MiB and given[b].pages.present == 256 and given[b].kind == "registered"
    whole.close()
    part.close()


def test_ranges_are_followed_to_the_next_in_one_mapping():
    buf = touched(4 * MiB)
    s = address(buf)
    got = [(r.start - s, r.size) for r in pinned_host_memory(query=table((s, MiB), (s + MiB, 3 * MiB)))
           if s <= r.start < s + 4 * MiB]
    assert got == [(0, MiB), (MiB, 3 * MiB)]
    buf.close()


def test_without_cuda_the_answer_is_no_cuda_runtime_in_a_fresh_process():
    code = ("import numatune\ntry:\n    numatune.pinned_host_memory()\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == ("Unsupported no CUDA runtime in this process: libcuda.so is not loaded: CUDA was never "
                           "used in this process")


def test_with_torch_s_cpu_build_the_answer_names_it():
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch: scripts/gpu-check covers it on a GPU node")
    with pytest.raises(Unsupported, match=r"^no CUDA runtime in this process: torch .* is built without CUDA"):
        numatune.pinned_host_memory()
    assert numatune.PinnedRange is numatune.placement.hostpinned.PinnedRange


FAKE_LIBCUDA = r"""
#include <stdint.h>
#include <stddef.h>
static uint64_t s0, n0; static int init, managed;
void fake_set(uint64_t s, uint64_t n, int i, int m) { s0 = s; n0 = n; init = i; managed = m; }
int cuPointerGetAttribute(void *data, int attr, uint64_t ptr) {
    if (!init) return 3;                        /* CUDA_ERROR_NOT_INITIALIZED */
    if (ptr < s0 || ptr >= s0 + n0) return 1;   /* CUDA_ERROR_INVALID_VALUE: pageable memory */
    switch (attr) {
    case 2: *(unsigned *)data = 1; return 0;    /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CU_MEMORYTYPE_HOST */
    case 8: *(int *)data = managed; return 0;   /* IS_MANAGED */
    case 11: *(uint64_t *)data = s0; return 0;  /* RANGE_START_ADDR */
    case 12: *(size_t *)data = n0; return 0;    /* RANGE_SIZE */
    }
    return 1;
}
"""

USE = textwrap.dedent("""\
    import ctypes, json, mmap, sys
    lib = ctypes.CDLL(sys.argv[1])
    import numatune
    m = mmap.mmap(-1, 3 << 20)
    m[::4096] = b"x" * (3 << 8)
    start = ctypes.addressof(ctypes.c_char.from_buffer(m))
    out = {}
    for name, init, managed in (("uninitialised", 0, 0), ("pinned", 1, 0), ("managed", 1, 1)):
        lib.fake_set(ctypes.c_uint64(start), ctypes.c_uint64(3 << 20), init, managed)
        out[name] = [(r.start - start, r.size, r.kind, r.pages.present) for r in numatune.pinned_host_memory()]
    print(json.dumps(out))
""")


def test_the_ctypes_path_against_a_stand_in_libcuda(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda.so.1")
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    lib = tmp_path / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(tmp_path / "fake.c")], check=True)
    run = subprocess.run([sys.executable, "-c", USE, str(lib)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["uninitialised"] == []  # loaded but never initialised: it pinned nothing
    assert out["pinned"] == [[0, 3 << 20, "host-allocated", 768]]
    assert out["managed"] == []  # managed memory migrates: not pinned


# -- chunks: the outside view (audit) reconciled with the inside one -------------------------------------------------
def test_chunks_are_every_shared_anonymous_mapping_with_the_allocations_the_driver_reports_in_it():
    """Four real shared anonymous mappings of this process, as audit would count them from outside: the driver (a
    query) reports two allocations in the first, one in the second, none in the other two (plain mmap(MAP_SHARED)):
    those two are named as not pinned. Each range knows its chunk."""
    bufs = [touched(2 * MiB) for _ in range(4)]
    starts = [address(b) for b in bufs]
    a, b = starts[0], starts[1]
    query = table((a, MiB), (a + MiB, 4096), (b, 2 * MiB))
    chunks = {c.start: c for c in numatune.pinned_host_chunks(query=query)}
    assert set(starts) <= set(chunks)  # every one, pinned or not
    mine = [chunks[s] for s in starts]
    assert [len(c.allocations) for c in mine] == [2, 1, 0, 0] and [c.pinned for c in mine] == [True, True, False, False]
    assert [c.size for c in mine] == [2 * MiB] * 4 and all(c.pages.present == 512 for c in mine)
    assert [(r.start - a, r.size, r.chunk) for r in mine[0].allocations] == [(0, MiB, a), (MiB, 4096, a)]
    assert mine[0].allocated == MiB + 4096
    ranges = {r.start: r for r in numatune.pinned_host_memory(query=query)}
    assert ranges[a].chunk == a and ranges[b].chunk == b and ranges[b].kind == "host-allocated"
    for buf in bufs:
        buf.close()


def test_the_real_job_s_inside_view_reconciles_with_audit_s_280_mib():
    """The rank of fixtures/h100-gpucheck-2026-11-28: audit counted 280.3 MiB in 10 shared anonymous mappings; inside,
    pinned_host_memory() found 260 MiB (tests/data/gpu-check/run-2026-11-28/train-ready.json: the driver's ranges).
    Replayed chunk by chunk (the mappings from the capture's numa_maps, each fully resident as its `dirty` count says;
    the driver's answers from the inside record): four chunks, 262 MiB, serve the ten allocations of 260 MiB, and six
    chunks, 18.3 MiB, are shared anonymous memory the driver never reported: the difference named."""
    from tests.conftest import PROJECT, fixture_root

    numa_maps = (fixture_root("h100-gpucheck-2026-11-28") / "proc/585/numa_maps").read_text().splitlines()
    maps = []
    for line in numa_maps:
        if "file=/dev/zero" in line:
            start = int(line.split()[0], 16)
            pages = int(next(t for t in line.split() if t.startswith("dirty="))[6:])
            maps.append(f"{start:x}-{start + pages * 4096:x} rw-s 00000000 00:01 1234 /dev/zero (deleted)")
    inside = json.loads((PROJECT / "tests/data/gpu-check/run-2026-11-28/train-ready.json").read_text())
    ranges = [(start, size) for start, size, *_ in inside["pinned_host_memory"]["result"]]
    assert sum(size for _, size in ranges) == (260 << 20) + 5 * 2048
    chunks = numatune.pinned_host_chunks(query=table(*ranges), maps_text="\n".join(maps))
    assert len(chunks) == 10 and sum(c.size for c in chunks) == (65536 + 2113) * 4096 + 8 * (2 << 20)
    assert round(sum(c.size for c in chunks) / MiB, 1) == 280.3  # what audit counted
    pinned = [c for c in chunks if c.pinned]
    assert [f"{c.start:x}" for c in pinned] == ["7f556e000000", "7f55b3000000", "7f55b3200000", "7f55b3400000"]
    assert sum(c.size for c in pinned) == 262 << 20 and sum(len(c.allocations) for c in pinned) == 10
    assert {r.start for c in pinned for r in c.allocations} == {s for s, _ in ranges}
    text = numatune.describe_chunks(chunks)
    assert text == ("10 shared anonymous chunk(s), 280.3 MiB (what audit counts from outside as likely pinned): 4 "
                    "pinned by the CUDA driver, 262.0 MiB, serving 10 allocation(s) of 260.0 MiB; 6 the driver "
                    "reports nothing in, 18.3 MiB: shared anonymous memory that is not pinned (7f5533800000, "
                    "7f557e000000, 7f559e800000, 7f559ea00000, 7f559f800000, 7f57c0b74000)")


def test_chunks_of_a_process_that_never_initialised_cuda_have_no_allocations():
    buf = touched(2 * MiB)

    def uninitialised(addr: int):
        from numatune.placement.hostpinned import _NotInitialized

        raise _NotInitialized

    chunks = {c.start: c for c in numatune.pinned_host_chunks(query=uninitialised)}
    assert chunks[address(buf)].allocations == () and not chunks[address(buf)].pinned
    buf.close()
