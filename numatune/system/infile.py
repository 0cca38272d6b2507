"""The one reader of the files a user names as input: a policy, an `irq` plan or state file, the
scheduler configurations `check` reads, `plan-memory --probe` and `audit --probe` results, the reports
`fleet` and `diff` read; and the one parser of the documents among them (JSON, TOML, YAML:
`load_document`), bounded in size, nesting and what the parse would build (containers and values counted
by a linear scan) before a parser sees them. What comes out is read through numatune.model.document,
which checks each field's type and range where it is read.

A regular file only, read whole up to a bound (a bound per kind: 4 MiB for a configuration, 16 MiB for a
report or probe result), refused on its size before a byte is read: a FIFO, a device such as /dev/zero or a directory is
one line and exit 3 (InputError), never a hang or gigabytes of memory, and it is never opened (the
kind is looked at first). A leaf module: stdlib only.
"""

from __future__ import annotations

import gc
import os
import stat

from numatune.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_INPUT_BYTES = 64 << 20  # a state file of 100,000 IRQs is ~20 MB; a policy or config a few KB
#: A report or probe document numatune wrote (`inspect --json` for diff, `probe --json` for --probe): an inspect
#: report of a 1,152-CPU node is ~100 KB, a probe of 34 nodes ~1 MB.
MAX_REPORT_BYTES = 16 << 20


_MAGIC = ((b"\x1f\x8b", "a gzip file"), (b"BZh", "a bzip2 file"), (b"\xfd7zXZ\x00", "an xz file"),
          (b"\x28\xb5\x2f\xfd", "a zstd file"), (b"PK\x03\x04", "a zip file"))


def decode_input(raw: bytes, what: str, name: str) -> str:
    """The UTF-8 text of an input file; a compressed or binary file is named as what it is (a snapshot
    archive given where a JSON state file goes), never a codec's byte offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        kind = next((k for magic, k in _MAGIC if raw.startswith(magic)), None)
        if kind is None and len(raw) > 262 and raw[257:262] == b"ustar":
            kind = "a tar archive"
        shown = f"is {kind}" if kind else f"is not UTF-8 text (byte {exc.start})"
        raise InputError(f"{what} {name} {shown}, not a {what}") from None


def read_text(path: str | os.PathLike[str], what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the file `what` at `path`: read_input's bounds, then decode_input's one message for a
    file that is not text (every document numatune takes is read so)."""
    return decode_input(read_input(path, what, limit), what, os.fspath(path))


