"""Capture exactly what numatune reads from a root into a new root (directory or .tar.gz).

There is no hand-written list of files here: `snapshot` runs every command in DRY_RUN (and
PID_DRY_RUN for each `--pid`) through a RecordingHost on the source root, and copies every path
those runs touched, with the links and directory entries on the way. So a reader that starts
reading a new file is captured by the next snapshot without anyone updating a list, and replay
(`--root SNAPSHOT`) reads the same bytes the commands read live.

What is never taken: device nodes, FIFOs and anything that is not a regular file, directory or
link; files over `host.MAX_FILE_BYTES`; of a process's environment, anything but the keys the
audit reader reads (`readers.procs.ENVIRON_KEYS`); of its open files, anything but `/dev/` links.
Files the source has but cannot be read (not root) are listed in SNAPSHOT.txt, so replay reports
them as live did.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import tarfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from numatune import __version__
from numatune.errors import InputError, NumatuneError, ProcessGone
from numatune.numbers import maybe_int
from numatune.system.host import MAX_FILE_BYTES, Host
from numatune.system.tarindex import Escapes

# The one declaration of what numatune reads: every command a snapshot must replay, run dry.
# `launch` is run twice: for the GPU/device path and for the node-kind/weights path.
DRY_RUN: tuple[tuple[str, ...], ...] = (
    ("inspect", "--json"),
    ("irq", "--json"),
    ("irq", "plan", "--json"),
    ("check", "--json"),
    ("launch", "--dry-run", "--json", "--", "true"),
    ("launch", "--dry-run", "--json", "--node", "0", "--", "true"),
    ("launch", "--dry-run", "--json", "--node", "0", "--mem-policy", "weighted", "--", "true"),
    ("emit", "slurm", "--json"),
    ("emit", "kubelet", "--json"),
    ("emit", "nfd", "--json"),
    ("plan-memory", "--params", "1e6", "--json"),
)
PID_DRY_RUN: tuple[tuple[str, ...], ...] = (
    ("audit", "{pid}", "--json"),
    ("check", "--pid", "{pid}", "--json"),
)
_ENVIRON = re.compile(r"^/proc/\d+(/task/\d+)?/environ$")
_FD = re.compile(r"^/proc/\d+(/task/\d+)?/fd/\d+$")
_PROC_PID = re.compile(r"^/proc/(\d+)(/|$)")
_MAX_LINKS = 40  # as the kernel's ELOOP limit


class RecordingHost(Host):
    """A Host that remembers every logical path asked for, and every directory listed."""

    __slots__ = ("touched", "listed", "errors")

    def __init__(self, root: str = "/", label: str = "/", fs=None) -> None:  # noqa: ANN001 - a saved root's access
        super().__init__(root, label, fs)
        self.touched: dict[str, None] = {}  # insertion-ordered set
        self.listed: dict[str, None] = {}
        self.errors: list[str] = []  # commands of the dry run that stopped on a bug, not on the node

    def path(self, logical: str) -> str:
        self.touched[logical] = None
        return super().path(logical)

    def entries(self, logical: str) -> list[str]:  # listdir goes through entries
        self.listed[logical] = None
        return super().entries(logical)

    def _rel(self, logical: str) -> str:  # a saved root's reads skip path()
        self.touched[logical] = None
        return super()._rel(logical)

    def write_text(self, logical: str, text: str) -> None:
        raise RuntimeError(f"a snapshot's dry run tried to write {logical}")  # never: every DRY_RUN is read-only


@dataclass
class Capture:
    """Accumulates files and links (logical path -> content/target) before writing them out."""

    src: Host
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    unreadable: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # dry-run commands that stopped on a bug
    irqbalance: bool | None = None  # whether the daemon ran (recorded: replay cannot tell from a partial /proc)
    pids: frozenset[int] | None = None  # the processes whose /proc/PID may be copied (None: any)
    _resolved: dict[str, str | None] = field(default_factory=dict)
    _tried: set[str] = field(default_factory=set)  # real logical paths of files read (or tried)
    _targets: dict[str, str | None] = field(default_factory=dict)  # link -> the logical path it leads to

    # -- copying what was touched ---------------------------------------------------------------
    def touch(self, logical: str) -> str | None:
        """Copy `logical` and everything on the way to it (links, directories); its real logical path."""
        if not self._allowed(logical):
            return None
        return self._resolve(os.path.normpath("/" + logical.lstrip("/")), 0, final=True)

    def list(self, logical: str) -> None:
        """Copy a listed directory's entries: subdirectories, links (not followed), and files.

        A file that was listed but never read becomes an empty placeholder (its name is what the
        listing told): reading every listed file could block (/proc/kmsg) or be huge (/proc/kcore).
        """
        real = self._resolve(os.path.normpath("/" + logical.lstrip("/")), 0, final=True)
        if real is None or real not in self.dirs:
            return
        for name, kind in self.src.scan(real):
            child = f"{real.rstrip('/')}/{name}"
            if not self._allowed(child):
                continue
            if kind == "link":
                self._link(child)
            elif kind == "dir":
                self.dirs.add(child)
            elif kind == "file" and child not in self._tried:
                self.files[child] = b""

    def _allowed(self, logical: str) -> bool:
        """Other processes are not part of a snapshot (a live-only check such as "is irqbalance
        running" lists them all): only the --pid processes and the capturing one (/proc/self)."""
        m = _PROC_PID.match(logical)
        return m is None or self.pids is None or maybe_int(m.group(1), logical) in self.pids

    def _resolve(self, logical: str, hops: int, *, final: bool) -> str | None:
        if logical == "/":
            return "/"
        if logical in self._resolved:
            return self._resolved[logical]
        parent, name = logical.rsplit("/", 1)
        parent_real = self._resolve(parent or "/", hops, final=False)
        out = None
        if parent_real is not None:
            here = f"{parent_real.rstrip('/')}/{name}"
            try:
                kind = self.src.kind(here, follow=False)
            except InputError:  # a ".." name
                kind = None
            if kind == "link":
                target = self._link(here, hops)
                if target is not None and hops < _MAX_LINKS and not _FD.match(here):
                    out = self._resolve(target, hops + 1, final=final)
            elif kind == "dir":
                self.dirs.add(here)
                out = here
            elif kind == "file":
                self._file(here)
                out = here
        self._resolved[logical] = out
        return out

    def _file(self, logical: str) -> None:
        if logical in self._tried:
            return
        self._tried.add(logical)
        try:
            data = _read_bounded(self.src, logical)
        except PermissionError:
            self.unreadable.add(logical)
            return
        except (OSError, Escapes):
            return  # write-only, EIO, past MAX_FILE_BYTES: the live read fails too
        if _ENVIRON.match(logical):
            data = _named_keys(data)
        self.files[logical] = data

    def _link(self, logical: str, hops: int = 0) -> str | None:
        """Record a symlink, its text kept as it is (a process's /dev fd as it is); the logical path it
        leads to in the source, None where it dangles there (it dangles in the copy too).

        Only the live node's links are ever rewritten: an absolute one, or one that climbs above `/` (which
        the kernel stops at), becomes the relative link to where it leads. In a saved root such a link
        leaves the root, so it is kept as written and dangles in the copy as in the root: rewritten, the
        copy saw more than the root (a link climbing above the top made 1 NUMA node 4)."""
        if logical in self._targets:
            return self._targets[logical]
        self._targets[logical] = None  # while it is followed: met again, it loops
        target = self.src.read_link(logical)
        if target is None:
            return None
        if _FD.match(logical):
            if target.startswith("/dev/"):  # which GPU a process holds; any other open file is private
                self.links[logical] = target
            return None
        live = self.src.is_live
        if os.path.isabs(target):
            if not live:
                self.links[logical] = target  # leaves a saved root: dangles there and in the copy
                return None
            where = self._follow(["/"], target, hops, clamp=True)
        else:
            where = self._follow(os.path.dirname(logical).split("/"), target, hops, clamp=live)
        if where is None:
            if not live:
                self.links[logical] = target
            return None
        rewrite = live and (os.path.isabs(target) or _climbs(logical, target))
        self.links[logical] = os.path.relpath(where, os.path.dirname(logical)) if rewrite else target
        self._targets[logical] = where
        return where

    def _follow(self, start: list[str], target: str, hops: int, *, clamp: bool) -> str | None:
        """Where link text `target` leads from the real directory `start` (its components), resolved as the
        kernel does, component by component: a link on the way is followed (and recorded) before a ".."
        after it is applied. A ".." at the top stays there if `clamp` (the live node's `/`), else the link
        leaves the root: None. None too where a component on the way is missing."""
        parts = [p for p in start if p]
        comps = [p for p in target.split("/") if p not in ("", ".")]
        for i, comp in enumerate(comps):
            if comp == "..":
                if parts:
                    parts.pop()
                elif not clamp:
                    return None
                continue
            parts.append(comp)
            if i < len(comps) - 1 and ".." in comps[i + 1:]:  # a ".." later applies to where this one leads
                real = self._resolve("/" + "/".join(parts), hops + 1, final=False)
                if real is None:
                    return None
                parts = [p for p in real.split("/") if p]
        return "/" + "/".join(parts)

    # -- writing ------------------------------------------------------------------------------
    def write_dir(self, dest: Path) -> None:
        """Write the capture beneath DEST's directory handle: every directory made and opened with no
        link followed, every file created new (O_EXCL | O_NOFOLLOW), so nothing placed in DEST (or
        swapped in while writing) redirects a write out of it (OSError: ELOOP, EEXIST)."""
        top = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        opened = {"": top}

        def dir_fd(rel: str) -> int:
            if rel not in opened:
                parent, name = os.path.split(rel)
                at = dir_fd(parent)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=at)
                opened[rel] = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=at)
            return opened[rel]

        try:
            for d in sorted(self.dirs):
                dir_fd(d.strip("/"))
            for path, data in self.files.items():
                parent, name = os.path.split(path.strip("/"))
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=dir_fd(parent))
                with open(fd, "wb") as fh:
                    fh.write(data)
            for path, target in self.links.items():
                parent, name = os.path.split(path.strip("/"))
                with contextlib.suppress(FileExistsError):
                    os.symlink(target, name, dir_fd=dir_fd(parent))
        finally:
            for fd in opened.values():
                os.close(fd)

    def write_tar(self, dest: Path | BinaryIO, top: str, *, mtime: int | None = None, gzipped: bool = True) -> None:
        """Members sorted, owned by uid/gid 0, no name or time in the gzip header: with a fixed `mtime`
        the same capture always gives the same bytes (fixtures/ is packed this way). `dest` is a path
        or an open binary file (numatune.system.outfile's temporary file)."""
        if not hasattr(dest, "write"):
            with open(dest, "wb") as raw:
                self.write_tar(raw, top, mtime=mtime, gzipped=gzipped)
            return
        now = int(time.time()) if mtime is None else mtime
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=dest, mtime=0)) if gzipped else dest
            tar = stack.enter_context(tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT))
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


