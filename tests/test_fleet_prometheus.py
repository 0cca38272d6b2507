"""Prometheus end to end: numatune's textfiles -> real node_exporters -> a real Prometheus -> the shipped rules.

The machines are fixture trees (each listed in fixtures/README.md); their textfiles are written by the shipped
systemd unit's own command line (examples/prometheus/numatune-textfile.service's ExecStart, read as systemd reads
it), run under each tree as its root. Two are hand-made variants, labelled as such below: a CXL machine whose
tier files are edited so its CXL node sits in DRAM's tier, and a training rank (LOCAL_RANK in its environment)
with half its memory on the far node, added to a real two-socket tree (the fixtures hold no process trees).
Each machine's scrape target carries a site label (`cluster`), which every alert must keep.

- `promtool check rules` and `promtool test rules` on examples/prometheus/numatune-rules.yml, the test's input
  series being the textfiles' samples and its expected alerts computed here from the same samples;
- one node_exporter (textfile collector only) per machine and one Prometheus scraping them every second with
  the shipped rules: a PromQL query over the HTTP API answers which machine has which finding, and the GPU
  alert fires on the misplaced-GPU machine and not on the clean GPU machine.

They skip, naming what is missing, when Debian's prometheus / prometheus-node-exporter are not installed
(scripts/test.sh installs them), except under CI=true, where a missing engine fails; once they run, any
disagreement fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import engine_missing, fixture_copy, fixture_root, tool_path

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "examples" / "prometheus" / "numatune-rules.yml"
DASHBOARD = REPO / "examples" / "prometheus" / "numatune-dashboard.json"
UNITS = REPO / "examples" / "prometheus"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
BIN = tool_path()  # the environment's `numatune` (beside its python, or run by it)
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"

#: instance name -> (fixture, what numatune writes there)
MACHINES = {
    "gpu-misplaced": "handmade-launch-2s4gpu-cxl",  # hand-made fixture (fixtures/README.md): GPUs without a local NIC
    "gpu-clean": "h100-vm-1gpu",
    "two-socket": "vm-two-socket",  # inspect + irq: its NVMe's IRQs fire off node 1
    "cxl": "vm-cxl",  # the CXL node in its own lower tier
    "cxl-top-tier": "vm-cxl",  # hand-made variant: tier files edited, the CXL node in DRAM's tier
    "broken-srat": "8em64t-2s2ca2c-buggynuma",  # an error finding (NT008)
    "trainer": "intel-xeon-L5640-2node",  # + a hand-made process with half its memory on the far node
}
#: the site label each machine's scrape target carries (what Alertmanager routes on)
CLUSTER = {name: "east" if i % 2 else "west" for i, name in enumerate(MACHINES)}


def unit_script(directory: Path | str = TEXTFILE_DIR) -> list[str]:
    """The textfile service's ExecStart as systemd runs it: split as systemd splits it, `$$` and `%%` unescaped,
    with the collector directory swapped for `directory`. A `${VAR}`, lone `$VAR` word or other `%` specifier
    (which systemd would substitute) fails here rather than run differently."""
    text = (UNITS / "numatune-textfile.service").read_text()
    lines = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    assert len(lines) == 1, lines
    argv = []
    for word in shlex.split(lines[0][len("ExecStart="):]):
        assert "${" not in word.replace("$$", "") and not re.fullmatch(r"\$\w+", word), word
        assert not re.search(r"%[^%]", word.replace("%%", "")), word
        argv.append(word.replace("$$", "$").replace("%%", "%"))
    assert argv[0] == "/bin/sh" and argv[1] == "-c" and TEXTFILE_DIR in argv[2], argv
    return [*argv[:2], argv[2].replace(TEXTFILE_DIR, str(directory)), *argv[3:]]


def run_unit(root: Path | str, directory: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """The shipped unit's command, with numatune reading `root` (NUMATUNE_ROOT) and writing into `directory`."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "NUMATUNE_ROOT": str(root),
           "NUMATUNE_PCI_IDS": "", "NO_COLOR": "1"}
    return subprocess.run(unit_script(directory), capture_output=True, text=True, timeout=300, env=env, **kw)


