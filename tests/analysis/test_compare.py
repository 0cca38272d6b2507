"""compare: statistics and verdicts on known runs, and real runs on this machine (one node)."""

from __future__ import annotations

import json
import math
import sys

import pytest

from numatune.analysis.compare import analyse
from numatune.commands.compare import Run, parse_metric


def runs(name: str, values: list[float], by_node=None, share=1.0):  # noqa: ANN001
    return [Run(name, i, v, v, 0, by_node or {0: 8 << 20}, 3, share) for i, v in enumerate(values)]


def test_statistics_match_a_hand_computation():
    data = runs("local", [1.0, 2.0, 3.0, 4.0, 5.0]) + runs("remote", [2.0, 4.0, 6.0, 8.0, 10.0], {1: 8 << 20})
    doc = analyse(data, ["local", "remote"], "local", higher_is_better=False,
                  expect={"local": (0,), "remote": (1,)})
    local, remote = doc["placements"]
    assert (local["mean"], local["median"], local["min"], local["max"]) == (3.0, 3.0, 1.0, 5.0)
    assert local["stdev"] == pytest.approx(math.sqrt(2.5))
    assert remote["ratio"] == 2.0 and remote["slowdown"] == 2.0
    assert remote["ratio_stdev"] == pytest.approx(1.490712, rel=1e-6)
    assert remote["welch_t"] == pytest.approx(3 / math.sqrt(2.5))
    assert remote["welch_df"] == pytest.approx(6.25 / 1.0625)
    assert not remote["significant"]  # p ≈ 0.108 (between the df=5 and df=6 table values)
    assert remote["achieved_split"] == {"1": 1.0}
    assert doc["verdict"] == ["remote: no significant difference from local (+100.0%, p = 0.108)"]


def test_verdict_rules_remote_penalty_and_cxl_spill():
    base = [10.0, 10.1, 9.9, 10.0, 10.05]
    data = runs("local", base) + runs("remote", [x * 1.3 for x in base]) + runs("cxl", [x * 1.05 for x in base])
    doc = analyse(data, ["local", "remote", "cxl"], "local", higher_is_better=False, expect={})
    remote, cxl = doc["verdict"]
    assert remote.startswith("remote: 30.0% slower than local") and "placement matters on this node" in remote
    assert cxl.startswith("cxl: within 5.0% of local") and "CXL can take the spill" in cxl


def test_throughput_metric_inverts_the_slowdown():
    data = runs("local", [100.0, 101.0, 99.0]) + runs("interleave", [50.0, 50.5, 49.5])
    doc = analyse(data, ["local", "interleave"], "local", higher_is_better=True, expect={})
    row = doc["placements"][1]
    assert row["ratio"] == pytest.approx(0.5) and row["slowdown"] == pytest.approx(2.0)
    assert doc["verdict"][0].startswith("interleave: 100.0% slower than local")


def test_misplaced_runs_are_flagged_not_silently_compared():
    data = runs("local", [1.0, 1.0, 1.1]) + runs("remote", [1.0, 1.1, 1.0], {0: 8 << 20}, share=0.0)
    doc = analyse(data, ["local", "remote"], "local", higher_is_better=False, expect={"remote": (1,)})
    assert doc["placements"][1]["placement_proof"] == "misplaced"
    assert any("memory not where asked" in w for w in doc["warnings"])
    assert "placement misplaced" in doc["verdict"][0]


def test_metric_takes_the_last_match():
    import re

    out = "step 1: 10.5 it/s\nstep 2: 12.25 it/s\nloss 0.1\n"
    assert parse_metric(re.compile(r"([\d.]+) it/s"), out) == 12.25
    assert parse_metric(re.compile(r"tokens: (\d+)"), out) is None


PY = sys.executable
WORK = "import time; b = bytearray(16 << 20); time.sleep(0.3); print('rate: 42.5 it/s')"


def test_compare_live_one_node(cli):
    res = cli("compare", "-n", "2", "--seed", "3", "-p", "local,none,interleave", "--json", "--", PY, "-c", WORK)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "numatune.compare/1"
    rows = {r["placement"]: r for r in doc["placements"]}
    assert list(rows) == ["local", "none", "interleave"] and all(r["n"] == 2 for r in rows.values())
    home = rows["local"]["expected_nodes"]
    assert len(home) == 1 and "memory bind:" in rows["local"]["plan"]
    # the proof: the 16 MiB buffer was seen, all of it on the bound node
    assert rows["local"]["placement_proof"] == "ok" and rows["local"]["achieved_split"] == {str(home[0]): 1.0}
    assert rows["none"]["placement_proof"] == "not-judged"
    assert all(v > 0 for r in rows.values() for v in r["values"])


