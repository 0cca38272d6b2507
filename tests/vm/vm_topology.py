"""Topology files (tests/vm/topologies/*.toml) and their translation into QEMU options.

A topology is data, not code, so a new machine shape is one small file. This module is
imported both on the host (to build the QEMU command line) and inside the guest (so the
checks know what the machine is supposed to look like), hence it only uses the standard
library and has no import-time side effects.

QEMU option values must never contain spaces: virtme-ng passes ``--qemu-opts`` through a
shell. Everything is emitted as separate argv items; :func:`qemu_opts_string` joins them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10 fallback
    import tomli as tomllib  # type: ignore[no-redef]

TOPOLOGY_DIR = Path(__file__).resolve().parent / "topologies"


@dataclass(frozen=True)
class Node:
    id: int
    memory_mib: int
    cpus: tuple[int, ...]
    initiator: int | None


@dataclass(frozen=True)
class Hmat:
    initiator: int
    target: int
    latency_ns: int
    bandwidth_mbps: int


@dataclass(frozen=True)
class PciDevice:
    kind: str  # QEMU device model: e1000e, nvme, ...
    id: str
    chassis: int
    disk_mib: int = 0  # backing file size for block devices (nvme)


@dataclass(frozen=True)
class Expander:
    id: str
    bus_nr: int
    numa_node: int
    devices: tuple[PciDevice, ...]


@dataclass(frozen=True)
class Cxl:
    host_bridge: str
    bus_nr: int
    numa_node: int
    chassis: int
    memory_mib: int
    lsa_mib: int
    window_gib: int
    devices: int = 1  # Type-3 devices; more than one sit behind an emulated switch, in one interleaved region
    serials: tuple[int, ...] = ()  # cxl-type3 sn= per device (unset: the device reports serial 0)
    granularity: int = 256  # the region's interleave granularity (with devices > 1)

    @property
    def switch(self) -> bool:
        return self.devices > 1


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    path: Path
    sockets: int
    cores: int
    threads: int
    nodes: tuple[Node, ...]
    distances: dict[tuple[int, int], int]
    hmat: tuple[Hmat, ...]
    expanders: tuple[Expander, ...]
    cxl: Cxl | None
    append: tuple[str, ...] = field(default=())
    capture_only: bool = False  # booted by hand to refresh its fixture (run_vm.py), not in the VM test stage

    @property
    def ncpus(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def memory_mib(self) -> int:
        """Total guest RAM; QEMU requires it to equal the sum of the node backends."""
        return sum(n.memory_mib for n in self.nodes)

    def distance(self, a: int, b: int) -> int:
        """SLIT distance as QEMU will write it (symmetric unless both directions are given)."""
        if a == b:
            return 10
        return self.distances.get((a, b), self.distances.get((b, a), 20))

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def devices_on(self, node_id: int) -> list[PciDevice]:
        return [d for e in self.expanders if e.numa_node == node_id for d in e.devices]


def _size_to_mib(value: Any) -> int:
    return int(value)


def load(name_or_path: str | os.PathLike[str]) -> Topology:
    """Load a topology by name (``two-socket``) or by path to a TOML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = TOPOLOGY_DIR / f"{name_or_path}.toml"
    data = tomllib.loads(path.read_text())
    machine = data.get("machine", {})
    nodes = tuple(
        Node(
            id=int(n["id"]),
            memory_mib=_size_to_mib(n["memory_mib"]),
            cpus=tuple(int(c) for c in n.get("cpus", [])),
            initiator=n.get("initiator"),
        )
        for n in data["nodes"]
    )
    distances = {(int(d["src"]), int(d["dst"])): int(d["val"]) for d in data.get("distances", [])}
    hmat = tuple(
        Hmat(int(h["initiator"]), int(h["target"]), int(h["latency_ns"]), int(h["bandwidth_mbps"]))
        for h in data.get("hmat", [])
    )
    expanders = tuple(
        Expander(
            id=e["id"],
            bus_nr=int(e["bus_nr"]),
            numa_node=int(e["numa_node"]),
            devices=tuple(
                PciDevice(kind=d["kind"], id=d["id"], chassis=int(d["chassis"]), disk_mib=int(d.get("disk_mib", 0)))
                for d in e.get("devices", [])
            ),
        )
        for e in data.get("expanders", [])
    )
    cxl = None
    if "cxl" in data:
        c = data["cxl"]
        cxl = Cxl(
            host_bridge=c["host_bridge"],
            bus_nr=int(c["bus_nr"]),
            numa_node=int(c["numa_node"]),
            chassis=int(c["chassis"]),
            memory_mib=int(c["memory_mib"]),
            lsa_mib=int(c["lsa_mib"]),
            window_gib=int(c["window_gib"]),
            devices=int(c.get("devices", 1)),
            serials=tuple(int(x) for x in c.get("serials", [])),
            granularity=int(c.get("granularity", 256)),
        )
    topo = Topology(
        name=data["name"],
        description=data.get("description", ""),
        path=path.resolve(),
        sockets=int(machine.get("sockets", 1)),
        cores=int(machine.get("cores", 1)),
        threads=int(machine.get("threads", 1)),
        nodes=nodes,
        distances=distances,
        hmat=hmat,
        expanders=expanders,
        cxl=cxl,
        append=tuple(machine.get("append", [])),
        capture_only=bool(data.get("capture_only", False)),
    )
    _validate(topo)
    return topo


