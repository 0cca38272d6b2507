"""Each guest check of each topology as its own pytest case (all share one boot per topology).

The case list comes from the guest-side registry (tests/vm/guest/vm_checks.py), so adding a
check there adds a test here with no other edit.
"""

from __future__ import annotations

import json

import pytest
import vm_checks
import vm_topology

from tests.conftest import engine_missing

pytestmark = pytest.mark.vm

CASES = [(t, c.name) for t in vm_topology.available() for c in vm_checks.for_topology(t)]
ENGINES = {c.name for t in vm_topology.available() for c in vm_checks.for_topology(t) if c.engines}


@pytest.mark.parametrize(("topology", "check"), CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_vm_check(vm_session, topology: str, check: str) -> None:
    run = vm_session.get(topology)
    if run.skip_reason:
        if run.unusable and check in ENGINES:  # the engine never ran: a failure under CI=true
            engine_missing(f"[{topology}] {check}: {run.skip_reason}")
        pytest.skip(run.skip_reason)
    assert run.results is not None
    boot = run.boots[-1]
    log = boot.console_log
    entry = run.results.get("checks", {}).get(check)
    if entry is None:
        running = run.results.get("running")
        if boot.why_stopped:
            state = (f"was running when the harness stopped the guest after {boot.seconds:.0f} s: {boot.why_stopped}"
                     if running == check else
                     f"never ran: the harness stopped the guest after {boot.seconds:.0f} s ({boot.why_stopped})"
                     f" while {running!r} was running")
        elif run.results.get("finished"):
            state = "has no result although the guest batch finished"
        else:
            state = f"has no result: the guest batch died before finishing (last running: {running!r})"
        pytest.fail(f"[{topology}] {check} {state}; see {log}\n"
                    f"set-up log: {json.dumps(run.results.get('setup'), indent=1)[-2000:]}", pytrace=False)
    if entry["status"] == "skipped":  # loud: the reason names what the guest lacks
        if entry.get("engine_missing"):  # a failure under CI=true
            engine_missing(f"[{topology}] {check} skipped in the guest: {entry['details']}")
        pytest.skip(f"[{topology}] {check} skipped in the guest: {entry['details']}")
    if entry["status"] != "passed":
        pytest.fail(f"[{topology}] {check} {entry['status']} in the guest ({entry.get('seconds')}s):\n"
                    f"{entry['details']}\n(console: {log})", pytrace=False)
