"""Host: the one object through which numatune reads (and, for `irq apply`, writes) a system.

A Host wraps a root: `/` for the live node, a directory holding `sys/` and `proc/` (a fixture or an
extracted snapshot), or a `.tar`/`.tar.gz` snapshot, unpacked once into a private temporary
directory. Every path the rest of the code uses is *logical* ("/sys/devices/system/node"), so a
saved tree and the live node take exactly the same code path. OSError is turned into numatune's
errors here and nowhere else.

A saved root is untrusted: nothing is read through a link that leaves it (such a file reads as
missing), and an archive is unpacked under `tarfile.data_filter`'s rule with bounds on its size.
A file that exists but cannot be read (EACCES) is not silently "missing": it is recorded in
`Host.notes`, which the reports show, so the user learns to run as root.
"""

from __future__ import annotations

import errno
import os
import stat

from numatune.cpulist import parse_cpulist, parse_cpumask
from numatune.errors import ArchiveRefused, InputError, NotASysfsTree, ParseError, PermissionDenied, ReadError

DENIED = "permission denied: run as root"  # the reason in a note for a file that exists but cannot be read
ESCAPES = "a link that leaves the root: read as missing"
# What an archive may cost to unpack (the largest fixture, 256 CPUs, is 16k members and 15 MB).
MAX_MEMBERS = 400_000
MAX_TOTAL_BYTES = 2 << 30
MAX_FILE_BYTES = 64 << 20
MAX_DEPTH = 64
_O_PATH = getattr(os, "O_PATH", 0)
_NOFOLLOW_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def natural_key(name: str) -> list[object]:
    r"""Sort "node10" after "node9": text and numbers alternating, as re.split(r"(\d+)") gives them (the
    `re` module, ~5% of a `check`, stays unimported on the report paths)."""
    head = name.rstrip("0123456789")
    if head.replace("_", "x").replace("-", "x").isalpha():  # "cpu12", "thread_siblings_list": the usual names
        return [head, int(name[len(head):]), ""] if len(head) < len(name) else [name]
    key: list[object] = []
    text = digits = ""
    for ch in name:
        if ch.isdecimal():
            digits += ch
        else:
            if digits:
                key += (text, int(digits))
                text = digits = ""
            text += ch
    if digits:
        key += (text, int(digits))
        text = ""
    key.append(text)
    return key


def numbered(name: str, prefix: str, suffix: str = "") -> int | None:
    r"""N when NAME is PREFIX, decimal digits N, SUFFIX ("cpu12" -> 12), else None: re.match(r"cpu(\d+)$")."""
    if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
        digits = name[len(prefix):len(name) - len(suffix)]
        if digits.isdecimal():
            return int(digits)
    return None


def _is_fd_link(name: str) -> bool:
    """NAME ends in proc/PID/fd/N (an archive member)."""
    parts = name.split("/")
    return (len(parts) >= 4 and parts[-4] == "proc" and parts[-3].isdecimal() and parts[-2] == "fd"
            and parts[-1].isdecimal())


def _read_fd(fd: int) -> bytes:
    """Everything up to end of file, then the descriptor closed."""
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _clean(text: str) -> str:
    return text.replace("\x00", "").strip()


