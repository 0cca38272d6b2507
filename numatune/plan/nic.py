"""Each rank's own NIC (`launch --nic auto|NAME|none`): the RDMA NIC nearest the rank's GPU.

Pure. The PCIe path between a GPU and a NIC is the one `inspect` prints (analysis.paths: PIX, PXB,
PHB, NODE, SYS). On a rail-aligned node (DGX/HGX: one NIC under each GPU's PCIe switch) every GPU
gets the NIC under its own switch. Where several NICs are equally near, the node's GPUs in use are
spread over them in PCI order (GPU i → the i-th free one), so two ranks share a NIC only when no
equally near NIC is left; that and a NIC across the socket are warnings.

The rank learns its NIC from the variables its libraries read: UCX_NET_DEVICES=mlx5_N:PORT (UCX, so
Open MPI/UCC over UCX), NCCL_IB_HCA==mlx5_N:PORT (NCCL; the leading "=" asks for an exact match: a
plain "mlx5_1" is a prefix and would also select mlx5_10..mlx5_19) and, when the job's traffic is TCP
(--nic-transport tcp), NCCL_SOCKET_IFNAME==NETDEV and GLOO_SOCKET_IFNAME=NETDEV.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from numatune.errors import BindingError
from numatune.model.launch import NicChoice
from numatune.model.paths import RANK, connection
from numatune.model.resolve import normalize_bdf, pci_sort_key
from numatune.model.topology import PciDevice

NIC_VARS = ("UCX_NET_DEVICES", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def candidate_nics(devices: Sequence[PciDevice], transport: str) -> list[PciDevice]:
    """NICs a rank can be given, in PCI order: with an RDMA device (rdma), or with a netdev (tcp)."""
    nics = [d for d in devices if d.kind == "nic" and (d.rdma if transport == "rdma" else d.netdevs)]
    return sorted(nics, key=lambda d: pci_sort_key(d.bdf))


def nic_label(nic: PciDevice, transport: str) -> str:
    names = nic.rdma if transport == "rdma" else nic.netdevs
    return names[0] if names else nic.bdf


def assign_nics(gpus: Sequence[PciDevice], nics: Sequence[PciDevice],
                distance: Callable[[int | None, int | None], int | None] | None = None,
                ) -> dict[str, tuple[PciDevice, str]]:
    """GPU BDF → (NIC, path) for every GPU in use, in PCI order: each takes the nearest NIC, the least
    loaded one (then the nearer node by SLIT distance: SYS covers both the socket's other NUMA nodes and the
    other socket, then the first in PCI order) among the equally near."""
    load: dict[str, int] = {n.bdf: 0 for n in nics}
    out = {}
    for gpu in sorted(gpus, key=lambda d: pci_sort_key(d.bdf)):
        paths = {n.bdf: connection(gpu, n) for n in nics}
        best = min(RANK[p] for p in paths.values())
        near = [n for n in nics if RANK[paths[n.bdf]] == best]
        nic = min(near, key=lambda n: (load[n.bdf], _far(distance, gpu.node, n.node), pci_sort_key(n.bdf)))
        load[nic.bdf] += 1
        out[gpu.bdf] = (nic, paths[nic.bdf])
    return out


def _far(distance: Callable[[int | None, int | None], int | None] | None, a: int | None, b: int | None) -> int:
    """SLIT distance for ordering (unknown: after every known one)."""
    d = distance(a, b) if distance is not None else None
    return d if d is not None else 1 << 30


def _named(name: str, nics: Sequence[PciDevice], devices: Sequence[PciDevice], transport: str) -> PciDevice:
    bdf = normalize_bdf(name)
    for d in nics:
        if name in d.rdma or name in d.netdevs or (bdf is not None and d.bdf.lower() == bdf):
            return d
    other = next((d for d in devices if d.kind == "nic" and (name in d.rdma or name in d.netdevs
                                                              or (bdf is not None and d.bdf.lower() == bdf))), None)
    if other is not None:
        what = "no RDMA device" if transport == "rdma" else "no network interface"
        raise BindingError(f"--nic {name}: {other.bdf} has {what} (--nic-transport {transport})")
    known = ", ".join(nic_label(d, transport) for d in nics) or "none"
    raise BindingError(f"--nic {name}: no such NIC in this root (NICs: {known})")


def choose_nic(
    opts_nic: str,
    transport: str,
    dev: PciDevice | None,
    in_use: Sequence[PciDevice],
    node: int | None,
    devices: Sequence[PciDevice],
    reasons: list[str],
    warnings: list[str],
    distance: Callable[[int | None, int | None], int | None] | None = None,
) -> NicChoice | None:
    """The rank's NIC for `--nic` (none | auto | a name: mlx5_3, ib0, a BDF); `distance` (SLIT between two
    nodes) orders NICs that are equally far by PCIe path."""
    if opts_nic == "none":
        return None
    nics = candidate_nics(devices, transport)
    what = "RDMA NIC" if transport == "rdma" else "NIC with a network interface"
    if opts_nic != "auto":
        nic = _named(opts_nic, nics, devices, transport)
        path = connection(dev, nic) if dev is not None else "named"
        choice = NicChoice(nic.bdf, nic.rdma[0] if nic.rdma else None, nic.netdevs[0] if nic.netdevs else None,
                           path, f"--nic {opts_nic}")
    elif not nics:
        warnings.append(f"--nic auto: no {what} in this root; no NIC variables set")
        reasons.append(f"nic: none (no {what})")
        return None
    elif dev is None:
        same = [n for n in nics if n.node == node]
        nic = same[0] if same else min(nics, key=lambda n: (_far(distance, node, n.node), pci_sort_key(n.bdf)))
        path = "NODE" if same else "SYS"
        choice = NicChoice(nic.bdf, nic.rdma[0] if nic.rdma else None, nic.netdevs[0] if nic.netdevs else None,
                           path, f"first {what} on node {node} (--node: no GPU to measure from)" if same
                           else f"no {what} on node {node}: the nearest by SLIT distance")
    else:
        gpus = [d for d in in_use if d.kind == dev.kind] or [dev]
        if dev not in gpus:
            gpus.append(dev)
        table = assign_nics(gpus, nics, distance)
        nic, path = table[dev.bdf]
        shared = tuple(g for g, (n, _) in table.items() if n.bdf == nic.bdf and g != dev.bdf)
        nearest = "under its PCIe switch" if path in ("PIX", "PXB") else f"path {path}"
        choice = NicChoice(nic.bdf, nic.rdma[0] if nic.rdma else None, nic.netdevs[0] if nic.netdevs else None,
                           path, f"nearest {what} to GPU {dev.bdf} ({nearest})", shared)
        if shared:
            warnings.append(f"GPU {dev.bdf} must share NIC {nic_label(nic, transport)} ({nic.bdf}) with GPU(s) "
                            f"{', '.join(shared)}: {len(gpus)} GPU(s) in use, no other {what} as near ({path})")
    if choice.path == "SYS":
        whose = "GPU " + dev.bdf if dev is not None else "node " + str(node)
        if nic.node is None:
            warnings.append(f"NIC {nic_label(nic, transport)} ({nic.bdf}) has no known NUMA node (numa_node -1): "
                            f"how far it is from {whose} cannot be told")
        else:
            traffic = "GPUDirect RDMA traffic" if transport == "rdma" else "its traffic"
            warnings.append(f"NIC {nic_label(nic, transport)} ({nic.bdf}) is on node {nic.node}, across the socket or "
                            f"NUMA link from {whose} (SYS): {traffic} crosses it")
    reasons.append(f"nic: {nic_label(nic, transport)} ({nic.bdf}), {choice.source}"
                   + (f"; path to the GPU {choice.path}" if choice.path not in ("named",) and dev is not None
                      and opts_nic != "auto" else ""))
    return choice


def nic_env(choice: NicChoice, transport: str, ports: Mapping[str, tuple[int, ...]], env: Mapping[str, str],
            reasons: list[str]) -> dict[str, str]:
    """The variables that give the rank its NIC; ones the job already set are left alone."""
    out: dict[str, str] = {}
    if transport == "rdma" and choice.rdma:
        port = (ports.get(choice.rdma) or (1,))[0]
        out["UCX_NET_DEVICES"] = f"{choice.rdma}:{port}"
        out["NCCL_IB_HCA"] = f"={choice.rdma}:{port}"
    if transport == "tcp" and choice.netdev:
        out["NCCL_SOCKET_IFNAME"] = f"={choice.netdev}"
        out["GLOO_SOCKET_IFNAME"] = choice.netdev
    kept = {k: v for k, v in out.items() if k not in env}
    for k in out:
        if k in env:
            reasons.append(f"env: {k}={env[k]} already set: left alone")
    if kept:
        reasons.append("env: " + " ".join(f"{k}={v}" for k, v in kept.items()) + " (the rank's NIC)")
    return kept
