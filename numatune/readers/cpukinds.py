"""CPU kinds (P/E cores, big.LITTLE) from what the kernel states, grouped and ranked as hwloc does.

Evidence, in order: the x86 hybrid PMU devices (`/sys/devices/cpu_core|cpu_atom|cpu_lowpower/cpus`),
per-CPU `cpu_capacity` (Arm, RISC-V), `cpufreq/cpuinfo_max_freq` and `base_frequency` (else, as hwloc,
`acpi_cppc/nominal_freq`), and the Arm
MIDR (`regs/identification/midr_el1`, else the per-processor fields of /proc/cpuinfo).

Grouping follows hwloc (topology-linux.c, look_sysfscpukinds): on Arm, when the MIDRs differ they
alone make the kinds (GB10's X925 cores report capacities 997, 1017 and 1024 at one frequency: one
kind, not three); otherwise CPUs that agree on core type, capacity, base and max frequency form a
kind, the max frequency first evened out within a base frequency when it varies by less than 10%
(Turbo Boost Max 3.0 favoured cores are not another kind). Ranking uses the first facts known for
every kind (core type on x86, capacity, base, max frequency) until they tell all kinds apart.
"""

from __future__ import annotations

from numatune.model.topology import Cpu, CpuKind, CpuKinds
from numatune.numbers import maybe_int
from numatune.pieces import MAX_RECORDS, lines
from numatune.system.host import Host

CPU_DIR = "/sys/devices/system/cpu"
PMU_TYPES = (("cpu_core", "core"), ("cpu_atom", "atom"), ("cpu_lowpower", "lowpower"))
CORE_TYPE_NAMES = {"core": "Intel Core (P-core)", "atom": "Intel Atom (E-core)",
                   "lowpower": "Intel low-power E-core"}
_CORE_TYPE_ORDER = {"lowpower": 0, "atom": 1, "core": 2}
MAXFREQ_ADJUST = 0.10  # hwloc's default cpukinds_maxfreq_adjust (10%)

# MIDR implementer:part -> name, from the Linux kernel's arch/arm64/include/asm/cputype.h.
ARM_PARTS: dict[tuple[int, int], str] = {
    **{(0x41, p): n for p, n in {
        0xD03: "Cortex-A53", 0xD04: "Cortex-A35", 0xD05: "Cortex-A55", 0xD07: "Cortex-A57", 0xD08: "Cortex-A72",
        0xD09: "Cortex-A73", 0xD0A: "Cortex-A75", 0xD0B: "Cortex-A76", 0xD0C: "Neoverse N1", 0xD0D: "Cortex-A77",
        0xD0E: "Cortex-A76AE", 0xD40: "Neoverse V1", 0xD41: "Cortex-A78", 0xD42: "Cortex-A78AE",
        0xD44: "Cortex-X1", 0xD46: "Cortex-A510", 0xD47: "Cortex-A710", 0xD48: "Cortex-X2",
        0xD49: "Neoverse N2", 0xD4B: "Cortex-A78C", 0xD4C: "Cortex-X1C", 0xD4D: "Cortex-A715",
        0xD4E: "Cortex-X3", 0xD4F: "Neoverse V2", 0xD80: "Cortex-A520", 0xD81: "Cortex-A720",
        0xD82: "Cortex-X4", 0xD84: "Neoverse V3", 0xD85: "Cortex-X925", 0xD87: "Cortex-A725",
        0xD8E: "Neoverse N3",
    }.items()},
    (0x48, 0xD01): "HiSilicon TSV110 (Kunpeng 920)", (0x48, 0xD02): "HiSilicon HIP09",
    (0x4E, 0x003): "NVIDIA Denver", (0x4E, 0x004): "NVIDIA Carmel",
    (0x46, 0x001): "Fujitsu A64FX", (0xC0, 0xAC3): "Ampere-1", (0xC0, 0xAC4): "Ampere-1a",
    (0x51, 0x800): "Qualcomm Kryo 2xx Gold", (0x51, 0x801): "Qualcomm Kryo 2xx Silver",
    (0x51, 0x802): "Qualcomm Kryo 3xx Gold", (0x51, 0x803): "Qualcomm Kryo 3xx Silver",
    (0x51, 0x804): "Qualcomm Kryo 4xx Gold", (0x51, 0x805): "Qualcomm Kryo 4xx Silver",
    (0x51, 0x001): "Qualcomm Oryon", (0x61, 0x022): "Apple M1 Icestorm", (0x61, 0x023): "Apple M1 Firestorm",
    (0x6D, 0xD49): "Microsoft Azure Cobalt 100",
}


