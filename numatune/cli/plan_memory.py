"""numatune plan-memory: the latency-first DRAM/CXL plan for CPU-offloaded fine-tuning on this node (or a root).

Options only: the use case is numatune.commands.plan_memory.
"""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, MAX_NODES, Count, LargeCount, Size, format_option


@click.command("plan-memory")
@click.option("--params", required=True, type=LargeCount(1e30), metavar="N",
              help="Trainable parameters (7e9, 12.2e9, 7B, 70B, 1.5T).")
@click.option("--optimizer", default="adam", show_default=True, type=click.Choice(["adam", "adamw", "sgd"]),
              help="CPU optimizer (sets the bytes of state per parameter).")
@click.option("--layers", type=Count(1, MAX_COUNT), help="Transformer layers (for activation checkpoints).")
@click.option("--hidden", type=Count(1, MAX_COUNT), help="Hidden size (for activation checkpoints).")
@click.option("--seq-len", type=Count(1, 1 << 30), help="Sequence length in tokens.")
@click.option("--batch", type=Count(1, MAX_COUNT), default=1, show_default=True, help="Micro-batch size.")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="Local DRAM is this GPU's node (as launch --gpu).")
@click.option("--node", type=Count(0, MAX_NODES - 1), help="Local DRAM is this node.")
@click.option("--dram-budget", type=Size(), metavar="SIZE",
              help="DRAM to use (default: the node's free memory minus --reserve).")
@click.option("--cxl-budget", type=Size(), metavar="SIZE",
              help="CXL to use (default: the CXL nodes' free memory minus 256 MiB each).")
@click.option("--reserve", type=Size(), metavar="SIZE", help="DRAM left free (default: max(2 GiB, 5% of the node)).")
@click.option("--cxl-nodes", metavar="LIST",
              help="CXL nodes to stripe over (default: those on the DRAM node's socket; a far-socket one is warned "
                   "about).")
@click.option("--straddle", type=click.Choice(["interleave", "split"]), default="interleave", show_default=True,
              help="The item that straddles the DRAM budget: interleaved over DRAM and CXL, DRAM charged at most "
                   "1/(1+n) (the published allocator), or split into DRAM then CXL.")
@click.option("--probe", "probe_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="CXL shares from `numatune probe --json` read bandwidths instead of HMAT.")
@format_option("text", "json")
@click.pass_obj
def plan_memory_cmd(app: App, **kw) -> None:  # noqa: ANN003 - click passes the options
    """Print which training buffers go to local DRAM and which to CXL: optimizer data first, then bf16
    weights, activation checkpoints and bf16 gradients; the item that straddles the DRAM budget is
    interleaved over DRAM and CXL (or split), the rest is striped over the CXL nodes of the DRAM node's
    socket by bandwidth from that node. Exit 7 when something fits nowhere."""
    from numatune.commands.plan_memory import plan_memory

    plan_memory(app, kw)
