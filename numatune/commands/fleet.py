"""Read a fleet's inspect reports as a stream and group them, without the command line.

Inputs are files, directories of *.json files and stdin: JSON documents one after another (pretty or
one per line), or pdsh/clush output whose lines start with "host: " (lines of different hosts
interleaved). Each document is checked, folded into a `FleetTally` and dropped, so memory grows with
the number of topology groups, not with the number of reports. A document that is not a
numatune.inspect report, or bytes that are not JSON, become an "unreadable" line; the rest go on.
A JSON array of reports (`jq -s`) is read element by element, in linear time and the memory of one report.
`numatune fleet` is a thin layer over `run_fleet`.
"""

from __future__ import annotations

import json
import os
import re
import sys

from numatune.analysis.diff import check_inspect_document
from numatune.analysis.fleet import Fleet, FleetTally, Unreadable
from numatune.errors import InputError
from numatune.system.infile import MAX_PARSED_BYTES, MAX_REPORT_BYTES, rough_json_bytes, value_error

_HOST = re.compile(r"^[A-Za-z0-9_.\-\[\]@]+$")  # pdsh/clush: "node01: text"
_WS = re.compile(r"\s*")
CHUNK = 1 << 20  # bytes read from a stream at a time
WHOLE_FILE = 8 << 20  # files up to this size are read in one go (a report is ~12 KB)
_decoder = json.JSONDecoder()
DEEP = "not a report: nests deeper than the JSON decoder goes (about 1,000 levels)"
BIG = f"not a report: a document larger than {MAX_REPORT_BYTES >> 20} MiB, which no inspect report is"
CHECKED_WINDOW = 1 << 16  # text from a document's start past which what it would build is estimated first


def _too_costly(text: str, start: int = 0) -> str | None:
    """Why decoding TEXT[start:] (a document and, maybe, those after it) could build more than numatune parses
    (system.infile's estimate from counts alone: strings counted as structure), else None."""
    cost = rough_json_bytes(text, start)
    if cost <= MAX_PARSED_BYTES:
        return None
    return (f"not a report: {(len(text) - start) / 2**20:.1f} MiB of JSON that could take {cost >> 20:,} MiB parsed "
            f"(more than {MAX_PARSED_BYTES >> 20} MiB): not decoded")


#: Documents in a row that are not reports after which the rest of an input is not read: one JSON array of
#: 4 million numbers was 4 million unreadable entries (1 GiB, then counted: still 30 s).
MAX_MISSES = 1000


class _Source:
    """Names and labels the documents of one input: the first is NAME, later ones NAME#2, NAME#3 (and
    the first is renamed NAME#1 once a second arrives)."""

    __slots__ = ("tally", "unreadable", "where", "name", "count", "first", "misses", "stopped")

    def __init__(self, tally: FleetTally, unreadable: Unreadable, where: str, name: str) -> None:
        self.tally, self.unreadable, self.where, self.name = tally, unreadable, where, name
        self.count = 0
        self.first: int | None = None
        self.misses = 0  # documents in a row that were not reports
        self.stopped = False  # MAX_MISSES of them: the rest of the input is not read

    def take(self, doc: object) -> None:
        for d in doc if isinstance(doc, list) else (doc,):
            if self.stopped:
                return
            self.count += 1
            label = self.where if self.count == 1 else f"{self.where} #{self.count}"
            if self.count == 2 and self.first is not None:
                self.tally.rename(self.first, f"{self.name}#1")
            try:
                check_inspect_document(d, label)
            except InputError as exc:
                self.unreadable.append((label, exc.message.removeprefix(f"{label} ").removeprefix(f"{label}: ")))
                self.misses += 1
                if self.misses >= MAX_MISSES:
                    self.stopped = True
                    why = f"{MAX_MISSES:,} documents in a row were not reports: the rest of this input is not read"
                    self.unreadable.keep((self.where, why))
                continue
            self.misses = 0
            name = d.get("hostname") or (self.name if self.count == 1 else f"{self.name}#{self.count}")
            index = self.tally.add(name, d)
            if self.count == 1 and not d.get("hostname"):
                self.first = index

    def bad(self, why: str) -> None:
        """The next document is not JSON (the rest of this input is not read)."""
        self.unreadable.append((self.where if not self.count else f"{self.where} #{self.count + 1}", why))


