"""Checks of what the machine looks like: the harness's own sanity checks, `inspect`, `snapshot`.

Issue items 1 (inspect agrees with numactl, NIC on node 1, HMAT, tiers, CXL chain) and 5
(snapshot trees for the fixtures). Registered in file order, which is the run order.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import CheckFailed, numactl_hardware, numatune, parse_cpulist, read, spawn_toucher, stop

from numatune.commands.snapshot import DRY_RUN, PID_DRY_RUN

# --------------------------------------------------------------------------------------------
# Helpers


def _by_id(items: list[dict[str, Any]], key: str = "id") -> dict[int, dict[str, Any]]:
    return {int(i[key]): i for i in items}


def _cpus(value: Any) -> list[int]:
    """Accept a cpu list as [0, 1], "0-1" or a hex mask-free cpulist string."""
    if isinstance(value, list):
        return sorted(int(v) for v in value)
    if isinstance(value, str):
        return parse_cpulist(value)
    raise CheckFailed(f"unexpected cpu list value {value!r}")


def _numbers(obj: Any) -> list[float]:
    """Every number anywhere inside a JSON value (to find HMAT figures without fixing a shape)."""
    if isinstance(obj, bool):
        return []
    if isinstance(obj, (int, float)):
        return [obj]
    if isinstance(obj, dict):
        return [n for v in obj.values() for n in _numbers(v)]
    if isinstance(obj, list):
        return [n for v in obj for n in _numbers(v)]
    return []


def _tiers_from_sysfs() -> dict[int, int]:
    """node -> memory tier number, from /sys/devices/virtual/memory_tiering."""
    out: dict[int, int] = {}
    for d in Path("/sys/devices/virtual/memory_tiering").glob("memory_tier*"):
        tier = int(d.name.removeprefix("memory_tier"))
        for node in parse_cpulist(read(d / "nodelist", "")):
            out[node] = tier
    return out


def _tier_number(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and (m := re.search(r"(\d+)", value)):
        return int(m[1])
    if isinstance(value, dict):
        for key in ("id", "tier", "number", "name"):
            if key in value:
                return _tier_number(value[key])
    return None


# --------------------------------------------------------------------------------------------
# The machine itself (harness sanity: proves the topology file reached the guest kernel)


@check("two-socket", "cxl", "cxl-switch", "cxl-pool", "superchip")
def guest_matches_topology(ctx: Context) -> dict[str, Any]:
    """numactl --hardware and sysfs show the nodes, CPUs, distances and PCI NUMA nodes of the topology file."""
    hw = numactl_hardware()
    topo = ctx.topo
    for n in topo.nodes:
        if hw.cpus.get(n.id) != list(n.cpus):
            raise CheckFailed(f"node {n.id}: numactl cpus {hw.cpus.get(n.id)} != topology {list(n.cpus)}")
        for m in topo.nodes:
            want = topo.distance(n.id, m.id)
            got = hw.distances.get(n.id, {}).get(m.id)
            if got != want:
                raise CheckFailed(f"distance {n.id}->{m.id}: numactl {got} != topology {want}")
    for e in topo.expanders:
        for d in e.devices:
            nodes = {read(p, "?") for p in Path("/sys/bus/pci/devices").glob("*/numa_node")}
            if str(e.numa_node) not in nodes:
                raise CheckFailed(f"no PCI device reads numa_node {e.numa_node} (expected {d.id})")
    return {"numactl_cpus": hw.cpus, "numactl_size_mb": hw.size_mb, "distances": hw.distances}


@check("cxl", "cxl-switch", "cxl-pool")
def cxl_region_online(ctx: Context) -> dict[str, Any]:
    """The CXL Type-3 memory became a CPU-less NUMA node through region -> devdax -> system-ram."""
    node = ctx.cxl_node()
    hw = numactl_hardware()
    if hw.cpus.get(node) != []:
        raise CheckFailed(f"CXL node {node} should be CPU-less, numactl says cpus {hw.cpus.get(node)}")
    if hw.size_mb.get(node, 0) < 256:
        raise CheckFailed(f"CXL node {node} has only {hw.size_mb.get(node)} MB")
    return {"chain": ctx.cxl_chain, "size_mb": hw.size_mb[node], "distances": hw.distances.get(node)}


# --------------------------------------------------------------------------------------------
# 1. inspect


@check("two-socket", "cxl", "superchip")
def inspect_matches_numactl(ctx: Context) -> dict[str, Any]:
    """`numatune inspect --json` has the nodes, CPUs, sizes (within rounding) and distances of numactl --hardware."""
    data = ctx.inspect()
    hw = numactl_hardware()
    nodes = _by_id(data.get("nodes", []))
    if sorted(nodes) != sorted(hw.cpus):
        raise CheckFailed(f"inspect nodes {sorted(nodes)} != numactl nodes {sorted(hw.cpus)}")
    problems = []
    for nid, cpus in hw.cpus.items():
        node = nodes[nid]
        if _cpus(node.get("cpus", [])) != cpus:
            problems.append(f"node {nid} cpus: inspect {node.get('cpus')} != numactl {cpus}")
        kib = node.get("memory_total_kib")
        if not isinstance(kib, int) or abs(kib // 1024 - hw.size_mb[nid]) > 1:
            problems.append(f"node {nid} memory_total_kib {kib} != numactl {hw.size_mb[nid]} MB")
        dist = {int(k): v for k, v in (node.get("distances") or {}).items()}
        if dist != hw.distances[nid]:
            problems.append(f"node {nid} distances: inspect {dist} != numactl {hw.distances[nid]}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"nodes": len(nodes), "schema": data.get("schema")}


@check()
def inspect_nic_on_node1(ctx: Context) -> dict[str, Any]:
    """inspect lists the e1000e NIC behind the expander bridge on node 1, with node 1's CPUs as local."""
    nic = ctx.node1_nic()
    data = ctx.inspect()
    devices = [d for d in data.get("devices", []) if nic in (d.get("netdevs") or [])]
    if not devices:
        raise CheckFailed(f"no device in inspect's devices[] has netdevs containing {nic}: "
                          f"{[(d.get('bdf'), d.get('netdevs')) for d in data.get('devices', [])]}")
    dev = devices[0]
    want_cpus = list(ctx.topo.node(1).cpus)
    if dev.get("numa_node") != 1:
        raise CheckFailed(f"{nic} ({dev.get('bdf')}): numa_node {dev.get('numa_node')} != 1")
    if _cpus(dev.get("local_cpus")) != want_cpus:
        raise CheckFailed(f"{nic}: local_cpus {dev.get('local_cpus')} != {want_cpus}")
    return {"device": {k: dev.get(k) for k in ("bdf", "kind", "vendor_id", "device_id", "numa_node", "local_cpus")}}


