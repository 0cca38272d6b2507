"""numatune.cli._options: a group's options reach every subcommand (or are refused, exit 2), and every numeric
option of every command is finite and bounded. The options and commands come from the click objects
themselves, so a new option or subcommand cannot escape these tests."""

from __future__ import annotations

import json

import click
import pytest

from numatune.cli._options import Count, LargeCount, Number, Size, format_choices, group_options
from numatune.cpulist import parse_cpulist
from numatune.render.envelope import dumps, envelope
from tests.conftest import click_commands
from tests.irq_roots import build_root

COMMANDS = click_commands()
GROUPS = {path: cmd for path, cmd in COMMANDS.items() if isinstance(cmd, click.Group)}

# -- a group's options ------------------------------------------------------------------------------------
# A value for each group option whose type says nothing usable (a string with a callback); the others are
# derived from their type below. A new option of that kind fails test_every_group_option_has_a_value.
SAMPLES = {("irq", "exclude_cpus"): "0-1"}
# What each subcommand needs to run without writing (the state file is filled in per test).
SUB_ARGS = {"irq plan": [], "irq apply": ["--dry-run"], "irq restore": ["{state}", "--dry-run"]}


def _sample(group: str, param: click.Option) -> list[str]:
    """The option as typed, with a value that is not its default."""
    flag = max(param.opts, key=len)
    if param.is_flag:
        return [flag]
    if param.name == "fmt":
        return [flag, "json"]
    if (group, param.name) in SAMPLES:
        return [flag, SAMPLES[group, param.name]]
    if isinstance(param.type, click.IntRange):
        return [flag, str((param.type.min or 0) + 1)]
    if isinstance(param.type, click.Choice):
        return [flag, next(c for c in param.type.choices if c != param.default)]
    raise AssertionError(f"{group} {flag}: give it a sample value in SAMPLES")


def test_every_group_option_has_a_value_and_every_subcommand_a_call():
    assert GROUPS, "no command group found"
    for path, group in GROUPS.items():
        for param in group_options(group):
            assert _sample(path, param)
        if group_options(group):
            assert {f"{path} {sub}" for sub in group.commands} == {p for p in SUB_ARGS if p.startswith(path + " ")}


def _calls():
    for path, group in GROUPS.items():
        for param in group_options(group):
            for sub in group.commands:
                yield pytest.param(path, param.name, sub, id=f"{path}-{param.name}-{sub}")


@pytest.fixture(scope="module")
def irq_root(tmp_path_factory):
    base = tmp_path_factory.mktemp("options")
    root = build_root(base, irqbalance=True)
    state = base / "state.json"
    state.write_text(dumps(envelope("irq-state", created="2026-01-01T00:00:00Z", source="test", irqs=[])))
    return root, state


@pytest.mark.parametrize(("path", "name", "sub"), list(_calls()))
def test_a_group_option_means_the_same_before_and_after_the_subcommand(cli, irq_root, path, name, sub):
    """`irq OPTION VALUE plan` is `irq plan OPTION VALUE`: the same output and exit status, or both refused
    (exit 2, one line) where the subcommand has no such option. Never dropped."""
    root, state = irq_root
    group = GROUPS[path]
    param = next(p for p in group_options(group) if p.name == name)
    option = _sample(path, param)
    rest = [a.format(state=state) for a in SUB_ARGS[f"{path} {sub}"]]
    before = cli("--root", str(root), *path.split(), *option, sub, *rest)
    after = cli("--root", str(root), *path.split(), sub, *rest, *option)
    assert (before.exit_code, before.stdout) == (after.exit_code, after.stdout), (before.stderr, after.stderr)
    subcmd = group.commands[sub]
    has = any(p.name == name for p in subcmd.params) or name == "as_json" and format_choices(subcmd)
    if has:
        assert before.exit_code == 0, before.stderr
    else:
        assert before.exit_code == 2 and before.stderr.startswith("numatune: error: ") and "does not apply" in \
            before.stderr, before.stderr


def test_irq_exclude_cpus_before_apply_is_honoured(cli, irq_root):
    """The issue's case: `irq --exclude-cpus 0 apply` moved IRQs onto CPU 0; now no planned write names it."""
    root, _ = irq_root
    plain = json.loads(cli("--root", str(root), "irq", "apply", "--dry-run", "--json").stdout)
    r = cli("--root", str(root), "irq", "--exclude-cpus", "0-3", "--json", "apply", "--dry-run")
    assert r.exit_code == 0, r.stderr
    excluded = json.loads(r.stdout)
    assert excluded != plain and excluded["would_write"]
    for write in excluded["would_write"]:  # no IRQ moved onto CPUs 0-3
        assert not parse_cpulist(write["value"]) & {0, 1, 2, 3}, write
    assert any(parse_cpulist(w["value"]) & {0, 1, 2, 3} for w in plain["would_write"])


