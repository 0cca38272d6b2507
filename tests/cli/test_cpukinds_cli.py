"""CPU kinds through the CLI on the real hybrid trees: inspect, launch, irq, diff, fleet."""

from __future__ import annotations

import json

import pytest

from tests.conftest import fixture_root

GB10 = str(fixture_root("nvidia-dgx-gb10"))


def test_inspect_names_both_gb10_kinds(cli):
    out = cli("--root", GB10, "inspect").stdout
    assert "CPU: 10x Cortex-X925 + 10x Cortex-A725 [aarch64]" in out
    assert "#0 performance Cortex-X925: 10 CPU(s) 5-9,15-19, part 0x41:0xd85, capacity 997-1024, max 3900 MHz" in out
    assert "#1 efficiency  Cortex-A725: 10 CPU(s) 0-4,10-14, part 0x41:0xd87, capacity 718-731, max 2808 MHz" in out
    assert "NT020" in out


def test_inspect_json_and_prometheus_carry_the_kinds(cli):
    doc = json.loads(cli("--root", GB10, "inspect", "--json").stdout)
    assert doc["schema"] == "numatune.inspect/4"
    assert [(k["name"], k["role"], len(k["cpus"])) for k in doc["cpu_kinds"]["kinds"]] == [
        ("Cortex-X925", "performance", 10), ("Cortex-A725", "efficiency", 10)]
    assert doc["cpu_kinds"]["grouped_by"] == ["MIDR"] and doc["cpu_kinds"]["ranked_by"] == ["cpu_capacity"]
    prom = cli("--root", GB10, "inspect", "--format", "prometheus").stdout
    assert 'numatune_cpu_kind_cpus{rank="0",role="performance",name="Cortex-X925",part="0x41:0xd85"} 10' in prom
    assert 'numatune_cpu_kind_max_frequency_hertz{rank="1",part="0x41:0xd87"} 2808000000' in prom


def test_symmetric_inspect_text_has_no_kind_lines(cli):
    out = cli("--root", str(fixture_root("128arm-2pa2n8cluster4co")), "inspect").stdout
    assert "CPU kinds" not in out and "CPU: ARM implementer 0x48 part 0xd01" in out


def test_launch_dry_run_and_json_say_which_kind(cli):
    out = cli("--root", GB10, "launch", "--node", "0", "--cpu-bind", "exclusive", "--dry-run", "--", "x").stdout
    assert "cpu kind: 10 Cortex-X925 (performance) CPU(s) 5-9,15-19" in out
    assert "--physcpubind=5-9,15-19" in out
    doc = json.loads(cli("--root", GB10, "launch", "--node", "0", "--cpu-bind", "exclusive", "--cpu-kind", "efficiency",
                         "--json", "--", "x").stdout)
    assert doc["cpu_kinds"] == [{"rank": 1, "role": "efficiency", "name": "Cortex-A725",
                                 "cpus": [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]}]


def test_launch_bad_cpu_kind_is_a_usage_error(cli):
    r = cli("--root", GB10, "launch", "--node", "0", "--cpu-kind", "big", "--dry-run", "--", "x")
    assert r.exit_code == 2 and "Traceback" not in r.stderr and "'big' is not one of" in r.stderr


def test_emitted_wrapper_keeps_cpu_kind(cli, tmp_path):
    wrap = tmp_path / "w.sh"
    assert cli("launch", "--emit", str(wrap), "--node", "0", "--cpu-kind", "efficiency").exit_code == 0
    assert "'--cpu-kind' 'efficiency'" in wrap.read_text()


@pytest.mark.parametrize("kind", ["efficiency", "any"])
def test_irq_plan_accepts_irq_cpu_kind(cli, kind):
    r = cli("--root", GB10, "irq", "plan", "--ranks-per-node", "2", "--irq-cpu-kind", kind, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["rank_cpus"] == {"0": "5-9", "1": "15-19"}
    free = doc["free_cpus_by_node"]["0"]
    assert free == "0-4,10-14"


def test_diff_and_fleet_tell_hybrid_from_symmetric(cli, tmp_path):
    doc = json.loads(cli("--root", GB10, "inspect", "--json").stdout)
    flat = json.loads(json.dumps(doc))
    flat["cpu_kinds"]["kinds"] = [{**doc["cpu_kinds"]["kinds"][0], "cpus": list(range(20)),
                                   "role": "performance", "rank": 0}]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc))
    b.write_text(json.dumps(flat))
    out = cli("diff", str(a), str(b)).stdout
    assert "cpu kinds" in out and "10 Cortex-X925 (5-9,15-19) > 10 Cortex-A725 (0-4,10-14)" in out
    old = json.loads(json.dumps(doc))
    old["schema"] = "numatune.inspect/1"
    del old["cpu_kinds"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    r = cli("diff", str(tmp_path / "old.json"), str(b))
    assert r.exit_code == 0, r.stderr  # a report of the previous schema still compares


def test_snapshot_of_gb10_keeps_the_kinds(cli, tmp_path):
    """snapshot records what the kinds reader reads (capacity, cpufreq, MIDR): the replay has the same kinds."""
    out = tmp_path / "gb10.tar.gz"
    assert cli("--root", str(fixture_root("nvidia-dgx-gb10", archive=True)), "snapshot", "-o", str(out)).exit_code == 0
    a = json.loads(cli("--root", GB10, "inspect", "--json").stdout)["cpu_kinds"]
    b = json.loads(cli("--root", str(out), "inspect", "--json").stdout)["cpu_kinds"]
    assert a == b and len(a["kinds"]) == 2 and a["kinds"][0]["max_mhz"] == [3900]
