"""The one splitter of text read from a root or a process: pieces bounded in number, not only the bytes.

A file inside the 32 MiB read bound can still hold millions of records: 32 MiB of "a=\\0" is 11 million
environment entries, and `str.split` makes a Python string of each (50-odd bytes apiece, a list pointer
more), so one such file cost 0.9-2 GB. Every reader that splits a file into records, or a record into
fields, does it here:

- `split` and `lines` count the separators first (in C, nothing made) and refuse past `most` pieces with
  ParseError naming the file (exit 3), so what a split makes is bounded in count and so in memory; a split
  on blanks (sep None) is bounded by its maxsplit. Each reader passes the bound the file's kind allows:
  MAX_PIECES for the files the kernel keeps to a few dozen lines (status, cgroup, sched, meminfo),
  MAX_RECORDS for those that are long on a real node (cmdline, cpuinfo, zoneinfo).
- `keyed` reads the named KEY=value entries of a separated list (an environment) without splitting it:
  one search of the text a key, whatever the number of entries.

A leaf module of the bottom layer (stdlib and errors only), so that the model's cgroup parser can use it too.
"""

from __future__ import annotations

from numatune.errors import ParseError

#: The default bound: a /proc/PID/status (about 60 lines), cgroup (one line a hierarchy), sched (one line a
#: counter and a NUMA node) or a node's meminfo (about 30 lines) is far below it.
MAX_PIECES = 1 << 16
#: The files that are long on a real node: an environment and a command line share the kernel's 6 MiB exec
#: bound (an entry costs its bytes and a pointer: at most 570,000 entries), /proc/cpuinfo has about 28 lines a
#: CPU (8,192 CPUs: 230,000 lines), /proc/zoneinfo a few a CPU and zone. (numa_maps has its own bound, one line
#: a mapping: readers.procs.MAX_MAPPINGS.)
MAX_RECORDS = 1 << 20
#: The blank-separated fields of one line of a kernel file (a numa_maps line names each node once).
MAX_FIELDS = 4096


def too_many(where: str, most: int, what: str) -> ParseError:
    return ParseError(where, f"more than {most:,} {what}, more than any real one holds")


def split(text: str, sep: str | None, where: str, most: int = MAX_PIECES, what: str = "records") -> list[str]:
    """`text.split(sep)`, or ParseError naming WHERE when that would make more than `most` pieces (counted
    before any is made; sep None: blank-separated fields, bounded by maxsplit)."""
    if sep is None:
        parts = text.split(None, most)
        if len(parts) > most:
            raise too_many(where, most, what)
        return parts
    if len(text) >= most * len(sep) and text.count(sep) >= most:
        raise too_many(where, most, what)
    return text.split(sep)


def lines(text: str, where: str, most: int = MAX_PIECES) -> list[str]:
    """The "\\n"-separated lines of `text` as `str.splitlines` gives them for a kernel file (no final empty
    line after a trailing newline), at most `most` of them, else ParseError naming WHERE."""
    out = split(text, "\n", where, most, "lines")
    if out and not out[-1]:
        out.pop()
    return out


def keyed(text: str, sep: str, keys: tuple[str, ...] | frozenset[str], *, last: bool = True) -> dict[str, str]:
    """The values of the entries KEY=value among `sep`-separated `text` whose KEY is one of `keys` (the last
    such entry of a key, or the first if not `last`), in the order the keys first appear: what splitting
    every entry and keeping the named ones gives, with no entry made but these."""
    found: list[tuple[int, str, str]] = []
    for key in keys:
        head = key + "="
        needle = sep + head
        starts = text.startswith(head)
        first = 0 if starts else text.find(needle)
        if first < 0:
            continue
        at = text.rfind(needle) if last else (-1 if starts else first)
        start = at + len(needle) if at >= 0 else len(head)
        end = text.find(sep, start)
        found.append((first, key, text[start:] if end < 0 else text[start:end]))
    found.sort()
    return {key: value for _, key, value in found}
