"""A cluster's ResourceSlices against the node (`check --resource-slices`): the standard attributes each DRA
driver publishes for this node's devices, compared with what the standard derives from the node itself
(numatune.plan.dra). Codes NT540-NT547 are stable. Pure: parsed slices and the topology in, findings out.

A slice is this node's when its `spec.nodeName` names it. A slice with `spec.allNodes` or a `spec.nodeSelector`,
and with `spec.perDeviceNodeSelection` each device with its own `allNodes` or `nodeSelector`, is offered to
several nodes: a selector is evaluated where it names nodes by name (`metadata.name` fields, the
`kubernetes.io/hostname` label), and one on other labels (which a saved tree does not hold) may select this node.
Such a device is judged when its PCI address is one of this node's functions (a wrong pcieRoot among them is
found); one whose address is not is counted, never NT544 (a device several nodes share is not one node's
function). A device naming its node by `devices[].nodeName` is this node's when that is its name. A published device is
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
from numatune.model.topology import Topology
from numatune.plan.dra import (
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    SLICE_MAX_DEVICES,
    SLICE_MAX_DEVICES_ADVANCED,
    DeviceAttributes,
    NicNodes,
    canonical_bdf,
    cel_hint,
    helper_numa_node_list,
    nic_nodes,
    nics_on_nodes,
    numa_keys,
    numa_match_note,
)

NT540 = register("NT540", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong pcieRoot for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/pcieRoot other than the root complex its PCI
    function sits under (/sys/bus/pci/devices/BDF links to /sys/devices/pciDDDD:BB/...). A claim that keeps
    a GPU with its NIC by matchAttribute on pcieRoot then pairs devices on different root complexes (the
    transfer crosses the CPU or the socket link) and refuses pairs that share one.""")
NT541 = register("NT541", Severity.ERROR, "scheduler", "a DRA driver publishes the wrong numaNode for a device", """
    A ResourceSlice gives a device a resource.kubernetes.io/numaNode other than its PCI function's sysfs
    numa_node (scalar form), or a list that is not that node followed by its same-socket nodes at the minimum
    SLIT distance (list form). On Grace Hopper and Grace Blackwell NVML reports the GPU's own memory node
    (CPU-less HBM) as its node; NVIDIA's DRA driver publishes the PCI function's sysfs numa_node instead, so a
    slice with the HBM node comes from another build or was written by hand. The finding says whether a NIC's
    numaNode, as the slices publish it, still holds that node (a list can: the HBM node may be at the CPU
    node's minimum distance) or a claim matching GPU and NIC on numaNode can never be satisfied, and what pairs
    the GPU with a NIC instead: pcieRoot where a NIC shares its root complex, else CEL selectors.""")
