"""Interrupts of the devices that matter (NICs, GPUs, NVMe, CXL): where they may fire and where they do.

Kept apart from the topology model because only `irq` (and `check`) need it. `None` means unknown:
a saved tree without /proc/irq has no affinity, one without /proc/interrupts has no counts.
`@record`s (numatune.model._record) rather than frozen dataclasses: immutable all the same (`_replace`
to derive), and much cheaper to define at import, which matters on `irq --json`'s start-up path.
"""

from __future__ import annotations

from numatune.model._record import record
from numatune.model.findings import Skipped


@record
class InterruptRow:
    """One numeric row of /proc/interrupts. Counts are parsed only for rows the report needs."""

    irq: int
    actions: tuple[str, ...]  # "mlx5_comp3@pci:0000:81:00.0", "i40e-eth0-TxRx-5", "nvme0q1"
    chip: str | None = None  # "IR-PCI-MSI", "PCI-MSIX-0000:00:01.0", "GICv3"
    hwirq: str | None = None
    trigger: str | None = None  # "edge", "fasteoi", "Level"
    total: int | None = None  # None when the counts were not parsed
    per_cpu: tuple[tuple[int, int], ...] = ()  # (cpu, count), non-zero counts only


@record
class InterruptsTable:
    """/proc/interrupts as read in one pass: the header's CPU ids and the rows that were kept."""

    cpus: tuple[int, ...]  # CPU ids named in the header (online CPUs only)
    rows: dict[int, InterruptRow] = {}  # noqa: RUF012 - never mutated after parsing
    numeric_rows: int = 0  # every numeric row seen, kept or not
    irregular_rows: int = 0  # rows parsed by the slow path (not the kernel's fixed-width layout)


@record
class Irq:
    """One interrupt of a device, joined from /proc/interrupts and /proc/irq/N."""

    irq: int
    actions: tuple[str, ...] = ()
    role: str = "queue"  # queue (data path, spread one per core) | control (async, admin, misc)
    queue: int | None = None  # queue number from the action name, when it has one
    found_by: tuple[str, ...] = ()  # "msi_irqs", "name", "irq" (legacy INTx attribute)
    chip: str | None = None
    total: int | None = None  # interrupts counted since boot; None: not in /proc/interrupts
    per_cpu: tuple[tuple[int, int], ...] = ()  # (cpu, count), non-zero only
    smp_affinity: str | None = None  # raw hex mask as the kernel wrote it
    smp_affinity_list: tuple[int, ...] | None = None  # where it may fire
    effective_affinity_list: tuple[int, ...] | None = None  # where the kernel routes it now
    affinity_hint: tuple[int, ...] | None = None  # the driver's hint (empty when none)
    node: int | None = None  # /proc/irq/N/node (-1 -> None)
    managed: bool | None = None  # kernel-managed affinity: cannot be moved; None: unknown
    managed_evidence: str | None = None
    present: bool = True  # False: listed by msi_irqs or a plan but absent from /proc/irq and /proc/interrupts

    @property
    def where(self) -> tuple[int, ...] | None:
        """The CPUs it is routed to: effective affinity when the kernel has it, else the allowed set."""
        if self.effective_affinity_list:
            return self.effective_affinity_list
        return self.smp_affinity_list


@record
class DeviceIrqs:
    """A device of interest and its interrupts."""

    key: str  # BDF when known, else the netdev/NVMe name that identified it
    bdf: str | None
    kind: str  # nic | gpu | nvme | cxl | accelerator
    node: int | None  # the device's node: kernel's, else inferred
    node_inferred: bool = False
    netdevs: tuple[str, ...] = ()
    rdma: tuple[str, ...] = ()
    nvme: tuple[str, ...] = ()
    driver: str | None = None
    in_sysfs: bool = True  # False: known only from action names in /proc/interrupts
    irqs: tuple[Irq, ...] = ()
    gpu: str | None = None  # "GPU0": numatune's number for a GPU (inspect's), None for other devices

    @property
    def label(self) -> str:
        """A GPU as "GPU0 0000:18:00.0" (as inspect numbers it); others by netdev/RDMA/NVMe names, else BDF."""
        if self.gpu and self.bdf:
            return f"{self.gpu} {self.bdf}"
        names = self.netdevs + self.rdma + self.nvme
        return ",".join(names) if names else (self.bdf or self.key)


@record
class IrqReport:
    source: str
    live: bool
    interrupts_cpus: tuple[int, ...]  # CPUs in the /proc/interrupts header
    has_interrupts: bool  # /proc/interrupts was readable
    has_proc_irq: bool  # /proc/irq exists in this root
    devices: tuple[DeviceIrqs, ...]
    isolated_cpus: tuple[int, ...] = ()
    irqbalance_running: bool | None = None  # None: unknown (no /proc/PID in this root)
    irqbalance_banned: tuple[int, ...] | None = None  # IRQBALANCE_BANNED_CPU(LIST) of the running daemon
    skipped: tuple[Skipped, ...] = ()
