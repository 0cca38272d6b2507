"""A snapshot archive read into memory, never unpacked: the tar stream parsed here, bound by bound.

Archives come from strangers, so nothing in one reaches the filesystem: every member becomes an
entry of an in-memory index (normalised name -> file bytes, directory or link text), and `Host`
serves reads, listings and readlink from it. Every bound is checked on the header that declares
a size, before the bytes it guards are read or decompressed: a header's name and link lengths,
a GNU long-name / long-link or pax header's size, the member count, each file's size and the
total, the depth. Work is bounded as well as bytes: every name entered (a member and each parent
directory it implies) counts against MAX_MEMBERS and its bytes, with every link text's, against
MAX_NAME_TOTAL, so a small archive of deep members cannot make millions of entries; each link is
resolved once (`TarIndex.resolve_link`, memoised), so many links through one chain cost one walk
of it. A gzip (or bzip2/xz) stream is read to its end so that its checksum is checked:
a damaged or truncated archive is refused, never read as a smaller machine.

Names are normalised inside the archive ("./a//b" is "a/b"); a name that climbs above the
archive's top, a member placed below a link or a file, a hard link to anything but a regular file
met earlier, a device node or FIFO, or a member that changes a name's type is refused (ArchiveRefused:
exit 3). Symbolic links are kept as text and resolved in the archive's own namespace only
(`TarIndex.lookup`): a link that is absolute or climbs above the top dangles.

Stdlib only (gzip/bz2/lzma imported for the archives that need them), no Host: `numatune.system.host` builds on it.
"""

from __future__ import annotations

from numatune.errors import ArchiveRefused, InputError, NotASysfsTree

# The bounds, tightened to what real snapshots need: the largest tree here has 16,132 members and
# 0.6 MB, the largest file numatune reads is a 13 MB /proc/interrupts (1152 CPUs), the longest name
# 159 bytes and the deepest 14 levels. Each is stated in man/numatune.1 (SAVED ROOTS).
MAX_MEMBERS = 100_000  # every name in the index: members and the parent directories they imply
MAX_FILE_BYTES = 32 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_NAME_BYTES = 1024  # a member's name or link text, however it is stored (ustar, GNU long name, pax)
MAX_DEPTH = 32
MAX_EXTENDED_BYTES = 16 << 10  # one pax or GNU long-name / long-link header's data
MAX_TRAILER_BYTES = 1 << 20  # zeros after the end-of-archive blocks (tar pads to its record size)
MAX_NAME_TOTAL = 8 << 20  # the bytes of every name in the index (implied parents too) and of every link text
MAX_LINK_HOPS = 40  # links followed in one lookup, as the kernel's ELOOP limit
MAX_LINK_WORK = 4 * MAX_NAME_TOTAL  # bytes of link text walked in one command (each link once is at most 1x)
_MAX_NESTING = 5 * MAX_LINK_HOPS  # links resolved one inside another: past it, all but the last 40 are settled

BLOCK = 512
_ZEROS = bytes(BLOCK)
_CHUNK = 1 << 20
REGULAR, DIRECTORY, SYMLINK = "file", "dir", "link"
_ESCAPED = object()  # a cached directory whose path leaves the top; a link that leaves it
_BUSY = object()  # a link being resolved: met again before it is done, it loops
_NEAR = 8  # directories an archive lookup climbs to find one already known before it walks down from the top


class Escapes(Exception):
    """A path that leads through a link that is absolute, climbs above the top or loops: it dangles
    (read as missing, with a note)."""


class _TooDeep(Escapes):
    """A link met _MAX_NESTING links deep into resolving another (Python's stack is not spent on a chain of
    thousands); `need`: how many links at least its own resolution follows. Each link it passes on the way out
    needs one more: one that needs more than MAX_LINK_HOPS escapes wherever it is met (kept so), one that needs
    fewer keeps that lower bound and is resolved again from a shallower start."""

    def __init__(self, name: str, need: int) -> None:
        super().__init__(name)
        self.need = need