def read_input(path: str | os.PathLike[str], what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the file `what` (e.g. "state file") at `path`; InputError for anything else. A file past
    `limit` is refused on its size, before a byte is read, and the bytes are read into one buffer (a list of
    pieces joined held the file twice)."""
    name = os.fspath(path)
    fd = open_input(name, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise InputError(f"{what} {name} is larger than {_mib(limit)}, which no {what} is")
        pieces = [os.read(fd, size + 1)]
        total = len(pieces[0])
        while total > size and (chunk := os.read(fd, 1 << 20)):  # it grew since: read on, still bounded
            total += len(chunk)
            if total > limit:
                raise InputError(f"{what} {name} is larger than {_mib(limit)}, which no {what} is")
            pieces.append(chunk)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _mib(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def open_input(path: str | os.PathLike[str], what: str) -> int:
    """A file descriptor open for reading on the regular file at `path` (for a reader that streams it);
    InputError for a FIFO, a device, a directory or a missing file, which are never opened."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise InputError(f"{what} {name} is not a regular file")
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} {name} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the look
            raise InputError(f"{what} {name} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- documents -------------------------------------------------------------------------------------------
#: No document numatune reads nests deeper (an inspect report ~8 levels, a kubelet config ~5); the
#: parsers recurse once per level, so 1,000 nested "[" would end in RecursionError (exit 70).
MAX_DEPTH = 64
#: TOML and YAML are parsed in pure Python, about 4-8 us of CPU a value (PyYAML's libyaml loader still resolves
#: and constructs each node in Python): a configuration is a few KB; 4 MiB of long strings is cheap, and the
#: values are bounded apart (MAX_CONFIG_VALUES). JSON (C speed) keeps read_input's bound.
MAX_CONFIG_BYTES = 4 << 20
#: Values (and keys) a TOML or YAML document may hold: ~1-2 s of CPU. A kubelet config or policy holds ~100;
#: `kubectl get resourceslices -o yaml` of ~500 eight-GPU nodes ~200,000 (a cluster's file: give it as JSON,
#: or only this node's slices). 4 MiB of `- 1` lines held a million: 75 s.
MAX_CONFIG_VALUES = 200_000
#: What a JSON document may build when parsed, estimated before parsing from its text and the containers and
#: values the scan counts (an empty object is 64 bytes parsed, a value ~48 with its slot): an honest state
#: file of 32,768 IRQs is ~40 MB; 63 MB of `{}` would have built 1.6 GB.
MAX_PARSED_BYTES = 96 << 20
CONTAINER_BYTES, VALUE_BYTES = 64, 48
_NOT_STRUCTURE = {  # strings and comments: their brackets are text. Each pattern is linear: every character
    # belongs to exactly one part ("unrolled" strings), and an unclosed string ends the text instead of failing.
    "json": r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"?',
    "toml": r'"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*"?|\'[^\'\n]*\'?|#[^\n]*',
    "yaml": r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"?|\'[^\']*\'?|(?:^|(?<=\s))#[^\n]*',
}
#: What marks one more value (or key) outside strings: separators, and for TOML and YAML each line.
_VALUE_MARKS = {"json": (",", ":"), "toml": ("\n", "=", ","), "yaml": ("\n", ":", ",", "- ")}
_NAMES = {"json": "JSON", "toml": "TOML", "yaml": "YAML"}


_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
#: JSON is scanned a piece at a time, cut after a newline (never inside a valid JSON string): the strings' removal
#: makes one object a string, so a whole 64 MiB of `"",` at once would have held gigabytes.
_PIECE = 1 << 20
_LONG_LINE = 4 << 20  # a JSON line longer than this is counted with its strings' characters (more, never fewer)


def structure(text: str, fmt: str) -> tuple[int, int, int]:
    """(nesting depth, at most MAX_DEPTH + 1; containers; values and keys): a linear scan at C speed, made before
    a recursive parser sees the text. Counts the brackets of a document cut short too (a stream's piece), and
    errs towards more, never fewer, where a string's end is unclear. JSON is scanned in pieces of ~1 MiB (cut
    after a newline, which no valid JSON string holds); TOML and YAML, at most MAX_CONFIG_BYTES, whole (YAML's
    indentation is not measured past MAX_CONFIG_VALUES values: such a document is refused on them)."""
    import re

    pattern = re.compile(_NOT_STRUCTURE[fmt])
    marks = _VALUE_MARKS[fmt]
    values, block, dotted, brackets = 0, 0, 0, []
    pos, size = 0, len(text)
    while pos < size:
        end = size if fmt != "json" else text.find("\n", pos + _PIECE) + 1 or size
        piece = text[pos:end]
        pos = end
        skeleton = piece if len(piece) > _LONG_LINE and fmt == "json" else pattern.sub("", piece)
        del piece
        values += sum(skeleton.count(mark) for mark in marks)
        if fmt == "yaml" and values <= MAX_CONFIG_VALUES:  # past it the document is refused on its values
            block = _block_depth(skeleton)
        if fmt == "toml":  # dotted keys nest without a bracket (`a.b.c = 1`)
            dotted = max(dotted, _dotted_depth(skeleton))
        # UTF-8 never holds an ASCII byte inside another character: the brackets are the bytes 5b 5d 7b 7d
        brackets.append(skeleton.encode("utf-8", "surrogatepass").translate(_BRACKETS, _NOT_BRACKETS))
        del skeleton
    pairs = b"".join(brackets).decode("ascii")
    del brackets
    containers = pairs.count("(")
    depth = 0
    while "()" in pairs and depth <= MAX_DEPTH:  # each pass removes the innermost pairs: one level
        pairs = pairs.replace("()", "")
        depth += 1
    depth += pairs.count("(")  # opened and not closed (yet)
    return min(depth + block + dotted, MAX_DEPTH + 1), containers, values + containers


def nesting(text: str, fmt: str) -> int:
    """How deep TEXT's brackets (and, for YAML, its indented blocks) nest, at most MAX_DEPTH + 1 (structure's)."""
    return structure(text, fmt)[0]


_KEY_ENDS = str.maketrans("{},[]", "\n\n\n\n\n")


def _dotted_depth(skeleton: str) -> int:
    """TOML's nesting by dotted keys, which no bracket shows (`a.b.c = 1` is two tables below `a = 1`, `[a.b]`
    one below `[a]`): the most dots of a table header plus the most dots of a key, each key read back from its
    `=` to the line's start or an inline table's `{` or `,` (strings and comments are already gone: a quoted
    key's parts still count by their dots). A linear scan; tomllib built 20,000 levels in 1.9 GB."""
    headers = keys = 0
    for line in skeleton.split("\n"):
        if line.lstrip().startswith("["):
            headers = max(headers, line.count("."))
        for piece in line.translate(_KEY_ENDS).split("\n"):
            for key in piece.split("=")[:-1]:
                keys = max(keys, key.count("."))
    return headers + keys


def _block_depth(text: str) -> int:
    """YAML's nesting by indentation: the longest chain of ever deeper lines ("- - -" counts each dash)."""
    stack: list[int] = []
    deepest = 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        i, extra = indent, 0
        while line.startswith(("- ", "? "), i):
            i, extra = i + 2, extra + 1
            while line.startswith(" ", i):
                i += 1
        if i >= len(line.rstrip()):
            continue
        while stack and stack[-1] >= indent:
            stack.pop()
        stack.append(indent)
        deepest = max(deepest, len(stack) + extra)
        if deepest > MAX_DEPTH:
            break
    return deepest


def rough_json_bytes(text: str, start: int = 0) -> int:
    """An upper estimate of what TEXT[start:] builds parsed as JSON, from counts alone (a string's brackets and
    commas counted as structure: more, never less): four passes at C speed, nothing copied. For a stream's
    window, where structure()'s exact scan would cost more than the decoding."""
    containers = text.count("{", start) + text.count("[", start)
    values = text.count(",", start) + text.count(":", start) + containers
    return len(text) - start + CONTAINER_BYTES * containers + VALUE_BYTES * values


def check_nesting(text: str, where: str, fmt: str = "json") -> None:
    """InputError (exit 3) naming WHERE when TEXT nests deeper than MAX_DEPTH, or would build more than numatune
    parses (JSON: MAX_PARSED_BYTES estimated; TOML, YAML: MAX_CONFIG_VALUES values)."""
    depth, containers, values = structure(text, fmt)
    if depth > MAX_DEPTH:
        raise InputError(f"{where} nests deeper than {MAX_DEPTH} levels, which no {_NAMES[fmt]} document "
                         "numatune reads does: refused before parsing")
    if fmt == "json":
        parsed = len(text) + CONTAINER_BYTES * containers + VALUE_BYTES * values
        if parsed > MAX_PARSED_BYTES:
            raise InputError(f"{where} would take about {parsed >> 20:,} MiB parsed ({containers:,} arrays and "
                             f"objects, {values:,} values), more than the {MAX_PARSED_BYTES >> 20} MiB any JSON "
                             "document numatune reads takes: refused before parsing")
    elif values > MAX_CONFIG_VALUES:
        raise InputError(f"{where} holds about {values:,} values, more than the {MAX_CONFIG_VALUES:,} numatune parses "
                         f"in {_NAMES[fmt]} (a configuration holds hundreds): refused before parsing",
                         hint="give a large listing as JSON (kubectl ... -o json), or only this node's part of it")


def load_document(text: str, where: str, fmt: str = "json") -> Any:
    """A JSON, TOML or YAML document a user (or a root) gave, bounded before it is parsed: size (TOML and
    YAML: MAX_CONFIG_BYTES), nesting (MAX_DEPTH), and for JSON numbers of more than 4,300 digits (Python's
    limit: ValueError). Anything wrong is InputError naming WHERE, exit 3. A YAML stream of several
    documents (`---`) is the list of them (empty ones dropped), one document is itself."""
    if fmt != "json" and len(text) > MAX_CONFIG_BYTES:
        raise InputError(f"{where} is larger than {MAX_CONFIG_BYTES >> 20} MiB, which no {_NAMES[fmt]} "
                         "configuration is")
    check_nesting(text, where, fmt)

    collecting = gc.isenabled()
    gc.disable()  # a parse builds only acyclic containers: the collector's passes made it superlinear (YAML: 2x)
    try:
        if fmt == "json":
            import json

            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where} is not valid JSON: {exc}") from None
        if fmt == "toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            try:
                return tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise InputError(f"{where} is not valid TOML: {exc}") from None
        try:
            import yaml
        except ImportError:
            raise InputError(f"reading YAML ({where}) needs PyYAML", hint="reinstall numatune (PyYAML is one of "
                             "its dependencies: pip install pyyaml), or give it as JSON") from None
        try:
            # libyaml's loader where PyYAML has it: the same safe constructors, ~50x faster on a 4 MiB
            # `kubectl get -o yaml` (the Python one took 13 s on 600,000 aliases)
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
            docs = []
            content = 0  # the values written in the stream (comments and a string's length count for nothing)
            # the collector stays off (above): the node graph and the values hold no cycle it could free, and its
            # passes over them grew with the document (a 4x larger one took 6-7x as long)
            try:
                while loader.check_node():  # yaml.load_all, with the merge keys counted between compose and build
                    node = loader.get_node()
                    maps, written = _composed(node, yaml.MappingNode)
                    content += written
                    # on every document: a merge key is known by its resolved tag, which the text may spell
                    # `<<`, `!!merge`, `!<tag:yaml.org,2002:%6Derge>` or through a %TAG prefix
                    if _merged_size(maps, yaml.MappingNode, written * ALIAS_GROWTH + 10_000) is None:
                        raise InputError(f"{where}: its YAML merge keys (<<: *name) copy more than {ALIAS_GROWTH} "
                                         "entries for each value written in it (or merge a map into itself), which "
                                         "no configuration needs: refused")
                    doc = loader.construct_document(node)
                    if doc is not None:
                        docs.append(doc)
            finally:
                loader.dispose()
        except yaml.YAMLError as exc:
            raise InputError(f"{where} is not valid YAML: {' '.join(str(exc).split())}") from None
        expanded = _expanded_size(docs, content * ALIAS_GROWTH + 10_000)
        if expanded is None:
            raise InputError(f"{where}: its YAML aliases (*name) expand to more than {ALIAS_GROWTH} values for each "
                             "value written in it (or hold themselves), which no configuration needs: refused")
        return docs[0] if len(docs) == 1 else docs
    except RecursionError:  # past the scan's estimate (a string's end misread): still one line, exit 3
        raise InputError(f"{where} nests too deeply to be read") from None
    except ValueError as exc:  # a number of more than 4,300 digits (json, tomllib, yaml's int)
        raise InputError(f"{where} is not a document numatune reads: {value_error(exc)}") from None
    finally:
        if collecting:
            gc.enable()


