"""numatune launch: run a command bound to its GPU's NUMA node (CPUs and memory). Options only: the use
case is numatune.commands.launch.

The hot path (`numatune launch --node 0 -- CMD`) imports click, the model and the CPU/node readers
only: no rich, psutil, pyudev or py-cpuinfo, and no PCI scan unless a GPU has to be found.
"""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, MAX_NODES, Count, format_option
from numatune.model.launch import CPU_KIND_CHOICES, MEM_POLICIES, METHODS, NIC_TRANSPORTS


@click.command(
    "launch",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--rank", type=Count(0, MAX_COUNT - 1), help="Local rank (default: LOCAL_RANK, SLURM_LOCALID, ...).")
@click.option("--local-size", type=Count(1, MAX_COUNT), help="Ranks on this node (default: LOCAL_WORLD_SIZE, ...).")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="The rank's device; a BDF may name any PCI device.")
@click.option("--node", "--numa-node", "node", type=Count(0, MAX_NODES - 1),
              help="Bind to this NUMA node (no GPU lookup). Under torchrun --no-python write --numa-node: "
                   "torchrun's parser reads --node as an abbreviation of its --node-rank.")
@click.option("--cpu-bind", "cpu_bind", default="node", show_default=True,
              metavar="node|socket|exclusive|core-complex|cores:N|none",
              help="Which CPUs of the node the rank gets (torchrun --numa-binding's modes, and cores:N).")
@click.option("--cpu-kind", "cpu_kind", type=click.Choice(CPU_KIND_CHOICES), default="performance", show_default=True,
              help="On hybrid CPUs (P/E, big.LITTLE): which kind exclusive, cores:N and socket take first.")
@click.option("--reserve-cores", type=Count(0, MAX_COUNT), default=0, show_default=True,
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
    from numatune.commands.launch import launch_options, run_launch

    if kw["rank"] is not None and kw["local_size"] is not None and kw["rank"] >= kw["local_size"]:
        raise click.UsageError(f"--rank {kw['rank']} is not below --local-size {kw['local_size']} "
                               "(local ranks count from 0)")
    opts = launch_options(kw)
    if kw["emit"]:
        _emit(kw["emit"], kw, command)
        if not kw["quiet"]:
            script = str(kw["emit"])
            script = script if "/" in script else f"./{script}"  # a bare name would be looked up on PATH
            app.note(f"wrote {kw['emit']}: run it as `torchrun --nproc-per-node N --no-python {script} CMD ...`")
        return
    if not command:
        raise click.UsageError("no command given: numatune launch [OPTIONS] -- CMD [ARGS...]")
    run_launch(app, opts, command, fmt=kw["fmt"], dry_run=kw["dry_run"], quiet=kw["quiet"])


# Options that choose what this invocation prints or writes instead of running: not passed on to the wrapper
# (nor are the global options given after `launch`, which are not launch's values: cli.accept_global_options).
NOT_FORWARDED = frozenset({"emit", "dry_run", "fmt", "as_json"})


def forwarded_args(kw: dict) -> list[str]:
    """Every launch option as given, in canonical form, read off the click options themselves (so a new
    option reaches emitted wrappers without a list to keep in step)."""
    args = []
    for param in launch_cmd.params:
        if not isinstance(param, click.Option) or param.name in NOT_FORWARDED or not param.expose_value:
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
    from numatune.commands.launch import write_wrapper

    write_wrapper(path, forwarded_args(kw), command)