class _Stream:
    """The archive's decompressed bytes, read in chunks; `take(n)` never reads past what it is asked."""

    __slots__ = ("raw", "buf", "pos", "label")

    def __init__(self, raw, label: str) -> None:  # noqa: ANN001 - a binary file object
        self.raw, self.buf, self.pos, self.label = raw, b"", 0, label

    def take(self, n: int) -> bytes:
        if n < 0:  # a negative size would step back and parse the same bytes again
            raise ArchiveRefused(f"refusing snapshot {self.label}: a negative member size")
        end = self.pos + n
        if end <= len(self.buf):
            out = self.buf[self.pos:end]
            self.pos = end
            return out
        parts = [self.buf[self.pos:]]
        have = len(parts[0])
        while have < n:
            chunk = self.raw.read(max(_CHUNK, n - have))
            if not chunk:
                raise ArchiveRefused(f"refusing snapshot {self.label}: the archive ends early (truncated)")
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self.buf, self.pos = data, n
        return data[:n]

    def drain(self) -> int:
        """Read the rest of the stream (so a compressed archive's checksum is checked); its length. Only
        zeros may follow the end-of-archive block (tar pads to its record size): members after a lone zero
        block, or any other data, are refused rather than silently left unread."""
        rest = self.buf[self.pos:]
        if rest.strip(b"\0"):
            raise ArchiveRefused(f"refusing snapshot {self.label}: data after the end of the archive")
        extra = len(rest)
        self.buf, self.pos = b"", 0
        while True:
            chunk = self.raw.read(_CHUNK)
            if not chunk:
                return extra
            extra += len(chunk)
            if chunk.strip(b"\0"):
                raise ArchiveRefused(f"refusing snapshot {self.label}: data after the end of the archive")
            if extra > MAX_TRAILER_BYTES:
                raise ArchiveRefused(f"refusing snapshot {self.label}: more than {MAX_TRAILER_BYTES} bytes after "
                                     "the end of the archive")


def _number(field: bytes, what: str, label: str) -> int:
    """A header's numeric field: octal text, or GNU base-256 (first byte 0x80 or 0xff)."""
    if field and field[0] in (0x80, 0xFF):
        value = int.from_bytes(field[1:], "big")
        if field[0] == 0xFF:
            value -= 1 << (8 * (len(field) - 1))
        return value
    text = field.split(b"\0", 1)[0].strip(b" ")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise ArchiveRefused(f"refusing snapshot {label}: a bad tar header ({what} {text[:20]!r})") from None


