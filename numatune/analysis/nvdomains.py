"""A fleet's NVLink domains from its nodes' inspect reports, and the drift of a Slurm topology file from them.

Each report is reduced, as it streams in, to a `model.nvfleet.NodeFabric`: the domain its GPUs name
(`gpu_fabric.nvml_gpus[].domain`, or the cluster UUID and clique of a report written before numatune kept the
domain) and what keeps it out of a block: a GPU whose fabric registration is not completed, an NVML error, a
health mask or summary that is not good, GPUs that name different domains. Domains are keyed by (cluster UUID,
clique), never the clique alone. `DomainTally.result` groups the nodes; `drift` compares a topology.conf or
topology.yaml (parsed by plan.cluster) with what the reports say.
"""

from __future__ import annotations

from typing import Any

from numatune.model.nvfabric import ZERO_UUID, domain_label, health_problems
from numatune.model.nvfleet import Domain, FleetFabric, NodeFabric, natural


def _int(value: Any) -> int | None:
    return value if type(value) is int else None  # noqa: E721 - bool is no clique


def node_fabric(name: str, gpu_fabric: Any) -> NodeFabric:
    """One node from its report's `gpu_fabric` object (anything else: no domain). Every field is type-checked:
    a value of another type counts as unknown, never as a Python error."""
    gpus = gpu_fabric.get("nvml_gpus") if isinstance(gpu_fabric, dict) else None
    if not isinstance(gpus, list):
        return NodeFabric(name, None)
    domains: list[str] = []
    problems: list[str] = []
    counted = 0
    sentinel = False
    for i, g in enumerate(gpus):
        if not isinstance(g, dict):
            continue
        label = f"GPU{_int(g.get('index')) if _int(g.get('index')) is not None else i}"
        state = g.get("fabric_state")
        if state in (None, "not-supported"):
            continue  # no NVSwitch fabric (PCIe, NVLink bridges, a VM): no domain beyond the node
        uuid = g.get("cluster_uuid")
        if state == "completed" and uuid == ZERO_UUID:
            continue  # registered on a node-local NVSwitch (HGX H100): no NVLink domain beyond the node
        counted += 1
        domain = g.get("domain") if isinstance(g.get("domain"), str) else None
        if domain is None and "domain" not in g:  # a report from before numatune kept the domain
            domain = domain_label(uuid.lower() if isinstance(uuid, str) else None, _int(g.get("clique_id")))
        if domain is not None and len(domain) <= 80:
            domains.append(domain)
            sentinel = sentinel or domain.endswith(".32766")
        status = g.get("fabric_status")
        if state != "completed":
            problems.append(f"{label} fabric registration {state}")
        elif status not in (None, "success"):
            problems.append(f"{label} fabric {status}")
        elif domain is None and "domain" not in g and "cluster_uuid" not in g:
            problems.append(f"{label}: the report names no NVLink domain (written before numatune kept them)")
        elif domain is None:
            problems.append(f"{label} names no NVLink domain")
        health = g.get("health")
        if isinstance(health, list) and "health" in g:
            said = [h for h in health if isinstance(h, str)]
        else:  # an older report: decode the mask, if it kept one
            mask = _int(g.get("health_mask"))
            said = health_problems(mask, g.get("health_summary") if isinstance(g.get("health_summary"), str) else None)
        problems += [f"{label} {h}" for h in said[:4]]
    distinct = tuple(sorted(set(domains)))
    if len(distinct) > 1:
        problems.append("its GPUs name " + str(len(distinct)) + " NVLink domains")
    one = distinct[0] if len(distinct) == 1 else None
    return NodeFabric(name, one, counted, tuple(problems), distinct, sentinel)


