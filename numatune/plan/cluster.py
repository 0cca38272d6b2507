"""Cluster configuration from a fleet's NVLink domains: Slurm topology/block (topology.conf, topology.yaml),
a Kueue Topology with its ResourceFlavor, node labels; and the reading of a topology file for the drift check.

One block per NVLink domain (cluster UUID, clique), holding the domain's nodes whose fabric is completed and
healthy; every other node is named in a comment, never put in a block. Slurm's rules (as topology/block's
block_record.c reads them; issue 48 saw the same with Slurm 24.11): the first BlockSizes value is the base
block size, every block must hold at least that many nodes ("children count lower than bblock_node_cnt" is
fatal), and every BlockSizes value must be the base times a power of two (at most 2^15). So the base is the
smallest block written (or the --block-size asked for), a domain with fewer healthy nodes than the base is
left out and named, a domain of one healthy node never makes a block (it would make the base 1), and
BlockSizes are the base times 1, 2, 4 ... up to the number of blocks. Host lists are compressed as Slurm writes them
(node[01-18]). Pure: the caller reads and writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from numatune.errors import InputError
from numatune.model.nvfleet import FleetFabric, natural
from numatune.numbers import parse_int
from numatune.plan.nfd import PREFIX, valid_label

MAX_LEVEL = 15  # topology/block: BlockSizes at most base x 2^15
MAX_EXPANDED = 1_000_000  # names one host list may expand to (a hostile "n[0-999999999]" is refused)
TOPOLOGY_NAME = "nvlink"
BLOCK_LABEL = PREFIX + "nvlink-block"
DOMAIN_LABEL = PREFIX + "nvlink-domain"
HEALTHY_LABEL = PREFIX + "nvlink-healthy"
CLIQUE_LABEL = "nvidia.com/gpu.clique"  # the GPU operator's label: <cluster UUID>.<clique>
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # Topology and ResourceFlavor: v1beta2 is the storage version (apis/kueue/v1beta2)


@dataclass(frozen=True)
class Block:
    name: str
    domain: str  # "<cluster UUID>.<clique>"
    nodes: tuple[str, ...]
    trimmed: int = 0  # nodes of the domain left out of it (unhealthy, not completed)


@dataclass(frozen=True)
class BlockPlan:
    blocks: tuple[Block, ...]
    base: int  # the base block size (first BlockSizes value); 0 without blocks
    sizes: tuple[int, ...]
    left_out: tuple[tuple[str, str], ...]  # (node or domain, why)
    notes: tuple[str, ...] = ()
    nodes: int = 0  # reports read


# -- host lists ------------------------------------------------------------------------------------------------
_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str] | tuple[str, ...]) -> str:
    """Slurm's ranged host list: names sharing a prefix and a number of the same zero-padded width become
    prefix[01-03,07] (a number of that many digits without a leading zero joins them: a[09-10]); other numbers
    range unpadded (n[9-10]). Order: as given, grouped by the first appearance of each (prefix, width)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    parts = [_TAIL.match(name) for name in names]
    padded = {(m.group(1), len(m.group(2))) for m in parts
              if m is not None and len(m.group(2)) > 1 and m.group(2).startswith("0")}
    for name, m in zip(names, parts, strict=True):
        if m is None or len(m.group(2)) > 18:
            order.append(name)
            continue
        prefix, digits = m.groups()
        # a zero-padded width holds the numbers of that many digits too (a[09-10]); other numbers range unpadded
        width = len(digits) if (prefix, len(digits)) in padded else 0
        key = (prefix, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(parse_int(digits, "host name"))
    out = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width = key
        numbers = sorted(set(groups[key]))
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)


def expand(hostlist: str, where: str) -> list[str]:
    """A Slurm host list ("gb[01-03,05],x1", "r[1-2]n[01-02]") as names; InputError for a malformed one or one
    of more than MAX_EXPANDED names."""
    out: list[str] = []
    for part in _split_top(hostlist.strip(), where):
        if part:
            out.extend(_expand_one(part, where, MAX_EXPANDED - len(out)))
    return out