def _checksum_ok(header: bytes, label: str) -> bool:
    try:
        stored = _number(header[148:156], "checksum", label)
    except ArchiveRefused:
        return False
    unsigned = sum(header[:148]) + 256 + sum(header[156:])
    if stored == unsigned:
        return True
    signed = unsigned - sum(b for b in header[:148] + header[156:] if b > 127) * 2
    return stored == signed


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _open_stream(path: str, label: str):  # noqa: ANN202 - a binary file object
    """The archive's decompressed byte stream by its magic bytes (gzip, bzip2, xz or plain tar)."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by read_archive
        magic = raw.read(6)
        raw.seek(0)
    except PermissionError:
        from numatune.errors import PermissionDenied

        raise PermissionDenied(f"cannot read snapshot {label}: permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read snapshot {label}: {exc.strerror or exc}") from None
    if magic[:2] == b"\x1f\x8b":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if magic[:3] == b"BZh":
        import bz2

        return bz2.BZ2File(raw), raw
    if magic == b"\xfd7zXZ\x00":
        import lzma

        return lzma.LZMAFile(raw), raw
    return raw, raw


class TarIndex:
    """Every member of one archive by normalised name (no leading or trailing "/"; "" is the top)."""

    __slots__ = ("label", "kinds", "data", "links", "children", "name_bytes", "_resolved", "_nesting", "link_work",
                 "_need")

    def __init__(self, label: str) -> None:
        self.label = label
        self.kinds: dict[str, str] = {"": DIRECTORY}
        self.data: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.children: dict[str, dict[str, None]] = {"": {}}
        self.name_bytes = 0  # of every name entered and every link text: bound by MAX_NAME_TOTAL
        self._resolved: dict[str, object] = {}  # link -> (member or None, links followed), _ESCAPED or _BUSY
        self._nesting = 0  # links being resolved, one inside another
        self._need: dict[str, int] = {}  # link -> at least how many links its resolution follows (from _TooDeep)
        self.link_work = 0  # bytes of link text walked this command: bound by MAX_LINK_WORK

    # -- building -------------------------------------------------------------------------------
    def _refuse(self, why: str) -> ArchiveRefused:
        return ArchiveRefused(f"refusing snapshot {self.label}: {why}")

    def _name(self, raw: str) -> str:
        """A member name normalised inside the archive; refused if it climbs above the top or is too deep."""
        parts: list[str] = []
        for part in raw.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise self._refuse(f"{raw!r} climbs above the archive's top")
                parts.pop()
            else:
                parts.append(part)
        if len(parts) > MAX_DEPTH:
            raise self._refuse(f"a path deeper than {MAX_DEPTH} levels ({raw[:80]!r}...)")
        return "/".join(parts)

    def _place(self, name: str, kind: str) -> None:
        """Enter `name` as `kind`, its missing parents as directories; refused below a non-directory
        or where it would change what an earlier member of that name is."""
        old = self.kinds.get(name)
        if old is not None:
            if old != kind:
                raise self._refuse(f"{name!r} appears as a {old} and then as a {kind}")
            return
        parent, _, base = name.rpartition("/")
        self._parent(parent, name)
        self.name_bytes += len(name)
        if len(self.kinds) > MAX_MEMBERS or self.name_bytes > MAX_NAME_TOTAL:  # the top "" is no member
            raise self._over()
        self.kinds[name] = kind
        self.children[parent][base] = None
        if kind == DIRECTORY:
            self.children[name] = {}

    def _over(self) -> ArchiveRefused:
        """The refusal for one name too many (a member or a parent it implies) or too many bytes of names."""
        if len(self.kinds) > MAX_MEMBERS:
            return self._refuse(f"more than {MAX_MEMBERS} members (counting the directories their names imply)")
        return self._refuse(f"more than {MAX_NAME_TOTAL} bytes of names and link texts")

    def _parent(self, parent: str, name: str) -> None:
        kind = self.kinds.get(parent)
        if kind == DIRECTORY:
            return
        if kind is not None:
            raise self._refuse(f"{name!r} lies below {parent!r}, which is a {kind}, not a directory")
        self._place(parent, DIRECTORY)

    def _add(self, name: str, typeflag: bytes, size: int, linkname: str, data: bytes | None) -> None:
        if not name:
            if typeflag == b"5":
                return  # "./" itself
            raise self._refuse("a member with an empty name")
        if typeflag in (b"0", b"\0", b"7"):
            self._place(name, REGULAR)
            self.data[name] = data or b""
        elif typeflag == b"5":
            self._place(name, DIRECTORY)
        elif typeflag == b"2":
            if not linkname:
                raise self._refuse(f"{name!r} is a link with no target")
            self._place(name, SYMLINK)
            self.name_bytes += len(linkname)
            if self.name_bytes > MAX_NAME_TOTAL:
                raise self._over()
            self.links[name] = linkname
        elif typeflag == b"1":
            target = self._name(linkname)
            if self.kinds.get(target) != REGULAR:
                raise self._refuse(f"hard link {name!r} names {linkname!r}, which is not a regular file earlier "
                                   "in the archive")
            self._place(name, REGULAR)
            self.data[name] = self.data[target]
        elif typeflag in (b"3", b"4", b"6"):
            raise self._refuse(f"{name!r} is a device node or FIFO")
        else:
            raise self._refuse(f"{name!r} has tar type {typeflag!r}, which a snapshot never holds")

    # -- reading ----------------------------------------------------------------------------------
    def lookup(self, path: str, *, follow: bool = True) -> str | None:
        """The member `path` names after resolving links inside the archive (the last one only if
        `follow`); None if nothing is there; Escapes if a link on the way leaves the top or loops."""
        return self._walk(path, follow)[0]

    def _walk(self, path: str, follow: bool) -> tuple[str | None, int]:
        """`walk` with each link's end taken from `resolve_link` (memoised): (member or None, links followed).
        A lookup follows at most MAX_LINK_HOPS links in all, the links a memoised one took counted too."""
        kinds = self.kinds
        pending = [p for p in path.split("/") if p not in ("", ".")]
        pending.reverse()
        done: list[str] = []
        hops = 0
        while pending:
            part = pending.pop()
            if part == "..":
                if not done:
                    raise Escapes(path)
                done.pop()
                continue
            here = "/".join((*done, part))
            kind = kinds.get(here)
            if kind is None:
                return None, hops
            if kind == SYMLINK and (pending or follow):
                end, used = self.resolve_link(here)
                hops += used
                if hops > MAX_LINK_HOPS:
                    raise Escapes(path)
                if end is None:
                    return None, hops
                kind = kinds[end]
                done = end.split("/") if end else []
            else:
                done.append(part)
            if pending and kind != DIRECTORY:
                return None, hops  # ENOTDIR: reads as missing
        return "/".join(done), hops

    def resolve_link(self, name: str) -> tuple[str | None, int]:
        """Where the link member `name` ends, every link after it followed: (member or None if it dangles,
        links followed, itself included). Resolved once and kept, so a command's lookups through any
        number of links cost one walk of each link's text; Escapes (kept too) if it leaves the top or loops."""
        hit = self._resolved.get(name)
        if hit is None:
            target = self.links[name]
            need = self._need.get(name, 1)
            if self._nesting + need > _MAX_NESTING:
                raise _TooDeep(name, need)
            self.link_work += len(target) + 1
            if self.link_work > MAX_LINK_WORK:  # only chains past MAX_LINK_HOPS, walked again and again, get here
                raise Escapes(name)
            self._resolved[name] = _BUSY
            parent = name.rpartition("/")[0]  # a real directory: no member is ever placed below a link
            self._nesting += 1
            try:
                if target.startswith("/"):
                    raise Escapes(name)
                end, used = self._walk(f"{parent}/{target}" if parent else target, True)
                if used >= MAX_LINK_HOPS:
                    raise Escapes(name)
            except _TooDeep as exc:
                need = exc.need + 1
                if need <= MAX_LINK_HOPS:
                    del self._resolved[name]  # unknown from here: a shallower start resolves it
                    self._need[name] = max(self._need.get(name, 1), need)
                    raise _TooDeep(name, need) from None
                self._resolved[name] = _ESCAPED  # more than MAX_LINK_HOPS links from here, wherever met
                raise Escapes(name) from None
            except Escapes:
                self._resolved[name] = _ESCAPED
                raise
            finally:
                self._nesting -= 1
            hit = self._resolved[name] = (end, used + 1)
        if hit is _ESCAPED or hit is _BUSY:  # _BUSY: met again while it is being resolved, a loop
            raise Escapes(name)
        return hit  # type: ignore[return-value]