def _decode_all(text: str, src: _Source) -> None:
    """Every JSON document in TEXT; stops at the first that is not valid JSON."""
    _decode_stream((text,), src)


def _decode_stream(chunks, src: _Source) -> None:  # noqa: ANN001 - iterable of str
    """Documents from text arriving in pieces, decoded as each completes; stops at the first that is
    not valid JSON. A top-level JSON array (`jq -s` output) is walked element by element, each report
    decoded and dropped on its own: linear time, memory of one report and one piece, whatever the
    array's length (decoding the array whole held every report, and re-decoding it from its start
    for each new piece of a stream was quadratic).

    Nesting is bounded by the C decoder itself, not by system.infile's scan (which would cost fleet
    more than the decoding: ~1.7x on 3,000 reports): it refuses past Python's recursion limit with
    RecursionError at C speed, caught here with anything a document's check raises, so 1,000 nested
    "[" make one unreadable line. A number of more than 4,300 digits (ValueError) likewise."""
    pieces = iter(chunks)
    buf, pos = "", 0
    in_array = False  # inside a top-level "[": elements, then "," or "]"
    need_value = False  # after "[" or ",": an element must come (a "]" right after "[" is fine)
    count = 0  # elements of the current array
    checked: str | None = None  # the buffer whose text from `pos` on was estimated (and found decodable)

    def more() -> bool:
        nonlocal buf, pos
        piece = next(pieces, None)
        if piece is None:
            return False
        buf, pos = buf[pos:] + piece, 0
        return True

    try:
        while True:
            pos = _WS.match(buf, pos).end()
            if pos == len(buf):
                if more():
                    continue
                break
            ch = buf[pos]
            if in_array and not need_value:
                if ch == ",":
                    need_value, pos = True, pos + 1
                    continue
                if ch == "]":
                    in_array, pos = False, pos + 1
                    continue
                src.bad("not valid JSON: expected ',' or ']' between array elements")
                return
            if in_array and ch == "]" and not count:
                in_array, pos = False, pos + 1
                continue
            if not in_array and ch == "[":
                in_array, need_value, count, pos = True, True, 0, pos + 1
                continue
            if len(buf) - pos > MAX_REPORT_BYTES:  # one document this long: no report is
                src.bad(BIG)
                return
            if checked is not buf and len(buf) - pos > CHECKED_WINDOW:  # bound what the decoder may build
                why = _too_costly(buf, pos)
                if why:
                    src.bad(why)
                    return
                checked = buf
            try:
                doc, end = _decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                ran_off = exc.pos >= len(buf) - 4096 or exc.msg.startswith("Unterminated string")
                if ran_off and more():  # cut by the piece's end (a cut string reports where it started)
                    continue
                src.bad(f"not valid JSON: {exc}")
                return
            if end == len(buf) and more():  # a number or literal may go on in the next piece
                continue
            src.take(doc)
            if src.stopped:
                return
            pos = end
            if in_array:
                need_value, count = False, count + 1
    except RecursionError:  # the C decoder's own guard: see _decode_stream's docstring
        src.bad(DEEP)
        return
    except ValueError as exc:  # not JSONDecodeError: a number of more than 4,300 digits
        src.bad(f"not a report: {value_error(exc)}")
        return
    if in_array:
        src.bad("not valid JSON: the array is not closed")


