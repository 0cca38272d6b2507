"""A saved directory root, contained: every open is relative to one directory handle and never
follows a link out of it.

The root is resolved once and opened as a directory; each path is opened relative to that handle
with openat2(2) and RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6+), so the kernel refuses any
link that is absolute or climbs out (EXDEV). Where openat2 is missing (an older kernel, or a sandbox
that filters it) the same rule is applied by hand: the path is walked one component at a time with
lstat relative to the root handle, links resolved in the root's own namespace (`tarindex.walk`),
and the file opened with O_NOFOLLOW. A file is opened as O_PATH first and read only if it is a
regular file: a device node or FIFO in a stranger's tree is never opened. Every read is bounded.

Stdlib only; ctypes is imported on the first saved directory root, never for the live node.
"""

from __future__ import annotations

import errno
import os
import stat

from numatune.system.tarindex import DIRECTORY, REGULAR, SYMLINK, Escapes, walk

_O_PATH = getattr(os, "O_PATH", 0)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every architecture's unified table (Linux 5.6)
_READ_CHUNK = 1 << 16
_LARGE, _LARGE_KEPT = 1 << 16, 64 << 20  # files kept once read (hard links to one file read once), in all


class TooLarge(OSError):
    """A file past the read bound (read as unreadable, with a note)."""


class NotRegular(OSError):
    """A device node, FIFO or socket in a saved root: never opened."""


def read_fd(fd: int, limit: int, regular_size: int | None = None) -> bytes:
    """All of an open file, in chunks; TooLarge past `limit` bytes (never more than limit + one chunk held).

    `regular_size`: the st_size of a regular file. A read of a regular file returns less than asked only
    at its end, so a first read of one byte more than that size ends it in one call (a saved tree's
    read opens some 500 files)."""
    if regular_size is not None and regular_size < limit:
        first = os.read(fd, regular_size + 1)
        if len(first) <= regular_size:
            return first
        chunks, total, size = [first], len(first), _READ_CHUNK  # grown since the look: read on
    else:
        chunks, total, size = [], 0, _READ_CHUNK
    while True:
        chunk = os.read(fd, size)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise TooLarge(errno.EFBIG, f"larger than {limit} bytes")
        chunks.append(chunk)
        size = min(1 << 20, size * 2)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if stat.S_ISREG(mode):
        return REGULAR
    if stat.S_ISLNK(mode):
        return SYMLINK
    return "other"


