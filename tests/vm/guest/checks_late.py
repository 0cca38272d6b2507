"""Late binding on a real two-node kernel (issue 26): audit names the cause and the fix (NT406); and
numatune.bind() (issue 36) undoes it from inside the process.

late_binder.py starts on node 0 (numactl --cpunodebind=0, no memory policy), starts a helper thread,
touches memory, then binds its main thread to node 1. Judged against what the kernel says: the helper's
mask from sched_getaffinity and the pages from numa_maps, both read by the workload itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import READY_TIMEOUT, REPO, CheckFailed, numactl_hardware, numatune_json, wait_for

BINDER = Path(__file__).with_name("late_binder.py")
INSIDE = Path(__file__).with_name("inside_binder.py")
MIB = 64
THREADS = 4


@check("two-socket")
def audit_names_late_binding(ctx: Context) -> dict[str, Any]:
    """A process that binds itself after starting a thread and touching memory: audit says NT406 and the fix."""
    hw = numactl_hardware()
    node0, node1 = hw.cpus[0], hw.cpus[1]
    ready = ctx.out / "late-binder.json"
    ready.unlink(missing_ok=True)
    to = ",".join(map(str, node1))
    proc = subprocess.Popen(["numactl", "--cpunodebind=0", sys.executable, str(BINDER), str(MIB), to, str(ready)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not wait_for(lambda: ready.exists() or proc.poll() is not None, READY_TIMEOUT) or not ready.exists():
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else "still running"
            raise CheckFailed(f"late_binder.py never got ready: {err[-1500:]}")
        rep = json.loads(ready.read_text())
        if rep["helper_affinity"] != node0 or rep["main_affinity"] != node1:
            raise CheckFailed(f"the workload did not set up the case (masks): {rep}")
        if int(rep["bytes_by_node"].get("0", 0)) < 0.8 * MIB * 1048576:
            raise CheckFailed(f"the touched memory is not on node 0: {rep}")
        audit = numatune_json("audit", str(rep["pid"]), "--json", ok_codes=(0, 1))
        entry = next((p for p in audit.get("processes", []) if p.get("pid") == rep["pid"]), None)
        checked = numatune_json("check", "--pid", str(rep["pid"]), "--json", ok_codes=(0, 1, 2))
    finally:
        proc.kill()
        proc.wait()
    problems = []
    late = (entry or {}).get("late_binding")
    if not late:
        raise CheckFailed(f"audit found no late binding: {json.dumps(entry)[:2000]}")
    if rep["helper_tid"] not in late["threads"]:
        problems.append(f"helper thread {rep['helper_tid']} not named: {late['threads']}")
    if late["bound_nodes"] != [1] or late["bound_cpus"] != node1 or late["old_cpus"] != node0:
        problems.append(f"binding/old CPUs wrong: {late}")
    if late["remote_nodes"] != [0] or late["remote_bytes"] < 0.8 * MIB * 1048576:
        problems.append(f"first-touched memory not named: {late}")
    if not late["fix"].startswith("bind at exec: numatune launch --node 1 -- "):
        problems.append(f"fix: {late['fix']}")
    if "first-touched" not in late["cause"] or "keep the old mask" not in late["cause"]:
        problems.append(f"cause: {late['cause']}")
    codes = [f.get("code") for f in checked.get("findings", [])]
    if "NT406" not in codes:
        problems.append(f"check --pid has no NT406: {codes}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"late_binding": late, "check_codes": codes, "workload": rep}


@check("two-socket")
def bind_from_inside(ctx: Context) -> dict[str, Any]:
    """numatune.bind(node=1) in a process with 4 threads and 64 MiB touched on node 0: every thread and >= 99%
    of the pages on node 1 (its report, numa_maps and audit agree), and audit finds no late binding."""
    hw = numactl_hardware()
    node1 = hw.cpus[1]
    ready = ctx.out / "inside-binder.json"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(["numactl", "--cpunodebind=0", sys.executable, str(INSIDE), str(THREADS), str(MIB), "1",
                             str(ready)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    try:
        if not wait_for(lambda: ready.exists() or proc.poll() is not None, READY_TIMEOUT) or not ready.exists():
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else "still running"
            raise CheckFailed(f"inside_binder.py never got ready: {err[-1500:]}")
        rep = json.loads(ready.read_text())
        pid = rep["pid"]
        numa_maps = Path(f"/proc/{pid}/numa_maps").read_text()  # read from outside, after the call
        audit = numatune_json("audit", str(pid), "--mappings", "--min-size", "1M", "--json", ok_codes=(0, 1))
        entry = next((p for p in audit.get("processes", []) if p.get("pid") == pid), None)
        masks = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{pid}/task")}
    finally:
        proc.kill()
        proc.wait()
    problems = []
    size = rep["size"]
    if int(rep["before"].get("0", 0)) < 0.99 * size:
        raise CheckFailed(f"the workload did not set up the case (the buffer was not on node 0): {rep['before']}")
    if len(masks) < THREADS + 1 or any(m != node1 for m in masks.values()):
        problems.append(f"threads not all on node 1's CPUs {node1}: {masks}")
    report = rep["report"]
    start = int(rep["buffer"][0], 16)
    line = next((ln for ln in numa_maps.splitlines() if int(ln.split()[0], 16) == start), "")
    kib = int(re.search(r"kernelpagesize_kB=(\d+)", line)[1]) if "kernelpagesize_kB" in line else 4
    on1 = sum(int(c) for n, c in re.findall(r"\bN(\d+)=(\d+)", line) if n == "1") * kib * 1024
    if on1 < 0.99 * size:
        problems.append(f"numa_maps: {on1} of {size} bytes of the buffer on node 1: {line}")
    mapping = next((m for m in ((entry or {}).get("mapping_placement") or {}).get("mappings", [])
                    if int(m["start"], 16) == start), None)
    audit_on1 = (mapping or {}).get("pages_by_node", {}).get("1", 0) * (mapping or {}).get("page_size", 0)
    if audit_on1 != on1:
        problems.append(f"audit and numa_maps disagree on the buffer: audit {mapping}, numa_maps {line}")
    if (entry or {}).get("late_binding"):
        problems.append(f"audit still finds late binding: {entry['late_binding']}")
    pages = report["pages"]
    if (not report["bound"] or pages["moved"] * pages["page_size"] < 0.99 * size
            or pages["moved_from"].get("0", 0) * pages["page_size"] < 0.99 * size):
        problems.append(f"the report does not say the buffer's pages moved: {json.dumps(report)[:2000]}")
    tids = {t["tid"] for t in report["threads"] if t["error"] is None and t["after"] == _cpulist(node1)}
    if not set(rep["tids"]) | {pid} <= tids:
        problems.append(f"the report does not name every thread as bound: {report['threads']}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"moved_pages": pages["moved"], "on_target": pages["on_target"], "left": pages["left"],
            "seconds": report["seconds"], "threads": len(report["threads"]), "buffer_on_node1": on1,
            "remote_ratio": (entry or {}).get("remote_ratio"), "verdict": (entry or {}).get("verdict")}


def _cpulist(cpus: list[int]) -> str:
    """The kernel's list form (0-3,8) of sorted CPUs, as the report writes masks."""
    runs: list[list[int]] = []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
