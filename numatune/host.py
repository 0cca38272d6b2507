"""Host: the one object through which numatune reads (and, for `irq apply`, writes) a system.

A Host wraps a root: `/` for the live node, a directory holding `sys/` and `proc/` (a fixture or an
extracted snapshot), or a `.tar`/`.tar.gz` snapshot, unpacked once into a private temporary
directory. Every path the rest of the code uses is *logical* ("/sys/devices/system/node"), so a
saved tree and the live node take exactly the same code path. OSError is turned into numatune's
errors here and nowhere else.
"""

from __future__ import annotations

import os
import re

from numatune.cpulist import parse_cpulist, parse_cpumask
from numatune.errors import InputError, NotASysfsTree, ParseError, PermissionDenied, ReadError

_NATURAL = re.compile(r"(\d+)")
_FD_LINK = re.compile(r"(^|/)proc/\d+/fd/\d+$")


def natural_key(name: str) -> list[object]:
    """Sort "node10" after "node9"."""
    return [int(tok) if tok.isdigit() else tok for tok in _NATURAL.split(name)]


def _clean(text: str) -> str:
    return text.replace("\x00", "").strip()


class Host:
    """A root to read; `label` is how the user named it (for messages)."""

    __slots__ = ("root", "label")

    def __init__(self, root: str = "/", label: str = "/") -> None:
        self.root = os.fspath(root)
        self.label = label

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
        """Entries of a directory in natural order; [] if it does not exist or cannot be listed."""
        try:
            names = os.listdir(self.path(logical))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
        except OSError as exc:
            raise ReadError(logical, exc.strerror or str(exc)) from exc
        # `.keep` marks a directory that is empty in a fixture tree kept in git; it is never a sysfs name.
        return sorted((n for n in names if n != ".keep"), key=natural_key)

    def resolve(self, logical: str) -> str | None:
        """Follow symlinks inside the root; None if the link dangles or leaves the root."""
        real = os.path.realpath(self.path(logical))
        if not os.path.exists(real):
            return None
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
                with open(self.path(logical), "rb") as fh:
                    return fh.read()
            with open(self.path(logical), encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except FileNotFoundError as exc:
            raise ReadError(logical, "no such file") from exc
        except PermissionError as exc:
            raise PermissionDenied(f"permission denied reading {logical}", hint="run as root") from exc
        except OSError as exc:
            raise ReadError(logical, exc.strerror or str(exc)) from exc

    def read_optional(self, logical: str) -> str | None:
        """The file's text with NULs and surrounding blanks removed; None if absent or unreadable.

        Used for attributes that kernels, drivers or partial captures may lack; a permission or I/O
        error on one attribute must not take the whole report down.
        """
        try:
            with open(self.path(logical), "rb") as fh:  # bytes: no text wrapper per small file
                data = fh.read()
        except OSError:
            return None
        return _clean(data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"))

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


def _unpack_snapshot(archive: str) -> str:
    """Unpack a snapshot archive into a private temporary directory removed at exit."""
    import atexit
    import shutil
    import tarfile
    import tempfile

    if not tarfile.is_tarfile(archive):
        raise NotASysfsTree(f"{archive} is neither a directory nor a tar archive")
    dest = tempfile.mkdtemp(prefix="numatune-root-")
    atexit.register(shutil.rmtree, dest, True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter=_safe_member)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"cannot unpack snapshot {archive}: {exc}") from exc
    root = _find_tree_root(dest)
    if root is None:
        raise NotASysfsTree(f"snapshot {archive} holds no sys/ or proc/ directory")
    return root


def _safe_member(member, dest: str):  # noqa: ANN001, ANN202 - tarfile is imported lazily
    """Data only: no devices, no absolute or escaping links (dangling relative links are kept).

    One exception: a process's open device files (`proc/PID/fd/N -> /dev/nvidia0`) are kept as
    they are, because audit reads the link text to see which GPU the process holds; nothing
    ever opens them.
    """
    if not (member.isfile() or member.isdir() or member.issym()):
        return None
    name = member.name
    if name.startswith("/") or ".." in name.split("/"):
        return None
    if member.issym():
        target = member.linkname
        if target.startswith("/"):
            if _FD_LINK.search(name) and target.startswith("/dev/") and ".." not in target.split("/"):
                return member.replace(uid=0, gid=0, deep=False)
            return None
        resolved = os.path.normpath(os.path.join(os.path.dirname(name), target))
        if resolved.startswith(".."):
            return None
    member = member.replace(mode=(member.mode | 0o600) & 0o777, uid=0, gid=0, deep=False)
    return member