class _Openat2:
    """openat2(2) through ctypes; `usable` is False where the kernel or a sandbox does not offer it.

    A call costs a few microseconds once the argument types are declared and each flag set's
    `struct open_how` is built once (a saved tree's read opens some 500 files)."""

    def __init__(self) -> None:
        import ctypes

        class OpenHow(ctypes.Structure):
            _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

        self._ct, self._how_type = ctypes, OpenHow
        self._hows: dict[int, tuple[object, int]] = {}
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._syscall.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)

    def open(self, dirfd: int, path: str, flags: int) -> int:
        how = self._hows.get(flags)
        if how is None:
            ct = self._ct
            struct = self._how_type(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
            how = self._hows[flags] = (struct, ct.addressof(struct), ct.sizeof(struct))
        fd = self._syscall(_SYS_OPENAT2, dirfd, os.fsencode(path), how[1], how[2])
        if fd < 0:
            err = self._ct.get_errno()
            raise OSError(err, os.strerror(err), path)
        return fd


_OPENAT2: list = []  # [] unprobed, [None] unusable, [_Openat2]


def _openat2(dirfd: int) -> _Openat2 | None:
    if not _OPENAT2:
        try:
            impl = _Openat2()
            os.close(impl.open(dirfd, ".", _O_PATH | os.O_DIRECTORY))
            _OPENAT2.append(impl)
        except (OSError, AttributeError):  # ENOSYS, EPERM under seccomp, no libc
            _OPENAT2.append(None)
    return _OPENAT2[0]


class RootDir:
    """One saved directory root: `real` its resolved path, `fd` its handle (kept open)."""

    __slots__ = ("real", "fd", "_at2", "_large", "_large_bytes")

    def __init__(self, real: str, *, beneath: bool = True) -> None:
        self.real = real
        self.fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._at2 = _openat2(self.fd) if beneath else None
        # Large files by identity (device, inode, size, mtime): read once however many hard links reach
        # them, at most _LARGE_KEPT bytes kept.
        self._large: dict[tuple[int, int, int, int], bytes] = {}
        self._large_bytes = 0

    # -- resolving ------------------------------------------------------------------------------
    def _walk(self, rel: str, follow: bool) -> str:
        """The fallback: `rel` resolved by hand, link by link, relative to the root handle."""
        fd = self.fd

        def kind_of(p: str) -> str | None:
            try:
                return _kind(os.lstat(p, dir_fd=fd).st_mode)
            except OSError:
                return None

        out = walk(rel, kind_of, lambda p: os.readlink(p, dir_fd=fd), follow=follow)
        if out is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", rel)
        return out or "."

    def open(self, rel: str, flags: int, *, follow: bool = True) -> int:
        """An fd for `rel` opened beneath the root; Escapes for a path whose links leave it."""
        rel = rel or "."
        if self._at2 is not None:
            try:
                return self._at2.open(self.fd, rel, flags | (0 if follow else os.O_NOFOLLOW))
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise Escapes(rel) from None
                if exc.errno == errno.ELOOP and follow:
                    raise Escapes(rel) from None  # a loop, or a magic link: never followed
                raise
        return self._open_walked(self._walk(rel, follow), flags)

    def _open_walked(self, path: str, flags: int) -> int:
        """Open a link-free path one component at a time, each with O_NOFOLLOW from the one before: a
        directory swapped for a link after the walk (a race) fails (ELOOP, ENOTDIR), never followed."""
        *dirs, last = path.split("/")
        fd = self.fd
        try:
            for part in dirs:
                nfd = os.open(part, (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                if fd != self.fd:
                    os.close(fd)
                fd = nfd
            return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            if fd != self.fd:
                os.close(fd)

    def kind(self, rel: str, *, follow: bool = True) -> str | None:
        try:
            fd = self.open(rel, _O_PATH, follow=follow)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_PATH | O_NOFOLLOW on a link opens the link itself; ELOOP is a loop
                return None
            raise
        try:
            return _kind(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int) -> bytes:
        """A regular file's bytes, at most `limit` (TooLarge past it); NotRegular for anything else."""
        fd, size = self.open_regular(rel)
        ident = None
        try:
            if size >= _LARGE:  # read once however many hard links reach it
                st = os.fstat(fd)
                ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                kept = self._large.get(ident)
                if kept is not None:
                    return kept
            data = read_fd(fd, limit, size)
        finally:
            os.close(fd)
        if ident is not None and len(data) >= _LARGE:
            if self._large_bytes + len(data) > _LARGE_KEPT:
                self._large.clear()
                self._large_bytes = 0
            self._large[ident] = data
            self._large_bytes += len(data)
        return data

    def open_regular(self, rel: str) -> tuple[int, int]:
        """(fd open for reading, size) of a regular file beneath the root; NotRegular (a FIFO, a device:
        never opened), IsADirectoryError, or Escapes (a link that leaves the root: never opened)."""
        pfd = self.open(rel, _O_PATH)
        try:
            st = os.fstat(pfd)
            if not stat.S_ISREG(st.st_mode):
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", rel)
                raise NotRegular(errno.EINVAL, "not a regular file: never opened in a saved root")
            return os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), st.st_size
        finally:
            os.close(pfd)

    def listdir(self, rel: str) -> list[tuple[str, str]]:
        """(name, kind) of a directory's entries (links not followed)."""
        fd = self.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as it:
                return [(e.name, DIRECTORY if e.is_dir(follow_symlinks=False) else
                         SYMLINK if e.is_symlink() else REGULAR if e.is_file(follow_symlinks=False) else "other")
                        for e in it]
        finally:
            os.close(fd)

    def readlink(self, rel: str) -> str:
        head, _, name = rel.rpartition("/")
        fd = self.open(head, _O_PATH | os.O_DIRECTORY)
        try:
            return os.readlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def realpath(self, rel: str) -> str | None:
        """The path `rel` resolves to, relative to the root ("" for the root); None if absent."""
        try:
            fd = self.open(rel, _O_PATH)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        top = self.real.rstrip("/")
        if real == top:
            return ""
        return real[len(top) + 1:] if real.startswith(top + "/") else None

    # -- writing ----------------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> None:
        """Overwrite an existing file beneath the root (no link followed out, none created). Looked at
        through O_PATH first, as `read` does: a device node or FIFO is never opened, and a file with
        another hard link (which may be a file outside the root) is never written."""
        pfd = self.open(rel, _O_PATH)
        try:
            st = os.fstat(pfd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(errno.EINVAL, "not a regular file: never opened in a saved root")
            if st.st_nlink != 1:
                raise NotRegular(errno.EMLINK, "a file with other hard links: never written in a saved root")
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC)
        finally:
            os.close(pfd)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        self._large.clear()  # what was read before is not what is there now
        self._large_bytes = 0

    def create(self, rel: str, data: bytes) -> None:
        """Create a new file at `rel`, its directories made as needed, none of them a link (ELOOP,
        ENOTDIR: refused) and the file never an existing one (EEXIST)."""
        *dirs, name = rel.split("/")
        fd = os.dup(self.fd)
        try:
            for part in dirs:
                try:  # noqa: SIM105 - contextlib costs collections and functools at start-up
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nfd
            write_new_at(fd, name, data)
        finally:
            os.close(fd)


def write_new_at(dirfd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Create `name` in the directory `dirfd` with `data`, atomically and never over an existing
    file: a temporary file (O_EXCL, O_NOFOLLOW) hard-linked to its name, then removed."""
    tmp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.link(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
    finally:
        os.unlink(tmp, dir_fd=dirfd)