def walk(path: str, kind_of, link_of, *, follow: bool = True) -> str | None:  # noqa: ANN001
    """Resolve `path` (relative to a top, "/"-separated) one component at a time in a namespace given by
    `kind_of(p)` (REGULAR, DIRECTORY, SYMLINK, another kind, or None: absent) and `link_of(p)` (a link's
    text): never through the host's filesystem. None if a component is absent (or a non-directory has
    children); Escapes for a link that is absolute, climbs above the top, or loops past MAX_LINK_HOPS."""
    pending = [p for p in path.split("/") if p not in ("", ".")]
    pending.reverse()
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop()
        if part == "..":
            if not done:
                raise Escapes(path)
            done.pop()
            continue
        here = "/".join((*done, part))
        kind = kind_of(here)
        if kind is None:
            return None
        if kind == SYMLINK and (pending or follow):
            hops += 1
            target = link_of(here)
            if target.startswith("/") or hops > MAX_LINK_HOPS:
                raise Escapes(path)
            pending.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
            continue
        if pending and kind != DIRECTORY:
            return None  # ENOTDIR: reads as missing
        done.append(part)
    return "/".join(done)


def read_archive(path: str, label: str) -> TarIndex:
    """The archive at `path` as a TarIndex; ArchiveRefused (exit 3) past a bound or for a damaged archive."""
    stream, raw = _open_stream(path, label)
    index = TarIndex(label)
    try:
        _parse(_Stream(stream, label), index, label)
    except (OSError, EOFError, *_codec_errors(stream)) as exc:  # CRC, truncation, bad deflate data
        raise ArchiveRefused(f"refusing snapshot {label}: the archive is damaged ({_reason(exc)})") from None
    finally:
        stream.close()
        raw.close()
    return index


def _codec_errors(stream) -> tuple[type[BaseException], ...]:  # noqa: ANN001
    """The decompressor's own error class (zlib.error, lzma.LZMAError), which is no OSError."""
    kind = type(stream).__module__
    if kind == "gzip":
        import zlib

        return (zlib.error,)
    if kind == "lzma":
        import lzma

        return (lzma.LZMAError,)
    return ()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, EOFError):
        return "truncated: " + text
    return text


