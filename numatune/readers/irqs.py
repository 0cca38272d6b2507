"""Device interrupts: /proc/interrupts (one pass), /proc/irq/N/*, PCI msi_irqs/ and action names.

/proc/interrupts on a 1152-CPU machine is 13 MB, nearly all of it per-CPU counts of interrupts no
one asked about. The parser therefore finds each row's tail (chip, hwirq, action names) without
splitting the counts, using the kernel's fixed-width layout (" %10u" per CPU) with a checked
fallback for rows that do not follow it, and parses counts only for the rows of devices of interest.
Layouts handled: x86 (`IR-PCI-MSI 524288-edge eth0`), 6.x per-device MSI domains
(`PCI-MSIX-0000:00:01.0 0-edge virtio0-config`), ARM (`GICv3 27 Level arch_timer`), s390 (named
rows first, no hwirq column), ERR:/MIS: rows with one column, blank lines, rows with fewer columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import compress

from numatune.cpulist import MAX_ID, parse_cpulist, parse_cpumask
from numatune.errors import NumatuneError, ParseError
from numatune.model._record import record
from numatune.model.findings import Skipped
from numatune.model.irq import DeviceIrqs, InterruptRow, InterruptsTable, Irq, IrqReport
from numatune.model.order import gpu_names
from numatune.model.topology import PciDevice, Topology
from numatune.numbers import maybe_int, parse_int
from numatune.pieces import keyed, lines, split
from numatune.readers import host_skipped
from numatune.readers.settings import IRQBALANCE_KEYS, irqbalance_process
from numatune.system.host import Host

INTERRUPTS = "/proc/interrupts"
PROC_IRQ = "/proc/irq"
DEBUGFS_IRQS = "/sys/kernel/debug/irq/irqs"
ISOLATED = "/sys/devices/system/cpu/isolated"
# Numbered rows of /proc/interrupts: a real machine has a few thousand (nr_irqs); past this bound the file
# is refused (exit 3) before rows beyond it are parsed, so a 30 MB file of a million rows costs under a second.
MAX_INTERRUPT_ROWS = 1 << 15
IRQ_KINDS = ("nic", "gpu", "nvme", "cxl", "accelerator")
IRQBALANCE_CONFIGS = ("/etc/default/irqbalance", "/etc/sysconfig/irqbalance")

# Every expression here runs on a stranger's text, so each is linear in it (no two unbounded repeats that can
# match the same characters next to or inside each other; a row's tail is split by hand, `_tail`):
# _BDF_TEXT is of bounded length at each start. _COUNTS: each round is blanks then digits then a look at one
# character, and a blank cannot be a digit, so a failed round gives back at most its own characters.
_BDF_TEXT = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_BDF_IN = re.compile(_BDF_TEXT)
_COUNTS = re.compile(rb"(?:\s+\d+(?=\s|$))*")
_TRIGGERS = ("Level", "Edge", "level", "edge")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Action-name shapes that identify a device without sysfs. _MLX: [a-z_] and \d cannot overlap, and "@pci:"
# ends the name's variable part. _NVME: digits, then "q", then digits to the end. _QUEUE: the lazy name stops
# at each "-" only to try a short word and then the digits to the end; those digit runs do not overlap, so the
# whole is linear (twice: with and without the driver prefix). _DRIVER_BDF: anchored, bounded. _NAME_HINT:
# literals, a BDF (bounded) and "nvme" digits "q" at each start: a digit run is scanned once per "nvme" before it.
_MLX = re.compile(r"^(?P<what>mlx[45]_[a-z_]+?)(?P<n>\d*)@pci:(?P<bdf>" + _BDF_TEXT + r")$")
_NVME = re.compile(r"^(?P<ctrl>nvme\d+)q(?P<q>\d+)$")
_QUEUE = re.compile(
    r"^(?:(?P<drv>i40e|ice|iavf|igb|igc|ixgbe|ixgbevf|bnxt_en|be2net|qede|ena|gve|idpf|mlx4|hinic|sfc)-)?"
    r"(?P<if>.+?)-(?P<dir>TxRx|txrx|rx|tx|Rx|Tx|fp|combined|comp)-(?P<q>\d+)$"
)
_DRIVER_BDF = re.compile(r"^(?P<drv>i40e|ice|iavf|ixgbe|igb|bnxt_en|qede|idpf)-(?P<bdf>" + _BDF_TEXT + r")")
_NAME_HINT = re.compile(r"@pci:|TxRx|txrx|-rx-|-tx-|-fp-|-combined-|nvme\d+q|" + _BDF_TEXT)
_CONTROL_WORDS = ("async", "cmd", "pages", "misc", "config", "ctrl", "admin", "fdir", "aux", "err")


# -- /proc/interrupts ---------------------------------------------------------------------------
def parse_interrupts(
    text: str | bytes,
    wanted: Callable[[int, str], bool] | None = None,
) -> InterruptsTable:
    """Parse /proc/interrupts. `wanted(irq, tail)` picks the rows whose counts are parsed (all if None).

    `tail` is the text after the counts (chip, hwirq, action names); rows not wanted are not kept at
    all, so a caller asking for a handful of devices pays for a handful of rows. Works on the raw
    bytes: only the header, the tails and the counts of kept rows are ever decoded.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    size = len(data)
    pos = 0
    header = b""
    while pos < size:  # the header: the first line that is not blank
        nl = data.find(b"\n", pos)
        nl = size if nl < 0 else nl
        header = data[pos:nl]
        pos = nl + 1
        if header.strip():
            break
    header_line = data.count(b"\n", 0, max(pos - 1, 0)) + 1
    columns = split(header.decode("ascii", "replace"), None, INTERRUPTS, MAX_ID, "CPU columns")  # one a CPU
    cpus = tuple(parse_int(tok[3:], INTERRUPTS, line=header_line)
                 for tok in columns if tok.startswith("CPU") and tok[3:].isdigit())
    ncpu = len(cpus)
    width = 11 * ncpu  # the kernel writes " %10u" per online CPU
    zero_row = "          0" * ncpu
    zero_bytes = zero_row.encode()
    rows: dict[int, InterruptRow] = {}
    numeric = irregular = 0
    find = data.find
    startswith = data.startswith
    while pos < size:
        nl = find(b"\n", pos)
        if nl < 0:
            nl = size
        line_start, pos = pos, nl + 1
        colon = find(b":", line_start, nl)
        if colon < 0:
            continue  # blank line
        label = data[line_start:colon].strip()
        if not label.isdigit():
            continue  # NMI, LOC, ERR, MIS, s390 EXT/I/O... : not device interrupts
        numeric += 1
        if numeric > MAX_INTERRUPT_ROWS:
            raise ParseError(INTERRUPTS, f"more than {MAX_INTERRUPT_ROWS} numbered rows, which no kernel writes")
        irq = int(label) if len(label) <= 10 else parse_int(label.decode(), INTERRUPTS,
                                                             line=data.count(b"\n", 0, line_start) + 1)
        start = colon + 1
        end = start + width
        if end < nl and data[end] == 32 and 48 <= data[end - 1] <= 57 and (ncpu == 0 or data[start] == 32):
            fixed = True
        else:
            end = _COUNTS.match(data, start, nl).end()
            fixed = False
        tail = data[end:nl].decode("utf-8", "replace")
        if wanted is not None and not wanted(irq, tail):
            continue
        seg = zero_row if fixed and startswith(zero_bytes, start) else data[start:end].decode("ascii", "replace")
        row = _row(irq, seg, tail, ncpu, cpus, zero_row)
        if row is None and fixed:
            # The fixed-width guess was wrong (a count wider than 10 digits): take the slow path.
            end = _COUNTS.match(data, start, nl).end()
            row = _row(irq, data[start:end].decode("ascii", "replace"), data[end:nl].decode("utf-8", "replace"),
                       ncpu, cpus, zero_row)
            fixed = False
        if not fixed:
            irregular += 1
        if row is not None:
            rows[irq] = row
    return InterruptsTable(cpus=cpus, rows=rows, numeric_rows=numeric, irregular_rows=irregular)


