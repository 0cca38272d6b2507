"""A KubeletConfiguration fragment (kubelet.config.k8s.io/v1beta1) that makes kubelet place pods by NUMA node.

Pure. The rules kubelet enforces at start-up and that this module keeps:
- the static CPU manager needs a CPU reservation; `reservedSystemCPUs` gives it as an explicit list
  (here: the cores `--reserve-cores` keeps on every node with CPUs, the ones `irq plan` leaves to
  interrupts), so every NUMA node keeps CPUs for pods and for the node's own work;
- the Static memory manager refuses to start unless the `reservedMemory` of all NUMA nodes sums to
  kubeReserved + systemReserved + evictionHard's memory.available (memory only);
- the topology manager refuses more than 8 NUMA nodes unless `max-allowable-numa-nodes` is raised;
- the topology and memory managers hold NUMA nodes in a 64-bit mask (kubelet's
  pkg/kubelet/cm/topologymanager/bitmask: "bit number must be in range 0-63"): a machine with a NUMA id
  above 63 (POWER9 GPU memory nodes 250-255) cannot be described to them, so they are left off and the
  fragment says why;
- the device manager makes a pod's topology hints by enumerating every subset of the NUMA nodes kubelet
  knows, CPU-less ones included (bitmask.IterateBitMasks: 2^n masks): on a GB200 tray's 34 nodes (2 with
  CPUs, 32 GPU-memory and MIG placeholder nodes) that is 1.7e10 masks and admission never finishes
  (kubernetes#135541, #135581): above HINT_NODES_LIMIT nodes the topology manager (and the memory manager
  that works through it) is not enabled, and the fragment says what to use instead (DRA's numaNode and
  pcieRoot attributes: `numatune emit dra`; kubelet's proposed `restrict-to-cpu-numa-nodes` option, PR
  #138172, where a kubelet has it);
- a GPU's memory onlined as a NUMA node (Grace in NUMA mode, POWER9) is node memory to kubelet: the Static
  memory manager could pin a pod's memory to a GPU's HBM, so it is not enabled there.
What cannot be derived safely is not written: no static CPU manager without cores to reserve (a tree
without CPU topology, or --reserve-cores 0), no topology or memory manager without NUMA information or
with NUMA ids kubelet cannot represent; each omission is a note (a comment in the YAML).
"""

from __future__ import annotations

from typing import Any

from numatune.cpulist import format_cpulist
from numatune.model._record import record
from numatune.model.topology import Topology

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")
EVICTION_MIB = 100  # kubelet's default evictionHard memory.available
TOPOLOGY_MANAGER_MAX_NODES = 8  # kubelet's limit without max-allowable-numa-nodes
BITMASK_MAX_NODE = 63  # kubelet's NUMA bitmask holds node ids 0-63
HINT_NODES_LIMIT = 24  # 2^24 = 16.8 million NUMA masks per device hint: beyond this, admission does not finish
RESTRICT_OPTION = "restrict-to-cpu-numa-nodes"  # kubernetes PR #138172 (proposed)


def hint_masks_note(all_nodes: int, cpu_nodes: int) -> str:
    """Why the topology manager is not enabled on a machine with `all_nodes` NUMA nodes (> HINT_NODES_LIMIT)."""
    return (f"{all_nodes} NUMA nodes ({cpu_nodes} with CPUs): kubelet's device manager makes topology hints over "
            f"every subset of them (2^{all_nodes} = {2 ** all_nodes:.1e} masks; kubernetes#135541: pods stay "
            "Pending), so topologyManagerPolicy and memoryManagerPolicy are not written (kubelet's default, none). "
            "Instead: align GPUs, NICs and CPUs with DRA (`numatune emit dra`: resource.kubernetes.io/numaNode and "
            f"pcieRoot), or, on a kubelet that has it, topologyManagerPolicyOptions {RESTRICT_OPTION}: \"true\" "
            "(kubernetes PR #138172) with topologyManagerPolicy restricted, which limits hints to the nodes with "
            "CPUs")


@record
class KubeletPlan:
    config: dict[str, Any]
    notes: tuple[str, ...]