# A YAML alias (*name) is one more reference to a node, not a copy: 671 bytes of nested aliases made a list of
# 10^12 values, which every reader that walks or prints the document expands (60 s and 3.5 GB, then killed).
# Without aliases a document holds as many values as are written in it; 16 for each leaves room for honest
# anchors. What is written is counted on the composed nodes (`_composed`), never in bytes: a file padded with
# comments or one long string (the bound was the file's bytes: 4 MiB of comments let 2.56 million devices
# through) gains nothing.
ALIAS_GROWTH = 16


MERGE_TAG = "tag:yaml.org,2002:merge"


def _composed(root: Any, mapping: type) -> tuple[list[Any], int]:
    """The map nodes of the composed document `root` (a yaml node), each once however many aliases reach it, and
    how many values are written in it: each distinct node and each entry of a sequence or map (an alias is one
    entry, its node is counted once), whatever a scalar's length. Linear in the nodes."""
    maps: list[Any] = []
    seen: set[int] = set()
    written = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        written += 1
        if not isinstance(node.value, list):
            continue
        if isinstance(node, mapping):
            maps.append(node)
            written += 2 * len(node.value)
            stack.extend(n for pair in node.value for n in pair)
        else:
            written += len(node.value)
            stack.extend(node.value)
    return maps, written


