"""Host: the one object through which numatune reads (and, for `irq apply`, writes) a system.

A Host wraps a root: `/` for the live node, a directory holding `sys/` and `proc/` (a fixture or an
extracted snapshot), or a `.tar`/`.tar.gz` snapshot, read into memory and never unpacked
(`roots.tarindex`). Every path the rest of the code uses is *logical* ("/sys/devices/system/node"),
so a saved tree, an archive and the live node take exactly the same code path. OSError is turned
into numatune's errors here and nowhere else.

A saved root is untrusted. A directory root is opened once and every file is opened relative to
that handle, never through a link that leaves it (`roots.rootdir`); an archive's links resolve in
the archive's own namespace. Either way such a file reads as missing, with a note; every read is
bounded by MAX_FILE_BYTES. A file that exists but cannot be read (EACCES) is not silently
"missing": it is recorded in `Host.notes`, which the reports show, so the user learns to run as root.
"""

from __future__ import annotations

import os

from numatune.cpulist import parse_cpulist, parse_cpumask
from numatune.errors import InputError, NotASysfsTree, NumatuneError, ParseError, PermissionDenied, ReadError
from numatune.numbers import MAX_DIGITS, parse_int
from numatune.system.tarindex import Escapes

TYPE_CHECKING = False  # annotations only: `typing` costs a report's start 4-5 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    _T = TypeVar("_T")

_ESCAPE_ERRORS = (Escapes,)

DENIED = "permission denied: run as root"  # the reason in a note for a file that exists but cannot be read
ESCAPES = "a link that leaves the root: read as missing"
NOT_REGULAR = "not a regular file (a device node or FIFO): never opened in a saved root"
# The largest file numatune reads is a 13 MB /proc/interrupts (1152 CPUs); the archive bounds are
# in roots.tarindex (this one is theirs too).
MAX_FILE_BYTES = 32 << 20
# A file this large is decoded once a command however many links reach it (1,000 hard links to one 32 MiB
# member were 1,000 decodings); the decoded texts kept are bounded by DECODED_BYTES in all.
DECODE_ONCE = 1 << 16
DECODED_BYTES = 64 << 20
TOO_LARGE = f"larger than {MAX_FILE_BYTES >> 20} MiB, which no real capture is: refusing this root"


# natural_key reads about this many characters of a name (and NATURAL_KEY_NUMBERS numbers); the rest is
# compared as text. A key is one string
# (compared in C) whatever the name: 99,900 names of 1,000 characters alternating digits and letters were
# 1.1 GB of list keys and 11 s.
NATURAL_KEY_CHARS = 64
NATURAL_KEY_NUMBERS = 8  # and at most this many numbers of it
_DIGIT_MARKS = str.maketrans("0123456789", "\0" * 10)


def natural_key(name: str) -> str:
    r"""Sort "node10" after "node9": text and numbers alternating, in the order re.split(r"(\d+)") with the
    numbers as ints gives (the `re` module, ~5% of a `check`, stays unimported on the report paths), over the
    first NATURAL_KEY_CHARS characters or NATURAL_KEY_NUMBERS numbers; past them, at the end of a number,
    the rest is text. Each number is written "\0", a character for its length, its digits without leading
    zeros: "\0" sorts before any character a name holds, and the longer number is the larger. Runs are found
    by str methods (in C)."""
    head = name.rstrip("0123456789")
    if head.replace("_", "x").replace("-", "x").isalpha():  # "cpu12", "thread_siblings_list": the usual names
        return head + _number(name[len(head):]) if len(head) < len(name) else name
    if not name.isascii():
        return _natural_key_any(name)
    marks = name[:NATURAL_KEY_CHARS].translate(_DIGIT_MARKS)  # each digit a NUL, which no name holds
    out: list[str] = []
    start = 0
    at = marks.find("\0")
    while at >= 0:
        run = len(marks) - len(marks[at:].lstrip("\0"))
        if run == len(marks):  # the number may go on past the characters looked at
            rest = name[run:]
            run += len(rest) - len(rest.lstrip("0123456789"))
        out += (name[start:at], _number(name[at:run]))
        start = run
        at = marks.find("\0", run) if run < len(marks) and len(out) < 2 * NATURAL_KEY_NUMBERS else -1
    out.append(name[start:])
    return "".join(out)


