"""numatune.system.memsys: nodemasks, syscall numbers, errno mapping, and the real calls on this kernel.

The live tests use node 0 (every NUMA kernel has it) and a node id no machine here has (63) for the
refusals; multi-node moves are proven in the VM stage (tests/vm).
"""

from __future__ import annotations

import errno
import mmap
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from numatune.errors import ExitCode, NumatuneError
from numatune.system import memsys

PS = memsys.page_size()
ABSENT = 63  # a node id that is not online on the test machines (and below MAX_NUMNODES)


def _online_nodes() -> set[int]:
    text = Path("/sys/devices/system/node/online").read_text().strip()
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _region(pages: int):
    """An anonymous private mapping and its address."""
    import ctypes

    m = mmap.mmap(-1, pages * PS, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return m, addr


# -- pure ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes", "bits", "words", "maxnode"),
    [
        ((), None, [0], 65),
        ((0,), None, [1], 65),
        ((0, 2, 63), None, [1 | 4 | (1 << 63)], 65),
        ((64,), None, [0, 1], 129),
        ((1, 130), None, [2, 0, 4], 193),
        ((3,), 1024, [8] + [0] * 15, 1025),
    ],
)
def test_nodemask_words(nodes, bits, words, maxnode):
    assert memsys.nodemask_words(nodes, bits) == (words, maxnode)
    assert memsys.nodes_of_words(words) == frozenset(nodes)


def test_nodemask_refuses_negative_and_too_small():
    with pytest.raises(NumatuneError, match="invalid NUMA node -1"):
        memsys.nodemask_words([-1])
    with pytest.raises(NumatuneError, match="64-bit nodemask cannot hold node 64"):
        memsys.nodemask_words([64], 64)


def test_syscall_numbers_match_the_kernel_headers_here():
    """x86_64's numbers against asm/unistd_64.h where the headers are installed (they are on CI)."""
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        header = Path("/usr/include/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no x86_64 kernel headers on this machine to compare against")
    found = dict(re.findall(r"#define __NR_(\w+) (\d+)", header.read_text()))
    for call, nr in memsys.SYSCALLS["x86_64"].items():
        assert int(found[call]) == nr, call
    assert memsys.syscall_numbers("aarch64")["move_pages"] == 239
    assert memsys.syscall_numbers("sparc") is None
    assert not memsys.supported("sparc")


def test_errno_picks_the_exit_code_and_hint():
    e = memsys.SyscallFailed("mbind", errno.EINVAL, "0x1000+4096, bind, nodes 63")
    assert e.exit_code == ExitCode.INPUT and e.errno == errno.EINVAL and e.call == "mbind"
    assert e.message == "mbind(0x1000+4096, bind, nodes 63) failed: Invalid argument (EINVAL)"
    assert "cpuset.mems" in e.hint
    assert memsys.SyscallFailed("move_pages", errno.EPERM).exit_code == ExitCode.PERMISSION
    assert memsys.SyscallFailed("move_pages", errno.ESRCH).exit_code == ExitCode.NO_PROCESS
    assert memsys.SyscallFailed("mbind", errno.EIO).exit_code == ExitCode.PARTIAL
    assert "max_map_count" in memsys.SyscallFailed("mbind", errno.ENOMEM).hint
    nosys = memsys._fail("mbind", errno.ENOSYS, "")
    assert isinstance(nosys, memsys.NoNumaSyscalls) and nosys.exit_code == ExitCode.UNSUPPORTED


def test_unknown_architecture_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(memsys, "syscall_numbers", lambda machine=None: None)
    with pytest.raises(memsys.NoNumaSyscalls, match="no get_mempolicy syscall number known") as ei:
        memsys.get_mempolicy()
    assert ei.value.exit_code == ExitCode.UNSUPPORTED


def test_mode_names_and_status_words():
    assert memsys.mode_name(memsys.MPOL_BIND) == "bind"
    assert memsys.mode_name(memsys.MPOL_INTERLEAVE | memsys.MPOL_F_STATIC_NODES) == "interleave|static"
    assert memsys.status_reason(2) == "node 2"
    assert memsys.status_reason(-errno.ENOENT).startswith("not present")
    assert memsys.status_reason(memsys.STATUS_UNSET).startswith("not reported")
    assert memsys.count_status([0, 0, -2, memsys.STATUS_UNSET]) == {0: 2, -2: 1, memsys.STATUS_UNSET: 1}


