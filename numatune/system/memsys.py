"""The Linux NUMA memory-policy system calls, in one place: set_mempolicy, get_mempolicy, mbind,
move_pages and migrate_pages.

glibc wraps none of them (libnuma does, but is not always installed and adds nothing the raw calls
lack), so they are called by number through ctypes. Importable without click or rich, and cheap to
import: ctypes is loaded on the first call, not at import (`launch` counts milliseconds).

Errors become one `SyscallFailed` (a NumatuneError) that keeps the call, the errno and an exit code
chosen from the errno, so callers can add what only they know (which cgroup, which tensor).

Kernel conventions followed here (mm/mempolicy.c, mm/migrate.c):
- a nodemask is an array of unsigned longs and `maxnode` is its number of bits *plus one*
  (get_nodes() decrements it first; libnuma passes the same);
- get_mempolicy needs maxnode >= nr_node_ids, so it is asked with MASK_BITS (the largest
  MAX_NUMNODES a kernel is built with) and retried larger on EINVAL;
- move_pages writes one status per page, a node id or -errno, but a batch that fails part-way
  leaves the rest unwritten: the array is filled with STATUS_UNSET first, and that value reads
  "not reported" rather than node 0.
"""

from __future__ import annotations

import errno as _errno
import os
from collections.abc import Iterable, Sequence

from numatune.errors import ExitCode, NumatuneError

# uapi/linux/mempolicy.h: numatune.mempolicy, re-exported here for the callers of these syscalls
from numatune.mempolicy import (  # noqa: F401 - re-exported
    MODE_NAMES,
    MPOL_BIND,
    MPOL_DEFAULT,
    MPOL_F_ADDR,
    MPOL_F_MEMS_ALLOWED,
    MPOL_F_NODE,
    MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES,
    MPOL_F_STATIC_NODES,
    MPOL_INTERLEAVE,
    MPOL_LOCAL,
    MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL,
    MPOL_MF_STRICT,
    MPOL_MODE_FLAGS,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)

# The largest MAX_NUMNODES a kernel is built with (NODES_SHIFT 10): masks of this size fit every kernel.
MASK_BITS = 1024
# move_pages status for "the kernel wrote nothing here" (it writes node ids >= 0 or small -errno values).
STATUS_UNSET = -(2**31)

# -- syscall numbers (arch/*/tbl and include/uapi/asm-generic/unistd.h) ------------------------------------
# machine (os.uname().machine) -> {call: number}
_GENERIC = {"mbind": 235, "get_mempolicy": 236, "set_mempolicy": 237, "migrate_pages": 238, "move_pages": 239}
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {"mbind": 237, "set_mempolicy": 238, "get_mempolicy": 239, "migrate_pages": 256, "move_pages": 279},
    "aarch64": _GENERIC,
    "arm64": _GENERIC,
    "riscv64": _GENERIC,
    "loongarch64": _GENERIC,
    "ppc64le": {"migrate_pages": 258, "mbind": 259, "get_mempolicy": 260, "set_mempolicy": 261, "move_pages": 301},
    "ppc64": {"migrate_pages": 258, "mbind": 259, "get_mempolicy": 260, "set_mempolicy": 261, "move_pages": 301},
    "s390x": {"mbind": 268, "get_mempolicy": 269, "set_mempolicy": 270, "migrate_pages": 287, "move_pages": 310},
    "i686": {"mbind": 274, "get_mempolicy": 275, "set_mempolicy": 276, "migrate_pages": 294, "move_pages": 317},
    "i386": {"mbind": 274, "get_mempolicy": 275, "set_mempolicy": 276, "migrate_pages": 294, "move_pages": 317},
    "armv7l": {"mbind": 319, "get_mempolicy": 320, "set_mempolicy": 321, "move_pages": 344, "migrate_pages": 400},
}

# errno -> exit code; anything else is INPUT (a request the kernel would not take as given)
_EXIT_BY_ERRNO = {
    _errno.EPERM: ExitCode.PERMISSION,
    _errno.EACCES: ExitCode.PERMISSION,
    _errno.ESRCH: ExitCode.NO_PROCESS,
    _errno.ENOSYS: ExitCode.UNSUPPORTED,
    _errno.EOPNOTSUPP: ExitCode.UNSUPPORTED,
    _errno.ENOMEM: ExitCode.UNSUPPORTED,
    _errno.EIO: ExitCode.PARTIAL,
    _errno.EBUSY: ExitCode.PARTIAL,
}