def _trainer_tree(dest: Path) -> Path:
    """Hand-made rank 4242 on a real two-socket tree: threads on node 0, half its anonymous memory on node 1."""
    root = fixture_copy("intel-xeon-L5640-2node", dest)
    pid = root / "proc" / "4242"
    (pid / "task" / "4242").mkdir(parents=True)
    stat = "4242 (python) S 1 " + " ".join(["0"] * 33) + " 0 " + " ".join(["0"] * 10)
    for d in (pid, pid / "task" / "4242"):
        (d / "stat").write_text(stat + "\n")
        (d / "status").write_text("Name:\tpython\nPPid:\t1\nCpus_allowed_list:\t0-23\nMems_allowed_list:\t0-1\n")
    (pid / "cmdline").write_text("python\x00train.py\x00")
    (pid / "environ").write_text("LOCAL_RANK=0\x00")
    (pid / "numa_maps").write_text("7f0000000000 default anon=2000 dirty=2000 N0=1000 N1=1000 kernelpagesize_kB=4\n")
    return root


def _cxl_top_tier_tree(dest: Path) -> Path:
    """Hand-made variant of vm-cxl: its CXL node 3 moved into DRAM's tier (what firmware without HMAT/CDAT gives)."""
    root = fixture_copy("vm-cxl", dest)
    tiers = root / "sys" / "devices" / "virtual" / "memory_tiering"
    (tiers / "memory_tier4" / "nodelist").write_text("0-1,3\n")
    (tiers / "memory_tier22" / "nodelist").write_text("2\n")
    return root


@pytest.fixture(scope="module")
def textfiles(tmp_path_factory) -> dict[str, Path]:
    """instance -> its textfile directory, written by the shipped unit's command (inspect, irq, audit --ranks)."""
    base = tmp_path_factory.mktemp("textfiles")
    out = {}
    for name, fixture in MACHINES.items():
        if name == "trainer":
            root = _trainer_tree(base / "roots" / name)
        elif name == "cxl-top-tier":
            root = _cxl_top_tier_tree(base / "roots" / name)
        else:
            root = fixture_root(fixture)
        d = base / name
        d.mkdir()
        res = run_unit(root, d)
        assert res.returncode == 0, (name, res.stderr)
        assert sorted(p.name for p in d.iterdir()) == [f"numatune_{c}.prom" for c in ("audit", "inspect", "irq")]
        out[name] = d
    return out


def _samples(textfiles: dict[str, Path]) -> list[tuple[str, dict[str, str], float]]:
    """(metric, labels with the target's: instance, job and cluster, value) of every sample numatune wrote."""
    out = []
    for name, d in textfiles.items():
        for f in sorted(d.glob("*.prom")):
            for fam in text_string_to_metric_families(f.read_text()):
                for s in fam.samples:
                    out.append((s.name, {**s.labels, **_target(name)}, s.value))
    return out


def _target(name: str) -> dict[str, str]:
    """The labels Prometheus gives every series scraped from machine `name`'s node_exporter."""
    return {"instance": name, "job": "numatune", "cluster": CLUSTER[name]}


