"""probe and compare on a real multi-node kernel (issue #18).

probe: every buffer it times must be on the node asked — seen from outside, independently of probe's
own move_pages check, by sampling /proc/PID/numa_maps while it runs (each buffer is an anonymous
mapping with policy bind:T); the matrix covers every initiator × every memory node, CPU-less and CXL
nodes included; figures are finite and positive; QEMU's emulated nodes are flat, so the "no
measurable NUMA effect" finding (NT503) must fire.
compare: each placement's pages are where it says (its own numa_maps proof, checked against the
topology), and a failing command stops it with the command's status.
Buffers stay small: TCG is ~50x slower than hardware and QEMU 7.2 serves CXL memory as MMIO.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from typing import Any

from vm_checks import Context, check
from vm_guest import REPO, CheckFailed, numatune, numatune_json, parse_cpulist, read, safe_to_bind_to_cxl

#: NUMATUNE_VM_README=1 also runs the text reports quoted in the README (each a second numatune start and
#: a second set of runs under TCG; the checks themselves judge the JSON documents).
README_TEXT = os.environ.get("NUMATUNE_VM_README") == "1"

_BIND = re.compile(r"^([0-9a-f]+) bind(?:=\w+)?:(\d+) (.*)$")


def _nodes_with(ctx: Context) -> tuple[list[int], list[int]]:
    """(nodes with CPUs, nodes with memory) as the guest kernel reports them."""
    cpus, mem = [], []
    for n in parse_cpulist(read("/sys/devices/system/node/online", "0")):
        if read(f"/sys/devices/system/node/node{n}/cpulist", "").strip():
            cpus.append(n)
        m = re.search(r"MemTotal:\s+(\d+)", read(f"/sys/devices/system/node/node{n}/meminfo", ""))
        if m and int(m.group(1)) > 0:
            mem.append(n)
    return sorted(cpus), sorted(mem)


def _watch_probe(args: list[str], out_dir: Any) -> tuple[dict[str, Any], dict[int, dict[int, int]], str]:
    """Run probe --json while sampling its numa_maps: (document, target → node → max pages seen, stderr)."""
    env_cache = {"NUMATUNE_CACHE_DIR": str(out_dir / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "numatune", "probe", "--json", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env_cache})
    seen: dict[int, dict[int, int]] = {}
    while proc.poll() is None:
        for line in read(f"/proc/{proc.pid}/numa_maps", "").splitlines():
            m = _BIND.match(line)
            if not m or "anon=" not in m.group(3):
                continue
            target = int(m.group(2))
            for node, pages in re.findall(r"\bN(\d+)=(\d+)", m.group(3)):
                slot = seen.setdefault(target, {})
                slot[int(node)] = max(slot.get(int(node), 0), int(pages))
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise CheckFailed(f"numatune probe exited {proc.returncode}:\n{err.decode(errors='replace')[-3000:]}")
    return json.loads(out), seen, err.decode(errors="replace")


#: seconds a pair gets in the matrix run; an emulated CXL node (QEMU serves its memory as MMIO: first touch at
#: about 0.6 MB/s under TCG) cannot set up a 4 MiB buffer in that, and says so; it is measured on its own.
PAIR_SECONDS = 3
SLOW_PAIR_SECONDS = 60


def _cell_problems(c: dict[str, Any]) -> list[str]:
    where = f"node {c['initiator']} → node {c['target']}"
    if c["status"] != "ok":
        return [f"{where}: {c['status']} ({c['reason']})"]
    problems = []
    if not c["placement"]["verified"]:
        problems.append(f"{where}: probe's own check failed: {c['placement']}")
    for key in ("latency_ns", "read_gbps", "copy_gbps"):
        fig = c[key]
        if fig is None and "time budget" in (c["reason"] or "") and c["target_kind"] == "cxl":
            continue  # said why: the emulated CXL node's set-up did not fit even the long run's share
        if fig is None or not all(math.isfinite(x) and x > 0 for x in fig["samples"]):
            problems.append(f"{where}: {key} not finite and positive: {fig} ({c['reason']})")
    return problems


@check("two-socket", "cxl", "superchip")
def probe_matrix_and_placement(ctx: Context) -> dict[str, Any]:
    """probe: every initiator × memory node measured, buffers on the node asked (numa_maps), NT503; the time
    budget holds, and a pair too slow for its share says so instead of spending the other pairs' time."""
    initiators, targets = _nodes_with(ctx)
    budget = PAIR_SECONDS * len(initiators) * len(targets)
    args = ["--size", "4M", "--time-budget", str(budget), "--samples", "3"]
    doc, seen, err = _watch_probe(args, ctx.out)
    problems = []
    if doc["initiators"] != initiators or doc["targets"] != targets:
        problems.append(f"matrix {doc['initiators']} × {doc['targets']}, the kernel has CPUs on {initiators} "
                        f"and memory on {targets}")
    pairs = {(c["initiator"], c["target"]) for c in doc["cells"]}
    missing = {(i, t) for i in initiators for t in targets} - pairs
    if missing:
        problems.append(f"pairs not measured: {sorted(missing)}")
    # The budget holds whatever the memory: once, an emulated CXL pair ran 30 s past its share and every pair
    # after it was skipped (3x). Its end may pass by a short sample and the slow node's trial write (the cxl
    # guest here: 26.7 s of 24); the interpreter's start is not counted.
    if doc["elapsed_s"] > budget * 1.5 + 2:
        problems.append(f"probe took {doc['elapsed_s']} s of a {budget} s budget")
    slow = set()
    for c in doc["cells"]:
        if c["target_kind"] == "cxl" and "time budget" in (c["reason"] or ""):
            slow.add(c["target"])  # measured on its own below, with the time its memory needs
            continue
        problems += _cell_problems(c)
    slow_cells = []
    for t in sorted(slow):
        one, more, _ = _watch_probe(["--nodes", str(initiators[0]), "--targets", str(t), "--size", "4M",
                                     "--time-budget", str(SLOW_PAIR_SECONDS), "--samples", "3"], ctx.out)
        for c in one["cells"]:
            slow_cells.append({"pair": f"{c['initiator']}->{c['target']}", "reason": c["reason"],
                               "elapsed_s": one["elapsed_s"]})
            problems += _cell_problems(c)
        for node, pages in more.get(t, {}).items():
            seen.setdefault(t, {})[node] = max(seen.get(t, {}).get(node, 0), pages)
    # independent of probe: the pages numa_maps showed under each bind:T mapping
    for t in targets:
        pages = seen.get(t, {})
        if not pages.get(t):
            problems.append(f"numa_maps never showed a bind:{t} buffer with pages on node {t} (saw {pages})")
        stray = {n: p for n, p in pages.items() if n != t}
        if stray:
            problems.append(f"bind:{t} buffers had pages on other nodes: {stray}")
    codes = {f["code"] for f in doc["findings"]}
    if "NT503" not in codes and not problems:
        # Emulated nodes have one memory behind them, so NT503 is the truth; what can hide it is a burst of
        # host load during one pair (both of its latency figures 10% up): measured once more before failing.
        first = doc["ratios"]
        doc, _, err = _watch_probe(args, ctx.out)
        codes = {f["code"] for f in doc["findings"]}
        if "NT503" not in codes:
            problems.append(f"no NT503 (no measurable NUMA effect) on emulated nodes, twice: ratios {first}, then "
                            f"{doc['ratios']}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nstderr: {err[-1500:]}")
    details = {"cells": len(doc["cells"]), "elapsed_s": doc["elapsed_s"], "ratios": doc["ratios"],
               "numa_maps_pages": {str(k): v for k, v in seen.items()}, "findings": sorted(codes),
               "slow_pairs": slow_cells,
               "latency_ns": {f"{c['initiator']}->{c['target']}": c["latency_ns"]["median"]
                              for c in doc["cells"] if c["latency_ns"]}}
    if README_TEXT:  # the text report for the README: a second, shorter run, only when asked (TCG time)
        text = numatune("probe", "--size", "4M", "--time-budget", str(len(initiators) * len(targets)),
                        "--samples", "2", timeout=300, env={**os.environ, "NUMATUNE_CACHE_DIR": str(ctx.out / "cache")})
        details["text"] = text.stdout if text.returncode == 0 else text.summary(2000)
    return details