def _row(irq: int, seg: str, tail: str, ncpu: int, cpus: tuple[int, ...], zero_row: str) -> InterruptRow | None:
    per_cpu: tuple[tuple[int, int], ...] = ()
    total = 0
    if seg == zero_row:  # one memcmp settles the common case: a row of zeros in the kernel's layout
        pass
    elif len(seg) == len(zero_row) and (cols := _nonzero_columns(seg)) is not None:
        try:
            per_cpu = tuple((cpus[c], int(seg[11 * c : 11 * c + 11])) for c in cols)
        except ValueError:
            return None  # not the fixed layout after all
        total = sum(v for _, v in per_cpu)
    else:
        tokens = seg.split()
        if len(tokens) > ncpu:
            # More numbers than CPUs: the extras belong to the tail (a numeric chip column).
            tail = " ".join(tokens[ncpu:]) + " " + tail
            tokens = tokens[:ncpu]
        try:
            per_cpu = tuple((cpus[i], int(tokens[i])) for i in _nonzero(tokens))
        except ValueError:
            return None  # not a count: the fixed-width guess was wrong
        total = sum(v for _, v in per_cpu)
    parts = _tail(tail)
    if parts is None:
        return InterruptRow(irq=irq, actions=(), total=total, per_cpu=per_cpu)
    chip, hwirq, trigger, actions_text = parts
    if chip[0].isdigit():
        return None
    actions = tuple(a.strip() for a in actions_text.split(", ") if a.strip()) if actions_text else ()
    return InterruptRow(irq=irq, actions=actions, chip=chip, hwirq=hwirq, trigger=trigger, total=total,
                        per_cpu=per_cpu)


