"""Inputs of diff and fleet: a root directory, a snapshot archive or an inspect JSON report, told apart by content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from numatune.errors import InputError


def sniff(path: Path) -> str:
    """"root", "snapshot" or "report" from what the path holds, not from its name."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if path.is_dir():
        return "root"
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00" or head[257:262] == b"ustar":
        return "snapshot"
    if head.lstrip()[:1] == b"{":
        return "report"
    raise InputError(f"{path} is neither a sysfs tree, a snapshot archive nor a numatune JSON report")


def inspect_doc_of_root(spec: str) -> dict[str, Any]:
    """Read a root or snapshot the way `numatune --root SPEC inspect --json` does."""
    from numatune.cli._app import App
    from numatune.cli.inspect import build_inspect
    from numatune.render.inspect_json import inspect_document

    topo, matrix, findings = build_inspect(App(root=spec))
    return inspect_document(topo, matrix, findings)


def load_report_text(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not valid JSON: {exc}") from None


def load_inspect(spec: str) -> tuple[dict[str, Any], str]:
    """(numatune.inspect/2 document, kind) for any input diff accepts."""
    from numatune.analysis.diff import check_inspect_document

    path = Path(spec)
    kind = "root" if spec == "/" else sniff(path)
    if kind == "report":
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {spec}: {exc}") from None
        return check_inspect_document(load_report_text(text, spec), spec), kind
    return inspect_doc_of_root(spec), kind
