"""Policy files (`numatune.toml`): what a node is expected to look like, turned into findings (NT3xx).

A fleet's nodes are bought and configured to a plan: so many sockets, GPUs per socket, a NIC next
to each GPU, CXL memory in a lower tier, numa_balancing off, a minimum kernel. The policy states
that plan once; `numatune check --policy` compares every node (or saved tree) with it. Unknown keys
are errors (a typo must not silently disable a check). Evaluation is pure: the facts that need a
live system (numactl's version, IRQ affinity) are gathered by the caller and passed in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.errors import InputError
from numatune.model._record import record
from numatune.model.check import CheckResult, IrqPlacement
from numatune.model.document import MAX_COUNT, MAX_SIZE
from numatune.model.findings import Code, Finding, Severity, register
from numatune.model.order import gpu_names
from numatune.model.paths import RANK, nearest_nic
from numatune.model.topology import Topology
from numatune.numbers import parse_int

PATH_KINDS = ("PIX", "PXB", "PHB", "NODE")  # allowed values of nic_max_path (SYS would allow anything)
TIER_CHOICES = ("below-dram", "same-as-dram")


@record
class Policy:
    """A validated policy: the expectations it sets (policy key -> value) and its [check] settings."""

    source: str = "<policy>"
    expect: tuple[tuple[str, Any], ...] = ()  # ("expect.sockets", 2), ...: only the keys the file sets
    fail_on: Severity | None = None
    ignore: frozenset[str] = frozenset()
    severity: tuple[tuple[str, Severity], ...] = ()  # code -> severity overrides

    def get(self, key: str) -> Any:
        """The expected value for a policy key ("irq.rank_cpus"), None when the file does not set it."""
        return dict(self.expect).get(key)


@record
class PolicyFacts:
    """Facts that come from outside the topology; None means unknown, with the reason alongside."""

    numactl_version: str | None = None
    numactl_note: str = "numactl's version was not looked up"
    irqs: tuple[IrqPlacement, ...] | None = None
    irq_note: str = "IRQ affinity was not read"




def parse_policy(data: dict[str, Any], source: str = "<policy>") -> Policy:
    """Validate a decoded TOML table into a Policy; the known keys are those of EXPECTATIONS and [check]."""
    v = _Validator(source)
    known = _known_keys()
    for section, body in data.items():
        if section not in known:
            v.fail(section, f"unknown section (known: {', '.join(sorted(known))})")
        if not isinstance(body, dict):
            v.fail(section, "must be a table ([" + section + "])")
        for key, value in body.items():
            if key not in known[section]:
                v.fail(f"{section}.{key}", f"unknown key (known: {', '.join(sorted(known[section]))})")
            subkeys = known[section][key]
            if subkeys:  # a sub-table such as [expect.cxl]
                if not isinstance(value, dict):
                    v.fail(f"{section}.{key}", f"must be a table ([{section}.{key}])")
                for sub in value:
                    if sub not in subkeys:
                        v.fail(f"{section}.{key}.{sub}", f"unknown key (known: {', '.join(sorted(subkeys))})")

    values = {}
    for e in EXPECTATIONS:
        raw = _lookup(data, e.key)
        if raw is not None:
            parsed = getattr(v, e.parse)(e.key, raw)
            if parsed is not None:
                values[e.key] = parsed
    for alias, (key, parse) in ALIASES.items():
        raw = _lookup(data, alias)
        if raw is not None and key not in values:
            parsed = parse(v, alias, raw)
            if parsed is not None:
                values[key] = parsed

    check = data.get("check", {})
    ignore = check.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(c, str) and re.fullmatch(r"NT\d{3}", c) for c in ignore):
        v.fail("check.ignore", 'must be a list of finding codes such as ["NT005"]')
    overrides = check.get("severity", {})
    if not isinstance(overrides, dict):
        v.fail("check.severity", 'must be a table of code = "info"|"warning"|"error"')
    severity = []
    for code, level in overrides.items():
        if not re.fullmatch(r"NT\d{3}", code):
            v.fail(f"check.severity.{code}", "is not a finding code (NTnnn)")
        severity.append((code, v.severity(f"check.severity.{code}", level)))

    order = [e.key for e in EXPECTATIONS]
    return Policy(
        source=source,
        expect=tuple(sorted(values.items(), key=lambda kv: order.index(kv[0]))),
        fail_on=v.severity("check.fail_on", check["fail_on"]) if "fail_on" in check else None,
        ignore=frozenset(ignore),
        severity=tuple(severity),
    )


def _lookup(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _known_keys() -> dict[str, dict[str, set[str]]]:
    """section -> key -> sub-keys (empty unless the key is a table), from every key a policy may set."""
    known: dict[str, dict[str, set[str]]] = {}
    for key in [e.key for e in EXPECTATIONS] + list(ALIASES) + [f"check.{k}" for k in CHECK_KEYS]:
        section, name, *sub = key.split(".")
        known.setdefault(section, {}).setdefault(name, set()).update(sub)
    return known


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, why: str) -> None:
        raise InputError(f"policy {self.source}: {key} {why}")

    def count(self, key: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            self.fail(key, f"must be a whole number >= 0 (at most {MAX_COUNT})")
        return value

    def number(self, key: str, value: Any) -> float | None:
        """A finite number >= 0 (TOML's inf and nan disabled a check or failed every node), bounded."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_SIZE:
            self.fail(key, f"must be a number >= 0 (finite, at most {MAX_SIZE:.3g})")
        return float(value)

    def bool_(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(key, "must be true or false")
        return value

    def flag(self, key: str, value: Any) -> bool | None:
        """A check that is on when true (false: not run)."""
        return self.bool_(key, value) or None

    def path_kind(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or value.upper() not in PATH_KINDS:
            self.fail(key, f"must be one of {', '.join(PATH_KINDS)}")
        return value.upper()

    def tier(self, key: str, value: Any) -> str | int:
        if not ((isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT)
                or (isinstance(value, str) and value in TIER_CHOICES)):
            self.fail(key, f"must be a tier number or one of {', '.join(TIER_CHOICES)}")
        return value

    def cpus(self, key: str, value: Any) -> frozenset[int]:
        if not isinstance(value, str):
            self.fail(key, 'must be a CPU list string such as "8-55,64-111"')
        try:
            cpus = parse_cpulist(value)
        except ValueError as exc:
            self.fail(key, f"bad CPU list: {exc}")
        if not cpus:
            self.fail(key, "is empty")
        return cpus

    def ints(self, key: str, value: Any) -> tuple[int, ...] | None:
        if value is None:
            return None
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(x, bool) or not isinstance(x, int) or abs(x) > MAX_COUNT for x in values):
            self.fail(key, f"must be a whole number or a list of them (each at most {MAX_COUNT})")
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
    m = re.match(r"\s*v?([0-9]{1,9}(?:\.[0-9]{1,9})*)", text)
    return tuple(parse_int(x, "version") for x in m.group(1).split(".")) if m else None


def version_at_least(have: str, want: str) -> bool | None:
    h, w = version_tuple(have), version_tuple(want)
    if h is None or w is None:
        return None
    width = max(len(h), len(w))
    return h + (0,) * (width - len(h)) >= w + (0,) * (width - len(w))


# -- evaluation ----------------------------------------------------------------------------------

# A rule gets its code, the policy's value for its key (never None) and the node; it returns the
# findings and, when it cannot judge here, why (then the check is reported as skipped).
Rule = Callable[[Code, Any, Topology, PolicyFacts], "tuple[list[Finding], str | None]"]


def _count_rule(what: str, actual: Callable[[Topology], int], fix: str) -> Rule:
    def rule(code: Code, want: int, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
        have = actual(topo)
        if have == want:
            return [], None
        return [code(f"expected {want} {what}, found {have}", fix, what)], None

    return rule


def _threads_per_core(code: Code, want: int, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    have = topo.cpu.threads_per_core
    if have == want:
        return [], None
    return [code(f"expected {want} threads per core, found {have}",
                 "set SMT (Hyper-Threading) in the BIOS, or echo on|off > /sys/devices/system/cpu/smt/control",
                 "smt")], None


def _gpus_per_node(code: Code, want: int, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    out = []
    for n in topo.nodes:
        if not n.cpus:
            continue
        have = [g.bdf for g in topo.gpus if g.node == n.id]
        if len(have) != want:
            out.append(code(f"node {n.id} has {len(have)} GPU(s), expected {want}"
                            + (f" ({', '.join(have)})" if have else ""),
                            "check that every GPU is seated and enumerated (lspci), and that the BIOS "
                            "reports device proximity (numa_node)", f"node {n.id}"))
    unknown = [g.bdf for g in topo.gpus if g.node is None]
    if unknown:
        out.append(code(f"{len(unknown)} GPU(s) have no known NUMA node: {', '.join(unknown)}",
                        "enable ACPI _PXM/SRAT proximity for PCI devices in the BIOS", "gpus"))
    return out, None


def _nic_per_gpu(code: Code, limit: str, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    if not topo.gpus:
        return [], "no GPUs on this node"
    out = []
    gpun = gpu_names(topo.devices)
    for g in topo.gpus:
        name = gpun.get(g.bdf.lower(), f"GPU {g.bdf}")
        best = nearest_nic(topo, g)
        if best is None:
            out.append(code(f"{name} has no NIC at all", "install a NIC per GPU (or per GPU pair)", g.bdf))
        elif RANK[best[1]] > RANK[limit]:
            nic = best[0]
            out.append(code(
                f"{name} (node {_n(g.node)}): nearest NIC {nic.bdf} "
                f"({', '.join(nic.netdevs + nic.rdma) or 'no netdev'}) is {best[1]}, worse than {limit}",
                "move a NIC under the GPU's PCIe switch or socket; until then set NCCL_IB_HCA per rank",
                g.bdf,
            ))
    return out, None


def _device_nodes_known(code: Code, want: bool, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    gpun = gpu_names(topo.devices)
    out = [
        code(f"{gpun.get(d.bdf.lower(), f'{d.kind.upper()} {d.bdf}')} reports numa_node -1",
             "enable ACPI _PXM/SRAT proximity for PCI devices in the BIOS (or vNUMA in the hypervisor)", d.bdf)
        for d in topo.devices
        if d.kind in ("gpu", "nic") and d.numa_node is None
    ]
    return out, None


def _memory_per_node(code: Code, want: float, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    out = []
    for n in topo.nodes:
        if not n.cpus:
            continue
        if n.memory_total_kib is None:
            return [], f"node {n.id} has no meminfo in this root"
        gib = n.memory_total_kib / 1048576
        if gib < want:
            out.append(code(f"node {n.id} has {gib:.1f} GiB of memory, expected at least {want:g} GiB",
                            "check for failed or missing DIMMs (dmidecode -t memory, the BMC's event log)",
                            f"node {n.id}"))
    return out, None


def _cxl_nodes(topo: Topology) -> list:
    return [n for n in topo.nodes if n.kind == "cxl"]


def _cxl_capacity(code: Code, want: float, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    gib = sum(n.memory_total_kib or 0 for n in _cxl_nodes(topo)) / 1048576
    if gib >= want:
        return [], None
    raw = sum((m.ram_size or 0) for m in topo.cxl.memdevs) / 2**30
    hint = (f"; the CXL memdevs hold {raw:.1f} GiB that is not online as a NUMA node" if raw > gib else "")
    return [code(f"{gib:.1f} GiB of CXL memory is online as NUMA nodes, expected at least {want:g} GiB{hint}",
                 "create and online the region: cxl create-region, then daxctl reconfigure-device "
                 "--mode=system-ram", "cxl")], None


def _cxl_tier(code: Code, want: str | int, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    cxl = _cxl_nodes(topo)
    if not cxl:
        return [], "no CXL memory node on this node"
    dram = [n.tier for n in topo.nodes if n.cpus and n.tier is not None]
    top = min(dram) if dram else None
    out = []
    for n in cxl:
        if n.tier is None:
            out.append(code(f"CXL node {n.id} is in no memory tier (kernel without memory tiering?)",
                            "use a kernel >= 6.1 with memory tiering", f"node {n.id}"))
            continue
        if want == "below-dram":
            ok = top is not None and n.tier > top
        elif want == "same-as-dram":
            ok = top is not None and n.tier == top
        else:
            ok = n.tier == want
        if not ok:
            out.append(code(
                f"CXL node {n.id} is in memory tier {n.tier}, expected {want}"
                + (f" (DRAM is tier {top})" if top is not None else ""),
                "make the firmware publish HMAT/CDAT performance data for the device, or online it "
                "through daxctl/kmem, so the kernel ranks it by its real speed",
                f"node {n.id}",
            ))
    return out, None


def _cxl_link_budget(code: Code, want: float, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    from numatune.analysis.cxl_links import node_budgets, over_budget
    from numatune.analysis.topology_findings import cxl_budget_findings

    if not node_budgets(topo, want):
        return [], "no CXL memory node with readable links on this node"
    return list(cxl_budget_findings(code, topo, over_budget(topo, want), want)), None


def _cxl_interleave_ways(code: Code, want: int, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    regions = [r for r in topo.cxl.regions if r.nodes]
    if not regions:
        return [], "no CXL region onlined as a NUMA node on this node"
    out = []
    for r in regions:
        if r.interleave_ways is None or r.interleave_ways < want:
            members = ", ".join(m.memdev or "?" for m in r.members) or ", ".join(r.memdevs) or "?"
            out.append(code(
                f"{r.name} (node(s) {format_cpulist(r.nodes)}) interleaves {r.interleave_ways or '?'} way(s) "
                f"over {members}, expected at least {want}",
                f"recreate the region over {want} devices: cxl create-region -w {want} -g 256 MEMDEVS "
                "(devices behind different root ports or host bridges spread the traffic over more links)",
                r.name,
            ))
    return out, None


def _min_version(what: str, have: Callable[[Topology, PolicyFacts], tuple[str | None, str]], fix: str) -> Rule:
    def rule(code: Code, want: str, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
        version, note = have(topo, facts)
        if version is None:
            return [], note
        ok = version_at_least(version, want)
        if ok is None:
            return [], f"cannot read a version number from {what} {version!r}"
        if ok:
            return [], None
        return [code(f"{what} {version} is older than {want}", fix.format(want=want), what.split()[0])], None

    return rule


def _setting_rule(label: str, actual: Callable[[Topology], Any], fix: str) -> Rule:
    def rule(code: Code, want: tuple, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
        have = actual(topo)
        if have is None:
            return [], f"{label} is not in this root"
        if have in want:
            return [], None
        allowed = " or ".join(str(w) for w in want)
        return [code(f"{label} is {have}, expected {allowed}", fix.format(want=want[0]), label)], None

    return rule


def _demotion(code: Code, want: bool, topo: Topology, facts: PolicyFacts):  # noqa: ANN202
    have = topo.settings.demotion_enabled
    if have is None:
        return [], "/sys/kernel/mm/numa/demotion_enabled is not in this root"
    if have == want:
        return [], None
    return [code(f"memory tiering demotion is {'on' if have else 'off'}, expected {'on' if want else 'off'}",
                 f"echo {'true' if want else 'false'} > /sys/kernel/mm/numa/demotion_enabled",
                 "demotion_enabled")], None


def gpu_local_nics(topo: Topology) -> dict[str, str]:
    """NIC BDF -> the GPU BDF it serves: each GPU's nearest NIC, unless that NIC is across the socket link."""
    out: dict[str, str] = {}
    for g in topo.gpus:
        best = nearest_nic(topo, g)
        if best and best[1] != "SYS":
            out.setdefault(best[0].bdf, g.bdf)
    return out


def _irq_rank_cores(code: Code, rank: frozenset[int], topo: Topology, facts: PolicyFacts):  # noqa: ANN202
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
        out.append(code(
            f"{len(irqs)} IRQ(s) of NIC {bdf}{f' ({name})' if name else ''}, local to GPU {nics[bdf]}, may fire on "
            f"rank cores {format_cpulist(cpus)} (IRQs {format_cpulist(i.irq for i in irqs)})",
            f"numatune irq plan --exclude-cpus {format_cpulist(rank)} and apply it; set "
            f"IRQBALANCE_BANNED_CPULIST={format_cpulist(rank)}",
            bdf,
        ))
    return out, None


def _n(node: int | None) -> str:
    return "?" if node is None else str(node)


@record
class Expectation:
    """One policy key: how its value is validated, the code its findings carry and the rule that judges it."""

    key: str  # the policy key users write, "expect.sockets"; the check is named policy.<key>
    parse: str  # the _Validator method that validates the value
    code: Code
    rule: Rule
    name: str = ""  # the check's name when it differs from the key (kept stable for CI reports)


def _expect(key: str, parse: str, code: str, severity: Severity, title: str, doc: str, rule: Rule,
            supersedes: str = "", name: str = "") -> Expectation:
    return Expectation(key, parse, register(code, severity, "policy", title, f"Policy key {key}: {doc}", supersedes),
                       rule, name)


_E, _W = Severity.ERROR, Severity.WARNING

# Every expectation a policy may set, in report order. Adding one is adding a line here (and its rule).
EXPECTATIONS: tuple[Expectation, ...] = (
    _expect("expect.sockets", "count", "NT301", _E, "number of sockets", "the number of CPU packages.",
            _count_rule("sockets", lambda t: len(t.cpu.sockets),
                        "check the BIOS (a socket disabled?) and the CPU count in lscpu")),
    _expect("expect.numa_nodes", "count", "NT302", _E, "number of NUMA nodes", "the number of NUMA nodes.",
            _count_rule("NUMA nodes", lambda t: len(t.nodes), "check the BIOS's sub-NUMA clustering (SNC/NPS) "
                        "setting and numa=off on the kernel command line")),
    _expect("expect.cpu_nodes", "count", "NT303", _E, "number of NUMA nodes with CPUs",
            "the number of NUMA nodes with CPUs.",
            _count_rule("NUMA nodes with CPUs", lambda t: len([n for n in t.nodes if n.cpus]),
                        "check the BIOS's sub-NUMA clustering (SNC/NPS) setting")),
    _expect("expect.cpus", "count", "NT304", _E, "number of online CPUs", "the number of online CPUs.",
            _count_rule("online CPUs", lambda t: len(t.cpu.online),
                        "bring offline CPUs online; check SMT and maxcpus= on the command line")),
    _expect("expect.threads_per_core", "count", "NT305", _E, "SMT threads per core",
            "the number of hardware threads per core (SMT).", _threads_per_core),
    _expect("expect.gpus", "count", "NT306", _E, "number of GPUs", "the number of GPUs.",
            _count_rule("GPUs", lambda t: len(t.gpus), "check that every GPU is seated and enumerated (lspci, dmesg)")),
    _expect("expect.gpus_per_node", "count", "NT307", _E, "GPUs on each NUMA node with CPUs",
            "the number of GPUs on every node with CPUs; a GPU with no known node also fails it.", _gpus_per_node),
    _expect("expect.nics", "count", "NT308", _E, "number of NICs", "the number of NICs.",
            _count_rule("NICs", lambda t: len(t.nics), "check that every NIC is seated and enumerated (lspci, dmesg)")),
    _expect("expect.nic_max_path", "path_kind", "NT309", _E, "a NIC local to each GPU",
            "the worst allowed PCIe path from each GPU to its nearest NIC: PIX, PXB, PHB or NODE "
            "(expect.nic_per_gpu = true means NODE).", _nic_per_gpu, name="expect.nic_per_gpu"),
    _expect("expect.device_nodes_known", "flag", "NT310", _E, "every GPU and NIC has a known NUMA node",
            "no GPU or NIC reports numa_node -1.", _device_nodes_known),
    _expect("expect.memory_per_node_gib_min", "number", "NT311", _E, "memory of each NUMA node with CPUs",
            "the least memory (GiB) of every node with CPUs.", _memory_per_node),
    _expect("expect.cxl.capacity_gib_min", "number", "NT312", _E, "CXL memory capacity",
            "the least CXL memory (GiB) online as NUMA nodes.", _cxl_capacity),
    _expect("expect.cxl.tier", "tier", "NT313", _E, "memory tier of CXL nodes",
            "the memory tier of every CXL node: below-dram, same-as-dram or a tier number.", _cxl_tier),
    _expect("expect.cxl.gpus_per_x16_link", "number", "NT314", _W, "GPUs per CXL 2.0 x16 link",
            "the most GPUs whose ranks may spill to CXL memory behind one CXL 2.0 x16 link's worth of "
            "bandwidth (links of other widths and generations in proportion); inspect's NT022 uses 4.",
            _cxl_link_budget),
    _expect("expect.cxl.interleave_ways_min", "count", "NT315", _W, "CXL interleave ways",
            "the fewest devices every CXL region onlined as a NUMA node interleaves over.", _cxl_interleave_ways),
    _expect("kernel.min_version", "version", "NT320", _E, "minimum kernel version", "the oldest kernel allowed.",
            _min_version("kernel", lambda t, f: (
                t.settings.release, "the kernel release is not in this root (/proc/sys/kernel/osrelease, "
                "/proc/version)"), "boot a kernel >= {want}")),
    _expect("kernel.numa_balancing", "ints", "NT321", _W, "kernel.numa_balancing",
            "the allowed value(s) of kernel.numa_balancing.",
            _setting_rule("kernel.numa_balancing", lambda t: t.settings.numa_balancing,
                          "sysctl -w kernel.numa_balancing={want} (and persist it in /etc/sysctl.d)")),
    _expect("kernel.transparent_hugepage", "strs", "NT322", _W, "transparent hugepages (enabled)",
            "the allowed mode(s) of /sys/kernel/mm/transparent_hugepage/enabled.",
            _setting_rule("transparent_hugepage", lambda t: t.settings.transparent_hugepage,
                          "echo {want} > /sys/kernel/mm/transparent_hugepage/enabled (persist: "
                          "transparent_hugepage={want})")),
    _expect("kernel.thp_defrag", "strs", "NT323", _W, "transparent hugepages (defrag)",
            "the allowed mode(s) of /sys/kernel/mm/transparent_hugepage/defrag.",
            _setting_rule("transparent_hugepage defrag", lambda t: t.settings.thp_defrag,
                          "echo {want} > /sys/kernel/mm/transparent_hugepage/defrag")),
    _expect("kernel.zone_reclaim_mode", "ints", "NT324", _W, "vm.zone_reclaim_mode",
            "the allowed value(s) of vm.zone_reclaim_mode.",
            _setting_rule("vm.zone_reclaim_mode", lambda t: t.settings.zone_reclaim_mode,
                          "sysctl -w vm.zone_reclaim_mode={want}")),
    _expect("kernel.demotion_enabled", "bool_", "NT325", _W, "memory tiering demotion",
            "whether /sys/kernel/mm/numa/demotion_enabled is on.", _demotion),
    _expect("tools.numactl_min_version", "version", "NT330", _E, "minimum numactl version",
            "the oldest numactl allowed (read from numactl --version, dpkg or rpm on the live node).",
            _min_version("numactl", lambda t, f: (f.numactl_version, f.numactl_note),
                         "install numactl >= {want} (weighted interleave needs 2.0.19)")),
    _expect("irq.rank_cpus", "cpus", "NT340", _E, "no IRQ of a GPU-local NIC on rank cores",
            "the CPUs given to ranks (launch --cpu-bind exclusive); no IRQ of a NIC local to a GPU may be "
            "allowed on them. irq's own rules treat them as reserved too (NT203); for those NICs NT340 "
            "replaces NT203.", _irq_rank_cores, supersedes="NT203"),
)

# Other spellings of a key: alias -> (key, how its value becomes the key's value).
ALIASES: dict[str, tuple[str, Callable[[_Validator, str, Any], Any]]] = {
    "expect.nic_per_gpu": ("expect.nic_max_path", lambda v, key, value: "NODE" if v.bool_(key, value) else None),
}
CHECK_KEYS = ("fail_on", "ignore", "severity")


def evaluate_policy(policy: Policy, topo: Topology, facts: PolicyFacts | None = None) -> list[CheckResult]:
    """One CheckResult per expectation the policy sets (expectations it leaves out are not run)."""
    facts = facts or PolicyFacts()
    values = dict(policy.expect)
    out = []
    for e in EXPECTATIONS:
        if e.key not in values:
            continue
        findings, skipped = e.rule(e.code, values[e.key], topo, facts)
        out.append(CheckResult(f"policy.{e.name or e.key}", "policy", f"{e.code.code} {e.code.title}", tuple(findings),
                               skipped))
    return out


def apply_overrides(results: list[CheckResult], policy: Policy | None) -> list[CheckResult]:
    """Drop ignored codes and apply the policy's severity overrides to every result (rules and policy alike)."""
    if policy is None or (not policy.ignore and not policy.severity):
        return results
    severity = dict(policy.severity)
    out = []
    for r in results:
        kept = tuple(
            f._replace(severity=severity.get(f.code, f.severity)) for f in r.findings if f.code not in policy.ignore
        )
        out.append(r._replace(findings=kept))
    return out