def _tail(tail: str) -> tuple[str, str | None, str | None, str] | None:
    """A row's tail as (chip, hwirq, trigger, actions): "IR-PCI-MSI 524288-edge eth0", "GICv3 27 Level
    arch_timer", "PCI-MSIX-0000:00:01.0 0-edge virtio0-config", or a chip and actions alone (s390); None
    if blank. Split by hand, each step a linear scan: a regular expression with `.*?` then `\\s*$` was
    quadratic in a run of blanks inside the actions (100,000 blanks: 36 s)."""
    words = tail.split(None, 1)
    if not words:
        return None
    chip = words[0]
    rest_text = words[1] if len(words) > 1 else ""
    hwirq = trigger = None
    word, *after = rest_text.split(None, 1) or ("",)
    number, dash, trig = word.partition("-")
    if number.isascii() and number.isdigit():
        if dash:
            letters = len(trig) - len(trig.lstrip(_LETTERS))  # "524288-edge": the letters after the dash
            if letters:
                hwirq, trigger = number, trig[:letters]
                rest_text = rest_text[len(number) + 1 + letters:].lstrip()
        elif after:
            for trig in _TRIGGERS:  # "27 Level"
                if after[0].startswith(trig):
                    hwirq, trigger, rest_text = number, trig, after[0][len(trig):].lstrip()
                    break
    return chip, hwirq, trigger, rest_text.rstrip()