def _pdsh_lines(lines, where: str, tally: FleetTally, unreadable: Unreadable) -> None:  # noqa: ANN001
    """pdsh/clush output: lines regrouped by host; a host's document is decoded as soon as it closes."""
    hosts: dict[str, tuple[_Source, list[str]]] = {}
    held: dict[str, int] = {}  # characters buffered per host
    for line in lines:
        if not line.strip():
            continue
        host, colon, rest = line.partition(":")
        if host not in hosts:
            if not colon or not _HOST.match(host):
                unreadable.append((where, "neither JSON nor pdsh/clush 'host: ...' lines"))
                return
            hosts[host] = (_Source(tally, unreadable, f"{where} ({host})", host), [])
        src, buf = hosts[host]
        rest = rest[1:] if rest.startswith(" ") else rest
        buf.append(rest)
        held[host] = held.get(host, 0) + len(rest) + 1
        if held[host] > MAX_REPORT_BYTES:  # a host's document never closing: no report is this long
            src.bad(BIG)
            buf.clear()
            held[host] = 0
            continue
        end = rest.rstrip()
        # A document ends on a "}" or "]" at the start of a line (pretty) or with a one-line document.
        if end and end[-1] in "}]" and (end[0] in "}]" or rest[0] in "{["):
            text = "\n".join(buf)
            buf.clear()
            held[host] = 0
            why = _too_costly(text) if len(text) > CHECKED_WINDOW else None
            if why:
                src.bad(why)
                continue
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                src.bad(f"not valid JSON: {exc}")
                continue
            except (RecursionError, ValueError) as exc:  # see _decode_stream; a number of more than 4,300 digits
                src.bad(f"not a report: {value_error(exc)}" if isinstance(exc, ValueError) else DEEP)
                continue
            src.take(doc)
    for src, buf in hosts.values():
        if "".join(buf).strip():
            _decode_all("\n".join(buf), src)


def _read_stream(stream, where: str, name: str, tally: FleetTally,  # noqa: ANN001 - text file
                 unreadable: Unreadable) -> None:
    head = stream.read(CHUNK)
    if not head.strip():
        unreadable.append((where, "empty"))
        return
    if head.lstrip()[0] in "{[":
        def chunks():  # noqa: ANN202
            yield head
            while piece := stream.read(CHUNK):
                yield piece
        _decode_stream(chunks(), _Source(tally, unreadable, where, name))
        return
    def lines():  # noqa: ANN202
        rest = head
        while True:
            more = stream.read(CHUNK)
            if not more:
                yield from rest.splitlines()
                return
            rest += more
            cut = rest.rfind("\n")
            yield from rest[:cut].splitlines()
            rest = rest[cut + 1:]
    _pdsh_lines(lines(), where, tally, unreadable)


def _read_file(fd: int, where: str, name: str, tally: FleetTally, unreadable: Unreadable) -> None:
    """One report file, already open (a regular file: system.infile / rootdir checked it); closed here."""
    with open(fd, "rb") as f:
        try:
            data = f.read(WHOLE_FILE + 1)
            if len(data) > WHOLE_FILE:  # a big JSON-lines or pdsh capture: stream it
                import io

                f.seek(0)
                _read_stream(io.TextIOWrapper(f, encoding="utf-8"), where, name, tally, unreadable)
                return
        except OSError as exc:
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            unreadable.append((where, f"not UTF-8 text: {exc}"))
            return
    if data[:2] == b"\x1f\x8b" or data[257:262] == b"ustar":  # gzip, tar: a snapshot, not a report
        unreadable.append((where, f"a snapshot archive, not an inspect report: `numatune --root {where} inspect "
                                  "--json` makes its report"))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        unreadable.append((where, f"not UTF-8 text: {exc}"))
        return
    stripped = text.lstrip()
    if not stripped:
        unreadable.append((where, "empty"))
    elif stripped[0] in "{[":
        _decode_all(text, _Source(tally, unreadable, where, name))
    else:
        _pdsh_lines(text.splitlines(), where, tally, unreadable)


SNAPSHOT_SUFFIXES = (".tar.gz", ".tgz", ".tar")