class Host:
    """A root to read; `label` is how the user named it (for messages)."""

    __slots__ = ("root", "label", "notes", "_inside", "_dirs", "_was_unreadable")

    def __init__(self, root: str = "/", label: str = "/") -> None:
        self.root = os.fspath(root)
        self.label = label
        # (logical path, reason) for files that exist but could not be read, in the order met.
        self.notes: list[tuple[str, str]] = []
        self._inside: str | None = None  # the real root + "/", computed on first read of a saved root
        self._dirs: dict[str, str | None] = {}  # a saved root's directories: logical -> real (None: outside)
        self._was_unreadable: frozenset[str] | None = None  # a snapshot's "unreadable:" list, loaded lazily

    def __repr__(self) -> str:
        return f"Host({self.root!r}, label={self.label!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Host) and (self.root, self.label) == (other.root, other.label)

    def __hash__(self) -> int:
        return hash((self.root, self.label))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, spec: str | os.PathLike[str] | None = None) -> Host:
        """Open a root given by the user: None or "/" is the live node."""
        if spec is None or os.fspath(spec) in ("", "/"):
            return cls("/", "/")
        path = os.path.abspath(os.fspath(spec))
        if not os.path.exists(path):
            raise InputError(f"root {spec} does not exist")
        if os.path.isfile(path):
            return cls(_unpack_snapshot(path), os.fspath(spec))
        root = _find_tree_root(os.path.realpath(path))
        if root is None:
            raise NotASysfsTree(
                f"{spec} is not a sysfs/procfs tree (no sys/ or proc/ inside)",
                hint="pass a directory made by `numatune snapshot` or a snapshot archive",
            )
        return cls(root, os.fspath(spec))

    @property
    def is_live(self) -> bool:
        return self.root == "/"

    # -- paths --------------------------------------------------------------------------------
    def path(self, logical: str) -> str:
        """The real path of a logical one (a str: pathlib costs an import on every command)."""
        rel = logical.lstrip("/")
        if ".." in rel and ".." in rel.split("/"):  # the split only when a ".." could be a component
            raise InputError(f"path escapes the root: {logical}")  # a name read from the tree, not a bug: exit 3
        return os.path.join(self.root, rel)

    def logical(self, real: str | os.PathLike[str]) -> str:
        """Turn a real path under the root back into the logical one used in messages."""
        rel = os.path.relpath(real, self.root)
        return "/" + rel if rel != "." else "/"

    def exists(self, logical: str) -> bool:
        return os.path.exists(self.path(logical))

    def is_dir(self, logical: str) -> bool:
        return os.path.isdir(self.path(logical))

    def listdir(self, logical: str) -> list[str]:
        """Entries of a directory in natural order; [] if it does not exist or cannot be listed (noted)."""
        # `.keep` marks a directory that is empty in a fixture tree kept in git; it is never a sysfs name.
        return sorted((n for n in self.entries(logical) if n != ".keep"), key=natural_key)

    def entries(self, logical: str) -> list[str]:
        """Entries of a directory unsorted, for membership tests (one listing instead of failed opens,
        without listdir's sort); [] if it does not exist or cannot be listed (noted)."""
        try:
            return os.listdir(self.path(logical)) if self.root == "/" else self._list_saved(logical)
        except (FileNotFoundError, NotADirectoryError, _Escapes):
            if self._was_denied(logical):
                self.note(logical, DENIED)
            return []
        except PermissionError:
            self.note(logical, DENIED)
            return []
        except OSError as exc:
            raise ReadError(logical, exc.strerror or str(exc)) from exc

    def resolve(self, logical: str) -> str | None:
        """Follow symlinks inside the root; None if the link dangles or leaves the root."""
        if self.root == "/":
            real = os.path.realpath(self.path(logical))
            if not os.path.exists(real):
                return None
        else:  # as _contained: one O_PATH open and a readlink instead of an lstat per component
            try:
                fd = os.open(self.path(logical), _O_PATH | os.O_CLOEXEC)
            except OSError:
                return None
            try:
                real = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                real = os.path.realpath(self.path(logical))
            finally:
                os.close(fd)
        root = self.root
        if root != "/" and not (real == root or real.startswith(root.rstrip("/") + "/")):
            return None
        return self.logical(real)

    def link_name(self, logical: str) -> str | None:
        """Basename of a symlink's target ("mlx5_core" for a driver link), even if it dangles."""
        try:
            return os.path.basename(os.readlink(self.path(logical)))
        except OSError:
            return None

    def read_link(self, logical: str) -> str | None:
        """A symlink's target as written (e.g. "/dev/nvidia0" for a /proc/PID/fd entry); None if not a link."""
        try:
            return os.readlink(self.path(logical))
        except OSError:
            return None

    # -- reading ------------------------------------------------------------------------------
    def read_text(self, logical: str) -> str:
        return self._read(logical, binary=False)

    def read_bytes(self, logical: str) -> bytes:
        """Raw contents: for big files (a 13 MB /proc/interrupts) text mode's newline pass costs 4x the read."""
        return self._read(logical, binary=True)

    def _read(self, logical: str, *, binary: bool):  # noqa: ANN202 - str or bytes
        """The one place where OSError becomes numatune's ReadError / PermissionDenied."""
        try:
            if binary:
                with self._open(logical, "rb") as fh:
                    return fh.read()
            with self._open(logical, "r") as fh:
                return fh.read()
        except FileNotFoundError as exc:
            if self._was_denied(logical):
                raise PermissionDenied(f"permission denied reading {logical}", hint="run as root") from exc
            raise ReadError(logical, "no such file") from exc
        except _Escapes as exc:
            raise ReadError(logical, ESCAPES) from exc
        except PermissionError as exc:
            raise PermissionDenied(f"permission denied reading {logical}", hint="run as root") from exc
        except OSError as exc:
            raise ReadError(logical, exc.strerror or str(exc)) from exc

    def read_optional(self, logical: str, *, denied: str = "note") -> str | None:
        """The file's text with NULs and surrounding blanks removed; None if absent or unreadable.

        Used for attributes that kernels, drivers or partial captures may lack: a missing file is
        quietly None, and so is an I/O error on one attribute. A file that exists but cannot be
        read is None too, but the caller chooses what else happens (as psutil's `cat(fallback=)`):
        `denied="note"` records it in `notes` for the report, "quiet" does not, "raise" raises
        PermissionDenied.
        """
        try:
            if self.root == "/":
                with self._open(logical, "rb") as fh:  # bytes: no text wrapper per small file
                    data = fh.read()
            else:  # a saved root's regular files: read the descriptor (no buffer's fstat, ioctl and seeks)
                data = _read_fd(self._saved_fd(logical))
        except (FileNotFoundError, NotADirectoryError, _Escapes):
            if self._was_denied(logical):
                return self._denied(logical, denied)
            return None
        except PermissionError:
            return self._denied(logical, denied)
        except OSError:
            return None
        return _clean(data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"))

    def _denied(self, logical: str, denied: str) -> None:
        if denied == "raise":
            raise PermissionDenied(f"permission denied reading {logical}", hint="run as root")
        if denied == "note":
            self.note(logical, DENIED)

    def note(self, logical: str, reason: str) -> None:
        """Record a problem with one file once, for the report's notes / skipped list."""
        item = (logical, reason)
        if item not in self.notes:
            self.notes.append(item)

    def _open(self, logical: str, mode: str):  # noqa: ANN202 - a text or binary file object
        """Open a file of the root; for a saved root, only if it resolves inside the root.

        The live root is opened as it is. A saved root's directory is resolved once (cached) and
        the file opened with O_NOFOLLOW (and O_NONBLOCK: a FIFO never blocks); a file that is
        itself a link takes the full check. So the guard costs about nothing per read.
        """
        if self.root == "/":
            path = self.path(logical)
            return open(path, "rb") if mode == "rb" else open(path, encoding="utf-8", errors="replace")
        fd = self._saved_fd(logical)
        return open(fd, "rb") if mode == "rb" else open(fd, encoding="utf-8", errors="replace")

    def _saved_fd(self, logical: str) -> int:
        """A saved root's file, opened (see _open)."""
        rel = logical.strip("/")
        if ".." in rel.split("/"):
            raise InputError(f"path escapes the root: {logical}")
        head, _, name = rel.rpartition("/")
        parent = self._dirs.get(head) or self._real_dir(head)
        try:
            return os.open(f"{parent}/{name}", _NOFOLLOW_FLAGS)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            return os.open(self._contained(logical), _NOFOLLOW_FLAGS & ~os.O_NOFOLLOW)

    def _list_saved(self, logical: str) -> list[str]:
        """The names in a saved root's directory at its checked real path; the subdirectories
        that are not links are remembered as checked (d_type comes with the listing, free)."""
        rel = logical.strip("/")
        if ".." in rel.split("/"):
            raise InputError(f"path escapes the root: {logical}")
        real = self._dirs.get(rel) or self._real_dir(rel)
        with os.scandir(real) as it:
            entries = list(it)
        prefix = f"{rel}/" if rel else ""
        self._dirs.update({prefix + e.name: e.path for e in entries if e.is_dir(follow_symlinks=False)})
        return [e.name for e in entries]

    def _real_dir(self, rel: str) -> str:
        """The real path of a saved root's directory `rel` (no leading "/"; cached: one lstat per
        new directory below a known one); _Escapes if it leads out of the root."""
        try:
            real = self._dirs[rel]
        except KeyError:
            head, _, name = rel.rpartition("/")
            if not rel:
                real = self._contained("/")
            else:
                try:
                    real = f"{self._real_dir(head).rstrip('/')}/{name}"
                    if stat.S_ISLNK(os.lstat(real).st_mode):
                        real = self._contained("/" + rel)
                except FileNotFoundError:
                    pass  # a missing directory: the caller's own open says so
                except (_Escapes, OSError):
                    real = None
            self._dirs[rel] = real
        if real is None:
            self.note("/" + rel, ESCAPES)
            raise _Escapes(rel)
        return real

    def _contained(self, logical: str) -> str:
        """The real path of `logical` in a saved root; _Escapes if it resolves outside the root.

        An O_PATH open and one readlink of /proc/self/fd (no lstat per component); O_PATH opens
        nothing a link could point at (no FIFO blocks, no device is touched).
        """
        path = self.path(logical)
        inside = self._inside
        if inside is None:
            inside = self._inside = os.path.realpath(self.root).rstrip("/") + "/"
        try:
            fd = os.open(path, _O_PATH | os.O_CLOEXEC)
        except OSError:
            return path  # the caller's own open reports what is wrong, the same way
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = os.path.realpath(path)
        finally:
            os.close(fd)
        if real.startswith(inside) or real + "/" == inside:
            return real
        self.note(logical, ESCAPES)
        raise _Escapes(logical)

    def _was_denied(self, logical: str) -> bool:
        """For a missing file: True if the snapshot recorded it as unreadable where it was taken,
        so replay notes it as live did (SNAPSHOT.txt's `unreadable:` lines)."""
        if self.root == "/":
            return False
        if self._was_unreadable is None:
            self._was_unreadable = _load_unreadable(self.root)
        return logical in self._was_unreadable

    def read_int(self, logical: str, base: int = 10) -> int | None:
        text = self.read_optional(logical)
        if text is None or text == "":
            return None
        try:
            return int(text.split()[0], base)
        except ValueError as exc:
            raise ParseError(logical, f"expected an integer, got {text[:40]!r}") from exc

    def read_cpulist(self, logical: str) -> frozenset[int] | None:
        return self._read_parsed(logical, parse_cpulist, "a CPU list")

    def read_cpumask(self, logical: str) -> frozenset[int] | None:
        return self._read_parsed(logical, parse_cpumask, "a CPU mask")

    def _read_parsed(self, logical: str, parse, what: str) -> frozenset[int] | None:  # noqa: ANN001
        text = self.read_optional(logical)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            raise ParseError(logical, f"not {what}: {text[:40]!r}") from exc

    # -- writing (irq apply only) -------------------------------------------------------------
    def write_text(self, logical: str, text: str) -> None:
        """Write one value; errors keep their errno so callers can tell EIO (managed IRQ) apart."""
        with open(self.path(logical), "w", encoding="utf-8") as fh:
            fh.write(text)


def _is_tree(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "sys")) or os.path.isdir(os.path.join(path, "proc"))