def _findings(textfiles: dict[str, Path]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {name: set() for name in textfiles}
    for metric, labels, _ in _samples(textfiles):
        if metric == "numatune_finding":
            found[labels["instance"]].add((labels["code"], labels["severity"]))
    return found


def test_the_machines_have_the_findings_the_alerts_are_about(textfiles):
    """The inputs themselves: numatune finds what the alerts below are tested on (so the tests can fail)."""
    codes = {name: {c for c, _ in f} for name, f in _findings(textfiles).items()}
    assert "NT002" in codes["gpu-misplaced"] and "NT002" not in codes["gpu-clean"]
    assert "NT003" in codes["cxl-top-tier"] and "NT003" not in codes["cxl"]
    assert "NT201" in codes["two-socket"] and "NT008" in codes["broken-srat"]
    audit = (textfiles["trainer"] / "numatune_audit.prom").read_text()
    assert 'numatune_process_remote_ratio{pid="4242",rank="0",comm="python",role="rank"} 0.5' in audit
    ranks = {"trainer": 1, "gpu-clean": 1}  # h100-vm-1gpu was captured with a rank running (pid 1248, LOCAL_RANK=0)
    for name in MACHINES:  # the unit audits every machine's ranks, none running being an empty report
        text = (textfiles[name] / "numatune_audit.prom").read_text()
        assert f"numatune_audit_processes {ranks.get(name, 0)}\n" in text, name
    clean = (textfiles["gpu-clean"] / "numatune_audit.prom").read_text()
    assert 'numatune_process_remote_ratio{pid="1248",rank="0"' in clean


# -- promtool ------------------------------------------------------------------------------------------------------


def _need(*tools: tuple[str | None, str]) -> None:
    missing = [name for path, name in tools if path is None]
    if missing:
        engine_missing(f"{', '.join(missing)} not installed (Debian: prometheus, prometheus-node-exporter; "
                       "scripts/test.sh installs them)")


def test_promtool_check_rules():
    _need((PROMTOOL, "promtool"))
    res = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def _series(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def expected_alerts(textfiles: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """What each shipped alert must say for these machines, computed here from the samples (not by PromQL): its
    labels (every label of the series it is about, the target's included, less the ones numatune's rules drop:
    `command` of a finding, `name` of a device), plus its annotations under "annotations" (the rules' templates,
    rendered by hand)."""
    samples = _samples(textfiles)
    alerts: dict[str, list[dict[str, Any]]] = {}

    def finding(lab: dict[str, str], severity: str) -> dict[str, str]:
        return {**{k: v for k, v in lab.items() if k != "command"}, "severity": severity}

    gpu = [lab for m, lab, _ in samples if m == "numatune_finding" and lab["code"] in ("NT002", "NT018")]
    alerts["NumatuneGpuNicRemote"] = [
        {**finding(lab, "warning"), "annotations": {
            "summary": f"GPU {lab['subject']} on {lab['instance']} has no NIC close to it ({lab['code']})",
            "description": "Put a NIC on each GPU's socket, or have each rank use the NIC on its node (NCCL_IB_HCA)."}}
        for lab in gpu]
    err = [lab for m, lab, _ in samples if m == "numatune_finding" and lab["severity"] == "error"]
    alerts["NumatuneFindingError"] = [
        {**finding(lab, "critical"), "annotations": {
            "summary": f"numatune {lab['code']} (error) on {lab['instance']}: {lab['subject']}",
            "description": f"Run `numatune check` on {lab['instance']} for the message and the fix."}}
        for lab in err]
    cxl = []
    for name in textfiles:
        tier = {lab["node"]: v for m, lab, v in samples if m == "numatune_node_memory_tier" and lab["instance"] == name}
        cpus = {lab["node"]: (lab["kind"], v) for m, lab, v in samples
                if m == "numatune_node_cpus" and lab["instance"] == name}
        dram = [tier[n] for n, (_, c) in cpus.items() if c > 0 and n in tier]
        for n, (kind, c) in sorted(cpus.items()):
            if dram and c == 0 and kind in ("cxl", "pmem", "unknown") and tier.get(n) == min(dram):
                cxl.append({**_target(name), "severity": "warning", "node": n, "annotations": {
                    "summary": f"CPU-less node {n} on {name} sits in DRAM's memory tier {tier[n]:g}",
                    "description": "The kernel neither demotes to it nor promotes from it (NT003): publish HMAT/CDAT"
                                   " or use kmem."}})
    alerts["NumatuneCxlInDramTier"] = cxl
    irqs: dict[tuple[tuple[str, str], ...], float] = {}
    for m, lab, v in samples:
        if m == "numatune_device_irqs_remote":
            key = tuple(sorted((k, x) for k, x in lab.items() if k != "name"))
            irqs[key] = irqs.get(key, 0) + v
    alerts["NumatuneIrqsOffNode"] = [
        {**dict(key), "severity": "warning", "annotations": {
            "summary": f"{v:g} IRQs of {dict(key)['kind']} {dict(key)['device']} on {dict(key)['instance']} are"
                       f" routed off node {dict(key)['node']}",
            "description": f"Run `numatune irq plan` and `numatune irq apply` on {dict(key)['instance']}"
                           " (or stop irqbalance)."}}
        for key, v in sorted(irqs.items()) if v > 0]
    alerts["NumatuneRemoteMemory"] = [
        {**lab, "severity": "warning", "annotations": {
            "summary": f"Process {lab['pid']} ({lab['comm']}) on {lab['instance']} has {100 * v:g}% of its memory"
                       " on remote nodes",
            "description": f"`numatune audit {lab['pid']}` on {lab['instance']} names the fix (numatune launch,"
                           " migratepages)."}}
        for m, lab, v in samples if m == "numatune_process_remote_ratio" and v > 0.2]
    return alerts


def test_expected_alerts_name_the_right_machines(textfiles):
    alerts = expected_alerts(textfiles)
    machines = {name: {a["instance"] for a in rows} for name, rows in alerts.items()}
    assert all(a["cluster"] == CLUSTER[a["instance"]] and a["job"] == "numatune" for rows in alerts.values()
               for a in rows)
    assert machines == {
        "NumatuneGpuNicRemote": {"gpu-misplaced"},
        "NumatuneFindingError": {"broken-srat"},
        "NumatuneCxlInDramTier": {"cxl-top-tier"},
        "NumatuneIrqsOffNode": {"two-socket"},
        "NumatuneRemoteMemory": {"trainer"},
    }


def test_promtool_test_rules(textfiles, tmp_path):
    """`promtool test rules`: the textfiles' samples as input series, every alert and recording rule checked."""
    _need((PROMTOOL, "promtool"))
    samples = _samples(textfiles)
    series = [{"series": _series(m, lab), "values": f"{v:g}+0x30"} for m, lab, v in samples if v == v]
    findings = _findings(textfiles)
    per_code: dict[tuple[str, str], int] = {}
    for found in findings.values():
        for key in found:
            per_code[key] = per_code.get(key, 0) + 1
    alerts = expected_alerts(textfiles)
    remote: dict[str, float] = {}  # the largest remote share of a rank, per machine
    for m, lab, v in samples:
        if m == "numatune_process_remote_ratio":
            remote[lab["instance"]] = max(v, remote.get(lab["instance"], v))
    assert remote["trainer"] == 0.5
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "15m", "alertname": name,
                 "exp_alerts": [{"exp_labels": {k: v for k, v in row.items() if k != "annotations"},
                                 "exp_annotations": row["annotations"]} for row in rows]}
                for name, rows in alerts.items()
            ] + [{"eval_time": "5m", "alertname": "NumatuneRemoteMemory", "exp_alerts": []}],  # `for: 10m`
            "promql_expr_test": [
                {"expr": "code_severity:numatune_finding:machines", "eval_time": "15m",
                 "exp_samples": [{"labels": _series("code_severity:numatune_finding:machines",
                                                    {"code": c, "severity": s}), "value": n}
                                 for (c, s), n in sorted(per_code.items())]},
                {"expr": 'instance:numatune_process_remote_ratio:max', "eval_time": "15m",
                 "exp_samples": [{"labels": _series("instance:numatune_process_remote_ratio:max", {"instance": i}),
                                  "value": v} for i, v in sorted(remote.items())]},
            ],
        }],
    }
    old_file = {"file": "/var/lib/prometheus/node-exporter/numatune_inspect.prom", "job": "numatune"}
    test["tests"].append({  # the textfile timer stopped on "stopped" 4 h ago; "running" rewrites it every minute
        "interval": "1m",
        "input_series": [
            {"series": _series("node_textfile_mtime_seconds", {**old_file, "instance": "stopped"}),
             "values": "0+0x300"},
            {"series": _series("node_textfile_mtime_seconds", {**old_file, "instance": "running"}),
             "values": "0+60x300"}],
        "alert_rule_test": [{"eval_time": "4h", "alertname": "NumatuneTextfileStale", "exp_alerts": [{
            "exp_labels": {**old_file, "instance": "stopped", "severity": "info"},
            "exp_annotations": {"summary": f"{old_file['file']} on stopped was last written 4h 0m 0s ago",
                                "description": "The numatune textfile timer stopped refreshing it."}}]},
            {"eval_time": "2h", "alertname": "NumatuneTextfileStale", "exp_alerts": []}],
    })
    path = tmp_path / "numatune-rules.test.yml"
    path.write_text(json.dumps(test, indent=1))  # JSON is YAML
    res = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    assert "SUCCESS" in res.stdout