def _dir_reports(spec: str, unreadable: Unreadable):  # noqa: ANN202 - iterator of (where, node name, fd)
    """Every *.json in directory SPEC, in name order, opened beneath it as a saved root's files are
    (system.rootdir): a FIFO or device is skipped at once and never opened, a link that leaves SPEC is
    skipped with a note and never opened (so nothing of it is read or echoed)."""
    from numatune.system.rootdir import NotRegular, RootDir
    from numatune.system.tarindex import Escapes

    try:
        top = RootDir(os.path.realpath(spec))
        names = sorted(name for name, _ in top.listdir("") if name.endswith(".json"))
    except OSError as exc:
        raise InputError(f"cannot list {spec}: {exc.strerror or exc}") from None
    if not names:
        archives = [name for name, _ in top.listdir("") if name.endswith(SNAPSHOT_SUFFIXES)]
        if archives:
            raise InputError(f"{spec} holds no *.json report but {len(archives)} snapshot archive(s) ({archives[0]}"
                             f"{', ...' if len(archives) > 1 else ''}): fleet reads `numatune inspect --json` "
                             "reports, not snapshots",
                             hint=f"make one per snapshot: for f in {spec}/*.tar.gz; do numatune --root \"$f\" "
                                  "inspect --json > \"${f%.tar.gz}.json\"; done")
        raise InputError(f"{spec} holds no *.json report (fleet reads `numatune inspect --json` reports)")
    for name in names:
        where = os.path.join(spec, name)
        try:
            fd, _ = top.open_regular(name)
        except Escapes:
            unreadable.append((where, f"a link that leaves {spec}: skipped, never opened"))
            continue
        except NotRegular:
            unreadable.append((where, "not a regular file (a FIFO, socket or device): skipped, never opened"))
            continue
        except IsADirectoryError:
            unreadable.append((where, "a directory: skipped"))
            continue
        except OSError as exc:
            unreadable.append((where, f"cannot read: {exc.strerror or exc}"))
            continue
        yield where, name.removesuffix(".json"), fd


def _read_dir(spec: str, tally: FleetTally, unreadable: Unreadable) -> None:
    for where, node, fd in _dir_reports(spec, unreadable):
        _read_file(fd, where, node, tally, unreadable)


def run_fleet(specs: tuple[str, ...], stdin=None) -> tuple[Fleet, Unreadable]:  # noqa: ANN001
    """(grouped fleet, unreadable (source, reason) pairs) for files, directories and `-` (stdin)."""
    tally = FleetTally()
    unreadable = Unreadable()
    for spec in specs or ("-",):
        if spec == "-":
            _read_stream(stdin if stdin is not None else sys.stdin, "stdin", "stdin", tally, unreadable)
            continue
        if os.path.isdir(spec):
            _read_dir(spec, tally, unreadable)
        else:
            from numatune.system.infile import open_input

            _read_file(open_input(spec, "report"), spec, os.path.splitext(os.path.basename(spec))[0], tally, unreadable)
    if not len(tally):
        first = f" ({unreadable[0][0]}: {unreadable[0][1]})" if unreadable else ""
        raise InputError(f"no numatune inspect report found in the input{first}",
                         hint="gather them with e.g. `srun --ntasks-per-node=1 numatune inspect --json`")
    return tally.result(), unreadable


def fleet_output(specs: tuple[str, ...], fmt: str) -> tuple[str, Fleet, Unreadable]:
    """`numatune fleet`: (the report in `fmt` — text, json or html —, the fleet, the unreadable sources)."""
    fleet, unreadable = run_fleet(specs)
    if fmt == "json":
        from numatune.render.envelope import dumps
        from numatune.render.fleet_out import fleet_document

        return dumps(fleet_document(fleet, unreadable)) + "\n", fleet, unreadable
    if fmt == "html":
        from numatune.render.html_out import fleet_html

        return fleet_html(fleet, unreadable), fleet, unreadable
    from numatune.render.fleet_out import render_fleet_text

    return render_fleet_text(fleet, unreadable), fleet, unreadable


# -- NVLink domains: --emit and --check-topology ----------------------------------------------------------------
# With --emit or --check-topology only each report's schema and `gpu_fabric` object are read: the object is
# found in the report's text and decoded alone (a 90 KB GB200 report costs ~0.15 ms, not the 1.7 ms of a whole
# decode and the 13 ms of fleet's whole check), and pdsh's prefixes are taken off whole runs of one host's
# lines at a time, so 25,000 reports stream through in well under a minute in the memory of a few reports.
_SCHEMA = re.compile(r'\s*\{\s*"schema"\s*:\s*"numatune\.inspect/[1-9][0-9]*"')
_FABRIC_KEY = re.compile(r'"gpu_fabric"\s*:\s*')
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,252}$")