# What each errno means for these calls (the man pages' lists, in words a user can act on).
_HINTS = {
    ("mbind", _errno.EINVAL): "a node outside this process's cpuset.mems, an offline node, or a bad mode/range",
    ("mbind", _errno.EIO): "MPOL_MF_STRICT: some pages are not on the asked nodes and could not be moved",
    ("mbind", _errno.ENOMEM): "no memory for the policy, or vm.max_map_count reached (each mbind on a sub-range "
    "splits a mapping: put many buffers in one arena)",
    ("mbind", _errno.EPERM): "moving pages shared with other processes (MPOL_MF_MOVE_ALL) needs CAP_SYS_NICE",
    ("mbind", _errno.EFAULT): "part of the range is not mapped",
    ("set_mempolicy", _errno.EINVAL): "the kernel may not support this policy, or the nodes are outside the "
    "cgroup's cpuset.mems",
    ("move_pages", _errno.EPERM): "moving another process's pages needs the right to ptrace it (same user), "
    "and MPOL_MF_MOVE_ALL needs CAP_SYS_NICE",
    ("move_pages", _errno.ENODEV): "a target node is not online",
    ("move_pages", _errno.EACCES): "a target node is outside the process's cpuset.mems",
    ("move_pages", _errno.ESRCH): "the process exited",
    ("migrate_pages", _errno.EPERM): "moving another user's process needs CAP_SYS_NICE",
}


class SyscallFailed(NumatuneError):
    """A memory-policy system call returned an error: `call`, `errno`, and an exit code from the errno."""

    def __init__(self, call: str, err: int, detail: str = "", *, hint: str | None = None) -> None:
        what = f"{call}({detail})" if detail else call
        name = _errno.errorcode.get(err, str(err))
        super().__init__(f"{what} failed: {os.strerror(err)} ({name})", hint=hint or _HINTS.get((call, err)))
        self.call = call
        self.errno = err
        self.status: list[int] | None = None  # move_pages: per-page status as far as the kernel wrote it
        self.exit_code = _EXIT_BY_ERRNO.get(err, ExitCode.INPUT)  # type: ignore[misc]


class NoNumaSyscalls(NumatuneError):
    """No syscall numbers for this architecture, or a kernel built without NUMA (ENOSYS)."""

    exit_code = ExitCode.UNSUPPORTED  # type: ignore[assignment]


# -- helpers ----------------------------------------------------------------------------------------------
def syscall_numbers(machine: str | None = None) -> dict[str, int] | None:
    """The call numbers for `machine` (this one when None), or None when numatune does not know them."""
    return SYSCALLS.get(machine if machine is not None else os.uname().machine)


def supported(machine: str | None = None) -> bool:
    """Whether this architecture's numbers are known (not whether the kernel has NUMA: see mems_allowed)."""
    return syscall_numbers(machine) is not None


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def mode_name(mode: int) -> str:
    """'bind', 'interleave|static' ... for a mode with flags (as get_mempolicy returns it)."""
    base = MODE_NAMES.get(mode & ~MPOL_MODE_FLAGS, f"mode {mode & ~MPOL_MODE_FLAGS}")
    flags = [n for f, n in ((MPOL_F_STATIC_NODES, "static"), (MPOL_F_RELATIVE_NODES, "relative"),
                            (MPOL_F_NUMA_BALANCING, "balancing")) if mode & f]
    return "|".join([base, *flags])