# -- the real pipeline ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def _query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def _wait(what: str, predicate, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < end:
        try:
            if predicate():
                return
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f} s ({last})")


def test_prometheus_scrapes_node_exporters_and_alerts(textfiles, tmp_path):
    _need((NODE_EXPORTER, "prometheus-node-exporter"), (PROMETHEUS, "prometheus"))
    t0 = time.monotonic()
    ports = {name: _free_port() for name in textfiles}
    prom_port = _free_port()
    targets = [{"targets": [f"127.0.0.1:{ports[name]}"], "labels": {"instance": name, "cluster": CLUSTER[name]}}
               for name in textfiles]
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(RULES)],
              "scrape_configs": [{"job_name": "numatune", "static_configs": targets}]}
    (tmp_path / "prometheus.yml").write_text(json.dumps(config, indent=1))
    with _processes() as procs:
        for name, d in textfiles.items():
            procs.append(subprocess.Popen(
                [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{ports[name]}", "--collector.disable-defaults",
                 "--collector.textfile", f"--collector.textfile.directory={d}", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w")))
        want = _findings(textfiles)

        def scraped() -> bool:
            assert all(p.poll() is None for p in procs), (tmp_path / "prometheus.log").read_text()[-2000:]
            up = _query(prom_port, 'up{job="numatune"} == 1')
            return len(up) == len(textfiles)

        _wait("every node_exporter scraped", scraped)
        # node_exporter read every textfile (a HELP that differs between two files would be a scrape error)
        errors = _query(prom_port, "node_textfile_scrape_error")
        assert {r["metric"]["instance"]: r["value"][1] for r in errors} == {n: "0" for n in textfiles}

        # "which machines have which finding", over the HTTP API
        rows = _query(prom_port, "count by (instance, code, severity) (numatune_finding)")
        got: dict[str, set[tuple[str, str]]] = {name: set() for name in textfiles}
        for r in rows:
            got[r["metric"]["instance"]].add((r["metric"]["code"], r["metric"]["severity"]))
        assert got == want
        nt002 = {r["metric"]["instance"] for r in _query(prom_port, 'numatune_finding{code="NT002"}')}
        assert nt002 == {"gpu-misplaced"}

        def firing() -> list[dict]:
            return _query(prom_port, 'ALERTS{alertstate="firing"}')

        # Alerts on recording rules fire one evaluation after the recording group has run: wait for each.
        def firing_on(alert: str) -> set[str]:
            return {a["metric"]["instance"] for a in firing() if a["metric"]["alertname"] == alert}

        for alert, machine in (("NumatuneGpuNicRemote", "gpu-misplaced"), ("NumatuneCxlInDramTier", "cxl-top-tier"),
                               ("NumatuneIrqsOffNode", "two-socket"), ("NumatuneFindingError", "broken-srat")):
            _wait(f"{alert} fires on {machine}", lambda a=alert, m=machine: m in firing_on(a))
            assert firing_on(alert) == {machine}, alert  # and never on another machine (gpu-clean, cxl)
        # Each alert carries exactly the labels expected, the target's `cluster` included (Alertmanager routes
        # on it); the remote-memory alert (for: 10m) is pending on the trainer's rank, from the unit's audit.
        expected = expected_alerts(textfiles)
        for alert, state in [(a, "firing") for a in expected if a != "NumatuneRemoteMemory"] + [
                ("NumatuneRemoteMemory", "pending")]:
            def labels(a: str = alert, st: str = state) -> list[dict[str, str]]:
                rows = _query(prom_port, f'ALERTS{{alertname="{a}", alertstate="{st}"}}')
                return sorted((_alert_labels(r["metric"]) for r in rows), key=_canon)

            want = sorted(({k: v for k, v in row.items() if k != "annotations"} for row in expected[alert]),
                          key=_canon)
            _wait(f"{alert} {state} with labels {want}", lambda f=labels, w=want: f() == w, timeout=30)
            assert want and all(x["cluster"] == CLUSTER[x["instance"]] for x in want)
        stale = [a for a in firing() if a["metric"]["alertname"] == "NumatuneTextfileStale"]
        assert stale == []
        # every dashboard panel shows data for these machines (the recording rules have run by now)
        for expr in _dashboard_exprs():
            _wait(f"dashboard query {expr!r} returns data", lambda e=expr: bool(_query(prom_port, e)), timeout=30)
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        unhealthy = [(rule["name"], rule.get("lastError")) for g in groups for rule in g["rules"]
                     if rule["health"] != "ok"]
        assert not unhealthy
    assert time.monotonic() - t0 < 90


def _canon(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True)


def _alert_labels(metric: dict[str, str]) -> dict[str, str]:
    """An ALERTS series' labels less the ones Prometheus adds (its name, alertname, alertstate)."""
    return {k: v for k, v in metric.items() if k not in ("__name__", "alertname", "alertstate")}


def _dashboard_exprs() -> list[str]:
    """The PromQL of every panel, with the dashboard's `$instance` variable set to "All"."""
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"].replace("$instance", ".*") for p in board["panels"] for t in p.get("targets", [])]


def test_dashboard_queries_parse():
    """Every panel query of the Grafana dashboard is PromQL Prometheus accepts (promtool's parser, via a rule)."""
    _need((PROMTOOL, "promtool"))
    exprs = _dashboard_exprs()
    assert len(exprs) >= 5
    metrics = {m for e in exprs for m in ("numatune_finding", "instance_code_severity:numatune_finding:count",
                                          "instance:numatune_process_remote_ratio:max",
                                          "instance_device:numatune_device_irqs_remote:sum",
                                          "instance_node:numatune_cxl_in_dram_tier:tier") if m in e}
    assert len(metrics) >= 4
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"numatune-dashboard-{os.getpid()}.rules.yml"
    path.write_text(json.dumps(rules))
    try:
        res = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    finally:
        path.unlink()
    assert res.returncode == 0, res.stdout + res.stderr


def test_systemd_units_verify(tmp_path):
    """The textfile timer and service pass `systemd-analyze verify` (which checks the ExecStart binary exists)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed (Debian: systemd)")
    for unit in ("numatune-textfile.service", "numatune-textfile.timer"):
        shutil.copy(UNITS / unit, tmp_path / unit)
    # verify runs `man` for each Documentation= page: the project's own pages, as they would be installed
    (tmp_path / "man" / "man1").mkdir(parents=True)
    for page in (REPO / "man").glob("*.1"):
        (tmp_path / "man" / "man1" / page.name).symlink_to(page)
    res = subprocess.run([analyze, "verify", str(tmp_path / "numatune-textfile.timer"),
                          str(tmp_path / "numatune-textfile.service")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice",
                              "MANPATH": str(tmp_path / "man")})
    problems = [x for x in (res.stdout + res.stderr).splitlines()
                if "numatune-textfile" in x and "Failed to" not in x or "is not executable" in x]
    assert res.returncode == 0 and not problems, res.stdout + res.stderr


def test_textfile_unit_writes_atomically(tmp_path):
    """The service's ExecStart, run as it is (root and collector directory swapped for test ones): each textfile is
    replaced by rename, never left half-written, and a failing run keeps the last good one."""
    res = run_unit(fixture_root("vm-two-socket"), tmp_path)
    assert res.returncode == 0, res.stderr
    names = ["numatune_audit.prom", "numatune_inspect.prom", "numatune_irq.prom"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert "numatune_numa_nodes 2" in (tmp_path / "numatune_inspect.prom").read_text()
    assert 'numatune_device_irqs_remote{device="0000:42:00.0"' in (tmp_path / "numatune_irq.prom").read_text()
    assert "numatune_audit_processes 0\n" in (tmp_path / "numatune_audit.prom").read_text()  # no rank running
    # a failing run leaves the last good files and no temporary one, and the unit fails
    before = {n: (tmp_path / n).read_text() for n in names}
    res = run_unit(tmp_path / "missing", tmp_path)
    assert res.returncode != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert {n: (tmp_path / n).read_text() for n in names} == before


def test_unit_script_reads_exec_start_as_systemd_does():
    """`$$` is systemd's `$` (the temporary file is named after the shell's PID), `%%` its `%`."""
    script = unit_script("/x")[2]
    assert '"$f.$$"' in script and "$$$$" not in script and "/var/lib" not in script
    assert "audit --ranks" not in script and "a=--ranks" in script