def test_a_group_option_given_twice_with_two_values_or_an_impossible_format_is_exit_2(cli, irq_root):
    root, _ = irq_root
    for args, said in ((["--exclude-cpus", "0", "plan", "--exclude-cpus", "1"], "given twice with two values"),
                       (["--json", "plan", "-f", "text"], "two formats"),
                       (["-f", "prometheus", "plan"], "has no prometheus format"),
                       (["--ranks-per-node", "2", "restore", "x"], "does not apply to")):
        r = cli("--root", str(root), "irq", *args)
        assert r.exit_code == 2 and said in r.stderr and r.stderr.count("\n") == 2, (args, r.stderr)


def test_irq_refuses_cpus_the_machine_does_not_have(cli, irq_root):
    root, _ = irq_root  # 8 CPUs
    r = cli("--root", str(root), "irq", "plan", "--exclude-cpus", "5-9")
    assert r.exit_code == 2 and "CPU(s) 8-9 are not on this machine (its CPUs: 0-7)" in r.stderr, r.stderr
    r = cli("--root", str(root), "irq", "--ranks-per-node", "9")
    assert r.exit_code == 2 and "more ranks than this machine's 8 online CPUs" in r.stderr, r.stderr


# -- numbers ----------------------------------------------------------------------------------------------
NUMERIC = (click.types.IntParamType, click.types.FloatParamType, Size, LargeCount)
HOSTILE = ("nan", "inf", "-inf", "-1", "1e308", "1e30", "9" * 5000)


def _numeric():
    for path, cmd in COMMANDS.items():
        for param in cmd.params:
            if isinstance(param.type, NUMERIC):
                yield pytest.param(path, param, id=f"{path}-{param.name}")


NUMERIC_PARAMS = list(_numeric())


def test_the_numeric_options_are_found():
    names = {(p.values[0], p.values[1].name) for p in NUMERIC_PARAMS}
    assert {("audit", "interval"), ("audit", "sample"), ("compare", "sample_interval"), ("irq", "ranks_per_node"),
            ("plan-memory", "params"), ("probe", "size"), ("snapshot", "pids")} <= names


@pytest.mark.parametrize(("path", "param"), NUMERIC_PARAMS)
def test_every_numeric_option_is_finite_and_bounded(path, param):
    """One shared type per kind (Number, Count, Size, LargeCount), each with both bounds; NaN, infinities,
    -1, 1e308, 1e30 and a 5,000-digit figure are refused (click's BadParameter: exit 2, one line)."""
    assert isinstance(param.type, (Number, Count, Size, LargeCount)), f"{path} {param.name}: {param.type!r}"
    if isinstance(param.type, (Number, Count)):
        assert param.type.min is not None and param.type.max is not None
    for value in HOSTILE:
        if value == "-1" and isinstance(param.type, (Number, Count)) and param.type.min <= -1:
            continue
        with pytest.raises(click.BadParameter):
            param.type.convert(value, param, None)


@pytest.mark.parametrize("args", [
    ["audit", "--watch", "--interval", "nan", "1"], ["audit", "--watch", "--interval", "inf", "1"],
    ["audit", "--watch", "--interval", "1e308", "1"], ["compare", "--sample-interval", "inf", "--", "true"],
    ["irq", "--ranks-per-node", "1e30"], ["irq", "--ranks-per-node", "10000000"], ["audit", "--sample", "inf", "1"],
    ["audit", "--sample", "1e9", "1"], ["snapshot", "--pid", "-5", "-o", "x.tgz"], ["check", "--pid", "0"],
    ["launch", "--rank", "5", "--local-size", "2", "--dry-run", "--", "true"],
    ["plan-memory", "--params", "inf"], ["probe", "--time-budget", "nan"],
], ids=lambda a: "-".join(a[:3]))
def test_the_issues_numbers_are_one_line_exit_2(cli, args):
    r = cli(*args)
    assert r.exit_code == 2 and r.stderr.startswith("numatune: error: ") and r.stderr.count("\n") <= 2, r.stderr
    assert r.stdout == ""


def test_sizes_and_counts_as_people_write_them(cli):
    """One size syntax for every size option (probe --size 1.5G as audit --min-size), counts as models are
    named (7B, 70B, 1.5T)."""
    size = next(p for p in COMMANDS["probe"].params if p.name == "size")
    assert size.type.convert("1.5G", size, None) == 3 << 29
    params = next(p for p in COMMANDS["plan-memory"].params if p.name == "params")
    for text, value in (("7e9", 7e9), ("7B", 7e9), ("70B", 70e9), ("1.5T", 1.5e12), ("350M", 350e6)):
        assert params.type.convert(text, params, None) == value
