"""Optional enrichment for live runs only (root "/"): py-cpuinfo's brand string.

psutil, pyudev and py-cpuinfo cannot read a saved root, so no reader depends on them; their absence
or failure never breaks a report. Imported lazily by the CLI, never on the JSON fast path of a
saved tree.
"""

from __future__ import annotations

from numatune.model.topology import Topology


def enrich_topology(topo: Topology) -> Topology:
    """Fill the CPU model from py-cpuinfo when /proc/cpuinfo gave none (e.g. arm64)."""
    if topo.cpu.model and not topo.cpu.model.startswith("ARM implementer"):
        return topo
    try:
        import cpuinfo  # py-cpuinfo

        brand = cpuinfo.get_cpu_info().get("brand_raw")
    except Exception:  # noqa: BLE001 - enrichment only; any failure leaves the report as it was
        return topo
    if not brand:
        return topo
    return topo._replace(cpu=topo.cpu._replace(model=brand, model_source="py-cpuinfo"))
