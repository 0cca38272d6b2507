"""Files a user names as input (policy, irq plan and state files, scheduler configurations, probe
results) go through one bounded reader: a device such as /dev/zero or a FIFO is one line and exit 3,
in a child under a time and memory limit (before, /dev/zero was read until memory ran out)."""

from __future__ import annotations

import os

import pytest

from numatune.errors import InputError
from numatune.system import infile
from tests.conftest import fixture_root
from tests.limits import run_limited

INPUTS = {  # the arguments after --root ROOT, with {f} the input file
    "irq restore": ["irq", "restore", "{f}", "--dry-run"],
    "irq apply --plan": ["irq", "apply", "--plan", "{f}", "--dry-run"],
    "check --policy": ["check", "--policy", "{f}"],
    "check --slurm-conf": ["check", "--slurm-conf", "{f}"],
    "plan-memory --probe": ["plan-memory", "--params", "1e6", "--node", "0", "--reserve", "0", "--probe", "{f}"],
    # issue 41: audit --probe read the file itself (a FIFO waited for ever, /dev/zero ended in MemoryError)
    "audit --probe": ["audit", "1", "--probe", "{f}"],
    "check --gres-conf": ["check", "--gres-conf", "{f}"],
    "check --kubelet-config": ["check", "--kubelet-config", "{f}"],
    "check --resource-slices": ["check", "--resource-slices", "{f}"],
    "diff": ["diff", "{f}", "{f}"],
}


@pytest.mark.parametrize("command", list(INPUTS))
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_as_input_is_exit_3_at_once(tmp_path, command, kind):
    path = "/dev/zero"
    if kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)  # opening it for reading would wait for a writer that never comes
    args = [a.replace("{f}", path) for a in INPUTS[command]]
    done = run_limited("--root", str(fixture_root("dev-1node-x86")), *args, seconds=10, mib=256)
    assert done.returncode == 3 and done.within(10, 256), (done.returncode, done.stderr[-300:])
    assert done.stderr.startswith("numatune: error: ") and "not a regular file" in done.stderr, done.stderr


def test_an_input_past_the_bound_is_refused_without_holding_it(tmp_path):
    big = tmp_path / "state.json"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)  # sparse: no disk, 2 MiB of zeros
    with pytest.raises(InputError, match="larger than 1 MiB"):
        infile.read_input(big, "state file", limit=1 << 20)
    assert infile.read_input(big, "state file", limit=4 << 20) == bytes(2 << 20)