def _find_tree_root(path: str) -> str | None:
    """The directory holding sys/ and proc/: `path` itself or its single subdirectory."""
    if _is_tree(path):
        return path
    if not os.path.isdir(path):
        return None
    entries = [e.path for e in os.scandir(path) if e.is_dir()]
    if len(entries) == 1 and _is_tree(entries[0]):
        return entries[0]
    return None


class _Escapes(Exception):
    """A path of a saved root that resolves outside it (read as missing)."""


def _load_unreadable(root: str) -> frozenset[str]:
    try:
        with open(os.path.join(root, "SNAPSHOT.txt"), encoding="utf-8", errors="replace") as fh:
            return frozenset(line[12:].strip() for line in fh if line.startswith("unreadable: "))
    except OSError:
        return frozenset()


def _unpack_snapshot(archive: str) -> str:
    """Unpack a snapshot archive into a private temporary directory removed at exit.

    Archives come from strangers: every header is checked against the bounds first (nothing is
    written for an archive past them), then each member is extracted only if its final path,
    after resolving the links already extracted, stays inside the directory (`_safe_member`).
    """
    import atexit
    import shutil
    import tarfile
    import tempfile

    if not tarfile.is_tarfile(archive):
        raise NotASysfsTree(f"{archive} is neither a directory nor a tar archive")
    dest = os.path.realpath(tempfile.mkdtemp(prefix="numatune-root-"))
    atexit.register(shutil.rmtree, dest, True)
    try:
        with tarfile.open(archive) as tar:
            members = _bounded_members(tar, archive)
            trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
            for member in members:
                tar.extract(_safe_member(member, dest, archive), dest, **trusted)
    except ArchiveRefused:
        shutil.rmtree(dest, True)
        raise
    except (tarfile.TarError, OSError, EOFError) as exc:
        shutil.rmtree(dest, True)
        raise InputError(f"cannot unpack snapshot {archive}: {exc}") from exc
    root = _find_tree_root(dest)
    if root is None:
        raise NotASysfsTree(f"snapshot {archive} holds no sys/ or proc/ directory")
    return root