class _FabricSink:
    """Folds the reports of one input into a DomainTally (the same calls _decode_stream makes on a _Source)."""

    __slots__ = ("tally", "unreadable", "where", "name", "count", "stopped", "misses")

    def __init__(self, tally, unreadable: Unreadable, where: str, name: str) -> None:  # noqa: ANN001
        self.tally, self.unreadable, self.where, self.name = tally, unreadable, where, name
        self.count = 0
        self.stopped = False
        self.misses = 0

    def _label(self) -> str:
        return self.where if self.count <= 1 else f"{self.where} #{self.count}"

    def take(self, doc: object) -> None:
        for d in doc if isinstance(doc, list) else (doc,):
            self.count += 1
            schema = d.get("schema") if isinstance(d, dict) else None
            if not isinstance(schema, str) or not schema.startswith("numatune.inspect/"):
                self.unreadable.append((self._label(), "not a numatune inspect report"))
                self.misses += 1
                self.stopped = self.misses >= MAX_MISSES
                if self.stopped:
                    return
                continue
            self.misses = 0
            self.add(d.get("gpu_fabric"), d.get("hostname"))

    def add(self, gpu_fabric: object, hostname: object = None) -> None:
        if self.count == 0:
            self.count = 1
        name = hostname if isinstance(hostname, str) and hostname else (
            self.name if self.count == 1 else f"{self.name}#{self.count}")
        self.tally.add(name, gpu_fabric)

    def text(self, text: str) -> None:
        """One document's text: the schema and gpu_fabric read where they are, else the whole decode."""
        m = _SCHEMA.match(text)
        if m is not None:
            k = _FABRIC_KEY.search(text, m.end())
            fabric = _fabric_after(text, k) if k is not None else None
            if fabric is not False:
                self.one(fabric)
                return
        _decode_all(text, self)

    def one(self, gpu_fabric: object) -> None:
        """One more report, read without decoding the rest of it."""
        self.count += 1
        self.add(gpu_fabric)

    def bad(self, why: str) -> None:
        self.unreadable.append((self.where if not self.count else f"{self.where} #{self.count + 1}", why))


def _fabric_after(text: str, key: re.Match | None) -> object:
    """The gpu_fabric value after its key, decoded alone; False where there is none or it does not decode (the
    caller then decodes the whole report, which says what is wrong)."""
    if key is None:
        return False
    try:
        return _decoder.raw_decode(text, key.end())[0]
    except (json.JSONDecodeError, RecursionError, ValueError):
        return False


def _pdsh_runs(stream, where: str, tally, unreadable: Unreadable, head: str) -> None:  # noqa: ANN001
    """pdsh/clush output, a run of one host's lines at a time: a run is found with two counts (every line of it
    starts with the host's prefix), a host's report is handed on when its last line ("host: }") arrives, and only
    its gpu_fabric part loses its prefixes. Lines of different hosts may interleave (then runs are short)."""
    pending: dict[str, list[str]] = {}
    held: dict[str, int] = {}
    sinks: dict[str, _FabricSink] = {}
    rest = head
    while True:
        more = stream.read(CHUNK)
        text = rest + more
        if not more:
            text, rest = (text + "\n" if text and not text.endswith("\n") else text), ""
        else:
            cut = text.rfind("\n")
            if cut < 0:
                rest = text
                if len(rest) > MAX_REPORT_BYTES:
                    unreadable.append((where, BIG))
                    return
                continue
            text, rest = text[:cut + 1], text[cut + 1:]
        pos, size = 0, len(text)
        mixed: set[str] = set()  # hosts whose lines interleave with others' in this piece
        while pos < size:
            newline = text.find("\n", pos)
            colon = text.find(":", pos, newline)
            host = text[pos:colon] if colon > pos else ""
            if not host or not _HOST.match(host):
                if text[pos:newline].strip():
                    unreadable.append((where, "neither JSON nor pdsh/clush 'host: ...' lines"))
                    return
                pos = newline + 1
                continue
            pre = "\n" + host + ":"
            single = not text.startswith(host + ":", newline + 1)  # the next line is another host's
            if single or host in mixed:
                close, end = -1, pos
            else:
                close = text.find(pre + " }", newline - 1)
                end = text.find("\n", close + 1) + 1 if close >= 0 else size
            if single or host in mixed or text.count("\n", pos, end - 1) != text.count(pre, pos, end - 1):
                mixed.add(host)  # another host's lines within: line by line for the rest of this piece
                close, end = -1, newline + 1
                while end < size and text.startswith(host + ":", end) and not text.startswith(host + ": }", end):
                    end = text.find("\n", end) + 1
                if end < size and text.startswith(host + ": }", end):
                    close, end = end - 1, text.find("\n", end) + 1
            pieces = pending.setdefault(host, [])
            pieces.append(text[pos:end])
            held[host] = held.get(host, 0) + end - pos
            sink = sinks.get(host)
            if sink is None:
                sink = sinks[host] = _FabricSink(tally, unreadable, f"{where} ({host})", host)
            if close >= 0:
                _take_prefixed(host, "".join(pieces), sink)
                pieces.clear()
                held[host] = 0
            elif held[host] > MAX_REPORT_BYTES:
                sink.bad(BIG)
                pieces.clear()
                held[host] = 0
            pos = end
        if not more:
            break
    for host, pieces in pending.items():
        text = "".join(pieces)
        if text.strip():
            _decode_all(_unprefix(text, host), sinks[host])


