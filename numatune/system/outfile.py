"""The one writer of every output file (`-o`, `--emit`, `--save`, `snapshot -o`).

A temporary file is created in the destination's directory (O_EXCL | O_NOFOLLOW: never through a
link an attacker placed there), filled, and renamed over the name: a reader sees the old file or
the whole new one, and a link at the name is replaced, never written through. A missing directory, a
full disk or a destination on a kernel filesystem (/proc, /sys, /dev) is one line and exit 3 (InputError),
a directory this user may not write or search exit 4 (PermissionDenied), with nothing left behind (after
an interrupt too: the temporary file is removed). The streams people name as files are the exception:
`-` and /dev/stdout (standard output), /dev/stderr and /dev/null are written straight through.

A leaf module: stdlib only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import BinaryIO

from numatune.errors import InputError, NumatuneError, PermissionDenied

_KERNEL_FS = ("/proc", "/sys", "/dev")
#: Destinations that are a stream, not a file: written straight through (no temporary, no rename).
STREAMS = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2, "/dev/null": None}


def output_name(path: str | os.PathLike[str]) -> str:
    """How a note names an -o target: "standard output" for - and /dev/stdout (a file named "-" is never made)."""
    return "standard output" if os.fspath(path) in ("-", "/dev/stdout") else os.fspath(path)


def is_stream(path: str | os.PathLike[str]) -> bool:
    """True for `-`, /dev/stdout, /dev/stderr and /dev/null (what `snapshot -o -` pipes)."""
    return os.fspath(path) in STREAMS


def write_file(path: str | os.PathLike[str], data: bytes | str | None = None, *,
               fill: Callable[[BinaryIO], None] | None = None, mode: int = 0o644, replace: bool = True) -> str:
    """Write `data` (or what `fill(fh)` writes) to `path` atomically; returns the path written.

    `replace=False` refuses an existing file (EEXIST: the `irq apply` state file is never overwritten).
    """
    name = os.fspath(path)
    if replace and name in STREAMS:
        return _write_stream(name, data, fill)
    base = os.path.basename(name)
    if not base or base in (".", ".."):
        raise InputError(f"cannot write {name}: not a file name")
    folder = os.path.dirname(os.path.abspath(name))
    real = os.path.realpath(folder)
    if any(real == k or real.startswith(k + "/") for k in _KERNEL_FS):
        raise InputError(f"cannot write {name}: {real} is a kernel filesystem, not a place for files")
    if isinstance(data, str):
        data = data.encode("utf-8", "backslashreplace")  # a lone surrogate shown, never a failed write
    tmp = f".{base}.{os.getpid()}.numatune-tmp"
    try:
        dirfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"cannot write {name}: no directory {folder}") from None
    except OSError as exc:
        raise cannot_write(name, exc) from None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)  # as asked, whatever the umask made of O_CREAT's mode
                _fill(fh, data, fill)
            if replace:
                os.rename(tmp, base, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            else:
                os.link(tmp, base, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dirfd)
    except FileExistsError:
        raise InputError(f"cannot write {name}: it already exists") from None
    except IsADirectoryError:
        raise InputError(f"cannot write {name}: it is a directory") from None
    except OSError as exc:
        raise cannot_write(name, exc) from None
    finally:
        os.close(dirfd)
    return name


def cannot_write(name: str, exc: OSError) -> NumatuneError:
    """The one line for an output that could not be written: exit 4 where this user may not (EACCES, EPERM),
    else exit 3 (a full disk, a read-only filesystem, a missing directory)."""
    import errno

    message = f"cannot write {name}: {exc.strerror or exc}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(message, hint="give a path in a directory this user may write")
    return InputError(message)


def drop_stdout(exc: BaseException) -> None:
    """After a failed write to standard output (a closed pipe, a full disk: `exc`; anything else is left alone):
    its descriptor is pointed at /dev/null, so that what is still buffered for it goes nowhere and the
    interpreter's last flush cannot fail again (which prints an "Exception ignored" line and exits 120)."""
    import sys

    from numatune.errors import is_stream_failure

    if not (isinstance(exc, BrokenPipeError) or is_stream_failure(exc)):
        return
    try:
        fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.dup2(fd, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):  # a stand-in stream without a descriptor, or None: left as is
        pass
    finally:
        os.close(fd)


def _write_stream(name: str, data: bytes | str | None, fill: Callable[[BinaryIO], None] | None) -> str:
    """Standard output or error (through sys.stdout/stderr's byte buffer, after what was printed there),
    or /dev/null. A closed pipe (BrokenPipeError) is left to the command line, which ends quietly."""
    import sys

    if STREAMS[name] is None:
        with open(os.devnull, "wb") as sink:
            _fill(sink, data, fill)
        return name
    stream = sys.stdout if STREAMS[name] == 1 else sys.stderr
    if fill is not None:
        refuse_archive_to_terminal(name)
    stream.flush()
    out = getattr(stream, "buffer", None)
    if out is None:  # a text-only stand-in (a caller's StringIO): text goes there, an archive cannot
        if fill is not None or isinstance(data, bytes):
            raise InputError(f"cannot write {name}: it takes only text here")
        stream.write(data or "")
        return name
    _fill(out, data, fill)
    out.flush()
    return name


def refuse_archive_to_terminal(name: str) -> None:
    """InputError when stream `name` is a terminal: an archive's bytes there are garbage and control codes
    (tar refuses the same). Asked before the work that makes the archive, and again when writing it."""
    import sys

    fd = STREAMS.get(name)
    stream = sys.stdout if fd == 1 else sys.stderr if fd == 2 else None
    try:
        tty = stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        raise InputError(f"refusing to write an archive to a terminal ({name})",
                         hint="redirect it to a file or pipe it: numatune snapshot -o - > node.tar.gz")


def _fill(fh: BinaryIO, data: bytes | str | None, fill: Callable[[BinaryIO], None] | None) -> None:
    if fill is not None:
        fill(fh)
    else:
        fh.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data or b"")
