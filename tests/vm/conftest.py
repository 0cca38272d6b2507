"""pytest glue for the VM harness: one boot per topology per session, shared by its checks.

Outcomes, by design:
- QEMU, virtme-ng, the kernel or host udev missing -> every VM test skips, with the precise
  reason (and a banner in the terminal summary, so a skipped VM stage is never silent); under CI=true
  the checks that drive a real engine (Slurm, Prometheus) fail instead, as they do when the guest
  finds the engine's package missing (tests/conftest.py engine_missing).
- The guest never reaches the batch script (QEMU or boot failure outside the project) ->
  retried once, then skipped loudly with the console tail.
- The batch ran but the guest kernel reported that it stalled or crashed (vm_runner.KERNEL_STALLS,
  KERNEL_CRASHES), QEMU that a device model gave up (vm_runner.QEMU_FAULTS), or the guest froze (silent
  console, a shared root that stopped answering: vm_runner.SILENT_TIMEOUT, ROOT_TIMEOUT), and a check
  did not pass -> that boot
  says nothing about numatune: retried once; if the retry stalls too, its passed checks stand and every
  other check is skipped loudly, with why.
- The batch ran: each check passes or FAILS on its own result; a check missing from the
  results (guest died half-way) FAILS, pointing at the console log.
NUMATUNE_VM=0 skips the VM tests deliberately (fast local runs).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE / "guest"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import vm_checks  # noqa: E402
import vm_fixtures  # noqa: E402
import vm_runner  # noqa: E402
import vm_topology  # noqa: E402


@dataclass
class TopologyRun:
    results: dict[str, Any] | None = None
    skip_reason: str | None = None
    unusable: bool = False  # the VM harness is not installed here (not a boot that failed outside the project)
    boots: list[vm_runner.BootResult] = field(default_factory=list)
    fixture_note: str | None = None


class VmSession:
    """Boots each topology at most once (plus one retry) and keeps the guest's results."""

    def __init__(self) -> None:
        self.runs: dict[str, TopologyRun] = {}
        self._env: vm_runner.Environment | None = None

    @property
    def env(self) -> vm_runner.Environment:
        if self._env is None:
            self._env = vm_runner.probe()
        return self._env

    def get(self, name: str) -> TopologyRun:
        if name not in self.runs:
            self.runs[name] = self._boot(name)
        return self.runs[name]

    def _boot(self, name: str) -> TopologyRun:
        run = TopologyRun()
        if os.environ.get("NUMATUNE_VM") == "0":
            run.skip_reason = "NUMATUNE_VM=0: VM tests disabled on purpose"
            return run
        env = self.env
        if not env.usable:
            run.skip_reason = "VM harness cannot run here: " + "; ".join(env.problems)
            run.unusable = True
            return run
        topo = vm_topology.load(name)
        reasons = []
        for attempt in (1, 2):
            boot = vm_runner.boot(env, topo)
            run.boots.append(boot)
            results = _load(boot.results_path)
            if results and results.get("started"):
                stall = boot.guest_fault
                if not (stall and _not_passed(results)):
                    run.results = results
                    break
                reasons.append(f"boot {attempt}: the guest stalled or crashed ({stall!r}) and checks"
                               f" {_not_passed(results)} did not pass")
                continue
            why = "timed out" if boot.timed_out else f"vng exited {boot.returncode}"
            reasons.append(f"boot {attempt}: {why} after {boot.seconds:.0f}s, guest batch never started")
        else:
            last = run.boots[-1]
            why = (f"VM boot of {name!r} failed twice, outside the project ({'; '.join(reasons)});"
                   f" console: {last.console_log}\n" + vm_runner.tail(last.console_log, 25))
            results = _load(last.results_path)
            if results and results.get("started"):
                # The last boot's passed checks stand (the host reads their files from its run directory);
                # every other check is skipped, loudly, with why.
                run.results = _skip_unfinished(results, [c.name for c in vm_checks.for_topology(name)], why)
            else:
                run.skip_reason = why
            return run
        if os.environ.get("NUMATUNE_VM_UPDATE_FIXTURES") == "1":
            snap = run.results.get("checks", {}).get("snapshot", {})
            if snap.get("status") == "passed":
                dest = vm_fixtures.update(topo, run.boots[-1], env, run.results)
                run.fixture_note = f"fixtures updated: {dest}"
            else:
                run.fixture_note = f"fixtures NOT updated: snapshot check {snap.get('status', 'missing')}"
        return run


