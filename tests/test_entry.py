"""The click-free entry point: which command lines take it, and that it prints exactly what click does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from numatune.entry import FastCall, match_fast_path, run
from tests.cli.test_audit import ALLOC, start, stop
from tests.conftest import PROJECT, fixture_root, imports_of


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inspect", "--json"], FastCall("inspect", "/", False)),
        (["--root", "T", "inspect", "-f", "json"], FastCall("inspect", "T", False)),
        (["--root=T", "--debug", "irq", "--format=json"], FastCall("irq", "T", True)),
        (["--no-color", "irq", "--format", "json"], FastCall("irq", "/", False, color=False)),
        (["audit", "12", "34", "--json"], FastCall("audit", "/", False, (12, 34))),
        (["audit", "--json", "12"], FastCall("audit", "/", False, (12,))),
        (["check"], FastCall("check", "/", False, fmt="text")),
        (["--root", "T", "check", "--json"], FastCall("check", "T", False)),
        (["diff", "A", "B"], FastCall("diff", "/", False, args=("A", "B"), fmt="text")),
        (["diff", "A", "B", "-f", "json"], FastCall("diff", "/", False, args=("A", "B"))),
        (["check", "--policy", "p.toml"], None),
        (["check", "-v"], None),
        (["diff", "A", "B", "--ignore", "kernel"], None),
        (["diff", "A", "--json", "B"], None),
        (["diff", "A"], None),
        (["--no-color", "inspect"], FastCall("inspect", "/", False, fmt="text", color=False)),
        (["inspect", "--format", "table"], None),
        (["inspect", "--json", "--format", "table"], None),
        (["irq", "plan", "--json"], None),
        (["audit", "--json"], None),
        (["audit", "0", "--json"], None),  # click says PID must be >= 1
        (["audit", "12", "--children", "--json"], None),
        (["audit", "12", "--format", "prometheus"], None),
        (["--root"], None),
        # global options after the command, as click takes them (the later --root wins)
        (["check", "--root", "T"], FastCall("check", "T", False, fmt="text")),
        (["inspect", "--json", "--root=T", "--debug"], FastCall("inspect", "T", True)),
        (["--root", "A", "irq", "--no-color", "--root", "T", "-f", "json"], FastCall("irq", "T", False, color=False)),
        (["audit", "12", "--root", "T", "--json", "34"], FastCall("audit", "T", False, (12, 34))),
        (["diff", "A", "B", "--no-color"], FastCall("diff", "/", False, args=("A", "B"), fmt="text", color=False)),
        (["check", "--root"], None),  # click says --root needs a value
        (["inspect", "-f", "--debug", "json"], None),  # -f's value is "--debug": click refuses it
        (["inspect", "--", "--json"], None),
        ([], None),
        (["--version"], None),
    ],
)
def test_which_command_lines_take_the_fast_path(argv, expected):
    assert match_fast_path(argv, {}) == expected


def test_root_from_environment():
    assert match_fast_path(["inspect", "--json"], {"NUMATUNE_ROOT": "E"}).root == "E"
    assert match_fast_path(["--root", "A", "inspect", "--json"], {"NUMATUNE_ROOT": "E"}).root == "A"


def fast(argv, capsys):
    with pytest.raises(SystemExit) as done:
        run(argv)
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


@pytest.mark.parametrize("name", ["32em64t-2n8c+dax+nvme+mic+dimms", "vm-cxl", "vm-two-socket", "20s390-2g6s4c",
                                  "topo-mi210-xgmi-pcie", "procfs-4cpu-kvm"])
@pytest.mark.parametrize("command", ["inspect", "irq"])
def test_fast_path_prints_what_click_prints(cli, capsys, name, command):
    argv = ["--root", str(fixture_root(name)), command, "--json"]
    code, out, err = fast(argv, capsys)
    slow = cli(*argv)
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)


@pytest.mark.parametrize("name", ["vm-cxl", "vm-two-socket"])
@pytest.mark.parametrize("args", [["check", "--root", "{root}"], ["check", "--json", "--root", "{root}"],
                                  ["inspect", "--root={root}", "--no-color"], ["irq", "--root", "{root}", "--json"]])
def test_global_options_after_the_command_print_what_before_it_prints(cli, capsys, name, args):
    """`numatune check --root F` (the fast path) is `numatune --root F check` (click), byte for byte."""
    root = str(fixture_root(name))
    late = [a.replace("{root}", root) for a in args]
    code, out, err = fast(late, capsys)
    slow = cli("--root", root, *(a for a in args if "{root}" not in a and a != "--root"))
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)
    late_click = cli(*late)
    assert (late_click.exit_code, late_click.stdout, late_click.stderr) == (code, out, err)


@pytest.mark.parametrize(
    "argv",
    [["--root", "/nonexistent/root", "inspect", "--json"], ["audit", str(2**22 - 4321), "--json"],
     ["inspect", "--json", "--root", "/nonexistent/root"]],
)
def test_errors_are_the_same(cli, capsys, argv):
    code, out, err = fast(argv, capsys)
    slow = cli(*argv)
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)
    assert code in (3, 6) and err.startswith("numatune: error: ")


def test_audit_fast_path_matches_click(cli, capsys):
    child = start(ALLOC)
    try:
        code, out, _ = fast(["audit", str(child.pid), "--json"], capsys)
        slow = cli("audit", str(child.pid), "--json")
    finally:
        stop(child)
    a, b = json.loads(out), json.loads(slow.stdout)
    assert code == slow.exit_code == 0
    # pages can move between two reads of a live process; everything else is identical
    from tests.parity import MOVING, comparable, differences

    assert not (diff := differences(comparable(a, MOVING), comparable(b, MOVING))), diff


def test_console_script_and_module_take_the_same_entry():
    done = subprocess.run([sys.executable, "-m", "numatune", "--version"], capture_output=True, text=True,
                          cwd=PROJECT)
    assert done.returncode == 0 and done.stdout.startswith("numatune ")


@pytest.mark.parametrize("name", ["32em64t-2n8c+dax+nvme+mic+dimms", "vm-cxl", "20s390-2g6s4c", "procfs-4cpu-kvm",
                                  "8em64t-2s2ca2c-buggynuma"])
@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_fast_check_prints_what_click_prints(cli, capsys, name, flags):
    argv = ["--root", str(fixture_root(name)), "check", *flags]
    code, out, err = fast(argv, capsys)
    slow = cli(*argv)
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)


@pytest.mark.parametrize(("a", "b"), [("memorysidecaches", "32em64t-2n8c+dax+nvme+mic+dimms"),
                                      ("vm-two-socket", "vm-two-socket"), ("vm-cxl", "missing")])
@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_fast_diff_prints_what_click_prints(cli, capsys, tmp_path, a, b, flags):
    argv = ["diff", str(fixture_root(a)), str(tmp_path / "missing" if b == "missing" else fixture_root(b)), *flags]
    code, out, err = fast(argv, capsys)
    slow = cli(*argv)
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)
    assert code == (3 if b == "missing" else int(a != b))


@pytest.mark.parametrize("name", ["256ppc-8n8s4t", "32em64t-2n8c+dax+nvme+mic+dimms", "vm-cxl", "procfs-4cpu-kvm"])
def test_fast_inspect_table_prints_what_click_prints(cli, capsys, name):
    argv = ["--root", str(fixture_root(name)), "inspect"]
    code, out, err = fast(argv, capsys)
    slow = cli(*argv)
    assert (code, out, err) == (slow.exit_code, slow.stdout, slow.stderr)
    assert out.startswith(f"{fixture_root(name)} (saved tree)\n")


NVML_PROBE = imports_of(
    "import sys, io, contextlib\n"
    "sys.argv = ['numatune', '--root', sys.argv[1], 'inspect', '--json']\n"
    "from numatune.entry import run\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    run()\n", ("pynvml", "numatune.readers.nvml"))


@pytest.mark.parametrize("name, expected", [
    ("topo-mi210-xgmi-pcie", "[]"),  # AMD GPUs: NVML is never touched
    ("vm-two-socket", "[]"),  # no GPU at all
    ("h100-vm-1gpu", "['numatune.readers.nvml']"),  # NVIDIA: the saved record is read, pynvml is not (not live)
])
def test_nvml_is_imported_only_for_nvidia_gpus(name, expected):
    done = subprocess.run([sys.executable, "-c", NVML_PROBE, str(fixture_root(name))], capture_output=True,
                          text=True, timeout=120, cwd=PROJECT)
    assert done.stdout.strip().splitlines()[-1] == expected, done.stderr


def test_the_fast_path_takes_what_the_click_commands_define():
    """entry.py cannot import click, so its JSON spellings are checked against the click definitions: every
    spelling of `json` the fast commands' format option accepts is one JSON_FLAGS holds, and every fast
    command line, parsed by click, asks for exactly the format the fast path serves and nothing else."""
    import click

    from numatune.cli import main
    from numatune.entry import JSON_FLAGS

    ctx = click.Context(main)
    spellings = set()
    for name in ("inspect", "irq", "check", "diff", "audit"):
        command = main.get_command(ctx, name)
        for param in command.params:
            if param.name == "as_json":
                spellings |= {(opt,) for opt in param.opts}
            elif param.name == "fmt":
                spellings |= {(opt, "json") for opt in param.opts} | {(f"{opt}=json",) for opt in param.opts
                                                                      if opt.startswith("--")}
    assert spellings == set(JSON_FLAGS)
    for name, rest in (("inspect", ()), ("check", ()), ("diff", ("a", "b")), ("audit", ("1",)), ("irq", ())):
        for flags in (*JSON_FLAGS, ()):
            call = match_fast_path([name, *rest, *flags], {})
            if call is None:
                continue
            command = main.get_command(ctx, name)
            sub = command.make_context(name, [*rest, *flags], parent=ctx)
            params = sub.params
            asked = "json" if params.get("as_json") else params.get("fmt")
            assert asked in (call.fmt, "table") and (call.fmt == "json") == (asked == "json"), (name, flags)
            given = click.core.ParameterSource.COMMANDLINE
            changed = {p.name for p in command.params if isinstance(p, click.Option)
                       and p.name not in ("fmt", "as_json") and sub.get_parameter_source(p.name) == given}
            assert not changed, (name, flags, changed)
