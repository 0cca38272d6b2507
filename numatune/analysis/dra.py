"""A cluster's ResourceSlices against the node (`check --resource-slices`): the standard attributes each DRA
driver publishes for this node's devices, compared with what the standard derives from the node itself
(numatune.plan.dra). Codes NT540-NT547 are stable. Pure: parsed slices and the topology in, findings out.

A slice is this node's when its `spec.nodeName` names it; with `spec.perDeviceNodeSelection` each device
names its node (`devices[].nodeName`) and only those naming this node are checked. A published device is
matched to a PCI function by its `resource.kubernetes.io/pciBusID`, else by an attribute of the driver's own
that holds a PCI address: dranet's `dra.net/pciAddress` (its older `pciAddressDomain/Bus/Device/Function`
parts), AMD's `pciAddr`, NVIDIA's older `pcieBusID`. A device with no PCI address (a MIG instance without
one, a CPU, a channel) cannot be checked and is counted as such, never passed. A standard attribute that is
missing is a finding only where a claim needs it: on a GPU or NIC, for the attribute the node's GPU+NIC claim
matches on (what `emit dra` writes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from numatune.model._record import record
from numatune.model.findings import Finding, Severity, register
from numatune.model.order import pci_sort_key
from numatune.model.topology import Topology
from numatune.plan.dra import (
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    SLICE_MAX_DEVICES,
    SLICE_MAX_DEVICES_ADVANCED,
    DeviceAttributes,
    helper_numa_node_list,
)

NT540 = register("NT540", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong pcieRoot for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/pcieRoot other than the root complex its PCI
    function sits under (/sys/bus/pci/devices/BDF links to /sys/devices/pciDDDD:BB/...). A claim that keeps
    a GPU with its NIC by matchAttribute on pcieRoot then pairs devices on different root complexes (the
    transfer crosses the CPU or the socket link) and refuses pairs that share one.""")
