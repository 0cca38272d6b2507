"""Every command × every output format it offers × every fixture tree: the one format switch, tested.

Each run either succeeds with output that parses as its format says (JSON with the command's schema,
Prometheus exposition, JUnit XML, non-empty text) or fails with one `numatune: error:` line and a
documented exit code; never a traceback. The formats come from the commands' own --format options,
so a new format or command cannot go untested.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from numatune.cli import COMMANDS
from numatune.cli._options import FORMATS, format_choices
from numatune.errors import ExitCode
from numatune.render.envelope import SCHEMAS
from tests.conftest import click_commands, fixture_root, tree_fixtures

COMMAND_OBJECTS = click_commands()

# command path -> (schema kind of its JSON, arguments after `--root R COMMAND` (with {root}, {report},
# {state} filled in), exit codes that are not failures)
CALLS = {
    "inspect": ("inspect", [], {0}),
    "irq": ("irq", [], {0}),
    "irq plan": ("irq-plan", [], {0}),
    "irq apply": ("irq-apply", ["--dry-run"], {0}),
    "irq restore": ("irq-apply", ["{state}", "--dry-run"], {0}),
    "check": ("check", [], {0, 1}),
    "diff": ("diff", ["{root}", "{root}"], {0}),
    "fleet": ("fleet", ["{report}"], {0}),
    "launch": ("launch", ["--node", "0", "--mem-policy", "none", "--", "true"], {0}),
    "audit": ("audit", ["1"], {0}),
    "emit slurm": ("emit", [], {0}),
    "emit kubelet": ("emit", [], {0}),
    "emit nfd": ("emit", [], {0}),
    "emit dra": ("emit", [], {0}),
    "plan-memory": ("plan-memory", ["--params", "1e6", "--node", "0", "--reserve", "0"], {0}),
}
ERROR_CODES = {int(c) for c in ExitCode} - {0}


# Live-only measurements: they refuse --root, so they are called on this machine (test_live_only_formats).
LIVE_ONLY = {
    "probe": ["--size", "8M", "--time-budget", "3", "--samples", "2"],  # a cap: on a busy machine first touch is slow
    "compare": ["-n", "1", "-p", "local,none", "--", "true"],
}


def test_every_command_with_a_format_is_called_here():
    with_format = {path for path, cmd in COMMAND_OBJECTS.items() if format_choices(cmd)}
    assert with_format - set(LIVE_ONLY) == set(CALLS) and set(LIVE_ONLY) <= with_format
    # snapshot writes an archive, completion a shell script: neither is a report
    assert set(COMMANDS) - {p.split()[0] for p in with_format} == {"snapshot", "completion"}
    for path in with_format:
        assert set(format_choices(COMMAND_OBJECTS[path])) <= set(FORMATS), path
        assert "json" in format_choices(COMMAND_OBJECTS[path]), path


MATRIX = [(path, fmt) for path in CALLS for fmt in format_choices(COMMAND_OBJECTS[path])]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Per fixture: an inspect report for fleet; one empty IRQ state file for restore."""
    from numatune.render.envelope import dumps, envelope

    base = tmp_path_factory.mktemp("formats")
    state = base / "state.json"
    state.write_text(dumps(envelope("irq-state", created="2026-01-01T00:00:00Z", source="test", irqs=[])))
    return base, state


def _check_output(kind: str, fmt: str, out: str) -> None:
    if fmt == "json":
        assert json.loads(out)["schema"] == SCHEMAS[kind]
    elif fmt == "prometheus":
        samples = [line for line in out.splitlines() if line and not line.startswith("#")]
        assert samples and all(" " in line and line.startswith("numatune_") for line in samples)
        assert "# TYPE numatune_" in out
    elif fmt == "junit":
        assert ET.fromstring(out).tag == "testsuites"
    elif fmt == "svg":
        assert ET.fromstring(out).tag == "{http://www.w3.org/2000/svg}svg"
    elif fmt == "html":
        assert out.startswith("<!DOCTYPE html>") and "<svg" in out and out.rstrip().endswith("</html>")
    else:
        assert out.strip() and not out.lstrip().startswith("{")


@pytest.mark.parametrize("fixture", tree_fixtures())
def test_every_command_and_format(fixture, cli, inputs, tmp_path):
    base, state = inputs
    root = str(fixture_root(fixture))
    report = tmp_path / "report.json"
    r = cli("--root", root, "inspect", "--json")
    assert r.exit_code == 0, r.stderr
    report.write_text(r.stdout)
    for path, fmt in MATRIX:
        kind, args, ok = CALLS[path]
        args = [a.format(root=root, report=report, state=state) for a in args]
        argv = ["--root", root, *path.split(), "--format", fmt, *args]
        if path == "launch":  # options go before `--`
            argv = ["--root", root, "launch", "--format", fmt, *args]
        r = cli(*argv)
        where = f"numatune {' '.join(argv)}"
        if r.exit_code in ok:
            _check_output(kind, fmt, r.stdout)
        else:
            assert r.exit_code in ERROR_CODES, (where, r.exit_code, r.stderr)
            lines = r.stderr.splitlines()
            assert lines and lines[0].startswith("numatune: error: "), (where, r.stderr)
            assert len(lines) <= 2 and all(not line.startswith("Traceback") for line in lines), where
            assert (path, r.exit_code) in EXPECTED_FAILURES, (where, r.exit_code, r.stderr)
            assert fixture not in COMPLETE or path == "audit", (where, r.stderr)


# What may fail on a saved tree, and how: no process 1 in the tree (6); launch and plan-memory on a tree without node 0
# (3) or without CPU topology (7); plan-memory when node 0 has no memory or too little (7).
EXPECTED_FAILURES = {("audit", int(ExitCode.NO_PROCESS)), ("launch", int(ExitCode.INPUT)),
                     ("launch", int(ExitCode.UNSUPPORTED)), ("plan-memory", int(ExitCode.INPUT)),
                     ("plan-memory", int(ExitCode.UNSUPPORTED))}
# Trees on which everything but audit (no processes in a tree) must succeed, so no format passes vacuously.
COMPLETE = ("vm-two-socket", "handmade-launch-2s4gpu-cxl", "32em64t-2n8c+dax+nvme+mic+dimms")


@pytest.mark.parametrize(("path", "fmt"), [(p, f) for p in LIVE_ONLY for f in format_choices(COMMAND_OBJECTS[p])])
def test_live_only_formats(path, fmt, cli):
    args = LIVE_ONLY[path]
    cut = args.index("--") if "--" in args else len(args)
    r = cli(path, *args[:cut], "--format", fmt, *args[cut:])
    assert r.exit_code == 0, r.stderr
    _check_output(path, fmt, r.stdout)


@pytest.mark.parametrize("fmt", format_choices(COMMAND_OBJECTS["audit"]))
def test_audit_formats_on_a_live_process(fmt, cli):
    r = cli("audit", str(os.getpid()), "--format", fmt)
    assert r.exit_code == 0, r.stderr
    _check_output("audit", fmt, r.stdout)


def test_table_is_still_accepted_for_text(cli):
    root = str(fixture_root(tree_fixtures()[0]))
    assert cli("--root", root, "inspect", "-f", "table").stdout == cli("--root", root, "inspect", "-f", "text").stdout