def _sysfs_hmat(node: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for access in sorted(Path(f"/sys/devices/system/node/node{node}").glob("access*")):
        vals = {}
        for f in ("read_latency", "write_latency", "read_bandwidth", "write_bandwidth"):
            text = read(access / "initiators" / f, "")
            if text:
                vals[f] = int(text)
        out[access.name] = vals
    return out


@check()
def inspect_hmat(ctx: Context) -> dict[str, Any]:
    """inspect reports the HMAT latency/bandwidth figures the kernel exposes per node (access0/access1)."""
    data = ctx.inspect()
    nodes = _by_id(data.get("nodes", []))
    seen, problems = {}, []
    for t in ctx.topo.nodes:
        sysfs = _sysfs_hmat(t.id)
        if not sysfs:
            problems.append(f"kernel wrote no HMAT access classes for node {t.id} (harness/QEMU problem)")
            continue
        seen[t.id] = sysfs
        reported = _numbers(nodes.get(t.id, {}).get("hmat"))
        reasons = " ".join(e.get("unknown_reason") or "" for e in nodes.get(t.id, {}).get("hmat") or [])
        for access, vals in sysfs.items():
            for key, val in vals.items():
                if val == 0:  # a figure QEMU's HMAT left unset: unknown (null) with the reason, never 0 ns / 0 MB/s
                    if key not in reasons:
                        problems.append(f"node {t.id} {access} {key}=0 (sysfs) not reported as unknown: "
                                        f"{nodes.get(t.id, {}).get('hmat')!r}")
                elif val not in reported:
                    problems.append(f"node {t.id} {access} {key}={val} (sysfs) missing from inspect's "
                                    f"hmat {nodes.get(t.id, {}).get('hmat')!r}")
    if problems:
        raise CheckFailed("\n".join(problems[:12]))
    return {"sysfs": seen}


@check()
def inspect_memory_tiers(ctx: Context) -> dict[str, Any]:
    """inspect's per-node tier matches /sys/devices/virtual/memory_tiering (slow nodes in a higher tier)."""
    sysfs = _tiers_from_sysfs()
    if not sysfs:
        raise CheckFailed("the guest kernel exposes no memory_tiering directory")
    nodes = _by_id(ctx.inspect().get("nodes", []))
    problems = []
    for nid, tier in sysfs.items():
        got = _tier_number(nodes.get(nid, {}).get("tier"))
        if got != tier:
            problems.append(f"node {nid}: inspect tier {nodes.get(nid, {}).get('tier')!r} != memory_tier{tier}")
    if ctx.topo.cxl:
        slow = [n.id for n in ctx.topo.nodes if not n.cpus]
        for s in slow:
            if sysfs.get(s, 0) <= sysfs.get(0, 0):
                problems.append(f"slow node {s} is not in a lower tier than node 0: {sysfs}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"tiers": sysfs}


@check("cxl")
def inspect_cxl_chain(ctx: Context) -> dict[str, Any]:
    """inspect shows the CXL chain memdev -> region -> DAX -> NUMA node with the node the kernel gave."""
    chain = ctx.cxl_chain
    node = ctx.cxl_node()
    assert chain is not None
    cxl = ctx.inspect().get("cxl")
    if not cxl:
        raise CheckFailed(f"inspect --json has no cxl data: {cxl!r}")
    text = json.dumps(cxl)
    missing = [v for v in (chain["memdev"], chain["region"], chain["dax"]) if v and f'"{v}"' not in text]
    if missing:
        raise CheckFailed(f"inspect's cxl object lacks {missing}; chain from set-up {chain}; cxl={text[:1500]}")
    if node not in _numbers(cxl):
        raise CheckFailed(f"inspect's cxl object never mentions node {node}: {text[:1500]}")
    return {"chain": chain}


# --------------------------------------------------------------------------------------------
# 5. snapshot (first so the fixtures exist even when later checks fail)


SNAPSHOT_MUST_HAVE = ("sys/devices/system/node/node1/cpulist", "proc/interrupts")


#: The cxl-switch boot exists for its CXL tree (checks_cxl.py); `snapshot` (160 s under TCG) is tested by
#: the other two boots, so there it runs only to refresh its fixture (NUMATUNE_VM_UPDATE_FIXTURES=1).
#: cxl-pool (capture-only, never in the test stage) is booted for its snapshot. So is superchip's, which
#: is there for its launch and audit checks (checks_superchip.py).
SNAPSHOT_TOPOLOGIES = ("two-socket", "cxl", "cxl-pool") + (
    ("cxl-switch", "superchip") if os.environ.get("NUMATUNE_VM_UPDATE_FIXTURES") == "1" else ())


@check(*SNAPSHOT_TOPOLOGIES)
def snapshot(ctx: Context) -> dict[str, Any]:
    """`numatune snapshot -o X.tar.gz` writes a tarball holding the node, PCI and IRQ trees."""
    target = ctx.out / "snapshot.tar.gz"
    res = numatune("snapshot", "-o", str(target), timeout=300)
    if res.returncode != 0 or not target.exists():
        raise CheckFailed(f"snapshot failed:\n{res.summary()}")
    with tarfile.open(target) as tar:
        names = tar.getnames()
    stripped = {n.split("/", 1)[1] if "/" in n and not n.startswith(("sys/", "proc/")) else n for n in names}
    missing = [m for m in SNAPSHOT_MUST_HAVE if not any(s.endswith(m) for s in stripped | set(names))]
    if missing:
        raise CheckFailed(f"snapshot lacks {missing} ({len(names)} members, e.g. {names[:10]})")
    if ctx.cxl_chain and not any("/sys/bus/cxl" in "/" + n or "bus/cxl" in n for n in names):
        raise CheckFailed("cxl topology but the snapshot has no sys/bus/cxl entries")
    return {"members": len(names), "bytes": target.stat().st_size, "command": " ".join(res.argv)}


#: Every command the replay must equal, as run live in the guest; "{pid}" is a toucher's pid. The
#: host replays them on the guest's snapshot (tests/vm/test_vm_parity.py) and compares the JSON
#: without the fields tests/parity.py lists. The lines are the snapshot's own (DRY_RUN, PID_DRY_RUN),
#: less emit, plan-memory and the launch lines for a GPU or weights (the host's parity test runs those):
#: each line costs a numatune start under TCG.
PARITY_LINES = tuple(line for line in (*DRY_RUN, *PID_DRY_RUN) if line[0] not in ("emit", "plan-memory")
                     and (line[0] != "launch" or ("--node" in line and "--mem-policy" not in line)))
# The host root is shared, so these are the same files on both; PATH too, because launch's plan names
# the numactl it finds on PATH (a fact of the machine running numatune, not of the node: /bin first in
# the guest, /usr/bin on the host).
PARITY_ENV = {"NUMATUNE_PCI_IDS": "/usr/share/misc/pci.ids", "PATH": "/usr/bin:/bin"}


@check()
def snapshot_parity(ctx: Context) -> dict[str, Any]:
    """`snapshot --pid P` of the guest, and every command's live JSON, for the host to replay and compare."""
    import os

    out = ctx.out / "parity"
    out.mkdir(exist_ok=True)
    # Read twice (snapshot, then live): without THP nothing fills its pages in between.
    proc = spawn_toucher([], 32, ctx.out / "parity-toucher.json", "--no-thp")
    env = dict(os.environ, **PARITY_ENV)
    try:
        pid = str(proc.pid)
        res = numatune("snapshot", "-o", str(out / "guest.tar.gz"), "--pid", pid, timeout=300, env=env)
        if res.returncode != 0:
            raise CheckFailed(f"snapshot --pid failed:\n{res.summary()}")
        codes = []
        for i, line in enumerate(PARITY_LINES):
            live = numatune(*(a.format(pid=pid) for a in line), timeout=300, env=env)
            (out / f"{i}.json").write_text(live.stdout)
            codes.append(live.returncode)
    finally:
        stop(proc)
    if any(c not in (0, 1) for c in codes):
        raise CheckFailed(f"a live command failed in the guest: exit codes {codes} for {PARITY_LINES}")
    return {"pid": int(pid), "codes": codes}


