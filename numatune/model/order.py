"""Device identity: the one order in which numatune numbers GPUs and NICs (GPU0, NIC0 ...).

Every command that prints or uses a device index (inspect in every format, the path matrix and the
picture, launch's rank -> GPU and *_VISIBLE_DEVICES, audit, emit's gres.conf, the nvidia-smi comparison)
takes it from here, so "GPU3" is the same device everywhere.

- NVIDIA GPUs: PCI bus order, every field of the address compared as a number (domain, bus, device,
  function; domains may be 5+ hex digits). It is the order of `nvidia-smi`, of CUDA with
  CUDA_DEVICE_ORDER=PCI_BUS_ID and of the driver's minor numbers (/dev/nvidiaN) on real machines. A
  string or "natural" sort gets it wrong: "3b" would come before "18".
- AMD GPUs: the order ROCm's runtime enumerates them, which is what indices in ROCR_VISIBLE_DEVICES and
  HIP_VISIBLE_DEVICES count: ROCr's topology discovery (ROCR-Runtime, src/core/runtime/amd_topology.cpp,
  BuildTopology) walks the KFD topology nodes (/sys/class/kfd/kfd/topology/nodes/N) from node 0 upwards
  and registers a GPU agent for each node with compute cores, so GPU i is the i-th GPU node by KFD node
  id; HIP's devices are ROCr's GPU agents in that order, and ROCm's "GPU isolation techniques" page
  documents ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES as indices into that enumeration. The KFD numbers
  its nodes as the driver probes the devices, which need not be PCI order (the MI210 fixture has KFD GPU0
  at 0000:63:00.0, while PCI order starts at 0000:03:00.0): `order_note` says so where they differ. AMD
  GPUs the KFD does not list (a tree without /sys/class/kfd) fall back to PCI order, and the note says
  that too. Partitions (CPX) of one GPU share its PCI function and are counted once.
- Other GPUs (Intel), and accelerators when there is no GPU: PCI bus order.
- NICs: PCI bus order (nvidia-smi numbers them NIC0.. in the order of their PCI addresses too).

Pure: devices in, order out.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from numatune.model.topology import PciDevice

NVIDIA, AMD = 0x10DE, 0x1002
_HEX = frozenset("0123456789abcdefABCDEF")


def pci_sort_key(bdf: str) -> tuple[int, ...]:
    """PCI bus order: (domain, bus, device, function) as numbers; "18:00.0" has domain 0. Text that is
    no PCI address sorts last."""
    text = bdf.strip()
    parts = text.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3 or "." not in parts[2]:
        return (1 << 40,)
    dev, _, fn = parts[2].partition(".")
    fields = (parts[0], parts[1], dev, fn)
    if not all(f and len(f) <= 8 and _HEX.issuperset(f) for f in fields):  # a domain has 8 digits at most
        return (1 << 40,)
    return tuple(int(f, 16) for f in fields)


def _by_pci(devices: Sequence[PciDevice]) -> list[PciDevice]:
    return sorted(devices, key=lambda d: pci_sort_key(d.bdf))


def gpu_order(devices: Sequence[PciDevice]) -> tuple[list[PciDevice], str]:
    """(the GPUs in numatune's numbering, "gpu"); when there is no GPU, the accelerators in PCI order
    (e.g. NEC Vector Engines, "accelerator"). NVIDIA first (PCI order), then AMD (ROCm's KFD order),
    then the rest (PCI order): one vendor per machine gives exactly that vendor's runtime order."""
    gpus = [d for d in devices if d.kind == "gpu"]
    if not gpus:
        return _by_pci([d for d in devices if d.kind == "accelerator"]), ("accelerator" if any(
            d.kind == "accelerator" for d in devices) else "gpu")
    nvidia = _by_pci([d for d in gpus if d.vendor_id == NVIDIA])
    amd = amd_order([d for d in gpus if d.vendor_id == AMD])
    rest = _by_pci([d for d in gpus if d.vendor_id not in (NVIDIA, AMD)])
    return nvidia + amd + rest, "gpu"


def amd_order(gpus: Sequence[PciDevice]) -> list[PciDevice]:
    """AMD GPUs as ROCr enumerates them: by KFD node id; those the KFD does not list after, in PCI order."""
    seen: set[str] = set()
    listed = []
    for d in sorted((d for d in gpus if d.amd_kfd_node is not None), key=lambda d: d.amd_kfd_node):
        if d.bdf.lower() not in seen:
            seen.add(d.bdf.lower())
            listed.append(d)
    return listed + _by_pci([d for d in gpus if d.amd_kfd_node is None])


def nic_order(devices: Sequence[PciDevice]) -> list[PciDevice]:
    """NICs in PCI bus order."""
    return _by_pci([d for d in devices if d.kind == "nic"])


def runtime_devices(vendor: int, gpus: Sequence[PciDevice]) -> list[PciDevice]:
    """What one vendor's runtime counts (CUDA: NVIDIA only; ROCm: AMD only), in `gpu_order`; all GPUs when
    none of that vendor is known (a partial tree without vendor ids)."""
    mine = [d for d in gpus if d.vendor_id == vendor]
    return mine or list(gpus)


def order_note(devices: Sequence[PciDevice]) -> str:
    """How the GPU numbers were given, and where they differ from PCI bus order; "" when there is nothing
    to say (no GPU, or PCI order by every rule)."""
    gpus, kind = gpu_order(devices)
    if kind != "gpu" or not gpus:
        return ""
    notes = []
    amd = [d for d in gpus if d.vendor_id == AMD]
    if amd:
        unlisted, differs = amd_vs_pci(amd, first=gpus.index(amd[0]))
        if unlisted:
            notes.append(unlisted)
        if differs:
            notes.append(f"AMD GPUs are numbered as ROCm enumerates them (KFD node order), {differs}")
    if any(d.vendor_id == NVIDIA for d in gpus) and len({d.vendor_id for d in gpus}) > 1:
        notes.append("GPUs of several vendors: NVIDIA first (CUDA's PCI order), then AMD (ROCm's order); "
                     "each runtime counts its own vendor's GPUs from 0")
    return "; ".join(notes)


def amd_vs_pci(amd: Sequence[PciDevice], first: int = 0) -> tuple[str, str]:
    """(what is said of AMD GPUs the KFD does not list, how KFD order differs from PCI bus order) for AMD
    GPUs in `amd_order`, the first of them numbered GPU`first`; "" where there is nothing to say."""
    unlisted = ""
    if any(d.amd_kfd_node is None for d in amd):
        unlisted = ("AMD GPUs without a KFD topology node are numbered in PCI bus order "
                    "(ROCm's own order cannot be read from this tree)")
    by_pci = _by_pci(amd)
    if [d.bdf for d in amd] == [d.bdf for d in by_pci]:
        return unlisted, ""
    moved = ", ".join(f"GPU{first + i} = {d.bdf} (PCI order: {p.bdf})"
                      for i, (d, p) in enumerate(zip(amd, by_pci, strict=True)) if d.bdf != p.bdf)
    return unlisted, f"which differs from PCI bus order here: {moved}"


def labels(devices: Sequence[PciDevice]) -> dict[str, str]:
    """BDF (lower case) -> "GPU0" / "NIC0" for every GPU and NIC of the machine."""
    gpus, kind = gpu_order(devices)
    out = {d.bdf.lower(): f"GPU{i}" for i, d in enumerate(gpus)} if kind == "gpu" else {}
    out.update({d.bdf.lower(): f"NIC{i}" for i, d in enumerate(nic_order(devices))})
    return out



def device_names(devices: Sequence[PciDevice]) -> dict[str, str]:
    """BDF (lower case) -> "GPU0 0000:18:00.0" / "NIC0 0000:19:00.0": how a finding's head line names its
    device, numbered as every other view numbers it, the PCI address beside."""
    bdfs = {d.bdf.lower(): d.bdf for d in devices}
    return {bdf: f"{label} {bdfs[bdf]}" for bdf, label in labels(devices).items()}


def gpu_names(devices: Sequence[PciDevice]) -> dict[str, str]:
    """BDF (lower case) -> "GPU0 0000:18:00.0": how findings and `irq` name a GPU, numbered as inspect's
    tables and the picture number it, its PCI address beside (`.get(bdf.lower(), f"GPU {bdf}")`)."""
    gpus, kind = gpu_order(devices)
    return {d.bdf.lower(): f"GPU{i} {d.bdf}" for i, d in enumerate(gpus)} if kind == "gpu" else {}