def kubelet_plan(topo: Topology, *, reserve_cores: int = 1, kube_reserved_mib: int = 1024,
                 system_reserved_mib: int = 1024, topology_policy: str = "restricted",
                 scope: str = "pod", isolated: frozenset[int] = frozenset()) -> KubeletPlan:
    from numatune.plan.cores import cluster_summary
    from numatune.plan.slurm import housekeeping_cpus, too_small_to_reserve

    notes: list[str] = []
    cpu_nodes = [n for n in topo.nodes if n.cpus]
    reserved = housekeeping_cpus(topo, reserve_cores, isolated) if reserve_cores else ()
    # A node whose every CPU would be reserved leaves guaranteed pods nothing there (check: NT530); with
    # no node left to reserve on (a 1-CPU machine) the static CPU manager cannot be used at all.
    whole = too_small_to_reserve(topo, reserve_cores, isolated) if reserve_cores else []
    if whole:
        notes.append(f"node(s) {format_cpulist(whole)} have no more than {reserve_cores} core(s): none of their "
                     "CPUs is reserved (reserving all would leave guaranteed pods no CPU there)")
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
    }
    all_nodes = topo.nodes if topo.numa_kernel else ()  # kubelet (cAdvisor) counts every node, CPU-less too
    too_high = [n.id for n in all_nodes if n.id > BITMASK_MAX_NODE]
    too_many = len(all_nodes) > HINT_NODES_LIMIT
    numa = bool(all_nodes) and not too_high and not too_many
    if too_many and not too_high:
        notes.append(hint_masks_note(len(all_nodes), len(cpu_nodes)))
    if too_high:
        notes.append(f"NUMA node id(s) {format_cpulist(too_high)} above {BITMASK_MAX_NODE}: kubelet's topology "
                     "and memory managers keep NUMA nodes in a 64-bit mask and cannot represent them, so neither "
                     "is enabled (topologyManagerPolicy and memoryManagerPolicy stay at kubelet's default, none)")
    elif not all_nodes:
        notes.append("no NUMA information in this tree (no /sys/devices/system/node): topology and memory manager "
                     "settings are not written (nothing to align to)")
    if reserved:
        config["cpuManagerPolicy"] = "static"
        if topo.cpu.threads_per_core > 1:
            config["cpuManagerPolicyOptions"] = {"full-pcpus-only": "true"}
            notes.append(f"SMT ({topo.cpu.threads_per_core} threads per core): full-pcpus-only gives guaranteed pods "
                         "whole cores, never a sibling shared with another pod")
    elif reserve_cores and whole:
        notes.append("cpuManagerPolicy not written (kubelet's default, none): the static CPU manager needs a CPU "
                     "reservation, and every node with CPUs has too few to reserve one and keep one for pods")
    elif reserve_cores:
        notes.append("cpuManagerPolicy not written (kubelet's default, none): the static CPU manager needs CPUs to "
                     "reserve and this tree gives no CPU topology to pick them from; add cpuManagerPolicy: static "
                     "with reservedSystemCPUs by hand")
    else:
        notes.append("--reserve-cores 0: cpuManagerPolicy not written (kubelet's default, none), since the static "
                     "CPU manager refuses to start without a CPU reservation")
    if numa:
        config["topologyManagerPolicy"] = topology_policy
        config["topologyManagerScope"] = scope
    if numa and len(all_nodes) > TOPOLOGY_MANAGER_MAX_NODES:
        config["topologyManagerPolicyOptions"] = {"max-allowable-numa-nodes": str(len(all_nodes))}
        notes.append(f"{len(all_nodes)} NUMA nodes: kubelet's topology manager refuses more than "
                     f"{TOPOLOGY_MANAGER_MAX_NODES} unless max-allowable-numa-nodes is raised (Kubernetes >= 1.31)")
    gpu_mem = [n.id for n in topo.nodes if n.kind == "gpu" and n.memory_total_kib]
    memory_manager = numa and not gpu_mem
    if numa and gpu_mem:
        notes.append(f"GPU memory node(s) {format_cpulist(gpu_mem)} (a GPU's HBM onlined as NUMA memory): kubelet "
                     "counts them as node memory and the Static memory manager could pin a pod's memory there, so "
                     "memoryManagerPolicy is not written; CPUs and devices are still aligned by the topology manager")
    if memory_manager:
        config["memoryManagerPolicy"] = "Static"
    clusters = cluster_summary(topo) if numa else None
    if clusters:
        held = "CPUs, devices and memory" if memory_manager else "CPUs and devices"
        notes.append(f"{clusters}: the topology manager ({topology_policy}) aligns a pod's {held} to as few NUMA "
                     "nodes as hold them, so a pod that fits one cluster gets one cluster's cores and memory and the "
                     "socket's other clusters stay idle unless other pods fill them; cpuManagerPolicyOptions "
                     "align-by-socket: \"true\" aligns CPUs to whole sockets instead (alpha: feature gate "
                     "CPUManagerPolicyAlphaOptions; kubelet refuses it with topologyManagerPolicy single-numa-node)")
    if reserved:
        config["reservedSystemCPUs"] = format_cpulist(reserved)
        kept = len(cpu_nodes) - len(whole)
        notes.append(f"reservedSystemCPUs: {reserve_cores} core(s) of each of {kept} node(s) with CPUs "
                     "(the first, on hybrid CPUs the least performant: where `numatune irq plan --reserve-cores` "
                     "puts interrupts); kubeReserved/systemReserved cpu are then ignored by kubelet")
    config["kubeReserved"] = {"memory": f"{kube_reserved_mib}Mi"}
    config["systemReserved"] = {"memory": f"{system_reserved_mib}Mi"}
    config["evictionHard"] = {"memory.available": f"{EVICTION_MIB}Mi"}
    total = kube_reserved_mib + system_reserved_mib + EVICTION_MIB
    if memory_manager:
        config["reservedMemory"] = [{"numaNode": nid, "limits": {"memory": f"{mib}Mi"}}
                                    for nid, mib in split_reserved_memory(topo, reserved, total)]
        notes.append(f"reservedMemory sums to {total}Mi = kubeReserved {kube_reserved_mib}Mi + systemReserved "
                     f"{system_reserved_mib}Mi + evictionHard {EVICTION_MIB}Mi, as the Static memory manager "
                     "requires; evictionHard lists memory.available only: set mergeDefaultEvictionSettings or add "
                     "nodefs/imagefs")
    cxl = [n.id for n in topo.nodes if not n.cpus and n.kind in ("cxl", "pmem", "unknown") and n.memory_total_kib]
    if cxl:
        notes.append(f"CPU-less memory node(s) {', '.join(map(str, cxl))}: the memory manager does not pin pods there; "
                     "kubelet sees them only as part of node memory")
    return KubeletPlan(config, tuple(notes))