class DomainTally:
    """Nodes folded in one at a time. A node with NVIDIA fabric keeps one `NodeFabric` (its domain string shared);
    a node without keeps nothing but its place (and its name when the tally names the nodes itself): fleet's
    budget is a name and a few bytes a node."""

    __slots__ = ("_fabric", "_names", "_count", "_strings")

    def __init__(self, keep_names: bool = True) -> None:
        self._fabric: dict[int, NodeFabric] = {}  # node index -> its fabric, for nodes with NVIDIA fabric
        self._names: list[str] | None = [] if keep_names else None
        self._count = 0
        self._strings: dict[str, str] = {}

    def __len__(self) -> int:
        return self._count

    def add(self, name: str, gpu_fabric: Any) -> NodeFabric:
        node = node_fabric(name, gpu_fabric)
        if node.domain is not None:  # one string per domain, not one per node
            node = NodeFabric(node.name, self._strings.setdefault(node.domain, node.domain), node.gpus,
                              node.problems, tuple(self._strings.setdefault(d, d) for d in node.domains),
                              node.sentinel)
        if node.gpus:
            self._fabric[self._count] = node
        if self._names is not None:
            self._names.append(name)
        self._count += 1
        return node

    def result(self, names: list[str] | None = None) -> FleetFabric:
        """Domains in the order of their first node; NAMES (the fleet's, made unique) name the nodes, else the
        names the tally kept."""
        names = names if names is not None else self._names or []
        fabric = self._fabric
        # nodes without NVIDIA fabric: their names only, in input order (no object a node: fleet's budget)
        none = [name for index, name in enumerate(names) if index not in fabric]
        nodes = [NodeFabric(names[i], x.domain, x.gpus, x.problems, x.domains, x.sentinel) for i, x in fabric.items()]
        healthy: dict[str, list[str]] = {}
        excluded: dict[str, list[tuple[str, str]]] = {}
        split, unplaced = [], []
        for n in nodes:
            if len(n.domains) > 1:
                split.append((n.name, n.domains))
            elif n.domain is None:
                unplaced.append((n.name, "; ".join(n.problems) or "no NVLink domain"))
            elif n.problems:
                excluded.setdefault(n.domain, []).append((n.name, "; ".join(n.problems)))
                healthy.setdefault(n.domain, [])
            else:
                healthy.setdefault(n.domain, []).append(n.name)
        domains = []
        for key in healthy:
            ok = sorted(healthy[key], key=natural)
            bad = sorted(excluded.get(key, []), key=lambda x: natural(x[0]))
            domains.append(Domain(key, tuple(ok), tuple(bad)))
        domains.sort(key=lambda d: natural(min([*d.healthy, *(x[0] for x in d.excluded)], key=natural)))
        notes = []
        if any(n.sentinel for n in nodes):
            cliques = {d.key for d in domains if d.clique == "32766"}
            notes.append(f"{len(cliques)} domain(s) report the sentinel clique 32766: told apart by their cluster UUID")
        if none and not domains:
            notes.append("no NVLink domain beyond the node in this fleet (no GPU on a multi-node NVLink fabric): "
                         "no blocks; schedule by the network's switches (topology/tree) instead")
        return FleetFabric(tuple(domains), tuple(sorted(split, key=lambda x: natural(x[0]))),
                           tuple(sorted(unplaced, key=lambda x: natural(x[0]))), tuple(none),
                           len(nodes), tuple(notes))


def drift(fabric: FleetFabric, listed) -> tuple[list[str], list[str]]:  # noqa: ANN001 - plan.cluster.TopologyFile
    """(mismatches, notes) between a topology file's blocks and the reports: a node in another block than its
    domain's, an unhealthy node or one without a domain still in a block, a healthy node of a blockable domain
    in no block, a node in two blocks, a block smaller than the base block size, BlockSizes Slurm refuses.
    Nodes the file names but no report does are notes (a node that did not answer is no mismatch)."""
    out: list[str] = []
    notes: list[str] = []
    block_of: dict[str, str] = {}
    for name, nodes in listed.blocks:
        for n in nodes:
            if n in block_of and block_of[n] != name:
                out.append(f"{n} is in two blocks: {block_of[n]} and {name}")
            block_of.setdefault(n, name)
    base = listed.sizes[0] if listed.sizes else (len(listed.blocks[0][1]) if listed.blocks else 0)
    for size in listed.sizes:
        ratio = size // base if base else 0
        if not base or size % base or ratio & (ratio - 1) or ratio > 1 << 15:
            out.append(f"BlockSizes {','.join(map(str, listed.sizes))}: {size} is not the base {base} times a power "
                       "of two: slurmctld refuses it")
            break
    for name, nodes in listed.blocks:
        if base and len(nodes) < base:
            out.append(f"block {name} has {len(nodes)} node(s), fewer than the base block size {base}: slurmctld "
                       "refuses it (children count lower than bblock_node_cnt)")
    reported: set[str] = set()
    for d in fabric.domains:
        reported.update(d.healthy)
        counts: dict[str, int] = {}
        for n in d.healthy:
            if n in block_of:
                counts[block_of[n]] = counts.get(block_of[n], 0) + 1
        home = max(counts, key=lambda b: (counts[b], b)) if counts else None
        blockable = len(d.healthy) >= max(2, base)
        for n in d.healthy:
            mine = block_of.get(n)
            if mine is None:
                if blockable:
                    out.append(f"{n} (domain {d.key}) is in no block" + (f"; its domain is in block {home}"
                                                                        if home else ""))
            elif mine != home:
                out.append(f"{n} is in block {mine} but its NVLink domain {d.key} is in block {home}: moved or "
                           "re-cabled?")
        for n, why in d.excluded:
            reported.add(n)
            if n in block_of:
                out.append(f"{n} is in block {block_of[n]} but its NVLink fabric is not healthy: {why}")
    for n, domains in fabric.split:
        reported.add(n)
        if n in block_of:
            out.append(f"{n} is in block {block_of[n]} but its GPUs name {len(domains)} NVLink domains")
    for n, why in fabric.unplaced:
        reported.add(n)
        if n in block_of:
            out.append(f"{n} is in block {block_of[n]} but has no NVLink domain: {why}")
    for n in fabric.no_domain:
        reported.add(n)
        if n in block_of:
            out.append(f"{n} is in block {block_of[n]} but has no NVLink domain beyond the node")
    unknown = sorted((n for n in block_of if n not in reported), key=natural)
    if unknown:
        notes.append(f"{len(unknown)} node(s) in the file without a report (not checked): "
                     + ", ".join(unknown[:20]) + (" ..." if len(unknown) > 20 else ""))
    return out, notes