def _not_passed(results: dict[str, Any]) -> list[str]:
    """The checks of a batch that did not pass (a batch that did not finish counts its running check)."""
    bad = [k for k, v in results.get("checks", {}).items() if v.get("status") != "passed"]
    return bad + ([results["running"]] if results.get("running") else [])


def _skip_unfinished(results: dict[str, Any], checks: list[str], why: str) -> dict[str, Any]:
    """``results`` with every check of ``checks`` that did not pass marked skipped for ``why``."""
    done = results.get("checks", {})
    kept = {name: entry for name, entry in done.items() if entry.get("status") == "passed"}
    skipped = {name: {"status": "skipped", "details": why} for name in checks if name not in kept}
    return {**results, "checks": {**kept, **skipped}, "running": None}


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


_SESSION = VmSession()


@pytest.fixture(scope="session")
def vm_session() -> VmSession:
    return _SESSION


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly what the VM stage did: boot times, skips, fixture updates."""
    if not _SESSION.runs and _SESSION._env is None:
        return
    tr = terminalreporter
    tr.section("numatune VM harness")
    env = _SESSION._env
    if env is not None:
        tr.write_line(f"kernel {env.kernel_version}, accel {env.accel} ({env.accel_reason})")
    tr.write_line(f"limits: {vm_runner.BOOT_TIMEOUT} s a boot, {vm_runner.STALL_TIMEOUT} s without news from the"
                  f" guest, {vm_runner.CHECK_TIMEOUT} s a check (NUMATUNE_VM_TIMEOUT, NUMATUNE_VM_STALL_TIMEOUT,"
                  " NUMATUNE_VM_CHECK_TIMEOUT)")
    for name, run in _SESSION.runs.items():
        for b in run.boots:
            share = 100 * b.seconds / vm_runner.BOOT_TIMEOUT
            stopped = f" STOPPED: {b.why_stopped}" if b.why_stopped else ""
            if b.guest_fault:
                tr.write_line(f"!!! {name}: the guest stalled or crashed: {b.guest_fault}", red=True, bold=True)
            tr.write_line(f"{name}: boot+batch {b.seconds:.0f}s ({share:.0f}% of the limit; waited {b.lock_wait:.0f}s"
                          f" for the boot lock) rc={b.returncode}{stopped} log={b.console_log}",
                          red=bool(stopped or share > 50))
        if run.results:
            checks = run.results.get("checks", {})
            bad = [k for k, v in checks.items() if v.get("status") != "passed"]
            tr.write_line(f"{name}: {len(checks) - len(bad)}/{len(checks)} checks passed in the guest"
                          f" (set-up {run.results.get('setup', {}).get('seconds')}s)")
            for k, v in checks.items():
                if v.get("status") == "skipped":
                    tr.write_line(f"!!! {name}: {k} SKIPPED in the guest: {v.get('details')}", red=True, bold=True)
            slowest = sorted(checks.items(), key=lambda kv: -(kv[1].get("seconds") or 0))[:6]
            tr.write_line(f"{name}: slowest checks: " + ", ".join(f"{k} {v.get('seconds')}s" for k, v in slowest))
        if run.skip_reason:
            tr.write_line(f"!!! VM TESTS FOR {name!r} SKIPPED: {run.skip_reason}", red=True, bold=True)
        if run.fixture_note:
            tr.write_line(f"{name}: {run.fixture_note}")
