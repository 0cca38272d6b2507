"""The writer: save first, write, verify, roll back everything; on hand-made roots (tests/irq_roots.py)
and on a copy of a real captured tree. Fault injection on the n-th write proves the rollback."""

from __future__ import annotations

import errno
import json
import shutil
import sys
from pathlib import Path

import pytest

from numatune.errors import ApplyError, InputError, PermissionDenied
from numatune.live.irq_apply import (
    Change,
    default_state_path,
    plan_changes,
    read_state,
    require_write_access,
    restore_changes,
    run_changes,
)
from numatune.plan.irq import plan_irqs
from numatune.readers.irqs import read_irq_report
from numatune.readers.topology import read_topology
from numatune.system.host import Host

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tests.conftest import fixture_copy, fixture_root  # noqa: E402
from tests.irq_roots import build_root, tree_digest  # noqa: E402


def planned(host: Host, **opts) -> list[Change]:
    topo = read_topology(host)
    return plan_changes(plan_irqs(topo, read_irq_report(host, topo), **opts).entries)


@pytest.fixture
def root(tmp_path) -> Path:
    return build_root(tmp_path)


def test_apply_then_restore_is_byte_for_byte(root):
    before = tree_digest(root)
    host = Host.open(root)
    changes = planned(host)
    assert len(changes) == 7
    state = default_state_path(host)
    result = run_changes(host, changes, state_path=state)
    assert sorted(result.applied) == [40, 41, 42, 43, 44, 50, 60]
    assert (root / "proc/irq/41/smp_affinity_list").read_text() == "4\n"
    assert tree_digest(root) != before
    saved = read_state(state)
    assert {s.irq for s in saved} == set(result.applied)
    assert next(s for s in saved if s.irq == 41).smp_affinity_list == "0-3\n"
    back = run_changes(host, restore_changes(saved))
    assert sorted(back.applied) == sorted(result.applied)
    assert tree_digest(root) == before


def test_second_apply_changes_nothing(root):
    host = Host.open(root)
    run_changes(host, planned(host), state_path=default_state_path(host))
    again = run_changes(host, planned(host), state_path=default_state_path(host))
    assert again.applied == [] and not again.unchanged  # plan has nothing left to set
    result = run_changes(host, [Change(41, "4\n", frozenset({4}))])
    assert result.unchanged == [41] and result.applied == []


class FailOn:
    """A writer that fails on its n-th call; `truncate` empties the file first, as a half-done write would."""

    def __init__(self, host: Host, n: int, err: int = errno.EINVAL, truncate: bool = False):
        self.host, self.n, self.err, self.truncate, self.calls = host, n, err, truncate, 0

    def __call__(self, logical: str, text: str) -> None:
        self.calls += 1
        if self.calls == self.n:
            if self.truncate:
                Path(self.host.path(logical)).write_text("")
            raise OSError(self.err, "injected fault")
        self.host.write_text(logical, text)


@pytest.mark.parametrize("n", range(1, 8))
@pytest.mark.parametrize("truncate", [False, True])
def test_fault_on_nth_write_rolls_back_everything(root, n, truncate):
    before = tree_digest(root)
    host = Host.open(root)
    state = default_state_path(host)
    with pytest.raises(ApplyError) as err:
        run_changes(host, planned(host), state_path=state, writer=FailOn(host, n, truncate=truncate))
    assert "rolled back" in err.value.message and "injected fault" in err.value.message
    assert tree_digest(root) == before  # every file byte for byte as before
    assert state.exists()  # the state was saved before the first write


@pytest.mark.parametrize("n", [1, 4, 7])
@pytest.mark.parametrize("written", [False, True])
def test_ctrl_c_during_apply_rolls_back_everything(root, n, written):
    """Ctrl-C at the n-th write (before it, or after the file took the new value) leaves every affinity as it was
    and goes on as an interrupt (exit 130 at the command line): an apply is all or nothing."""
    before = tree_digest(root)
    host = Host.open(root)
    calls = []

    def interrupted(logical: str, text: str) -> None:
        calls.append(logical)
        if len(calls) == n:
            if written:
                host.write_text(logical, text)
            raise KeyboardInterrupt
        host.write_text(logical, text)

    with pytest.raises(KeyboardInterrupt):
        run_changes(host, planned(host), state_path=default_state_path(host), writer=interrupted)
    assert tree_digest(root) == before


def test_verify_mismatch_rolls_back(root):
    before = tree_digest(root)
    host = Host.open(root)
    calls = []

    def liar(logical: str, text: str) -> None:
        calls.append(logical)
        host.write_text(logical, "0-7\n" if len(calls) == 3 else text)

    with pytest.raises(ApplyError, match="reads back"):
        run_changes(host, planned(host), writer=liar)
    assert tree_digest(root) == before


def test_eio_is_a_managed_skip(root):
    host = Host.open(root)
    result = run_changes(host, planned(host), writer=FailOn(host, 2, errno.EIO, truncate=True))
    skipped = dict(result.skipped)
    assert len(skipped) == 1 and "EIO" in next(iter(skipped.values()))
    irq = next(iter(skipped))
    assert (root / f"proc/irq/{irq}/smp_affinity_list").read_text() != ""  # put back after the truncation
    assert len(result.applied) == 6