def _merged_size(maps: list[Any], mapping: type, limit: int) -> int | None:
    """How many key/value pairs PyYAML's constructor will copy building every map of a composed document (its
    map nodes `maps`, from `_composed`), with each merge key (`<<: *a`, `<<: [*a, *b]`) counted as the pairs of
    the maps it merges, themselves merged first; None once that passes `limit`, or for a map that merges itself. Linear
    in the distinct nodes: a chain `x{i}: &a{i} {<<: *a{i-1}, k{i}: 0}` builds maps of 1, 2, ... n pairs
    (n^2 in all: 440 KB of it ended in MemoryError), and `<<: [*a, *a]` doubles a map at each level."""
    pairs: dict[int, int] = {}  # a map's pairs once its merges are copied in
    total = 0
    for top in maps:
        todo = [(top, False)]
        open_maps: set[int] = set()
        while todo:
            node, sources_done = todo.pop()
            if id(node) in pairs and not sources_done:
                continue
            sources = [s for key, value in node.value if key.tag == MERGE_TAG
                       for s in (value.value if isinstance(value.value, list) and not isinstance(value, mapping)
                                 else [value]) if isinstance(s, mapping)]
            if not sources_done:
                if id(node) in open_maps:
                    return None
                open_maps.add(id(node))
                todo.append((node, True))
                todo.extend((s, False) for s in sources if id(s) not in pairs)
                continue
            size = sum(key.tag != MERGE_TAG for key, _ in node.value) + sum(pairs[id(s)] for s in sources)
            if size > limit:
                return None
            pairs[id(node)] = size
            open_maps.discard(id(node))
            total += size
            if total > limit:
                return None
    return total


def _expanded_size(doc: Any, limit: int) -> int | None:
    """How many values `doc` holds with every alias expanded (each shared node counted once a reference, in time
    linear in the distinct nodes); None once that passes `limit`."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # being counted: met again below itself, a node holds itself (infinite)
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, children_done = stack.pop()
        if not isinstance(node, (dict, list)) or (id(node) in sizes and not children_done):
            continue
        kids = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if not children_done:
            if id(node) in open_nodes:
                return None
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if isinstance(k, (dict, list)) and id(k) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(k), 1) for k in kids)
        if total > limit:
            return None
        sizes[id(node)] = total
        open_nodes.discard(id(node))
    return sizes.get(id(doc), 1)


def value_error(exc: ValueError) -> str:
    """What a parser's stray ValueError means, in one line (Python's own words for a long number name a
    function to call)."""
    text = " ".join(str(exc).split())
    if "integer string conversion" in text:
        return "it holds a number of more than 4,300 digits, which no real document has"
    return text[:120]
