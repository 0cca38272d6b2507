"""Guest-side helpers: running commands, reading sysfs, calling numatune, machine set-up.

Runs inside the VM under the host's venv python (the host root is shared read-only). Keep
it standard-library only: it must also import on the host, where the check registry is
read to parametrize the pytest cases.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


class CheckFailed(AssertionError):
    """A check ran and the machine or numatune disagreed with what was expected."""


class CheckSkipped(Exception):
    """A check cannot run in this guest (a binary it needs is not installed): reported as skipped, with why."""


class EngineMissing(CheckSkipped):
    """A real engine the check drives (Slurm, munge, Prometheus, node_exporter) is not installed: skipped, and a
    failure on the host under CI=true (tests/vm/test_vm_checks.py), where a green run must prove it ran."""


class NotImplementedYet(CheckFailed):
    """The numatune subcommand a check needs does not exist (yet): the check fails, loudly."""


def parse_cpulist(text: str) -> list[int]:
    """"0-1,4" -> [0, 1, 4]; empty string -> []."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def read(path: str | Path, default: str | None = None) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        if default is None:
            raise
        return default


@dataclass
class Run:
    """Outcome of one guest command, kept short enough to put in a result file."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def summary(self, limit: int = 1500) -> str:
        out = self.stdout.strip()
        err = self.stderr.strip()
        text = f"$ {' '.join(self.argv)}\n-> rc={self.returncode} in {self.seconds:.1f}s"
        if out:
            text += "\nstdout: " + out[-limit:]
        if err:
            text += "\nstderr: " + err[-limit:]
        return text


def run(argv: list[str], timeout: float = 120, check: bool = False, **kw: Any) -> Run:
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kw)
        res = Run(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
    except subprocess.TimeoutExpired as exc:
        res = Run(argv, -9, _text(exc.stdout), _text(exc.stderr) + f"\n(timeout {timeout}s)", timeout)
    except OSError as exc:
        res = Run(argv, -1, "", str(exc), time.monotonic() - start)
    if check and res.returncode != 0:
        raise CheckFailed(res.summary())
    return res


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


_MISSING = re.compile(r"No such command|No module named numatune|invalid choice|Usage:.*Error: No such")


def numatune(*args: str, timeout: float = 180, **kw: Any) -> Run:
    """``python -m numatune ARGS`` with the host venv's python (the one running this batch)."""
    res = run([sys.executable, "-m", "numatune", *args], timeout=timeout, cwd=REPO, **kw)
    if res.returncode != 0 and _MISSING.search(res.stderr + res.stdout):
        sub = args[0] if args else ""
        raise NotImplementedYet(
            f"`numatune {sub}` is not available in this checkout (yet): {res.summary(600)}"
        )
    return res


def numatune_json(*args: str, ok_codes: tuple[int, ...] = (0,), **kw: Any) -> dict[str, Any]:
    res = numatune(*args, **kw)
    if res.returncode not in ok_codes:
        raise CheckFailed(f"numatune exited {res.returncode}:\n{res.summary()}")
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        raise CheckFailed(f"numatune printed no valid JSON ({exc}):\n{res.summary()}") from exc


@dataclass
class NumactlHardware:
    """`numactl --hardware`, parsed: the reference the inspect check compares with."""

    cpus: dict[int, list[int]] = field(default_factory=dict)
    size_mb: dict[int, int] = field(default_factory=dict)
    distances: dict[int, dict[int, int]] = field(default_factory=dict)


def numactl_hardware() -> NumactlHardware:
    res = run(["numactl", "--hardware"], check=True)
    hw = NumactlHardware()
    header: list[int] = []
    for line in res.stdout.splitlines():
        if m := re.match(r"node (\d+) cpus:(.*)", line):
            hw.cpus[int(m[1])] = [int(x) for x in m[2].split()]
        elif m := re.match(r"node (\d+) size: (\d+) MB", line):
            hw.size_mb[int(m[1])] = int(m[2])
        elif re.match(r"node\s+\d+(\s+\d+)*\s*$", line):
            header = [int(x) for x in line.split()[1:]]
        elif header and (m := re.match(r"\s*(\d+):\s+([\d\s]+)$", line)):
            hw.distances[int(m[1])] = dict(zip(header, (int(x) for x in m[2].split()), strict=False))
    return hw


