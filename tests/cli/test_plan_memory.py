"""numatune plan-memory on fixture roots: the text table, the JSON schema, budgets, and the exit codes."""

from __future__ import annotations

import json

from tests.conftest import fixture_root

HM = str(fixture_root("handmade-launch-2s4gpu-cxl"))
GIB = 1 << 30
P7 = "6738415616"
SHAPE7 = ("--layers", "32", "--hidden", "4096", "--seq-len", "4096")


def test_json_plan_for_gpu_2_with_a_dram_budget(cli):
    r = cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--gpu", "2", "--dram-budget", "110G", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.plan-memory/1" and doc["source"] == HM and doc["fits"]
    assert doc["dram"] == {"node": 1, "budget_bytes": 110 * GIB, "budget_source": "given", "used_bytes": 110 * GIB}
    assert [n["node"] for n in doc["cxl"]["nodes"]] == [2, 3] and doc["cxl"]["nodes"][0]["share"] == 0.5
    rows = {r["item"]: r for r in doc["items"]}
    assert rows["variance (exp_avg_sq)"]["dram_bytes"] == 4 * int(P7) and rows["variance (exp_avg_sq)"]["class"] == 1
    assert rows["bf16 weights"]["dram_bytes"] == 110 * GIB - 16 * int(P7)
    assert rows["bf16 gradients"]["cxl_bytes"] == 2 * int(P7) and rows["bf16 gradients"]["unplaced_bytes"] == 0
    assert rows["activation checkpoints"]["bytes"] == 32 * 4096 * 4096 * 2
    assert doc["model"]["seq_len"] == 4096 and doc["warnings"] == []


def test_text_plan_that_does_not_fit_exits_7(cli):
    r = cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--gpu", "0000:86:00.0")
    assert r.exit_code == 7
    assert "local DRAM: node 1, budget 56.25 GiB (free memory of node 1 (62.50 GiB) minus a 6.25 GiB reserve)" \
        in r.stdout
    assert "CXL stripe: node 2 50% (31.75 GiB), node 3 50% (31.75 GiB)" in r.stdout
    last = r.stdout.splitlines()
    assert any(line.startswith("total") and line.rstrip().endswith("6.76 GiB") for line in last)
    assert "warning: fp32 gradients (optimizer data" in r.stdout
    assert r.stderr.startswith("numatune: error: 6.76 GiB does not fit in local DRAM and CXL: bf16 gradients")


def test_node_and_reserve_and_no_cxl(cli):
    r = cli("--root", str(fixture_root("vm-two-socket")), "plan-memory", "--params", "1e7", "--node", "1",
            "--reserve", "256M", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dram"]["node"] == 1 and doc["cxl"] == {"nodes": [], "budget_bytes": 0, "budget_source": "no CXL node",
                                                         "used_bytes": 0}
    assert doc["dram"]["budget_bytes"] == 922456 * 1024 - 256 * (1 << 20)
    assert not any(r["cxl_bytes"] for r in doc["items"])


def test_bad_input_is_one_line(cli):
    r = cli("--root", HM, "plan-memory", "--params", "seven")
    assert r.exit_code == 3 and r.stderr.startswith("numatune: error: --params 'seven': expected a number")
    r = cli("--root", HM, "plan-memory", "--params", "7e9")
    assert r.exit_code == 3 and "has 2 nodes with CPUs: pass --gpu or --node" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--node", "0", "--dram-budget", "lots")
    assert r.exit_code == 3 and "--dram-budget 'lots': expected a size" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--node", "0", "--seq-len", "4096")
    assert r.exit_code == 3 and "need --layers, --hidden, --seq-len" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--gpu", "9")
    assert r.exit_code == 7 and "no such GPU" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--gpu", "1", "--node", "0")
    assert r.exit_code == 2


def test_probe_figures_set_the_cxl_shares(cli, tmp_path):
    from tests.placement.test_targets import PROBE_DOC

    f = tmp_path / "probe.json"
    f.write_text(json.dumps(PROBE_DOC))
    r = cli("--root", HM, "plan-memory", "--params", "1e9", "--node", "0", "--probe", str(f), "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(n["node"], n["share"]) for n in doc["cxl"]["nodes"]] == [(2, 0.75), (3, 0.25)]
    assert "by bandwidth node 2 24000 MB/s, node 3 8000 MB/s" in doc["cxl"]["budget_source"]
    f.write_text("{}")
    r = cli("--root", HM, "plan-memory", "--params", "1e9", "--node", "0", "--probe", str(f))
    assert r.exit_code == 3 and "numatune.probe/1" in r.stderr
