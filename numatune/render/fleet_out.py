"""`numatune fleet` as text and as the `numatune.fleet/1` JSON document."""

from __future__ import annotations

from typing import Any

from numatune.analysis.fleet import Fleet, Group, Pool, Unreadable
from numatune.render.envelope import envelope


def _names(names: tuple[str, ...], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _shape_line(g: Group) -> str:
    s = g.shape
    nodes = "; ".join(f"{k}: {v}" for k, v in s.items() if k.startswith("node "))
    parts = [f"{s['sockets']} sockets", f"{s['online cpus']} cpus (SMT {s['threads per core']})",
             f"{s['numa nodes']} NUMA nodes ({nodes})" if nodes else f"{s['numa nodes']} NUMA nodes",
             f"GPUs {s['gpus']}", f"NICs {s['nics']}"]
    if "gpu nearest nic" in s:
        parts.append(f"GPU->NIC {s['gpu nearest nic']}")
    return ", ".join(parts)


def render_fleet_text(fleet: Fleet, unreadable: list[tuple[str, str]]) -> str:
    kinds = "topology" if len(fleet.groups) == 1 else "topologies"
    lines = [f"numatune fleet: {fleet.total} nodes, {len(fleet.groups)} {kinds}"]
    for g in fleet.groups:
        tag = "reference" if g is fleet.groups[0] else "outliers"
        lines.append("")
        lines.append(f"group {g.id} [{g.fingerprint}] {len(g.nodes)} node{'s' if len(g.nodes) != 1 else ''} "
                     f"({tag}): {_names(g.nodes)}")
        lines.append(f"  shape: {_shape_line(g)}")
        lines.append(f"  distances: {g.shape['distances']}")
        for key, ref, mine in g.differs:
            lines.append(f"  differs from group A: {key}: {ref if ref is not None else '(absent)'} -> "
                         f"{mine if mine is not None else '(absent)'}")
        lines.append("  kernels: " + ", ".join(f"{k} x{v}" for k, v in g.kernels.items()))
        for f in g.findings:
            lines.append(f"  {f.code} {f.severity:<7} on {len(f.nodes)}/{len(g.nodes)}: {f.message}")
    if fleet.outliers:
        lines.append("")
        lines.append(f"outliers ({len(fleet.outliers)}): {_names(fleet.outliers, 20)}")
    for pool in fleet.pools:
        lines.append("")
        lines += _pool_lines(pool)
    if fleet.fabric is not None and fabric_lines(fleet.fabric):
        lines.append("")
        lines += fabric_lines(fleet.fabric)
    for note in fleet.notes:
        lines.append(f"note: {note}")
    for where, why in unreadable:
        lines.append(f"unreadable: {where}: {why}")
    if unlisted(unreadable):
        lines.append(f"unreadable: {unlisted(unreadable):,} more, counted, not listed")
    return "\n".join(lines) + "\n"


def unlisted(unreadable: list[tuple[str, str]]) -> int:
    """How many unreadable inputs were counted beyond those listed (an analysis.fleet.Unreadable), else 0."""
    return unreadable.unlisted if isinstance(unreadable, Unreadable) else 0


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:g} GiB"


def _pool_lines(pool: Pool) -> list[str]:
    what = f"CXL device serial {pool.key}" if pool.kind == "device" else f"CXL region {pool.key}"
    lines = [f"pool: {what} seen by {len(pool.hosts)} hosts"]
    for h in pool.hosts:
        if h.numa_nodes:
            tiers = ", ".join(f"node {n} tier {'?' if t is None else t}" for n, t in zip(h.numa_nodes, h.tiers,
                                                                                       strict=True))
            online = f"{_gib(h.online_bytes)} online as {tiers}"
        else:
            online = "not online as a NUMA node"
        lines.append(f"  {h.node}: {', '.join(h.memdevs) or '?'} {_gib(h.capacity_bytes)}, {online}"
                     + (f" ({', '.join(h.regions)})" if h.regions else ""))
    return lines


