"""The vendors' own matrix, `nvidia-smi topo -m`, parsed so numatune's matrix can be checked against it.

nvidia-smi prints a header row of device labels (GPU0.., NIC0.. or, before driver 470, mlx5_0..),
then one row per device: its label, one cell per column (X, PIX, PXB, PHB, NODE, SYS, NV#), then
CPU affinity, NUMA affinity and (newer drivers) GPU NUMA ID. Cells are separated by tabs, which
pasted outputs often turn into runs of spaces; both are read. The legend and the NIC legend
(NIC0: mlx5_0) follow a blank line.
"""

from __future__ import annotations

import re

from numatune.model._record import record
from numatune.model.paths import PathMatrix
from numatune.model.topology import Topology

_LABELS = re.compile(r"GPU\d+|NIC\d+|[a-z]+\d*_\d+")
_CELL = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d+)$")
_CELLS = re.compile(r"NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|X")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header on a terminal
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
TRAILERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@record
class VendorMatrix:
    labels: tuple[str, ...]  # column labels in order: GPU0.., NIC0.. (or mlx5_0..)
    cells: dict  # (row label, column label) -> cell text
    cpu_affinity: dict  # label -> "0-23,48-71" as printed (GPU rows only)
    numa_affinity: dict  # label -> "0" / "N/A"
    nic_names: dict  # NIC0 -> mlx5_0, from the NIC legend

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(x for x in self.labels if x.startswith("GPU"))

    def cell(self, a: str, b: str) -> str | None:
        return self.cells.get((a, b))


def parse_nvidia_smi_topo(text: str) -> VendorMatrix:
    """Parse `nvidia-smi topo -m` output; raises ValueError when no matrix is found."""
    lines = _ANSI.sub("", text).replace("\r", "").split("\n")
    head = None
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or not _CELL.match(tokens[1])):
            head = i
            break
    if head is None:
        raise ValueError("no `nvidia-smi topo -m` header (a line starting with GPU0 and naming the columns)")
    header = lines[head]
    trailers = [t for t in TRAILERS if t in header]
    for trailer in trailers:
        header = header.replace(trailer, "")
    labels = tuple(_split(header.split(), _LABELS))
    cells: dict[tuple[str, str], str] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    names: dict[str, str] = {}
    for line in lines[head + 1:]:
        m = _NIC_LEGEND.match(line)
        if m:
            names[m.group(1)] = m.group(2)
            continue
        tokens = line.split()
        if not tokens or tokens[0] not in labels:
            continue
        row = tokens[0]
        tokens = [row, *_split(tokens[1:], _CELLS)]
        values = tokens[1:1 + len(labels)]
        if len(values) < len(labels):
            raise ValueError(f"row {row} has {len(values)} cells for {len(labels)} columns")
        for col, value in zip(labels, values, strict=True):
            cells[(row, col)] = value
        rest = tokens[1 + len(labels):]
        if row.startswith("GPU") and trailers[:2] == list(TRAILERS[:2]) and len(rest) == len(trailers):
            cpu[row], numa[row] = rest[0], rest[1]  # blank affinities (a VM) shift the columns: not read
    if not cells:
        raise ValueError("`nvidia-smi topo -m` header without rows")
    return VendorMatrix(labels, cells, cpu, numa, names)


def _split(tokens: list[str], pattern: re.Pattern) -> list[str]:
    """Tokens as printed; one made only of several labels or cells ("NIC8NIC9", "NODENODE": a tab lost
    when the output was pasted) is split back into them."""
    out = []
    for token in tokens:
        parts = pattern.findall(token)
        out.extend(parts if parts and "".join(parts) == token else [token])
    return out


def compare_with_nvidia_smi(topo: Topology, ours: PathMatrix, theirs: VendorMatrix) -> list[str]:
    """Differences between numatune's matrix and nvidia-smi's; [] when they agree.

    GPUs are matched in PCI order (nvidia-smi's indices follow it); NICs by RDMA name through the NIC
    legend, since nvidia-smi lists RDMA devices only (a VM's virtio NIC is not among them).
    """
    gpu_cols = [i for i, x in enumerate(ours.labels) if x.startswith("GPU")]
    out = []
    if len(gpu_cols) != len(theirs.gpus):
        return [f"{len(gpu_cols)} GPU(s) here, {len(theirs.gpus)} in nvidia-smi"]
    index = {i: g for i, g in zip(gpu_cols, theirs.gpus, strict=True)}
    by_rdma = {name: label for label, name in theirs.nic_names.items()}
    devices = {d.bdf: d for d in topo.devices}
    for i, bdf in enumerate(ours.devices):
        dev = devices.get(bdf)
        if dev is not None and dev.kind == "nic":
            label = next((by_rdma[r] for r in dev.rdma if r in by_rdma), None)
            if label is not None:
                index[i] = label
    for i in index:
        for j in index:
            mine, vendor = ours.cells[i][j], theirs.cell(index[i], index[j])
            if vendor is not None and mine != vendor:
                out.append(f"{ours.labels[i]}-{ours.labels[j]}: {mine} here, {vendor} in nvidia-smi")
    for i, label in index.items():
        if label in theirs.numa_affinity:
            node = ours.nodes[i]
            vendor = theirs.numa_affinity[label]
            if vendor != "N/A" and str(node) != vendor:
                out.append(f"{ours.labels[i]} NUMA affinity: {node} here, {vendor} in nvidia-smi")
    return out
