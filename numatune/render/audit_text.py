"""Rich rendering of `audit`: a job table (one row per rank or process), then per-process detail."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from numatune.cpulist import format_cpulist
from numatune.model.order import labels as device_labels
from numatune.model.process import MAPPING_KINDS, MAX_LISTED_MAPPINGS, ProcessAudit, fold_mappings
from numatune.model.topology import Topology
from numatune.render.inspect_text import human_bytes
from numatune.render.table import Table

VERDICT_STYLE = {"ok": "green", "warning": "yellow", "misplaced": "bold red", "n/a": "dim"}
MAX_THREAD_ROWS = 24


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _mem_by_node(by_node: dict[int, int]) -> str:
    return ", ".join(f"{n}: {human_bytes(b)}" for n, b in sorted(by_node.items()) if b) or "-"


def _cpu_nodes(a: ProcessAudit, topo: Topology) -> str:
    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    nodes = sorted({node_of[t.cpu] for t in a.process.threads if t.cpu in node_of})
    return format_cpulist(nodes) if nodes else "-"


def _gpu(a: ProcessAudit) -> str:
    g = a.process.gpu
    if g is None:
        if a.role == "worker" and a.process.gpus_open:
            return "- (inherited descriptors, no context)"
        return f"{len(a.process.gpus_open)} open" if a.process.gpus_open else "-"
    node = "?" if g.node is None else str(g.node)
    return f"{g.label + ' ' if g.label else ''}{g.bdf or '?'} (node {node})"


def _verdict(v: str) -> Text:
    return Text(v, style=VERDICT_STYLE.get(v, ""))


def _command(a: ProcessAudit, width: int | None = 40) -> str:
    """The command line, cut to WIDTH on a terminal; whole (width None) in a file or pipe, where ranks
    that differ only in their last arguments must stay apart."""
    cmd = " ".join(a.process.cmdline) or f"[{a.process.comm}]"
    return cmd if width is None or len(cmd) <= width else cmd[: width - 1] + "…"


def _role(a: ProcessAudit) -> str:
    """The role cell: `launcher (torchrun)`, `rank`, `rank (set at run time)`, `└ worker of 578 (dataloader)`,
    `└ helper of 578 (resource_tracker)`."""
    kind = a.place.kind if a.place is not None else None
    if a.role in ("worker", "helper"):
        if a.rank_pid is None:  # its rank exited (an orphan), or was not audited
            return f"{a.role}" + (f" ({kind})" if kind else "") + ", no rank above"
        return f"└ {a.role} of {a.rank_pid}" + (f" ({kind})" if kind else "")
    if a.role == "launcher":
        return f"launcher ({kind})" if kind else "launcher"
    if a.role == "rank" and a.place is not None and a.place.inferred:
        return "rank (set at run time)" if a.place.inferred == "children" else "rank (--local-rank)"
    return a.role


def job_table(
    audits: list[ProcessAudit], topo: Topology, helpers: dict[int, int] | None = None, title: str = "",
    terminal: bool = True,
) -> Table:
    """One row per process; off a terminal (terminal=False) no value is cut."""
    helpers = helpers or {}
    table = Table(title=title or None, title_justify="left")
    show_rank = any(a.process.rank is not None for a in audits)
    show_role = any(a.role != "process" for a in audits)
    if show_rank:
        table.add_column("rank", justify="right")
    if show_role:
        table.add_column("role")
    for col in ("PID", "command", "GPU (node)", "CPU nodes", "memory by node", "remote", "slow tier", "verdict"):
        table.add_column(col, justify="right" if col in ("PID", "remote", "slow tier") else "left")
    for a in audits:
        row = []
        if show_rank:
            row.append("-" if a.process.rank is None else str(a.process.rank))
        if show_role:
            row.append(_role(a))
        extra = 0 if show_role else helpers.get(a.process.pid, 0)  # a job's workers are rows of their own
        pid = str(a.process.pid) + (f" (+{extra})" if extra else "")
        row += [
            pid,
            _command(a, 40 if terminal else None),
            _gpu(a),
            _cpu_nodes(a, topo),
            _mem_by_node(a.process.memory.by_node),
            _pct(a.locality.remote_ratio),
            _pct(a.locality.slow_tier_ratio),
        ]
        verdict = _verdict(a.locality.verdict)
        if a.locality.late_binding is not None:
            verdict.append(" (late binding NT406)", style="yellow")
        table.add_row(*row, verdict)
    return table


def fix_text(a: ProcessAudit) -> Text:
    out = Text()
    loc = a.locality
    out.append(f"PID {a.process.pid} ", style="bold")
    out.append(loc.verdict, style=VERDICT_STYLE.get(loc.verdict, ""))
    out.append("\n")
    for r in loc.reasons:
        out.append(f"  - {r}\n")
    f = loc.fix
    if f.launch or f.numactl:
        out.append("  restart with:\n")
        for line in (f.launch, f.numactl):
            if line:
                out.append(f"    {line}\n", style="cyan")
    if f.migratepages or f.taskset:
        out.append("  fix the running process:\n")
        for line in (f.migratepages, f.taskset):
            if line:
                out.append(f"    {line}\n", style="cyan")
    return out


def process_detail(a: ProcessAudit, topo: Topology, terminal: bool = True) -> Group:
    """One process in full; its threads table holds MAX_THREAD_ROWS rows on a terminal, every thread off it."""
    p, loc, c = a.process, a.locality, a.counters
    head = Text()
    head.append(f"PID {p.pid}", style="bold")
    head.append(f"  {' '.join(p.cmdline) or f'[{p.comm}]'}\n")
    if p.kernel_thread:
        head.append("kernel thread: no user address space, nothing to place\n", style="dim")
        return Group(head)
    head.append(f"threads {len(p.threads)}   Cpus_allowed_list {format_cpulist(p.cpus_allowed) or '-'}   ")
    head.append(f"Mems_allowed_list {format_cpulist(p.mems_allowed) or '-'}\n")
    if p.cgroup is not None:
        cs = format_cpulist(p.cpuset_cpus) if p.cpuset_cpus is not None else "?"
        ms = format_cpulist(p.cpuset_mems) if p.cpuset_mems is not None else "?"
        head.append(f"cgroup {p.cgroup}   cpuset cpus {cs}   mems {ms}\n")
    if p.rank is not None:
        head.append(f"local rank {p.rank} (from {p.rank_source})\n")
    head.append(f"GPU {_gpu(a)}" + (f"  [{p.gpu.source}]" if p.gpu else "") + "\n")
    head.append(f"home node(s) {format_cpulist(loc.home_nodes) or '?'} (from {loc.home_source})   ")
    head.append(f"remote {_pct(loc.remote_ratio)}   slow tier {_pct(loc.slow_tier_ratio)}\n")

    mem = Table(title="resident memory by node (numa_maps)", title_justify="left")
    nodes = sorted(p.memory.by_node)
    mem.add_column("kind")
    labels = device_labels(topo.devices) if any(n.gpu for n in topo.nodes) else {}
    for n in nodes:
        label = f"node {n}" + (" (home)" if n in loc.home_nodes else "")
        node = topo.node(n)
        kind = node.kind if node else "?"
        if node is not None and node.gpu:
            kind += f" {labels.get(node.gpu, node.gpu)}"
        mem.add_column(f"{label}\n{kind}", justify="right")
    mem.add_column("total", justify="right")
    for kind in MAPPING_KINDS:
        row = p.memory.by_kind.get(kind)
        if row:
            mem.add_row(kind, *(human_bytes(row.get(n, 0)) for n in nodes), human_bytes(sum(row.values())))
    if loc.pinned is not None:  # part of shm: the shared anonymous mappings of a CUDA process
        pin = loc.pinned.by_node
        mem.add_row("  of shm: likely pinned", *(human_bytes(pin.get(n, 0)) for n in nodes),
                    human_bytes(sum(pin.values())), style="yellow" if loc.pinned.wrong_bytes else "")
    driver = _driver_by_node(a)
    if driver:  # part of file: the GPU driver's own mappings (nvidiactl, nvidia-uvm), not pinned chunks
        mem.add_row(f"  of file: GPU driver ({', '.join(p.memory.driver)})", *(human_bytes(driver.get(n, 0))
                    for n in nodes), human_bytes(sum(driver.values())))
    mem.add_row("total", *(human_bytes(p.memory.by_node[n]) for n in nodes), human_bytes(p.memory.total), style="bold")

    pol = Table(title=f"memory policies ({p.memory.mappings} mappings)", title_justify="left")
    for col in ("policy", "mappings", "resident"):
        pol.add_column(col, justify="left" if col == "policy" else "right")
    for u in p.memory.policies:
        pol.add_row(u.policy, str(u.mappings), human_bytes(u.bytes))

    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    thr = Table(title="threads", title_justify="left")
    for col in ("TID", "comm", "last CPU", "node", "allowed CPUs"):
        thr.add_column(col)
    off = set(loc.threads_off_home)
    rows = MAX_THREAD_ROWS if terminal else len(p.threads)
    for t in p.threads[:rows]:
        node = node_of.get(t.cpu) if t.cpu is not None else None
        thr.add_row(
            str(t.tid), t.comm, "-" if t.cpu is None else str(t.cpu),
            Text("-" if node is None else str(node), style="yellow" if t.tid in off else ""),
            format_cpulist(t.allowed_cpus),
        )
    if len(p.threads) > rows:
        thr.add_row("", f"{len(p.threads) - rows} more threads (all in a file, a pipe or --json)", "", "", "")

    acc = Text()
    acc.append(f"access counters: {c.source}")
    if c.remote_ratio is not None:
        acc.append(f", remote {_pct(c.remote_ratio)}")
    if c.events:
        acc.append(f" ({', '.join(c.events)}")
        acc.append(f", {c.window_s:g}s)" if c.window_s else ")")
    acc.append("\n")
    for note in c.notes:
        acc.append(f"  note: {note}\n", style="dim")
    for note in p.notes:
        acc.append(f"  note: {note}\n", style="dim")
    return Group(head, mem, *filter(None, [gpu_memory_text(a)]), pol, thr, acc, fix_text(a))


def _driver_by_node(a: ProcessAudit) -> dict[int, int]:
    out: dict[int, int] = {}
    for by in a.process.memory.driver.values():
        for n, b in by.items():
            out[n] = out.get(n, 0) + b
    return {n: b for n, b in sorted(out.items()) if b}


MAX_CHUNK_LINES = 8


def gpu_memory_text(a: ProcessAudit) -> Text | None:
    """A GPU process's host memory, named: its likely pinned chunks (each, largest first, with its node, and how
    numatune infers them), their price from a saved probe, what cannot be told from outside, and the driver's own
    mappings (a worker's inherited ones: charged to its rank); sentences wrapped at 100 columns. None for a process
    without a GPU context or driver mappings."""
    from numatune.analysis.locality import REGISTERED_NOTE
    from numatune.render.finding_text import wrap_words

    p, pin = a.process, a.locality.pinned
    driver = _driver_by_node(a)
    inherited = {d: sum(v.values()) for d, v in p.memory.inherited_driver.items() if sum(v.values())}
    if pin is None and p.gpu_context is None and not driver and not inherited:
        return None
    out = Text()

    def say(text: str, first: str = "", rest: str = "    ", style: str = "") -> None:
        out.append("\n".join(wrap_words(text, first=first, rest=rest)) + "\n", style=style)

    cuda = p.gpu_context is not None and p.gpu_context.runtime == "CUDA"
    if pin is not None:
        where = ", ".join(f"node {n}" + (" (its GPU's node)" if n == pin.gpu_cpu_node else "")
                          for n in pin.by_node)
        say(f"likely pinned host memory: {human_bytes(sum(pin.by_node.values()))} on {where} in {pin.chunk_count} "
            f"chunk(s) — {pin.how.removeprefix('likely pinned: ')}")
        listed = pin.chunks
        shown = len(listed) if len(listed) <= MAX_CHUNK_LINES + 1 and len(listed) == pin.chunk_count \
            else MAX_CHUNK_LINES
        for m in listed[:shown]:
            nodes = ", ".join(f"node {n}" for n, pages in m.pages.items() if pages)
            out.append(f"  {human_bytes(m.bytes):>10} chunk at {m.start:x} on {nodes}\n")
        rest = pin.chunk_count - shown
        if rest > 0:
            rest_bytes = sum(pin.by_node.values()) - sum(m.bytes for m in listed[:shown])
            more = f"the {len(listed)} largest" if len(listed) < pin.chunk_count else "all of them"
            out.append(f"  {human_bytes(rest_bytes):>10} in {rest} smaller chunk(s) ({more} in --json)\n")
        for n, gbps in pin.h2d_gbps.items():
            out.append(f"  host-to-GPU copies from node {n}: {gbps:.1f} GB/s (the saved probe)\n")
    elif cuda:
        say(f"likely pinned host memory: none resident in shared anonymous mappings ({p.gpu_context.evidence})")
    if cuda:
        say(f"not confirmed: {REGISTERED_NOTE}", first="  ", style="dim")
    if driver:
        per = ", ".join(f"{d} {human_bytes(sum(v.values()))}" for d, v in p.memory.driver.items() if sum(v.values()))
        say(f"GPU driver memory: {human_bytes(sum(driver.values()))} on {', '.join(f'node {n}' for n in driver)} "
            f"({per}): the driver's own mappings, not pinned chunks")
    if inherited:
        whose = f"rank PID {a.rank_pid}" if a.rank_pid is not None else "the process it was forked from"
        per = ", ".join(f"{d} {human_bytes(b)}" for d, b in inherited.items())
        say(f"GPU driver memory inherited from {whose} ({per}): charged there, not counted here")
    return out


def mapping_table(a: ProcessAudit, min_size: int) -> Table:
    """`audit --mappings`: each mapping, largest first, its policy and pages per node; pages on nodes
    the policy does not name are flagged off-policy; mappings under `min_size` folded into one line."""
    beyond = a.process.memory.mappings_beyond
    shown, (count, total, by_node, off) = fold_mappings(a.process.memory.by_mapping or (), min_size, beyond)
    nodes = sorted({n for m in shown for n in m.pages} | set(by_node))
    table = Table(title=f"PID {a.process.pid}: placement per mapping (numa_maps)", title_justify="left")
    # bytes in every node column (pages x the mapping's page size): a column of page counts mixed 4 KiB and
    # huge pages, and the folded line's sums were bytes
    for col in ("start", "resident", "kind", "policy", *(f"node {n}" for n in nodes), "off-policy"):
        table.add_column(col, justify="left" if col in ("start", "kind", "policy") else "right")
    for m in shown:
        kind = f"{m.kind} {m.name}" if m.name else m.kind
        off_pages = m.off_policy_pages
        flag = Text("-" if off_pages is None else ("0" if not off_pages else
                    f"{off_pages} pages ({human_bytes(off_pages * m.page_size)})"),
                    style="bold red" if off_pages else "")
        table.add_row(f"{m.start:x}", human_bytes(m.bytes), kind, m.policy,
                      *(human_bytes(m.pages.get(n, 0) * m.page_size) for n in nodes), flag)
    if count:
        kept = (f" ({beyond.mappings} past the {MAX_LISTED_MAPPINGS} largest, summed as read)"
                if beyond is not None and beyond.mappings else "")
        table.add_row("", human_bytes(total), f"{count} smaller mappings{kept}", "",
                      *(human_bytes(by_node.get(n, 0)) for n in nodes),
                      Text(human_bytes(off) if off else "0", style="bold red" if off else ""), style="dim")
    return table


def render_audit(
    audits: list[ProcessAudit], topo: Topology, *, job: bool = False, helpers: dict[int, int] | None = None,
    min_size: int = 0, terminal: bool = True,
) -> Group:
    """One process: the detail. Several, or a job: the table, then the reasons and fixes of the others.
    Processes read with their mappings (`audit --mappings`) get the per-mapping table after."""
    maps = [mapping_table(a, min_size) for a in audits if a.process.memory.by_mapping is not None]
    if len(audits) == 1 and not job:
        return Group(process_detail(audits[0], topo, terminal), *maps)
    if job and not audits:  # what was looked for, and how to point audit at a job: the note on stderr
        return Group(Text("no training job found: no process with a local rank, no launcher above one"))
    parts: list = [job_table(audits, topo, helpers, "job" if job else "processes", terminal)]
    for a in audits:
        gpu_mem = gpu_memory_text(a) if a.role != "worker" else None
        if gpu_mem is not None:
            parts.append(Text(f"PID {a.process.pid}" + (f" (rank {a.process.rank})" if a.role == "rank" else ""),
                              style="bold"))
            parts.append(gpu_mem)
    for a in audits:
        if a.locality.verdict in ("warning", "misplaced"):
            parts.append(fix_text(a))
    bad = sum(a.locality.verdict == "misplaced" for a in audits)
    if job:
        count = {r: sum(a.role == r for a in audits) for r in ("launcher", "rank", "worker", "helper")}
        jobs = len({a.place.job for a in audits if a.place is not None and a.place.job is not None})
        others = len(audits) - sum(count.values())
        parts.append(Text((f"{jobs} job(s): " if jobs > 1 else "")
                          + f"{count['rank']} rank(s), {count['worker']} worker(s)"
                          + (f", {count['helper']} helper(s)" if count["helper"] else "")
                          + (f", {count['launcher']} launcher(s)" if count["launcher"] else "")
                          + (f", {others} other process(es)" if others else "") + f", {bad} misplaced", style="bold"))
    else:
        parts.append(Text(f"{len(audits)} process(es), {bad} misplaced", style="bold"))
    return Group(*parts, *maps)
