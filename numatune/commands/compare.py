"""`numatune compare` without click: the user's command under each memory placement, interleaved, timed,
with proof of where its pages were.

Every placement is a `launch` plan (numatune.plan.launch.plan_launch, applied by the same argv or
bind.bind_direct), so `remote` or `cxl-spill` mean here exactly what they mean to `numatune launch`.
While a run goes, /proc/PID/numa_maps of the command and its descendants is sampled (the audit
readers) and the run's own memory split by node is kept from the sample that saw the most of it.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from numatune.errors import BindingError, NumatuneError, UsageError
from numatune.model.compare import PENALTY, PROOF_SHARE, Run  # noqa: F401 - the command's vocabulary
from numatune.model.launch import MEM_POLICIES, LaunchFacts, LaunchOptions, LaunchPlan
from numatune.model.topology import PciDevice, Topology
from numatune.system.host import Host

NAMED = ("local", "remote", "interleave", "cxl", "cxl-spill", "weighted")
DEFAULT_PLACEMENTS = ("local", "remote")  # without --placements: those of these that exist on this machine
MIN_PROOF_BYTES = 1 << 20
TAIL_BYTES = 4096


class CommandFailed(NumatuneError):
    """The compared command exited non-zero: compare stops with its status (128+N for signal N)."""

    def __init__(self, message: str, status: int, tail: str) -> None:
        super().__init__(message, hint="the output tail is above; fix the command, then compare again")
        self.exit_code = status  # type: ignore[assignment]
        self.tail = tail


class Placement(NamedTuple):
    name: str  # as the user wrote it
    plan: LaunchPlan
    expect: tuple[int, ...]  # nodes its memory should be on (empty: anywhere)


class NotHere(BindingError):
    """A placement that cannot exist on this machine (no remote DRAM node, no CXL node)."""


def farthest_dram(topo: Topology, node: int) -> int | None:
    here = topo.node(node)
    others = [n for n in topo.nodes if n.id != node and n.cpus and n.memory_total_kib != 0]
    if here is None or not others:
        return None
    return max(others, key=lambda n: (here.distances.get(n.id, 0), -n.id)).id


def placement_options(name: str, base: LaunchOptions, topo: Topology, home: int) -> tuple[LaunchOptions, str]:
    """A placement name → launch options (and a note). Accepts NAMED, any launch --mem-policy, or POLICY:NODES."""
    from numatune.cpulist import parse_cpulist
    from numatune.plan.launch import nearest_cxl_node

    policy, _, nodes_text = name.partition(":")
    nodes = None
    if nodes_text:
        try:
            nodes = tuple(sorted(parse_cpulist(nodes_text)))
        except ValueError as exc:
            raise UsageError(f"placement {name!r}: expected POLICY:NODES like bind:1 or interleave:0-1") from exc
    if policy == "local":
        return base._replace(mem_policy="bind", mem_nodes=nodes), f"memory bound to node {home} (launch's choice)"
    if policy == "remote":
        far = farthest_dram(topo, home)
        if far is None:
            raise NotHere(f"placement remote: node {home} is the only DRAM node; there is no remote memory")
        return base._replace(mem_policy="bind", mem_nodes=(far,)), f"CPUs on node {home}, memory on node {far}"
    if policy == "cxl":
        cxl = nearest_cxl_node(topo, home)
        if cxl is None:
            raise NotHere("placement cxl: no CXL memory node here")
        return base._replace(mem_policy="bind", mem_nodes=(cxl,)), f"CPUs on node {home}, memory on CXL node {cxl}"
    if policy in MEM_POLICIES:
        return base._replace(mem_policy=policy, mem_nodes=nodes), f"launch --mem-policy {policy}"
    raise UsageError(f"unknown placement {name!r}: use {', '.join(NAMED)}, a launch policy "
                     f"({', '.join(MEM_POLICIES)}) or POLICY:NODES")


def plan_placements(names: Sequence[str], base: LaunchOptions, topo: Topology, devices: Sequence[PciDevice],
                    facts: LaunchFacts, command: Sequence[str], *, skip_missing: bool = False
                    ) -> tuple[list[Placement], list[str]]:
    """(the placements, notes on those skipped). skip_missing: a placement that cannot exist here (remote on
    a one-node machine, cxl without CXL) is left out with a note instead of stopping compare (the defaults)."""
    from numatune.live.bind import which
    from numatune.plan.launch import plan_launch

    program = command[0] if command else ""
    if not program or ("/" in program and not os.access(program, os.X_OK)) or ("/" not in program
                                                                              and which(program) is None):
        raise CommandFailed(f"cannot run {program!r}: command not found", 127, "")
    probe = plan_launch(topo, devices, facts, base._replace(mem_policy="none"), command)
    if probe.node is None:
        raise BindingError("compare needs a home node: pass --node N or --gpu")
    out: list[Placement] = []
    skipped: list[str] = []
    for name in names:
        try:
            opts, _ = placement_options(name, base._replace(node=probe.node) if base.gpu is None else base, topo,
                                        probe.node)
        except NotHere as exc:
            if not skip_missing:
                raise
            skipped.append(f"{exc.message}: skipped")
            continue
        plan = plan_launch(topo, devices, facts, opts, command)
        expect = tuple(plan.memory.nodes) if plan.memory.policy in ("bind", "cxl-spill", "interleave", "weighted",
                                                                    "preferred-many") else ()
        if plan.memory.policy == "preferred":
            expect = tuple(plan.memory.nodes)
        out.append(Placement(name, plan, expect))
    return out, skipped


def spread_of(by_node: Mapping[int, int], nodes: Sequence[int]) -> float | None:
    """n x the smallest share any of the n asked nodes holds of what is on them (1.0: even; 0.0: one node got
    none, all pages on the others); None for fewer than two nodes or nothing seen."""
    if len(nodes) < 2:
        return None
    on = [by_node.get(n, 0) for n in nodes]
    total = sum(on)
    return len(nodes) * min(on) / total if total else None


def parse_metric(regex: re.Pattern[str], output: str) -> float | None:
    """The last match's first group (or whole match) as a number."""
    last = None
    for m in regex.finditer(output):
        last = m
    if last is None:
        return None
    text = last.group(1) if last.groups() else last.group(0)
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def own_by_node(host: Host, pids: Sequence[int]) -> dict[int, int]:
    """Own memory (anon, heap, stack, shm, hugetlb: what audit judges) per node over these processes."""
    from numatune.analysis.locality import OWN_KINDS
    from numatune.readers.procs import parse_numa_maps

    total: dict[int, int] = {}
    for pid in pids:
        text = host.read_optional(f"/proc/{pid}/numa_maps")
        if not text:
            continue
        mem = parse_numa_maps(text)
        for kind in OWN_KINDS:
            for node, size in mem.by_kind.get(kind, {}).items():
                total[node] = total.get(node, 0) + size
    return total


