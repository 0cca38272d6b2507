"""Kubernetes DRA's standard device attributes, derived from the node as the standard defines them, and the
ResourceClaimTemplate that keeps each GPU with a NIC.

The standard (kubernetes.io "Standard Device Attributes for Dynamic Resource Allocation", and the helper
library drivers call, k8s.io/dynamic-resource-allocation/deviceattribute) defines, for a PCI device:
- `resource.kubernetes.io/pciBusID`: its address in extended BDF notation (domain:bus:device.function).
- `resource.kubernetes.io/pcieRoot`: `pci<domain>:<bus>` of its root complex: the first directory under
  /sys/devices of the path /sys/bus/pci/devices/<BDF> links to (the helper refuses a path that does not
  start with /sys/devices/pci or does not end with the BDF).
- `resource.kubernetes.io/numaNode`: the device's sysfs `numa_node`, as a scalar; or, behind the
  DRAListTypeAttributes gate, a list: that node first, then (ascending) the nodes at the minimum non-self
  SLIT distance of its row that are on the same socket (the socket of a node's first CPU); a node without
  CPUs has no known socket and is included. A device whose numa_node is -1 must not publish it at all.
These are facts of the PCI function, not of what it drives: a Grace Hopper GPU's HBM node (CPU-less, node
1 or above) is where its memory is, never its numaNode; numatune's own inference of a node for a device
with numa_node -1 is not published either (no driver could). A device whose numa_node this tree does not
hold at all (a partial capture, a GPU known from the KFD topology only) is *unknown*, which is not -1.

The helper reads a distance row's column i as node i (kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/deviceattribute/numa_linux.go); the kernel writes one column
per online node in id order, which numatune maps to those ids. The two agree unless the node ids have holes
(`helper_numa_node_list` gives the helper's reading, so `check` can tell a driver that follows it).

A ResourceClaimTemplate is held to the API's limits (kubernetes/api resource/v1 types.go): at most 32
devices allocated per claim (AllocationResultsMaxSize), 32 requests (DeviceRequestsMaxSize) and 32
constraints (DeviceConstraintsMaxSize); more GPU+NIC pairs than 16 are split over several templates.

Pure: topology in, attributes and claims out.
"""

from __future__ import annotations

from numatune.model import order
from numatune.model._record import record
from numatune.model.topology import PciDevice, Topology