def _parse(stream: _Stream, index: TarIndex, label: str) -> None:
    members = total = 0
    long_name = long_link = None
    pax: dict[str, str] = {}
    extended = 0
    first = True
    while True:
        try:
            header = stream.take(BLOCK)
        except ArchiveRefused:
            if first:
                raise NotASysfsTree(f"{label} is neither a directory nor a tar archive") from None
            raise
        if header == _ZEROS:
            stream.drain()
            return
        if not _checksum_ok(header, label):
            if first:
                raise NotASysfsTree(f"{label} is neither a directory nor a tar archive")
            raise index._refuse("a damaged tar header (checksum mismatch)")
        first = False
        typeflag = header[156:157]
        size = _number(header[124:136], "size", label)
        if size < 0:
            raise index._refuse("a negative member size")
        padded = (size + BLOCK - 1) // BLOCK * BLOCK
        if typeflag in (b"L", b"K", b"x", b"g"):
            extended += 1
            if size > MAX_EXTENDED_BYTES:
                raise index._refuse(f"an extended header declares {size} bytes (at most {MAX_EXTENDED_BYTES})")
            if extended > 4:
                raise index._refuse("more than 4 extended headers in a row")
            body = stream.take(padded)[:size]
            if typeflag == b"L":
                long_name = _text(body)
            elif typeflag == b"K":
                long_link = _text(body)
            elif typeflag == b"x":
                pax.update(_pax(body, index))
            continue  # "g": global pax records carry nothing a snapshot needs
        extended = 0
        members += 1
        if members > MAX_MEMBERS:
            raise index._refuse(f"more than {MAX_MEMBERS} members")
        name = pax.get("path") or long_name
        if name is None:
            name = _text(header[0:100])
            if header[257:263] == b"ustar\0" and header[345] != 0:  # POSIX only: GNU keeps times there
                name = _text(header[345:500]) + "/" + name
        linkname = pax.get("linkpath") or long_link or _text(header[157:257])
        if "size" in pax:
            try:
                size = int(pax["size"])
            except ValueError:
                raise index._refuse("a bad pax size record") from None
            if size < 0:
                raise index._refuse("a negative member size")
            padded = (size + BLOCK - 1) // BLOCK * BLOCK
        pax, long_name, long_link = {}, None, None
        if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES or len(linkname) > MAX_NAME_BYTES:
            raise index._refuse(f"a name or link longer than {MAX_NAME_BYTES} bytes")
        if "\0" in name or "\0" in linkname:  # only a pax record can carry one; no file system can
            raise index._refuse("a name or link target with a NUL byte")
        data = None
        if typeflag in (b"0", b"\0", b"7"):
            if size > MAX_FILE_BYTES:
                raise index._refuse(f"{name} declares {size} bytes (at most {MAX_FILE_BYTES})")
            total += size
            if total > MAX_TOTAL_BYTES:
                raise index._refuse(f"more than {MAX_TOTAL_BYTES} bytes of files")
            data = stream.take(padded)[:size] if size else b""
        elif size:
            if typeflag not in (b"1", b"2", b"5"):
                raise index._refuse(f"{name!r} has tar type {typeflag!r}, which a snapshot never holds")
            raise index._refuse(f"{name!r} is a link or directory with {size} bytes of data")
        index._add(index._name(name), typeflag, size, linkname, data)


def _pax(body: bytes, index: TarIndex) -> dict[str, str]:
    """Pax records ("LEN key=value\\n"), each length checked against what is left."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        if body[pos] == 0:
            break
        space = body.find(b" ", pos, pos + 12)
        try:
            length = int(body[pos:space])
        except ValueError:
            raise index._refuse("a bad pax record") from None
        if space < 0 or length <= space - pos or pos + length > len(body):
            raise index._refuse("a bad pax record")
        record = body[space + 1:pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def tree_top(index: TarIndex) -> str | None:
    """The member holding sys/ or proc/: the archive's top or its single top directory; None if neither."""
    def is_tree(top: str) -> bool:
        prefix = f"{top}/" if top else ""
        return DIRECTORY in (index.kinds.get(prefix + "sys"), index.kinds.get(prefix + "proc"))

    if is_tree(""):
        return ""
    tops = list(index.children[""])
    if len(tops) == 1 and index.kinds[tops[0]] == DIRECTORY and is_tree(tops[0]):
        return tops[0]
    return None


