"""A cluster's ResourceSlices against the node (`check --resource-slices`): the standard attributes each DRA
driver publishes for this node's devices, compared with what the standard derives from the node itself
(numatune.plan.dra). Codes NT540-NT544 are stable. Pure: parsed slices and the topology in, findings out.

A published device is matched to a PCI function by its `resource.kubernetes.io/pciBusID`, else by a
driver-local attribute that holds a PCI address (NVIDIA's older `pcieBusID`, AMD's `pciAddr`, ...).
A device with no PCI address (a MIG instance without one, a CPU, a channel) cannot be checked and is
counted as such, never passed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from numatune.model.document import Doc
from numatune.model.findings import Finding, Severity, register
from numatune.model.order import pci_sort_key
from numatune.model.topology import Topology
from numatune.plan.dra import NUMA_NODE, PCI_BUS_ID, PCIE_ROOT, DeviceAttributes

NT540 = register("NT540", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong pcieRoot for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/pcieRoot other than the root complex its PCI
    function sits under (/sys/bus/pci/devices/BDF links to /sys/devices/pciDDDD:BB/...). A claim that keeps
    a GPU with its NIC by matchAttribute on pcieRoot then pairs devices on different root complexes (the
    transfer crosses the CPU or the socket link) and refuses pairs that share one.""")
