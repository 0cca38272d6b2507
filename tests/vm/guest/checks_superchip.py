"""Checks of the `superchip` topology: the Grace superchip shape (CPU nodes with DRAM, CPU-less GPU-memory
nodes at SLIT 80/120/255, a stand-in GPU whose sysfs node is its memory node) in a real kernel. The stand-in is
QEMU's ati-vga (AMD vendor id, VGA class), which numatune reads as a GPU: with no driver to name its memory, its
CPU-less node is taken as that memory (inferred from its PCI node), so launch's gpu-memory policy and audit's
GPU-memory attribution run against a real kernel's node.

Issue 34: CPUs only ever on a node with CPUs, memory where the plan says, pages on a GPU-memory node
attributed to that node. Every fact is read from the kernel's own views (sched_getaffinity and
/proc/PID/numa_maps through toucher.py, `numactl --hardware`, sysfs), not from numatune's report.

One round per boot, like checks_runtime: the launches start together (a numatune start costs 10-20 s
under TCG), then two audited processes, then one `audit` call over both.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks_runtime import LAUNCH_MIB, TOUCH_MIB, Launched, _share, _start_launch, audit_round, run_round
from vm_checks import Context, check
from vm_guest import CheckFailed, numactl_hardware, pages_by_node, read, run, spawn_toucher

TOPOLOGY = "superchip"


def _gpu_memory_nodes(ctx: Context) -> list[int]:
    return [n.id for n in ctx.topo.nodes if not n.cpus]


def _standin_gpu(ctx: Context) -> tuple[str, int, int]:
    """(BDF, its sysfs node, the CPU node nearest that node by SLIT) of the stand-in GPU: the display-class
    function (ati-vga) behind the expander whose _PXM is a GPU-memory node."""
    memory_nodes = _gpu_memory_nodes(ctx)
    found = []
    for dev in sorted(Path("/sys/bus/pci/devices").iterdir()):
        if read(dev / "class", "").startswith("0x03"):
            node = int(read(dev / "numa_node", "-1"))
            if node in memory_nodes:
                found.append((dev.name, node))
    if len(found) != 1:
        raise CheckFailed(f"expected one display controller on a CPU-less node {memory_nodes}, found {found}")
    bdf, node = found[0]
    cpu_nodes = [n.id for n in ctx.topo.nodes if n.cpus]
    nearest = min(cpu_nodes, key=lambda c: (ctx.topo.distance(node, c), c))
    return bdf, node, nearest


@dataclass
class SuperchipRound:
    gpu: tuple[str, int, int] | None = None
    launched: dict[str, Launched] = field(default_factory=dict)
    touchers: dict[str, int] = field(default_factory=dict)
    truth: dict[str, dict[int, int]] = field(default_factory=dict)  # role -> own pages per node (numa_maps)
    audit: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _round(ctx: Context) -> SuperchipRound:
    return run_round(ctx, "_superchip_round", SuperchipRound(), _fill_round)


def _fill_round(ctx: Context, rnd: SuperchipRound, procs: list[subprocess.Popen[bytes]]) -> None:
    try:
        rnd.gpu = _standin_gpu(ctx)
    except CheckFailed as exc:
        rnd.errors["gpu"] = str(exc)
    memory_node = rnd.gpu[1] if rnd.gpu else 3
    cpu_node = rnd.gpu[2] if rnd.gpu else 1
    starts = [
        ("default", ["--node", str(cpu_node)]),
        ("hbm-bind", ["--node", str(cpu_node), "--mem-policy", "bind", "--mem-nodes", str(memory_node)]),
        ("cpuless", ["--node", str(memory_node)]),
    ]
    if rnd.gpu:
        gpu = ["--gpu", rnd.gpu[0]]
        starts += [("gpu", []),  # no option at all: rank 0 → GPU0, the stand-in (the only GPU)
                   ("gpu-memory", [*gpu, "--mem-policy", "gpu-memory", "--mem-nodes", str(memory_node)]),
                   ("gpu-memory-inferred", [*gpu, "--mem-policy", "gpu-memory"])]
    for label, args in starts:
        rnd.launched[label] = _start_launch(f"superchip-{label}", args, ctx.out, mib=LAUNCH_MIB)
    for launched in rnd.launched.values():
        launched.finish()
    # Audited: one process bound to the GPU-memory node on purpose, one whose pages were moved there
    # behind its default policy's back (migratepages), as a driver or an admin could.
    for role, prefix in (("hbm-bound", ["numactl", f"--cpunodebind={cpu_node}", f"--membind={memory_node}"]),
                         ("hbm-moved", ["numactl", f"--cpunodebind={cpu_node}"])):
        ready = ctx.out / f"superchip-audit-{role}.json"
        try:
            procs.append(spawn_toucher(prefix, TOUCH_MIB, ready))
            rnd.touchers[role] = json.loads(ready.read_text())["pid"]
        except CheckFailed as exc:
            rnd.errors[role] = str(exc)
    if "hbm-moved" in rnd.touchers:
        pid = rnd.touchers["hbm-moved"]
        others = ",".join(str(n.id) for n in ctx.topo.nodes if n.id != memory_node)
        res = run(["migratepages", str(pid), others, str(memory_node)])
        if res.returncode != 0:
            rnd.errors["hbm-moved"] = f"migratepages failed:\n{res.summary()}"
    for role, pid in rnd.touchers.items():
        rnd.truth[role] = pages_by_node(pid, own_only=True)
    audit_round(rnd, rnd.touchers)


def _launched(ctx: Context, label: str) -> dict[str, Any]:
    rnd = _round(ctx)
    if label not in rnd.launched:
        raise CheckFailed(f"launch {label!r} was not started: {rnd.errors}")
    return rnd.launched[label].require()


def _cpus_of(ctx: Context, node: int) -> list[int]:
    return list(ctx.topo.node(node).cpus)


def _placement(rep: dict[str, Any], cpus: list[int], nodes: set[int], policy: str) -> list[str]:
    problems = []
    if rep["affinity"] != cpus:
        problems.append(f"sched_getaffinity {rep['affinity']} != {cpus}")
    if _share(rep["bytes_by_node"], nodes) < 0.95:
        problems.append(f"touched memory not on node(s) {sorted(nodes)}: {rep['bytes_by_node']}")
    if not rep["policy"].startswith(policy):
        problems.append(f"numa_maps policy {rep['policy']!r}, expected {policy!r}")
    return problems


# --------------------------------------------------------------------------------------------
# inspect


@check(TOPOLOGY)
def superchip_inspect_memory_nodes(ctx: Context) -> dict[str, Any]:
    """inspect lists the GPU-memory nodes as CPU-less memory nodes (never DRAM) with numactl's sizes, and the
    stand-in GPU on the node sysfs gives it."""
    data = ctx.inspect()
    hw = numactl_hardware()
    nodes = {int(n["id"]): n for n in data.get("nodes", [])}
    problems = []
    for nid in _gpu_memory_nodes(ctx):
        node = nodes.get(nid)
        if node is None:
            problems.append(f"node {nid} missing from inspect (numactl: {hw.cpus.get(nid)})")
            continue
        if hw.cpus.get(nid) != [] or node.get("cpus") not in ([], ""):
            problems.append(f"node {nid}: numactl cpus {hw.cpus.get(nid)}, inspect cpus {node.get('cpus')!r}")
        if not hw.size_mb.get(nid) or abs(int(node.get("memory_total_kib") or 0) // 1024 - hw.size_mb[nid]) > 1:
            problems.append(f"node {nid}: inspect memory_total_kib {node.get('memory_total_kib')} != numactl "
                            f"{hw.size_mb.get(nid)} MB")
        if node.get("kind") == "dram":
            problems.append(f"node {nid} (no CPUs) called dram: {node.get('kind_evidence')}")
    bdf, sysfs_node, _ = _standin_gpu(ctx)
    dev = next((d for d in data.get("devices", []) if str(d.get("bdf", "")).lower() == bdf.lower()), None)
    if dev is None:
        problems.append(f"inspect lists no device {bdf}")
    else:
        if dev.get("numa_node") != sysfs_node:
            problems.append(f"device {bdf}: inspect numa_node {dev.get('numa_node')!r} != sysfs {sysfs_node}")
        if dev.get("kind") != "gpu" or dev.get("memory_node") != sysfs_node:
            problems.append(f"device {bdf} ({read(Path('/sys/bus/pci/devices') / bdf / 'vendor', '?')}:"
                            f"{read(Path('/sys/bus/pci/devices') / bdf / 'class', '?')}): kind {dev.get('kind')!r}, "
                            f"memory_node {dev.get('memory_node')!r}; expected a GPU whose memory is node {sysfs_node}")
    mine = nodes.get(sysfs_node) or {}
    if mine.get("kind") != "gpu" or str(mine.get("gpu", "")).lower() != bdf.lower():
        problems.append(f"node {sysfs_node}: kind {mine.get('kind')!r}, gpu {mine.get('gpu')!r}; expected GPU {bdf}'s "
                        f"memory ({mine.get('kind_evidence')})")
    codes = {(f.get("code"), f.get("subject")) for f in data.get("findings", [])}
    if ("NT003", f"node {sysfs_node}") in codes:
        problems.append(f"NT003 (a firmware HMAT gap) raised for GPU memory node {sysfs_node}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"nodes": {n: {k: nodes[n].get(k) for k in ("kind", "kind_evidence", "memory_total_kib")}
                      for n in _gpu_memory_nodes(ctx)}, "device": bdf}


# --------------------------------------------------------------------------------------------
# launch


@check(TOPOLOGY)
def superchip_launch_gpu_on_memory_node(ctx: Context) -> dict[str, Any]:
    """`launch -- CMD` with no option finds the stand-in as GPU0 (rank 0), a GPU whose sysfs node is its CPU-less
    memory node, and binds the CPUs of the nearest node with CPUs (SLIT) with the memory on that node's DRAM
    (numa_maps bind:N), never on the GPU-memory node. (`--gpu BDF` is what the gpu-memory launches use.)"""
    bdf, memory_node, cpu_node = _gpu_of_round(ctx)
    rep = _on_the_gpus_cpu_node(ctx, "gpu", f"bind:{cpu_node}",
                                f"launch with no option, GPU0 {bdf} (sysfs node {memory_node}, CPU-less)")
    return {"gpu": bdf, "sysfs_node": memory_node, "report": rep}


def _gpu_of_round(ctx: Context) -> tuple[str, int, int]:
    rnd = _round(ctx)
    if "gpu" in rnd.errors:
        raise CheckFailed(rnd.errors["gpu"])
    assert rnd.gpu is not None
    return rnd.gpu


def _on_the_gpus_cpu_node(ctx: Context, label: str, policy: str, what: str) -> dict[str, Any]:
    """The launch `label`'s report, checked: the CPUs of the stand-in GPU's CPU node, its memory there (numa_maps
    policy `policy`), no page on the GPU-memory node."""
    _, memory_node, cpu_node = _gpu_of_round(ctx)
    rep = _launched(ctx, label)
    problems = _placement(rep, _cpus_of(ctx, cpu_node), {cpu_node}, policy)
    if rep["bytes_by_node"].get(str(memory_node)):
        problems.append(f"{rep['bytes_by_node'][str(memory_node)]} bytes on GPU-memory node {memory_node}")
    if problems:
        raise CheckFailed(f"{what}:\n" + "\n".join(problems) + f"\nreport: {rep}")
    return rep


@check(TOPOLOGY)
def superchip_launch_default_memory_on_cpu_node(ctx: Context) -> dict[str, Any]:
    """`launch --node N`: CPUs of node N, memory bound to node N's DRAM; no page on a GPU-memory node."""
    rnd = _round(ctx)
    cpu_node = rnd.gpu[2] if rnd.gpu else 1
    rep = _launched(ctx, "default")
    problems = _placement(rep, _cpus_of(ctx, cpu_node), {cpu_node}, f"bind:{cpu_node}")
    on_gpu = {n: b for n, b in rep["bytes_by_node"].items() if int(n) in _gpu_memory_nodes(ctx) and b}
    if on_gpu:
        problems.append(f"pages on GPU-memory node(s): {on_gpu}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nreport: {rep}")
    return {"report": rep}


