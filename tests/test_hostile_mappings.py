"""Unbounded mappings (issue 47): a process with 200,000 shared anonymous mappings (`/dev/zero (deleted)`, what the
CUDA host allocator's chunks look like in numa_maps) cost `audit` 343 MB and `audit --mappings` 737 MB and 9-12 s,
keeping every mapping as an object and printing every one. Now the chunks are summed as they are read (the
MAX_CHUNKS largest kept) and `--mappings` keeps the MAX_LISTED_MAPPINGS largest, the rest summed with their count
said: each form answers within 10 s and 256 MiB, and the parse grows linearly.

The process is hand-made in a copy of a fixture tree (tests/conftest.write_process), as the other audit tests make
theirs; its numa_maps (17.8 MB, under the 32 MiB read bound) is written by the test, nothing large is shipped. It
maps /dev/nvidia-uvm, so it holds a CUDA context and its shared anonymous memory is likely pinned.
"""

from __future__ import annotations

import json

import pytest

from numatune.model.process import MAX_CHUNKS, MAX_LISTED_MAPPINGS
from tests.conftest import fixture_copy, write_process
from tests.limits import growth, run_limited

SECONDS, MIB = 10, 256
N = 200_000
PID = 4300
UVM = "ffffc0000000 default file=/dev/nvidia-uvm dirty=64 N0=64 kernelpagesize_kB=4\n"


def chunks(n: int) -> str:
    """`n` shared anonymous mappings of 2 MiB each (512 resident pages on node 0), 2 MiB apart, then a CUDA context."""
    return "".join(f"7f{i * 2:05x}00000 default file=/dev/zero\\040(deleted) dirty=512 N0=512 kernelpagesize_kB=4\n"
                   for i in range(n)) + UVM


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    root = fixture_copy("dev-1node-x86", tmp_path_factory.mktemp("chunks"))
    write_process(root, PID, "LOCAL_RANK=0\x00", chunks(N))
    return str(root)


def audit(root: str, *args: str):
    r = run_limited("--root", root, "audit", str(PID), *args, seconds=SECONDS, mib=MIB)
    assert r.within(SECONDS, MIB), (args, r.returncode, r.wall, r.peak_mib, r.stderr[-300:])
    assert r.returncode == 0 and "Traceback" not in r.stderr, (args, r.returncode, r.stderr[-500:])
    return r


def test_200000_chunks_are_summed_not_kept(many):
    """audit and audit --json: every chunk counted and summed (200,000, 390.6 GiB on node 0), the 256 largest listed
    in the JSON, eight in the text with the rest summed in one line."""
    r = audit(many, "--json")
    (p,) = json.loads(r.stdout)["processes"]
    pinned = p["pinned_host"]
    assert pinned["chunk_count"] == N and pinned["bytes_by_node"] == {"0": N * (2 << 20)}
    assert len(pinned["chunks"]) == MAX_CHUNKS
    assert [c["start"] for c in pinned["chunks"][:2]] == ["7f0000000000", "7f0000200000"]  # equals: address order
    assert p["mappings"] == N + 1
    text = audit(many).stdout
    flat = " ".join(text.split())
    assert f"likely pinned host memory: 390.6 GiB on node 0 in {N} chunk(s)" in flat
    assert f"in {N - 8} smaller chunk(s) (the {MAX_CHUNKS} largest in --json)" in flat
    assert text.count(" chunk at ") == 8


def test_200000_mappings_are_listed_up_to_the_cap_with_the_rest_counted(many):
    """audit --mappings --min-size 0: the 16,384 largest mappings one by one, the other 183,617 summed in one line
    that says so; the same in the JSON (`limit`, `smaller.not_kept`)."""
    r = audit(many, "--mappings", "--min-size", "0", "--json")
    (p,) = json.loads(r.stdout)["processes"]
    placement = p["mapping_placement"]
    assert placement["limit"] == MAX_LISTED_MAPPINGS and len(placement["mappings"]) == MAX_LISTED_MAPPINGS
    rest = N + 1 - MAX_LISTED_MAPPINGS
    assert placement["smaller"]["mappings"] == placement["smaller"]["not_kept"] == rest
    listed = sum(m["bytes"] for m in placement["mappings"])
    assert listed + placement["smaller"]["bytes"] == p["memory_total"] == N * (2 << 20) + 64 * 4096
    text = " ".join(audit(many, "--mappings", "--min-size", "0").stdout.split())
    assert f"{rest} smaller mappings ({rest} past the {MAX_LISTED_MAPPINGS} largest, summed as read)" in text


def test_mappings_under_the_cap_are_all_listed_as_before():
    """Under the cap nothing changes: every mapping listed, `not_kept` 0, file order kept for the other readers."""
    from numatune.readers.procs import parse_numa_maps

    text = chunks(300)
    mem = parse_numa_maps(text, per_mapping=True, keep=MAX_LISTED_MAPPINGS)
    assert len(mem.by_mapping) == 301 and mem.mappings_beyond.mappings == 0
    every = parse_numa_maps(text, per_mapping=True)  # binding's own-mapping scan: all, in file order, no cap
    assert [m.start for m in every.by_mapping] == sorted(m.start for m in mem.by_mapping)
    assert every.mappings_beyond is None


def test_chunks_and_capped_mappings_grow_linearly():
    """The parse with every chunk summed and the capped listing: four times the mappings, about four times the
    time (a quadratic walk reads 16)."""
    from numatune.readers.procs import parse_numa_maps

    assert growth(chunks, lambda text: parse_numa_maps(text, per_mapping=True, keep=MAX_LISTED_MAPPINGS), 10_000) < 8
