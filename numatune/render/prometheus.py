"""Prometheus text exposition (node_exporter textfile collector) for inspect, audit and irq.

A fleet charts what numatune sees by writing these files into the collector's directory, e.g.
`numatune inspect -f prometheus > /var/lib/node_exporter/textfile/numatune.prom.$$ && mv ...`.
Every metric is named `numatune_*`, has HELP and TYPE lines and uses the labels node, device,
pid, rank and role where they apply. audit and irq are rendered from their versioned JSON documents
(`numatune.audit/2`, `numatune.irq/1`) so this module depends only on documented fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from numatune import __version__
from numatune.model.findings import Finding, Severity
from numatune.model.paths import nearest_nic
from numatune.model.topology import Topology
from numatune.render.printable import printable


@lru_cache(maxsize=4096, typed=True)  # label values repeat (node ids: a million distances of a 1,000-node tree)
def _escape(value: object) -> str:
    """A label value: control characters made printable first (render.printable: ESC becomes the four
    characters `\\x1b`), then the exposition format's three escapes, its backslash included."""
    return printable(str(value)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if value != value:  # NaN
        return "NaN"
    return repr(float(value))


class Exposition:
    """Metric families in insertion order; a family is written once with all its samples."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, help_text: str, value: float | int | bool | None, /, **labels: object) -> None:
        """Add one sample; None values are left out (unknown is not zero)."""
        family = self._families.setdefault(name, (kind, help_text, []))
        if value is None:
            return
        sample = name
        if labels:
            sample += "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"
        family[2].append(f"{sample} {_number(value)}")

    def add_rows(self, name: str, kind: str, help_text: str, labels: str, last: str,
                 rows: Iterable[tuple[object, int]]) -> None:
        """Add one sample a (LAST label's value, integer value) of `rows`, each labelled `labels` (written
        `k="v",`) first: what `add` makes of them, joined as one piece (a node's thousand distances are one
        string, not a thousand: a 1,000-node tree's million samples held 290 MB)."""
        family = self._families.setdefault(name, (kind, help_text, []))
        head = f"{name}{{{labels}{last}=\""
        text = "\n".join([f'{head}{_escape(v)}"}} {_number(value)}' for v, value in rows])
        if text:
            family[2].append(text)

    def render(self) -> str:
        out = []
        for name, (kind, help_text, samples) in self._families.items():
            if not samples:
                continue
            out.append(f"# HELP {name} {_escape(help_text)}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(samples)
        return "\n".join(out) + "\n" if out else ""


def _node(node: int | None) -> str:
    return "unknown" if node is None else str(node)


def _findings(m: Exposition, findings: Iterable[dict[str, Any]], what: str) -> None:
    findings = list(findings)
    for sev in Severity:
        m.add("numatune_findings", "gauge", f"Findings of the last numatune {what} run, by severity.",
              sum(1 for f in findings if f.get("severity") == sev.value), command=what, severity=sev.value)
    for f in findings:
        m.add("numatune_finding", "gauge", "One finding (code, severity, subject); the value is always 1.", 1,
              command=what, code=f.get("code", ""), severity=f.get("severity", ""), subject=f.get("subject", ""))


def _info(m: Exposition, what: str) -> None:
    m.add("numatune_info", "gauge", "numatune version that wrote these metrics.", 1, version=__version__, command=what)


# -- inspect ---------------------------------------------------------------------------------------


def inspect_metrics(topo: Topology, findings: list[Finding]) -> str:
    """The node's shape: sockets, nodes, memory, distances, tiers, device placement, settings, findings."""
    m = Exposition()
    _info(m, "inspect")
    m.add("numatune_sockets", "gauge", "CPU sockets (physical packages) with online CPUs.", len(topo.cpu.sockets))
    m.add("numatune_cpus", "gauge", "Logical CPUs by state.", len(topo.cpu.online), state="online")
    m.add("numatune_cpus", "gauge", "Logical CPUs by state.", len(topo.cpu.offline), state="offline")
    m.add("numatune_threads_per_core", "gauge", "SMT threads per core.", topo.cpu.threads_per_core)
    for k in topo.cpu_kinds.kinds:
        m.add("numatune_cpu_kind_cpus", "gauge",
              "Online CPUs of a CPU kind (rank 0 = most performant; role performance, efficiency or unranked).",
              len(k.cpus), rank=str(k.rank), role=k.role, name=k.name or "", part=k.part or "")
        m.add("numatune_cpu_kind_capacity", "gauge", "Smallest cpu_capacity of a CPU kind's CPUs (1024 = biggest).",
              min(k.capacities) if k.capacities else None, rank=str(k.rank), part=k.part or "")
        m.add("numatune_cpu_kind_max_frequency_hertz", "gauge", "Lowest cpuinfo_max_freq of a CPU kind's CPUs.",
              min(k.max_mhz) * 1_000_000 if k.max_mhz else None, rank=str(k.rank), part=k.part or "")
    m.add("numatune_numa_nodes", "gauge", "NUMA nodes (CPU-less memory nodes included).", len(topo.nodes))
    for n in topo.nodes:
        node = str(n.id)
        m.add("numatune_node_cpus", "gauge", "CPUs of a NUMA node (0 for CPU-less memory nodes).", len(n.cpus),
              node=node, kind=n.kind)
        kib = n.memory_total_kib
        m.add("numatune_node_memory_total_bytes", "gauge", "Memory of a NUMA node (nodeN/meminfo MemTotal).",
              kib * 1024 if kib is not None else None, node=node)
        free = n.memory_free_kib
        m.add("numatune_node_memory_free_bytes", "gauge", "Free memory of a NUMA node (nodeN/meminfo MemFree).",
              free * 1024 if free is not None else None, node=node)
        m.add("numatune_node_memory_tier", "gauge", "Kernel memory tier of a node (smaller is faster).", n.tier,
              node=node)
        m.add_rows("numatune_node_distance", "gauge", "SLIT distance from a node to another (10 = local).",
                   f'node="{_escape(node)}",', "target", ((str(t), d) for t, d in sorted(n.distances.items())))
    cxl = [n for n in topo.nodes if n.kind == "cxl"]
    m.add("numatune_cxl_memory_bytes", "gauge", "CXL memory online as NUMA nodes.",
          sum((n.memory_total_kib or 0) for n in cxl) * 1024)
    for d in topo.devices:
        if d.kind not in ("gpu", "nic", "nvme", "accelerator", "cxl"):
            continue
        m.add("numatune_device_info", "gauge", "A GPU, NIC, NVMe, CXL or accelerator device and its NUMA node.", 1,
              device=d.bdf, kind=d.kind, node=_node(d.node), driver=d.driver or "",
              name=", ".join(d.netdevs + d.rdma + d.nvme))
        m.add("numatune_device_numa_node_known", "gauge",
              "1 when the kernel reports the device's NUMA node, 0 when it says -1.", d.numa_node is not None,
              device=d.bdf, kind=d.kind)
    if topo.nics:
        for g in topo.gpus:
            best = nearest_nic(topo, g)
            if best is None:
                continue
            m.add("numatune_gpu_nic_local", "gauge",
                  "1 when a GPU's nearest NIC is on its own socket (path better than SYS), else 0.",
                  best[1] != "SYS", device=g.bdf, node=_node(g.node), nic=best[0].bdf, path=best[1])
    s = topo.settings
    m.add("numatune_kernel_numa_balancing", "gauge", "kernel.numa_balancing (0 off, 1 normal, 2 memory tiering).",
          s.numa_balancing)
    if s.transparent_hugepage:
        m.add("numatune_kernel_transparent_hugepage", "gauge", "Transparent hugepage mode in force (value 1).", 1,
              mode=s.transparent_hugepage)
    m.add("numatune_kernel_zone_reclaim_mode", "gauge", "vm.zone_reclaim_mode.", s.zone_reclaim_mode)
    m.add("numatune_kernel_demotion_enabled", "gauge", "Memory tiering demotion (1 on, 0 off).",
          s.demotion_enabled)
    if s.release:
        m.add("numatune_kernel_info", "gauge", "Kernel release (value 1).", 1, release=s.release)
    _findings(m, ({"code": f.code, "severity": f.severity.value, "subject": f.subject} for f in findings),
              "inspect")
    return m.render()


# -- audit -----------------------------------------------------------------------------------------


def audit_metrics(doc: dict[str, Any]) -> str:
    """Per process (labels pid, rank, comm, role: launcher, rank, worker, helper or process): memory by node, remote
    and slow-tier shares, verdict, GPU and home nodes."""
    m = Exposition()
    _info(m, "audit")
    processes = doc.get("processes") or []
    m.add("numatune_audit_processes", "gauge", "Processes in the last numatune audit.", len(processes))
    for p in processes:
        rank = p.get("rank")
        labels = {"pid": str(p.get("pid")), "rank": "" if rank is None else str(rank), "comm": p.get("comm") or "",
                  "role": p.get("role") or "process"}
        for node, size in sorted((p.get("memory_by_node") or {}).items(), key=lambda kv: _sort_key(kv[0])):
            m.add("numatune_process_memory_bytes", "gauge", "Resident memory of a process on a NUMA node "
                  "(numa_maps).", size, **labels, node=str(node))
        m.add("numatune_process_remote_ratio", "gauge",
              "Share of a process's resident memory on a remote DRAM node (0..1).", p.get("remote_ratio"), **labels)
        m.add("numatune_process_slow_tier_ratio", "gauge",
              "Share of a process's resident memory on a slower tier (CXL, PMem) (0..1).",
              p.get("slow_tier_ratio"), **labels)
        m.add("numatune_process_remote_bytes", "gauge", "Resident bytes on remote DRAM nodes.",
              p.get("remote_bytes"), **labels)
        m.add("numatune_process_slow_tier_bytes", "gauge", "Resident bytes on slower-tier nodes.",
              p.get("slow_tier_bytes"), **labels)
        threads = p.get("threads")
        m.add("numatune_process_threads", "gauge", "Threads of a process.",
              len(threads) if isinstance(threads, list) else None, **labels)
        off = p.get("threads_off_home")
        m.add("numatune_process_threads_off_home", "gauge", "Threads that last ran off the process's home node(s).",
              len(off) if isinstance(off, list) else None, **labels)
        for node in p.get("home_nodes") or []:
            m.add("numatune_process_home_node", "gauge", "A home NUMA node of a process (value 1).", 1, **labels,
                  node=str(node))
        counters = p.get("access_counters") or {}
        values = counters.get("values") or {}
        m.add("numatune_process_access_remote_ratio", "gauge",
              "Remote share of sampled memory accesses (source: pmu, numa_balancing).",
              values.get("remote_ratio"), **labels, source=counters.get("source") or "")
        gpu = p.get("gpu")
        if isinstance(gpu, dict):
            m.add("numatune_process_gpu_info", "gauge", "The GPU a process uses and its node (value 1).", 1, **labels,
                  device=gpu.get("bdf") or "unknown", node=_node(gpu.get("node")))
        verdict = p.get("verdict")
        if verdict:
            for v in sorted({"ok", "warning", "misplaced", verdict}):
                m.add("numatune_process_verdict", "gauge",
                      "Verdict on a process's placement: 1 for the verdict in force, 0 for the others.",
                      verdict == v, **labels, verdict=v)
        _pinned_metrics(m, p, labels)
    return m.render()


def _pinned_metrics(m: Exposition, p: dict[str, Any], labels: dict[str, str]) -> None:
    """A process's likely pinned host memory (`pinned_host`) and the GPU driver memory charged to it."""
    pinned = p.get("pinned_host")
    if isinstance(pinned, dict):
        for node, size in sorted((pinned.get("bytes_by_node") or {}).items(), key=lambda kv: _sort_key(kv[0])):
            m.add("numatune_process_pinned_host_bytes", "gauge", "Likely pinned host memory of a CUDA process on a "
                  "NUMA node: its shared anonymous mappings, the CUDA host allocator's chunks (inferred from "
                  "outside, not confirmed).", size, **labels, node=str(node))
        m.add("numatune_process_pinned_host_chunks", "gauge", "Likely pinned host chunks of a CUDA process (shared "
              "anonymous mappings with resident pages).", pinned.get("chunk_count"), **labels)
        m.add("numatune_process_pinned_host_off_node_bytes", "gauge", "Likely pinned host bytes off the node of the "
              "process's GPU (finding NT407).", pinned.get("off_node_bytes"), **labels)
        m.add("numatune_process_pinned_host_cache_reuse", "gauge", "1 when the process's pinned chunks show PyTorch's "
              "host cache reusing them across NUMA nodes (finding NT440), else 0.",
              pinned.get("host_cache_reuse") is not None, **labels)
    for device, nodes in sorted((p.get("gpu_driver_memory") or {}).items()):
        for node, size in sorted((nodes or {}).items(), key=lambda kv: _sort_key(kv[0])):
            m.add("numatune_process_gpu_driver_bytes", "gauge", "Resident GPU driver mappings (nvidiactl, nvidia-uvm, "
                  "kfd) charged to a process: a forked worker's inherited ones are charged to its rank only.", size,
                  **labels, device=device, node=str(node))


# -- irq -------------------------------------------------------------------------------------------


def irq_metrics(doc: dict[str, Any]) -> str:
    """Per device and IRQ: counts by CPU node, whether it fires locally, remote share; irqbalance state."""
    m = Exposition()
    _info(m, "irq")
    irqbalance = doc.get("irqbalance") or {}
    m.add("numatune_irqbalance_running", "gauge", "1 when irqbalance runs (it moves IRQs), 0 when not.",
          irqbalance.get("running"))
    for d in doc.get("devices") or []:
        device = d.get("bdf") or d.get("key") or ""
        dev_labels = {"device": device, "kind": d.get("kind") or "", "name": d.get("label") or "",
                      "node": _node(d.get("numa_node"))}
        irqs = d.get("irqs") or []
        m.add("numatune_device_irqs", "gauge", "Interrupts of a device.", len(irqs), **dev_labels)
        judged = [i for i in irqs if i.get("local") is not None]
        m.add("numatune_device_irqs_remote", "gauge",
              "Interrupts of a device routed off its NUMA node (misplaced IRQs).",
              sum(1 for i in judged if i.get("local") is False) if judged else None, **dev_labels)
        for i in irqs:
            labels = {"irq": str(i.get("irq")), "device": device, "node": _node(d.get("numa_node"))}
            m.add("numatune_irq_interrupts_total", "counter", "Interrupts since boot (/proc/interrupts).",
                  i.get("total"), **labels)
            for cpu_node, count in sorted((i.get("per_node") or {}).items(), key=lambda kv: _sort_key(kv[0])):
                m.add("numatune_irq_node_interrupts_total", "counter",
                      "Interrupts since boot by the NUMA node of the CPU that handled them.", count, **labels,
                      cpu_node=str(cpu_node))
            m.add("numatune_irq_remote_share", "gauge",
                  "Share of an IRQ's interrupts handled on another node than its device's (0..1).",
                  i.get("remote_share"), **labels)
            local = i.get("local")
            m.add("numatune_irq_local", "gauge", "1 when an IRQ is routed to its device's node, 0 when not.",
                  local if isinstance(local, bool) else None, **labels)
            managed = i.get("managed")
            m.add("numatune_irq_managed", "gauge", "1 when the kernel manages the IRQ's affinity (cannot be moved).",
                  managed if isinstance(managed, bool) else None, **labels)
    _findings(m, doc.get("findings") or [], "irq")
    return m.render()


def _sort_key(key: str) -> tuple[int, int | str]:
    return (0, int(key)) if str(key).lstrip("-").isdigit() else (1, str(key))
