"""Every finding code numatune reports, from the one registry the rule modules declare them in."""

from __future__ import annotations

import importlib
import os

from numatune.model.findings import REGISTRY, Code

GROUPS = {
    "topology": "numatune inspect (and check)",
    "irq": "numatune irq (and check, when the root has /proc/interrupts)",
    "policy": "numatune check --policy",
    "audit": "numatune check --pid (audit's verdict)",
    "probe": "numatune probe (measured, live only)",
    "scheduler": "numatune check --slurm-conf, --gres-conf, --kubelet-config, --resource-slices (what numatune emit "
                 "writes)",
}


def all_codes() -> list[Code]:
    """Every registered code, in code order. The rules live in numatune.analysis, and importing a module
    registers its codes: so every module of the package is imported (no list of them to keep)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and name != "__init__.py":
            importlib.import_module(f"{__package__}.{name[:-3]}")
    return sorted(REGISTRY.values(), key=lambda c: c.code)


def module_codes(module: object) -> list[Code]:
    """The codes a rule module registers (the Code objects it holds), in code order."""
    return sorted((v for v in vars(module).values() if isinstance(v, Code)), key=lambda c: c.code)


def code_range(module: object) -> str:
    """"NT540-NT547": the first and last code a rule module registers, as help texts and documents name them."""
    codes = module_codes(module)
    return codes[0].code if len(codes) == 1 else f"{codes[0].code}-{codes[-1].code}"