class ArchiveRoot:
    """A TarIndex served as a root below `top`: the same calls as roots.rootdir.RootDir, from memory."""

    __slots__ = ("index", "top", "label", "_dirs")

    def __init__(self, index: TarIndex, top: str) -> None:
        self.index, self.top, self.label = index, top, index.label
        self._dirs: dict[str, object] = {}  # rel of a directory -> its member name, None (absent) or _ESCAPED

    def _lookup(self, rel: str, follow: bool = True) -> str | None:
        if not rel:
            return self.top
        head, _, name = rel.rpartition("/")
        parent = self._dirs.get(head, self)
        if parent is self:
            parent = self._directory(head)
        if parent is _ESCAPED:
            raise Escapes(rel)
        if parent is None:
            return None
        full = f"{parent}/{name}" if parent else name
        kind = self.index.kinds.get(full)
        if kind == SYMLINK and follow:
            return self.index.lookup(full)
        return full if kind is not None else None

    def _directory(self, head: str) -> object:
        """The directory member `head` names (links followed), None or _ESCAPED: found by a loop, never by
        recursion, so a path of thousands of levels (a process's cgroup) costs no Python stack, and in time linear
        in its length. Up from `head` to a directory already known, a few levels at most (a sibling's lookup),
        each kept; else down from the top, each step joining one component to a member's name (at most
        MAX_NAME_BYTES), only `head` kept."""
        dirs = self._dirs
        pending: list[tuple[str | None, str]] = []  # (rel kept, or None; its last component), deepest first
        at = head
        parent: object = self
        for _ in range(_NEAR):
            if not at:
                parent = self.top
                break
            known = dirs.get(at, self)
            if known is not self:
                parent = known
                break
            up, _, name = at.rpartition("/")
            pending.append((at, name))
            at = up
        if parent is self:  # deep and unknown: from the top
            parent = self.top
            pending = [(None, name) for name in reversed(head.split("/"))]
            pending[0] = (head, pending[0][1])
        kinds = self.index.kinds
        for at, name in reversed(pending):
            if parent is not None and parent is not _ESCAPED:
                full = f"{parent}/{name}" if parent else name
                try:
                    member = self.index.lookup(full) if kinds.get(full) == SYMLINK else full
                    parent = member if member is not None and kinds.get(member) == DIRECTORY else None
                except Escapes:
                    parent = _ESCAPED
            if at is not None:
                dirs[at] = parent
        return parent

    def kind(self, rel: str, *, follow: bool = True) -> str | None:
        full = self._lookup(rel, follow)
        return None if full is None else self.index.kinds[full]

    def read(self, rel: str, limit: int) -> bytes:  # noqa: ARG002 - every member is within MAX_FILE_BYTES
        full = self._lookup(rel)
        if full is None:
            raise FileNotFoundError(2, "no such file", rel)
        if self.index.kinds[full] != REGULAR:
            raise IsADirectoryError(21, "is a directory", rel)
        return self.index.data[full]

    def listdir(self, rel: str) -> list[tuple[str, str]]:
        full = self._lookup(rel)
        if full is None:
            raise FileNotFoundError(2, "no such directory", rel)
        if self.index.kinds[full] != DIRECTORY:
            raise NotADirectoryError(20, "not a directory", rel)
        prefix = f"{full}/" if full else ""
        kinds = self.index.kinds
        return [(name, kinds[prefix + name]) for name in self.index.children[full]]

    def readlink(self, rel: str) -> str:
        full = self._lookup(rel, follow=False)
        if full is None or self.index.kinds[full] != SYMLINK:
            raise OSError(22, "not a link", rel)
        return self.index.links[full]

    def realpath(self, rel: str) -> str | None:
        full = self._lookup(rel)
        if full is None:
            return None
        top = self.top
        if full == top:
            return ""
        if not top:
            return full
        return full[len(top) + 1:] if full.startswith(top + "/") else None

    def write(self, rel: str, text: str) -> None:  # noqa: ARG002
        raise InputError(f"--root {self.label} is a snapshot archive: nothing is ever written into one",
                         hint="extract it (or copy the tree) and pass that directory")

    def create(self, rel: str, data: bytes) -> None:  # noqa: ARG002
        self.write(rel, "")