def _split_ok(row: dict[str, Any], nodes: set[int], low: float = 0.9) -> bool:
    return sum(v for k, v in row["achieved_split"].items() if int(k) in nodes) >= low


@check("two-socket")
def compare_placements_land(ctx: Context) -> dict[str, Any]:
    """compare: local / remote / interleave pages where each says; a failing command stops it."""
    # dd fills a 24 MiB buffer, then blocks on a pipe that sleep never reads: the buffer lives 1 s wherever it
    # was placed, however slow the guest. (A dd that only copied, `of=/dev/null count=12`, ended before the
    # sampler saw 1 MiB of it once, on a host running three guests: proof "unverified".)
    held = ["sh", "-c", "dd if=/dev/zero bs=24M count=1 status=none | sleep 1"]
    doc = numatune_json("compare", "--json", "--node", "0", "-n", "2", "--seed", "1", "--sample-interval", "0.05",
                        "-p", "local,remote,interleave", "--", *held, timeout=400)
    rows = {r["placement"]: r for r in doc["placements"]}
    problems = []
    expect = {"local": {0}, "remote": {1}}
    for name, nodes in expect.items():
        row = rows[name]
        if row["placement_proof"] != "ok" or not _split_ok(row, nodes):
            problems.append(f"{name}: proof {row['placement_proof']}, split {row['achieved_split']} (want {nodes})")
    inter = rows["interleave"]["achieved_split"]
    if not (0.3 <= inter.get("0", 0) <= 0.7 and 0.3 <= inter.get("1", 0) <= 0.7):
        problems.append(f"interleave: split {inter}, want both nodes 30-70%")
    failing = numatune("compare", "-n", "2", "--node", "0", "-p", "local,remote", "--", "sh", "-c",
                       "echo about-to-fail; exit 3", timeout=300)
    if failing.returncode != 3 or "about-to-fail" not in failing.stderr:
        problems.append(f"a failing command: rc {failing.returncode} (want 3), stderr {failing.stderr[-800:]}")
    if problems:
        raise CheckFailed("\n".join(problems))
    details = {"splits": {n: r["achieved_split"] for n, r in rows.items()}, "verdict": doc["verdict"],
               "means_s": {n: r["mean"] for n, r in rows.items()}}
    if README_TEXT:  # the README's text report (a dd that copies, timed), only when asked (TCG time)
        dd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=24M", "count=12", "status=none"]
        text = numatune("compare", "--node", "0", "-n", "2", "--seed", "1", "-p", "local,remote,interleave", "--",
                        *dd, timeout=400)
        details["text"] = text.stdout if text.returncode == 0 else text.summary(2000)
    return details