def _natural_key_any(name: str) -> str:
    """natural_key for a name with characters beyond ASCII (digits of other scripts: "cpu٣"), char by char."""
    out: list[str] = []
    start = at = 0
    end = len(name)
    while at < end and at < NATURAL_KEY_CHARS and len(out) < 2 * NATURAL_KEY_NUMBERS:
        if name[at].isdecimal():
            run = at + 1
            while run < end and name[run].isdecimal():
                run += 1
            out += (name[start:at], _number(name[at:run]))
            start = at = run
        else:
            at += 1
    out.append(name[start:])
    return "".join(out)


def _number(digits: str) -> str:
    value = digits.lstrip("0") if digits.isascii() else str(int(digits))  # int(): other scripts' digits ("٣")
    return f"\0{chr(len(value) + 1)}{value}"


def numbered(name: str, prefix: str, suffix: str = "") -> int | None:
    r"""N when NAME is PREFIX, decimal digits N, SUFFIX ("cpu12" -> 12), else None: re.match(r"cpu(\d+)$")."""
    if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
        digits = name[len(prefix):len(name) - len(suffix)]
        if digits.isascii() and digits.isdecimal() and len(digits) <= MAX_DIGITS:  # "cpu" and 5,000 digits: no CPU
            return int(digits)
    return None


def _clean(text: str) -> str:
    return text.replace("\x00", "").strip()


