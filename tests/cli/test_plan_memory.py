"""numatune plan-memory on fixture roots: the text table, the JSON schema, budgets, and the exit codes."""

from __future__ import annotations

import json

from tests.conftest import fixture_root

HM = str(fixture_root("handmade-launch-2s4gpu-cxl"))
GIB = 1 << 30
P7 = "6738415616"
SHAPE7 = ("--layers", "32", "--hidden", "4096", "--seq-len", "4096")


def test_json_plan_for_gpu_2_with_a_dram_budget(cli):
    """A 3B model (Llama-3.2-3B's shape) for GPU 2 (node 1): same-socket CXL node 3 only."""
    r = cli("--root", HM, "plan-memory", "--params", "3212749824", "--layers", "28", "--hidden", "3072",
            "--seq-len", "8192", "--gpu", "2", "--dram-budget", "50G", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.plan-memory/1" and doc["source"] == HM and doc["fits"]
    assert doc["dram"]["node"] == 1 and doc["dram"]["budget_bytes"] == 50 * GIB
    assert [n["node"] for n in doc["cxl"]["nodes"]] == [3] and doc["cxl"]["nodes"][0]["share"] == 1.0
    rows = {r["item"]: r for r in doc["items"]}
    p = 3212749824
    assert [r["item"] for r in doc["items"]][:4] == ["momentum (exp_avg)", "variance (exp_avg_sq)", "fp32 gradients",
                                                     "fp32 master weights"]
    assert rows["variance (exp_avg_sq)"]["dram_bytes"] == 4 * p and rows["variance (exp_avg_sq)"]["class"] == 1
    # 50 GiB - 16 B x 3.2e9 = 2.13 GiB left: the bf16 weights (5.98 GiB) straddle; DRAM is charged what is left
    # (under half of them), CXL the rest, and the checkpoints and bf16 gradients go to CXL
    w = rows["bf16 weights"]
    assert w["interleaved"] and 0 <= 50 * GIB - 16 * p - w["dram_bytes"] < 4 * 4096  # less the pages' padding
    assert w["cxl_bytes"] == 2 * p - w["dram_bytes"] and doc["dram"]["used_bytes"] <= 50 * GIB
    assert rows["bf16 gradients"]["cxl_bytes"] == 2 * p and rows["bf16 gradients"]["unplaced_bytes"] == 0
    assert rows["activation checkpoints"]["bytes"] == 28 * 8192 * 3072 * 2
    assert doc["model"]["seq_len"] == 8192 and doc["warnings"] == []


def test_no_plan_puts_a_node_1_caller_on_the_far_socket_cxl_silently(cli):
    """Two sockets, CXL node 2 behind socket 0 (SLIT 24 from node 1), CXL node 3 behind socket 1 (SLIT 14)."""
    for gpu in ("2", "3"):
        doc = json.loads(cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--gpu", gpu, "--json").stdout)
        assert doc["dram"]["node"] == 1 and [n["node"] for n in doc["cxl"]["nodes"]] == [3]
        assert "far-socket CXL node(s) 2 left out" in doc["cxl"]["budget_source"]
    doc = json.loads(cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--node", "0", "--json").stdout)
    assert [n["node"] for n in doc["cxl"]["nodes"]] == [2]
    # asked for both: used, and said
    r = cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--gpu", "2", "--cxl-nodes", "2,3", "--json")
    doc = json.loads(r.stdout)
    assert [n["node"] for n in doc["cxl"]["nodes"]] == [2, 3]
    assert any(w.startswith("far-socket CXL node(s) 2 used for node 1") for w in doc["warnings"])
    # the shares come from node 1's HMAT row, which lists no figure for CXL node 2: equal, and said why
    assert "equal shares: HMAT gives no bandwidth from node 1 to node(s) 2" in doc["cxl"]["budget_source"]
    r = cli("--root", HM, "plan-memory", "--params", P7, "--gpu", "2", "--cxl-nodes", "1")
    assert r.exit_code == 2 and "CXL node(s) 1 are not CXL memory nodes of this root (CXL nodes: 2,3)" in r.stderr


def test_a_dram_budget_above_free_memory_warns(cli):
    r = cli("--root", HM, "plan-memory", "--params", "1e9", "--node", "1", "--dram-budget", "100G")
    assert r.exit_code == 0
    assert "warning: the DRAM budget 100.00 GiB is above node 1's free memory (62.50 GiB)" in r.stdout


def test_text_plan_that_does_not_fit_exits_7(cli):
    r = cli("--root", HM, "plan-memory", "--params", P7, *SHAPE7, "--gpu", "0000:86:00.0")
    assert r.exit_code == 7
    assert "local DRAM: node 1, budget 56.25 GiB (free memory of node 1 (62.50 GiB) minus a 6.25 GiB reserve)" \
        in r.stdout
    assert "CXL stripe: node 3 100% (31.75 GiB)" in r.stdout
    last = r.stdout.splitlines()
    assert any(line.startswith("total") and line.rstrip().endswith("38.51 GiB") for line in last)
    assert "warning: fp32 master weights (optimizer data" in r.stdout
    assert r.stderr.startswith("numatune: error: 38.51 GiB does not fit in local DRAM and CXL: fp32 master weights")


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
    assert r.exit_code == 2
    assert r.stderr.startswith("numatune: error: Invalid value for '--params': 'seven': expected a count")
    r = cli("--root", HM, "plan-memory", "--params", "7e9")
    assert r.exit_code == 2 and "has 2 nodes with CPUs: pass --gpu or --node" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--node", "0", "--dram-budget", "lots")
    assert r.exit_code == 2 and "'--dram-budget': 'lots': expected a size" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--node", "0", "--seq-len", "4096")
    assert r.exit_code == 2 and "need --layers, --hidden, --seq-len" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--gpu", "9")
    assert r.exit_code == 2 and "--gpu 9: this root has 4 GPU(s), GPU0-GPU3 of inspect" in r.stderr
    r = cli("--root", HM, "plan-memory", "--params", "7e9", "--gpu", "1", "--node", "0")
    assert r.exit_code == 2


def test_probe_figures_set_the_cxl_shares(cli, tmp_path):
    from tests.placement.test_targets import PROBE_DOC

    f = tmp_path / "probe.json"
    f.write_text(json.dumps(PROBE_DOC))
    r = cli("--root", HM, "plan-memory", "--params", "1e9", "--node", "0", "--probe", str(f), "--cxl-nodes", "2,3",
            "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(n["node"], n["share"]) for n in doc["cxl"]["nodes"]] == [(2, 0.75), (3, 0.25)]
    assert "by measured bandwidth node 2 24000 MB/s, node 3 8000 MB/s" in doc["cxl"]["budget_source"]
    f.write_text("{}")
    r = cli("--root", HM, "plan-memory", "--params", "1e9", "--node", "0", "--probe", str(f))
    assert r.exit_code == 3 and "numatune.probe/1" in r.stderr


def test_an_impossible_node_is_exit_2_and_numbers_are_quoted_as_written(cli):
    """Impossible requests are usage errors everywhere (launch --node 9 is 2 too); a number is quoted back as the
    user typed it, not as Python printed the float it became (1e400 is inf)."""
    res = cli("--root", HM, "plan-memory", "--params", "7e9", "--node", "9")
    assert res.exit_code == 2 and "--node 9: node 9 does not exist (nodes: 0,1,2,3)" in res.stderr, res.stderr
    for text in ("1e400", "-5", "nan"):
        res = cli("--root", HM, "plan-memory", "--params", text)
        assert res.exit_code == 2 and f"'--params': '{text}'" in res.stderr and "inf" not in res.stderr, res.stderr