NT542 = register(
    "NT542", Severity.WARNING, "scheduler", "a DRA driver publishes a numaNode for a device without one", """
    The device's numa_node is -1 (the firmware gives its PCI function no NUMA affinity), and the standard
    says such a device must not publish resource.kubernetes.io/numaNode: a made-up value matches every other
    device given the same one. A GB200 GPU (numa_node -1) published on its HBM node, NVML's answer, is the case
    to expect from a hand-written slice or another build (NVIDIA's driver omits numaNode there); the finding
    says whether any NIC's numaNode holds that node and what pairs the GPU with a NIC instead. A device whose
    numa_node this tree does not hold (a partial capture) is unknown, not -1, and is not judged.""")
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
    writes it (the helper library refuses anything else). Upper-case hex, a missing domain or NVML's 8-digit
    domain (00000000:1B:00.0) is the same function to a person, and check matches it to that function, but
    another string to a CEL selector or matchAttribute, which compare exactly.""")
NT547 = register(
    "NT547", Severity.WARNING, "scheduler", "a DRA numaNode list follows the helper's column reading", """
    The upstream helper (k8s.io/dynamic-resource-allocation/deviceattribute) takes column i of a node's
    distance row for node i; the kernel writes one column per online node in id order. On a machine whose
    node ids have holes the two differ: the helper's list names nodes the machine does not have or misses
    same-socket ones. The driver does what the helper does; the list numatune derives maps columns to the
    online node ids.""")

#: Driver-local attribute names (the part after any domain) that hold the device's PCI address, checked after
#: the standard one: NVIDIA's older pcieBusID, dranet's pciAddress, AMD's pciAddr (and its partitions'
#: parentPciAddr: a partition is checked against its GPU's function, as NVIDIA's MIG devices are by the parent's
#: pciBusID they publish), and other spellings.
LOCAL_ADDRESS_KEYS = ("pciBusID", "pcieBusID", "pciAddress", "pciAddr", "parentPciAddr", "pci_bus_id", "busID")
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
    #: how it is this node's: "node" (nodeName), "all" (allNodes), "selector" (a nodeSelector that names this
    #: node), "labels" (a nodeSelector on labels numatune cannot read, which may select it)
    selection: str = "node"


def _advanced(body: Mapping[str, Any], attrs: Mapping[str, Any]) -> bool:
    if body.get("taints") or body.get("consumesCounters"):
        return True
    return any(isinstance(a, Mapping) and any(k in a for k in LIST_KEYS) for a in attrs.values())


def _body(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return d.get("basic") if isinstance(d.get("basic"), Mapping) else d


def _entries(doc: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    for d in spec.get("devices") if isinstance(spec.get("devices"), list) else ():
        if isinstance(d, Mapping):
            yield d, _body(d)


def _device(d: Mapping[str, Any], body: Mapping[str, Any], selection: str = "node") -> SliceDevice:
    attrs = body.get("attributes") if isinstance(body.get("attributes"), Mapping) else {}
    node = body.get("nodeName")
    return SliceDevice(str(d.get("name", "?")), attrs, node if isinstance(node, str) else None,
                       _advanced(body, attrs), selection)


def slice_devices(doc: Mapping[str, Any]) -> list[SliceDevice]:
    """The devices of one ResourceSlice (resource.k8s.io/v1 `devices[]`, v1beta1 `devices[].basic`)."""
    return [_device(d, body) for d, body in _entries(doc)]


#: The node label kubelet sets to the node's name: a selector on it names nodes by name.
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _requirement(req: Any, name: str | None, field: bool) -> bool | None:
    """One NodeSelectorRequirement against node `name`: True, False, or None (a label numatune cannot read)."""
    if not isinstance(req, Mapping) or name is None:
        return None
    key, op = req.get("key"), req.get("operator")
    values = req.get("values") if isinstance(req.get("values"), list) else []
    if key != ("metadata.name" if field else HOSTNAME_LABEL):
        return None
    if op == "In":
        return name in values
    if op == "NotIn":
        return name not in values
    if op == "Exists":
        return True
    if op == "DoesNotExist":
        return False
    return None  # Gt/Lt on a name: never true of a name, but not numatune's to judge


def selects(selector: Any, name: str | None) -> bool | None:
    """Whether a core/v1 NodeSelector selects node `name`: its terms are ORed, a term's requirements ANDed, an
    empty term selects nothing; None when the answer rests on labels numatune cannot read."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    unknown = False
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, Mapping):
            continue
        reqs = [(r, field) for key, field in (("matchExpressions", False), ("matchFields", True))
                if isinstance(term.get(key), list) for r in term[key]]
        if not reqs:
            continue
        answers = [_requirement(r, name, field) for r, field in reqs]
        if False in answers:
            continue
        if None in answers:
            unknown = True
            continue
        return True
    return None if unknown else False


def _selection(body: Mapping[str, Any], name: str | None) -> str | None:
    """How a slice spec or device offers itself to node `name`: "node", "all", "selector", "labels", or None."""
    if isinstance(body.get("nodeName"), str) and body.get("nodeName"):
        return "node" if body["nodeName"] == name else None
    if body.get("allNodes") is True:
        return "all"
    if body.get("nodeSelector") is not None:
        answer = selects(body["nodeSelector"], name)
        return "selector" if answer else "labels" if answer is None else None
    return None


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


def may_offer(doc: Mapping[str, Any], name: str) -> bool:
    """Whether a slice can offer devices to node `name` at all (before its devices are read): its nodeName is
    `name`, or it selects nodes otherwise (allNodes, a nodeSelector, per device)."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    return (spec.get("nodeName") == name or spec.get("perDeviceNodeSelection") is True
            or spec.get("allNodes") is True or spec.get("nodeSelector") is not None)


def node_devices(doc: Mapping[str, Any], name: str) -> list[SliceDevice] | None:
    """The devices of `doc` offered to node `name` (by nodeName, allNodes or a nodeSelector that selects it or may,
    each with its `selection`), or None when the slice offers it none."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    if spec.get("perDeviceNodeSelection") is True:
        mine = []
        for d, body in _entries(doc):
            how = _selection(body, name)
            if how is not None:
                mine.append(_device(d, body, how))
        return mine or None
    how = _selection(spec, name)
    if how is None:
        return None
    return [_device(d, body, how) for d, body in _entries(doc)]