def _unprefix(text: str, host: str) -> str:
    """TEXT (lines "host: ...") without the host's prefixes."""
    first = len(host) + (2 if text.startswith(host + ": ") else 1)
    body = text[first:].replace("\n" + host + ": ", "\n")
    return body.replace("\n" + host + ":", "\n") if "\n" + host + ":" in body else body


def _take_prefixed(host: str, doc: str, sink: _FabricSink) -> None:
    """One host's whole report, still prefixed: the schema and gpu_fabric read where they are (only the rest of
    the report from gpu_fabric on loses its prefixes), else the whole report decoded."""
    if _SCHEMA.match(_unprefix(doc[:512], host)) is not None:
        k = doc.find('"gpu_fabric"')
        if k < 0:
            sink.one(None)
            return
        tail = _unprefix(host + ": " + doc[k:], host)
        fabric = _fabric_after(tail, _FABRIC_KEY.match(tail))
        if fabric is not False:
            sink.one(fabric)
            return
    _decode_all(_unprefix(doc, host), sink)


def read_fabric(specs: tuple[str, ...], stdin=None):  # noqa: ANN001, ANN201 - (FleetFabric, Unreadable)
    """The fleet's NVLink domains from reports (files, directories, `-`), reading only what the domains need."""
    from numatune.analysis.nvdomains import DomainTally

    tally = DomainTally()
    unreadable = Unreadable()
    for spec in specs or ("-",):
        if spec == "-":
            stream = stdin if stdin is not None else sys.stdin
            head = stream.read(CHUNK)
            if not head.strip():
                unreadable.append(("stdin", "empty"))
            elif head.lstrip()[0] in "{[":
                def chunks(first=head, s=stream):  # noqa: ANN001, ANN202
                    yield first
                    while piece := s.read(CHUNK):
                        yield piece
                _decode_stream(chunks(), _FabricSink(tally, unreadable, "stdin", "stdin"))
            else:
                _pdsh_runs(stream, "stdin", tally, unreadable, head)
            continue
        for where, name, text in _spec_texts(spec, unreadable):
            stripped = text.lstrip()
            if not stripped:
                unreadable.append((where, "empty"))
            elif stripped[0] in "{[":
                _FabricSink(tally, unreadable, where, name).text(text) if stripped[0] == "{" else \
                    _decode_all(text, _FabricSink(tally, unreadable, where, name))
            else:
                import io

                _pdsh_runs(io.StringIO(text), where, tally, unreadable, "")
    if not len(tally):
        first = f" ({unreadable[0][0]}: {unreadable[0][1]})" if unreadable else ""
        raise InputError(f"no numatune inspect report found in the input{first}",
                         hint="gather them with e.g. `pdsh -w NODES numatune inspect --json`")
    fabric = tally.result()
    return fabric, unreadable


