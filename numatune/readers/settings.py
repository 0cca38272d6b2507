"""Kernel settings that decide NUMA behaviour, read from the root's /proc/sys and /sys/kernel/mm."""

from __future__ import annotations

from numatune.model.topology import KernelSettings
from numatune.readers.nodes import read_weighted_interleave_auto
from numatune.system.host import Host


def bracketed_choice(text: str | None) -> str | None:
    """"always [madvise] never" -> "madvise"."""
    if not text:
        return None
    start = text.find("[")
    while start >= 0:  # the first "[...]" with something inside, as re.search(r"\[([^\]]+)\]") finds it
        end = text.find("]", start + 1)
        if end < 0:
            break
        if end > start + 1:
            return text[start + 1:end]
        start = text.find("[", start + 1)
    return text.strip()


def read_release(host: Host) -> str | None:
    """The kernel release ("6.12.0-amd64"): osrelease, else the start of /proc/version (trees that saved
    only that one): the one place inspect and launch (its kernel-version checks) read it."""
    release = host.read_optional("/proc/sys/kernel/osrelease")
    if release is None:
        version = host.read_optional("/proc/version") or ""
        rest = version[len("Linux version "):] if version.startswith("Linux version ") else ""
        release = rest.split(None, 1)[0] if rest[:1] and not rest[:1].isspace() else None  # "6.12.0-amd64 (..."
    return release


def read_settings(host: Host) -> KernelSettings:
    release = read_release(host)
    demotion = host.read_optional("/sys/kernel/mm/numa/demotion_enabled")
    return KernelSettings(
        release=release,
        numa_balancing=host.read_int("/proc/sys/kernel/numa_balancing"),
        transparent_hugepage=bracketed_choice(host.read_optional("/sys/kernel/mm/transparent_hugepage/enabled")),
        thp_defrag=bracketed_choice(host.read_optional("/sys/kernel/mm/transparent_hugepage/defrag")),
        zone_reclaim_mode=host.read_int("/proc/sys/vm/zone_reclaim_mode"),
        demotion_enabled=(demotion in ("true", "1", "Y")) if demotion is not None else None,
        weighted_interleave_auto=read_weighted_interleave_auto(host),
        irqbalance_running=irqbalance_process(host)[0],
    )


IRQBALANCE_KEYS = ("IRQBALANCE_BANNED_CPULIST", "IRQBALANCE_BANNED_CPUS")  # all of its environment ever read


def irqbalance_process(host: Host) -> tuple[bool | None, str | None]:
    """(running, its PID). Live: from the process table. A snapshot records whether the daemon ran
    (SNAPSHOT.txt's `irqbalance:` line) and keeps its /proc/PID/comm (and of its environment,
    IRQBALANCE_KEYS), so replay sees what live saw. Any other saved tree: True if it holds the
    daemon's /proc entry, else None (a partial process table cannot prove the daemon absent).
    Walked once per Host: the kernel settings and the IRQ report both ask."""
    return host.once("irqbalance_process", lambda: _find_irqbalance(host))


def _find_irqbalance(host: Host) -> tuple[bool | None, str | None]:
    recorded = host.snapshot_facts("irqbalance")
    pids = [p for p in host.listdir("/proc") if p.isdigit()]
    for pid in pids:
        if host.read_optional(f"/proc/{pid}/comm") == "irqbalance":
            return True, pid
    if host.is_live or (recorded and recorded[0] == "not running"):
        return False, None
    return None, None
