"""numatune fleet."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import format_option, write_output

_PREFIX = re.compile(r"^([A-Za-z0-9_.\-\[\]@]+): ?(.*)$")  # pdsh/clush: "node01: text"


@click.command("fleet")
@click.argument("reports", nargs=-1, metavar="[REPORT|DIR|-]...")
@click.option("--fail-on-outliers", is_flag=True, help="Exit 1 when any node differs from the reference group "
              "(or a report cannot be read).")
@format_option("text", "json", "html", output=True)
@click.pass_obj
def fleet_cmd(app: App, reports: tuple[str, ...], fail_on_outliers: bool, fmt: str, output: Path | None) -> None:
    """Group many nodes' `inspect --json` reports by topology; list outliers and findings per group.

    REPORT is a JSON file (one report, or several as JSON lines), a directory of *.json files, or
    `-` for stdin (also the default): JSON documents one after another, or pdsh/clush output
    whose lines start with "host: ". A node is named by the pdsh/clush prefix, else the file name.
    `--format html` (or `-o fleet.html`) writes one page with a row and a picture per group.
    """
    from numatune.analysis.fleet import group_fleet
    from numatune.errors import ExitCode, InputError
    from numatune.render.fleet_out import fleet_document, render_fleet_text

    nodes, unreadable = [], []
    for where, name, text in _sources(reports or ("-",)):
        got, bad = parse_stream(text, where, name)
        nodes += got
        unreadable += bad
    for where, why in unreadable:
        app.warn(f"{where}: {why}")
    if not nodes:
        raise InputError("no numatune inspect report found in the input",
                         hint="gather them with e.g. `srun --ntasks-per-node=1 numatune inspect --json`")
    nodes = _unique(nodes)
    fleet = group_fleet(nodes)
    if fmt == "json":
        from numatune.render.envelope import dumps

        text = dumps(fleet_document(fleet, unreadable)) + "\n"
    elif fmt == "html":
        from numatune.render.html_out import fleet_html

        text = fleet_html(fleet, unreadable, {n.name: n.doc for n in nodes})
    else:
        text = render_fleet_text(fleet, unreadable)
    if output is not None:
        write_output(output, text)
    else:
        click.echo(text, nl=False)
    if fail_on_outliers and (fleet.outliers or unreadable):
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))


def _sources(specs: tuple[str, ...]):  # noqa: ANN202 - yields (where, default name, text)
    from numatune.errors import InputError

    for spec in specs:
        if spec == "-":
            yield "stdin", None, sys.stdin.read()
            continue
        path = Path(spec)
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        if path.is_dir() and not files:
            raise InputError(f"{spec} holds no *.json report")
        for f in files:
            try:
                yield str(f), f.stem, f.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise InputError(f"{f} does not exist") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read {f}: {exc}") from None


def parse_stream(text: str, where: str, name: str | None):  # noqa: ANN201 - (reports, unreadable)
    """Reports in one input: a JSON stream, or pdsh/clush "host: line" output regrouped by host."""
    stripped = text.lstrip()
    if not stripped:
        return [], [(where, "empty")]
    if stripped[0] in "{[":
        return _json_stream(text, where, name)
    by_host: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _PREFIX.match(line)
        if not m:
            return [], [(where, "neither JSON nor pdsh/clush 'host: ...' lines")]
        by_host.setdefault(m.group(1), []).append(m.group(2))
    reports, bad = [], []
    for host, lines in by_host.items():
        got, errs = _json_stream("\n".join(lines), f"{where} ({host})", host)
        reports += got
        bad += errs
    return reports, bad


def _json_stream(text: str, where: str, name: str | None):  # noqa: ANN202
    import json

    from numatune.analysis.diff import check_inspect_document
    from numatune.analysis.fleet import NodeReport
    from numatune.errors import InputError

    decoder = json.JSONDecoder()
    docs, bad, pos = [], [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            bad.append((where, f"not valid JSON: {exc}"))
            break
        docs.extend(doc if isinstance(doc, list) else [doc])
    reports = []
    for i, doc in enumerate(docs):
        label = where if len(docs) == 1 else f"{where} #{i + 1}"
        try:
            check_inspect_document(doc, label)
        except InputError as exc:
            bad.append((label, exc.message.removeprefix(f"{label} ").removeprefix(f"{label}: ")))
            continue
        node = doc.get("hostname") or name or where
        reports.append(NodeReport(node if len(docs) == 1 or doc.get("hostname") else f"{node}#{i + 1}", doc))
    return reports, bad


def _unique(nodes: list):  # noqa: ANN001, ANN202
    from numatune.analysis.fleet import NodeReport

    seen: dict[str, int] = {}
    out = []
    for n in nodes:
        seen[n.name] = seen.get(n.name, 0) + 1
        out.append(n if seen[n.name] == 1 else NodeReport(f"{n.name}#{seen[n.name]}", n.doc))
    return out