@check(TOPOLOGY)
def superchip_launch_binds_gpu_memory_deliberately(ctx: Context) -> dict[str, Any]:
    """`launch --node N --mem-policy bind --mem-nodes M` (M the GPU-memory node): CPUs stay on node N, the
    pages land on M (numa_maps bind:M)."""
    rnd = _round(ctx)
    memory_node, cpu_node = (rnd.gpu[1], rnd.gpu[2]) if rnd.gpu else (3, 1)
    rep = _launched(ctx, "hbm-bind")
    problems = _placement(rep, _cpus_of(ctx, cpu_node), {memory_node}, f"bind:{memory_node}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nreport: {rep}")
    return {"report": rep}


@check(TOPOLOGY)
def superchip_launch_gpu_memory_policy(ctx: Context) -> dict[str, Any]:
    """`launch --gpu BDF --mem-policy gpu-memory`, with and without --mem-nodes: CPUs on the GPU's CPU node, pages
    on its memory node (numa_maps bind:M) — without --mem-nodes the node numatune inferred from the GPU's PCI node,
    as no driver names it here."""
    rnd = _round(ctx)
    if "gpu" in rnd.errors:
        raise CheckFailed(rnd.errors["gpu"])
    assert rnd.gpu is not None
    _, memory_node, cpu_node = rnd.gpu
    seen, problems = {}, []
    for label in ("gpu-memory", "gpu-memory-inferred"):
        try:
            rep = _launched(ctx, label)
        except CheckFailed as exc:
            problems.append(f"{label}: {exc}")
            continue
        seen[label] = rep
        problems += [f"{label}: {p}" for p in _placement(rep, _cpus_of(ctx, cpu_node), {memory_node},
                                                          f"bind:{memory_node}")]
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nreports: {seen}")
    return seen