def split_reserved_memory(topo: Topology, reserved_cpus: tuple[int, ...], total_mib: int) -> list[tuple[int, int]]:
    """(node, MiB) summing to `total_mib`: spread evenly over the nodes whose CPUs are reserved (where system
    daemons run), else over all nodes with CPUs; the remainder on the first. Every entry is > 0 (kubelet refuses
    zero limits)."""
    reserved = set(reserved_cpus)
    nodes = [n.id for n in topo.nodes if n.cpus and (not reserved or reserved & set(n.cpus))]
    if not nodes:
        nodes = [topo.nodes[0].id] if topo.nodes else [0]
    nodes = nodes[: max(1, min(len(nodes), total_mib))]
    per, extra = divmod(total_mib, len(nodes))
    return [(nid, per + (extra if i == 0 else 0)) for i, nid in enumerate(nodes)]


# -- YAML ---------------------------------------------------------------------------------------
def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for the plain data kubelet's config uses (dicts, lists, str, int, bool). Strings are
    quoted whenever YAML could read them as something else ("true", "8", "0-3,8")."""
    lines: list[str] = []
    _emit(value, indent, lines)
    return "\n".join(lines) + "\n"


def _emit(value: Any, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{_scalar(str(k))}:")
                _emit(v, indent + 2, lines)
            else:
                lines.append(f"{pad}{_scalar(str(k))}: {_scalar(v)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                lines.append(f"{pad}- {sub[0].lstrip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(f"{pad}{_scalar(value)}")


_PLAIN_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", ""}


# In a double-quoted YAML scalar: the quote and the backslash, and every control character (C0, DEL, C1), which
# YAML does not allow raw (a newline would be folded into a space), as the escape that reads back the same.
_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\t"): "\\t",
            **{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if c not in (0x09, 0x0A)}}


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    s = str(v)
    looks_numeric = s[:1].isdigit() or s[:1] in "-+."
    if s.lower() in _YAML_WORDS or looks_numeric or not set(s) <= _PLAIN_OK:
        return '"' + s.translate(_ESCAPES) + '"'
    return s