def _spec_texts(spec: str, unreadable: Unreadable):  # noqa: ANN202 - iterator of (where, name, text)
    """The text of a report file, or of each *.json of a directory (opened as fleet's other paths open them)."""
    from numatune.system.infile import open_input

    if os.path.isdir(spec):
        for where, node, fd in _dir_reports(spec, unreadable):
            text = _file_text(fd, where, unreadable)
            if text is not None:
                yield where, node, text
        return
    text = _file_text(open_input(spec, "report"), spec, unreadable)
    if text is not None:
        yield spec, os.path.splitext(os.path.basename(spec))[0], text


def _file_text(fd: int, where: str, unreadable: Unreadable) -> str | None:
    with open(fd, "rb") as f:
        try:
            data = f.read(MAX_PARSED_BYTES + 1)
        except OSError as exc:
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > MAX_PARSED_BYTES:
        unreadable.append((where, f"larger than {MAX_PARSED_BYTES >> 20} MiB: not read"))
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        unreadable.append((where, f"not UTF-8 text: {exc}"))
        return None


def _check_names(fabric) -> None:  # noqa: ANN001 - a FleetFabric
    """Scheduler files name nodes: every report must have come with a node name (pdsh prefix, file name)."""
    names = [n for d in fabric.domains for n in (*d.healthy, *(x[0] for x in d.excluded))]
    names += [n for n, _ in fabric.split] + [n for n, _ in fabric.unplaced] + list(fabric.no_domain)
    again = sorted({base for n in names if "#" in n and (base := n.rsplit("#", 1)[0]) != "stdin"
                    and NODE_NAME.match(base)})  # stdin#N: reports on stdin without pdsh prefixes, unnamed
    if again:  # a host (or file) that gave two reports: "node#2"
        raise InputError(f"more than one report for node(s) {', '.join(again[:5])}")
    bad = [n for n in names if not NODE_NAME.match(n)]
    if bad:
        raise InputError(f"report(s) without a node name: {', '.join(bad[:5])}",
                         hint="give one NODE.json file per node (a directory of them), or pdsh/clush output "
                              "whose lines start with 'NODE: '")
    seen: set[str] = set()
    twice = sorted({n for n in names if n in seen or seen.add(n)})
    if twice:
        raise InputError(f"more than one report for node(s) {', '.join(twice[:5])}")




def emit_output(specs: tuple[str, ...], emit: str, block_size: int | None = None) -> tuple[str, Unreadable]:
    """`numatune fleet --emit`: (the file's text, the unreadable inputs)."""
    from numatune.plan import cluster

    fabric, unreadable = read_fabric(specs)
    _check_names(fabric)
    plan = cluster.plan_blocks(fabric, block_size)
    if emit == "slurm-topology":
        text = cluster.topology_conf(plan)
    elif emit == "slurm-topology-yaml":
        text = cluster.topology_yaml(plan)
    elif emit == "kueue":
        text = cluster.kueue_yaml(plan)
    else:
        text = cluster.labels_text(plan, fabric)
    return text, unreadable


def check_topology_output(specs: tuple[str, ...], path: str, fmt: str) -> tuple[str, int, Unreadable]:
    """`numatune fleet --check-topology FILE`: (report, number of mismatches, unreadable inputs)."""
    from numatune.analysis.nvdomains import drift
    from numatune.plan import cluster
    from numatune.system.infile import load_document, read_input

    try:
        text = read_input(path, "topology file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc}") from None
    if path.endswith((".yaml", ".yml")):
        listed = cluster.read_topology_yaml(load_document(text, path, "yaml"), path)
    else:
        listed = cluster.read_topology_conf(text, path)
    fabric, unreadable = read_fabric(specs)
    _check_names(fabric)
    mismatches, notes = drift(fabric, listed)
    if fmt == "json":
        from numatune.render.envelope import dumps
        from numatune.render.fleet_out import drift_document

        return dumps(drift_document(path, fabric, mismatches, notes, unreadable)) + "\n", len(mismatches), unreadable
    from numatune.render.fleet_out import drift_text

    return drift_text(path, fabric, mismatches, notes, unreadable), len(mismatches), unreadable
