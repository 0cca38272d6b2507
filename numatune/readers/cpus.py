"""CPUs from /sys/devices/system/cpu and the model name from the root's /proc/cpuinfo."""

from __future__ import annotations

from numatune.model.topology import Cpu, CpuSummary
from numatune.numbers import maybe_int
from numatune.pieces import MAX_RECORDS, lines
from numatune.readers.cpukinds import hybrid_core_types
from numatune.system.host import Host, numbered

CPU_DIR = "/sys/devices/system/cpu"


_MODEL_KEYS = frozenset({"vendor_id", "vendor", "model name", "cpu model", "uarch", "cpu", "cpu implementer",
                         "cpu part", "family"})


def parse_cpuinfo_model(text: str, where: str = "/proc/cpuinfo") -> tuple[str | None, str | None]:
    """(model, vendor) from any architecture's /proc/cpuinfo.

    x86 has "model name"; POWER "cpu"; s390 "vendor_id" and machine lines; arm64 only
    "CPU implementer"/"CPU part"; IA64 "family"/"model name"; RISC-V "uarch"/"isa".
    """
    fields: dict[str, str] = {}
    for line in lines(text, where, MAX_RECORDS):
        key, sep, value = line.partition(":")
        if not sep:
            if fields and not line.strip() and "model name" in fields:
                break  # the first processor's block names the model; 480 more blocks would say it again
            continue
        key = key.strip().lower()
        if key in _MODEL_KEYS and key not in fields:  # only these: a million other keys are never kept
            fields[key] = value.strip()
    vendor = fields.get("vendor_id") or fields.get("vendor")
    for key in ("model name", "cpu model", "uarch", "cpu"):
        if fields.get(key):
            return fields[key], vendor
    if "cpu implementer" in fields:
        model = f"ARM implementer {fields['cpu implementer']} part {fields.get('cpu part', '?')}"
        return model, vendor or "ARM"
    if vendor:
        return vendor, vendor
    return fields.get("family"), vendor


def read_cpus(host: Host) -> tuple[Cpu, ...]:
    """Every CPU the kernel knows, online or not; topology ids only for online CPUs."""
    ids = sorted(n for name in host.listdir(CPU_DIR) if (n := numbered(name, "cpu")) is not None)
    online_list = host.read_cpulist(f"{CPU_DIR}/online")
    core_types = hybrid_core_types(host)
    seen_siblings: dict[int, tuple[int, ...]] = {}
    package_of: dict[int, int | None] = {}
    pkg_list = "package_cpus_list"
    cpus = []
    for cpu in ids:
        base = f"{CPU_DIR}/cpu{cpu}"
        online = _is_online(host, base, cpu, online_list)
        if not online:
            cpus.append(Cpu(id=cpu, online=False, core_type=core_types.get(cpu)))
            continue
        topo = f"{base}/topology"
        siblings = seen_siblings.get(cpu)
        if siblings is None:
            sib = host.read_cpulist(f"{topo}/thread_siblings_list")
            if sib is None:
                sib = host.read_cpumask(f"{topo}/thread_siblings")
            siblings = tuple(sorted(sib)) if sib else (cpu,)
            for s in siblings:
                seen_siblings[s] = siblings
        package = package_of.get(cpu) if cpu in package_of else None
        if cpu not in package_of:
            package = host.read_int(f"{topo}/physical_package_id")
            pkg_cpus = host.read_cpulist(f"{topo}/{pkg_list}") if pkg_list else None
            if pkg_cpus is None and pkg_list == "package_cpus_list":  # before 5.x: core_siblings_list
                pkg_list = "core_siblings_list"
                pkg_cpus = host.read_cpulist(f"{topo}/{pkg_list}")
            if (package is None or package < 0) and pkg_cpus:
                # -1 (s390, some POWER guests): hwloc groups the package by its CPU list; so does numatune, naming
                # it by its first CPU
                package = min(pkg_cpus)
            for other in pkg_cpus or (cpu,):
                package_of.setdefault(other, package)
        cpus.append(
            Cpu(
                id=cpu,
                online=True,
                package=package,
                core=host.read_int(f"{topo}/core_id") if siblings[0] == cpu else None,
                siblings=siblings,
                core_type=core_types.get(cpu),
            )
        )
    # SMT siblings share the core id read from the first sibling.
    core_of = {c.id: c.core for c in cpus if c.online and c.siblings and c.siblings[0] == c.id}
    return tuple(
        c if not c.online or c.core is not None else _with_core(c, core_of.get(c.siblings[0])) for c in cpus
    )


def _with_core(cpu: Cpu, core: int | None) -> Cpu:
    return cpu._replace(core=core)


def _is_online(host: Host, base: str, cpu: int, online_list: frozenset[int] | None) -> bool:
    if online_list is not None:
        return cpu in online_list
    entries = host.entries(base)  # one directory read instead of two failed opens per CPU
    if "online" in entries:
        # hwloc's rule (topology-linux.c, atoi): a file with text is online unless it reads 0 (or no number); an
        # empty or unreadable one (hwloc's 128ia64 tree, some archived sysfs copies) says nothing, and the CPU
        # counts as online when the kernel describes its topology, as hwloc and slurmd -C read it.
        text = (host.read_optional(f"{base}/online") or "").strip()
        if text:
            return maybe_int(text, f"{base}/online") not in (0, None)
    # Old kernels: no online files at all, and cpu0 never has one. An offline CPU has no topology/.
    return cpu == 0 or "topology" in entries


def summarize_cpus(host: Host, cpus: tuple[Cpu, ...]) -> CpuSummary:
    model, vendor = None, None
    text = host.read_optional("/proc/cpuinfo")
    if text:
        model, vendor = parse_cpuinfo_model(text)
    online = tuple(c.id for c in cpus if c.online)
    possible_set = host.read_cpulist(f"{CPU_DIR}/possible")
    present_set = host.read_cpulist(f"{CPU_DIR}/present")
    known = {c.id for c in cpus}
    offline = sorted((known | set(present_set or ())) - set(online))
    packages = sorted({c.package for c in cpus if c.online and c.package is not None})
    cores = {(c.package, c.siblings[0] if c.siblings else c.id) for c in cpus if c.online}
    threads = max((len(c.siblings) for c in cpus if c.online), default=1)
    arch = _architecture(host, text or "")
    return CpuSummary(
        model=model,
        vendor=vendor,
        architecture=arch,
        sockets=tuple(packages),
        cores=len(cores),
        threads_per_core=threads,
        online=online,
        offline=tuple(offline),
        possible=tuple(sorted(possible_set)) if possible_set else tuple(sorted(known)),
    )


def _architecture(host: Host, cpuinfo: str) -> str | None:
    if "vendor_id" in cpuinfo and ("GenuineIntel" in cpuinfo or "AuthenticAMD" in cpuinfo):
        return "x86_64"
    if "CPU implementer" in cpuinfo:
        return "aarch64"
    if "POWER" in cpuinfo or host.exists("/proc/device-tree/cpus"):
        return "ppc64"
    if "IBM/S390" in cpuinfo:
        return "s390x"
    if "Itanium" in cpuinfo:
        return "ia64"
    if "model name" in cpuinfo:
        return "x86_64"
    return None