def _nonzero_columns(seg: str, limit: int = 48) -> list[int] | None:
    """Columns (11 characters each) holding a non-zero count, found with str.find on the digits 1-9;
    None when there are too many to be worth it (the caller then splits the row)."""
    cols: set[int] = set()
    hits = 0
    for digit in "123456789":
        at = seg.find(digit)
        while at >= 0:
            hits += 1
            if hits > limit:
                return None
            cols.add(at // 11)
            at = seg.find(digit, at + 1)
    return sorted(cols)


def _nonzero(tokens: list[str]) -> list[int]:
    """Indexes of the tokens that are not "0", scanning in C: a device IRQ usually fires on few CPUs."""
    hits = len(tokens) - tokens.count("0")
    if hits == 0:
        return []
    if hits > 32:
        return list(compress(range(len(tokens)), map("0".__ne__, tokens)))
    out = []
    for value in set(tokens):
        if value == "0":
            continue
        at = tokens.index(value)
        while True:
            out.append(at)
            try:
                at = tokens.index(value, at + 1)
            except ValueError:
                break
    out.sort()
    return out


# -- identifying devices from action names -------------------------------------------------------
@record
class NameMatch:
    """What an action name says about its device."""

    key_kind: str  # bdf | netdev | nvme
    key: str
    device_kind: str  # nic | nvme
    role: str  # queue | control
    queue: int | None


def identify_action(name: str) -> NameMatch | None:
    """Recognise the device behind one action name (no sysfs needed); None if it names none we track."""
    m = _MLX.match(name)
    if m:
        queue = "comp" in m.group("what")
        number = maybe_int(m.group("n"), INTERRUPTS) if queue and m.group("n") else None
        return NameMatch("bdf", m.group("bdf").lower(), "nic", "queue" if queue else "control", number)
    m = _NVME.match(name)
    if m:
        q = maybe_int(m.group("q"), INTERRUPTS) or 0
        return NameMatch("nvme", m.group("ctrl"), "nvme", "queue" if q > 0 else "control", q if q > 0 else None)
    m = _DRIVER_BDF.match(name)
    if m:
        return NameMatch("bdf", m.group("bdf").lower(), "nic", "control", None)
    m = _QUEUE.match(name)
    if m:
        iface = m.group("if")
        bdf = _BDF_IN.search(iface)
        if bdf:
            return NameMatch("bdf", bdf.group(0).lower(), "nic", "control", None)
        return NameMatch("netdev", iface, "nic", "queue", maybe_int(m.group("q"), INTERRUPTS))
    return None


def _role_of(name: str) -> tuple[str, int | None]:
    m = identify_action(name)
    if m is not None:
        return m.role, m.queue
    low = name.lower()
    if any(w in low for w in _CONTROL_WORDS):
        return "control", None
    head = name.rstrip("0123456789")  # the digits that end it, found by one scan (not re.search's at each start)
    return "queue", maybe_int(name[len(head):], INTERRUPTS) if head and len(head) < len(name) else None


# -- /proc/irq/N ---------------------------------------------------------------------------------
class IrqState:
    """What /proc/irq/N says about one IRQ (a plain class: no dataclass machinery at import)."""

    __slots__ = ("smp_affinity", "smp_affinity_list", "effective_affinity_list", "affinity_hint", "node", "exists",
                 "managed", "managed_evidence", "debugfs_device")

    def __init__(self) -> None:
        self.smp_affinity: str | None = None
        self.smp_affinity_list: tuple[int, ...] | None = None
        self.effective_affinity_list: tuple[int, ...] | None = None
        self.affinity_hint: tuple[int, ...] | None = None
        self.node: int | None = None
        self.exists = False
        self.managed: bool | None = None
        self.managed_evidence: str | None = None
        self.debugfs_device: str | None = None


def read_irq_state(host: Host, irq: int, debugfs: bool = False) -> IrqState:
    """Affinity files of one IRQ. Missing files stay None; a missing directory means the IRQ is gone."""
    base = f"{PROC_IRQ}/{irq}"
    state = IrqState()
    smp = host.read_optional(f"{base}/smp_affinity")
    smp_list = host.read_optional(f"{base}/smp_affinity_list")
    if smp is None and smp_list is None and not host.is_dir(base):
        return state
    state.exists = True
    state.smp_affinity = smp
    state.smp_affinity_list = _cpus(smp_list, parse_cpulist)
    if state.smp_affinity_list is None and smp is not None:
        state.smp_affinity_list = _cpus(smp, parse_cpumask)
    state.effective_affinity_list = _cpus(host.read_optional(f"{base}/effective_affinity_list"), parse_cpulist)
    if state.effective_affinity_list is None:
        state.effective_affinity_list = _cpus(host.read_optional(f"{base}/effective_affinity"), parse_cpumask)
    state.affinity_hint = _cpus(host.read_optional(f"{base}/affinity_hint"), parse_cpumask)
    node = host.read_optional(f"{base}/node")
    number = maybe_int(node, f"{base}/node") if node else None
    if number is not None and number >= 0:
        state.node = number
    if debugfs:
        text = host.read_optional(f"{DEBUGFS_IRQS}/{irq}")
        if text is not None:
            state.managed = "AFFINITY_MANAGED" in text
            state.managed_evidence = "debugfs dstate IRQD_AFFINITY_MANAGED" if state.managed else "debugfs dstate"
            # Linear: a literal at each line start, then blanks, then the first word (a blank cannot start it).
            m = re.search(r"^device:\s*(\S+)", text, re.M)
            state.debugfs_device = m.group(1) if m else None
    return state


def _cpus(text: str | None, parse: Callable[[str], frozenset[int]]) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(sorted(parse(text)))
    except ValueError:
        return None


# -- the report ----------------------------------------------------------------------------------
class _Dev:
    """A device being assembled: its identity and the IRQs found for it, with how."""

    def __init__(self, key: str, bdf: str | None, kind: str, node: int | None = None, node_inferred: bool = False,
                 netdevs: tuple[str, ...] = (), rdma: tuple[str, ...] = (), nvme: tuple[str, ...] = (),
                 driver: str | None = None, in_sysfs: bool = True) -> None:
        self.key, self.bdf, self.kind, self.node, self.node_inferred = key, bdf, kind, node, node_inferred
        self.netdevs, self.rdma, self.nvme, self.driver, self.in_sysfs = netdevs, rdma, nvme, driver, in_sysfs
        self.found: dict[int, set[str]] = {}

    def add(self, irq: int, how: str) -> None:
        self.found.setdefault(irq, set()).add(how)


def read_irq_report(host: Host, topo: Topology) -> IrqReport:
    """Every IRQ of the devices of interest, with counts, affinity and managed state."""
    skipped: list[Skipped] = []
    devs: list[_Dev] = []
    by_bdf: dict[str, _Dev] = {}
    by_netdev: dict[str, _Dev] = {}
    by_nvme: dict[str, _Dev] = {}
    by_irq: dict[int, _Dev] = {}
    cpu_nodes = [n.id for n in topo.nodes if n.cpus]
    only_node = cpu_nodes[0] if len(cpu_nodes) == 1 else None  # one node: every device is local to it
    for d in topo.devices:
        if d.kind not in IRQ_KINDS or not d.path:
            continue
        node = d.node if d.node is not None else only_node
        dev = _Dev(
            key=d.bdf, bdf=d.bdf, kind=d.kind, node=node, node_inferred=d.numa_node is None and node is not None,
            netdevs=d.netdevs, rdma=d.rdma, nvme=d.nvme, driver=d.driver,
        )
        devs.append(dev)
        by_bdf[d.bdf.lower()] = dev
        for n in d.netdevs:
            by_netdev[n] = dev
        for n in d.nvme:
            by_nvme[n] = dev
        for irq in _msi_irqs(host, d):
            dev.add(irq, "msi_irqs")
            by_irq.setdefault(irq, dev)

    text = read_interrupts(host)
    has_interrupts = text is not None
    if text is None:
        skipped.append(Skipped(INTERRUPTS, "not in this root: no per-CPU counts and no action names"))
        table = InterruptsTable(cpus=())
    else:
        known = by_irq.keys()

        def wanted(irq: int, tail: str) -> bool:
            return irq in known or _NAME_HINT.search(tail) is not None or _mentions(tail, by_netdev)

        table = parse_interrupts(text, wanted)

    # Join action names to devices (sysfs first, then names alone).
    for row in table.rows.values():
        if row.irq in by_irq:
            continue
        for name in row.actions:
            dev = _match_known(name, by_bdf, by_netdev, by_nvme)
            if dev is None:
                m = identify_action(name)
                if m is None:
                    continue
                dev = _name_only(m, devs, by_bdf, by_netdev, by_nvme)
            dev.add(row.irq, "name")
            by_irq.setdefault(row.irq, dev)
            break

    # Legacy INTx for devices with nothing else.
    pci_of: dict[str, PciDevice] = {}  # one lookup a device (Topology.device scans: 8,000 NICs were 6.6 s)
    for d in topo.devices:
        pci_of.setdefault(d.bdf, d)
    for dev in devs:
        if not dev.found and dev.in_sysfs and dev.bdf:
            pci = pci_of.get(dev.bdf)
            legacy = host.read_int(f"{pci.path}/irq") if pci is not None else None
            if legacy and legacy > 0:
                dev.add(legacy, "irq")

    has_proc_irq = host.is_dir(PROC_IRQ)
    debugfs = host.is_dir(DEBUGFS_IRQS)
    out = []
    gpun = gpu_names(topo.devices)
    for dev in devs:
        irqs = []
        for irq_no in sorted(dev.found):
            row = table.rows.get(irq_no)
            state = read_irq_state(host, irq_no, debugfs) if has_proc_irq else IrqState()
            actions = row.actions if row else ()
            role, queue = _roles(actions)
            managed, evidence = state.managed, state.managed_evidence
            if managed is None and any(_NVME.match(a) and role == "queue" for a in actions):
                managed, evidence = True, "NVMe I/O queue: the nvme driver asks for kernel-managed affinity"
            present = state.exists or row is not None or not (has_proc_irq or has_interrupts)
            irqs.append(
                Irq(
                    irq=irq_no,
                    actions=actions,
                    role=role,
                    queue=queue,
                    found_by=tuple(sorted(dev.found[irq_no])),
                    chip=row.chip if row else None,
                    total=row.total if row else None,
                    per_cpu=row.per_cpu if row else (),
                    smp_affinity=state.smp_affinity,
                    smp_affinity_list=state.smp_affinity_list,
                    effective_affinity_list=state.effective_affinity_list,
                    affinity_hint=state.affinity_hint,
                    node=state.node,
                    managed=managed,
                    managed_evidence=evidence,
                    present=present,
                )
            )
        if not irqs and not dev.in_sysfs:
            continue
        gpu = gpun.get(dev.bdf.lower(), "").split(" ")[0] if dev.bdf else ""
        out.append(
            DeviceIrqs(
                key=dev.key, bdf=dev.bdf, kind=dev.kind, node=dev.node, node_inferred=dev.node_inferred,
                netdevs=dev.netdevs, rdma=dev.rdma, nvme=dev.nvme, driver=dev.driver, in_sysfs=dev.in_sysfs,
                irqs=tuple(irqs), gpu=gpu or None,
            )
        )
    if text is not None and not has_proc_irq:
        skipped.append(Skipped(PROC_IRQ, "not in this root: affinity (smp_affinity_list) unknown"))
    running, banned = read_irqbalance(host)
    isolated = host.read_cpulist(ISOLATED) or frozenset()
    return IrqReport(
        source=host.label,
        live=host.is_live,
        interrupts_cpus=table.cpus,
        has_interrupts=has_interrupts,
        has_proc_irq=has_proc_irq,
        devices=tuple(out),
        isolated_cpus=tuple(sorted(isolated)),
        irqbalance_running=running,
        irqbalance_banned=banned,
        skipped=host_skipped(host, tuple(skipped) + topo.skipped),
    )


def _msi_irqs(host: Host, dev: PciDevice) -> list[int]:
    where = f"{dev.path}/msi_irqs"
    return [n for n in (maybe_int(name, where) for name in host.listdir(where)) if n is not None and n >= 0]


def _mentions(tail: str, by_netdev: dict[str, _Dev]) -> bool:
    if not by_netdev:
        return False
    return any(n in tail for n in by_netdev)


def _match_known(
    name: str, by_bdf: dict[str, _Dev], by_netdev: dict[str, _Dev], by_nvme: dict[str, _Dev]
) -> _Dev | None:
    for m in _BDF_IN.finditer(name):
        dev = by_bdf.get(m.group(0).lower())
        if dev is not None:
            return dev
    nv = _NVME.match(name)
    if nv and nv.group("ctrl") in by_nvme:
        return by_nvme[nv.group("ctrl")]
    for nd, dev in by_netdev.items():
        if name == nd or name.startswith(nd + "-") or f"-{nd}-" in name or name.endswith("-" + nd):
            return dev
    return None


def _name_only(
    m: NameMatch, devs: list[_Dev], by_bdf: dict[str, _Dev], by_netdev: dict[str, _Dev], by_nvme: dict[str, _Dev]
) -> _Dev:
    index = {"bdf": by_bdf, "netdev": by_netdev, "nvme": by_nvme}[m.key_kind]
    dev = index.get(m.key)
    if dev is None:
        dev = _Dev(
            key=m.key,
            bdf=m.key if m.key_kind == "bdf" else None,
            kind=m.device_kind,
            netdevs=(m.key,) if m.key_kind == "netdev" else (),
            nvme=(m.key,) if m.key_kind == "nvme" else (),
            in_sysfs=False,
        )
        devs.append(dev)
        index[m.key] = dev
    return dev


def _roles(actions: Iterable[str]) -> tuple[str, int | None]:
    roles = [_role_of(a) for a in actions]
    if not roles:
        return "queue", None
    queue = next((r for r in roles if r[0] == "queue"), None)
    return queue if queue is not None else roles[0]


def read_irqbalance(host: Host) -> tuple[bool | None, tuple[int, ...] | None]:
    """(running, banned CPUs). Running is None when this root has no process table to look at.

    From the daemon's environment only the two IRQBALANCE_BANNED_* keys are read, never the rest.
    """
    running, pid = irqbalance_process(host)
    banned: tuple[int, ...] | None = None
    if pid is not None:
        banned = _banned_from_environ(_read_raw(host, f"/proc/{pid}/environ"))
    if banned is None:
        for path in IRQBALANCE_CONFIGS:
            banned = _banned_from_config(host.read_optional(path), path)
            if banned is not None:
                break
    return running, banned


def read_interrupts(host: Host) -> bytes | None:
    """/proc/interrupts as bytes, None if absent: text mode's universal-newline pass, a whole-file
    decode and read_optional's NUL stripping would each cost more than the read itself on 13 MB."""
    try:
        return host.read_bytes(INTERRUPTS)
    except NumatuneError:
        return None


def _read_raw(host: Host, logical: str) -> str | None:
    """NULs kept (read_optional drops them, and environ is NUL-separated)."""
    try:
        return host.read_text(logical)
    except NumatuneError:
        return None


def _banned_from_environ(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    for key, value in keyed(text, "\x00", IRQBALANCE_KEYS, last=False).items():
        return _banned_value(key, value)  # the first of the keys in the environment
    return None


def _banned_from_config(text: str | None, where: str) -> tuple[int, ...] | None:
    if not text:
        return None
    for line in lines(text, where):
        line = line.strip()
        if line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key in IRQBALANCE_KEYS:
            return _banned_value(key, value.strip().strip("\"'"))
    return None


def _banned_value(key: str, value: str) -> tuple[int, ...] | None:
    parse = parse_cpulist if key.endswith("CPULIST") else parse_cpumask
    return _cpus(value, parse)


def read_isolated(host: Host) -> frozenset[int]:
    return host.read_cpulist(ISOLATED) or frozenset()
