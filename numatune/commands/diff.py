"""`numatune diff` without the command line: load both sides, compare their views, render.

A side is a root directory, a snapshot archive or an inspect JSON report, told apart by content.
The click command and the click-free entry point (`numatune.entry`) both call `diff_report`. No
click, rich or pathlib: two trees' diff costs about two `inspect --json` runs in one process.
"""

from __future__ import annotations

import os

from numatune.errors import InputError

TYPE_CHECKING = False  # typing costs ~15 ms to import
if TYPE_CHECKING:
    from typing import Any


def sniff(path: str) -> str:
    """"root", "snapshot" or "report" from what the path holds, not from its name."""
    if not os.path.exists(path):
        raise InputError(f"{path} does not exist")
    if os.path.isdir(path):
        return "root"
    from numatune.system.infile import open_input

    fd = open_input(path, "input")  # a regular file only: a FIFO or device is refused, never opened
    try:
        head = os.read(fd, 512)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00" or head[257:262] == b"ustar":
        return "snapshot"
    if head.lstrip()[:1] == b"{":
        return "report"
    raise InputError(f"{path} is neither a sysfs tree, a snapshot archive nor a numatune JSON report")


def inspect_doc_of_root(spec: str) -> dict[str, Any]:
    """Read a root or snapshot the way `numatune --root SPEC inspect --json` does."""
    from numatune.commands.inspect import inspect_report
    from numatune.readers.pci import pci_ids_from_env
    from numatune.render.inspect_json import inspect_document
    from numatune.system.host import Host

    return inspect_document(*inspect_report(Host.open(spec), pci_ids_from_env()))


def load_report_text(text: str, where: str) -> Any:
    from numatune.system.infile import load_document

    return load_document(text, where)


def load_inspect(spec: str) -> tuple[dict[str, Any], str]:
    """(numatune.inspect/4 document, kind) for any input diff accepts."""
    from numatune.analysis.diff import check_inspect_document

    kind = "root" if spec == "/" else sniff(spec)
    if kind == "report":
        from numatune.system.infile import MAX_REPORT_BYTES, read_text

        text = read_text(spec, "report", MAX_REPORT_BYTES)
        return check_inspect_document(load_report_text(text, spec), spec), kind
    return inspect_doc_of_root(spec), kind


def diff_report(a: str, b: str, ignore: tuple[str, ...] = (), fmt: str = "text") -> tuple[str, bool]:
    """(what `diff A B` prints, whether they differ)."""
    from numatune.analysis.diff import diff_views, view

    doc_a, kind_a = load_inspect(a)
    doc_b, kind_b = load_inspect(b)
    diffs = diff_views(view(doc_a), view(doc_b), ignore)
    if fmt == "json":
        from numatune.render.diff_out import diff_document
        from numatune.render.envelope import dumps

        return dumps(diff_document((a, kind_a), (b, kind_b), diffs, ignore)) + "\n", bool(diffs)
    from numatune.render.diff_out import render_diff_text

    return render_diff_text(a, b, diffs), bool(diffs)
