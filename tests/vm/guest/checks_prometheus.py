"""A real node_exporter and Prometheus on the live guest's textfiles, with the shipped rules (issue 27, item 2).

numatune writes `inspect`, `irq` and `audit --ranks` textfiles from the running kernel, as the shipped systemd
unit does (the three at once: each numatune start costs 10-20 s under TCG);
Debian's prometheus-node-exporter (textfile collector only) serves them and Debian's prometheus scrapes it
every second with examples/prometheus/numatune-rules.yml. Checked over the HTTP API: the NUMA node count is
the kernel's, the findings Prometheus holds are those of the textfile, the alerts that fire are exactly the
ones the textfile calls for (error findings; devices with IRQs off their node), and every rule is healthy.
Skipped, saying why, when the binaries are not installed on the host root (a failure under CI=true).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import REPO, CheckFailed, EngineMissing, read, wait_for

WORK = Path("/tmp/numatune-prometheus")
RULES = REPO / "examples" / "prometheus" / "numatune-rules.yml"
_SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if m := _SAMPLE.match(line):
            out.append((m[1], dict(_LABEL.findall(m[2])), float(m[3])))
    return out


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise CheckFailed(f"{promql}: {doc}")
    return doc["data"]["result"]


def _get(port: int, promql: str) -> list[dict[str, Any]] | None:
    with contextlib.suppress(OSError):
        return _query(port, promql)
    return None


@check("two-socket", engines=True)
def prometheus_scrapes_the_live_textfile(ctx: Context) -> dict[str, Any]:
    """node_exporter + Prometheus + the shipped rules on numatune's live textfiles: queries and alerts agree."""
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    prometheus = shutil.which("prometheus")
    missing = [n for n, p in (("prometheus-node-exporter", exporter), ("prometheus", prometheus)) if p is None]
    if missing:
        raise EngineMissing(f"{', '.join(missing)} not installed on the host root (Debian packages; "
                            "tests/vm/setup.sh installs them)")
    t0 = time.monotonic()
    shutil.rmtree(WORK, ignore_errors=True)
    textfiles = WORK / "textfile"
    textfiles.mkdir(parents=True)
    writers = {c: subprocess.Popen([sys.executable, "-m", "numatune", c, *(["--ranks"] if c == "audit" else []),
                                    "--format", "prometheus"], cwd=REPO,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for c in ("inspect", "irq", "audit")}
    texts = {}
    for c, proc in writers.items():
        out, err = proc.communicate(timeout=240)
        if proc.returncode != 0:
            raise CheckFailed(f"numatune {c} --format prometheus exited {proc.returncode}: {err[-1000:]}")
        (textfiles / f"numatune_{c}.prom.tmp").write_text(out)
        (textfiles / f"numatune_{c}.prom.tmp").rename(textfiles / f"numatune_{c}.prom")
        texts[c] = out
    samples = _samples(texts["inspect"]) + _samples(texts["irq"])
    findings = {(lab["code"], lab["severity"], lab["subject"]) for m, lab, _ in samples if m == "numatune_finding"}
    want_alerts = {("NumatuneFindingError", code, subject) for code, sev, subject in findings if sev == "error"}
    want_alerts |= {("NumatuneIrqsOffNode", lab["device"], lab["node"]) for m, lab, v in samples
                    if m == "numatune_device_irqs_remote" and v > 0}
    textfile_s = round(time.monotonic() - t0, 1)

    ne_port, prom_port = _port(), _port()
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [str(RULES)],
              "scrape_configs": [{"job_name": "numatune",
                                  "static_configs": [{"targets": [f"127.0.0.1:{ne_port}"]}]}]}
    (WORK / "prometheus.yml").write_text(json.dumps(config))
    log = (WORK / "prometheus.log").open("w")
    procs = [
        subprocess.Popen([exporter, f"--web.listen-address=127.0.0.1:{ne_port}", "--collector.disable-defaults",
                          "--collector.textfile", f"--collector.textfile.directory={textfiles}", "--log.level=warn"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True),
        subprocess.Popen([prometheus, f"--config.file={WORK / 'prometheus.yml'}",
                          f"--storage.tsdb.path={WORK / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}",
                          "--log.level=warn"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True),
    ]
    try:
        def scraped() -> bool:
            if any(p.poll() is not None for p in procs):
                raise CheckFailed(f"node_exporter/prometheus exited: {read(WORK / 'prometheus.log', '')[-1500:]}")
            return bool(_get(prom_port, 'numatune_numa_nodes{job="numatune"}'))

        if not wait_for(scraped, timeout=120, interval=1):
            raise CheckFailed(f"Prometheus never held numatune_numa_nodes: {read(WORK / 'prometheus.log', '')[-1500:]}")
        scrape_s = round(time.monotonic() - t0 - textfile_s, 1)
        nodes = len(list(Path("/sys/devices/system/node").glob("node[0-9]*")))
        got_nodes = _query(prom_port, "numatune_numa_nodes")[0]["value"][1]
        audited = _query(prom_port, "numatune_audit_processes")  # the audit textfile is scraped too
        written = re.search(r"^numatune_audit_processes (\d+)$", texts["audit"], re.M)
        if written is None or [r["value"][1] for r in audited] != [written[1]]:
            raise CheckFailed(f"Prometheus holds numatune_audit_processes {audited}, the textfile says "
                              f"{texts['audit'][-400:]}")
        if got_nodes != str(nodes):
            raise CheckFailed(f"Prometheus says {got_nodes} NUMA nodes, the kernel has {nodes}")
        errors = _query(prom_port, "node_textfile_scrape_error")
        if [r["value"][1] for r in errors] != ["0"]:  # one textfile collector reading all three files
            raise CheckFailed(f"node_exporter could not read numatune's textfiles: {errors}")
        held = {(r["metric"]["code"], r["metric"]["severity"], r["metric"]["subject"])
                for r in _query(prom_port, "numatune_finding")}
        if held != findings:
            raise CheckFailed(f"Prometheus holds findings {sorted(held)}, the textfiles say {sorted(findings)}")

        def alerts() -> set[tuple[str, str, str]]:
            out = set()
            for a in _query(prom_port, 'ALERTS{alertstate="firing"}'):
                lab = a["metric"]
                if lab["alertname"] == "NumatuneFindingError":
                    out.add((lab["alertname"], lab["code"], lab["subject"]))
                elif lab["alertname"] == "NumatuneIrqsOffNode":
                    out.add((lab["alertname"], lab["device"], lab["node"]))
            return out

        def evaluated() -> bool:  # both rule groups have run, and the alerts are the ones wanted
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=10) as r:
                groups = json.load(r)["data"]["groups"]
            return all(not g["lastEvaluation"].startswith("0001") for g in groups) and alerts() == want_alerts

        if not wait_for(evaluated, timeout=120, interval=1):  # ends as soon as it holds: margin for a slow guest
            raise CheckFailed(f"alerts firing {sorted(alerts())}, the textfiles call for {sorted(want_alerts)}")
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=10) as r:
            rules = [rule for g in json.load(r)["data"]["groups"] for rule in g["rules"]]
        unhealthy = [(rule["name"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"]
        if unhealthy:
            raise CheckFailed(f"rules not healthy on the live textfiles: {unhealthy}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
        log.close()
    return {"numa_nodes": nodes, "findings": sorted(findings), "alerts": sorted(want_alerts), "rules": len(rules),
            "seconds": {"textfiles": textfile_s, "until_scraped": scrape_s,
                        "total": round(time.monotonic() - t0, 1)}}