def _bounded_members(tar, archive: str) -> list:  # noqa: ANN001 - tarfile is imported lazily
    """Every header, refused as soon as the archive passes a bound (before anything is written)."""
    members, total = [], 0
    for member in tar:
        members.append(member)
        total += member.size
        if len(members) > MAX_MEMBERS:
            raise ArchiveRefused(f"refusing snapshot {archive}: more than {MAX_MEMBERS} members")
        if member.size > MAX_FILE_BYTES:
            raise ArchiveRefused(f"refusing snapshot {archive}: {member.name} declares {member.size} bytes "
                                 f"(at most {MAX_FILE_BYTES})")
        if total > MAX_TOTAL_BYTES:
            raise ArchiveRefused(f"refusing snapshot {archive}: more than {MAX_TOTAL_BYTES} bytes unpacked")
        if member.name.count("/") >= MAX_DEPTH:
            raise ArchiveRefused(f"refusing snapshot {archive}: a path deeper than {MAX_DEPTH} levels")
    return members


def _safe_member(member, dest: str, archive: str):  # noqa: ANN001, ANN202 - tarfile is imported lazily
    """The member as `tarfile.data_filter` would extract it, or ArchiveRefused.

    `data_filter` itself where Python has it (3.10.12+, 3.11.4+), else `_data_filter` that applies
    the same rule. One exception: a process's open device files (`proc/PID/fd/N -> /dev/nvidia0`)
    keep their absolute link text, because audit reads it to see which GPU the process holds;
    nothing ever opens them (and a saved root never reads through a link that leaves it).
    """
    import tarfile

    check = getattr(tarfile, "data_filter", None) or _data_filter
    fd_link = (member.issym() and _is_fd_link(member.name) and member.linkname.startswith("/dev/")
               and ".." not in member.linkname.split("/"))
    try:
        if fd_link:
            target = member.linkname
            safe = check(_replaced(member, linkname="null"), dest)
            return _replaced(safe, linkname=target)
        return check(member, dest)
    except tarfile.TarError as exc:  # FilterError and its subclasses
        raise ArchiveRefused(f"refusing snapshot {archive}: {exc}") from None


