"""Checks of numatune.placement on a real kernel (issue #19): arenas, stripes, place(), the kernel's
refusals, the plan, optimizer state, ZONE_MOVABLE — judged from /proc/PID/numa_maps, not from
numatune's own report.

One workload process (placer.py) runs every scenario (a torch import costs tens of seconds in the TCG
guest) as `numactl --cpunodebind=1 --membind=0`: its threads' own policy says node 0, so an arena
that lands elsewhere proves the range policy wins. The cpuset scenario runs in a cgroup of its own.
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
from vm_guest import CheckFailed, run, wait_for

PLACER = Path(__file__).with_name("placer.py")
#: The PyTorch checks (a tensor filled by the intra-op pool, place() of a torch tensor, optimizer state, the
#: benchmark's variants) import torch, which takes about 4.5 minutes over 9p in the TCG guest: more than a
#: boot's budget. They are registered only with NUMATUNE_VM_TORCH=1 (passed into the guest by vm_runner);
#: give the boot time too, e.g. NUMATUNE_VM_TIMEOUT=1800.
TORCH = os.environ.get("NUMATUNE_VM_TORCH") == "1"
# numpy-only scenarios first, the torch ones last
SCENARIOS = ("arenas", "place_numpy", "no_rebalance", "refusals", "forked", "plan_apply", "zones",
             *(("thread_pool", "place_torch", "optimizer", "bench") if TORCH else ()))
CGROUP = "/sys/fs/cgroup/numatune-placement"
WAIT = 370  # seconds one check waits for its scenario (the batch kills a check after 400)
_WORKER: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}


def torch_check(func: Any) -> Any:
    return check("cxl")(func) if TORCH else func


def _worker(ctx: Context) -> tuple[subprocess.Popen[bytes], Path]:
    """One placer process for every scenario, started by the first check that needs it; each check then
    waits for its own scenario, so the slow torch import is paid once and under the later checks' time."""
    if id(ctx) not in _WORKER:
        out = ctx.out / "placer.json"
        out.unlink(missing_ok=True)
        log = (ctx.out / "placer.log").open("wb")
        proc = subprocess.Popen(["numactl", "--cpunodebind=1", "--membind=0", sys.executable, str(PLACER), str(out),
                                 *SCENARIOS], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        _WORKER[id(ctx)] = (proc, out)
    return _WORKER[id(ctx)]


def _scenario(ctx: Context, name: str) -> dict[str, Any]:
    proc, out = _worker(ctx)
    data: dict[str, Any] = {}

    def ready() -> bool:
        nonlocal data
        if out.exists():
            data = json.loads(out.read_text())
        return name in data or proc.poll() is not None

    wait_for(ready, WAIT, interval=1.0)
    ready()
    got = data.get(name)
    if got is None:
        log = (ctx.out / "placer.log").read_text(errors="replace")[-2000:] if (ctx.out / "placer.log").exists() else ""
        state = f"exited {proc.returncode}" if proc.poll() is not None else f"still running after {WAIT} s"
        raise CheckFailed(f"placer.py has no {name!r} result ({state}; done: {sorted(data)}):\n{log}")
    if "error" in got:
        raise CheckFailed(f"{name} raised in the guest:\n{got['error']}")
    return got


def numa_maps_pages(lines: list[str]) -> tuple[dict[int, int], set[str]]:
    """Pages per node (in 4 KiB pages) and the policies of numa_maps lines."""
    pages: dict[int, int] = {}
    policies = set()
    for line in lines:
        parts = line.split()
        policies.add(parts[1])
        kb = int(m[1]) if (m := re.search(r"kernelpagesize_kB=(\d+)", line)) else 4
        for node, n in re.findall(r"\bN(\d+)=(\d+)", line):
            pages[int(node)] = pages.get(int(node), 0) + int(n) * kb // 4
    return pages, policies


def _only_on(rec: dict[str, Any], node: int, what: str) -> dict[int, int]:
    pages, policies = numa_maps_pages(rec["numa_maps"])
    if pages != {node: rec["pages"]} or policies != {f"bind:{node}"}:
        raise CheckFailed(f"{what}: numa_maps shows {pages} with policies {policies}, want all {rec['pages']} pages "
                          f"on node {node} under bind:{node}\n{rec.get('report', '')}\n" + "\n".join(rec["numa_maps"]))
    return pages


def _ratio_ok(pages: dict[int, int], want: dict[int, float], tol: float = 0.03) -> bool:
    total = sum(pages.values())
    return total > 0 and set(pages) == set(want) and all(abs(pages[n] / total - s) <= tol for n, s in want.items())


@check("cxl")
def placement_arenas(ctx: Context) -> dict[str, Any]:
    """Arenas land on local DRAM, node 0, CXL, and striped in the asked and the HMAT proportions."""
    got = _scenario(ctx, "arenas")
    cxl = got["cxl_node"]
    problems = []
    for name, node in (("local", 1), ("node0", 0), ("cxl", cxl)):
        try:
            _only_on(got[name], node, f"arena {name}")
        except CheckFailed as exc:
            problems.append(str(exc))
    seen = {}
    for name, want in (("stripe_given", {2: 0.75, cxl: 0.25}), ("stripe_hmat", {0: 2 / 3, 2: 1 / 3})):
        pages, policies = numa_maps_pages(got[name]["numa_maps"])
        seen[name] = {"pages": pages, "mappings": len(got[name]["numa_maps"]), "source": got[name]["source"]}
        if not _ratio_ok(pages, want) or sum(pages.values()) != got[name]["pages"]:
            problems.append(f"{name}: numa_maps {pages} over {got[name]['pages']} pages, want shares {want}")
        if policies != {f"bind:{n}" for n in want}:
            problems.append(f"{name}: policies {policies}")
    hmat = "HMAT read bandwidth from node 0: node 0 40960 MB/s, node 2 20480 MB/s"  # the caller's row
    if not got["stripe_hmat"]["source"].startswith(hmat):
        problems.append(f"stripe_hmat shares not from HMAT: {got['stripe_hmat']['source']}")
    names = ("local", "node0", "cxl", "stripe_given", "stripe_hmat")
    if not all(got[n]["ok"] for n in names):
        problems.append("numatune's own verification disagreed: " + "; ".join(got[n]["report"] for n in names))
    if problems:
        raise CheckFailed("\n".join(problems))
    return seen


def _placed(rec: dict[str, Any], what: str) -> dict[str, Any]:
    before, _ = numa_maps_pages(rec["before"])  # the mapping may hold neighbours too: only nodes are judged
    problems = []
    if set(before) != {0}:
        problems.append(f"{what}: before placing, numa_maps {before} (want node 0 only)")
    try:
        _only_on(rec, rec["node"], f"{what} after place()")
    except CheckFailed as exc:
        problems.append(str(exc))
    if not rec["intact"] or rec["moved"] != rec["pages"]:
        problems.append(f"{what}: intact {rec['intact']}, moved {rec['moved']} of {rec['pages']}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"report": rec["report"], "before": before}


@check("cxl")
def placement_place_numpy(ctx: Context) -> dict[str, Any]:
    """place() moves a numpy array (node 0 -> 2) with its contents intact."""
    return _placed(_scenario(ctx, "place_numpy"), "numpy array")


@check("cxl")
def placement_no_rebalance(ctx: Context) -> dict[str, Any]:
    """A bind over {0,2} moves nothing already on 0 (said so); a stripe over 0,2 then splits it."""
    got = _scenario(ctx, "no_rebalance")
    first, _ = numa_maps_pages(got["bind_set"]["numa_maps"])
    problems = []
    if first != {0: got["bind_set"]["pages"]} or got["bind_set"]["moved"] != 0:
        problems.append(f"bind over 0,2 changed something: {first}, moved {got['bind_set']['moved']}")
    if not any("does not rebalance" in n for n in got["bind_set"]["notes"]):
        problems.append(f"the no-rebalance rule was not reported: {got['bind_set']['notes']}")
    second, _ = numa_maps_pages(got["stripe"]["numa_maps"])
    if not _ratio_ok(second, {0: 0.5, 2: 0.5}):
        problems.append(f"stripe 0,2 after the bind: numa_maps {second}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"bind_set": first, "stripe": second}


@check("cxl")
def placement_refusals(ctx: Context) -> dict[str, Any]:
    """Shared edge pages of a small heap tensor and a vanished mapping are clear errors."""
    got = _scenario(ctx, "refusals")
    edge, gone = got["edge"], got["vanished"]
    if edge["raised"] != "InputError" or "edge page" not in edge["message"] or "allow_shared_pages" not in edge["hint"]:
        raise CheckFailed(f"edge pages: {edge}")
    if gone["raised"] != "InputError" or "no longer mapped" not in gone["message"]:
        raise CheckFailed(f"vanished mapping: {gone}")
    return got


@check("cxl")
def placement_forked_pages(ctx: Context) -> dict[str, Any]:
    """Pages shared with a forked worker stay (reported why) until move_shared=True (root: CAP_SYS_NICE)."""
    got = _scenario(ctx, "forked")
    first, _ = numa_maps_pages(got["without"]["numa_maps"])
    reasons = " ".join(got["without"]["unmovable"])
    if got["without"]["ok"] or "shared with other processes" not in reasons or first.get(0, 0) == 0:
        raise CheckFailed(f"without move_shared: ok {got['without']['ok']}, numa_maps {first}, reasons {reasons!r}")
    _only_on(got["move_shared"], 2, "after move_shared=True")
    return {"without": first, "unmovable": got["without"]["unmovable"]}


@check("cxl")
def placement_plan_apply(ctx: Context) -> dict[str, Any]:
    """apply(latency_first(...)): the first item in DRAM on node 1, the item straddling the budget interleaved
    page-granular over DRAM and CXL (the published allocator's rule), both verified by the kernel's numa_maps."""
    got = _scenario(ctx, "plan_apply")
    cxl = got["cxl_node"]
    lines = got["arena"]["numa_maps"]
    arena, _ = numa_maps_pages(lines)
    # [0, 3 MiB) adam state on node 1; [3, 5 MiB) the weights, 1 MiB on node 1 and 1 MiB on CXL in stripes
    per_map = [numa_maps_pages([line])[0] for line in lines]
    if arena != {1: 1024, cxl: 256} or not got["arena"]["ok"]:
        raise CheckFailed(f"plan arena: numa_maps {per_map} (want node 1: 1024 pages, node {cxl}: 256 in all)")
    if set(per_map[0]) != {1} or per_map[0][1] < 768 or len(per_map) < 3 or any(len(m) != 1 for m in per_map):
        raise CheckFailed(f"plan arena: mappings {per_map} (want adam state's 768 pages on node 1 first, then the"
                          " weights in single-node stripes)")
    if got["weights"]["where"] != {"1": 256, str(cxl): 256}:
        raise CheckFailed(f"bf16 weights: where {got['weights']['where']}")
    return {"arena": per_map, "weights": got["weights"]["where"], "parts": got["parts"]}


@check("cxl")
def placement_zone_movable(ctx: Context) -> dict[str, Any]:
    """The daxctl-onlined CXL node is ZONE_MOVABLE, and numatune reads it so (pinning would move it)."""
    got = _scenario(ctx, "zones")
    (ctx.out / "zoneinfo.txt").write_text(got["zoneinfo"])
    if got["movable_share"] != 1.0:
        raise CheckFailed(f"CXL node {got['cxl_node']} movable share {got['movable_share']}: {got['zones']}")
    return {"cxl_node": got["cxl_node"], "zones": got["zones"]}


@check("cxl")
def placement_cpuset_refusal(ctx: Context) -> dict[str, Any]:
    """In a cgroup whose cpuset.mems is 0-1, placing on CXL is refused naming the cgroup (before and by EINVAL)."""
    cg = Path(CGROUP)
    root = cg.parent
    if not (root / "cgroup.controllers").exists():
        run(["mount", "-t", "cgroup2", "none", str(root)], check=True)
    (root / "cgroup.subtree_control").write_text("+cpuset")
    cg.mkdir(exist_ok=True)
    (cg / "cpuset.mems").write_text("0-1")
    out = ctx.out / "placer-cgroup.json"
    script = f'echo $$ > {CGROUP}/cgroup.procs && exec "$0" "$@"'
    res = run(["sh", "-c", script, sys.executable, str(PLACER), str(out), "cgroup"], timeout=300)
    if not out.exists():
        raise CheckFailed(f"the cgroup placer wrote nothing:\n{res.summary()}")
    got = json.loads(out.read_text()).get("cgroup", {})
    if "error" in got or not got:
        raise CheckFailed(f"cgroup scenario: {got}\n{res.summary()}")
    name = "/numatune-placement"
    for how in ("checked", "kernel"):
        r = got[how]
        if r["raised"] != "Unsupported" or f"cgroup {name}" not in r["message"]:
            raise CheckFailed(f"{how}: {r} (mems {got['mems_allowed']})")
    if "EINVAL" not in got["kernel"]["message"]:
        raise CheckFailed(f"kernel path did not come from EINVAL: {got['kernel']}")
    pages, _ = numa_maps_pages(got["after"]["numa_maps"])
    if not pages or set(pages) - {0, 1}:
        raise CheckFailed(f"pages moved despite the refusal: {pages}")
    subprocess.run(["rmdir", str(cg)], check=False)
    return {"mems_allowed": got["mems_allowed"], "checked": got["checked"]["message"],
            "kernel": got["kernel"]["message"]}


@torch_check
def placement_thread_pool(ctx: Context) -> dict[str, Any]:
    """Pages faulted by PyTorch's intra-op threads (whose own policy is bind:0) land where the arena says (2)."""
    got = _scenario(ctx, "thread_pool")
    pages = _only_on(got, 2, "arena filled by the intra-op pool")
    if got["where"] != {"2": got["pages"]} or got["sum"] != 2.0 * 4 * (1 << 20):
        raise CheckFailed(f"where() {got['where']}, sum {got['sum']}")
    return {"pages": pages, "threads": got["threads"]}


@torch_check
def placement_place_torch(ctx: Context) -> dict[str, Any]:
    """place() moves a torch CPU tensor to the CXL node with its contents intact."""
    return _placed(_scenario(ctx, "place_torch"), "torch tensor")


@torch_check
def placement_optimizer_state(ctx: Context) -> dict[str, Any]:
    """AdamW state made in an arena on node 2 stays there through optimizer steps."""
    got = _scenario(ctx, "optimizer")
    _only_on(got, 2, "optimizer state arena")
    if not got["inside"] or got["step"] != 2.0 or got["tensors"] != 4:
        raise CheckFailed(f"state outside the arena or steps missing: {got}")
    return {"tensors": got["tensors"], "where": got["where"]}


@torch_check
def placement_benchmark_mechanics(ctx: Context) -> dict[str, Any]:
    """bench_placement's variants place the Adam state where they say (figures: mechanics only, MMIO CXL)."""
    got = _scenario(ctx, "bench")
    cxl = got["cxl_node"]
    problems = []
    for variant, want in (("dram", {1}), ("cxl", {cxl}), ("interleave", {1, cxl}), ("plan", {1})):
        nodes = {int(n) for n in got["rows"][variant]["placed"]}
        if nodes != want:
            problems.append(f"{variant}: pages on {got['rows'][variant]['placed']} (want nodes {sorted(want)})")
    if problems:
        raise CheckFailed("\n".join(problems))
    return got["rows"]
