"""Writes the HAND-MADE trees of the 2026 machine shapes (not captures): Grace superchips in NUMA and in
CDMM mode, AMD MI300A APUs and a sub-NUMA-clustered (SNC-4) GPU server.

    python -m tests.handmade_superchips /tmp/sc            # writes /tmp/sc/handmade-<name> for every machine
    python -m tests.fixture_archives pack /tmp/sc/handmade-gh200-numa     # and so on for each

Every fact and its source (fixtures/README.md, table "Hand-made", repeats them):
- GH200 in NUMA mode, 9 nodes: node 0 holds the 72 Grace cores (0-71), nodes 1-8 no CPUs
  (`lscpu` quoted in bytedance/xpu-perf#129); node 1 is the H100's HBM, nodes 2-8 the empty placeholder
  nodes the driver keeps for MIG instances (8 nodes per GPU: NVIDIA/mlperf-common#16 "4 * 8 numa nodes on
  the GPUs"); SLIT: Grace to its GPU's nodes 80, between GPU nodes 255 (the 4xGH200 `numactl -H` in
  numactl/numactl#224).
- GB200 compute tray in NUMA mode, 34 nodes (kubernetes/kubernetes#135541, #135581): CPUs 0-71 on node 0,
  72-143 on node 1; GPU0-3's HBM nodes 2, 10, 18, 26 with their placeholders 3-9, 11-17, 19-25, 27-33
  (`nvidia-smi topo -m` "GPU NUMA ID" and "NUMA Affinity" in sgl-project/sglang#11208; vllm-project/vllm#39361
  names the same HBM nodes and that NVML's numa node id is the HBM node); node sizes and the SLIT from the
  GB200 `numactl -H` in NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/
  blog08_Scaling_Expert_Parallelism_in_TensorRT-LLM_part2.md (Graces 489935 / 489795 MB, HBM nodes 188416 MB;
  40 between the Graces, 80 to a socket's own GPU nodes, 120 to the other socket's, 11 among one GPU's
  nodes, 40 between different GPUs' nodes; rows 0-3 and 9 printed, the other GPU rows taken to follow
  them). NVLink: every GPU pair NV18 and CPU affinity 0-71 / 72-143 in sglang#11208's `nvidia-smi topo -m`;
  in the NVML record each GPU has 18 active NVLink 5 links whose far end is an NVLink Switch (the NVL72's
  switch trays), fabric registration completed, a health mask and summary that say healthy (nvml.h's
  NVML_GPU_FABRIC_HEALTH_MASK_* layout, numatune/model/nvfabric.py). The GPUs' PCI numa_node is -1 and
  local_cpulist every CPU,
  which is what the kernel writes for a function without _PXM (NVIDIA/cuCascade#119: sysfs -1 where NVML
  knows the node).
- GB200 in CDMM mode (driver-managed GPU memory): the same tray with only nodes 0 and 1 (vllm#39361
  "non-CDMM" machines are the ones with HBM nodes); no numa_status; NVML's node is the CPU node.
- MI300A, 4 APUs: one node per socket holding its 24 cores x 2 threads and the socket's HBM (AMD Instinct
  MI300A: 24 Zen 4 cores, 128 GB HBM3 shared by CPU and GPU); the GPU's PCI function and KFD agent on the
  same node; KFD GPU agents linked by XGMI to their socket's CPU agent and to each other.
- SNC-4 GPU server: 2 sockets x 4 sub-NUMA clusters, 12 cores x 2 threads each (node n: CPUs 12n-12n+11 and
  96+12n-96+12n+11, the Xeon Max SNC4 `numactl -H` in oneapi-src/unified-memory-framework#1289, its HBM nodes
  left out), eight H100s, one per cluster.
Made up (not checked against anything): PCI bus numbers and bridges, cache sizes and sharing, the CPU
numbering of MI300A, node sizes beyond the published capacities, the NICs, GPU UUIDs (one per GPU, the same
in /proc/driver/nvidia and the NVML record), the bus ids of the NVLink Switch ends, the fabric's clique and
cluster ids, and the driver version in the NVML records.
Assumed (no published reading found): the SLIT values of MI300A (10 / 32).
Published: the SLIT values of SNC-4 (10 within a cluster, 12 within a socket, 21 across) are those of the
`numactl -H` of a two-socket Xeon Platinum 8480+ in SNC-4 (8 nodes of 14 cores) in github.com/grantcurell/projects,
`Understand and Run LINPACK/equipment.txt` (commit a7d003f7): rows `10 12 12 12 21 21 21 21` ... `21 21 21 21 12
12 12 10`; the 12 within a socket and 21 across are the same on the 12-core clusters written here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GIB = 1024 * 1024  # kB


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _cpus(spec: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, spec.split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def _spec(cpus: list[int]) -> str:
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(f"{cpus[i]}-{cpus[j]}" if j > i else str(cpus[i]))
        i = j + 1
    return ",".join(out)


class Machine:
    """A tree under construction: CPUs, nodes with SLIT rows, PCI functions, NVIDIA and KFD files."""

    def __init__(self, root: Path, cpuinfo_block: str, osrelease: str) -> None:
        self.root = root
        self.sys = root / "sys"
        self.cpuinfo_block = cpuinfo_block
        self.osrelease = osrelease
        self.node_cpus: dict[int, list[int]] = {}
        self.node_mem: dict[int, int] = {}
        self.package: dict[int, int] = {}
        self.siblings: dict[int, list[int]] = {}
        self.distance: dict[tuple[int, int], int] = {}
        self.l3: list[tuple[str, str]] = []  # (shared_cpu_list, size) of each last-level cache

    def caches(self, l3_groups: list[str], l3_size: str, l2_size: str) -> None:
        self.l3 = [(g, l3_size) for g in l3_groups]
        self.l2_size = l2_size

    def node(self, node: int, cpus: str, mem_kib: int) -> None:
        self.node_cpus[node] = _cpus(cpus)
        self.node_mem[node] = mem_kib

    def socket(self, package: int, cpus: str, smt_offset: int | None = None) -> None:
        for cpu in _cpus(cpus):
            self.package[cpu] = package
            if smt_offset is None:
                self.siblings[cpu] = [cpu]
            else:
                core = cpu if cpu < smt_offset else cpu - smt_offset
                self.siblings[cpu] = [core, core + smt_offset]

    def pci(self, rel: str, cls: str, vendor: str, device: str, numa: int, local: str) -> Path:
        d = self.sys / "devices" / rel
        for name, value in (("class", cls), ("vendor", vendor), ("device", device), ("numa_node", str(numa)),
                            ("local_cpulist", local)):
            _w(d / name, value + "\n")
        bdf = rel.rsplit("/", 1)[-1]
        link = self.sys / "bus" / "pci" / "devices" / bdf
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../../../devices") / rel)
        return d

    def nvidia(self, bdf: str, model: str, minor: int, numa_status: int | None) -> None:
        d = self.root / "proc" / "driver" / "nvidia" / "gpus" / bdf
        uuid = gpu_uuid(minor, bdf)
        _w(d / "information", f"Model: \t\t {model}\nIRQ:   \t\t {200 + minor}\nGPU UUID: \t {uuid}\n"
                              "Video BIOS: \t 96.00.aa.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                              f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bdf}\nDevice Minor: \t {minor}\n"
                              "GPU Excluded:\t No\n")
        if numa_status is not None:
            # nv-procfs.c numa_status: the node the driver onlined the GPU memory to
            _w(d / "numa_status", f"Node:      {numa_status}\nStatus:    online_movable\n")

    def write(self) -> Path:
        nodes = self.sys / "devices" / "system" / "node"
        ids = sorted(self.node_cpus)
        for n in ids:
            _w(nodes / f"node{n}" / "cpulist", _spec(self.node_cpus[n]) + "\n")
            row = " ".join(str(self.distance[(n, m)]) for m in ids)
            _w(nodes / f"node{n}" / "distance", row + "\n")
            kib = self.node_mem[n]
            _w(nodes / f"node{n}" / "meminfo", f"Node {n} MemTotal:       {kib} kB\n"
                                               f"Node {n} MemFree:        {kib * 9 // 10} kB\n"
                                               f"Node {n} MemUsed:        {kib - kib * 9 // 10} kB\n")
        everything = _spec(ids)
        for name in ("possible", "online"):
            _w(nodes / name, everything + "\n")
        _w(nodes / "has_cpu", _spec([n for n in ids if self.node_cpus[n]]) + "\n")
        with_mem = _spec([n for n in ids if self.node_mem[n]])
        _w(nodes / "has_memory", with_mem + "\n")
        _w(nodes / "has_normal_memory", with_mem + "\n")
        cpu_dir = self.sys / "devices" / "system" / "cpu"
        all_cpus = sorted(self.package)
        for cpu in all_cpus:
            pkg = self.package[cpu]
            same = [c for c in all_cpus if self.package[c] == pkg]
            topo = cpu_dir / f"cpu{cpu}" / "topology"
            _w(cpu_dir / f"cpu{cpu}" / "online", "1\n")
            _w(topo / "physical_package_id", f"{pkg}\n")
            _w(topo / "core_id", f"{self.siblings[cpu][0]}\n")
            _w(topo / "thread_siblings_list", _spec(self.siblings[cpu]) + "\n")
            _w(topo / "core_siblings_list", _spec(same) + "\n")
            _w(topo / "package_cpus_list", _spec(same) + "\n")
            cache = cpu_dir / f"cpu{cpu}" / "cache"
            core = _spec(self.siblings[cpu])
            llc = next((g for g, _ in self.l3 if cpu in _cpus(g)), None)
            levels = [("index0", 1, "Data", "64K", core), ("index1", 1, "Instruction", "64K", core),
                      ("index2", 2, "Unified", self.l2_size, core)] if self.l3 else []
            if llc is not None:
                levels.append(("index3", 3, "Unified", dict(self.l3)[llc], llc))
            for idx, level, kind, size, shared in levels:
                _w(cache / idx / "level", f"{level}\n")
                _w(cache / idx / "type", kind + "\n")
                _w(cache / idx / "size", size + "\n")
                _w(cache / idx / "shared_cpu_list", shared + "\n")
        for name in ("online", "possible", "present"):
            _w(cpu_dir / name, _spec(all_cpus) + "\n")
        _w(self.root / "proc" / "cpuinfo", "".join(f"processor\t: {c}\n{self.cpuinfo_block}\n" for c in all_cpus))
        total = sum(self.node_mem.values())
        _w(self.root / "proc" / "meminfo", f"MemTotal:       {total} kB\nMemFree:        {total * 9 // 10} kB\n")
        _w(self.root / "proc" / "sys" / "kernel" / "osrelease", self.osrelease + "\n")
        return self.root


GRACE = ("BogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve\n"
         "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n")
NVIDIA_KERNEL = "6.8.0-1021-nvidia-64k"


def _nvml(root: Path, gpus: list[dict]) -> None:
    doc = {"format": "numatune.nvml-record/1", "driver_version": "570.172.08", "cuda_driver_version": 12080,
           "nvml_version": "12.570.172.08", "gpus": gpus, "pairs": []}
    _w(root / "numatune" / "nvml.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")


def gpu_uuid(index: int, bdf: str) -> str:
    """The made-up UUID of GPU `index` at `bdf`: one value for /proc/driver/nvidia and the NVML record, as a
    real machine gives the same UUID through both (`launch --gpu GPU-...` matches either)."""
    return f"GPU-5c0de000-{index:04x}-4000-8000-{int(bdf.replace(':', '').replace('.', ''), 16):012x}"


def _nvml_bus_id(bdf: str) -> str:
    domain, rest = bdf.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def _nvml_gpu(index: int, name: str, bdf: str, numa: int, cpus: str, mem: int,
              nvlinks: list[dict] | None = None, fabric: dict | None = None) -> dict:
    return {"index": index, "name": name, "uuid": gpu_uuid(index, bdf),
            "pci": {"bus_id": _nvml_bus_id(bdf)}, "numa_node": numa,
            "cpu_affinity": _cpus(cpus), "memory_total": mem, "nvlinks": nvlinks or [], "fabric": fabric or {},
            "compute_processes": []}


NVLINK_SWITCH = 2  # nvmlIntNvLinkDeviceType_t: the far end of every GB200 NVLink is an NVLink Switch chip


def _nvswitch_links(index: int, count: int = 18) -> list[dict]:
    """`count` active NVLink 5 links of GPU `index`, each to an NVLink Switch chip (the far end's bus id is
    made up: the switches sit in the rack's switch trays, not on this tray's PCI tree)."""
    return [{"link": n, "state": "active", "version": 5, "remote_device_type": NVLINK_SWITCH,
             "remote_pci": {"bus_id": f"{0xFF00 + n:08X}:{index:02X}:00.0"}} for n in range(count)]


def gh200_numa(root: Path) -> Path:
    m = Machine(root, GRACE, NVIDIA_KERNEL)
    m.node(0, "0-71", 480 * GIB - 6 * GIB)  # 480 GB LPDDR5X, less the firmware's share
    m.node(1, "", 96 * GIB - 2 * GIB)  # the H100's 96 GB HBM3
    for n in range(2, 9):
        m.node(n, "", 0)  # MIG placeholders
    m.socket(0, "0-71")
    m.caches(["0-71"], "114M", "1024K")  # Grace: 1 MB L2 per core, 114 MB L3 shared by the 72 cores
    for a in range(9):
        for b in range(9):
            m.distance[(a, b)] = 10 if a == b else 80 if 0 in (a, b) else 255
    gpu = "pci0009:00/0009:00:00.0/0009:01:00.0"
    m.pci("pci0009:00/0009:00:00.0", "0x060400", "0x10de", "0x22b2", 0, "0-71")
    m.pci(gpu, "0x030200", "0x10de", "0x2342", 0, "0-71")  # sysfs: the Grace node
    m.nvidia("0009:01:00.0", "NVIDIA GH200 480GB", 0, 1)
    m.pci("pci0000:00/0000:00:00.0", "0x060400", "0x10de", "0x22b2", 0, "0-71")
    m.pci("pci0000:00/0000:00:00.0/0000:01:00.0", "0x020700", "0x15b3", "0x1021", 0, "0-71")
    _nvml(root, [_nvml_gpu(0, "NVIDIA GH200 480GB", "0009:01:00.0", 1, "0-71", 96 * 1024 ** 3)])
    return m.write()


GB200_GPUS = [  # (bdf, CPU node, HBM node)
    ("0008:01:00.0", 0, 2), ("0009:01:00.0", 0, 10), ("0018:01:00.0", 1, 18), ("0019:01:00.0", 1, 26)]
GB200_CPUS = {0: "0-71", 1: "72-143"}
GB200_GRACE_MIB = {0: 489935, 1: 489795}  # numactl -H "node 0 size", "node 1 size" (TensorRT-LLM blog 8)
GB200_HBM_MIB = 188416  # numactl -H "node 2 size" (and 10, 18, 26): 184 GiB onlined of each GPU's HBM
# NVML's fabric record of a GPU in a working NVL72 (state 3 = completed, status 0 = success); ids made up.
# health_mask 0x1aa: nvml.h's layout (model.nvfabric) with every 2-bit field "false" (2) and the configuration
# field "none" (1); health_summary 1 = healthy.
GB200_FABRIC = {"state": 3, "status": 0, "clique_id": 1, "cluster_uuid": "5c0de0005c0de0005c0de0005c0de000",
                "health_mask": 0x1AA, "health_summary": 1}


def gb200_distance(a: int, b: int) -> int:
    """The GB200 tray's SLIT as its published `numactl -H` prints it (TensorRT-LLM tech blog 8, rows 0, 1,
    2, 3 and 9; the other GPU rows by the same pattern): 40 between the Graces, 80 from a Grace to its own
    GPUs' nodes and 120 to the other Grace's, 11 among one GPU's HBM node and its MIG placeholders, 40
    between the nodes of different GPUs."""
    if a == b:
        return 10
    if a < 2 and b < 2:
        return 40
    if a >= 2 and b >= 2:
        return 11 if (a - 2) // 8 == (b - 2) // 8 else 40
    grace, gpu = (a, b) if a < 2 else (b, a)
    return 80 if grace == (0 if gpu < 18 else 1) else 120


def gb200(root: Path, *, cdmm: bool = False, fabric: list[dict] | None = None) -> Path:
    """The tray; `fabric`: each GPU's NVML fabric record (default GB200_FABRIC for all four), for fleets."""
    m = Machine(root, GRACE, NVIDIA_KERNEL)
    ids = [0, 1] if cdmm else list(range(34))
    for n in ids:
        if n < 2:
            m.node(n, GB200_CPUS[n], GB200_GRACE_MIB[n] * 1024)
        else:  # the HBM node, then its 7 MIG placeholders
            m.node(n, "", GB200_HBM_MIB * 1024 if (n - 2) % 8 == 0 else 0)
    m.socket(0, "0-71")
    m.socket(1, "72-143")
    m.caches(["0-71", "72-143"], "114M", "1024K")
    for a in ids:
        for b in ids:
            m.distance[(a, b)] = gb200_distance(a, b)
    gpus = []
    for i, (bdf, cpu_node, hbm) in enumerate(GB200_GPUS):
        domain = bdf[:4]
        m.pci(f"pci{domain}:00/{domain}:00:00.0", "0x060400", "0x10de", "0x22b2", -1, "0-143")
        m.pci(f"pci{domain}:00/{domain}:00:00.0/{bdf}", "0x030200", "0x10de", "0x2941", -1, "0-143")
        m.nvidia(bdf, "NVIDIA GB200", i, None if cdmm else hbm)
        gpus.append(_nvml_gpu(i, "NVIDIA GB200", bdf, cpu_node if cdmm else hbm, GB200_CPUS[cpu_node],
                              GB200_HBM_MIB << 20, _nvswitch_links(i), (fabric or [GB200_FABRIC] * 4)[i]))
    for domain, node in (("0000", 0), ("0002", 0), ("0010", 1), ("0012", 1)):
        m.pci(f"pci{domain}:00/{domain}:00:00.0", "0x060400", "0x10de", "0x22b2", node, GB200_CPUS[node])
        m.pci(f"pci{domain}:00/{domain}:00:00.0/{domain}:01:00.0", "0x020700", "0x15b3", "0x1021", node,
              GB200_CPUS[node])
    _nvml(root, gpus)
    return m.write()


