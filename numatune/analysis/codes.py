"""Every finding code numatune reports, from the one registry the rule modules declare them in."""

from __future__ import annotations

import importlib

from numatune.model.findings import REGISTRY, Code

# The modules whose rules report findings; importing one registers its codes.
RULE_MODULES = (
    "numatune.analysis.topology_findings",  # inspect (NT0xx)
    "numatune.analysis.irq",  # irq (NT2xx)
    "numatune.analysis.policy",  # check --policy (NT3xx)
    "numatune.analysis.locality",  # audit, check --pid (NT4xx)
    "numatune.analysis.probe",  # probe (NT501-NT510)
    "numatune.analysis.scheduler",  # check --slurm-conf/--gres-conf/--kubelet-config (NT520-NT535)
)

GROUPS = {
    "topology": "numatune inspect (and check)",
    "irq": "numatune irq (and check, when the root has /proc/interrupts)",
    "policy": "numatune check --policy",
    "audit": "numatune check --pid (audit's verdict)",
    "probe": "numatune probe (measured, live only)",
    "scheduler": "numatune check --slurm-conf, --gres-conf, --kubelet-config (what numatune emit writes)",
}


def all_codes() -> list[Code]:
    """Every registered code, in code order."""
    for name in RULE_MODULES:
        importlib.import_module(name)
    return sorted(REGISTRY.values(), key=lambda c: c.code)