def nodemask_words(nodes: Iterable[int], bits: int | None = None) -> tuple[list[int], int]:
    """(unsigned-long words, maxnode) for a node set: bit n of word n//64; maxnode is bits + 1.

    `bits` defaults to the smallest multiple of 64 holding the highest node (at least 64).
    """
    nodes = sorted(set(nodes))
    if nodes and nodes[0] < 0:
        raise NumatuneError(f"invalid NUMA node {nodes[0]}: node ids are >= 0")
    need = (nodes[-1] + 1) if nodes else 1
    if bits is None:
        bits = max(64, -(-need // 64) * 64)
    elif bits < need:
        raise NumatuneError(f"a {bits}-bit nodemask cannot hold node {nodes[-1]}")
    words = [0] * (-(-bits // 64))
    for n in nodes:
        words[n // 64] |= 1 << (n % 64)
    return words, len(words) * 64 + 1


def nodes_of_words(words: Iterable[int]) -> frozenset[int]:
    """The node set of a nodemask (the inverse of nodemask_words)."""
    out = set()
    for i, w in enumerate(words):
        w = int(w) & ((1 << 64) - 1)
        while w:
            low = w & -w
            out.add(i * 64 + low.bit_length() - 1)
            w ^= low
    return frozenset(out)


def _ctypes():
    import ctypes

    return ctypes


_LIBC = None


def _call(name: str, *args) -> int:
    """syscall(number, *args); returns the result or raises SyscallFailed with the errno."""
    global _LIBC
    ctypes = _ctypes()
    numbers = syscall_numbers()
    if numbers is None or name not in numbers:
        raise NoNumaSyscalls(f"no {name} syscall number known for {os.uname().machine}",
                             hint="numatune knows x86_64, aarch64, ppc64(le), s390x, riscv64, loongarch64, "
                                  "i386/i686 and armv7l")
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    ctypes.set_errno(0)
    rc = _LIBC.syscall(ctypes.c_long(numbers[name]), *args)
    if rc < 0:
        raise _OSErr(ctypes.get_errno())
    return int(rc)


class _OSErr(Exception):
    def __init__(self, err: int) -> None:
        self.errno = err


def _fail(call: str, err: int, detail: str) -> NumatuneError:
    if err == _errno.ENOSYS:
        return NoNumaSyscalls(f"{call}: the kernel has no NUMA memory policy support (ENOSYS)",
                              hint="a kernel built without CONFIG_NUMA, or a sandbox that filters the call")
    return SyscallFailed(call, err, detail)


def _fmt_nodes(nodes: Iterable[int]) -> str:
    from numatune.cpulist import format_cpulist

    return format_cpulist(sorted(set(nodes))) or "none"


def _mask(nodes: Iterable[int], bits: int | None = None):
    ctypes = _ctypes()
    words, maxnode = nodemask_words(nodes, bits)
    arr = (ctypes.c_ulong * len(words))(*words)
    return arr, maxnode


# -- the calls --------------------------------------------------------------------------------------------
def set_mempolicy(mode: int, nodes: Sequence[int] | Iterable[int] = (), flags: int = 0) -> None:
    """set_mempolicy(2) for the calling thread (inherited by threads it creates later and by exec)."""
    ctypes = _ctypes()
    nodes = sorted(set(nodes))
    if nodes:
        mask, maxnode = _mask(nodes)
        args = (mask, ctypes.c_ulong(maxnode))
    else:
        args = (None, ctypes.c_ulong(0))
    try:
        _call("set_mempolicy", ctypes.c_int(mode | flags), *args)
    except _OSErr as e:
        raise _fail("set_mempolicy", e.errno, f"{mode_name(mode | flags)}, nodes {_fmt_nodes(nodes)}") from None


def get_mempolicy(addr: int | None = None, *, flags: int = 0) -> tuple[int, frozenset[int]]:
    """(mode, nodes) of the calling thread, or of the mapping holding `addr` (MPOL_F_ADDR is added).

    With MPOL_F_NODE and an address, the mode returned is the node the page at `addr` is on
    (touching it first if not present: use move_pages to ask without faulting).
    """
    ctypes = _ctypes()
    if addr is not None:
        flags |= MPOL_F_ADDR
    bits = MASK_BITS
    while True:
        mode = ctypes.c_int(0)
        mask, maxnode = _mask((), bits)
        try:
            _call("get_mempolicy", ctypes.byref(mode), mask, ctypes.c_ulong(maxnode),
                  ctypes.c_void_p(addr or 0), ctypes.c_ulong(flags))
        except _OSErr as e:
            if e.errno == _errno.EINVAL and bits < 8 * 4096:
                bits *= 4  # nr_node_ids above our mask (not seen on real kernels, but allowed)
                continue
            raise _fail("get_mempolicy", e.errno, f"addr {addr:#x}" if addr is not None else "") from None
        return mode.value, nodes_of_words(mask)


def mems_allowed() -> frozenset[int]:
    """The nodes this task may allocate on (its cpuset's effective mems), as the kernel sees it."""
    return get_mempolicy(flags=MPOL_F_MEMS_ALLOWED)[1]


def mbind(addr: int, length: int, mode: int, nodes: Iterable[int] = (), flags: int = 0) -> None:
    """mbind(2) on [addr, addr+length): addr must be page aligned (the kernel rounds length up)."""
    ctypes = _ctypes()
    nodes = sorted(set(nodes))
    ps = page_size()
    if addr % ps:
        raise NumatuneError(f"mbind: address {addr:#x} is not page aligned ({ps} bytes)")
    if nodes:
        mask, maxnode = _mask(nodes)
        margs = (mask, ctypes.c_ulong(maxnode))
    else:
        margs = (None, ctypes.c_ulong(0))
    try:
        _call("mbind", ctypes.c_void_p(addr), ctypes.c_ulong(length), ctypes.c_int(mode), *margs,
              ctypes.c_uint(flags))
    except _OSErr as e:
        detail = f"{addr:#x}+{length}, {mode_name(mode)}, nodes {_fmt_nodes(nodes)}"
        raise _fail("mbind", e.errno, detail) from None


def move_pages(pages: Sequence[int], nodes: Sequence[int] | None = None, *, pid: int = 0,
               flags: int = 0) -> tuple[list[int], int]:
    """move_pages(2): (status per page, pages not moved). Without `nodes` it only asks where pages are.

    status is a node id, a -errno (-ENOENT: not present, -EFAULT: not mapped, -EBUSY/-EACCES ...), or
    STATUS_UNSET where the kernel stopped before reaching that page. Accepts any sequence of page
    addresses; an array('Q'/'L') is passed without copying.
    """
    ctypes = _ctypes()
    from array import array

    count = len(pages)
    if nodes is not None and len(nodes) != count:
        raise NumatuneError(f"move_pages: {count} pages but {len(nodes)} target nodes")
    if count == 0:
        return [], 0
    code = "Q" if ctypes.sizeof(ctypes.c_void_p) == 8 else "L"
    parr = pages if isinstance(pages, array) and pages.typecode == code else array(code, pages)
    status = array("i", [STATUS_UNSET]) * count
    narr = array("i", nodes) if nodes is not None else None
    p_ptr = (ctypes.c_void_p * count).from_buffer(parr)
    s_ptr = (ctypes.c_int * count).from_buffer(status)
    n_ptr = (ctypes.c_int * count).from_buffer(narr) if narr is not None else None
    try:
        rc = _call("move_pages", ctypes.c_int(pid), ctypes.c_ulong(count), p_ptr, n_ptr, s_ptr,
                   ctypes.c_int(flags))
    except _OSErr as e:
        detail = f"pid {pid or os.getpid()}, {count} pages" + (f" to nodes {_fmt_nodes(nodes)}" if nodes else "")
        err = _fail("move_pages", e.errno, detail)
        if isinstance(err, SyscallFailed):
            err.status = status.tolist()
        raise err from None
    return status.tolist(), rc


def migrate_pages(pid: int, old_nodes: Iterable[int], new_nodes: Iterable[int]) -> int:
    """migrate_pages(2): move all of a process's pages from old_nodes to new_nodes; returns pages not moved."""
    ctypes = _ctypes()
    old, new = sorted(set(old_nodes)), sorted(set(new_nodes))
    bits = max(64, -(-(max([*old, *new], default=0) + 1) // 64) * 64)
    omask, maxnode = _mask(old, bits)
    nmask, _ = _mask(new, bits)
    try:
        return _call("migrate_pages", ctypes.c_int(pid), ctypes.c_ulong(maxnode), omask, nmask)
    except _OSErr as e:
        raise _fail("migrate_pages", e.errno, f"pid {pid}, {_fmt_nodes(old)} -> {_fmt_nodes(new)}") from None


def page_addresses(addr: int, length: int, ps: int | None = None):
    """array of the page-aligned addresses covering [addr, addr+length), ready for move_pages."""
    from array import array

    ps = ps or page_size()
    start = addr - addr % ps
    end = addr + length
    code = "Q" if _ctypes().sizeof(_ctypes().c_void_p) == 8 else "L"
    return array(code, range(start, end, ps))


def count_status(status: Iterable[int]) -> dict[int, int]:
    """{node or -errno or STATUS_UNSET: pages} from a move_pages status list."""
    from collections import Counter

    return dict(Counter(status))  # counted in C: verification of a large range stays cheap


def status_reason(s: int) -> str:
    """Words for a move_pages status that is not a node."""
    if s >= 0:
        return f"node {s}"
    if s == STATUS_UNSET:
        return "not reported (the kernel stopped before this page)"
    err = -s
    return {
        _errno.ENOENT: "not present (never touched, or swapped out)",
        _errno.EFAULT: "not mapped",
        _errno.EACCES: "shared with other processes (needs MPOL_MF_MOVE_ALL and CAP_SYS_NICE)",
        _errno.EBUSY: "busy (pinned, under I/O, or locked)",
        _errno.EPERM: "cannot be moved (mlocked or a special mapping)",
        _errno.ENOMEM: "no memory on the target node",
        _errno.E2BIG: "too many pages",
        _errno.ENODEV: "target node not online",
    }.get(err, f"{_errno.errorcode.get(err, err)}")