ZEN4 = ("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 144\n"
        "model name\t: AMD Instinct MI300A Accelerator\n")
MI300A_BUSES = ("0000:02:00.0", "0001:02:00.0", "0002:02:00.0", "0003:02:00.0")


def _kfd(root: Path, node: int, props: dict[str, int], links: list[dict[str, int]]) -> None:
    d = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(node)
    _w(d / "properties", "".join(f"{k} {v}\n" for k, v in props.items()))
    for i, link in enumerate(links):
        _w(d / "io_links" / str(i) / "properties", "".join(f"{k} {v}\n" for k, v in link.items()))
    (d / "p2p_links").mkdir(parents=True, exist_ok=True)


def mi300a(root: Path) -> Path:
    m = Machine(root, ZEN4, "6.8.0-60-generic")
    for s in range(4):
        cpus = f"{24 * s}-{24 * s + 23},{96 + 24 * s}-{96 + 24 * s + 23}"
        m.node(s, cpus, 128 * GIB - 3 * GIB)
        m.socket(s, cpus, smt_offset=96)
    m.caches([f"{8 * c}-{8 * c + 7},{96 + 8 * c}-{96 + 8 * c + 7}" for c in range(12)], "32768K", "1024K")
    for a in range(4):  # 3 CCDs of 8 cores per APU, each with its own 32 MB L3
        for b in range(4):
            m.distance[(a, b)] = 10 if a == b else 32  # assumed: no published MI300A SLIT was found
    for s, bdf in enumerate(MI300A_BUSES):
        domain = bdf[:4]
        cpus = _spec(m.node_cpus[s])
        m.pci(f"pci{domain}:00/{domain}:00:01.0", "0x060400", "0x1022", "0x14ab", s, cpus)
        m.pci(f"pci{domain}:00/{domain}:00:01.0/{bdf}", "0x038000", "0x1002", "0x74a0", s, cpus)
        _kfd(root, s, {"cpu_cores_count": 48, "simd_count": 0, "mem_banks_count": 1, "io_links_count": 4,
                       "cpu_core_id_base": 24 * s, "location_id": 0, "domain": 0},
             [{"type": 11, "node_from": s, "node_to": 4 + s, "weight": 13}]
             + [{"type": 11, "node_from": s, "node_to": o, "weight": 20} for o in range(4) if o != s])
        _kfd(root, 4 + s, {"cpu_cores_count": 0, "simd_count": 912, "mem_banks_count": 1, "io_links_count": 4,
                           "vendor_id": 4098, "device_id": 0x74A0, "location_id": 0x200, "domain": s,
                           "local_mem_size": 0, "hive_id": 0x5C0DE, "num_xcc": 6, "gfx_target_version": 90402},
             [{"type": 11, "node_from": 4 + s, "node_to": s, "weight": 13}]
             + [{"type": 11, "node_from": 4 + s, "node_to": 4 + o, "weight": 15, "min_bandwidth": 64000,
                 "max_bandwidth": 128000} for o in range(4) if o != s])
    return m.write()