def _validate(topo: Topology) -> None:
    cpus = sorted(c for n in topo.nodes for c in n.cpus)
    if cpus != list(range(topo.ncpus)):
        raise ValueError(f"{topo.path}: node cpus {cpus} must cover 0..{topo.ncpus - 1} exactly once")
    ids = [n.id for n in topo.nodes]
    if ids != list(range(len(ids))):
        raise ValueError(f"{topo.path}: node ids must be 0..N-1 in order, got {ids}")


def available(capture_only: bool = False) -> list[str]:
    """Names of the topologies the VM stage boots, in a stable order (boot order of the test session);
    with capture_only, also those booted only by hand to refresh their fixture."""
    order = {"two-socket": 0, "cxl": 1, "cxl-switch": 2}
    names = [p.stem for p in TOPOLOGY_DIR.glob("*.toml")]
    if not capture_only:
        names = [n for n in names if not tomllib.loads((TOPOLOGY_DIR / f"{n}.toml").read_text()).get("capture_only")]
    return sorted(names, key=lambda n: (order.get(n, 99), n))


def backing_files(topo: Topology, workdir: Path) -> dict[str, tuple[Path, int]]:
    """Host files QEMU needs (label area, CXL memory, NVMe disks): id -> (path, size in MiB)."""
    files: dict[str, tuple[Path, int]] = {}
    for e in topo.expanders:
        for d in e.devices:
            if d.disk_mib:
                files[d.id] = (workdir / f"{d.id}.img", d.disk_mib)
    if topo.cxl:
        for i in range(topo.cxl.devices):
            files[f"cxl-mem{i}"] = (workdir / f"cxl-mem{i}.raw", topo.cxl.memory_mib)
            files[f"cxl-lsa{i}"] = (workdir / f"cxl-lsa{i}.raw", topo.cxl.lsa_mib)
    return files