NT541 = register("NT541", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong numaNode for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/numaNode other than its PCI function's sysfs
    numa_node (scalar form), or a list that is not that node followed by its same-socket nodes at the minimum
    SLIT distance (list form). On Grace Hopper and Grace Blackwell the published node is often the GPU's HBM
    node (CPU-less, what NVML reports), which no NIC or CPU shares: a claim matching GPU and NIC on numaNode
    can never be satisfied (dra-driver-nvidia-gpu issue 1242); pcieRoot is the attribute to match.""")
NT542 = register(
    "NT542", Severity.WARNING, "scheduler", "a DRA driver publishes a numaNode for a device without one", """
    The device's numa_node is -1 (the firmware gives its PCI function no NUMA affinity), and the standard
    says such a device must not publish resource.kubernetes.io/numaNode: a made-up value matches every other
    device given the same one. A GB200 GPU published on its HBM node (NVML's answer) is the common case: no
    NIC shares that node. A device whose numa_node this tree does not hold (a partial capture) is unknown, not
    -1, and is not judged.""")
NT543 = register("NT543", Severity.WARNING, "scheduler", "a DRA device lacks a standard attribute claims match on", """
    A GPU or NIC the node has a value for publishes no resource.kubernetes.io/pcieRoot (or numaNode) while
    the node's GPU+NIC claim (what emit dra writes) matches on that attribute: matchAttribute can never
    select this device together with another one. An attribute no claim of the node uses (pciBusID, which a
    driver may replace by its own address attribute such as dranet's dra.net/pciAddress) is not required.""")
NT544 = register("NT544", Severity.ERROR, "scheduler", "a DRA device names a PCI address the node does not have", """
    A ResourceSlice for this node publishes a device whose PCI address is not a device of the node (or not
    one of the kinds DRA drivers publish): a slice from another node, or a stale one after a device was
    removed or renumbered.""")
NT545 = register("NT545", Severity.WARNING, "scheduler", "a DRA driver publishes numaNode as a one-element list", """
    With DRAListTypeAttributes a device's numaNode list is its PCI function's node followed by the
    same-socket nodes at the minimum SLIT distance; a driver that publishes the node alone as a list (NVIDIA's
    GPU driver does so on purpose until it computes the other nodes) still matches every device whose list
    holds that node, but not a device published on another node of the same socket (a sub-NUMA cluster).""")
NT546 = register("NT546", Severity.WARNING, "scheduler", "a DRA driver publishes pciBusID in another spelling", """
    resource.kubernetes.io/pciBusID is the extended BDF in lower-case hex with a 4-digit domain, as sysfs
    writes it (the helper library refuses anything else). Upper-case hex or a missing domain is the same
    function to a person but another string to a CEL selector or matchAttribute, which compare exactly.""")
NT547 = register(
    "NT547", Severity.WARNING, "scheduler", "a DRA numaNode list follows the helper's column reading", """
    The upstream helper (k8s.io/dynamic-resource-allocation/deviceattribute) takes column i of a node's
    distance row for node i; the kernel writes one column per online node in id order. On a machine whose
    node ids have holes the two differ: the helper's list names nodes the machine does not have or misses
    same-socket ones. The driver does what the helper does; the list numatune derives maps columns to the
    online node ids.""")

#: Driver-local attribute names (the part after any domain) that hold the device's PCI address, checked after
#: the standard one: NVIDIA's older pcieBusID, dranet's pciAddress, AMD's pciAddr, and other spellings.
LOCAL_ADDRESS_KEYS = ("pciBusID", "pcieBusID", "pciAddress", "pciAddr", "pci_bus_id", "busID")
#: dranet's older form: the address in four attributes (dra.net/pciAddressDomain, ...Bus, ...Device, ...Function).
SPLIT_ADDRESS = ("pciAddressDomain", "pciAddressBus", "pciAddressDevice", "pciAddressFunction")
LIST_KEYS = ("ints", "strings", "bools", "versions")
CLAIM_KINDS = ("gpu", "nic")


def _value(attr: Any) -> Any:
    """A DeviceAttribute's one value ({"string": ..}, {"int": ..}, {"ints": [..]}, ...), None when malformed."""
    if not isinstance(attr, Mapping):
        return None
    for key in ("string", "int", *LIST_KEYS, "bool", "version"):
        if key in attr:
            return attr[key]
    return None


@record
class SliceDevice:
    """One published device as check reads it."""

    name: str
    attributes: Mapping[str, Any]
    node_name: str | None  # devices[].nodeName (perDeviceNodeSelection)
    advanced: bool  # taints, counters or a list-valued attribute: the slice's limit is 64 devices


def _advanced(body: Mapping[str, Any], attrs: Mapping[str, Any]) -> bool:
    if body.get("taints") or body.get("consumesCounters"):
        return True
    return any(isinstance(a, Mapping) and any(k in a for k in LIST_KEYS) for a in attrs.values())


def slice_devices(doc: Mapping[str, Any]) -> list[SliceDevice]:
    """The devices of one ResourceSlice (resource.k8s.io/v1 `devices[]`, v1beta1 `devices[].basic`)."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    out = []
    for d in spec.get("devices") if isinstance(spec.get("devices"), list) else ():
        if not isinstance(d, Mapping):
            continue
        body = d.get("basic") if isinstance(d.get("basic"), Mapping) else d
        attrs = body.get("attributes") if isinstance(body.get("attributes"), Mapping) else {}
        node = body.get("nodeName")
        out.append(SliceDevice(str(d.get("name", "?")), attrs, node if isinstance(node, str) else None,
                               _advanced(body, attrs)))
    return out


def over_limit(doc: Mapping[str, Any]) -> tuple[int, int, str] | None:
    """(devices listed, the API's limit, why that limit) when the slice lists more devices than the API lets
    it hold, else None. The raw count is compared first, so a slice YAML aliases blew up to 590,000 devices
    is refused without reading them."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    devices = spec.get("devices")
    count = len(devices) if isinstance(devices, list) else 0
    if count > SLICE_MAX_DEVICES:
        return count, SLICE_MAX_DEVICES, ""
    if count > SLICE_MAX_DEVICES_ADVANCED and any(d.advanced for d in slice_devices(doc)):
        return count, SLICE_MAX_DEVICES_ADVANCED, "a device uses taints, counters or a list-valued attribute"
    return None


def slice_nodes(doc: Mapping[str, Any]) -> set[str]:
    """The node names a slice names: spec.nodeName, or each device's with spec.perDeviceNodeSelection."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    if isinstance(spec.get("nodeName"), str):
        return {spec["nodeName"]}
    if spec.get("perDeviceNodeSelection") is True:
        return {d.node_name for d in slice_devices(doc) if d.node_name}
    return set()


def node_devices(doc: Mapping[str, Any], name: str) -> list[SliceDevice] | None:
    """The devices of `doc` that are node `name`'s, or None when the slice is not this node's at all."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    if spec.get("nodeName") == name:
        return slice_devices(doc)
    if spec.get("perDeviceNodeSelection") is True:
        mine = [d for d in slice_devices(doc) if d.node_name == name]
        return mine or None
    return None


def _normal_bdf(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    t = text.strip().lower()
    if t.count(":") == 1:
        t = "0000:" + t
    return t if pci_sort_key(t) != (1 << 40,) else None


def _split_address(attrs: Mapping[str, Any]) -> tuple[str | None, str]:
    """dranet's older four-part address (domain, bus, device, function as strings)."""
    parts: dict[str, tuple[str, Any]] = {}
    for key, attr in attrs.items():
        local = str(key).rpartition("/")[2]
        if local in SPLIT_ADDRESS:
            parts[local] = (str(key), _value(attr))
    if len(parts) != len(SPLIT_ADDRESS) or not all(isinstance(v, str) for _, v in parts.values()):
        return None, ""
    domain, bus, device, function = (parts[k][1] for k in SPLIT_ADDRESS)
    bdf = _normal_bdf(f"{domain:0>4}:{bus:0>2}:{device:0>2}.{function}")
    return (bdf, parts[SPLIT_ADDRESS[0]][0].rpartition("/")[0] + "/pciAddress*") if bdf else (None, "")


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
    return _split_address(attrs)


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


@record
class SliceCheck:
    """What check_slices found: findings, and how many devices it could and could not judge."""

    findings: tuple[Finding, ...]
    checked: int  # devices with a PCI address of this node's kinds
    unaddressed: int  # devices without any PCI address
    numa_unknown: int  # devices whose numa_node this tree does not hold: numaNode not judged


def check_slices(slices: Sequence[tuple[str, str, Sequence[SliceDevice]]], truth: Sequence[DeviceAttributes],
                 topo: Topology, needs: Sequence[str] = ()) -> SliceCheck:
    """Every (slice name, driver, this node's devices of that slice) against the node's standard attributes;
    `needs`: the attributes the node's GPU+NIC claim matches on (a GPU or NIC missing one is NT543)."""
    by_bdf = {a.bdf: a for a in truth}
    found: list[Finding] = []
    checked = unaddressed = unknown = 0
    for slice_name, driver, devices in slices:
        for dev in devices:
            attrs = dev.attributes
            who = f"{driver} device {dev.name}"
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
            if NUMA_NODE in attrs and true.numa_state == "unknown":
                unknown += 1
            found += list(_check_device(who, subject, attrs, true, topo, needs))
    return SliceCheck(tuple(found), checked, unaddressed, unknown)


def _check_device(who: str, subject: str, attrs: Mapping[str, Any], true: DeviceAttributes,
                  topo: Topology, needs: Sequence[str]) -> Iterator[Finding]:
    name = f"{who} ({true.label + ', ' if true.label else ''}{true.bdf})"
    claimed = true.kind in CLAIM_KINDS
    raw_id = _value(attrs.get(PCI_BUS_ID))
    if isinstance(raw_id, str) and raw_id != true.pci_bus_id and _normal_bdf(raw_id) == true.pci_bus_id:
        yield NT546(f"{name} publishes {PCI_BUS_ID} {raw_id!r}; the standard's spelling is {true.pci_bus_id!r} "
                    "(lower-case hex, 4-digit domain, as sysfs writes it): a selector or matchAttribute comparing "
                    "it with that string does not match", f"publish {PCI_BUS_ID}: {true.pci_bus_id!r} (the helper "
                    "library's GetPCIBusIDAttribute refuses other spellings)", subject)
    root = _value(attrs.get(PCIE_ROOT)) if PCIE_ROOT in attrs else None
    if PCIE_ROOT in attrs and true.pcie_root is not None and root != true.pcie_root:
        yield NT540(f"{name} publishes {PCIE_ROOT} {root!r}; it sits under root complex {true.pcie_root!r}",
                    f"publish {PCIE_ROOT}: {true.pcie_root!r} (the helper library's "
                    "GetPCIeRootAttributeByPCIBusID derives it from sysfs)", subject)
    elif PCIE_ROOT not in attrs and true.pcie_root is not None and claimed and PCIE_ROOT in needs:
        yield NT543(f"{name} publishes no {PCIE_ROOT}, which this node's GPU+NIC claim matches on: matchAttribute "
                    "can never select this device", f"publish {PCIE_ROOT}: {true.pcie_root!r}", subject)
    if NUMA_NODE not in attrs:
        if true.numa_node is not None and claimed and NUMA_NODE in needs:
            own = next((f"; its {k} ({_value(a)!r}) is the driver's own attribute, which matchAttribute across "
                        "drivers cannot use" for k, a in attrs.items() if str(k).rpartition("/")[2] == "numaNode"),
                       "")
            yield NT543(f"{name} publishes no {NUMA_NODE}, which this node's GPU+NIC claim matches on: "
                        f"matchAttribute can never select this device{own}",
                        f"publish {NUMA_NODE}: {true.numa_node} (or the list {list(true.numa_nodes or ())} "
                        "where DRAListTypeAttributes is on)", subject)
        return
    if true.numa_state == "unknown":
        return  # this tree holds no numa_node for it: nothing to compare with
    raw = _value(attrs.get(NUMA_NODE))
    nodes = _nodes_of(raw)
    hbm = _hbm_note(true, nodes, topo)
    if true.numa_node is None:
        yield NT542(f"{name} publishes {NUMA_NODE} {raw!r}, but its numa_node is -1 (no NUMA affinity)" + hbm,
                    f"do not publish {NUMA_NODE} for it" + (
                        f"; match the GPU with its NIC on {PCIE_ROOT}" if hbm else ""), subject)
        return
    n = true.numa_node
    is_list = isinstance(raw, list)
    want = tuple(true.numa_nodes or (n,)) if is_list else (n,)
    if nodes == want or (is_list and nodes and nodes[0] == n and set(nodes) == set(want)):
        return
    standard_list = f"{{ints: {list(want)}}}"
    if is_list and nodes == (n,):
        yield NT545(f"{name} publishes {NUMA_NODE} [{n}], its PCI function's node alone; the standard's list form "
                    f"is {list(want)} (the same-socket nodes at the minimum SLIT distance after it): matching "
                    f"still works with every device whose list holds node {n}, but not with one published on "
                    + " or ".join(str(x) for x in want[1:]) + " alone",
                    f"publish {NUMA_NODE}: {standard_list} (GetNUMANodeAttributeByPCIBusID with ListAttribute)",
                    subject)
        return
    if is_list and nodes is not None and nodes == helper_numa_node_list(topo, n) and nodes != want:
        online = sorted(x.id for x in topo.nodes)
        yield NT547(f"{name} publishes {NUMA_NODE} {list(nodes)}, the upstream helper's reading of node {n}'s "
                    f"distance row (column i taken as node i); this machine's online nodes are "
                    f"{', '.join(map(str, online))}, so column i is the i-th of them, and by node id the list "
                    f"is {list(want)}", f"nothing to change in the driver: it follows the helper; the list "
                    f"{list(want)} is the same-socket nodes at the minimum distance, by node id", subject)
        return
    shown = f"{raw!r} (not a node id{' list' if is_list else ''})" if nodes is None else \
        ", ".join(_node_kind(topo, x) for x in nodes)
    yield NT541(f"{name} publishes {NUMA_NODE} {shown}; its PCI function's numa_node is {n}"
                + (f", whose list form is {list(want)}" if is_list else "") + hbm,
                f"publish {NUMA_NODE}: " + (standard_list if is_list else str(n))
                + " (the helper library's GetNUMANodeAttributeByPCIBusID reads the PCI function's numa_node)",
                subject)


def _hbm_note(true: DeviceAttributes, nodes: tuple[int, ...] | None, topo: Topology) -> str:
    """Why a GPU published on its own (CPU-less) memory node can never be paired with a NIC on numaNode."""
    if nodes is None or true.kind != "gpu":
        return ""
    if true.gpu_memory_node is not None and true.gpu_memory_node in nodes:
        what = f"{true.gpu_memory_node} is the GPU's own memory node (CPU-less HBM), which NVML reports as its node"
    else:
        cpuless = [x for x in nodes if topo.node(x) is not None and not topo.node(x).cpus]
        if not cpuless or cpuless[0] != nodes[0]:
            return ""
        what = f"{cpuless[0]} is a CPU-less memory node (the GPU's own memory, as NVML reports it)"
    home = f"; its CPUs are on node {true.cpu_node}" if true.cpu_node is not None else ""
    return (f"; {what}, which no NIC or CPU shares{home}: a claim matching this GPU and a NIC on numaNode can "
            f"never be satisfied; {PCIE_ROOT} is the attribute to match")
