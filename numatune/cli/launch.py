"""numatune launch: run a command bound to its GPU's NUMA node (CPUs and memory).

The hot path (`numatune launch --node 0 -- CMD`) imports click, the model and the CPU/node readers
only: no rich, psutil, pyudev or py-cpuinfo, and no PCI scan unless a GPU has to be found.
"""

from __future__ import annotations

import os
import sys

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.model.launch import CPU_KIND_CHOICES, MEM_POLICIES, METHODS, NIC_TRANSPORTS
from numatune.render.printable import echo

_KIND_POLICIES = ("cxl-spill", "weighted", "preferred-many")


@click.command(
    "launch",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--rank", type=click.IntRange(min=0), help="Local rank (default: LOCAL_RANK, SLURM_LOCALID, ...).")
@click.option("--local-size", type=click.IntRange(min=1), help="Ranks on this node (default: LOCAL_WORLD_SIZE, ...).")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="The rank's device; a BDF may name any PCI device.")
@click.option("--node", "--numa-node", "node", type=click.IntRange(min=0),
              help="Bind to this NUMA node (no GPU lookup). Under torchrun --no-python write --numa-node: "
                   "torchrun's parser reads --node as an abbreviation of its --node-rank.")
@click.option("--cpu-bind", "cpu_bind", default="node", show_default=True,
              metavar="node|socket|exclusive|core-complex|cores:N|none",
              help="Which CPUs of the node the rank gets (torchrun --numa-binding's modes, and cores:N).")
@click.option("--cpu-kind", "cpu_kind", type=click.Choice(CPU_KIND_CHOICES), default="performance", show_default=True,
              help="On hybrid CPUs (P/E, big.LITTLE): which kind exclusive, cores:N and socket take first.")
@click.option("--reserve-cores", type=click.IntRange(min=0), default=0, show_default=True,
              help="Leave N physical cores of each node to data loaders and IRQs (the first; on hybrid CPUs "
                   "the least performant).")
@click.option("--allow-isolated", is_flag=True, help="Also use isolcpus CPUs (excluded by default).")
@click.option("--mem-policy", type=click.Choice(MEM_POLICIES), default="bind", show_default=True,
              help="Memory policy for the command.")
@click.option("--mem-nodes", metavar="LIST", help="Memory nodes for the policy instead of the derived ones (0,2).")
@click.option("--weights", metavar="NODE:W,...",
              help="Weighted-interleave weights the kernel must have (system-wide: launch does not change them).")
@click.option("--nic", default="none", show_default=True, metavar="auto|NAME|none",
              help="Give the rank its own NIC: auto = the RDMA NIC nearest its GPU, or a name (mlx5_3, ib0, BDF); "
                   "exported as UCX_NET_DEVICES and NCCL_IB_HCA.")
@click.option("--nic-transport", type=click.Choice(NIC_TRANSPORTS), default="rdma", show_default=True,
              help="tcp: pick a NIC with a network interface and export NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME.")
@click.option("--via", type=click.Choice(METHODS), default="auto", show_default=True,
              help="numactl, taskset or direct syscalls (auto: numactl when it can express the policy).")
