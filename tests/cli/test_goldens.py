"""Golden outputs of irq, check (text and JUnit), launch and audit on fixture trees (`pytest --update-golden`
rewrites them; review the diff). inspect's goldens are in test_inspect.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PROJECT, fixture_root

IRQ_TREE = "vm-two-socket"  # a real two-node guest with /proc/interrupts and /proc/irq
GPU_TREE = "handmade-launch-2s4gpu-cxl"  # two sockets, four GPUs, CXL memory (hand-made, see fixtures/README.md)


def _text(result, name: str) -> str:
    assert result.exit_code in (0, 1), result.stderr  # 1: check found something, which the golden shows
    return result.stdout.replace(str(fixture_root(name)), name)


def _json(result, name: str) -> str:
    doc = json.loads(_text(result, name))
    doc["numatune_version"] = "X"  # goldens outlive releases
    return json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("args, golden_name", [
    ((), "irq.txt"),
    (("--json",), "irq.json"),
    (("--exclude-cpus", "1"), "irq-exclude.txt"),
    (("plan", "--ranks-per-node", "1"), "irq-plan.txt"),
    (("plan", "--ranks-per-node", "1", "--json"), "irq-plan.json"),
])
def test_irq_golden(cli, golden, args, golden_name):
    result = cli("--root", str(fixture_root(IRQ_TREE)), "irq", *args)
    assert result.exit_code == 0, result.stderr
    out = _json(result, IRQ_TREE) if golden_name.endswith(".json") else _text(result, IRQ_TREE)
    golden(f"{IRQ_TREE}/{golden_name}", out)


@pytest.mark.parametrize("tree, policy", [(IRQ_TREE, None), (GPU_TREE, "gpu-node.toml")])
@pytest.mark.parametrize("fmt", ["text", "junit"])
def test_check_golden(cli, golden, tree, policy, fmt):
    extra = ("--policy", str(PROJECT / "examples" / policy)) if policy else ()
    result = cli("--root", str(fixture_root(tree)), "check", "-v", "--format", fmt, *extra)
    assert result.exit_code == 1, result.stderr  # both trees have warnings: NT201/NT202, the policy's errors
    out = _text(result, tree).replace(str(PROJECT / "examples"), "examples")
    golden(f"{tree}/check{'-' + policy.removesuffix('.toml') if policy else ''}.{'xml' if fmt == 'junit' else 'txt'}",
           out)


LAUNCH_ENV = {"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "CUDA_VISIBLE_DEVICES": None, "OMP_NUM_THREADS": None,
              "PATH": "/nonexistent"}  # no numactl or taskset found: the plan does not depend on this machine


@pytest.mark.parametrize("args, golden_name", [
    (("--cpu-bind", "exclusive", "--dry-run"), "launch-exclusive.txt"),
    (("--mem-policy", "cxl-spill", "--format", "text"), "launch-cxl-spill.txt"),
    (("--cpu-bind", "exclusive", "--json"), "launch-exclusive.json"),
])
def test_launch_golden(cli, golden, args, golden_name):
    result = cli("--root", str(fixture_root(GPU_TREE)), "launch", *args, "--", "python", "train.py", env=LAUNCH_ENV)
    assert result.exit_code == 0, result.stderr
    out = _json(result, GPU_TREE) if golden_name.endswith(".json") else _text(result, GPU_TREE)
    golden(f"{GPU_TREE}/{golden_name}", out)


AUDIT_TREE = "h100-vm-1gpu"  # a real capture (`snapshot --pid 1248`): a CUDA process on an H100 VM
AUDIT_PID = "1248"


@pytest.mark.parametrize("args, golden_name", [((), "audit.txt"), (("--json",), "audit.json")])
def test_audit_golden(cli, golden, args, golden_name):
    result = cli("--root", str(fixture_root(AUDIT_TREE)), "audit", AUDIT_PID, *args)
    assert result.exit_code == 0, result.stderr
    out = _json(result, AUDIT_TREE) if golden_name.endswith(".json") else _text(result, AUDIT_TREE)
    assert AUDIT_PID in out
    golden(f"{AUDIT_TREE}/{golden_name}", out)