def _climbs(logical: str, target: str) -> bool:
    """Whether relative link text `target` at `logical` climbs above the top (more ".." than directories)."""
    depth = len([p for p in os.path.dirname(logical).split("/") if p])
    for comp in target.split("/"):
        if comp == "..":
            depth -= 1
            if depth < 0:
                return True
        elif comp not in ("", "."):
            depth += 1
    return False


def _read_bounded(src: Host, logical: str) -> bytes:
    """The file's bytes (TooLarge past MAX_FILE_BYTES); the live node in chunked reads (procfs refuses one
    huge read), a saved root through its own bounded read."""
    if not src.is_live:
        return src._read_raw(logical)  # noqa: SLF001 - the Host's one raw read, errors as they are
    from numatune.system.rootdir import read_fd

    fd = os.open(src.path(logical), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return read_fd(fd, MAX_FILE_BYTES)
    finally:
        os.close(fd)


def _named_keys(raw: bytes) -> bytes:
    """Of an environment, only the keys the audit reader reads; the rest is dropped here, unseen."""
    from numatune.pieces import keyed
    from numatune.readers.procs import ENVIRON_KEYS
    from numatune.readers.settings import IRQBALANCE_KEYS

    text = raw.decode("latin-1")  # byte for byte: the values go back as they came
    # the entry each reader takes (audit's the last of a key, irq's the first), never splitting the rest: an
    # environment of 11 million entries is one search a key
    kept = {**keyed(text, "\0", ENVIRON_KEYS), **keyed(text, "\0", IRQBALANCE_KEYS, last=False)}
    return "".join(f"{key}={value}\0" for key, value in kept.items()).encode("latin-1")


def dry_run(src: Host, pids: Iterable[int], main: Any, make_obj: Callable[[RecordingHost], object]) -> RecordingHost:
    """Run every command of DRY_RUN (and PID_DRY_RUN per pid) on `src`, output discarded; what they read.

    `main` is the CLI's click group and `make_obj` its context object over a Host: the command line
    layer hands them in (a use case does not import the layer above it)."""
    import click

    rec = RecordingHost(src.root, src.label, src._fs)  # noqa: SLF001 - the same contained access
    runs = [*DRY_RUN, *(tuple(a.format(pid=pid) for a in cmd) for pid in pids for cmd in PID_DRY_RUN)]
    ctx = click.Context(main)
    for args in runs:
        command = main.get_command(ctx, args[0])
        if command is None:
            continue
        sink = io.StringIO()
        # A command that fails on this node (no GPU for launch's default) fails the same way on
        # replay; one that fails on a bug is named in SNAPSHOT.txt (what it read so far is kept).
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                command.main(args=list(args[1:]), prog_name=f"numatune {args[0]}", standalone_mode=False,
                             obj=make_obj(rec))
            except click.Abort:  # click's word for Ctrl-C (no command here prompts): the snapshot stops, 130
                raise KeyboardInterrupt from None
            except (NumatuneError, click.ClickException, click.exceptions.Exit, SystemExit):
                pass
            except Exception as exc:  # noqa: BLE001 - a snapshot is still worth taking
                rec.errors.append(f"{' '.join(args)}: {type(exc).__name__}: {exc}")
    return rec


def _rank_ancestors(src: Host, pids: tuple[int, ...]) -> set[int]:
    """The ranks above the --pid workers (same rank variables): `audit WORKER` reads its rank to judge it, so the
    snapshot keeps them (what the dry run read of them) and its replay tells worker from rank as live does."""
    from numatune.errors import NumatuneError
    from numatune.readers.procs import rank_ancestors, read_process

    procs = []
    for pid in pids:
        try:
            procs.append(read_process(src, pid, threads=False))
        except NumatuneError:
            continue
    return set(rank_ancestors(src, procs))


def capture(src: Host, pids: Iterable[int], main: Any, make_obj: Callable[[RecordingHost], object]) -> Capture:
    """What a snapshot of `src` holds: every path the dry run touched or listed, copied (see dry_run)."""
    pids = tuple(pids)
    for pid in pids:
        if not src.is_dir(f"/proc/{pid}"):
            raise ProcessGone(f"no process {pid}")
    from numatune.readers.settings import irqbalance_process

    rec = dry_run(src, pids, main, make_obj)
    self_pid = src.read_link("/proc/self")
    running, daemon = irqbalance_process(src)  # whether it runs is part of the node's IRQ state: kept for replay
    kept = {n for n in (maybe_int(p, "/proc/self") for p in (self_pid, daemon) if p) if n is not None}
    kept |= _rank_ancestors(src, pids)
    cap = Capture(src, pids=frozenset(pids) | kept, errors=rec.errors, irqbalance=running)
    for logical in rec.touched:
        cap.touch(logical)
    for logical in rec.listed:
        cap.list(logical)
    if _has_nvidia_gpu(src) or src.exists("/numatune/nvml.json"):
        from numatune.readers.nvml import SAVED, snapshot_bytes

        record = snapshot_bytes(src)  # NVLink, fabric, UUIDs: not files, so the recording Host cannot see them
        if record is not None:
            cap.files[SAVED] = record
    from numatune.commands.check import NUMACTL_SAVED, numactl_record

    if src.is_live or src.exists(NUMACTL_SAVED):
        cap.files[NUMACTL_SAVED] = numactl_record(src)  # a tool's version: not a file either
    return cap


def _has_nvidia_gpu(src: Host) -> bool:
    return bool(src.listdir("/proc/driver/nvidia/gpus")) or any(
        src.read_optional(f"/sys/bus/pci/devices/{bdf}/vendor") == "0x10de"
        and (src.read_optional(f"/sys/bus/pci/devices/{bdf}/class") or "").startswith("0x03")
        for bdf in src.listdir("/sys/bus/pci/devices")
    )


#: Archive and compressed-file suffixes snapshot does not write: `-o x.zip` made a directory named x.zip.
OTHER_ARCHIVES = (".zip", ".gz", ".xz", ".bz2", ".zst", ".lz4", ".7z", ".rar", ".cpio", ".tar.xz", ".tar.bz2",
                  ".tar.zst", ".txz", ".tbz2")


def _refuse_unread_processes(cap: Capture, pids: tuple[int, ...]) -> None:
    """A --pid process whose files could not be read (another user's, without the right to): exit 4 as a live
    `audit PID` is, before anything is written; a replay would read the process as "ok" on what is missing."""
    for pid in pids:
        denied = sorted(p for p in cap.unreadable if p.startswith(f"/proc/{pid}/"))
        if denied:
            from numatune.errors import PermissionDenied

            raise PermissionDenied(f"cannot read {', '.join(denied[:3])}{' ...' if len(denied) > 3 else ''}: "
                                   f"no right to read process {pid} (another user's); nothing was written",
                                   hint="run as root or as the process owner, or leave out --pid")


def snapshot(src: Host, dest: Path, pids: Iterable[int], main: Any,
             make_obj: Callable[[RecordingHost], object]) -> Capture:
    """Capture `src` (usually the live node) into `dest`: a directory, or an archive for .tar/.tar.gz/.tgz
    (a gzipped one for `-`, /dev/stdout and the other streams: `snapshot -o - | ssh ...`)."""
    from numatune.system.outfile import is_stream, refuse_archive_to_terminal, write_file

    pids = tuple(pids)
    stream = is_stream(dest)
    if stream:
        refuse_archive_to_terminal(str(dest))
    name = "snapshot.tar.gz" if stream else dest.name
    archive = name.endswith((".tar.gz", ".tgz", ".tar"))
    if not archive and name.lower().endswith(OTHER_ARCHIVES) and not os.path.isdir(dest):
        from numatune.errors import UsageError

        raise UsageError(f"--output {dest}: snapshot writes a .tar.gz, .tgz or .tar archive, or a directory "
                         f"(a name without one of those suffixes), not {name[name.rfind('.'):]}")
    if not archive:
        _check_directory(dest)
    cap = capture(src, pids, main, make_obj)
    _refuse_unread_processes(cap, pids)
    note = (
        f"numatune {__version__} snapshot of {src.label}\n"
        f"taken: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        f"kernel: {src.read_optional('/proc/sys/kernel/osrelease') or 'unknown'}\n"
        f"pids: {' '.join(str(p) for p in pids) or '-'}\n"
        + ("" if cap.irqbalance is None else f"irqbalance: {'running' if cap.irqbalance else 'not running'}\n")
        + "".join(f"unreadable: {p}\n" for p in sorted(cap.unreadable))
        + "".join(f"dry-run error: {e}\n" for e in cap.errors)
    )
    cap.files["/SNAPSHOT.txt"] = note.encode()
    if archive:
        top = re.sub(r"\.(tar\.gz|tgz|tar)$", "", name) or "snapshot"
        write_file(dest, fill=lambda fh: cap.write_tar(fh, top, gzipped=not name.endswith(".tar")))
    else:
        _write_directory(cap, dest)
    return cap


def _check_directory(dest: Path) -> None:
    """A snapshot directory is new or empty, and not a link; a name this user cannot even look at is exit 4."""
    from numatune.system.outfile import cannot_write

    try:
        if dest.is_symlink():
            raise InputError(f"{dest} is a link: a snapshot directory is never written through one",
                             hint="pass the directory itself, or a new name")
        if dest.exists() and not dest.is_dir():
            raise InputError(f"{dest} exists and is not a directory",
                             hint="an archive's name ends in .tar.gz, .tgz or .tar; `-o -` writes one to standard "
                                  "output")
        if dest.exists() and any(dest.iterdir()):
            raise InputError(f"{dest} exists and is not empty")
    except OSError as exc:
        raise cannot_write(str(dest), exc) from None


def _write_directory(cap: Capture, dest: Path) -> None:
    """Write the capture into DEST (new or empty). Whatever stops it (a full disk, Ctrl-C) takes back what was
    written, DEST itself too if it was made here: no directory is left that looks like a whole snapshot."""
    import shutil

    from numatune.system.outfile import cannot_write

    made = not dest.exists()
    try:
        try:
            dest.mkdir(parents=True, exist_ok=True)
            cap.write_dir(dest)
        except BaseException:
            if made:
                shutil.rmtree(dest, ignore_errors=True)
            elif dest.is_dir() and not dest.is_symlink():
                for entry in os.scandir(dest):  # it was empty: all of this is the snapshot's
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
            raise
    except OSError as exc:
        raise cannot_write(str(dest), exc) from None
