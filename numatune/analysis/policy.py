"""Policy files (`numatune.toml`): what a node is expected to look like, turned into findings (NT3xx).

A fleet's nodes are bought and configured to a plan: so many sockets, GPUs per socket, a NIC next
to each GPU, CXL memory in a lower tier, numa_balancing off, a minimum kernel. The policy states
that plan once; `numatune check --policy` compares every node (or saved tree) with it. Unknown keys
are errors (a typo must not silently disable a check). Evaluation is pure: the facts that need a
live system (numactl's version, IRQ affinity) are gathered by the caller and passed in.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numatune.analysis.paths import RANK, nearest_nic
from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.errors import InputError
from numatune.model.check import CheckResult, IrqPlacement
from numatune.model.findings import Finding, Severity
from numatune.model.topology import Topology

PATH_KINDS = ("PIX", "PXB", "PHB", "NODE")  # allowed values of nic_max_path (SYS would allow anything)
TIER_CHOICES = ("below-dram", "same-as-dram")

# code -> (default severity, short description). Codes are stable: never reuse one for another meaning.
CODES: dict[str, tuple[Severity, str]] = {
    "NT301": (Severity.ERROR, "number of sockets"),
    "NT302": (Severity.ERROR, "number of NUMA nodes"),
    "NT303": (Severity.ERROR, "number of NUMA nodes with CPUs"),
    "NT304": (Severity.ERROR, "number of online CPUs"),
    "NT305": (Severity.ERROR, "SMT threads per core"),
    "NT306": (Severity.ERROR, "number of GPUs"),
    "NT307": (Severity.ERROR, "GPUs on each NUMA node with CPUs"),
    "NT308": (Severity.ERROR, "number of NICs"),
    "NT309": (Severity.ERROR, "a NIC local to each GPU"),
    "NT310": (Severity.ERROR, "every GPU and NIC has a known NUMA node"),
    "NT311": (Severity.ERROR, "memory of each NUMA node with CPUs"),
    "NT312": (Severity.ERROR, "CXL memory capacity"),
    "NT313": (Severity.ERROR, "memory tier of CXL nodes"),
    "NT320": (Severity.ERROR, "minimum kernel version"),
    "NT321": (Severity.WARNING, "kernel.numa_balancing"),
    "NT322": (Severity.WARNING, "transparent hugepages (enabled)"),
    "NT323": (Severity.WARNING, "transparent hugepages (defrag)"),
    "NT324": (Severity.WARNING, "vm.zone_reclaim_mode"),
    "NT325": (Severity.WARNING, "memory tiering demotion"),
    "NT330": (Severity.ERROR, "minimum numactl version"),
    "NT340": (Severity.ERROR, "no IRQ of a GPU-local NIC on rank cores"),
}


@dataclass(frozen=True)
class CxlExpect:
    capacity_gib_min: float | None = None
    tier: str | int | None = None  # "below-dram", "same-as-dram" or a kernel tier number


@dataclass(frozen=True)
class Policy:
    source: str = "<policy>"
    # [expect]
    sockets: int | None = None
    numa_nodes: int | None = None
    cpu_nodes: int | None = None
    cpus: int | None = None
    threads_per_core: int | None = None
    gpus: int | None = None
    gpus_per_node: int | None = None
    nics: int | None = None
    nic_max_path: str | None = None  # worst allowed GPU→NIC path; None: not checked
    device_nodes_known: bool = False
    memory_per_node_gib_min: float | None = None
    cxl: CxlExpect = CxlExpect()
    # [kernel]
    kernel_min_version: str | None = None
    numa_balancing: tuple[int, ...] | None = None
    transparent_hugepage: tuple[str, ...] | None = None
    thp_defrag: tuple[str, ...] | None = None
    zone_reclaim_mode: tuple[int, ...] | None = None
    demotion_enabled: bool | None = None
    # [tools]
    numactl_min_version: str | None = None
    # [irq]
    rank_cpus: frozenset[int] | None = None
    # [check]
    fail_on: Severity | None = None
    ignore: frozenset[str] = frozenset()
    severity: dict[str, Severity] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyFacts:
    """Facts that come from outside the topology; None means unknown, with the reason alongside."""

    numactl_version: str | None = None
    numactl_note: str = "numactl's version was not looked up"
    irqs: tuple[IrqPlacement, ...] | None = None
    irq_note: str = "IRQ affinity was not read"


# -- loading -------------------------------------------------------------------------------------

_SECTIONS = {
    "expect": {
        "sockets", "numa_nodes", "cpu_nodes", "cpus", "threads_per_core", "gpus", "gpus_per_node", "nics",
        "nic_per_gpu", "nic_max_path", "device_nodes_known", "memory_per_node_gib_min", "cxl",
    },
    "kernel": {"min_version", "numa_balancing", "transparent_hugepage", "thp_defrag", "zone_reclaim_mode",
               "demotion_enabled"},
    "tools": {"numactl_min_version"},
    "irq": {"rank_cpus"},
    "check": {"fail_on", "ignore", "severity"},
}


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; any problem is an InputError naming the file and key."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"policy {path} is not valid TOML: {exc}") from None
    return parse_policy(data, str(path))


def parse_policy(data: dict[str, Any], source: str = "<policy>") -> Policy:
    """Validate a decoded TOML table into a Policy."""
    v = _Validator(source)
    for section, body in data.items():
        if section not in _SECTIONS:
            v.fail(section, f"unknown section (known: {', '.join(sorted(_SECTIONS))})")
        if not isinstance(body, dict):
            v.fail(section, "must be a table ([" + section + "])")
        for key in body:
            if key not in _SECTIONS[section]:
                v.fail(f"{section}.{key}", f"unknown key (known: {', '.join(sorted(_SECTIONS[section]))})")
    expect = data.get("expect", {})
    kernel = data.get("kernel", {})
    tools = data.get("tools", {})
    irq = data.get("irq", {})
    check = data.get("check", {})

    nic_max_path = None
    if "nic_per_gpu" in expect and v.bool_("expect.nic_per_gpu", expect["nic_per_gpu"]):
        nic_max_path = "NODE"
    if "nic_max_path" in expect:
        value = expect["nic_max_path"]
        if not isinstance(value, str) or value.upper() not in PATH_KINDS:
            v.fail("expect.nic_max_path", f"must be one of {', '.join(PATH_KINDS)}")
        nic_max_path = value.upper()

    cxl = expect.get("cxl", {})
    if not isinstance(cxl, dict):
        v.fail("expect.cxl", "must be a table ([expect.cxl])")
    for key in cxl:
        if key not in ("capacity_gib_min", "tier"):
            v.fail(f"expect.cxl.{key}", "unknown key (known: capacity_gib_min, tier)")
    tier = cxl.get("tier")
    if tier is not None and not (
        (isinstance(tier, int) and not isinstance(tier, bool) and tier >= 0) or tier in TIER_CHOICES
    ):
        v.fail("expect.cxl.tier", f"must be a tier number or one of {', '.join(TIER_CHOICES)}")

    rank_cpus = None
    if "rank_cpus" in irq:
        text = irq["rank_cpus"]
        if not isinstance(text, str):
            v.fail("irq.rank_cpus", 'must be a CPU list string such as "8-55,64-111"')
        try:
            rank_cpus = parse_cpulist(text)
        except ValueError as exc:
            v.fail("irq.rank_cpus", f"bad CPU list: {exc}")
        if not rank_cpus:
            v.fail("irq.rank_cpus", "is empty")

    ignore = check.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(c, str) and re.fullmatch(r"NT\d{3}", c) for c in ignore):
        v.fail("check.ignore", 'must be a list of finding codes such as ["NT005"]')
    overrides = check.get("severity", {})
    if not isinstance(overrides, dict):
        v.fail("check.severity", 'must be a table of code = "info"|"warning"|"error"')
    severity = {}
    for code, level in overrides.items():
        if not re.fullmatch(r"NT\d{3}", code):
            v.fail(f"check.severity.{code}", "is not a finding code (NTnnn)")
        severity[code] = v.severity(f"check.severity.{code}", level)

    return Policy(
        source=source,
        sockets=v.count("expect.sockets", expect.get("sockets")),
        numa_nodes=v.count("expect.numa_nodes", expect.get("numa_nodes")),
        cpu_nodes=v.count("expect.cpu_nodes", expect.get("cpu_nodes")),
        cpus=v.count("expect.cpus", expect.get("cpus")),
        threads_per_core=v.count("expect.threads_per_core", expect.get("threads_per_core")),
        gpus=v.count("expect.gpus", expect.get("gpus")),
        gpus_per_node=v.count("expect.gpus_per_node", expect.get("gpus_per_node")),
        nics=v.count("expect.nics", expect.get("nics")),
        nic_max_path=nic_max_path,
        device_nodes_known=v.bool_("expect.device_nodes_known", expect.get("device_nodes_known", False)),
        memory_per_node_gib_min=v.number("expect.memory_per_node_gib_min", expect.get("memory_per_node_gib_min")),
        cxl=CxlExpect(capacity_gib_min=v.number("expect.cxl.capacity_gib_min", cxl.get("capacity_gib_min")),
                      tier=tier),
        kernel_min_version=v.version("kernel.min_version", kernel.get("min_version")),
        numa_balancing=v.ints("kernel.numa_balancing", kernel.get("numa_balancing")),
        transparent_hugepage=v.strs("kernel.transparent_hugepage", kernel.get("transparent_hugepage")),
        thp_defrag=v.strs("kernel.thp_defrag", kernel.get("thp_defrag")),
        zone_reclaim_mode=v.ints("kernel.zone_reclaim_mode", kernel.get("zone_reclaim_mode")),
        demotion_enabled=(v.bool_("kernel.demotion_enabled", kernel["demotion_enabled"])
                          if "demotion_enabled" in kernel else None),
        numactl_min_version=v.version("tools.numactl_min_version", tools.get("numactl_min_version")),
        rank_cpus=rank_cpus,
        fail_on=v.severity("check.fail_on", check["fail_on"]) if "fail_on" in check else None,
        ignore=frozenset(ignore),
        severity=severity,
    )


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, why: str) -> None:
        raise InputError(f"policy {self.source}: {key} {why}")

    def count(self, key: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(key, "must be a whole number >= 0")
        return value

    def number(self, key: str, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            self.fail(key, "must be a number >= 0")
        return float(value)

    def bool_(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(key, "must be true or false")
        return value

    def ints(self, key: str, value: Any) -> tuple[int, ...] | None:
        if value is None:
            return None
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(x, bool) or not isinstance(x, int) for x in values):
            self.fail(key, "must be a whole number or a list of them")
        return tuple(values)

    def strs(self, key: str, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        values = value if isinstance(value, list) else [value]
        if not values or any(not isinstance(x, str) or not x for x in values):
            self.fail(key, "must be a string or a list of strings")
        return tuple(values)

    def version(self, key: str, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or version_tuple(value) is None:
            self.fail(key, 'must be a version string such as "5.15" or "2.0.16"')
        return value

    def severity(self, key: str, value: Any) -> Severity:
        try:
            return Severity(value)
        except ValueError:
            self.fail(key, "must be info, warning or error")
        raise AssertionError  # unreachable: fail() raises


def version_tuple(text: str) -> tuple[int, ...] | None:
    """The leading dotted numbers of a version: "5.15.0-91-generic" -> (5, 15, 0); "2.0.16-1" -> (2, 0, 16)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def version_at_least(have: str, want: str) -> bool | None:
    h, w = version_tuple(have), version_tuple(want)
    if h is None or w is None:
        return None
    width = max(len(h), len(w))
    return h + (0,) * (width - len(h)) >= w + (0,) * (width - len(w))