NT541 = register("NT541", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong numaNode for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/numaNode other than its PCI function's sysfs
    numa_node (scalar form), or a list that is not that node followed by its same-socket nodes at the minimum
    SLIT distance (list form). On Grace Hopper and Grace Blackwell the published node is often the GPU's HBM
    node (CPU-less, what NVML reports), which no NIC or CPU shares: GPU and NIC are aligned on the wrong
    thing (dra-driver-nvidia-gpu issue 1242).""")
NT542 = register(
    "NT542", Severity.WARNING, "scheduler", "a DRA driver publishes a numaNode for a device without one", """
    The device's numa_node is -1 (the firmware gives its PCI function no NUMA affinity), and the standard
    says such a device must not publish resource.kubernetes.io/numaNode: a made-up value matches every other
    device given the same one.""")
NT543 = register("NT543", Severity.WARNING, "scheduler", "a DRA device lacks a standard attribute claims match on", """
    A device the node has a value for publishes no resource.kubernetes.io/pcieRoot (or numaNode, or
    pciBusID): a claim whose constraints use matchAttribute on that name can never be given this device
    together with another one, and it cannot be told apart from another device of the same model.""")
NT544 = register("NT544", Severity.ERROR, "scheduler", "a DRA device names a PCI address the node does not have", """
    A ResourceSlice for this node publishes a device whose PCI address is not a device of the node (or not
    one of the kinds DRA drivers publish): a slice from another node, or a stale one after a device was
    removed or renumbered.""")

#: Driver-local attribute names (the part after any domain) that hold the device's PCI address, checked after
#: the standard one.
LOCAL_ADDRESS_KEYS = ("pciBusID", "pcieBusID", "pciAddress", "pciAddr", "pci_bus_id", "busID")


def _value(attr: Any) -> Any:
    """A DeviceAttribute's one value ({"string": ..}, {"int": ..}, {"ints": [..]}, ...), None when malformed."""
    if not isinstance(attr, Mapping):
        return None
    for key in ("string", "int", "ints", "strings", "bool", "bools", "version"):
        if key in attr:
            return attr[key]
    return None


def slice_devices(doc: Doc) -> list[Mapping[str, Any]]:
    """The devices of one ResourceSlice (resource.k8s.io/v1 `devices[]`, v1beta1 `devices[].basic`): the slice's
    structure is read through model.document (a list where a mapping goes is exit 3 naming the field); the
    attributes' values are what the driver published, judged by the checks (a wrong form is a finding)."""
    out = []
    for d in doc.mapping("spec").list("devices"):
        body = d.mapping("basic") if d.mapping().at("basic").present else d
        out.append({"name": d.text("name", default="?"), "attributes": body.mapping("attributes").value})
    return out


def _normal_bdf(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    t = text.strip().lower()
    if t.count(":") == 1:
        t = "0000:" + t
    return t if pci_sort_key(t) != (1 << 40,) else None


def published_address(attrs: Mapping[str, Any]) -> tuple[str | None, str]:
    """(the device's PCI address, which attribute gave it)."""
    bdf = _normal_bdf(_value(attrs.get(PCI_BUS_ID)))
    if bdf:
        return bdf, PCI_BUS_ID
    for key, attr in attrs.items():  # the driver's own names, qualified (dra.net/pciAddress) or not
        if str(key).rpartition("/")[2] in LOCAL_ADDRESS_KEYS:
            bdf = _normal_bdf(_value(attr))
            if bdf:
                return bdf, str(key)
    return None, ""


def _nodes_of(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def _node_kind(topo: Topology, node_id: int) -> str:
    node = topo.node(node_id)
    if node is None:
        return f"node {node_id} (not a node of this machine)"
    if not node.cpus:
        return f"node {node_id} (CPU-less, {node.kind} memory)"
    return f"node {node_id}"


def check_slices(slices: Sequence[tuple[str, str, Doc]], truth: Sequence[DeviceAttributes],
                 topo: Topology) -> tuple[list[Finding], int, int]:
    """(findings, devices checked, devices without a PCI address) for (slice name, driver, slice) triples."""
    by_bdf = {a.bdf: a for a in truth}
    found: list[Finding] = []
    checked = unaddressed = 0
    for slice_name, driver, doc in slices:
        for dev in slice_devices(doc):
            attrs = dev["attributes"]
            who = f"{driver} device {dev['name']}"
            bdf, source = published_address(attrs)
            if bdf is None:
                unaddressed += 1
                continue
            checked += 1
            true = by_bdf.get(bdf)
            subject = f"{who} ({bdf})"
            if true is None:
                found.append(NT544(f"{who} in ResourceSlice {slice_name} has PCI address {bdf} ({source}), which "
                                   "is not a GPU, NIC, NVMe, CXL device or accelerator of this node",
                                   "check the slice's nodeName and restart the driver's kubelet plugin on this "
                                   "node so it republishes", subject))
                continue
            found += list(_check_device(who, subject, attrs, true, topo))
    return found, checked, unaddressed


def _check_device(who: str, subject: str, attrs: Mapping[str, Any], true: DeviceAttributes,
                  topo: Topology) -> Iterator[Finding]:
    name = f"{who} ({true.label + ', ' if true.label else ''}{true.bdf})"
    if PCI_BUS_ID not in attrs:
        yield NT543(f"{name} publishes no {PCI_BUS_ID}", f"publish {PCI_BUS_ID}: {true.pci_bus_id!r}", subject)
    root = _value(attrs.get(PCIE_ROOT)) if PCIE_ROOT in attrs else None
    if PCIE_ROOT in attrs and true.pcie_root is not None and root != true.pcie_root:
        yield NT540(f"{name} publishes {PCIE_ROOT} {root!r}; it sits under root complex {true.pcie_root!r}",
                    f"publish {PCIE_ROOT}: {true.pcie_root!r} (the helper library's "
                    "GetPCIeRootAttributeByPCIBusID derives it from sysfs)", subject)
    elif PCIE_ROOT not in attrs and true.pcie_root is not None:
        yield NT543(f"{name} publishes no {PCIE_ROOT}: matchAttribute on it can never select this device",
                    f"publish {PCIE_ROOT}: {true.pcie_root!r}", subject)
    if NUMA_NODE not in attrs:
        if true.numa_node is not None:
            yield NT543(f"{name} publishes no {NUMA_NODE}: matchAttribute on it can never select this device",
                        f"publish {NUMA_NODE}: {true.numa_node} (or the list {list(true.numa_nodes or ())} "
                        "where DRAListTypeAttributes is on)", subject)
        return
    raw = _value(attrs.get(NUMA_NODE))
    nodes = _nodes_of(raw)
    if true.numa_node is None:
        yield NT542(f"{name} publishes {NUMA_NODE} {raw!r}, but its numa_node is -1 (no NUMA affinity)",
                    f"do not publish {NUMA_NODE} for it", subject)
        return
    is_list = isinstance(raw, list)
    want = tuple(true.numa_nodes or (true.numa_node,)) if is_list else (true.numa_node,)
    if nodes == want:
        return
    if nodes is None:
        shown = f"{raw!r} (not a node id{' list' if is_list else ''})"
    else:
        shown = ", ".join(_node_kind(topo, n) for n in nodes)
    hbm = nodes is not None and nodes[0] != true.numa_node and topo.node(nodes[0]) is not None \
        and not topo.node(nodes[0]).cpus
    why = (f"; {nodes[0]} is a CPU-less memory node (the GPU's own memory, as NVML reports it), which no NIC "
           "or CPU shares") if hbm else ""
    yield NT541(f"{name} publishes {NUMA_NODE} {shown}; its PCI function's numa_node is {true.numa_node}"
                + (f" and the list form is {list(want)}" if is_list else "") + why,
                f"publish {NUMA_NODE}: " + (f"{{ints: {list(want)}}}" if is_list else str(true.numa_node))
                + " (the helper library's GetNUMANodeAttributeByPCIBusID reads the PCI function's numa_node)",
                subject)
