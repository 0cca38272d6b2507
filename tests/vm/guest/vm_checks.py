"""Registry of the checks run inside the guest, one function each, tagged with topologies.

The registry is read on the host too (to parametrize pytest before any boot), so this module
must import cleanly anywhere: standard library and the sibling guest modules only, no work
at import time. A check returns a small JSON-able dict of details on success and raises
:class:`vm_guest.CheckFailed` (or AssertionError) when the machine or numatune disagrees.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import vm_topology
from vm_guest import CheckFailed, numatune_json, read

#: Modules holding the checks, in run order (snapshot early so fixtures exist even if later
#: checks break the machine).
CHECK_MODULES = ("checks_inspect", "checks_cxl", "checks_runtime", "checks_late", "checks_placement", "checks_probe",
                 "checks_slurm", "checks_jobs", "checks_prometheus", "checks_superchip")

ALL = ("two-socket", "cxl")


@dataclass
class Context:
    """State shared by the checks of one boot (set-up results, cached command output)."""

    topo: vm_topology.Topology
    out: Path
    nics: list[str] = field(default_factory=list)
    cxl_chain: dict[str, Any] | None = None
    cxl_error: str | None = None
    cxl_lists: dict[str, Any] | None = None  # `cxl list` answers saved by checks_cxl
    _inspect: dict[str, Any] | None = None
    deferred: dict[str, Any] = field(default_factory=dict)  # results a check records for later ones (checks_jobs)

    def inspect(self) -> dict[str, Any]:
        if self._inspect is None:
            self._inspect = numatune_json("inspect", "--json")
        return self._inspect

    def cxl_node(self) -> int:
        if not self.cxl_chain or self.cxl_chain.get("node", -1) < 0:
            raise CheckFailed(f"the CXL memory never became a NUMA node in the guest set-up: {self.cxl_error}")
        return int(self.cxl_chain["node"])

    def node1_nic(self) -> str:
        nics = [n for n in self.nics if read(f"/sys/class/net/{n}/device/numa_node", "-1") == "1"]
        if not nics:
            raise CheckFailed(f"no NIC with numa_node 1 in the guest (NICs: {self.nics})")
        return nics[0]


@dataclass(frozen=True)
class Check:
    name: str
    topologies: tuple[str, ...]
    func: Callable[[Context], dict[str, Any]]
    doc: str
    engines: bool = False  # drives a real engine (Slurm, Prometheus): under CI=true it must have run


REGISTRY: list[Check] = []


def check(*topologies: str, engines: bool = False
          ) -> Callable[[Callable[[Context], dict[str, Any]]], Callable[[Context], dict[str, Any]]]:
    def register(func: Callable[[Context], dict[str, Any]]) -> Callable[[Context], dict[str, Any]]:
        doc = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else ""
        REGISTRY.append(Check(func.__name__, topologies or ALL, func, doc, engines))
        return func

    return register


def for_topology(name: str) -> list[Check]:
    """Checks for one topology, in run order (imports the check modules on first use)."""
    for module in CHECK_MODULES:
        importlib.import_module(module)
    return [c for c in REGISTRY if name in c.topologies]