def test_irq_vanishing_between_read_and_write(root):
    host = Host.open(root)
    changes = planned(host)
    victim = changes[2].irq

    def vanish(logical: str, text: str) -> None:
        if logical.startswith(f"/proc/irq/{victim}/"):
            shutil.rmtree(root / f"proc/irq/{victim}")
        host.write_text(logical, text)

    result = run_changes(host, changes, writer=vanish)
    assert (victim, "vanished between read and write") in result.skipped
    assert len(result.applied) == 6


def test_irq_gone_before_reading(root):
    host = Host.open(root)
    changes = planned(host)
    shutil.rmtree(root / "proc/irq/42")
    result = run_changes(host, changes)
    assert any(irq == 42 and "vanished" in why for irq, why in result.skipped)


def test_rollback_failure_says_how_to_restore(root):
    host = Host.open(root)
    calls = {"n": 0}

    def broken(logical: str, text: str) -> None:
        calls["n"] += 1
        if calls["n"] >= 3:
            raise OSError(errno.EBUSY, "device busy")
        host.write_text(logical, text)

    state = default_state_path(host)
    with pytest.raises(ApplyError, match="rollback incomplete") as err:
        run_changes(host, planned(host), state_path=state, writer=broken)
    assert str(state) in err.value.hint


def test_dry_run_writes_nothing(root):
    before = tree_digest(root, skip=())
    host = Host.open(root)
    result = run_changes(host, planned(host), state_path=default_state_path(host), dry_run=True)
    assert len(result.planned) == 7 and not result.applied
    assert tree_digest(root, skip=()) == before


def test_state_file_never_overwritten(root, tmp_path):
    host = Host.open(root)
    first = default_state_path(host)
    run_changes(host, planned(host), state_path=first)
    second = default_state_path(host, now=0)
    assert second != first
    with pytest.raises(InputError, match="already exists"):
        run_changes(host, [Change(41, "5\n", frozenset({5}))], state_path=first)
    assert (root / "proc/irq/41/smp_affinity_list").read_text() == "4\n"


def test_read_state_rejects_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "numatune.irq-plan/1", "irqs": []}))
    with pytest.raises(InputError, match="not a numatune IRQ state file"):
        read_state(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError):
        read_state(bad)
    bad.write_text(json.dumps({"schema": "numatune.irq-state/1", "irqs": [{"no": 1}]}))
    with pytest.raises(InputError, match=r"irqs\[0\]\.irq: is missing"):
        read_state(bad)


@pytest.mark.parametrize("entry", [{"irq": 41, "smp_affinity_list": "zz"}, {"irq": 41, "smp_affinity_list": 5},
                                   {"irq": 41, "smp_affinity_list": ["0"]}, {"irq": 41, "smp_affinity": "zz"},
                                   {"irq": 41, "smp_affinity_list": "0-4000000000"}, "41"])
def test_a_damaged_state_file_is_refused_whole_before_anything_is_written(tmp_path, entry):
    """Each was an internal error (exit 70) half-way through a restore; `0-4000000000` filled memory."""
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "numatune.irq-state/1", "irqs": [entry]}))
    with pytest.raises(InputError, match=r"^.*x\.json: irqs\[0\]"):  # the file and the field (issue 41)
        read_state(bad)


@pytest.mark.parametrize("target", [5, ["0"], "zz", "0-4000000000"])
def test_a_damaged_plan_entry_is_refused(tmp_path, target):
    from numatune.live.irq_apply import read_plan

    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema": "numatune.irq-plan/1", "entries": [{"irq": 41, "action": "set",
                                                                            "target": target}]}))
    with pytest.raises(InputError, match=r"^.*plan\.json: entries\[0\]\.target: "):
        read_plan(bad)


def test_hex_only_tree_writes_smp_affinity(root):
    for d in (root / "proc/irq").iterdir():
        if (d / "smp_affinity_list").exists():
            (d / "smp_affinity_list").unlink()
    host = Host.open(root)
    result = run_changes(host, [Change(41, "4\n", frozenset({4}))])
    assert result.applied == [41]
    assert (root / "proc/irq/41/smp_affinity").read_text() == "00000010\n"


def test_live_node_needs_root(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(PermissionDenied, match="needs root"):
        require_write_access(Host.open("/"))
    require_write_access(Host.open(fixture_root("dev-1node-x86")))  # a root directory: no root needed


def test_on_a_copy_of_a_captured_tree(tmp_path):
    """A real kernel's /proc/irq (dev-1node-x86, captured by `numatune snapshot`), copied."""
    root = fixture_copy("dev-1node-x86", tmp_path / "tree")
    before = tree_digest(root)
    host = Host.open(root)
    changes = planned(host)
    assert {c.irq for c in changes} == {38, 39}
    state = default_state_path(host)
    run_changes(host, changes, state_path=state)
    assert (root / "proc/irq/38/smp_affinity_list").read_text() == "0\n"
    run_changes(host, restore_changes(read_state(state)))
    assert tree_digest(root) == before


def test_on_a_copy_of_the_vm_two_socket_tree(tmp_path):
    """A real 6.12 guest's /proc/irq (fixtures/vm-two-socket, captured by the VM harness)."""
    root = fixture_copy("vm-two-socket", tmp_path / "tree")
    assert (root / "proc/irq").is_dir()
    before = tree_digest(root)
    host = Host.open(root)
    changes = planned(host)
    state = default_state_path(host)
    result = run_changes(host, changes, state_path=state)
    assert len(result.applied) + len(result.unchanged) + len(result.skipped) == len(changes)
    run_changes(host, restore_changes(read_state(state)))
    assert tree_digest(root) == before
