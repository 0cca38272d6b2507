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
from numatune.model.gpumem import nearest_cpu_node
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
#: The NIC DeviceClass a template names by default. kubernetes-sigs/dranet installs no DeviceClass (its Helm chart
#: deploys the DaemonSet and RBAC only; its examples each define their own), so `emit dra` writes this one.
DEFAULT_NIC_CLASS = "dranet"
DRANET_DRIVER = "dra.net"  # dranet's driver name and attribute domain (pkg/apis/attributes.go)
#: dranet publishes dra.net/rdma (bool) for a NIC with an RDMA device: GPU+NIC pairs are for GPUDirect RDMA.
RDMA_SELECTOR = f'device.attributes["{DRANET_DRIVER}"].rdma == true'
K8S_NAME_MAX = 253  # a DNS subdomain: what the API takes as a ResourceClaimTemplate's or DeviceClass's name
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
    from collections.abc import Mapping, Sequence
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
    cpu_node: int | None = None  # the nearest node with CPUs to its node (numatune's inference where sysfs says -1)
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


def canonical_bdf(text: object) -> str | None:
    """The standard's spelling of a PCI address (sysfs's: lower-case hex, a domain of at least 4 digits, 2-digit
    bus and device), whatever the spelling given: "0000:1B:00.0", "1b:00.0" and NVML's "00000000:1B:00.0" are
    all "0000:1b:00.0"; None when the text is no PCI address."""
    if not isinstance(text, str):
        return None
    key = order.pci_sort_key(text.strip().lower())
    if len(key) != 4:
        return None
    domain, bus, device, function = key
    if bus > 0xFF or device > 0x1F or function > 7:
        return None
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


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
    # the node whose CPUs serve it: a function on a CPU-less node (a superchip GPU's own memory node) goes to the
    # nearest node with CPUs, never to the memory node itself
    home = nearest_cpu_node(topo, dev.node) if dev.node is not None else None
    return DeviceAttributes(dev.bdf.lower(), dev.kind, label, dev.bdf.lower(), root, numa, nodes,
                            tuple(omitted), memory, dev.numa_state, _gpu_memory_node(topo, dev), home,
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
    shared: bool = False  # every NIC it shares an attribute with already serves another GPU: this one is that NIC


def numa_keys(a: DeviceAttributes, form: str) -> tuple[int, ...]:
    """The nodes a device's numaNode holds in `form` (the scalar, or the list); () when it publishes none."""
    if a.numa_node is None:
        return ()
    return tuple(a.numa_nodes or (a.numa_node,)) if form == "list" else (a.numa_node,)


def _root_keys(a: DeviceAttributes) -> tuple[str, ...]:
    return (a.pcie_root,) if a.pcie_root is not None else ()


def _assign(gpus: Sequence[DeviceAttributes], nics: Sequence[DeviceAttributes], keys: Any,
            taken: set[int] | frozenset[int] = frozenset()) -> dict[int, int]:
    """GPU index -> NIC index: each GPU in turn gets the first NIC (PCI order) not yet given to another GPU that
    shares one of its `keys` (a root complex, or numaNode values: lists match when they intersect), since a
    claim's NIC requests each need a NIC of their own. NICs in `taken` are given already. One queue a key: linear
    in the devices and their keys (2,000 GPUs and 2,000 NICs were 8.8 s as a scan of every NIC)."""
    queues: dict[Any, list[int]] = {}
    for j, n in enumerate(nics):
        if j not in taken:
            for k in keys(n):
                queues.setdefault(k, []).append(j)
    heads = dict.fromkeys(queues, 0)
    used = set(taken)
    out: dict[int, int] = {}
    for i, g in enumerate(gpus):
        best = None
        for k in keys(g):
            queue = queues.get(k)
            if queue is None:
                continue
            h = heads[k]
            while h < len(queue) and queue[h] in used:
                h += 1
            heads[k] = h
            if h < len(queue) and (best is None or queue[h] < best):
                best = queue[h]
        if best is not None:
            used.add(best)
            out[i] = best
    return out


def _first_by_key(nics: Sequence[DeviceAttributes], keys: Any) -> dict[Any, int]:
    """key -> the first NIC (PCI order) holding it: a GPU's first sharing NIC without a scan of every NIC."""
    first: dict[Any, int] = {}
    for j, n in enumerate(nics):
        for k in keys(n):
            first.setdefault(k, j)
    return first


def _first_sharing(g: DeviceAttributes, first: dict[Any, int], keys: Any) -> int | None:
    return min((first[k] for k in keys(g) if k in first), default=None)


def pairings(attrs: Sequence[DeviceAttributes], form: str = "scalar") -> tuple[Pairing, ...]:
    """Per GPU (numatune's order): a NIC of its own under the same pcieRoot, else one on the same numaNode (in the
    form the cluster publishes), each NIC given to one GPU; a GPU left without a NIC of its own is shown with
    the NIC it would have to share (`shared`), else none, with the reason."""
    gpus = sorted((a for a in attrs if a.kind == "gpu" and a.label), key=lambda a: int(a.label[3:]))
    nics = sorted((a for a in attrs if a.kind == "nic"), key=lambda a: order.pci_sort_key(a.bdf))

    def numa(a: DeviceAttributes) -> tuple[int, ...]:
        return numa_keys(a, form)

    by_root = _assign(gpus, nics, _root_keys)
    rest = [i for i in range(len(gpus)) if i not in by_root]
    by_numa = {rest[i]: j for i, j in _assign([gpus[i] for i in rest], nics, numa, set(by_root.values())).items()}
    first_root, first_numa = _first_by_key(nics, _root_keys), _first_by_key(nics, numa)
    out = []
    for i, g in enumerate(gpus):
        j = by_root.get(i)
        if j is not None:
            n = nics[j]
            out.append(Pairing(g, n, PCIE_ROOT, f"{n.label or n.bdf} ({n.bdf}) is under the same root complex "
                                                 f"{g.pcie_root}"))
            continue
        root = (f"no NIC under its root complex {g.pcie_root}" if g.pcie_root else "it has no pcieRoot")
        j = by_numa.get(i)
        if j is not None:
            n = nics[j]
            out.append(Pairing(g, n, NUMA_NODE, f"{root}; {n.label or n.bdf} ({n.bdf}) shares {_where(g, n, form)}"))
            continue
        j = _first_sharing(g, first_root, _root_keys)
        if j is not None:  # more GPUs than NICs under this root complex
            n = nics[j]
            out.append(Pairing(g, n, PCIE_ROOT, f"{n.label or n.bdf} ({n.bdf}) is under the same root complex "
                                                 f"{g.pcie_root}, but serves another GPU already", shared=True))
            continue
        j = _first_sharing(g, first_numa, numa)
        if j is not None:
            n = nics[j]
            out.append(Pairing(g, n, NUMA_NODE, f"{root}; {n.label or n.bdf} ({n.bdf}) shares {_where(g, n, form)}, "
                                                 "but serves another GPU already", shared=True))
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


def _where(g: DeviceAttributes, n: DeviceAttributes, form: str) -> str:
    return (f"numaNode {g.numa_node}" if form == "scalar" else
            f"numaNode lists {list(g.numa_nodes or ())} and {list(n.numa_nodes or ())} intersect")


def capacities(attrs: Sequence[DeviceAttributes], form: str = "scalar") -> tuple[int, int]:
    """(GPU+NIC pairs a pcieRoot match can give at once, pairs a numaNode match can): each NIC serves one GPU."""
    gpus = [a for a in attrs if a.kind == "gpu" and a.label]
    nics = sorted((a for a in attrs if a.kind == "nic"), key=lambda a: order.pci_sort_key(a.bdf))
    return (len(_assign(gpus, nics, _root_keys)),
            len(_assign(gpus, nics, lambda a: numa_keys(a, form))))


def claim_match(pairs: Sequence[Pairing], count: int, root_pairs: int | None = None,
                numa_pairs: int | None = None) -> tuple[str | None, str]:
    """The attribute a claim with `count` GPU+NIC pairs should match on, and why: one every pair the scheduler can
    pick is satisfiable with, each NIC serving one GPU (`root_pairs`/`numa_pairs`: how many pairs the node holds
    at once on each attribute; by default counted from `pairs`)."""
    if not pairs:
        return None, "the node has no GPU"
    if count == 0:
        return None, "the node has no NIC: the template requests the GPUs alone"
    own = [p for p in pairs if p.nic is not None and not p.shared]
    if root_pairs is None:
        root_pairs = sum(1 for p in own if p.match == PCIE_ROOT)
    if numa_pairs is None:
        numa_pairs = sum(1 for p in own if p.match == NUMA_NODE)
    if root_pairs >= count:
        if root_pairs == len(pairs):
            return PCIE_ROOT, "every GPU of this node has a NIC under its own root complex"
        left = ", ".join(p.gpu.label or p.gpu.bdf for p in pairs if p.match != PCIE_ROOT or p.shared)
        return PCIE_ROOT, (f"only {root_pairs} of {len(pairs)} GPUs can be paired on pcieRoot, each with a NIC of its "
                           f"own ({left} cannot): the scheduler gives the requests with a NIC only those")
    if numa_pairs >= count:
        if numa_pairs == len(pairs):
            far = ", ".join(p.gpu.label or p.gpu.bdf for p in pairs if p.match != PCIE_ROOT or p.shared)
            return NUMA_NODE, (f"{far} share no root complex with a NIC of their own, but every GPU has a NIC on its "
                               "NUMA node")
        return NUMA_NODE, (f"only {numa_pairs} of {len(pairs)} GPUs can be paired on numaNode, each with a NIC of its "
                           "own: the scheduler gives the requests with a NIC only those")
    return None, (f"only {max(root_pairs, numa_pairs)} GPU(s) of this node can be paired with a NIC, fewer than "
                  f"{count}: the template requests the devices without a constraint")


def claim_sizes(count: int) -> tuple[int, ...]:
    """GPUs per template for `count` GPUs (each with a NIC): as few templates as the API's limits allow
    (MAX_PAIRS_PER_CLAIM each), their sizes as even as can be."""
    parts = -(-count // MAX_PAIRS_PER_CLAIM)
    return tuple(count // parts + (1 if i < count % parts else 0) for i in range(parts))


def nic_request(nic_class: str) -> dict[str, Any]:
    """One NIC request's `exactly`: dranet's class (the default) asks for an RDMA NIC (dra.net/rdma), a class the
    user names is taken as it selects."""
    out: dict[str, Any] = {"deviceClassName": nic_class, "count": 1}
    if nic_class == DEFAULT_NIC_CLASS:
        out["selectors"] = [{"cel": {"expression": RDMA_SELECTOR}}]
    return out


def dranet_device_class() -> dict[str, Any]:
    """The resource.k8s.io/v1 DeviceClass `dranet` the templates name by default: dranet's devices with RDMA."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEFAULT_NIC_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRANET_DRIVER}"'}},
                                   {"cel": {"expression": RDMA_SELECTOR}}]}}


def claim_template(pairs: Sequence[Pairing], count: int, gpu_class: str, nic_class: str,
                   name: str, nics: int | None = None, match: tuple[str | None, str] | None = None,
                   ) -> tuple[tuple[dict[str, Any], ...], str | None, str]:
    """(resource.k8s.io/v1 ResourceClaimTemplates for `count` GPUs, `nics` of them (default: each) with a NIC of its
    own, split so that none exceeds the API's limits; their match attribute; why). A node with fewer NICs than
    GPUs gets as many NIC requests as it has NICs, never more. One template is named `name`, several `name-1`,
    `name-2`, ...: the pod lists each under resourceClaims."""
    nics = count if nics is None else min(nics, count)
    attr, why = match if match is not None else claim_match(pairs, nics)
    sizes = claim_sizes(count)
    docs = []
    left = nics
    for part, size in enumerate(sizes, 1):
        requests = []
        constraints = []
        with_nic = min(size, left)
        left -= with_nic
        for i in range(size):
            requests.append({"name": f"gpu-{i}", "exactly": {"deviceClassName": gpu_class, "count": 1}})
            if i < with_nic:
                requests.append({"name": f"nic-{i}", "exactly": nic_request(nic_class)})
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
    count: int  # GPUs the templates request together (0: no GPU, no template), each with a NIC while NICs last
    claims: tuple[dict, ...]  # the templates: one, or several when count exceeds MAX_PAIRS_PER_CLAIM
    match: str | None
    match_reason: str
    notes: tuple[str, ...] = ()
    nic_count: int = 0  # NICs the templates request: one a GPU, at most the node's NICs
    device_classes: tuple[dict, ...] = ()  # DeviceClasses the templates name that no driver installs (dranet's)

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
    nics = [d for d in devices if d.kind == "nic"]
    notes = [f"{d.label or d.bdf}: no {n.removeprefix(PREFIX)}: {why}" for d in devices for n, why in d.omitted]
    oversubscribed = {p.nic.bdf for p in pairs if p.shared and p.nic is not None}
    shared: dict[str, list[str]] = {}
    for p in pairs:
        if p.nic is not None and p.nic.bdf in oversubscribed:
            shared.setdefault(p.nic.bdf, []).append(p.gpu.label or p.gpu.bdf)
    label = {d.bdf: d.label or d.bdf for d in nics}
    for bdf, gpus in shared.items():
        notes.append(f"{', '.join(gpus)} share one NIC, {label[bdf]}: a claim for {len(gpus)} pairs "
                     "needs a NIC each, so the scheduler cannot give it these GPUs together")
    notes += gpu_memory_notes(devices, pairs, form)
    if not pairs:
        return DraEmit(topo.source, form, devices, pairs, 0, (), None, "the node has no GPU", tuple(notes))
    want = len(pairs) if count is None else count
    if want > len(pairs):
        raise ValueError(f"the node has {len(pairs)} GPU(s), fewer than the {want} requested")
    nic_count = min(want, len(nics))
    root_pairs, numa_pairs = capacities(devices, form)
    match = claim_match(pairs, nic_count, root_pairs, numa_pairs)
    claims, attr, why = claim_template(pairs, want, gpu_device_class or gpu_class(topo), nic_device_class,
                                       name or f"gpu-nic-pairs-{want}", nic_count, match)
    if not nics:
        notes.append(f"the node has no NIC: the template requests {want} GPU(s) alone (a GPU+NIC claim could never "
                     "be satisfied on this node)")
    elif nic_count < want:
        notes.append(f"the node has {len(nics)} NIC(s) for {want} GPU(s): the template requests {nic_count} NIC(s), "
                     f"each with one of the GPUs (a NIC for every GPU could never be satisfied here)")
    classes: tuple[dict, ...] = ()
    if nic_count and nic_device_class == DEFAULT_NIC_CLASS:
        classes = (dranet_device_class(),)
        notes.append(f"DeviceClass {DEFAULT_NIC_CLASS}: dranet installs no DeviceClass, so it is written here: "
                     f"dranet's devices ({DRANET_DRIVER}) with RDMA ({DRANET_DRIVER}/rdma); each NIC request asks "
                     "for RDMA too")
    if len(claims) > 1:
        notes.append(f"{want} GPUs and {nic_count} NICs are {want + nic_count} devices, more than one claim can be "
                     f"given (the API allows {ALLOCATION_RESULTS_MAX}: AllocationResultsMaxSize, {DEVICE_REQUESTS_MAX} "
                     f"requests, {DEVICE_CONSTRAINTS_MAX} constraints): {len(claims)} templates of "
                     f"{'/'.join(map(str, claim_sizes(want)))} GPUs; the pod lists each under "
                     "spec.resourceClaims")
    return DraEmit(topo.source, form, devices, pairs, want, claims, attr, why, tuple(notes), nic_count, classes)


def _names(devices: Sequence[DeviceAttributes]) -> str:
    return ", ".join(d.label or d.bdf for d in devices)


def _spell(nodes: Sequence[int]) -> str:
    return str(nodes[0]) if len(nodes) == 1 else str(list(nodes))


@record
class NicNodes:
    """The NICs' numaNode values, indexed: for each node the first NIC (in the order given) whose numaNode holds
    it, so asking about a GPU costs its own nodes, never a scan of every NIC (2,000 GPUs x 2,000 NICs)."""

    first: Mapping[int, tuple[int, str, tuple[int, ...]]]  # node -> (order, NIC label, the nodes it holds)
    any: bool  # some NIC publishes a numaNode


def nic_nodes(nics: Sequence[tuple[str, tuple[int, ...]]]) -> NicNodes:
    first: dict[int, tuple[int, str, tuple[int, ...]]] = {}
    for i, (label, held) in enumerate(nics):
        for node in held:
            first.setdefault(node, (i, label, held))
    return NicNodes(first, bool(nics))


def numa_match_note(nodes: Sequence[int], nics: NicNodes | Sequence[tuple[str, tuple[int, ...]]]) -> tuple[bool, str]:
    """(whether a numaNode of `nodes` matches one of `nics` ((label, the nodes its numaNode holds), or their index),
    and the clause that says so): a scalar matches an equal value, lists match when they intersect."""
    index = nics if isinstance(nics, NicNodes) else nic_nodes(nics)
    hits = [index.first[n] for n in nodes if n in index.first]
    if hits:
        _, label, held = min(hits)
        shown = (f"{label} publishes numaNode {held[0]} too" if len(held) == 1 else
                 f"{label}'s numaNode list {list(held)} holds {_spell(sorted(set(nodes).intersection(held)))}")
        return True, f"{shown}, so a numaNode match with {label} is satisfied"
    if not index.any:
        return False, "no NIC publishes a numaNode"
    return False, f"no NIC's numaNode holds {_spell(list(nodes))}"


def gpu_memory_notes(devices: Sequence[DeviceAttributes], pairs: Sequence[Pairing], form: str = "scalar") -> list[str]:
    """A GPU with its own CPU-less memory node (GH200, GB200 in NUMA mode, a superchip VM): what NVML reports
    for it and what NVIDIA's DRA driver publishes instead, whether a numaNode match pairs it with a NIC, each
    derived from this node's devices, and what to match on instead."""
    gpus = [d for d in devices if d.gpu_memory_node is not None]
    if not gpus:
        return []
    nics = nic_nodes([(n.label or n.bdf, numa_keys(n, form)) for n in devices if n.kind == "nic"
                      and n.numa_node is not None])
    hbm = ", ".join(str(d.gpu_memory_node) for d in gpus)
    out = (f"{_names(gpus)}: each has its own CPU-less memory node ({hbm}: the HBM onlined as a NUMA node), which "
           "NVML reports as the GPU's node (nvmlDeviceGetNumaNodeId); NVIDIA's DRA driver publishes the PCI "
           "function's numa_node from sysfs, and no numaNode where that is -1")
    parts = []
    sysfs = [d for d in gpus if d.numa_node is None]
    if sysfs:
        parts.append(f"{_names(sysfs)} publish no numaNode (-1 here), so a claim that matches GPU and NIC on numaNode "
                     "can never be satisfied with them")
    never = ", so a claim that matches it with a NIC on numaNode can never be satisfied"
    for d in gpus:
        if d.numa_node is not None:
            # what the driver publishes: the node, as a one-element list in list form (until it computes the rest)
            ok, why = numa_match_note((d.numa_node,), nics)
            shown = f"[{d.numa_node}]" if form == "list" else str(d.numa_node)
            parts.append(f"for {d.label or d.bdf} it publishes {shown}: {why}{'' if ok else never}")
    nvml = [d for d in gpus if d.gpu_memory_node != d.numa_node]
    if nvml:
        parts.append("a slice giving NVML's node instead (no release of the driver numatune knows does): " + "; ".join(
            f"{d.label or d.bdf} on {f'[{d.gpu_memory_node}]' if form == 'list' else d.gpu_memory_node}: "
            f"{numa_match_note((d.gpu_memory_node,), nics)[1]}" for d in nvml))
    out += "; " + "; ".join(parts)
    rooted = {p.gpu.bdf for p in pairs if p.match == PCIE_ROOT and not p.shared}
    if all(d.bdf in rooted for d in gpus):
        return [out + ": pcieRoot is the attribute to match, as this template does"]
    by_node = {p.gpu.bdf for p in pairs if p.match == NUMA_NODE and not p.shared}
    if all(d.bdf in rooted or d.bdf in by_node for d in gpus):
        return [out + ": this template's numaNode match holds with the node the driver publishes"]
    lost = [d for d in gpus if d.bdf not in rooted and d.bdf not in by_node]
    return [out + f": no NIC here shares the root complex of {_names(lost)} (pcieRoot cannot pair them either); "
            + cel_hint(lost, devices)]


def nics_on_nodes(devices: Sequence[DeviceAttributes]) -> dict[int, list[str]]:
    """node -> the NICs whose PCI function is on it."""
    on: dict[int, list[str]] = {}
    for n in devices:
        if n.kind == "nic" and n.numa_node is not None:
            on.setdefault(n.numa_node, []).append(n.label or n.bdf)
    return on


def cel_hint(gpus: Sequence[DeviceAttributes], devices: Sequence[DeviceAttributes],
             on: Mapping[int, list[str]] | None = None) -> str:
    """How to pair `gpus` with NICs by CEL selectors: the GPU by pciBusID, its NIC by numaNode == the GPU's CPU node
    (the nearest node with CPUs, never a CPU-less memory node), where a NIC is on that node (`on`: nics_on_nodes of
    `devices`, given when asked for many GPUs one at a time)."""
    if on is None:
        on = nics_on_nodes(devices)
    homes = [f"{d.label or d.bdf}: node {d.cpu_node}" for d in gpus if d.cpu_node is not None and d.cpu_node in on]
    lost = [d for d in gpus if d.cpu_node is None or d.cpu_node not in on]
    text = ""
    if homes:
        text = (f"pair them by CEL selectors: the GPU by {PCI_BUS_ID}, its NIC by numaNode == the GPU's CPU node "
                f"({', '.join(homes)})")
    if lost:
        where = f"the NICs are on node(s) {', '.join(map(str, sorted(on)))}" if on else "no NIC has a NUMA node"
        cpu = ", ".join(f"{d.label or d.bdf}'s is node {d.cpu_node}" if d.cpu_node is not None else
                        f"{d.label or d.bdf}'s is unknown" for d in lost)
        text += ("; " if text else "") + (f"no NIC is on the CPU node ({cpu}; {where}): no attribute pairs them, "
                                          "request the NIC without a constraint")
    return text
