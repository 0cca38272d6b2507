"""Late binding on a real two-node kernel (issue 26): audit names the cause and the fix (NT406).

late_binder.py starts on node 0 (numactl --cpunodebind=0, no memory policy), starts a helper thread,
touches memory, then binds its main thread to node 1. Judged against what the kernel says: the helper's
mask from sched_getaffinity and the pages from numa_maps, both read by the workload itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import READY_TIMEOUT, CheckFailed, numactl_hardware, numatune_json, wait_for

BINDER = Path(__file__).with_name("late_binder.py")
MIB = 64


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