def midr_fields(midr: int) -> tuple[int, int, int, int]:
    """(implementer, variant, part, revision) of a MIDR_EL1 value."""
    return (midr >> 24) & 0xFF, (midr >> 20) & 0xF, (midr >> 4) & 0xFFF, midr & 0xF


def arm_part_name(midr: int) -> str:
    impl, _, part, _ = midr_fields(midr)
    return ARM_PARTS.get((impl, part)) or f"ARM implementer 0x{impl:02x} part 0x{part:03x}"


# -- reading -------------------------------------------------------------------------------------------
def hybrid_core_types(host: Host) -> dict[int, str]:
    """CPU -> "core"/"atom"/"lowpower" from the x86 hybrid PMU devices (absent on non-hybrid CPUs)."""
    out: dict[int, str] = {}
    for device, kind in PMU_TYPES:
        for cpu in host.read_cpulist(f"/sys/devices/{device}/cpus") or ():
            out[cpu] = kind
    return out


def read_kind_facts(host: Host, cpus: tuple[Cpu, ...], architecture: str | None) -> tuple[Cpu, ...]:
    """Fill capacity, frequencies and MIDR into the online CPUs.

    An attribute absent on the first online CPU is not looked for on the others (as hwloc does for
    MIDR): a 1152-CPU x86 server pays no failed opens for cpu_capacity or midr_el1.
    """
    online = [c for c in cpus if c.online]
    if not online:
        return cpus
    first = f"{CPU_DIR}/cpu{online[0].id}"
    want = {
        "capacity": host.exists(f"{first}/cpu_capacity"),
        "max_khz": host.exists(f"{first}/cpufreq/cpuinfo_max_freq"),
        "base_khz": host.exists(f"{first}/cpufreq/base_frequency"),
        # hwloc's fallback for the base frequency: ACPI CPPC's nominal frequency (MHz; 0 on some Intel)
        "nominal_mhz": not host.exists(f"{first}/cpufreq/base_frequency")
        and host.exists(f"{first}/acpi_cppc/nominal_freq"),
        "midr": host.exists(f"{first}/regs/identification/midr_el1"),
    }
    cpuinfo_midr = {}
    if not want["midr"] and architecture == "aarch64":  # kernels before 4.11 have no regs/ directory
        cpuinfo_midr = parse_cpuinfo_midr(host.read_optional("/proc/cpuinfo") or "")
    out = []
    for c in cpus:
        if not c.online:
            out.append(c)
            continue
        base = f"{CPU_DIR}/cpu{c.id}"
        out.append(c._replace(
            capacity=host.read_int(f"{base}/cpu_capacity") if want["capacity"] else None,
            max_khz=host.read_int(f"{base}/cpufreq/cpuinfo_max_freq") if want["max_khz"] else None,
            base_khz=host.read_int(f"{base}/cpufreq/base_frequency") if want["base_khz"]
            else _khz(host.read_int(f"{base}/acpi_cppc/nominal_freq")) if want["nominal_mhz"] else None,
            midr=(host.read_int(f"{base}/regs/identification/midr_el1", 16) if want["midr"]
                  else cpuinfo_midr.get(c.id)),
        ))
    return tuple(out)


def _khz(mhz: int | None) -> int | None:
    return mhz * 1000 if mhz else None  # nominal_freq 0 means unknown


def parse_cpuinfo_midr(text: str, where: str = "/proc/cpuinfo") -> dict[int, int]:
    """processor -> MIDR rebuilt from arm64 /proc/cpuinfo ("CPU implementer/variant/part/revision")."""
    out: dict[int, int] = {}
    proc: int | None = None
    fields: dict[str, int] = {}

    def flush() -> None:
        if proc is not None and "CPU implementer" in fields and "CPU part" in fields:
            out[proc] = (fields["CPU implementer"] << 24 | fields.get("CPU variant", 0) << 20 | 0xF << 16
                         | fields["CPU part"] << 4 | fields.get("CPU revision", 0))

    for number, line in enumerate(lines(text, where, MAX_RECORDS), 1):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            flush()
            proc = maybe_int(value, where, line=number)
            fields = {}
        elif key in ("CPU implementer", "CPU variant", "CPU part", "CPU revision"):
            number_value = maybe_int(value, where, base=0, line=number)
            if number_value is not None and 0 <= number_value < 1 << 12:  # the widest MIDR field: 12 bits
                fields[key] = number_value
    flush()
    return out