@check(TOPOLOGY)
def superchip_launch_refuses_cpuless_node(ctx: Context) -> dict[str, Any]:
    """`launch --node M` for a CPU-less GPU-memory node is refused (exit 7, NT413 "a memory-only node ... no CPUs",
    its fix naming the nearest node with CPUs): no child runs."""
    rnd = _round(ctx)
    memory_node = rnd.gpu[1] if rnd.gpu else 3
    launched = rnd.launched.get("cpuless")
    if launched is None:
        raise CheckFailed(f"launch --node {memory_node} was not started: {rnd.errors}")
    said = ("NT413", f"node {memory_node} is a memory-only node", "no CPUs")
    if launched.report is not None or launched.proc.returncode != 7 or not all(w in launched.stderr for w in said):
        raise CheckFailed(f"launch --node {memory_node}: expected exit 7 naming a node with no CPUs, got rc="
                          f"{launched.proc.returncode} report={launched.report}\n{launched.error}")
    return {"rc": launched.proc.returncode, "stderr": launched.stderr.strip()[-300:]}


# --------------------------------------------------------------------------------------------
# audit


def _audited(ctx: Context, role: str) -> tuple[dict[str, Any], dict[int, int]]:
    rnd = _round(ctx)
    for key in (role, f"audit-{role}"):
        if key in rnd.errors:
            raise CheckFailed(rnd.errors[key])
    return rnd.audit[role], rnd.truth[role]


