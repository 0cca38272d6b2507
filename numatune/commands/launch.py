"""`numatune launch` as a library call: the options as typed → LaunchOptions; Host → launch plan → the
plan printed (--dry-run, --json) or the process replaced by the bound command; the per-rank wrapper.

The hot path (`numatune launch --node 0 -- CMD`) imports the model and the CPU/node readers only: no
click, rich, psutil, pyudev or py-cpuinfo, and no PCI scan unless a GPU has to be found. What the
command line layer prints through (`app`: host, root, note, warn, echo_json) is handed in.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # annotations only: typing costs ~15 ms on launch's start
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from numatune.model.launch import LaunchOptions


def launch_options(kw: Mapping[str, Any]) -> LaunchOptions:
    """The launch options as the command line gave them (click's values) → LaunchOptions."""
    from numatune.cpulist import parse_cpulist
    from numatune.errors import UsageError
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import parse_cpu_bind, parse_weights

    try:
        mem_nodes = tuple(sorted(parse_cpulist(kw["mem_nodes"]))) if kw["mem_nodes"] else None
    except ValueError as exc:
        raise UsageError(f"--mem-nodes {kw['mem_nodes']!r}: expected a node list like 0,2 or 0-3") from exc
    if mem_nodes == ():
        raise UsageError("--mem-nodes is empty")
    return LaunchOptions(
        rank=kw["rank"],
        local_size=kw["local_size"],
        gpu=kw["gpu"],
        node=kw["node"],
        cpu_bind=parse_cpu_bind(kw["cpu_bind"]),
        reserve_cores=kw["reserve_cores"],
        allow_isolated=kw["allow_isolated"],
        mem_policy=kw["mem_policy"],
        mem_nodes=mem_nodes,
        weights=parse_weights(kw["weights"]) if kw["weights"] else None,
        via=kw["via"],
        best_effort=kw["best_effort"],
        cpu_kind=kw["cpu_kind"],
        nic=kw["nic"],
        nic_transport=kw["nic_transport"],
    )


def run_launch(app, opts: LaunchOptions, command: Sequence[str], *, fmt: str | None, dry_run: bool,  # noqa: ANN001
               quiet: bool) -> None:
    """Plan the rank's binding on `app.host`; print the plan (--dry-run, a --format) or replace this process
    with the bound command (live node only; never returns then)."""
    from numatune.errors import UsageError

    plan_only = dry_run or fmt is not None
    host = app.host
    if not host.is_live and not plan_only:
        raise UsageError(f"launch can only run a command on the live node, not on --root {app.root}",
                         hint="add --dry-run or --json to see the plan for that root")

    from numatune.live.bind import plan_live

    plan = plan_live(host, os.environ, opts, command)
    if fmt == "json":
        from numatune.render.launch_json import launch_document

        app.echo_json(launch_document(plan, host.label))
        return
    if plan_only:
        from numatune.render.launch_text import render_dry_run
        from numatune.render.printable import echo

        echo(render_dry_run(plan))
        return
    from numatune.live.bind import apply_plan
    from numatune.render.launch_text import summary_line

    for w in plan.warnings:
        app.warn(w)
    if not quiet:
        for n in plan.notes:
            app.note(n)
        app.note(summary_line(plan))
    apply_plan(plan, os.environ)


def write_wrapper(path: str, args: Sequence[str], command: Sequence[str]) -> None:
    """Write the POSIX sh wrapper that runs `numatune launch ARGS -- COMMAND` per rank (mode 755)."""
    import numatune
    from numatune.render.launch_sh import render_wrapper

    parent = os.path.dirname(os.path.dirname(os.path.abspath(numatune.__file__)))
    text = render_wrapper(sys.executable, parent, ["launch", *args], command)
    from numatune.system.outfile import write_file

    write_file(path, text, mode=0o755)