def _split_top(text: str, where: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise InputError(f"{where}: host list {text[:80]!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"{where}: host list {text[:80]!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise InputError(f"{where}: host list {text[:80]!r}: '[' not closed")
    parts.append(text[start:])
    return parts


def _expand_one(part: str, where: str, room: int) -> list[str]:
    open_at = part.find("[")
    if open_at < 0:
        return [part]
    close = part.index("]", open_at)
    head, body, rest = part[:open_at], part[open_at + 1:close], part[close + 1:]
    tails = _expand_one(rest, where, room) if rest else [""]
    out = []
    for item in body.split(","):
        lo_text, dash, hi_text = item.partition("-")
        lo = parse_int(lo_text, where)
        hi = parse_int(hi_text, where) if dash else lo
        if hi < lo:
            raise InputError(f"{where}: host list range {item!r} runs backwards")
        if (hi - lo + 1) * len(tails) + len(out) > room:
            raise InputError(f"{where}: a host list of more than {MAX_EXPANDED:,} names")
        width = len(lo_text) if lo_text.startswith("0") and len(lo_text) > 1 else 0
        out += [f"{head}{n:0{width}d}{t}" for n in range(lo, hi + 1) for t in tails]
    return out


# -- blocks ------------------------------------------------------------------------------------------------------
def plan_blocks(fabric: FleetFabric, base: int | None = None) -> BlockPlan:
    """One block per domain with enough healthy nodes; every node and domain left out, with why."""
    left: list[tuple[str, str]] = []
    for name, domains in fabric.split:
        left.append((name, f"its GPUs name {len(domains)} NVLink domains ({', '.join(domains)})"))
    for name, why in fabric.unplaced:
        left.append((name, why))
    for d in fabric.domains:
        for name, why in d.excluded:
            left.append((name, f"domain {d.key}: {why}"))
    candidates = [d for d in fabric.domains if len(d.healthy) >= max(2, base or 2)]
    chosen_keys = {d.key for d in candidates}
    for d in fabric.domains:
        if d.key in chosen_keys:
            continue
        if len(d.healthy) == 1 and not base:
            why = "one healthy node: no NVLink block beyond the node (a block of 1 would make the base block size 1)"
        elif d.healthy:
            why = (f"{len(d.healthy)} healthy node(s), fewer than the base block size {base}: slurmctld refuses a "
                   "smaller block")
        else:
            why = "no healthy node"
        left.append((f"domain {d.key} ({compress(d.healthy)})" if d.healthy else f"domain {d.key}", why))
    chosen = base or (min(len(d.healthy) for d in candidates) if candidates else 0)
    width = max(2, len(str(len(candidates))))
    blocks = tuple(Block(f"block{i:0{width}d}", d.key, d.healthy, len(d.excluded))
                   for i, d in enumerate(candidates, 1))
    sizes = []
    level = 0
    while blocks and level <= MAX_LEVEL and (1 << level) <= max(len(blocks), 1):
        sizes.append(chosen << level)
        level += 1
    notes = list(fabric.notes)
    if not blocks and fabric.domains:
        notes.append("no NVLink domain has enough healthy nodes for a block")
    left.sort(key=lambda x: natural(x[0].removeprefix("domain ")))
    return BlockPlan(blocks, chosen if blocks else 0, tuple(sizes), tuple(left), tuple(notes), fabric.nodes)


def _header(plan: BlockPlan, what: str) -> list[str]:
    lines = [f"# {what} for Slurm topology/block, written by `numatune fleet --emit` from {plan.nodes} node "
             "report(s): one block per NVLink domain (cluster UUID.clique).",
             "# slurm.conf: TopologyPlugin=topology/block. Nodes whose NVLink fabric is not completed or not "
             "healthy are in no block (named below)."]
    if plan.blocks:
        lines.append(f"# Base block size {plan.base}: the smallest block; every block holds at least that many "
                     "nodes, as slurmctld requires.")
    for note in plan.notes:
        lines.append(f"# note: {note}")
    return lines


def _left_out(plan: BlockPlan) -> list[str]:
    return [f"# left out: {what}: {why}" for what, why in plan.left_out]


def topology_conf(plan: BlockPlan) -> str:
    """topology.conf: a comment per block naming its domain, BlockName lines, one BlockSizes line."""
    lines = _header(plan, "topology.conf")
    for b in plan.blocks:
        trimmed = f", {b.trimmed} node(s) of the domain left out (below)" if b.trimmed else ""
        lines.append(f"# {b.name}: domain {b.domain}, {len(b.nodes)} node(s){trimmed}")
        lines.append(f"BlockName={b.name} Nodes={compress(b.nodes)}")
    if plan.blocks:
        lines.append("BlockSizes=" + ",".join(str(s) for s in plan.sizes))
    else:
        lines.append("# no blocks: nothing for topology/block to schedule by")
    lines += _left_out(plan)
    return "\n".join(lines) + "\n"


def topology_yaml(plan: BlockPlan) -> str:
    """topology.yaml (Slurm 25.05+): a list of topologies; this one the cluster default. Without blocks, a flat
    topology (the yaml's `flat: true`)."""
    lines = _header(plan, "topology.yaml")
    lines += [f"- topology: {TOPOLOGY_NAME}", "  cluster_default: true"]
    if plan.blocks:
        lines += ["  block:", "    block_sizes:"] + [f"      - {s}" for s in plan.sizes] + ["    blocks:"]
        for b in plan.blocks:
            lines += [f"      - block: {b.name}  # domain {b.domain}", f"        nodes: {_yaml_str(compress(b.nodes))}"]
    else:
        lines.append("  flat: true")
    lines += _left_out(plan)
    return "\n".join(lines) + "\n"


def _yaml_str(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+", text) and not text.startswith(("[", "-")) else \
        '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_labels(plan: BlockPlan, fabric: FleetFabric) -> dict[str, dict[str, str]]:
    """node -> labels: the GPU operator's clique label, numatune's domain, block and whether the node is healthy
    (the Kueue ResourceFlavor selects healthy=true)."""
    block_of = {n: b.name for b in plan.blocks for n in b.nodes}
    out: dict[str, dict[str, str]] = {}
    for d in fabric.domains:
        for name in [*d.healthy, *(x[0] for x in d.excluded)]:
            labels = {CLIQUE_LABEL: d.key, DOMAIN_LABEL: d.key}
            if name in block_of:
                labels[BLOCK_LABEL] = block_of[name]
            labels[HEALTHY_LABEL] = "true" if name in block_of else "false"
            out[name] = labels
    for name, _ in fabric.split:
        out[name] = {HEALTHY_LABEL: "false"}
    for name, _ in fabric.unplaced:
        out[name] = {HEALTHY_LABEL: "false"}
    return out


def labels_text(plan: BlockPlan, fabric: FleetFabric) -> str:
    """One line a node, `NODE key=value ...`, as `kubectl label node NODE key=value ...` takes them (every value
    a valid label value; a node whose value would not be is left out and named in a comment)."""
    lines = [f"# node labels written by `numatune fleet --emit labels` from {plan.nodes} node report(s): "
             "kubectl label --overwrite node NODE KEY=VALUE ...",
             f"# {CLIQUE_LABEL} as the GPU operator writes it; {HEALTHY_LABEL}=true selects the nodes in a block"]
    labels = node_labels(plan, fabric)
    for name in sorted(labels, key=natural):
        pairs = labels[name]
        bad = [k for k, v in pairs.items() if not valid_label(k, v)]
        if bad:
            lines.append(f"# {name}: not a valid label value for {', '.join(bad)}: left out")
            continue
        lines.append(name + " " + " ".join(f"{k}={v}" for k, v in pairs.items()))
    if fabric.no_domain:
        lines.append(f"# {len(fabric.no_domain)} node(s) without an NVLink domain beyond the node: no labels")
    return "\n".join(lines) + "\n"


def kueue_yaml(plan: BlockPlan) -> str:
    """A Kueue Topology (levels: the NVLink block, then the host) and the ResourceFlavor that uses it (its
    topologyName, and nodeLabels selecting the healthy nodes that --emit labels marks)."""
    return "\n".join([
        f"# Kueue topology-aware scheduling, written by `numatune fleet --emit kueue` from {plan.nodes} node "
        f"report(s): {len(plan.blocks)} NVLink block(s).",
        "# Label the nodes first: numatune fleet ... --emit labels (a pod set with",
        f"# kueue.x-k8s.io/podset-required-topology: {BLOCK_LABEL} stays in one NVLink domain).",
        f"apiVersion: {KUEUE_API}",
        "kind: Topology",
        "metadata:",
        f"  name: {TOPOLOGY_NAME}",
        "spec:",
        "  levels:",
        f"    - nodeLabel: {BLOCK_LABEL}",
        "    - nodeLabel: kubernetes.io/hostname",
        "---",
        f"apiVersion: {KUEUE_API}",
        "kind: ResourceFlavor",
        "metadata:",
        f"  name: {TOPOLOGY_NAME}",
        "spec:",
        "  nodeLabels:",
        f'    {HEALTHY_LABEL}: "true"',
        f"  topologyName: {TOPOLOGY_NAME}",
    ]) + "\n"


# -- reading a topology file (the drift check) ----------------------------------------------------------------
@dataclass(frozen=True)
class TopologyFile:
    blocks: tuple[tuple[str, tuple[str, ...]], ...]  # (block name, nodes)
    sizes: tuple[int, ...]  # BlockSizes (empty: not given)


def read_topology_conf(text: str, where: str) -> TopologyFile:
    """topology.conf's BlockName/Nodes lines and BlockSizes; a tree topology (SwitchName) or another line is
    InputError naming it. Keys are case-insensitive, as Slurm's parser reads them."""
    blocks, sizes = [], ()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {}
        for token in line.split():
            key, eq, value = token.partition("=")
            if not eq:
                raise InputError(f"{where}:{number}: {token[:60]!r} is not KEY=VALUE")
            fields[key.lower()] = value
        if "blockname" in fields:
            if "nodes" not in fields:
                raise InputError(f"{where}:{number}: block {fields['blockname']} has no Nodes=")
            blocks.append((fields["blockname"], tuple(expand(fields["nodes"], f"{where}:{number}"))))
        elif "blocksizes" in fields:
            sizes = tuple(parse_int(s, where, line=number) for s in fields["blocksizes"].split(",") if s)
        elif "switchname" in fields:
            raise InputError(f"{where}:{number}: a tree topology (SwitchName): --check-topology reads "
                             "topology/block files")
        else:
            raise InputError(f"{where}:{number}: neither BlockName nor BlockSizes: {line[:60]!r}")
    return TopologyFile(tuple(blocks), sizes)


def read_topology_yaml(doc: object, where: str) -> TopologyFile:
    """topology.yaml (a list of topologies): the cluster default's block topology, else the only one with
    blocks."""
    from numatune.model.document import Doc

    root = Doc(doc, where)
    topologies = root.records()
    chosen = [t for t in topologies if t.bool("cluster_default", default=False) and t.at("block").present] or \
        [t for t in topologies if t.at("block").present]
    if not chosen:
        raise InputError(f"{where}: no block topology (a topology with `block:`) in the file")
    block = chosen[0].mapping("block")
    blocks = []
    for b in block.records("blocks", most=1_000_000):
        name = b.text("block")
        nodes = b.at("nodes")
        listed = nodes.strs() if isinstance(nodes.value, list) else [nodes.str(required=True)]
        names = [n for item in listed for n in expand(item, f"{where}: block {name}")]
        blocks.append((name, tuple(names)))
    sizes = tuple(block.ints("block_sizes", lo=1, hi=1 << 30))
    return TopologyFile(tuple(blocks), sizes)