def _normal_bdf(text: Any) -> str | None:
    return canonical_bdf(text)


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
    offered: int = 0  # devices offered by allNodes or a nodeSelector whose PCI address is this node's: judged
    elsewhere: int = 0  # devices offered so whose PCI address is no function of this node: not judged
    by_labels: int = 0  # devices (judged or not) whose nodeSelector rests on labels numatune cannot read


def check_slices(slices: Sequence[tuple[str, str, Sequence[SliceDevice]]], truth: Sequence[DeviceAttributes],
                 topo: Topology, needs: Sequence[str] = ()) -> SliceCheck:
    """Every (slice name, driver, this node's devices of that slice) against the node's standard attributes;
    `needs`: the attributes the node's GPU+NIC claim matches on (a GPU or NIC missing one is NT543)."""
    by_bdf = {a.bdf: a for a in truth}
    found: list[Finding] = []
    checked = unaddressed = unknown = offered = elsewhere = by_labels = 0
    mine: list[tuple[str, str, SliceDevice, str, DeviceAttributes | None]] = []
    for slice_name, driver, devices in slices:
        for dev in devices:
            bdf, source = published_address(dev.attributes)
            by_labels += dev.selection == "labels"
            if bdf is None:
                unaddressed += 1
                continue
            true = by_bdf.get(bdf)
            if dev.selection != "node":
                if true is None:  # offered to several nodes, not a function of this one: not its to judge
                    elsewhere += 1
                    continue
                offered += 1
            checked += 1
            mine.append((slice_name, driver, dev, source, true))
    nics = _NicFacts(nic_nodes(_published_nics(mine, truth)), nics_on_nodes(truth),
                     {n.pcie_root: n.label or n.bdf for n in reversed(truth) if n.kind == "nic" and n.pcie_root})
    for slice_name, driver, dev, source, true in mine:
        who = f"{driver} device {dev.name}"
        bdf = true.bdf if true is not None else published_address(dev.attributes)[0]
        subject = f"{who} ({bdf})"
        if true is None:
            found.append(NT544(f"{who} in ResourceSlice {slice_name} has PCI address {bdf} ({source}), which "
                               "is not a GPU, NIC, NVMe, CXL device or accelerator of this node",
                               "check the slice's nodeName and restart the driver's kubelet plugin on this "
                               "node so it republishes", subject))
            continue
        if NUMA_NODE in dev.attributes and true.numa_state == "unknown":
            unknown += 1
        found += list(_check_device(who, subject, dev.attributes, true, topo, needs, nics, truth))
    return SliceCheck(tuple(found), checked, unaddressed, unknown, offered, elsewhere, by_labels)


@record
class _NicFacts:
    """What the GPU-memory narrative asks of this node's NICs, indexed once for all devices."""

    nodes: NicNodes  # their numaNode values as the slices publish them (else as the standard derives them)
    on: Mapping[int, list[str]]  # node -> the NICs whose PCI function is on it
    roots: Mapping[str, str]  # root complex -> the first NIC under it