XEON = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) CPU Max 9468\n"


def snc4(root: Path) -> Path:
    m = Machine(root, XEON, "6.8.0-60-generic")
    for n in range(8):
        m.node(n, f"{12 * n}-{12 * n + 11},{96 + 12 * n}-{96 + 12 * n + 11}", 64 * GIB - GIB)
    m.socket(0, "0-47,96-143", smt_offset=96)
    m.socket(1, "48-95,144-191", smt_offset=96)
    m.caches(["0-47,96-143", "48-95,144-191"], "107520K", "2048K")  # one L3 per socket (SNC does not split it)
    for a in range(8):
        for b in range(8):
            m.distance[(a, b)] = 10 if a == b else 12 if a // 4 == b // 4 else 21  # a published SNC-4 SLIT (docstring)
    buses = (0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB)
    for n, bus in enumerate(buses):
        cpus = _spec(m.node_cpus[n])
        root_bus = bus - 2
        rp = f"pci0000:{root_bus:02x}/0000:{root_bus:02x}:01.0"
        m.pci(rp, "0x060400", "0x8086", "0x352a", n, cpus)
        bdf = f"0000:{bus:02x}:00.0"
        m.pci(f"{rp}/{bdf}", "0x030200", "0x10de", "0x2330", n, cpus)
        m.nvidia(bdf, "NVIDIA H100 80GB HBM3", n, None)
    return m.write()


MACHINES = {
    "handmade-gh200-numa": gh200_numa,
    "handmade-gb200-numa": gb200,
    "handmade-gb200-cdmm": lambda root: gb200(root, cdmm=True),
    "handmade-mi300a-4apu": mi300a,
    "handmade-snc4-8gpu": snc4,
}


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    for name, build in MACHINES.items():
        print(build(out / name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