# -- evaluation ----------------------------------------------------------------------------------

Rule = Callable[[Policy, Topology, PolicyFacts], "tuple[list[Finding], str | None] | None"]


def _finding(code: str, message: str, fix: str, subject: str) -> Finding:
    return Finding(code, CODES[code][0], message, fix, subject)


def _count_rule(code: str, attr: str, what: str, actual: Callable[[Topology], int], fix: str) -> Rule:
    def rule(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
        want = getattr(policy, attr)
        if want is None:
            return None
        have = actual(topo)
        if have == want:
            return [], None
        return [_finding(code, f"expected {want} {what}, found {have}", fix, what)], None

    rule.__name__ = attr
    return rule


def _sockets(topo: Topology) -> int:
    return len(topo.cpu.sockets)


def _threads_per_core(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    if policy.threads_per_core is None:
        return None
    have = topo.cpu.threads_per_core
    if have == policy.threads_per_core:
        return [], None
    return [_finding("NT305", f"expected {policy.threads_per_core} threads per core, found {have}",
                     "set SMT (Hyper-Threading) in the BIOS, or echo on|off > /sys/devices/system/cpu/smt/control",
                     "smt")], None


def _gpus_per_node(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.gpus_per_node
    if want is None:
        return None
    out = []
    for n in topo.nodes:
        if not n.cpus:
            continue
        have = [g.bdf for g in topo.gpus if g.node == n.id]
        if len(have) != want:
            out.append(_finding("NT307", f"node {n.id} has {len(have)} GPU(s), expected {want}"
                                + (f" ({', '.join(have)})" if have else ""),
                                "check that every GPU is seated and enumerated (lspci), and that the BIOS "
                                "reports device proximity (numa_node)", f"node {n.id}"))
    unknown = [g.bdf for g in topo.gpus if g.node is None]
    if unknown:
        out.append(_finding("NT307", f"{len(unknown)} GPU(s) have no known NUMA node: {', '.join(unknown)}",
                            "enable ACPI _PXM/SRAT proximity for PCI devices in the BIOS", "gpus"))
    return out, None


def _nic_per_gpu(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    limit = policy.nic_max_path
    if limit is None:
        return None
    if not topo.gpus:
        return [], "no GPUs on this node"
    out = []
    for g in topo.gpus:
        best = nearest_nic(topo, g)
        if best is None:
            out.append(_finding("NT309", f"GPU {g.bdf} has no NIC at all", "install a NIC per GPU (or per GPU pair)",
                                g.bdf))
        elif RANK[best[1]] > RANK[limit]:
            nic = best[0]
            out.append(_finding(
                "NT309",
                f"GPU {g.bdf} (node {_n(g.node)}): nearest NIC {nic.bdf} "
                f"({', '.join(nic.netdevs + nic.rdma) or 'no netdev'}) is {best[1]}, worse than {limit}",
                "move a NIC under the GPU's PCIe switch or socket; until then set NCCL_IB_HCA per rank",
                g.bdf,
            ))
    return out, None


def _device_nodes_known(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    if not policy.device_nodes_known:
        return None
    out = [
        _finding("NT310", f"{d.kind.upper()} {d.bdf} reports numa_node -1", "enable ACPI _PXM/SRAT proximity "
                 "for PCI devices in the BIOS (or vNUMA in the hypervisor)", d.bdf)
        for d in topo.devices
        if d.kind in ("gpu", "nic") and d.numa_node is None
    ]
    return out, None


def _memory_per_node(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.memory_per_node_gib_min
    if want is None:
        return None
    out = []
    for n in topo.nodes:
        if not n.cpus:
            continue
        if n.memory_total_kib is None:
            return [], f"node {n.id} has no meminfo in this root"
        gib = n.memory_total_kib / 1048576
        if gib < want:
            out.append(_finding("NT311", f"node {n.id} has {gib:.1f} GiB of memory, expected at least {want:g} GiB",
                                "check for failed or missing DIMMs (dmidecode -t memory, the BMC's event log)",
                                f"node {n.id}"))
    return out, None


def _cxl_nodes(topo: Topology) -> list:
    return [n for n in topo.nodes if n.kind == "cxl"]


def _cxl_capacity(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.cxl.capacity_gib_min
    if want is None:
        return None
    gib = sum(n.memory_total_kib or 0 for n in _cxl_nodes(topo)) / 1048576
    if gib >= want:
        return [], None
    raw = sum((m.ram_size or 0) for m in topo.cxl.memdevs) / 2**30
    hint = (f"; the CXL memdevs hold {raw:.1f} GiB that is not online as a NUMA node" if raw > gib else "")
    return [_finding("NT312", f"{gib:.1f} GiB of CXL memory is online as NUMA nodes, expected at least "
                     f"{want:g} GiB{hint}",
                     "create and online the region: cxl create-region, then daxctl reconfigure-device "
                     "--mode=system-ram", "cxl")], None


def _cxl_tier(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.cxl.tier
    if want is None:
        return None
    cxl = _cxl_nodes(topo)
    if not cxl:
        return [], "no CXL memory node on this node"
    dram = [n.tier for n in topo.nodes if n.cpus and n.tier is not None]
    top = min(dram) if dram else None
    out = []
    for n in cxl:
        if n.tier is None:
            out.append(_finding("NT313", f"CXL node {n.id} is in no memory tier (kernel without memory tiering?)",
                                "use a kernel >= 6.1 with memory tiering", f"node {n.id}"))
            continue
        if want == "below-dram":
            ok = top is not None and n.tier > top
        elif want == "same-as-dram":
            ok = top is not None and n.tier == top
        else:
            ok = n.tier == want
        if not ok:
            out.append(_finding(
                "NT313",
                f"CXL node {n.id} is in memory tier {n.tier}, expected {want}"
                + (f" (DRAM is tier {top})" if top is not None else ""),
                "make the firmware publish HMAT/CDAT performance data for the device, or online it "
                "through daxctl/kmem, so the kernel ranks it by its real speed",
                f"node {n.id}",
            ))
    return out, None


def _kernel_version(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.kernel_min_version
    if want is None:
        return None
    have = topo.settings.release
    if have is None:
        return [], "the kernel release is not in this root (/proc/sys/kernel/osrelease, /proc/version)"
    ok = version_at_least(have, want)
    if ok is None:
        return [], f"cannot read a version number from kernel release {have!r}"
    if ok:
        return [], None
    return [_finding("NT320", f"kernel {have} is older than {want}", f"boot a kernel >= {want}", "kernel")], None


def _setting_rule(code: str, attr: str, label: str, actual: Callable[[Topology], Any], fix: str) -> Rule:
    def rule(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
        want = getattr(policy, attr)
        if want is None:
            return None
        have = actual(topo)
        if have is None:
            return [], f"{label} is not in this root"
        if have in want:
            return [], None
        allowed = " or ".join(str(w) for w in want)
        return [_finding(code, f"{label} is {have}, expected {allowed}", fix.format(want=want[0]), label)], None

    rule.__name__ = attr
    return rule


def _demotion(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.demotion_enabled
    if want is None:
        return None
    have = topo.settings.demotion_enabled
    if have is None:
        return [], "/sys/kernel/mm/numa/demotion_enabled is not in this root"
    if have == want:
        return [], None
    return [_finding("NT325", f"memory tiering demotion is {'on' if have else 'off'}, expected "
                     f"{'on' if want else 'off'}",
                     f"echo {'true' if want else 'false'} > /sys/kernel/mm/numa/demotion_enabled",
                     "demotion_enabled")], None


def _numactl(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    want = policy.numactl_min_version
    if want is None:
        return None
    have = facts.numactl_version
    if have is None:
        return [], facts.numactl_note
    ok = version_at_least(have, want)
    if ok is None:
        return [], f"cannot read a version number from numactl version {have!r}"
    if ok:
        return [], None
    return [_finding("NT330", f"numactl {have} is older than {want}",
                     f"install numactl >= {want} (weighted interleave needs 2.0.19)", "numactl")], None


def gpu_local_nics(topo: Topology) -> dict[str, str]:
    """NIC BDF -> the GPU BDF it serves: each GPU's nearest NIC, unless that NIC is across the socket link."""
    out: dict[str, str] = {}
    for g in topo.gpus:
        best = nearest_nic(topo, g)
        if best and best[1] != "SYS":
            out.setdefault(best[0].bdf, g.bdf)
    return out


def _irq_rank_cores(policy: Policy, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    rank = policy.rank_cpus
    if rank is None:
        return None
    if not topo.gpus:
        return [], "no GPUs on this node, hence no GPU-local NIC"
    nics = gpu_local_nics(topo)
    if not nics:
        return [], "no NIC is local to a GPU on this node"
    if facts.irqs is None:
        return [], facts.irq_note
    by_nic: dict[str, list[IrqPlacement]] = {}
    for irq in facts.irqs:
        if irq.bdf in nics and irq.cpus & rank:
            by_nic.setdefault(irq.bdf, []).append(irq)
    out = []
    for bdf, irqs in sorted(by_nic.items()):
        cpus = frozenset().union(*(i.cpus & rank for i in irqs))
        nic = topo.device(bdf)
        name = ", ".join(nic.netdevs + nic.rdma) if nic else ""
        out.append(_finding(
            "NT340",
            f"{len(irqs)} IRQ(s) of NIC {bdf}{f' ({name})' if name else ''}, local to GPU {nics[bdf]}, may fire on "
            f"rank cores {format_cpulist(cpus)} (IRQs {format_cpulist(i.irq for i in irqs)})",
            f"numatune irq plan --exclude-cpus {format_cpulist(rank)} and apply it; set "
            f"IRQBALANCE_BANNED_CPULIST={format_cpulist(rank)}",
            bdf,
        ))
    return out, None


def _n(node: int | None) -> str:
    return "?" if node is None else str(node)


# (name, code, rule): name is the policy key users see; the order is the report's order.
RULES: tuple[tuple[str, str, Rule], ...] = (
    ("expect.sockets", "NT301", _count_rule("NT301", "sockets", "sockets", _sockets,
                                            "check the BIOS (a socket disabled?) and the CPU count in lscpu")),
    ("expect.numa_nodes", "NT302", _count_rule("NT302", "numa_nodes", "NUMA nodes", lambda t: len(t.nodes),
                                               "check the BIOS's sub-NUMA clustering (SNC/NPS) setting and "
                                               "numa=off on the kernel command line")),
    ("expect.cpu_nodes", "NT303", _count_rule("NT303", "cpu_nodes", "NUMA nodes with CPUs",
                                              lambda t: len([n for n in t.nodes if n.cpus]),
                                              "check the BIOS's sub-NUMA clustering (SNC/NPS) setting")),
    ("expect.cpus", "NT304", _count_rule("NT304", "cpus", "online CPUs", lambda t: len(t.cpu.online),
                                         "bring offline CPUs online; check SMT and maxcpus= on the command line")),
    ("expect.threads_per_core", "NT305", _threads_per_core),
    ("expect.gpus", "NT306", _count_rule("NT306", "gpus", "GPUs", lambda t: len(t.gpus),
                                         "check that every GPU is seated and enumerated (lspci, dmesg)")),
    ("expect.gpus_per_node", "NT307", _gpus_per_node),
    ("expect.nics", "NT308", _count_rule("NT308", "nics", "NICs", lambda t: len(t.nics),
                                         "check that every NIC is seated and enumerated (lspci, dmesg)")),
    ("expect.nic_per_gpu", "NT309", _nic_per_gpu),
    ("expect.device_nodes_known", "NT310", _device_nodes_known),
    ("expect.memory_per_node_gib_min", "NT311", _memory_per_node),
    ("expect.cxl.capacity_gib_min", "NT312", _cxl_capacity),
    ("expect.cxl.tier", "NT313", _cxl_tier),
    ("kernel.min_version", "NT320", _kernel_version),
    ("kernel.numa_balancing", "NT321", _setting_rule(
        "NT321", "numa_balancing", "kernel.numa_balancing", lambda t: t.settings.numa_balancing,
        "sysctl -w kernel.numa_balancing={want} (and persist it in /etc/sysctl.d)")),
    ("kernel.transparent_hugepage", "NT322", _setting_rule(
        "NT322", "transparent_hugepage", "transparent_hugepage", lambda t: t.settings.transparent_hugepage,
        "echo {want} > /sys/kernel/mm/transparent_hugepage/enabled (persist: transparent_hugepage={want})")),
    ("kernel.thp_defrag", "NT323", _setting_rule(
        "NT323", "thp_defrag", "transparent_hugepage defrag", lambda t: t.settings.thp_defrag,
        "echo {want} > /sys/kernel/mm/transparent_hugepage/defrag")),
    ("kernel.zone_reclaim_mode", "NT324", _setting_rule(
        "NT324", "zone_reclaim_mode", "vm.zone_reclaim_mode", lambda t: t.settings.zone_reclaim_mode,
        "sysctl -w vm.zone_reclaim_mode={want}")),
    ("kernel.demotion_enabled", "NT325", _demotion),
    ("tools.numactl_min_version", "NT330", _numactl),
    ("irq.rank_cpus", "NT340", _irq_rank_cores),
)


def evaluate_policy(policy: Policy, topo: Topology, facts: PolicyFacts | None = None) -> list[CheckResult]:
    """One CheckResult per expectation the policy sets (expectations it leaves out are not run)."""
    facts = facts or PolicyFacts()
    out = []
    for name, code, rule in RULES:
        got = rule(policy, topo, facts)
        if got is None:
            continue
        findings, skipped = got
        out.append(CheckResult(f"policy.{name}", "policy", f"{code} {CODES[code][1]}", tuple(findings), skipped))
    return out


def apply_overrides(results: list[CheckResult], policy: Policy | None) -> list[CheckResult]:
    """Drop ignored codes and apply the policy's severity overrides to every result (rules and policy alike)."""
    if policy is None or (not policy.ignore and not policy.severity):
        return results
    out = []
    for r in results:
        kept = tuple(
            Finding(f.code, policy.severity.get(f.code, f.severity), f.message, f.fix, f.subject)
            for f in r.findings
            if f.code not in policy.ignore
        )
        out.append(CheckResult(r.name, r.group, r.description, kept, r.skipped))
    return out