def test_import_is_light():
    """memsys must not pull click, rich or ctypes into a process that only imports it."""
    from tests.conftest import imports_of

    code = imports_of("import numatune.system.memsys", ("click", "rich", "ctypes"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- live, on this kernel ------------------------------------------------------------------------------------
def test_mems_allowed_is_what_proc_status_says():
    status = Path("/proc/self/status").read_text()
    listed = re.search(r"^Mems_allowed_list:\s*(\S+)", status, re.M).group(1)
    want: set[int] = set()
    for part in listed.split(","):
        a, _, b = part.partition("-")
        want.update(range(int(a), int(b or a) + 1))
    assert memsys.mems_allowed() == frozenset(want)


def test_mbind_then_first_touch_lands_and_reads_back():
    m, addr = _region(4)
    try:
        memsys.mbind(addr, 4 * PS, memsys.MPOL_BIND, [0])
        assert memsys.get_mempolicy(addr) == (memsys.MPOL_BIND, frozenset({0}))
        pages = memsys.page_addresses(addr, 4 * PS)
        status, rc = memsys.move_pages(pages)
        assert rc == 0 and status == [-errno.ENOENT] * 4  # nothing touched yet: the query must not fault
        m[0:1] = b"x"
        m[2 * PS : 2 * PS + 1] = b"y"
        status, _ = memsys.move_pages(pages)
        assert status == [0, -errno.ENOENT, 0, -errno.ENOENT]
        # MPOL_F_NODE | MPOL_F_ADDR: the node of the page at addr
        assert memsys.get_mempolicy(addr, flags=memsys.MPOL_F_NODE)[0] == 0
    finally:
        m.close()
    status, _ = memsys.move_pages([addr])
    assert status == [-errno.EFAULT]  # unmapped now


def test_move_pages_to_node_0_and_the_partly_failed_batch():
    m, addr = _region(2)
    try:
        m[:] = b"z" * (2 * PS)
        pages = memsys.page_addresses(addr, 2 * PS)
        status, rc = memsys.move_pages(pages, [0, 0], flags=memsys.MPOL_MF_MOVE)
        assert (status, rc) == ([0, 0], 0)
        assert ABSENT not in _online_nodes()
        with pytest.raises(memsys.SyscallFailed) as ei:
            memsys.move_pages(pages, [0, ABSENT], flags=memsys.MPOL_MF_MOVE)
        assert ei.value.errno == errno.ENODEV and "not online" in ei.value.hint
        # the page the kernel did not reach keeps the sentinel instead of reading as node 0
        assert ei.value.status[1] == memsys.STATUS_UNSET
    finally:
        m.close()


def test_mbind_on_an_absent_node_is_einval_with_the_cpuset_hint():
    m, addr = _region(1)
    try:
        with pytest.raises(memsys.SyscallFailed) as ei:
            memsys.mbind(addr, PS, memsys.MPOL_BIND, [ABSENT])
        assert ei.value.errno == errno.EINVAL and ei.value.exit_code == ExitCode.INPUT
        assert f"nodes {ABSENT}" in ei.value.message and "cpuset.mems" in ei.value.hint
        with pytest.raises(NumatuneError, match="not page aligned"):
            memsys.mbind(addr + 1, PS, memsys.MPOL_BIND, [0])
    finally:
        m.close()


def test_move_pages_of_a_vanished_process_is_process_gone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(memsys.SyscallFailed) as ei:
        memsys.move_pages([PS], pid=proc.pid)
    assert ei.value.errno == errno.ESRCH and ei.value.exit_code == ExitCode.NO_PROCESS


def test_set_mempolicy_is_per_thread_and_bind_goes_through_memsys():
    from numatune.live import bind

    seen: list = []

    def worker():
        bind.set_mempolicy(memsys.MPOL_BIND, [0])
        seen.append(memsys.get_mempolicy())
        memsys.set_mempolicy(memsys.MPOL_DEFAULT)
        seen.append(memsys.get_mempolicy())

    before = memsys.get_mempolicy()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [(memsys.MPOL_BIND, frozenset({0})), (memsys.MPOL_DEFAULT, frozenset())]
    assert memsys.get_mempolicy() == before  # this thread's policy untouched
    with pytest.raises(memsys.SyscallFailed, match=r"set_mempolicy\(bind, nodes 63\)"):
        memsys.set_mempolicy(memsys.MPOL_BIND, [ABSENT])


def test_migrate_pages_of_self_within_node_0():
    assert memsys.migrate_pages(0, [0], [0]) == 0