class Host:
    """A root to read; `label` is how the user named it (for messages)."""

    __slots__ = ("root", "label", "notes", "_fs", "_snapshot_facts", "_derived", "_decoded", "_decoded_bytes",
                 "_noted")

    def __init__(self, root: str = "/", label: str = "/", fs=None) -> None:  # noqa: ANN001 - RootDir/ArchiveRoot
        self.root = os.fspath(root)
        self.label = label
        # (logical path, reason) for files that exist but could not be read, in the order met.
        self.notes: list[tuple[str, str]] = []
        self._noted: set[tuple[str, str]] = set()  # the same, to look up: 45,000 notes were a quadratic 30 s
        self._fs = fs  # a saved root's contained access (roots.rootdir / roots.tarindex); None: live
        # a snapshot's SNAPSHOT.txt, loaded lazily: key -> its values, and the set of `unreadable:` paths
        self._snapshot_facts: tuple[dict[str, list[str]], frozenset[str]] | None = None
        self._derived: dict[str, Any] = {}  # once(): facts that cost a scan, kept for this Host's life
        self._decoded: dict[tuple[int, bool], tuple[bytes, str]] = {}  # id(bytes), cleaned -> (bytes, text)
        self._decoded_bytes = 0

    def __repr__(self) -> str:
        return f"Host({self.root!r}, label={self.label!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Host) and (self.root, self.label) == (other.root, other.label)

    def __hash__(self) -> int:
        return hash((self.root, self.label))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, spec: str | os.PathLike[str] | None = None, *, origin: str | None = None) -> Host:
        """Open a root given by the user: None or "/" is the live node. `origin` says where a root that
        cannot be opened came from when the user did not type it ("NUMATUNE_ROOT"): the error names it."""
        if origin is None:
            return cls._open(spec)
        try:
            return cls._open(spec)
        except NumatuneError as exc:
            exc.message = f"{exc.message} (the root is NUMATUNE_ROOT={os.fspath(spec or '')!r})" \
                if origin == "NUMATUNE_ROOT" else f"{exc.message} (the root is from {origin})"
            exc.args = (exc.message,)
            raise

    @classmethod
    def _open(cls, spec: str | os.PathLike[str] | None = None) -> Host:
        if spec is None or os.fspath(spec) in ("", "/"):
            return cls("/", "/")
        label = os.fspath(spec)
        path = os.path.abspath(label)
        try:
            os.lstat(path)
        except FileNotFoundError:
            archive = next((label + s for s in (".tar.gz", ".tgz", ".tar") if os.path.isfile(path + s)), None)
            raise InputError(f"root {spec} does not exist",
                             hint=f"the saved machine is an archive: --root {archive}" if archive else None) from None
        except PermissionError:  # a parent directory this user may not search: it may well exist
            raise PermissionDenied(f"cannot reach root {spec}: permission denied on a directory above it",
                                   hint="run as a user who can read it, or copy it somewhere readable") from None
        except OSError as exc:
            raise InputError(f"cannot reach root {spec}: {exc.strerror or exc}") from None
        if os.path.islink(path):
            # An archive is read into memory and never written: a link to one (a rotated latest.tar.gz)
            # is followed. A directory root can be written (irq apply), so a link is never followed there.
            if not os.path.isfile(path):
                raise InputError(f"--root {spec} is a link (to {os.readlink(path)}): a saved directory root is "
                                 "never read through a link", hint="pass the directory itself")
            path = os.path.realpath(path)
        if os.path.isfile(path):
            from numatune.system.tarindex import ArchiveRoot, read_archive, tree_top

            index = read_archive(path, label)
            top = tree_top(index)
            if top is None:
                raise NotASysfsTree(f"snapshot {spec} holds no sys/ or proc/ directory")
            return cls(path, label, ArchiveRoot(index, top))
        if not os.path.isdir(path):
            raise NotASysfsTree(f"{spec} is neither a directory nor a tar archive")
        real = os.path.realpath(path)
        if real == "/":
            raise InputError(f"--root {spec} is the live node's own /", hint="leave out --root to read the live node")
        root = _find_tree_root(real, label)
        if root is None:
            raise NotASysfsTree(
                f"{spec} is not a sysfs/procfs tree (no sys/ or proc/ inside)",
                hint="pass a directory made by `numatune snapshot` or a snapshot archive",
            )
        return cls(root, label, _root_dir(root, label))

    @property
    def is_live(self) -> bool:
        return self._fs is None and self.root == "/"

    @property
    def is_archive(self) -> bool:
        return type(self._fs).__name__ == "ArchiveRoot"

    # -- paths --------------------------------------------------------------------------------
    def path(self, logical: str) -> str:
        """The real path of a logical one on the live node (a str: pathlib costs an import on every command)."""
        rel = logical.lstrip("/")
        if ".." in rel and ".." in rel.split("/"):  # the split only when a ".." could be a component
            raise InputError(f"path escapes the root: {logical}")  # a name read from the tree, not a bug: exit 3
        return os.path.join(self.root, rel)

    def _rel(self, logical: str) -> str:
        """A saved root's path relative to its top (no leading "/")."""
        rel = logical.strip("/")
        if ".." in rel and ".." in rel.split("/"):
            raise InputError(f"path escapes the root: {logical}")
        return rel

    def real_path(self, logical: str) -> str:
        """Where `logical` is on this machine (for messages and undo hints): the root's real path joined."""
        return self.path(logical) if self._fs is None else os.path.join(self.root, logical.lstrip("/"))

    def logical(self, real: str | os.PathLike[str]) -> str:
        """Turn a real path under the root back into the logical one used in messages."""
        rel = os.path.relpath(real, self.root)
        return "/" + rel if rel != "." else "/"

    def kind(self, logical: str, *, follow: bool = True) -> str | None:
        """"file", "dir", "link" (follow=False), "other" or None (absent, or behind a link that leaves the root)."""
        if self._fs is None:
            import stat

            try:
                st = os.stat(self.path(logical)) if follow else os.lstat(self.path(logical))
            except (OSError, ValueError):
                return None
            return _KINDS.get(stat.S_IFMT(st.st_mode), "other")
        try:
            return self._fs.kind(self._rel(logical), follow=follow)
        except _ESCAPE_ERRORS:
            return None
        except OSError:
            return None

    def exists(self, logical: str) -> bool:
        if self._fs is None:
            return os.path.exists(self.path(logical))
        return self.kind(logical) is not None

    def is_dir(self, logical: str) -> bool:
        if self._fs is None:
            return os.path.isdir(self.path(logical))
        return self.kind(logical) == "dir"

    def listdir(self, logical: str) -> list[str]:
        """Entries of a directory in natural order; [] if it does not exist or cannot be listed (noted)."""
        # `.keep` marks a directory that is empty in a fixture tree kept in git; it is never a sysfs name.
        return sorted((n for n in self.entries(logical) if n != ".keep"), key=natural_key)

    def entries(self, logical: str) -> list[str]:
        """Entries of a directory unsorted, for membership tests (one listing instead of failed opens,
        without listdir's sort); [] if it does not exist or cannot be listed (noted)."""
        if self._fs is None:
            return self._listing(logical, lambda: os.listdir(self.path(logical)))
        return [name for name, _ in self._saved_listing(logical)]

    def scan(self, logical: str) -> list[tuple[str, str]]:
        """(name, kind) of a directory's entries, links not followed ("file", "dir", "link", "other")."""
        if self._fs is None:
            def live() -> list[tuple[str, str]]:
                with os.scandir(self.path(logical)) as it:
                    return [(e.name, "link" if e.is_symlink() else "dir" if e.is_dir(follow_symlinks=False)
                             else "file" if e.is_file(follow_symlinks=False) else "other") for e in it]

            return self._listing(logical, live)
        return self._saved_listing(logical)

    def _saved_listing(self, logical: str) -> list[tuple[str, str]]:
        """A saved root's (name, kind) entries without names no kernel writes: one with a control
        character (a newline in an interface's name would print as a line of its own) is left out, noted."""
        out = []
        for name, kind in self._listing(logical, lambda: self._fs.listdir(self._rel(logical))):
            if name.isprintable() or not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
                out.append((name, kind))
            else:
                self.note(f"{logical}/{name!r}", "a name with control characters, which no kernel writes: left out")
        return out

    def _listing(self, logical: str, list_it):  # noqa: ANN001, ANN202
        try:
            return list_it()
        except _ESCAPE_ERRORS:
            self.note(logical, ESCAPES)
            return []
        except (FileNotFoundError, NotADirectoryError):
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
        if self._fs is None:
            real = os.path.realpath(self.path(logical))
            return real if os.path.exists(real) else None
        try:
            rel = self._fs.realpath(self._rel(logical))
        except (*_ESCAPE_ERRORS, OSError):
            return None
        return None if rel is None else "/" + rel

    def link_name(self, logical: str) -> str | None:
        """Basename of a symlink's target ("mlx5_core" for a driver link), even if it dangles."""
        target = self.read_link(logical)
        return None if target is None else os.path.basename(target)

    def read_link(self, logical: str) -> str | None:
        """A symlink's target as written (e.g. "/dev/nvidia0" for a /proc/PID/fd entry); None if not a link."""
        try:
            if self._fs is None:
                return os.readlink(self.path(logical))
            return self._fs.readlink(self._rel(logical))
        except (*_ESCAPE_ERRORS, OSError):
            return None

    # -- reading ------------------------------------------------------------------------------
    def read_text(self, logical: str) -> str:
        return self._text(self._read(logical), False)

    def _text(self, data: bytes, clean: bool) -> str:
        """`data` as text (newlines made \\n; `clean`: NULs and surrounding blanks removed); a large file's
        text is made once and kept, so links to one file, however many, cost one decoding."""
        if len(data) < DECODE_ONCE:
            text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
            return _clean(text) if clean else text
        key = (id(data), clean)
        hit = self._decoded.get(key)
        if hit is not None and hit[0] is data:  # the bytes are kept alive with it: the id is theirs
            return hit[1]
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        if clean:
            text = _clean(text)
        if self._decoded_bytes + 2 * len(data) > DECODED_BYTES:
            self._decoded.clear()
            self._decoded_bytes = 0
        self._decoded[key] = (data, text)
        self._decoded_bytes += 2 * len(data)
        return text

    def read_bytes(self, logical: str) -> bytes:
        """Raw contents: for big files (a 13 MB /proc/interrupts) text mode's newline pass costs 4x the read."""
        return self._read(logical)

    def _read_raw(self, logical: str) -> bytes:
        """The one read of a file: the live node as it is, a saved root contained and bounded."""
        if self._fs is None:
            with open(self.path(logical), "rb") as fh:
                return fh.read()
        return self._fs.read(self._rel(logical), MAX_FILE_BYTES)

    def _read(self, logical: str) -> bytes:
        """The one place where OSError becomes numatune's ReadError / PermissionDenied."""
        try:
            return self._read_raw(logical)
        except _ESCAPE_ERRORS as exc:
            self.note(logical, ESCAPES)
            raise ReadError(logical, ESCAPES) from exc
        except (FileNotFoundError, NotADirectoryError) as exc:
            if self._was_denied(logical):
                raise PermissionDenied(f"permission denied reading {logical}", hint="run as root") from exc
            raise ReadError(logical, "no such file") from exc
        except PermissionError as exc:
            raise PermissionDenied(f"permission denied reading {logical}", hint="run as root") from exc
        except OSError as exc:
            reason = _oddity(exc)
            if reason:
                self.note(logical, reason)
            raise ReadError(logical, reason or exc.strerror or str(exc)) from exc

    def read_optional(self, logical: str, *, denied: str = "note") -> str | None:
        """The file's text with NULs and surrounding blanks removed; None if absent or unreadable.

        Used for attributes that kernels, drivers or partial captures may lack: a missing file is
        quietly None, and so is an I/O error on one attribute. A file that exists but cannot be
        read is None too, but the caller chooses what else happens (as psutil's `cat(fallback=)`):
        `denied="note"` records it in `notes` for the report, "quiet" does not, "raise" raises
        PermissionDenied. A link out of a saved root or a device node is None with a note; a file
        past MAX_FILE_BYTES is ReadError (exit 3), never read further.
        """
        try:
            data = self._read_raw(logical)
        except _ESCAPE_ERRORS:
            self.note(logical, ESCAPES)
            return None
        except (FileNotFoundError, NotADirectoryError):
            if self._was_denied(logical):
                return self._denied(logical, denied)
            return None
        except PermissionError:
            return self._denied(logical, denied)
        except OSError as exc:
            reason = _oddity(exc)
            if reason == TOO_LARGE:
                raise ReadError(logical, reason) from exc
            if reason:
                self.note(logical, reason)
            return None
        return self._text(data, True)

    def _denied(self, logical: str, denied: str) -> None:
        if denied == "raise":
            raise PermissionDenied(f"permission denied reading {logical}", hint="run as root")
        if denied == "note":
            self.note(logical, DENIED)

    def note(self, logical: str, reason: str) -> None:
        """Record a problem with one file once, for the report's notes / skipped list."""
        item = (logical, reason)
        if item not in self._noted:
            self._noted.add(item)
            self.notes.append(item)

    def _was_denied(self, logical: str) -> bool:
        """For a missing file: True if the snapshot recorded it as unreadable where it was taken,
        so replay notes it as live did (SNAPSHOT.txt's `unreadable:` lines)."""
        if self._fs is None:
            return False
        return logical in self._facts()[1]  # a set: every missing file asks (a list scan each was quadratic)

    def snapshot_facts(self, key: str) -> list[str]:
        """The values of SNAPSHOT.txt's `KEY: value` lines (a numatune snapshot's own record of what
        it saw where it was taken); [] for the live node, a plain tree or an older snapshot."""
        if self._fs is None:
            return []
        return list(self._facts()[0].get(key, ()))

    def _facts(self) -> tuple[dict[str, list[str]], frozenset[str]]:
        """SNAPSHOT.txt's `KEY: value` lines by key, read once (its lines bounded as every file's are)."""
        if self._snapshot_facts is None:
            from numatune.pieces import MAX_RECORDS, lines

            try:
                text = self._fs.read("SNAPSHOT.txt", MAX_FILE_BYTES).decode("utf-8", "replace")
            except (*_ESCAPE_ERRORS, OSError):
                text = ""
            facts: dict[str, list[str]] = {}
            for line in lines(text, "SNAPSHOT.txt", MAX_RECORDS):
                key, sep, value = line.partition(": ")
                if sep:
                    facts.setdefault(key, []).append(value.strip())
            self._snapshot_facts = facts, frozenset(facts.get("unreadable", ()))
        return self._snapshot_facts

    def once(self, key: str, compute: Callable[[], _T]) -> _T:
        """`compute()` the first time `key` is asked of this Host, its result afterwards: a fact two
        readers need (is irqbalance running: a walk of the whole process table) is read once a command."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def read_int(self, logical: str, base: int = 10) -> int | None:
        """The first word of a one-value file as an integer (numatune.numbers: bounded, ASCII digits);
        None if absent or empty, ParseError (exit 3) if it is not a number."""
        text = self.read_optional(logical)
        if text is None or text == "":
            return None
        return parse_int(text.split(None, 1)[0], logical, base=base)

    def read_cpulist(self, logical: str, limit: int | None = None) -> frozenset[int] | None:
        """A CPU list file; with `limit` (MAX_NODES for a node list), an id at or above it is ParseError."""
        if limit is None:
            return self._read_parsed(logical, parse_cpulist, "a CPU list")
        return self._read_parsed(logical, lambda text: parse_cpulist(text, limit), "a node list")

    def read_cpumask(self, logical: str) -> frozenset[int] | None:
        return self._read_parsed(logical, parse_cpumask, "a CPU mask")

    def _read_parsed(self, logical: str, parse, what: str) -> frozenset[int] | None:  # noqa: ANN001
        text = self.read_optional(logical)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            raise ParseError(logical, f"not {what} ({exc}): {text[:40]!r}") from exc

    # -- writing (irq apply only) -------------------------------------------------------------
    def write_text(self, logical: str, text: str) -> None:
        """Write one value into an existing file; errors keep their errno so callers can tell EIO
        (managed IRQ) apart. A saved directory root is written beneath its handle only (a link that
        leaves it: EXDEV); an archive root is never written (InputError)."""
        if self._fs is None:
            with open(self.path(logical), "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        try:
            self._fs.write(self._rel(logical), text)
        except _ESCAPE_ERRORS:
            import errno

            raise OSError(errno.EXDEV, ESCAPES, logical) from None

    def create_file(self, logical: str, data: bytes) -> str:
        """Create a new file (the `irq apply` state file) under the root, with its directories; never
        over an existing file, never through a link (in a saved root, no directory on the way may be
        one). Returns where it is on this machine."""
        where = self.real_path(logical)
        try:
            if self._fs is None:
                from numatune.system.rootdir import write_new_at

                head, _, name = where.rpartition("/")
                os.makedirs(head or "/", exist_ok=True)
                fd = os.open(head or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    write_new_at(fd, name, data)
                finally:
                    os.close(fd)
            else:
                self._fs.create(self._rel(logical), data)
        except FileExistsError as exc:
            raise InputError(f"state file {where} already exists: it may hold an earlier original state",
                             hint="pass another --save FILE (or restore that one first)") from exc
        except PermissionError as exc:
            raise PermissionDenied(f"cannot write {where}: {exc.strerror}",
                                   hint="pass --save FILE in a writable place") from exc
        except OSError as exc:
            import errno

            why = exc.strerror or str(exc)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                why = "a directory on the way is a link or not a directory (it would leave the root)"
            raise InputError(f"refusing to write {where}: {why}; nothing was changed") from exc
        return where


_KINDS = {0o040000: "dir", 0o100000: "file", 0o120000: "link"}


def _oddity(exc: OSError) -> str | None:
    """The note for a saved root's file that is there but is not read: too large, or not a regular file."""
    name = type(exc).__name__
    if name == "TooLarge":
        return TOO_LARGE
    if name == "NotRegular":
        return NOT_REGULAR
    return None