def _published_nics(mine: Sequence[tuple[str, str, SliceDevice, str, DeviceAttributes | None]],
                    truth: Sequence[DeviceAttributes]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(NIC label, the nodes its numaNode holds) for this node's NICs as the slices publish them; where the slices
    publish no NIC at all, as the standard derives them (what dranet publishes), in the form the slices use."""
    out = []
    listed = False
    for _, _, dev, _, true in mine:
        if true is None or true.kind != "nic":
            continue
        value = _value(dev.attributes.get(NUMA_NODE))
        listed = listed or isinstance(value, list)
        nodes = _nodes_of(value)
        if nodes:
            out.append((f"{true.label or true.bdf}", nodes))
    if any(true is not None and true.kind == "nic" for *_, true in mine):
        return tuple(out)
    listed = any(isinstance(_value(dev.attributes.get(NUMA_NODE)), list) for _, _, dev, _, _ in mine)
    return tuple((n.label or n.bdf, numa_keys(n, "list" if listed else "scalar")) for n in truth
                 if n.kind == "nic" and n.numa_node is not None)


def _check_device(who: str, subject: str, attrs: Mapping[str, Any], true: DeviceAttributes,
                  topo: Topology, needs: Sequence[str], nics: _NicFacts, truth: Sequence[DeviceAttributes],
                  ) -> Iterator[Finding]:
    name = f"{who} ({true.label + ', ' if true.label else ''}{true.bdf})"
    claimed = true.kind in CLAIM_KINDS
    raw_id = _value(attrs.get(PCI_BUS_ID))
    if isinstance(raw_id, str) and raw_id != true.pci_bus_id and _normal_bdf(raw_id) == true.pci_bus_id:
        nvml = len(raw_id.strip().split(":")[0]) == 8 and raw_id.count(":") == 2
        yield NT546(f"{name} publishes {PCI_BUS_ID} {raw_id!r}" + (
                        ", NVML's spelling (nvmlDeviceGetPciInfo's busId: an 8-digit domain)" if nvml else "")
                    + f"; the standard's spelling is {true.pci_bus_id!r} (lower-case hex, 4-digit domain, as sysfs "
                    "writes it): a selector or matchAttribute comparing it with that string does not match",
                    f"publish {PCI_BUS_ID}: {true.pci_bus_id!r} (the helper library's GetPCIBusIDAttribute refuses "
                    "other spellings" + ("; NVIDIA's driver turns NVML's into it with go-nvlib's GetPCIBusID"
                                         if nvml else "") + ")", subject)
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
    hbm, instead = _hbm_note(true, nodes, topo, nics, truth)
    if true.numa_node is None:
        yield NT542(f"{name} publishes {NUMA_NODE} {raw!r}, but its numa_node is -1 (no NUMA affinity)" + hbm,
                    f"do not publish {NUMA_NODE} for it" + instead, subject)
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
                + " (the helper library's GetNUMANodeAttributeByPCIBusID reads the PCI function's numa_node)"
                + instead, subject)


def _hbm_note(true: DeviceAttributes, nodes: tuple[int, ...] | None, topo: Topology,
              nics: _NicFacts, truth: Sequence[DeviceAttributes]) -> tuple[str, str]:
    """(what the message adds, what the fix adds) for a GPU published on its own CPU-less memory node (or another
    CPU-less node): whether a NIC's numaNode, as the slices publish it (else as the standard derives it), still
    matches that value, and what pairs the GPU with a NIC instead, each derived from this node's devices."""
    if nodes is None or true.kind != "gpu":
        return "", ""
    if true.gpu_memory_node is not None and true.gpu_memory_node in nodes:
        what = (f"{true.gpu_memory_node} is the GPU's own memory node (CPU-less HBM), which NVML reports as its node "
                "(nvmlDeviceGetNumaNodeId); NVIDIA's DRA driver publishes the PCI function's numa_node from sysfs "
                "(none where it is -1), so this value comes from another build or a hand-written slice")
    else:
        cpuless = [x for x in nodes if topo.node(x) is not None and not topo.node(x).cpus]
        if not cpuless or cpuless[0] != nodes[0]:
            return "", ""
        what = f"{cpuless[0]} is a CPU-less memory node"
    ok, why = numa_match_note(nodes, nics.nodes)
    home = f"; its CPUs are on node {true.cpu_node}" if true.cpu_node is not None else ""
    note = f"; {what}{home}; {why}" + ("" if ok else ": a claim matching this GPU and a NIC on numaNode can never be "
                                                      "satisfied")
    if ok:  # the match holds as published: correcting the value is the whole fix
        return note, ""
    mate = nics.roots.get(true.pcie_root) if true.pcie_root is not None else None
    if mate is not None:
        fix = f"; {PCIE_ROOT} is the attribute to match: {mate} shares its root complex {true.pcie_root}"
    else:
        fix = (f"; no NIC shares its root complex {true.pcie_root or '(unknown)'}, so {PCIE_ROOT} cannot pair it "
               "either: " + cel_hint([true], truth, nics.on))
    return note, fix
