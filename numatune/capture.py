"""Capture exactly what numatune reads from a root into a new root (directory or .tar.gz).

Declarative: CAPTURE lists the logical subtrees and, for each, which entries to keep. Files are
copied as text (sysfs attributes are small; anything over MAX_FILE_BYTES or unreadable is left
out), symlinks are kept as relative links so the copy resolves the same way, and nothing binary,
executable or personal is taken: no `config`/`resource` files, no process environments (for
`--pid`, only the named environment keys).
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import io
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from numatune import __version__
from numatune.errors import InputError, ProcessGone
from numatune.host import Host

MAX_FILE_BYTES = 1 << 20
_PCI_ATTRS = (
    "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision", "numa_node",
    "local_cpulist", "local_cpus", "current_link_speed", "current_link_width", "max_link_speed",
    "max_link_width", "irq", "enable", "modalias",
)
_BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_SKIP_DIRS = {"power", "subsystem", "firmware_node", "iommu_group", "iommu", "driver", "module", "consumer",
              "supplier", "cpufreq", "cpuidle", "msi_bus", "link", "reset_method"}

# Default per-process files for `snapshot --pid` (the audit reader may name more: see process_files()).
DEFAULT_PROCESS_FILES = ("cmdline", "comm", "status", "stat", "numa_maps", "sched", "cgroup", "task/*/stat",
                         "task/*/status", "task/*/comm")
DEFAULT_ENVIRON_KEYS = (
    "LOCAL_RANK", "RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SLURM_LOCALID", "SLURM_PROCID", "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PMIX_LOCAL_RANK", "OMP_NUM_THREADS",
)


@dataclass
class Capture:
    """Accumulates files and links (logical path -> content/target) before writing them out."""

    src: Host
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    seen_dirs: set[str] = field(default_factory=set)

    # -- primitives ---------------------------------------------------------------------------
    def file(self, logical: str) -> None:
        if logical in self.files:
            return
        real = self.src.path(logical)
        try:
            if os.path.islink(real) or not os.path.isfile(real):
                return
            with open(real, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            return  # write-only, EIO, permission: not part of what can be replayed
        if len(data) <= MAX_FILE_BYTES:
            self.files[logical] = data

    def link(self, logical: str) -> str | None:
        """Record a symlink as a relative link; returns the logical target (may not exist)."""
        real = self.src.path(logical)
        try:
            target = os.readlink(real)
        except OSError:
            return None
        if os.path.isabs(target):
            target_logical = target if self.src.is_live else self.src.logical(self.src.path(target))
        else:
            target_logical = os.path.normpath(os.path.join(os.path.dirname(logical), target))
        if not target_logical.startswith("/"):
            return None
        self.links[logical] = os.path.relpath(target_logical, os.path.dirname(logical))
        return target_logical

    def entry(self, logical: str) -> str:
        """Copy a symlink or file at `logical`; return the real logical path it stands for."""
        if os.path.islink(self.src.path(logical)):
            return self.link(logical) or logical
        self.file(logical)
        return logical

    def walk(self, logical: str, *, files: Iterable[str] = ("*",), depth: int = 8, skip: set[str] = _SKIP_DIRS,
             follow: bool = False) -> None:
        """Copy a directory subtree: files matching `files`, symlinks as links, subdirectories."""
        if depth < 0 or logical in self.seen_dirs:
            return
        self.seen_dirs.add(logical)
        real = self.src.path(logical)
        try:
            entries = list(os.scandir(real))
        except OSError:
            return
        self.dirs.add(logical)
        patterns = tuple(files)
        for e in entries:
            child = f"{logical.rstrip('/')}/{e.name}"
            if e.is_symlink():
                if e.name in skip and e.name != "driver":
                    continue
                target = self.link(child)
                if follow and target and self.src.is_dir(target):
                    self.walk(target, files=patterns, depth=depth - 1, skip=skip)
            elif e.is_dir(follow_symlinks=False):
                if e.name not in skip:
                    self.walk(child, files=patterns, depth=depth - 1, skip=skip)
            elif any(fnmatch.fnmatchcase(e.name, p) for p in patterns):
                self.file(child)

    # -- writing ------------------------------------------------------------------------------
    def write_dir(self, dest: Path) -> None:
        for d in sorted(self.dirs):
            (dest / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for path, data in self.files.items():
            out = dest / path.lstrip("/")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        for path, target in self.links.items():
            out = dest / path.lstrip("/")
            out.parent.mkdir(parents=True, exist_ok=True)
            if not out.exists() and not out.is_symlink():
                os.symlink(target, out)

    def write_tar(self, dest: Path, top: str, *, mtime: int | None = None) -> None:
        """Members sorted, owned by uid/gid 0, no name or time in the gzip header: with a fixed `mtime`
        the same capture always gives the same bytes (fixtures/ is packed this way)."""
        now = int(time.time()) if mtime is None else mtime
        with open(dest, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for d in sorted(self.dirs | {os.path.dirname(p) for p in (*self.files, *self.links)}):
                info = tarfile.TarInfo(f"{top}{d}" if d != "/" else top)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
                tar.addfile(info)
            for path, data in sorted(self.files.items()):
                info = tarfile.TarInfo(f"{top}{path}")
                info.size, info.mode, info.mtime = len(data), 0o644, now
                tar.addfile(info, io.BytesIO(data))
            for path, target in sorted(self.links.items()):
                info = tarfile.TarInfo(f"{top}{path}")
                info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, now
                tar.addfile(info)


def capture_system(cap: Capture) -> None:
    src = cap.src
    # CPUs and nodes
    cap.walk("/sys/devices/system/cpu", files=("online", "offline", "possible", "present", "isolated", "kernel_max",
                                               "core_id", "physical_package_id", "die_id", "cluster_id", "*_list",
                                               "thread_siblings", "core_siblings", "cpus"),
             skip=_SKIP_DIRS | {"cache", "hotplug", "vulnerabilities", "smt", "microcode", "intel_pstate",
                                "cpuidle", "cpufreq", "power", "crash_notes", "crash_notes_size", "acpi_cppc"})
    cap.walk("/sys/devices/system/node", files=("*",), skip=_SKIP_DIRS | {"compact", "reclaim"})
    for name in list(cap.links):
        if re.match(r"^/sys/devices/system/node/node\d+/memory\d+$", name):
            del cap.links[name]  # hundreds of memory-block links numatune never follows
    for kind in ("cpu_core", "cpu_atom"):
        cap.file(f"/sys/devices/{kind}/cpus")
    cap.walk("/sys/devices/virtual/memory_tiering")
    cap.walk("/sys/kernel/mm/mempolicy")
    for f in ("transparent_hugepage/enabled", "transparent_hugepage/defrag", "numa/demotion_enabled"):
        cap.file(f"/sys/kernel/mm/{f}")
    # PCI devices and the bridges above them
    for bdf in src.listdir("/sys/bus/pci/devices"):
        target = cap.entry(f"/sys/bus/pci/devices/{bdf}")
        _capture_pci_chain(cap, target)
    for cls in ("net", "infiniband", "nvme"):
        for name in src.listdir(f"/sys/class/{cls}"):
            target = cap.entry(f"/sys/class/{cls}/{name}")
            if target.startswith("/sys/devices/"):
                cap.dirs.add(target)  # the interface's directory, so the class link resolves
    # CXL, DAX, NVDIMM
    for bus in ("cxl", "dax", "nd"):
        for name in src.listdir(f"/sys/bus/{bus}/devices"):
            target = cap.entry(f"/sys/bus/{bus}/devices/{name}")
            cap.walk(target, depth=2, skip=_SKIP_DIRS - {"driver"} | {"firmware"})
    kfd = src.resolve("/sys/class/kfd/kfd") or "/sys/class/kfd/kfd"
    if src.is_dir(f"{kfd}/topology"):
        cap.walk(f"{kfd}/topology")
        if kfd != "/sys/class/kfd/kfd":
            cap.link("/sys/class/kfd/kfd")
    # /proc
    for f in ("cpuinfo", "meminfo", "version", "interrupts", "vmstat", "cmdline", "modules", "sys/kernel/osrelease",
              "sys/kernel/numa_balancing", "sys/vm/zone_reclaim_mode", "sys/vm/max_map_count",
              "sys/kernel/perf_event_paranoid", "irq/default_smp_affinity"):
        cap.file(f"/proc/{f}")
    for irq in src.listdir("/proc/irq"):
        if irq.isdigit():
            for f in ("smp_affinity", "smp_affinity_list", "effective_affinity", "effective_affinity_list",
                      "node", "affinity_hint"):
                cap.file(f"/proc/irq/{irq}/{f}")
            cap.dirs.add(f"/proc/irq/{irq}")
            for action in src.listdir(f"/proc/irq/{irq}"):
                if src.is_dir(f"/proc/irq/{irq}/{action}"):
                    cap.dirs.add(f"/proc/irq/{irq}/{action}")
    for gpu in src.listdir("/proc/driver/nvidia/gpus"):
        for f in ("information", "numa_status"):
            cap.file(f"/proc/driver/nvidia/gpus/{gpu}/{f}")


def _capture_pci_chain(cap: Capture, device: str) -> None:
    parts = device.split("/")
    for i in range(len(parts), 3, -1):
        path = "/".join(parts[:i])
        if not _BDF.match(parts[i - 1]) or path in cap.seen_dirs:
            continue
        cap.seen_dirs.add(path)
        cap.dirs.add(path)
        for attr in _PCI_ATTRS:
            cap.file(f"{path}/{attr}")
        cap.link(f"{path}/driver")
        cap.walk(f"{path}/msi_irqs", depth=0)
        for sub in ("net", "infiniband", "nvme", "drm"):
            for name in cap.src.listdir(f"{path}/{sub}"):
                cap.dirs.add(f"{path}/{sub}/{name}")


def capture_process(cap: Capture, pid: int, files: Iterable[str], environ_keys: Iterable[str]) -> None:
    base = f"/proc/{pid}"
    if not cap.src.is_dir(base):
        raise ProcessGone(f"no process {pid}")
    for pattern in files:
        if "*" in pattern:
            head, _, tail = pattern.partition("*")
            for name in cap.src.listdir(f"{base}/{head.rstrip('/')}"):
                cap.file(f"{base}/{head}{name}{tail}")
        else:
            cap.file(f"{base}/{pattern}")
    keys = set(environ_keys)
    raw = None
    with contextlib.suppress(OSError), open(cap.src.path(f"{base}/environ"), "rb") as fh:
        raw = fh.read()
    if raw is not None:
        kept = [item for item in raw.split(b"\0") if item.split(b"=", 1)[0].decode("ascii", "replace") in keys]
        cap.files[f"{base}/environ"] = b"\0".join(kept) + (b"\0" if kept else b"")
    for fd in cap.src.listdir(f"{base}/fd"):
        target = None
        try:
            target = os.readlink(cap.src.path(f"{base}/fd/{fd}"))
        except OSError:
            continue
        if target.startswith("/dev/"):  # device files tell which GPU a process holds; nothing else is kept
            cap.links[f"{base}/fd/{fd}"] = target


def process_files() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The per-PID files and environment keys the audit reader uses (its own lists when present)."""
    try:
        from numatune.readers import procs

        return tuple(getattr(procs, "PROCESS_FILES", DEFAULT_PROCESS_FILES)), tuple(
            getattr(procs, "ENVIRON_KEYS", DEFAULT_ENVIRON_KEYS)
        )
    except ImportError:
        return DEFAULT_PROCESS_FILES, DEFAULT_ENVIRON_KEYS