def _root_dir(real: str, label: str):  # noqa: ANN202 - roots.rootdir.RootDir, imported on first use
    from numatune.system.rootdir import RootDir

    try:
        return RootDir(real)
    except OSError as exc:
        raise InputError(f"cannot open --root {label}: {exc.strerror or exc}") from None


def _is_tree(path: str) -> bool:
    import stat

    for name in ("sys", "proc"):
        try:
            if stat.S_ISDIR(os.lstat(os.path.join(path, name)).st_mode):
                return True
        except OSError:
            pass
    return False


def _find_tree_root(path: str, label: str) -> str | None:
    """The directory holding sys/ or proc/ (real directories, not links): `path` itself or its single
    entry; a root that holds only a link (to `/` or anywhere) is refused."""
    if _is_tree(path):
        return path
    for name in ("sys", "proc"):
        if os.path.islink(os.path.join(path, name)):
            raise InputError(f"--root {label}: its {name} is a link (to {os.readlink(os.path.join(path, name))}); "
                             "a saved root is never read through a link that leaves it")
    try:
        with os.scandir(path) as it:
            entries = [e for e in it if e.name != ".keep"]
    except PermissionError:
        raise PermissionDenied(f"cannot list --root {label}: permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot list --root {label}: {exc.strerror or exc}") from None
    if len(entries) != 1:
        return None
    only = entries[0]
    if only.is_symlink():
        raise InputError(f"--root {label} holds only a link ({only.name} -> {os.readlink(only.path)}); "
                         "a saved root is never read through a link that leaves it")
    if only.is_dir(follow_symlinks=False) and _is_tree(only.path):
        return only.path
    return None
