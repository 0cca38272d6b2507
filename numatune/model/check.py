"""What `numatune check` ran: one result per rule or policy expectation, so CI sees passes too (JUnit)."""

from __future__ import annotations

from numatune.model._record import record
from numatune.model.findings import Finding


@record
class CheckResult:
    """One rule or policy expectation: its findings, or why it could not be evaluated here."""

    name: str  # "topology.gpu_without_local_nic", "policy.expect.sockets"
    group: str  # "topology" | "irq" | "audit" | "policy"
    description: str  # one line: what is checked
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None  # why it could not run here (None: it ran)

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.findings


@record
class IrqPlacement:
    """Where one device interrupt may fire: enough for the rank-core rule, from any IRQ reader."""

    irq: int
    bdf: str | None
    name: str
    cpus: frozenset[int]  # effective affinity when the kernel reports it, else smp_affinity
