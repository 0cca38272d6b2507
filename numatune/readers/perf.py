"""Local/remote DRAM load counters through perf_event_open(2), called with ctypes (no perf binary).

Which events (as `perf list` and numatop name them):
- Intel and others: the generic cache events node-loads (local DRAM) and node-load-misses (remote);
- AMD Zen (family 17h+), where the generic ones read `<not supported>`: the raw events numatop uses,
  Zen1/2 `LsDmndFillsFromSys.DRAM_IO_Near/Far` (0x0843/0x4043) and Zen3+ `LsAnyFillsFromSys.MemIoLocal/
  Remote` (0x0844/0x4044).
One counter pair per thread (pid=TID, cpu=-1), user space only, scaled for multiplexing. Whenever
counters cannot be opened, `open_pmu` raises PmuUnavailable (numatune.errors) whose message is the
note audit shows: not the live node, a VM without a PMU, perf_event_paranoid, an unsupported CPU.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable

from numatune.errors import PmuUnavailable
from numatune.model._record import record
from numatune.numbers import parse_int
from numatune.pieces import MAX_FIELDS, MAX_RECORDS, lines, split
from numatune.system.host import Host

PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_COUNT_HW_CACHE_NODE = 6
PERF_COUNT_HW_CACHE_OP_READ = 0
PERF_COUNT_HW_CACHE_RESULT_ACCESS = 0
PERF_COUNT_HW_CACHE_RESULT_MISS = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1
PERF_FORMAT_TOTAL_TIME_RUNNING = 2
PERF_ATTR_SIZE_VER5 = 112
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
# attr.flags bits
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6

SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "ppc64": 319, "s390x": 331, "riscv64": 241}


@record
class Event:
    name: str
    type: int
    config: int
    role: str  # "local" | "remote"


def generic_events() -> tuple[Event, Event]:
    base = PERF_COUNT_HW_CACHE_NODE | (PERF_COUNT_HW_CACHE_OP_READ << 8)
    return (
        Event("node-loads", PERF_TYPE_HW_CACHE, base | (PERF_COUNT_HW_CACHE_RESULT_ACCESS << 16), "local"),
        Event("node-load-misses", PERF_TYPE_HW_CACHE, base | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16), "remote"),
    )


def events_for_cpu(vendor: str | None, family: int | None) -> tuple[tuple[Event, Event], str]:
    """The local/remote event pair for this CPU and a phrase saying which it is."""
    if vendor == "AuthenticAMD" and family is not None and family >= 0x17:
        if family == 0x17:
            return (
                Event("ls_dmnd_fills_from_sys.dram_io_near", PERF_TYPE_RAW, 0x0843, "local"),
                Event("ls_dmnd_fills_from_sys.dram_io_far", PERF_TYPE_RAW, 0x4043, "remote"),
            ), "AMD Zen1/2 raw events"
        return (
            Event("ls_any_fills_from_sys.mem_io_local", PERF_TYPE_RAW, 0x0844, "local"),
            Event("ls_any_fills_from_sys.mem_io_remote", PERF_TYPE_RAW, 0x4044, "remote"),
        ), "AMD Zen3+ raw events"
    return generic_events(), "generic node-loads/node-load-misses"


def pack_attr(event: Event) -> bytes:
    """struct perf_event_attr (PERF_ATTR_SIZE_VER5), disabled, user space only, with enabled/running times."""
    flags = _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV
    head = struct.pack(
        "=IIQQQQQII",
        event.type,
        PERF_ATTR_SIZE_VER5,
        event.config,
        0,  # sample_period
        0,  # sample_type
        PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
        flags,
        0,  # wakeup_events
        0,  # bp_type
    )
    return head + bytes(PERF_ATTR_SIZE_VER5 - len(head))


def _libc_syscall() -> Callable[[bytes, int], int]:
    nr = SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise PmuUnavailable(f"perf_event_open: no syscall number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(attr: bytes, tid: int, cpu: int = -1) -> int:
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = libc.syscall(nr, buf, ctypes.c_int(tid), ctypes.c_int(cpu), ctypes.c_int(-1), ctypes.c_ulong(0))
        if fd < 0:
            return -ctypes.get_errno()
        return fd

    return call


def cpu_identity(host: Host) -> tuple[str | None, int | None, bool]:
    """(vendor_id, cpu family, hypervisor flag) from /proc/cpuinfo."""
    vendor = family = None
    hypervisor = False
    for line in lines(host.read_optional("/proc/cpuinfo") or "", "/proc/cpuinfo", MAX_RECORDS):
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value.strip()
        elif key == "cpu family" and family is None and value.strip().isdigit():
            family = parse_int(value, "/proc/cpuinfo")
        elif key == "flags":
            hypervisor = "hypervisor" in split(value, None, "/proc/cpuinfo", MAX_FIELDS, "flags")
            break
    return vendor, family, hypervisor


def explain_errno(err: int, paranoid: int | None, root: bool, hypervisor: bool, what: str) -> str:
    if err in (errno.EACCES, errno.EPERM):
        if not root and paranoid is not None:
            return f"perf_event_paranoid is {paranoid} and you are not root: no hardware counters for other processes"
        return f"perf_event_open refused ({os.strerror(err)}); perf_event_paranoid is {paranoid}"
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL):
        if hypervisor:
            return f"{what} not supported in this VM (the hypervisor does not expose the PMU)"
        return f"{what} not supported by this CPU or kernel ({os.strerror(err)})"
    if err == errno.ESRCH:
        return "the process exited before its counters could be opened"
    if err == errno.EMFILE:
        return "too many open files for one counter pair per thread: raise `ulimit -n`"
    return f"perf_event_open failed: {os.strerror(err)}"


class PmuSession:
    """One local/remote counter pair per thread of the audited processes."""

    def __init__(self, events: tuple[Event, Event], fds: dict[int, list[int]], label: str) -> None:
        self.events, self.fds, self.label = events, fds, label

    def start(self) -> None:
        import fcntl

        for pair in self.fds.values():
            for fd in pair:
                fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)

    def stop(self) -> dict[int, tuple[int, int]]:
        """Close the counters; pid -> (local, remote), scaled when the PMU multiplexed them."""
        import fcntl

        out: dict[int, list[int]] = {}
        for key, pair in self.fds.items():
            pid = key >> 32
            sums = out.setdefault(pid, [0, 0])
            for i, fd in enumerate(pair):
                try:
                    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
                    value, enabled, running = struct.unpack("=QQQ", os.read(fd, 24))
                except OSError:
                    value, enabled, running = 0, 0, 0
                finally:
                    os.close(fd)
                if running and enabled > running:
                    value = int(value * enabled / running)
                sums[i] += value
        self.fds = {}
        return {pid: (v[0], v[1]) for pid, v in out.items()}


def open_pmu(
    host: Host,
    threads: dict[int, list[int]],
    *,
    syscall: Callable[[bytes, int], int] | None = None,
    euid: int | None = None,
) -> PmuSession:
    """Open counters for pid -> [tids]. Raises PmuUnavailable with the note to show."""
    if not host.is_live:
        raise PmuUnavailable("hardware counters need the live node (a saved tree was given with --root)")
    vendor, family, hypervisor = cpu_identity(host)
    events, label = events_for_cpu(vendor, family)
    paranoid = host.read_int("/proc/sys/kernel/perf_event_paranoid")
    root = (os.geteuid() if euid is None else euid) == 0
    call = syscall or _libc_syscall()
    attrs = [pack_attr(e) for e in events]
    fds: dict[int, list[int]] = {}
    opened: list[int] = []
    try:
        for pid, tids in threads.items():
            for tid in tids:
                pair = []
                for attr in attrs:
                    fd = call(attr, tid)
                    if fd == -errno.ESRCH:
                        break  # this thread ended; the others still count
                    if fd < 0:
                        raise PmuUnavailable(explain_errno(-fd, paranoid, root, hypervisor, label))
                    pair.append(fd)
                    opened.append(fd)
                if len(pair) == 2:
                    fds[(pid << 32) | tid] = pair
                else:
                    for fd in pair:
                        os.close(fd)
                        opened.remove(fd)
    except PmuUnavailable:
        for fd in opened:
            os.close(fd)
        raise
    if not fds:
        raise PmuUnavailable("no thread could be counted (the processes exited)")
    return PmuSession(events, fds, label)


# -- CXL PMUs (cxl_pmu driver): system-wide counters, one pair per device --------------------------------

CXL_LINE_BYTES = 64  # one M2S MemRd / RwD MemWr moves one cache line


def pack_system_attr(pmu_type: int, config: int, config1: int = 0, config2: int = 0) -> bytes:
    """perf_event_attr for a system-wide (uncore-like) PMU: disabled, times read, no exclude bits (refused)."""
    head = struct.pack(
        "=IIQQQQQIIQQ",
        pmu_type,
        PERF_ATTR_SIZE_VER5,
        config,
        0,  # sample_period
        0,  # sample_type
        PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
        _DISABLED,
        0,  # wakeup_events
        0,  # bp_type
        config1,
        config2,
    )
    return head + bytes(PERF_ATTR_SIZE_VER5 - len(head))


@record
class CxlTraffic:
    """What one CXL device served while a measurement ran: host reads and writes, per direction."""

    pmu: str
    memdev: str | None
    seconds: float
    read_lines: int | None
    write_lines: int | None

    @property
    def read_gbps(self) -> float | None:
        return _gbps(self.read_lines, self.seconds)

    @property
    def write_gbps(self) -> float | None:
        return _gbps(self.write_lines, self.seconds)


def _gbps(lines: int | None, seconds: float) -> float | None:
    if lines is None or seconds <= 0:
        return None
    return round(lines * CXL_LINE_BYTES / seconds / 1e9, 3)


def cxl_pmus_absent_note(pmus: tuple) -> str | None:  # noqa: ANN001 - tuple[CxlPmu, ...]
    """Why per-device CXL traffic cannot be counted from what the tree shows; None when it can be tried."""
    if not pmus:
        return ("no CXL PMU (/sys/bus/event_source/devices/cxl_pmu_* absent: a kernel without the cxl_pmu "
                "driver, or devices without a CXL performance monitoring unit): per-device CXL traffic is not "
                "measurable here")
    if not any(p.read or p.write for p in pmus):
        names = ", ".join(p.name for p in pmus)
        return (f"the CXL PMU(s) {names} document no memory read/write event (m2s_req_memrd, s2m_drs_memdata, "
                "m2s_rwd_memwr): per-device CXL traffic is not measurable here")
    return None


class CxlTrafficSession:
    """System-wide read/write counters on every CXL PMU that documents them."""

    def __init__(self, fds: list[tuple[object, int | None, int | None]]) -> None:
        self.fds = fds  # (pmu, read fd, write fd)
        self.started = 0.0

    def start(self) -> None:
        import fcntl
        import time

        for _pmu, *pair in self.fds:
            for fd in pair:
                if fd is not None:
                    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
        self.started = time.perf_counter()

    def stop(self) -> list[CxlTraffic]:
        import fcntl
        import time

        seconds = time.perf_counter() - self.started
        out = []
        for pmu, *pair in self.fds:
            counts: list[int | None] = []
            for fd in pair:
                if fd is None:
                    counts.append(None)
                    continue
                try:
                    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
                    value, enabled, running = struct.unpack("=QQQ", os.read(fd, 24))
                    if running and enabled > running:
                        value = int(value * enabled / running)
                    counts.append(value)
                except OSError:
                    counts.append(None)
                finally:
                    os.close(fd)
            out.append(CxlTraffic(pmu.name, pmu.memdev, seconds, counts[0], counts[1]))
        self.fds = []
        return out


def open_cxl_traffic(
    host: Host,
    pmus: tuple,  # tuple[CxlPmu, ...]
    *,
    syscall: Callable[..., int] | None = None,
    euid: int | None = None,
) -> CxlTrafficSession:
    """Open the CXL PMUs' read/write counters system-wide; raises PmuUnavailable with the note to show."""
    if not host.is_live:
        raise PmuUnavailable("CXL traffic counters need the live node (a saved tree was given with --root)")
    note = cxl_pmus_absent_note(pmus)
    if note:
        raise PmuUnavailable(note)
    paranoid = host.read_int("/proc/sys/kernel/perf_event_paranoid")
    root = (os.geteuid() if euid is None else euid) == 0
    call = syscall or _libc_syscall()
    fds: list[tuple[object, int | None, int | None]] = []
    try:
        for pmu in pmus:
            if pmu.pmu_type is None or not (pmu.read or pmu.write):
                continue
            pair: list[int | None] = []
            for ev in (pmu.read, pmu.write):
                if ev is None:
                    pair.append(None)
                    continue
                fd = call(pack_system_attr(pmu.pmu_type, ev.config, ev.config1, ev.config2), -1,
                          pmu.cpu if pmu.cpu is not None else 0)
                if fd < 0:
                    raise PmuUnavailable(explain_errno(-fd, paranoid, root, False, f"{pmu.name}/{ev.name}"))
                pair.append(fd)
            fds.append((pmu, pair[0], pair[1]))
    except PmuUnavailable:
        for _pmu, *pair in fds:
            for fd in pair:
                if fd is not None:
                    os.close(fd)
        raise
    return CxlTrafficSession(fds)