@check(TOPOLOGY)
def superchip_audit_gpu_memory_pages(ctx: Context) -> dict[str, Any]:
    """audit attributes a process's pages on the GPU-memory node to that node (as numa_maps has them) and names it
    the stand-in GPU's memory (kind gpu, inferred from the GPU's PCI node): neither remote DRAM nor a slow tier, so
    no process is told it has pages "without a policy asking" there, whether bound there on purpose or moved there
    behind a default policy (audit counts GPU and HBM nodes as neither, as on a Grace machine)."""
    rnd = _round(ctx)
    memory_node = rnd.gpu[1] if rnd.gpu else 3
    bdf = rnd.gpu[0] if rnd.gpu else "?"
    problems, seen = [], {}
    for role in ("hbm-bound", "hbm-moved"):
        try:
            entry, truth = _audited(ctx, role)
        except CheckFailed as exc:
            problems.append(f"{role}: {exc}")
            continue
        by_node = {int(k): int(v) for k, v in (entry.get("memory_by_node") or {}).items()}
        want = truth.get(memory_node, 0) / max(1, sum(truth.values()))
        got = by_node.get(memory_node, 0) / max(1, sum(by_node.values()))
        seen[role] = {"memory_by_node": by_node, "numa_maps_pages": truth, "verdict": entry.get("verdict"),
                      "slow_tier_ratio": entry.get("slow_tier_ratio"), "reasons": entry.get("reasons")}
        if want < 0.9:
            problems.append(f"{role}: the workload itself has only {want:.0%} of its pages on node {memory_node}"
                            f" (numa_maps {truth})")
        if abs(got - want) > 0.05:
            problems.append(f"{role}: audit puts {got:.1%} on node {memory_node}, numa_maps {want:.1%}")
        kinds = entry.get("memory_nodes") or {}
        mine = kinds.get(str(memory_node)) or {}
        if mine.get("kind") != "gpu" or str(mine.get("gpu", "")).lower() != bdf.lower():
            problems.append(f"{role}: audit's memory_nodes do not name node {memory_node} GPU {bdf}'s memory: {kinds}")
        if entry.get("pinned_host") is not None:  # no process here maps a GPU driver's device file
            problems.append(f"{role}: pinned host memory reported: {entry['pinned_host']}")
        seen[role]["memory_nodes"] = kinds
        reasons = " | ".join(entry.get("reasons") or [])
        if "without a policy asking" in reasons or (entry.get("slow_tier_ratio") or 0) > 0:
            problems.append(f"{role}: GPU memory counted as a slow tier: {reasons}")
        if f"GPU/HBM memory node(s) {memory_node} (GPU memory of {bdf.lower()})" not in reasons:
            problems.append(f"{role}: audit does not say its pages are on GPU {bdf}'s memory node: {reasons}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nseen: {json.dumps(seen)}")
    return seen