def prepare_backing_files(topo: Topology, workdir: Path) -> None:
    """(Re)create every backing file empty and sparse.

    A CXL label area left over from an earlier boot makes ``ndctl create-namespace`` fail
    with "No space left on device", so this must run before *every* boot.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for path, mib in backing_files(topo, workdir).values():
        path.unlink(missing_ok=True)
        with path.open("wb") as f:
            f.truncate(mib * 1024 * 1024)


def qemu_args(topo: Topology, workdir: Path) -> list[str]:
    """QEMU options (one argv item each) describing the machine, NUMA, HMAT, PCI and CXL."""
    machine = "q35,hmat=on" + (",cxl=on" if topo.cxl else "")
    args = [
        "-machine", machine,
        # hypervisor=off: otherwise the kernel refuses to commit a CXL region
        # ("Failed to synchronize CPU cache state"); harmless for the other topologies.
        "-cpu", "max,hypervisor=off",
        "-smp", f"{topo.ncpus},sockets={topo.sockets},cores={topo.cores},threads={topo.threads}",
    ]
    for n in topo.nodes:
        args += ["-object", f"memory-backend-ram,id=m{n.id},size={n.memory_mib}M"]
        spec = f"node,nodeid={n.id},memdev=m{n.id}"
        if n.cpus:
            spec += f",cpus={n.cpus[0]}-{n.cpus[-1]}" if _contiguous(n.cpus) else _cpu_items(n.cpus)
        if n.initiator is not None:
            spec += f",initiator={n.initiator}"
        args += ["-numa", spec]
    for (src, dst), val in sorted(topo.distances.items()):
        args += ["-numa", f"dist,src={src},dst={dst},val={val}"]
    for h in topo.hmat:
        base = f"hmat-lb,initiator={h.initiator},target={h.target},hierarchy=memory"
        args += ["-numa", f"{base},data-type=access-latency,latency={h.latency_ns}"]
        args += ["-numa", f"{base},data-type=access-bandwidth,bandwidth={h.bandwidth_mbps}M"]
    files = backing_files(topo, workdir)
    for e in topo.expanders:
        args += ["-device", f"pxb-pcie,id={e.id},bus_nr={e.bus_nr:#x},numa_node={e.numa_node},bus=pcie.0"]
        for i, d in enumerate(e.devices):
            port = f"{e.id}rp{i}"
            args += ["-device", f"pcie-root-port,id={port},bus={e.id},chassis={d.chassis},slot={i},addr={i:#x}"]
            if d.kind == "nvme":
                path = files[d.id][0]
                args += ["-drive", f"file={path},if=none,id={d.id}drv,format=raw"]
                args += ["-device", f"nvme,id={d.id},serial=numatune{i},drive={d.id}drv,bus={port}"]
            else:
                args += ["-device", f"{d.kind},id={d.id},bus={port}"]
    if topo.cxl:
        args += _cxl_args(topo.cxl, files)
    for a in args:
        if " " in a:
            raise ValueError(f"QEMU option {a!r} contains a space; virtme-ng would split it")
    return args


def _cxl_args(c: Cxl, files: dict[str, tuple[Path, int]]) -> list[str]:
    """A CXL host bridge with one root port, then one Type-3 device, or a switch with one device per
    downstream port (pxb-cxl -> cxl-rp -> cxl-upstream -> cxl-downstream x N -> cxl-type3 x N)."""
    args = [
        "-device", f"pxb-cxl,id={c.host_bridge},bus_nr={c.bus_nr:#x},bus=pcie.0,numa_node={c.numa_node}",
        "-device", f"cxl-rp,id=cxlrp0,bus={c.host_bridge},port=0,chassis={c.chassis},slot=0",
    ]
    if c.switch:
        args += ["-device", "cxl-upstream,id=cxlus0,bus=cxlrp0"]
    for i in range(c.devices):
        mem, lsa = files[f"cxl-mem{i}"][0], files[f"cxl-lsa{i}"][0]
        args += [
            "-object", f"memory-backend-file,id=cxl-mem{i},share=on,mem-path={mem},size={c.memory_mib}M",
            "-object", f"memory-backend-file,id=cxl-lsa{i},share=on,mem-path={lsa},size={c.lsa_mib}M",
        ]
        bus = "cxlrp0"
        if c.switch:
            bus = f"cxlds{i}"
            args += ["-device", f"cxl-downstream,id={bus},bus=cxlus0,port={i},chassis={c.chassis + 1},slot={i}"]
        sn = f",sn={c.serials[i]}" if i < len(c.serials) else ""
        args += ["-device", f"cxl-type3,id=cxl-pmem{i},bus={bus},memdev=cxl-mem{i},lsa=cxl-lsa{i}{sn}"]
    args += ["-M", f"cxl-fmw.0.targets.0={c.host_bridge},cxl-fmw.0.size={c.window_gib}G"]
    return args


def qemu_opts_string(args: list[str]) -> str:
    return " ".join(args)


def _contiguous(cpus: tuple[int, ...]) -> bool:
    return list(cpus) == list(range(cpus[0], cpus[-1] + 1))


def _cpu_items(cpus: tuple[int, ...]) -> str:
    return "".join(f",cpus={c}" for c in cpus)


def to_json(topo: Topology) -> dict[str, Any]:
    """A plain-data view (for provenance notes and for the guest result file)."""
    return {
        "name": topo.name,
        "description": topo.description,
        "cpus": topo.ncpus,
        "memory_mib": topo.memory_mib,
        "nodes": [
            {"id": n.id, "memory_mib": n.memory_mib, "cpus": list(n.cpus), "initiator": n.initiator}
            for n in topo.nodes
        ],
        "distances": {f"{a}-{b}": v for (a, b), v in topo.distances.items()},
        "cxl": topo.cxl is not None,
    }