def fleet_document(fleet: Fleet, unreadable: list[tuple[str, str]]) -> dict[str, Any]:
    return envelope(
        "fleet",
        nodes=fleet.total,
        reference_is_majority=fleet.reference_is_majority,
        groups=[
            {
                "id": g.id,
                "fingerprint": g.fingerprint,
                "size": len(g.nodes),
                "nodes": list(g.nodes),
                "shape": g.shape,
                "differs_from_reference": [{"key": k, "reference": a, "group": b} for k, a, b in g.differs],
                "kernels": g.kernels,
                "findings": [
                    {"code": f.code, "severity": f.severity, "message": f.message, "count": len(f.nodes),
                     "nodes": list(f.nodes)}
                    for f in g.findings
                ],
            }
            for g in fleet.groups
        ],
        outliers=list(fleet.outliers),
        pools=[
            {
                "kind": p.kind,
                "key": p.key,
                "hosts": [
                    {"node": h.node, "memdevs": list(h.memdevs), "capacity_bytes": h.capacity_bytes,
                     "online_bytes": h.online_bytes, "numa_nodes": list(h.numa_nodes), "tiers": list(h.tiers),
                     "regions": list(h.regions)}
                    for h in p.hosts
                ],
            }
            for p in fleet.pools
        ],
        unreadable=[{"source": w, "reason": r} for w, r in unreadable],
        unreadable_count=len(unreadable) + unlisted(unreadable),
        notes=list(fleet.notes),
        nvlink=fabric_json(fleet.fabric) if fleet.fabric is not None else None,
    )


def fabric_lines(fabric) -> list[str]:  # noqa: ANN001 - a model.nvfleet.FleetFabric
    """The fleet's NVLink domains as text ([] when no node has a GPU on a multi-node NVLink fabric)."""
    if not (fabric.domains or fabric.split or fabric.unplaced):
        return []
    typical = fabric.typical
    lines = [f"NVLink domains: {len(fabric.domains)} (cluster UUID.clique; typical size {typical} nodes)"]
    for d in fabric.domains:
        tags = [t for t, on in (("partial", d.size < typical), ("degraded", bool(d.excluded))) if on]
        tag = f" [{', '.join(tags)}]" if tags else ""
        lines.append(f"  {d.key}: {d.size} node(s), {len(d.healthy)} healthy{tag}: {_names(d.healthy)}")
        for name, why in d.excluded:
            lines.append(f"    not healthy: {name}: {why}")
    for name, domains in fabric.split:
        lines.append(f"  GPUs disagree: {name}: {', '.join(domains)}")
    for name, why in fabric.unplaced:
        lines.append(f"  no domain: {name}: {why}")
    for note in fabric.notes:
        lines.append(f"  note: {note}")
    return lines


def fabric_json(fabric) -> dict[str, Any]:  # noqa: ANN001 - a model.nvfleet.FleetFabric
    typical = fabric.typical
    return {
        "typical_size": typical,
        "domains": [{"domain": d.key, "size": d.size, "healthy": list(d.healthy),
                     "not_healthy": [{"node": n, "why": w} for n, w in d.excluded],
                     "partial": d.size < typical, "degraded": bool(d.excluded)} for d in fabric.domains],
        "gpus_disagree": [{"node": n, "domains": list(ds)} for n, ds in fabric.split],
        "no_domain": [{"node": n, "why": w} for n, w in fabric.unplaced],
        "without_nvlink_domain": len(fabric.no_domain),
        "notes": list(fabric.notes),
    }


def drift_text(path: str, fabric, mismatches: list[str], notes: list[str],  # noqa: ANN001
               unreadable: list[tuple[str, str]]) -> str:
    head = (f"numatune fleet --check-topology {path}: {fabric.nodes} node report(s), "
            + (f"{len(mismatches)} mismatch(es)" if mismatches else "the file matches the reports"))
    lines = [head] + [f"  mismatch: {m}" for m in mismatches] + [f"note: {n}" for n in notes]
    lines += [f"unreadable: {w}: {r}" for w, r in unreadable]
    return "\n".join(lines) + "\n"


def drift_document(path: str, fabric, mismatches: list[str], notes: list[str],  # noqa: ANN001
                   unreadable: list[tuple[str, str]]) -> dict[str, Any]:
    return envelope("fleet", nodes=fabric.nodes, check_topology={"file": path, "matches": not mismatches,
                                                                 "mismatches": mismatches, "notes": notes},
                    nvlink=fabric_json(fabric), unreadable=[{"source": w, "reason": r} for w, r in unreadable],
                    unreadable_count=len(unreadable) + unlisted(unreadable))
