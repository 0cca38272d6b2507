"""Snapshot in the guest, replay on the host, equal: the guest check `snapshot_parity` left the live
JSON of every command in PARITY_LINES and a `snapshot --pid` archive; here each is replayed with
`--root` on the host and compared without the fields tests/parity.py lists (one list for both stages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import vm_checks
import vm_topology
from checks_inspect import PARITY_ENV, PARITY_LINES

from tests.parity import comparable

pytestmark = pytest.mark.vm
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("topology", [t for t in vm_topology.available()
                                      if any(c.name == "snapshot_parity" for c in vm_checks.for_topology(t))])
def test_guest_snapshot_replays_on_the_host(vm_session, topology: str) -> None:
    run = vm_session.get(topology)
    if run.skip_reason:
        pytest.skip(run.skip_reason)
    entry = run.results.get("checks", {}).get("snapshot_parity")
    if entry is None or entry["status"] != "passed":
        pytest.fail(f"the guest's snapshot_parity check did not pass: {entry}")
    pid = str(entry["details"]["pid"])
    out = run.boots[-1].run_dir / "parity"
    env = dict(os.environ, **PARITY_ENV)
    env.pop("NUMATUNE_ROOT", None)
    differing = []
    for i, line in enumerate(PARITY_LINES):
        args = [a.format(pid=pid) for a in line]
        live = json.loads((out / f"{i}.json").read_text())
        replay = subprocess.run([sys.executable, "-m", "numatune", "--root", str(out / "guest.tar.gz"), *args],
                                capture_output=True, text=True, env=env, cwd=PROJECT, timeout=300)
        assert replay.returncode == entry["details"]["codes"][i], (args, replay.stderr)
        saved = json.loads(replay.stdout)
        assert live.get("live", True) is True and saved.get("live", False) is False
        if comparable(saved) != comparable(live):
            differing.append((" ".join(args), _first_difference(comparable(live), comparable(saved))))
    assert not differing, differing


def _first_difference(a, b, at: str = "") -> str:  # noqa: ANN001
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{at}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{at}.{i}")
    return f"{at}: live {json.dumps(a)[:300]} replay {json.dumps(b)[:300]}"