@check("cxl")
def compare_cxl_placement_lands(ctx: Context) -> dict[str, Any]:
    """compare -p local,cxl: the cxl placement's pages are on the CXL node."""
    cxl = ctx.cxl_node()
    # dd fills a 4 MiB buffer, then blocks on a pipe that sleep never reads: the buffer lives 2 s on any node
    # (CXL memory is MMIO in QEMU 7.2, so the workload stays tiny)
    dd = ["sh", "-c", "dd if=/dev/zero bs=4M count=1 status=none | sleep 2"]
    # cxl runs first (seed 1). In two fresh-clone CI runs, dd and sleep bound to the CXL node read files
    # from 9p into CXL pages and QEMU gave up on virtio: vm_guest.safe_to_bind_to_cxl.
    with safe_to_bind_to_cxl("sh", "dd", "sleep", "numactl") as env:
        doc = numatune_json("compare", "--json", "--node", "1", "-n", "1", "--seed", "1", "--sample-interval",
                            "0.05", "-p", "local,cxl", "--", *dd, timeout=400, env=env)
    rows = {r["placement"]: r for r in doc["placements"]}
    problems = []
    if rows["cxl"]["expected_nodes"] != [cxl]:
        problems.append(f"cxl placement asked nodes {rows['cxl']['expected_nodes']}, the CXL node is {cxl}")
    if rows["cxl"]["placement_proof"] != "ok" or not _split_ok(rows["cxl"], {cxl}):
        problems.append(f"cxl: proof {rows['cxl']['placement_proof']}, split {rows['cxl']['achieved_split']}")
    if rows["local"]["placement_proof"] != "ok" or not _split_ok(rows["local"], {1}):
        problems.append(f"local: proof {rows['local']['placement_proof']}, split {rows['local']['achieved_split']}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"splits": {n: r["achieved_split"] for n, r in rows.items()}, "verdict": doc["verdict"]}