PREFIX = "resource.kubernetes.io/"
PCI_BUS_ID = PREFIX + "pciBusID"
PCIE_ROOT = PREFIX + "pcieRoot"
NUMA_NODE = PREFIX + "numaNode"
STANDARD = (PCI_BUS_ID, PCIE_ROOT, NUMA_NODE)
#: Kinds of PCI device a DRA driver publishes (GPUs, NICs, NVMe, CXL memory devices, accelerators).
KINDS = ("gpu", "nic", "nvme", "cxl", "accelerator")
#: The DeviceClass each vendor's GPU DRA driver installs (NVIDIA's, AMD's and Intel's drivers).
GPU_CLASSES = {order.NVIDIA: "gpu.nvidia.com", order.AMD: "gpu.amd.com", 0x8086: "gpu.intel.com"}
DEFAULT_NIC_CLASS = "dranet"  # kubernetes-sigs/dranet's DeviceClass
SYSFS_DEVICES = "/sys/devices/"
# resource.k8s.io/v1 limits (kubernetes/api resource/v1/types.go)
ALLOCATION_RESULTS_MAX = 32  # AllocationResultsMaxSize: devices one claim can be allocated
DEVICE_REQUESTS_MAX = 32  # DeviceRequestsMaxSize (= AllocationResultsMaxSize)
DEVICE_CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
SLICE_MAX_DEVICES = 128  # ResourceSliceMaxDevices
# ResourceSliceMaxDevicesWithAdvancedFeatures: when any device of the slice has taints, consumes counters or
# publishes a list-valued attribute
SLICE_MAX_DEVICES_ADVANCED = 64
#: GPU+NIC pairs one template can hold: two devices, two requests and one constraint per pair.
MAX_PAIRS_PER_CLAIM = min(ALLOCATION_RESULTS_MAX // 2, DEVICE_REQUESTS_MAX // 2, DEVICE_CONSTRAINTS_MAX)

TYPE_CHECKING = False  # typing and collections cost start-up time; inspect --json imports this module
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


@record
class DeviceAttributes:
    """What one PCI device should publish; a value is None when the standard says not to publish it, and
    `omitted[name]` says why."""

    bdf: str
    kind: str
    label: str | None  # GPU0 / NIC0 (numatune's numbering), else None
    pci_bus_id: str
    pcie_root: str | None
    numa_node: int | None
    numa_nodes: tuple[int, ...] | None  # the list form
    omitted: tuple[tuple[str, str], ...] = ()
    memory_nodes: tuple[int, ...] = ()  # CPU-less nodes at the device's minimum distance (HBM, CXL, ...)
    numa_state: str = "node"  # "node", "none" (numa_node -1: no NUMA affinity) or "unknown" (not in this tree)
    gpu_memory_node: int | None = None  # a GPU's own CPU-less memory node (Grace HBM): what NVML reports
    cpu_node: int | None = None  # the node of its CPUs, numatune's inference where sysfs says -1
    pcie_root_unknown: bool = False  # no pcieRoot because this tree lacks the device's sysfs path

    def attributes(self, form: str = "scalar") -> dict[str, dict[str, Any]]:
        """The attributes in the API's DeviceAttribute shape ({"string": ...} / {"int": ...} / {"ints": [...]})."""
        out: dict[str, dict[str, Any]] = {PCI_BUS_ID: {"string": self.pci_bus_id}}
        if self.pcie_root is not None:
            out[PCIE_ROOT] = {"string": self.pcie_root}
        if self.numa_node is not None:
            out[NUMA_NODE] = {"ints": list(self.numa_nodes or (self.numa_node,))} if form == "list" \
                else {"int": self.numa_node}
        return out


def pcie_root(path: str, bdf: str) -> tuple[str | None, str]:
    """(pcieRoot, "") from the device's resolved sysfs path, or (None, why not) by the helper library's rule."""
    if not path:
        return None, (f"this tree has no PCI sysfs for {bdf} (it is known from the AMD KFD topology only): its "
                      "root complex is unknown")
    if not path.startswith(SYSFS_DEVICES):
        return None, (f"/sys/bus/pci/devices/{bdf} does not lead into /sys/devices in this tree (a partial "
                      "capture): its root complex cannot be read")
    if not path.startswith(SYSFS_DEVICES + "pci") or path.rsplit("/", 1)[-1] != bdf:
        return None, (f"its sysfs path {path} is not /sys/devices/pci<domain>:<bus>/.../{bdf}: the standard "
                      "defines no root complex for it (the helper library refuses it)")
    return path[len(SYSFS_DEVICES):].split("/", 1)[0], ""


def _socket_of_node(topo: Topology, node_id: int) -> int | None:
    """The package of the node's first CPU (the helper library's rule), None for a node without CPUs."""
    node = topo.node(node_id)
    if node is None or not node.cpus:
        return None
    cpu = next((c for c in topo.cpus if c.id == min(node.cpus)), None)
    return cpu.package if cpu is not None else None


def numa_node_list(topo: Topology, node_id: int) -> tuple[int, ...]:
    """The list form: `node_id`, then the same-socket nodes at the minimum non-self SLIT distance, ascending.
    Just `(node_id,)` when the node has no distance row or no other node. The distance row's columns are the
    online nodes in order (numatune's reader maps them to ids): on a machine with holes in its node ids the
    helper library, which takes column i for node i, would name other nodes."""
    node = topo.node(node_id)
    if node is None or not node.distances:
        return (node_id,)
    return _nearest_same_socket(topo, node_id, node.distances)


def helper_numa_node_list(topo: Topology, node_id: int) -> tuple[int, ...]:
    """The list form as the upstream helper computes it: column i of the node's distance row taken as node i
    (the kernel writes one column per online node, so with holes in the node ids column i is another node),
    a node id past the row's end gives the one-element list, and a "node" the machine lacks has no known
    socket and is included. The same as `numa_node_list` where the online nodes are 0..n-1."""
    node = topo.node(node_id)
    if node is None or not node.distances or node_id >= len(node.distances):
        return (node_id,)
    row = [node.distances[n] for n in sorted(node.distances)]  # the file's order: online node ids ascending
    return _nearest_same_socket(topo, node_id, dict(enumerate(row)))


def _nearest_same_socket(topo: Topology, node_id: int, row: dict[int, int]) -> tuple[int, ...]:
    """`node_id`, then the nodes of `row` (node -> distance) at its minimum non-self distance that are not on
    another socket (a node without CPUs, or absent, has no known socket and is kept), ascending."""
    others = {n: d for n, d in row.items() if n != node_id}
    if not others:
        return (node_id,)
    nearest = min(others.values())
    socket = _socket_of_node(topo, node_id)
    same = []
    for n, d in others.items():
        if d != nearest:
            continue
        theirs = _socket_of_node(topo, n) if socket is not None else None
        if theirs is not None and theirs != socket:
            continue
        same.append(n)
    return (node_id, *sorted(same))


def _gpu_memory_node(topo: Topology, dev: PciDevice) -> int | None:
    """A GPU's own memory node when it is CPU-less (Grace HBM onlined as a NUMA node), else None (an APU's
    memory node is its CPU node)."""
    if dev.kind != "gpu" or dev.memory_node is None:
        return None
    node = topo.node(dev.memory_node)
    return dev.memory_node if node is not None and not node.cpus else None


def device_attributes(topo: Topology, dev: PciDevice, label: str | None = None) -> DeviceAttributes:
    omitted: list[tuple[str, str]] = []
    root, why = pcie_root(dev.path, dev.bdf)
    if root is None:
        omitted.append((PCIE_ROOT, why))
    numa = dev.numa_node
    nodes: tuple[int, ...] | None = None
    guess = (f"; numatune infers node {dev.inferred_node} (by {dev.inferred_from}), which no driver "
             "publishes") if dev.inferred_node is not None else ""
    if dev.numa_state == "unknown":
        omitted.append((NUMA_NODE, "its numa_node is unknown: this tree holds no numa_node for it (a partial "
                                   "capture); the driver publishes what the node's own sysfs says" + guess))
    elif numa is None:
        omitted.append((NUMA_NODE, "its numa_node is -1 (no NUMA affinity): the standard says not to publish "
                                   "it" + guess))
    else:
        nodes = numa_node_list(topo, numa)
    memory = tuple(n for n in (nodes or ())[1:] if (topo.node(n) is not None and not topo.node(n).cpus))
    return DeviceAttributes(dev.bdf.lower(), dev.kind, label, dev.bdf.lower(), root, numa, nodes,
                            tuple(omitted), memory, dev.numa_state, _gpu_memory_node(topo, dev), dev.node,
                            root is None and not dev.path.startswith(SYSFS_DEVICES))


def standard_attributes(topo: Topology) -> tuple[DeviceAttributes, ...]:
    """Every GPU, NIC, NVMe, CXL device and accelerator of the node, in PCI bus order."""
    names = order.labels(topo.devices)
    devs = [d for d in topo.devices if d.kind in KINDS]
    devs.sort(key=lambda d: order.pci_sort_key(d.bdf))
    return tuple(device_attributes(topo, d, names.get(d.bdf.lower())) for d in devs)


@record
class Pairing:
    """How one GPU is kept with a NIC by a claim: the attribute both share, the NIC, and why."""

    gpu: DeviceAttributes
    nic: DeviceAttributes | None
    match: str | None  # PCIE_ROOT, NUMA_NODE or None (no NIC shares either)
    reason: str


def pairings(attrs: Sequence[DeviceAttributes], form: str = "scalar") -> tuple[Pairing, ...]:
    """Per GPU (numatune's order): the NIC under the same pcieRoot, else one on the same numaNode (in the
    form the cluster publishes), else none, with the reason."""
    gpus = sorted((a for a in attrs if a.kind == "gpu" and a.label), key=lambda a: int(a.label[3:]))
    nics = sorted((a for a in attrs if a.kind == "nic"), key=lambda a: order.pci_sort_key(a.bdf))
    # The first NIC (PCI order) under each root complex, and on each node (a scalar numaNode, or any node of the
    # list form; neither when the NIC publishes no numaNode): one lookup a GPU, not a scan of every NIC (2,000
    # GPUs and 2,000 NICs: 8.8 s)
    by_root: dict[str, DeviceAttributes] = {}
    by_node: dict[int, int] = {}
    for i, n in enumerate(nics):
        if n.pcie_root is not None:
            by_root.setdefault(n.pcie_root, n)
        if n.numa_node is not None:
            for node in (n.numa_nodes or ()) if form == "list" else (n.numa_node,):
                by_node.setdefault(node, i)
    out = []
    for g in gpus:
        n = by_root.get(g.pcie_root) if g.pcie_root is not None else None
        if n is not None:
            out.append(Pairing(g, n, PCIE_ROOT, f"{n.label or n.bdf} ({n.bdf}) is under the same root complex "
                                                 f"{g.pcie_root}"))
            continue
        near = [by_node[x] for x in ((g.numa_nodes or ()) if form == "list" else (g.numa_node,)) if x in by_node] \
            if g.numa_node is not None else []
        if near:
            n = nics[min(near)]
            where = (f"numaNode {g.numa_node}" if form == "scalar" else
                     f"numaNode lists {list(g.numa_nodes or ())} and {list(n.numa_nodes or ())} intersect")
            root = (f"no NIC under its root complex {g.pcie_root}" if g.pcie_root else "it has no pcieRoot")
            out.append(Pairing(g, n, NUMA_NODE, f"{root}; {n.label or n.bdf} ({n.bdf}) shares {where}"))
            continue
        if not nics:
            why = "the node has no NIC"
        elif g.numa_state == "unknown":
            why = "no NIC under its root complex, and its numa_node is unknown (not in this tree)"
        elif g.numa_node is None:
            why = "no NIC under its root complex, and it publishes no numaNode (numa_node -1)"
        else:
            why = f"no NIC under its root complex {g.pcie_root} nor on numaNode {g.numa_node}"
        out.append(Pairing(g, None, None, why))
    return tuple(out)


def claim_match(pairs: Sequence[Pairing], count: int) -> tuple[str | None, str]:
    """The attribute a claim for `count` GPU+NIC pairs should match on (every pair must be satisfiable on
    this node for any `count` GPUs the scheduler picks), and why."""
    if not pairs:
        return None, "the node has no GPU"
    if all(p.match == PCIE_ROOT for p in pairs):
        return PCIE_ROOT, "every GPU of this node has a NIC under its own root complex"
    if all(p.match is not None for p in pairs):
        far = ", ".join(p.gpu.label or p.gpu.bdf for p in pairs if p.match != PCIE_ROOT)
        return NUMA_NODE, f"{far} share no root complex with a NIC, but every GPU has a NIC on its NUMA node"
    usable = [p for p in pairs if p.match == PCIE_ROOT] or [p for p in pairs if p.match is not None]
    if len(usable) >= count:
        attr = usable[0].match
        left = ", ".join(p.gpu.label or p.gpu.bdf for p in pairs if p.match is None or
                         (attr == PCIE_ROOT and p.match != PCIE_ROOT))
        return attr, (f"only {len(usable)} of {len(pairs)} GPUs can be paired on "
                      f"{attr.removeprefix(PREFIX)} ({left} cannot): the scheduler will only pick those")
    return None, (f"only {len(usable)} GPU(s) of this node can be paired with a NIC, fewer than {count}: "
                  "the template requests the devices without a constraint")


def claim_sizes(count: int) -> tuple[int, ...]:
    """Pairs per template for `count` GPU+NIC pairs: as few templates as the API's limits allow
    (MAX_PAIRS_PER_CLAIM each), their sizes as even as can be."""
    parts = -(-count // MAX_PAIRS_PER_CLAIM)
    return tuple(count // parts + (1 if i < count % parts else 0) for i in range(parts))


def claim_template(pairs: Sequence[Pairing], count: int, gpu_class: str, nic_class: str,
                   name: str) -> tuple[tuple[dict[str, Any], ...], str | None, str]:
    """(resource.k8s.io/v1 ResourceClaimTemplates for `count` GPUs each with a NIC, split so that none
    exceeds the API's limits; their match attribute; why). One template is named `name`, several
    `name-1`, `name-2`, ...: the pod lists each under resourceClaims."""
    attr, why = claim_match(pairs, count)
    sizes = claim_sizes(count)
    docs = []
    for part, size in enumerate(sizes, 1):
        requests = []
        constraints = []
        for i in range(size):
            requests.append({"name": f"gpu-{i}", "exactly": {"deviceClassName": gpu_class, "count": 1}})
            requests.append({"name": f"nic-{i}", "exactly": {"deviceClassName": nic_class, "count": 1}})
            if attr is not None:
                constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": attr})
        devices: dict[str, Any] = {"requests": requests}
        if constraints:
            devices["constraints"] = constraints
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": name if len(sizes) == 1 else f"{name}-{part}"},
                     "spec": {"spec": {"devices": devices}}})
    return tuple(docs), attr, why


def gpu_class(topo: Topology) -> str:
    """The DeviceClass of the node's GPU driver (the first GPU's vendor), NVIDIA's when unknown."""
    gpus, _ = order.gpu_order(topo.devices)
    vendor = gpus[0].vendor_id if gpus else None
    return GPU_CLASSES.get(vendor, GPU_CLASSES[order.NVIDIA])


@record
class DraEmit:
    """`numatune emit dra`: the attributes of every device, each GPU's pairing and the claim template."""

    source: str
    form: str  # "scalar" | "list": the numaNode form the cluster publishes (DRAListTypeAttributes)
    devices: tuple[DeviceAttributes, ...]
    pairs: tuple[Pairing, ...]
    count: int  # GPU+NIC pairs the templates request together (0: no GPU, no template)
    claims: tuple[dict, ...]  # the templates: one, or several when count exceeds MAX_PAIRS_PER_CLAIM
    match: str | None
    match_reason: str
    notes: tuple[str, ...] = ()

    @property
    def claim(self) -> dict | None:
        """The template when one holds every pair (None without a GPU, or when the pairs are split)."""
        return self.claims[0] if len(self.claims) == 1 else None


def dra_plan(topo: Topology, *, form: str = "scalar", count: int | None = None, gpu_device_class: str | None = None,
             nic_device_class: str = DEFAULT_NIC_CLASS, name: str | None = None) -> DraEmit:
    """Everything `emit dra` prints; `count` GPUs per claim (default every GPU of the node) must not exceed
    the node's GPUs (ValueError, the caller's usage error)."""
    devices = standard_attributes(topo)
    pairs = pairings(devices, form)
    notes = [f"{d.label or d.bdf}: no {n.removeprefix(PREFIX)}: {why}" for d in devices for n, why in d.omitted]
    shared: dict[str, list[str]] = {}
    for p in pairs:
        if p.nic is not None:
            shared.setdefault(p.nic.bdf, []).append(p.gpu.label or p.gpu.bdf)
    for bdf, gpus in shared.items():
        if len(gpus) > 1:
            nic = next(d for d in devices if d.bdf == bdf)
            notes.append(f"{', '.join(gpus)} share one NIC, {nic.label or bdf}: a claim for {len(gpus)} pairs "
                         "needs a NIC each, so the scheduler cannot give it these GPUs together")
    notes += gpu_memory_notes(devices, pairs)
    if not pairs:
        return DraEmit(topo.source, form, devices, pairs, 0, (), None, "the node has no GPU", tuple(notes))
    want = len(pairs) if count is None else count
    if want > len(pairs):
        raise ValueError(f"the node has {len(pairs)} GPU(s), fewer than the {want} requested")
    claims, match, why = claim_template(pairs, want, gpu_device_class or gpu_class(topo), nic_device_class,
                                        name or f"gpu-nic-pairs-{want}")
    if len(claims) > 1:
        notes.append(f"{want} GPU+NIC pairs are {2 * want} devices, more than one claim can be given (the API "
                     f"allows {ALLOCATION_RESULTS_MAX}: AllocationResultsMaxSize, {DEVICE_REQUESTS_MAX} requests, "
                     f"{DEVICE_CONSTRAINTS_MAX} constraints): {len(claims)} templates of "
                     f"{'/'.join(map(str, claim_sizes(want)))} pairs; the pod lists each under "
                     "spec.resourceClaims")
    return DraEmit(topo.source, form, devices, pairs, want, claims, match, why, tuple(notes))


def _names(devices: Sequence[DeviceAttributes]) -> str:
    return ", ".join(d.label or d.bdf for d in devices)


def gpu_memory_notes(devices: Sequence[DeviceAttributes], pairs: Sequence[Pairing]) -> list[str]:
    """Why numaNode cannot pair a GPU that has its own CPU-less memory node (GH200, GB200 in NUMA mode) with a
    NIC when the GPU's driver publishes NVML's node, and what to match on instead."""
    gpus = [d for d in devices if d.gpu_memory_node is not None]
    if not gpus:
        return []
    hbm = ", ".join(str(d.gpu_memory_node) for d in gpus)
    sysfs = [d for d in gpus if d.numa_node is None]
    out = (f"{_names(gpus)}: each has its own CPU-less memory node ({hbm}: the HBM onlined as a NUMA node), "
           "which is what NVML reports as the GPU's node; builds of NVIDIA's DRA driver that publish NVML's node "
           "(nvmlDeviceGetNumaNodeId, dra-driver-nvidia-gpu issue 1242) give it as numaNode, a node no NIC or "
           "CPU is on, so a claim that matches GPU and NIC on numaNode can never be satisfied with them")
    if sysfs:
        out += (f"; builds that read the PCI function's numa_node publish no numaNode for {_names(sysfs)} "
                "(-1 here), which fails a numaNode match too")
    paired = {p.gpu.bdf for p in pairs if p.match == PCIE_ROOT}
    rooted = [d for d in gpus if d.bdf in paired]
    if len(rooted) == len(gpus):
        return [out + ": pcieRoot is the attribute to match, as this template does"]
    out += (": pcieRoot is the attribute to match, but no NIC here shares the root complex of "
            f"{_names([d for d in gpus if d.bdf not in paired])}")
    by_node = [p.gpu for p in pairs if p.match == NUMA_NODE and p.gpu.gpu_memory_node is not None]
    if by_node:
        out += (f"; this template's numaNode match holds for {_names(by_node)} only with driver builds that "
                "publish the PCI function's node (" + ", ".join(str(d.numa_node) for d in by_node) + " here)")
    homes = ", ".join(f"{d.label or d.bdf}: node {d.cpu_node}" for d in gpus if d.cpu_node is not None)
    return [out + f"; else pair them by CEL selectors: the GPU by {PCI_BUS_ID}, its NIC by numaNode == the "
            f"GPU's CPU node ({homes})"]