def _has_nvidia_gpu(src: Host) -> bool:
    return bool(src.listdir("/proc/driver/nvidia/gpus")) or any(
        src.read_optional(f"/sys/bus/pci/devices/{bdf}/vendor") == "0x10de"
        and (src.read_optional(f"/sys/bus/pci/devices/{bdf}/class") or "").startswith("0x03")
        for bdf in src.listdir("/sys/bus/pci/devices")
    )


def snapshot(src: Host, dest: Path, pids: Iterable[int] = ()) -> Capture:
    """Capture `src` (usually the live node) into `dest`: a directory, or an archive for .tar/.tar.gz/.tgz."""
    cap = Capture(src)
    capture_system(cap)
    if _has_nvidia_gpu(src) or src.exists("/numatune/nvml.json"):
        from numatune.readers.nvml import SAVED, snapshot_bytes

        record = snapshot_bytes(src)  # NVLink, fabric, UUIDs: not in sysfs, so NVML's answers are kept
        if record is not None:
            cap.files[SAVED] = record
    files, keys = process_files()
    for pid in pids:
        capture_process(cap, pid, files, keys)
    note = (
        f"numatune {__version__} snapshot of {src.label}\n"
        f"taken: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        f"kernel: {src.read_optional('/proc/sys/kernel/osrelease') or 'unknown'}\n"
        f"pids: {' '.join(str(p) for p in pids) or '-'}\n"
    )
    cap.files["/SNAPSHOT.txt"] = note.encode()
    name = dest.name
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        top = re.sub(r"\.(tar\.gz|tgz|tar)$", "", name) or "snapshot"
        tmp = Path(tempfile.mkstemp(dir=dest.parent if dest.parent.exists() else None, suffix=".partial")[1])
        try:
            cap.write_tar(tmp, top)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
    else:
        if dest.exists() and any(dest.iterdir()):
            raise InputError(f"{dest} exists and is not empty")
        dest.mkdir(parents=True, exist_ok=True)
        cap.write_dir(dest)
    return cap