def _replaced(member, **attrs):  # noqa: ANN001, ANN003, ANN202
    if hasattr(member, "replace"):
        return member.replace(**attrs, deep=False)
    import copy

    out = copy.copy(member)
    for key, value in attrs.items():
        setattr(out, key, value)
    return out


def _data_filter(member, dest: str):  # noqa: ANN001, ANN202
    """tarfile.data_filter's rule for Pythons without it (3.10.0-3.10.11, 3.11.0-3.11.3)."""
    import tarfile

    def refuse(why: str) -> None:
        raise tarfile.TarError(f"{member.name!r} {why}")

    dest = os.path.realpath(dest)
    name = member.name.lstrip("/")
    if os.path.isabs(name):
        refuse("is an absolute path")
    target = os.path.realpath(os.path.join(dest, name))
    if os.path.commonpath([target, dest]) != dest:
        refuse(f"would be extracted to {target!r}, which is outside the destination")
    if not (member.isreg() or member.islnk() or member.isdir() or member.issym()):
        refuse("is a special file")
    mode = member.mode & 0o755
    if member.isreg() or member.islnk():
        mode = (mode if mode & 0o100 else mode & ~0o111) | 0o600
    if member.islnk() or member.issym():
        if os.path.isabs(member.linkname):
            refuse("is a link to an absolute path")
        base = os.path.join(dest, os.path.dirname(name)) if member.issym() else dest
        target = os.path.realpath(os.path.join(base, member.linkname))
        if os.path.commonpath([target, dest]) != dest:
            refuse(f"would link to {target!r}, which is outside the destination")
    return _replaced(member, name=name, mode=mode, uid=0, gid=0, uname="", gname="")