# -- grouping and ranking (pure) --------------------------------------------------------------------------
def _even_max_freqs(cpus: list[Cpu]) -> dict[int, int | None]:
    """hwloc's adjust_maxfreqs: within one base frequency, max frequencies less than 10% apart are one."""
    out = {c.id: c.max_khz for c in cpus}
    if any(c.max_khz and not c.base_khz for c in cpus):
        return out
    by_base: dict[int | None, list[Cpu]] = {}
    for c in cpus:
        by_base.setdefault(c.base_khz, []).append(c)
    for group in by_base.values():
        freqs = [c.max_khz for c in group if c.max_khz]
        if freqs and (max(freqs) - min(freqs)) / min(freqs) < MAXFREQ_ADJUST:
            for c in group:
                out[c.id] = min(freqs) if c.max_khz else None
    return out


def group_cpu_kinds(cpus: tuple[Cpu, ...], model: str | None = None) -> CpuKinds:
    """Group the online CPUs into kinds and rank them, most performant first."""
    online = [c for c in cpus if c.online]
    if not online:
        return CpuKinds()
    midrs = {c.midr for c in online}
    by_midr = None not in midrs and len(midrs) > 1
    max_of = _even_max_freqs(online)
    groups: dict[tuple, list[Cpu]] = {}
    for c in online:
        key = (c.midr,) if by_midr else (c.core_type, c.capacity, c.base_khz, max_of[c.id], c.midr)
        groups.setdefault(key, []).append(c)
    facts = [_facts(members, max_of) for members in groups.values()]
    grouped_by: tuple[str, ...] = ()
    if len(groups) > 1:
        if by_midr:
            grouped_by = ("MIDR",)
        else:
            names = ("core type", "cpu_capacity", "base frequency", "max frequency", "MIDR")
            grouped_by = tuple(n for i, n in enumerate(names) if len({k[i] for k in groups}) > 1)
    ranks, ranked_by = _rank(facts)
    order = sorted(range(len(facts)), key=lambda i: (ranks[i], min(facts[i]["cpus"])))
    kinds = []
    ranked = bool(ranked_by) or len(facts) == 1
    for i in order:
        f = facts[i]
        role = "unranked" if not ranked else ("performance" if ranks[i] == 0 else "efficiency")
        kinds.append(CpuKind(
            rank=ranks[i], role=role, cpus=f["cpus"], name=_name(f, model), part=f["part"],
            capacities=f["capacities"], max_mhz=f["max_mhz"], base_mhz=f["base_mhz"],
        ))
    return CpuKinds(tuple(kinds), grouped_by, ranked_by)


def _facts(members: list[Cpu], max_of: dict[int, int | None]) -> dict:
    first = members[0]
    part = None
    if first.midr is not None:
        impl, _, pnum, _ = midr_fields(first.midr)
        part = f"0x{impl:02x}:0x{pnum:03x}"
    elif first.core_type:
        part = f"cpu_{first.core_type}"
    return {
        "cpus": tuple(sorted(c.id for c in members)),
        "core_type": first.core_type,
        "midr": first.midr,
        "part": part,
        "capacities": tuple(sorted({c.capacity for c in members if c.capacity is not None})),
        "max_mhz": tuple(sorted({c.max_khz // 1000 for c in members if c.max_khz})),
        "base_mhz": tuple(sorted({c.base_khz // 1000 for c in members if c.base_khz})),
        # the ranking values, as hwloc: minimum capacity of the kind, evened max frequency
        "capacity": min((c.capacity for c in members if c.capacity is not None), default=None),
        "base": min((c.base_khz for c in members if c.base_khz), default=None),
        "max": min((max_of[c.id] for c in members if max_of[c.id]), default=None),
    }


def _rank(facts: list[dict]) -> tuple[list[int], tuple[str, ...]]:
    """Dense ranks (0 = best) from the first criteria known for every kind, and which were used."""
    if len(facts) == 1:
        return [0], ()
    criteria = [
        ("core type", lambda f: _CORE_TYPE_ORDER.get(f["core_type"]) if f["core_type"] else None),
        ("cpu_capacity", lambda f: f["capacity"]),
        ("base frequency", lambda f: f["base"]),
        ("max frequency", lambda f: f["max"]),
    ]
    used: list[tuple[str, object]] = []
    for name, get in criteria:
        if all(get(f) is not None for f in facts):
            used.append((name, get))
            keys = {tuple(g(f) for _, g in used) for f in facts}
            if len(keys) == len(facts):
                break
    if not used:
        return [0] * len(facts), ()
    keys = [tuple(g(f) for _, g in used) for f in facts]
    distinct = sorted(set(keys), reverse=True)
    return [distinct.index(k) for k in keys], tuple(n for n, _ in used)


def _name(f: dict, model: str | None) -> str | None:
    if f["midr"] is not None:
        return arm_part_name(f["midr"])
    if f["core_type"]:
        return CORE_TYPE_NAMES.get(f["core_type"], f["core_type"])
    return model