def test_compare_metric_and_markdown(cli):
    res = cli("compare", "-n", "2", "-p", "local,none", "--metric", r"rate: ([\d.]+)", "--higher-is-better",
              "--unit", "it/s", "--emit", "markdown", "--", PY, "-c", WORK)
    assert res.exit_code == 0, res.stderr
    assert "| local | 42.5 ± 0 | 42.5 |" in res.stdout
    assert "- none: no significant difference from local (+0.0%" in res.stdout


def test_failing_command_stops_with_its_status_and_tail(cli):
    res = cli("compare", "-n", "3", "-p", "local,none", "--", "sh", "-c", "echo the-last-words; exit 4")
    assert res.exit_code == 4
    assert "the-last-words" in res.stderr and "exited with status 4" in res.stderr
    missing = cli("compare", "-n", "1", "-p", "local", "--", "/nonexistent/cmd")
    assert missing.exit_code == 127


def test_compare_refusals(cli):
    from tests.conftest import fixture_root

    # what the user typed cannot be: 2, as every command's (compare measures the live node only)
    assert cli("--root", str(fixture_root("vm-two-socket")), "compare", "--", "true").exit_code == 2
    assert cli("compare", "-p", "local,bogus", "--", "true").exit_code == 2
    assert cli("compare", "--higher-is-better", "--", "true").exit_code == 2
    assert cli("compare", "-p", "local").exit_code == 2  # no command


def test_a_zero_baseline_is_an_input_error():
    from numatune.errors import InputError

    with pytest.raises(InputError, match="averaged 0"):
        analyse(runs("local", [0.0, 0.0]) + runs("remote", [1.0, 1.0]), ["local", "remote"], "local",
                higher_is_better=False, expect={})


def test_compare_by_default_runs_what_exists_here_and_says_what_it_skipped(cli):
    """This machine has one NUMA node: the defaults (local, remote) run local only and name remote as skipped;
    asking for remote explicitly is still refused (exit 7)."""
    from numatune.system.host import Host

    nodes = [n for n in Host("/").listdir("/sys/devices/system/node") if n.startswith("node")]
    if len(nodes) != 1:
        pytest.skip("needs a one-node machine")
    res = cli("compare", "-n", "2", "--json", "--", PY, "-c", WORK)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["placement"] for r in doc["placements"]] == ["local"]
    assert len(doc["skipped"]) == 1 and "only DRAM node" in doc["skipped"][0]
    assert "only DRAM node; there is no remote memory: skipped" in res.stderr
    text = cli("compare", "-n", "1", "--", PY, "-c", WORK)
    assert text.exit_code == 0 and "Not run here:" in text.stdout and "nothing to compare" in text.stdout
    assert cli("compare", "-n", "1", "-p", "local,remote", "--", PY, "-c", WORK).exit_code == 7


def test_an_interleave_run_on_one_node_fails_the_proof():
    """interleave over nodes 0,1: all pages on node 0 is on the asked nodes (100%) but not interleaved."""
    from numatune.commands.compare import spread_of

    assert spread_of({0: 8 << 20}, (0, 1)) == 0.0
    assert spread_of({0: 4 << 20, 1: 4 << 20}, (0, 1)) == 1.0
    assert spread_of({0: 6 << 20, 1: 2 << 20, 5: 1 << 20}, (0, 1)) == 0.5  # other nodes do not count
    assert spread_of({0: 8 << 20}, (0,)) is None
    one = [Run("interleave", i, 1.0, 1.0, 0, {0: 8 << 20}, 3, 1.0, 0.0) for i in range(3)]
    even = [Run("interleave", i, 1.0, 1.0, 0, {0: 4 << 20, 1: 4 << 20}, 3, 1.0, 1.0) for i in range(3)]
    bad = analyse(runs("local", [1.0, 1.0, 1.1]) + one, ["local", "interleave"], "local", higher_is_better=False,
                  expect={"local": (0,), "interleave": (0, 1)})
    row = bad["placements"][1]
    assert row["placement_proof"] == "misplaced" and row["spread"] == 0.0 and row["on_expected_nodes"] == 1.0
    assert any("not spread over node(s) 0,1" in w for w in bad["warnings"])
    good = analyse(runs("local", [1.0, 1.0, 1.1]) + even, ["local", "interleave"], "local", higher_is_better=False,
                   expect={"local": (0,), "interleave": (0, 1)})
    assert good["placements"][1]["placement_proof"] == "ok"
