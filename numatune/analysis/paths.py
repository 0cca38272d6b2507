"""The GPU/NIC connection matrix in the style of `nvidia-smi topo -m`, from the PCI hierarchy alone.

Works for any vendor and offline, because it needs only each device's sysfs path:
X same device; PIX at most one PCIe bridge between them; PXB several bridges, same host bridge
subtree; PHB through the PCIe host bridge; NODE across host bridges within one NUMA node;
SYS across the inter-socket link (or a node that is unknown).
"""

from __future__ import annotations

from numatune.model._record import record
from numatune.model.topology import PciDevice, Topology

LEGEND = {
    "X": "self",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges, without crossing the host bridge",
    "PHB": "a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between host bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (e.g. UPI, xGMI)",
}


@record
class PathMatrix:
    devices: tuple[str, ...]  # BDFs, GPUs first then NICs
    labels: tuple[str, ...]  # "GPU0", "NIC0" ...
    cells: tuple[tuple[str, ...], ...]
    nodes: tuple[int | None, ...]
    local_cpus: tuple[tuple[int, ...], ...]


def connection(a: PciDevice, b: PciDevice) -> str:
    if a.bdf == b.bdf:
        return "X"
    if a.host_bridge and a.host_bridge == b.host_bridge and a.path and b.path:
        chain_a, chain_b = a.ancestors, b.ancestors
        common = 0
        for x, y in zip(chain_a, chain_b, strict=False):
            if x != y:
                break
            common += 1
        if common == 0:
            return "PHB"
        # Bridges crossed: from each device up to (and including) the common ancestor.
        crossed = (len(chain_a) - common) + (len(chain_b) - common) + 1
        return "PIX" if crossed <= 1 else "PXB"
    node_a, node_b = a.node, b.node
    if node_a is not None and node_a == node_b:
        return "NODE"
    return "SYS"


def path_matrix(topo: Topology) -> PathMatrix:
    gpus = [d for d in topo.devices if d.kind == "gpu"]
    nics = [d for d in topo.devices if d.kind == "nic"]
    devs = gpus + nics
    labels = [f"GPU{i}" for i in range(len(gpus))] + [f"NIC{i}" for i in range(len(nics))]
    cells = tuple(tuple(connection(a, b) for b in devs) for a in devs)
    return PathMatrix(
        devices=tuple(d.bdf for d in devs),
        labels=tuple(labels),
        cells=cells,
        nodes=tuple(d.node for d in devs),
        local_cpus=tuple(d.local_cpus for d in devs),
    )


RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def nearest_nic(topo: Topology, gpu: PciDevice) -> tuple[PciDevice, str] | None:
    """The NIC a GPU should use for GPUDirect RDMA: the one with the shortest path."""
    best = None
    for nic in topo.nics:
        kind = connection(gpu, nic)
        if best is None or RANK[kind] < RANK[best[1]]:
            best = (nic, kind)
    return best
