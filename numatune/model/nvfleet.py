"""A fleet's NVLink domains as the layers above exchange them: analysis.nvdomains builds them from the nodes'
reports, plan.cluster writes them out, render shows them (model.nvfabric holds one node's side: kept apart so
that `check` and `inspect` import neither `re` nor `dataclasses`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DIGITS = re.compile(r"([0-9]+)")


def natural(name: str) -> tuple:
    """Sort key that orders node2 before node10 (numbers compared as numbers; text as text)."""
    return tuple((1, len(p.lstrip("0")), p.lstrip("0"), len(p)) if "0" <= p[0] <= "9" else (0, 0, p, 0)
                 for p in _DIGITS.split(name) if p)


@dataclass(frozen=True, slots=True)
class NodeFabric:
    """What the fleet keeps of one node's report: its NVLink domain and whether it may go into a block."""

    name: str
    domain: str | None  # "<cluster UUID>.<clique>" when every GPU with a domain names the same one
    gpus: int = 0  # NVIDIA GPUs with fabric information
    problems: tuple[str, ...] = ()  # why the node stays out of every block ("GPU2 fabric in-progress", ...)
    domains: tuple[str, ...] = ()  # every domain its GPUs name (two or more: the GPUs disagree)
    sentinel: bool = False  # a GPU reports the sentinel clique 32766


@dataclass(frozen=True, slots=True)
class Domain:
    """One NVLink domain (cluster UUID, clique) and the nodes whose GPUs name it."""

    key: str  # "<cluster UUID>.<clique>"
    healthy: tuple[str, ...]  # nodes that may go into its block, in name order
    excluded: tuple[tuple[str, str], ...] = ()  # (node, why) of its nodes that may not

    @property
    def size(self) -> int:
        return len(self.healthy) + len(self.excluded)

    @property
    def clique(self) -> str:
        return self.key.rsplit(".", 1)[1]


@dataclass(frozen=True)
class FleetFabric:
    """The fleet's NVLink domains; `typical` is the most common domain size (an NVL72 rack: 18 nodes)."""

    domains: tuple[Domain, ...]
    split: tuple[tuple[str, tuple[str, ...]], ...] = ()  # nodes whose GPUs name different domains
    unplaced: tuple[tuple[str, str], ...] = ()  # (node, why) with NVIDIA fabric but no domain (still registering)
    no_domain: tuple[str, ...] = ()  # nodes without NVLink domains beyond the node (no multi-node NVLink)
    nodes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def typical(self) -> int:
        sizes: dict[int, int] = {}
        for d in self.domains:
            sizes[d.size] = sizes.get(d.size, 0) + 1
        return max(sizes, key=lambda s: (sizes[s], s)) if sizes else 0

    def partial(self) -> tuple[Domain, ...]:
        """Domains with fewer nodes than the typical one (partial racks)."""
        return tuple(d for d in self.domains if d.size < self.typical)

    def degraded(self) -> tuple[Domain, ...]:
        """Domains with a node that may not go into their block."""
        return tuple(d for d in self.domains if d.excluded)