class _Sampler:
    """Samples the process tree's own memory until stopped; keeps the largest sample."""

    def __init__(self, host: Host, pid: int, interval: float) -> None:
        self.host, self.pid, self.interval = host, pid, interval
        self.best: dict[int, int] = {}
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="numatune-compare-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from numatune.readers.procs import descendants, list_processes

        delay = min(0.02, self.interval)
        while not self._stop.wait(delay):
            delay = self.interval
            try:
                pids = [self.pid, *descendants(list_processes(self.host), self.pid)]
                now = own_by_node(self.host, pids)
            except NumatuneError:
                continue
            self.count += 1
            if sum(now.values()) > sum(self.best.values()):
                self.best = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _status(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def run_once(host: Host, placement: Placement, environ: Mapping[str, str], metric: re.Pattern[str] | None,
             interval: float, rnd: int) -> tuple[Run, str]:
    """One run: (the record, the output tail)."""
    from numatune.live.bind import bind_direct

    plan = placement.plan
    env = dict(environ)
    env.update(plan.env)
    chunks: list[bytes] = []
    size = [0]
    keep_all = metric is not None

    start = time.perf_counter()
    try:
        proc = subprocess.Popen(list(plan.argv), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, preexec_fn=(lambda: bind_direct(plan))
                                if plan.method == "direct" else None)
    except FileNotFoundError as exc:
        raise CommandFailed(f"cannot run {plan.argv[0]!r}: command not found", 127, "") from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise CommandFailed(f"cannot run {plan.argv[0]!r}: {exc}", 126, "") from exc
    sampler = _Sampler(host, proc.pid, interval)
    try:
        assert proc.stdout is not None
        for block in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
            chunks.append(block)
            size[0] += len(block)
            if not keep_all:
                while size[0] - len(chunks[0]) > TAIL_BYTES and len(chunks) > 1:
                    size[0] -= len(chunks.pop(0))
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    finally:
        seconds = time.perf_counter() - start
        sampler.stop()
    output = b"".join(chunks).decode("utf-8", "replace")
    tail = output[-TAIL_BYTES:]
    status = _status(rc)
    if status != 0:
        raise CommandFailed(f"{placement.name}: the command exited with status {status}"
                            + (" (run " + str(rnd + 1) + ")" if rnd >= 0 else " (warm-up)"), status, tail)
    value = seconds
    if metric is not None:
        got = parse_metric(metric, output)
        if got is None:
            raise CommandFailed(f"{placement.name}: --metric {metric.pattern!r} found no number in the command's "
                                "output", 3, tail)
        value = got
    by_node = sampler.best
    total = sum(by_node.values())
    share = spread = None
    if placement.expect and total >= MIN_PROOF_BYTES:
        share = sum(b for n, b in by_node.items() if n in placement.expect) / total
        if placement.plan.memory.policy == "interleave":
            spread = spread_of(by_node, placement.expect)
    return Run(placement.name, rnd, seconds, value, status, by_node, sampler.count, share, spread), tail


def run_compare(host: Host, placements: Sequence[Placement], *, runs: int, warmup: int, seed: int | None,
                metric: re.Pattern[str] | None, interval: float = 0.1, environ: Mapping[str, str] | None = None,
                progress: Callable[[str, int, int], None] | None = None) -> list[Run]:
    """Warm-up runs (not kept), then `runs` rounds, each running every placement once in a shuffled order."""
    env = os.environ if environ is None else environ
    rng = random.Random(seed)
    out: list[Run] = []
    total = (warmup + runs) * len(placements)
    step = 0
    for w in range(warmup):
        for p in placements:
            step += 1
            if progress:
                progress(f"warm-up {w + 1}: {p.name}", step, total)
            run_once(host, p, env, metric, interval, -1)
    for r in range(runs):
        order = list(placements)
        rng.shuffle(order)
        for p in order:
            step += 1
            if progress:
                progress(f"round {r + 1}: {p.name}", step, total)
            run, _ = run_once(host, p, env, metric, interval, r)
            out.append(run)
    return out

def compare_command(app, command: tuple[str, ...], names: list[str], given: bool,  # noqa: ANN001 - the CLI's App
                    metric: re.Pattern[str] | None, kw: Mapping[str, Any]) -> None:
    """`numatune compare`: plan each placement as launch does, run them interleaved, judge and render."""
    import sys

    from numatune.errors import Unsupported
    from numatune.render.printable import echo

    host = app.host
    if not host.is_live:
        raise UsageError(f"compare runs a command on the live node, not on --root {app.root}")

    from numatune.live.bind import gather_facts, read_launch_devices, read_launch_topology
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import normalize_bdf, parse_cpu_bind

    topo = read_launch_topology(host, node_kinds=True)
    node = kw["node"]
    devices = []
    if kw["gpu"] is not None or node is None:
        devices = read_launch_devices(host, topo, normalize_bdf(kw["gpu"]) if kw["gpu"] else None)
    if node is None and kw["gpu"] is None and not any(d.kind in ("gpu", "accelerator") for d in devices):
        allowed = os.sched_getaffinity(0)
        homes = [n.id for n in topo.nodes if set(n.cpus) & allowed]
        if not homes:
            raise Unsupported("no node with CPUs this process may use")
        node = homes[0]
        app.note(f"no GPU and no --node: home is node {node}, the first node with CPUs")
    base = LaunchOptions(gpu=kw["gpu"], node=node, cpu_bind=parse_cpu_bind(kw["cpu_bind"]))
    facts = gather_facts(host, os.environ, probe=True)
    placements, skipped = plan_placements(names, base, topo, devices, facts, command, skip_missing=not given)
    for note in skipped:
        app.note(note)
    names = [p.name for p in placements]
    for p in placements:
        for w in p.plan.warnings:
            app.warn(f"{p.name}: {w}")
    tty = sys.stderr.isatty() and kw["fmt"] != "json"

    def progress(label: str, step: int, total: int) -> None:
        if tty:
            app.progress(f"numatune: {label} ({step}/{total}) ...")

    try:
        runs = run_compare(host, placements, runs=kw["runs"], warmup=kw["warmup"], seed=kw["seed"], metric=metric,
                           interval=kw["sample_interval"], progress=progress)
    except CommandFailed as exc:
        if tty:
            app.progress(None)
        if exc.tail:
            echo("--- output tail ---\n" + exc.tail.rstrip("\n") + "\n---\n", err=True)
        raise
    if tty:
        app.progress(None)
    from numatune.analysis.compare import analyse
    from numatune.render.compare_out import compare_document, render_markdown, render_text
    from numatune.render.launch_text import summary_line

    result = analyse(runs, names, names[0], higher_is_better=kw["higher_is_better"],
                     expect={p.name: p.expect for p in placements})
    what = f"the figure matched by {kw['metric']!r}" if metric else "wall time"
    unit = kw["unit"] or ("" if metric else "s")
    doc = compare_document(host.label, list(command), kw["runs"], kw["warmup"],
                           {"what": what, "unit": unit, "higher_is_better": kw["higher_is_better"]}, result,
                           {p.name: summary_line(p.plan) for p in placements}, kw["seed"], skipped)
    if kw["fmt"] == "json":
        app.echo_json(doc)
    elif kw["emit"] == "markdown":
        echo(render_markdown(doc))
    else:
        echo(render_text(doc))