def wait_for(predicate: Any, timeout: float, interval: float = 0.5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            if predicate():
                return True
        time.sleep(interval)
    return False


def netdevs_on_node(node: int) -> list[str]:
    """Physical network interfaces whose PCI device sits on ``node``."""
    out = []
    for dev in sorted(Path("/sys/class/net").iterdir()):
        numa = dev / "device" / "numa_node"
        if numa.exists() and read(numa, "-1") == str(node):
            out.append(dev.name)
    return out


def irq_affinity(irq: int) -> list[int]:
    return parse_cpulist(read(f"/proc/irq/{irq}/smp_affinity_list", ""))


def msi_irqs(netdev: str) -> list[int]:
    d = Path(f"/sys/class/net/{netdev}/device/msi_irqs")
    return sorted(int(p.name) for p in d.iterdir()) if d.exists() else []


#: Seconds a guest workload (toucher, launched child, dd) may take to start and fault in its memory.
#: 64 MiB takes 2-10 s on an idle TCG guest; on a host loaded with other guests one took over 120 s
#: (remote memory, beside launched workloads). A wide margin: every wait ends as soon as it is ready.
READY_TIMEOUT = 300


def _program_files(program: str) -> list[str]:
    """The program's file, every shared library ``ldd`` says it loads, and the loader's cache."""
    path = shutil.which(program)
    if path is None:
        raise CheckFailed(f"{program} is not installed in the guest")
    out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=120).stdout
    libs = [os.path.realpath(m) for m in re.findall(r"(/\S+) \(0x", out)]
    return [os.path.realpath(path), *libs, "/etc/ld.so.cache"]


@contextlib.contextmanager
def safe_to_bind_to_cxl(*programs: str) -> Any:
    """Run these programs bound to the CXL node without QEMU giving up on the guest's root; yields the
    environment to run them with.

    QEMU 7.2 serves emulated CXL memory as MMIO and DMAs into it through one page-sized bounce buffer:
    a 9p read into CXL pages (more than one page, or two processes at once) ends in "virtio: bogus
    descriptor or out of resources" and the guest's root hangs (KNOWN.md). A bound process reads into
    CXL pages in two ways: a file mapped from the root (the root is the host's, over 9p without caching,
    so a file nobody holds leaves the page cache and is read again into pages allocated under the
    process's policy), and read() into its heap (glibc's setlocale reads locale.alias so, in dd and
    sleep at once). So: the programs and libraries stay mapped here, every page read once into this
    process's DRAM node, and the environment sets LC_ALL=C (no locale file is read).
    """
    held: list[tuple[int, mmap.mmap]] = []
    try:
        for path in dict.fromkeys(f for prog in programs for f in _program_files(prog)):
            fd = os.open(path, os.O_RDONLY)
            size = os.fstat(fd).st_size
            if not size:
                os.close(fd)
                continue
            mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            held.append((fd, mm))
            for offset in range(0, size, mmap.PAGESIZE):
                mm[offset]  # fault the page in: read from 9p once, into this process's (DRAM) node
        yield {**os.environ, "LC_ALL": "C"}
    finally:
        for fd, mm in held:
            mm.close()
            os.close(fd)


def spawn_toucher(argv_prefix: list[str], mib: int, ready: Path, *flags: str) -> subprocess.Popen[bytes]:
    """Start ``PREFIX python toucher.py MIB READY FLAGS`` and wait until its memory is touched."""
    ready.unlink(missing_ok=True)
    toucher = Path(__file__).with_name("toucher.py")
    proc = subprocess.Popen([*argv_prefix, sys.executable, str(toucher), str(mib), str(ready), *flags],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if not wait_for(lambda: ready.exists() or proc.poll() is not None, timeout=READY_TIMEOUT):
        proc.kill()
        raise CheckFailed(f"toucher under {argv_prefix} did not get ready in {READY_TIMEOUT} s")
    if proc.poll() is not None:
        out, err = proc.communicate()
        raise CheckFailed(f"toucher under {argv_prefix} exited {proc.returncode}: {err.decode()[-800:]}")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def descendants(pid: int) -> list[int]:
    """All descendant pids (a launcher may exec or fork the real workload)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int(read(p / "stat").rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


SHARED_MEMORY_FILES = ("file=/dev/zero", "file=/SYSV", "file=/dev/shm/", "file=/memfd:")


def pages_by_node(pid: int, *, own_only: bool = False) -> dict[int, int]:
    """Resident pages per node summed over /proc/PID/numa_maps (4 KiB pages assumed except huge).

    own_only: leave out file-backed mappings (libraries, page cache) but keep shared memory, the way
    `numatune audit` judges a process on the memory it owns."""
    total: dict[int, int] = {}
    for line in read(f"/proc/{pid}/numa_maps", "").splitlines():
        if own_only and " file=" in line and not any(f in line for f in SHARED_MEMORY_FILES):
            continue
        kb = 4
        if m := re.search(r"kernelpagesize_kB=(\d+)", line):
            kb = int(m[1])
        for node, count in re.findall(r"\bN(\d+)=(\d+)", line):
            total[int(node)] = total.get(int(node), 0) + int(count) * kb // 4
    return total


def env_dump() -> dict[str, Any]:
    return {"uname": os.uname().release, "python": sys.executable, "uptime": read("/proc/uptime").split()[0]}