@click.option("--best-effort", is_flag=True, help="When a binding cannot be honoured, warn and run unbound.")
@click.option("--dry-run", is_flag=True, help="Print the exact command and the reasoning; run nothing.")
@format_option("text", "json", default=None)  # asking for a format prints the plan (text: as --dry-run)
@click.option("--emit", type=click.Path(dir_okay=False, readable=False), metavar="FILE",
              help="Write a POSIX sh wrapper that runs numatune launch per rank; run nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No stderr line saying what was bound (warnings still shown).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def launch_cmd(app: App, command: tuple[str, ...], **kw) -> None:  # noqa: ANN003 - click passes the options
    """Run COMMAND bound to its GPU's NUMA node: numatune launch [OPTIONS] -- CMD [ARGS...]

    Rank → GPU (--gpu, CUDA_VISIBLE_DEVICES, ROCR/HIP_VISIBLE_DEVICES, or the rank's index in PCI order)
    → node (the GPU's numa_node, or --node) → CPUs (--cpu-bind) and memory (--mem-policy), then the process
    is replaced by numactl, taskset or the command itself. Exit status and signals pass through.
    """
    from numatune.cpulist import parse_cpulist
    from numatune.errors import UsageError
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import normalize_bdf, parse_cpu_bind, parse_weights

    try:
        mem_nodes = tuple(sorted(parse_cpulist(kw["mem_nodes"]))) if kw["mem_nodes"] else None
    except ValueError as exc:
        raise UsageError(f"--mem-nodes {kw['mem_nodes']!r}: expected a node list like 0,2 or 0-3") from exc
    if mem_nodes == ():
        raise UsageError("--mem-nodes is empty")
    opts = LaunchOptions(
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
    if kw["emit"]:
        _emit(kw["emit"], kw, command)
        if not kw["quiet"]:
            script = str(kw["emit"])
            script = script if "/" in script else f"./{script}"  # a bare name would be looked up on PATH
            app.note(f"wrote {kw['emit']}: run it as `torchrun --nproc-per-node N --no-python {script} CMD ...`")
        return
    if not command:
        raise click.UsageError("no command given: numatune launch [OPTIONS] -- CMD [ARGS...]")
    plan_only = kw["dry_run"] or kw["fmt"] is not None
    host = app.host
    if not host.is_live and not plan_only:
        raise UsageError(f"launch can only run a command on the live node, not on --root {app.root}",
                         hint="add --dry-run or --json to see the plan for that root")

    from numatune.live.bind import gather_facts, read_launch_devices, read_launch_topology
    from numatune.plan.launch import plan_launch

    topo = read_launch_topology(host, node_kinds=opts.mem_policy in _KIND_POLICIES)
    devices = []
    if opts.node is None or opts.gpu is not None:
        bdf = normalize_bdf(opts.gpu) if opts.gpu else None
        devices = read_launch_devices(host, topo, bdf, nics=opts.nic != "none")
    elif opts.nic != "none":
        devices = [d for d in read_launch_devices(host, topo, nics=True) if d.kind == "nic"]
    probe = opts.mem_policy in ("preferred-many", "weighted") and opts.via in ("auto", "numactl")
    caches = opts.cpu_bind.mode in ("core-complex", "exclusive", "cores")  # cores in cache order
    facts = gather_facts(host, os.environ, probe=probe, topo=topo if caches else None,
                         devices=[d for d in devices if d.kind == "nic"])
    plan = plan_launch(topo, devices, facts, opts, command)
    if host.notes:  # files that exist but could not be read, links leaving a saved root
        plan = plan._replace(warnings=plan.warnings + tuple(f"cannot read {p}: {r}" for p, r in host.notes))
    if kw["fmt"] == "json":
        from numatune.render.launch_json import launch_document

        app.echo_json(launch_document(plan, host.label))
        return
    if plan_only:
        from numatune.render.launch_text import render_dry_run

        echo(render_dry_run(plan))
        return
    from numatune.live.bind import apply_plan
    from numatune.render.launch_text import summary_line

    for w in plan.warnings:
        app.warn(w)
    if not kw["quiet"]:
        app.note(summary_line(plan))
    apply_plan(plan, os.environ)


# Options that choose what this invocation prints or writes instead of running: not passed on to the wrapper.
NOT_FORWARDED = frozenset({"emit", "dry_run", "fmt", "as_json"})


def forwarded_args(kw: dict) -> list[str]:
    """Every launch option as given, in canonical form, read off the click options themselves (so a new
    option reaches emitted wrappers without a list to keep in step)."""
    args = []
    for param in launch_cmd.params:
        if not isinstance(param, click.Option) or param.name in NOT_FORWARDED:
            continue
        value = kw[param.name]
        flag = max(param.opts, key=len)
        if param.is_flag:
            args += [flag] if value else []
        elif value is not None:
            args += [flag, str(value)]
    return args


def _emit(path: str, kw: dict, command: tuple[str, ...]) -> None:
    """Write the wrapper with the options as given, minus the ones that pick what is printed (NOT_FORWARDED)."""
    import numatune
    from numatune.render.launch_sh import render_wrapper

    args = ["launch", *forwarded_args(kw)]
    parent = os.path.dirname(os.path.dirname(os.path.abspath(numatune.__file__)))
    text = render_wrapper(sys.executable, parent, args, command)
    from numatune.system.outfile import write_file

    write_file(path, text, mode=0o755)
