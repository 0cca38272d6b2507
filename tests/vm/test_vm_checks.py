"""Each guest check of each topology as its own pytest case (all share one boot per topology).

The case list comes from the guest-side registry (tests/vm/guest/vm_checks.py), so adding a
check there adds a test here with no other edit.
"""

from __future__ import annotations

import json

import pytest
import vm_checks
import vm_topology

pytestmark = pytest.mark.vm

CASES = [(t, c.name) for t in vm_topology.available() for c in vm_checks.for_topology(t)]


@pytest.mark.parametrize(("topology", "check"), CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_vm_check(vm_session, topology: str, check: str) -> None:
    run = vm_session.get(topology)
    if run.skip_reason:
        pytest.skip(run.skip_reason)
    assert run.results is not None
    log = run.boots[-1].console_log
    entry = run.results.get("checks", {}).get(check)
    if entry is None:
        state = "finished" if run.results.get("finished") else "died before finishing"
        pytest.fail(f"check {check!r} has no result: the guest batch {state}; see {log}\n"
                    f"set-up log: {json.dumps(run.results.get('setup'), indent=1)[-2000:]}")
    if entry["status"] != "passed":
        pytest.fail(f"[{topology}] {check} {entry['status']} in the guest ({entry.get('seconds')}s):\n"
                    f"{entry['details']}\n(console: {log})", pytrace=False)
