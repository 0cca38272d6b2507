"""numatune plan-memory: the latency-first DRAM/CXL plan for CPU-offloaded fine-tuning on this node (or a root)."""

from __future__ import annotations

import os
import re

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.render.printable import echo

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str, what: str) -> int:
    """"64G", "64GiB", "1.5T", "4096" (bytes); powers of 1024."""
    m = _SIZE.match(text)
    if not m:
        from numatune.errors import InputError

        raise InputError(f"{what} {text!r}: expected a size like 64G, 512MiB or 1.5T")
    return int(float(m.group(1)) * 1024 ** "bkmgtp".index((m.group(2) or "b").lower()))


@click.command("plan-memory")
@click.option("--params", required=True, metavar="N", help="Trainable parameters (7e9, 12.2e9).")
@click.option("--optimizer", default="adam", show_default=True, type=click.Choice(["adam", "adamw", "sgd"]),
              help="CPU optimizer (sets the bytes of state per parameter).")
@click.option("--layers", type=click.IntRange(min=1), help="Transformer layers (for activation checkpoints).")
@click.option("--hidden", type=click.IntRange(min=1), help="Hidden size (for activation checkpoints).")
@click.option("--seq-len", type=click.IntRange(min=1), help="Sequence length in tokens.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Micro-batch size.")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="Local DRAM is this GPU's node (as launch --gpu).")
@click.option("--node", type=click.IntRange(min=0), help="Local DRAM is this node.")
@click.option("--dram-budget", metavar="SIZE", help="DRAM to use (default: the node's free memory minus --reserve).")
@click.option("--cxl-budget", metavar="SIZE",
              help="CXL to use (default: the CXL nodes' free memory minus 256 MiB each).")
@click.option("--reserve", metavar="SIZE", help="DRAM left free (default: max(2 GiB, 5% of the node)).")
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
    from numatune.errors import InputError
    from numatune.placement.targets import LiveContext
    from numatune.plan.memory import latency_first, not_fitting, training_items
    from numatune.readers.topology import read_topology

    try:
        params = float(kw["params"])
    except ValueError:
        raise InputError(f"--params {kw['params']!r}: expected a number like 7e9") from None
    if kw["gpu"] is not None and kw["node"] is not None:
        from numatune.errors import UsageError

        raise UsageError("--gpu and --node are exclusive")
    items = training_items(params, optimizer=kw["optimizer"], layers=kw["layers"], hidden=kw["hidden"],
                           seq_len=kw["seq_len"], batch=kw["batch"])
    host = app.host
    topo = read_topology(host, devices=kw["gpu"] is not None, cxl=True, settings=False)
    here, why = kw["node"], "--node"
    env: dict[str, str] = {}
    if here is None and kw["gpu"] is None:
        if host.is_live:
            from numatune.placement.targets import _here

            here, why = _here(host, topo)
        else:
            cpu_nodes = [n.id for n in topo.nodes if n.cpus]
            if len(cpu_nodes) != 1:
                raise InputError(f"--root {app.root} has {len(cpu_nodes)} nodes with CPUs: pass --gpu or --node")
            here, why = cpu_nodes[0], "the only node with CPUs"
    if host.is_live:
        from numatune.plan.launch import ENV_KEYS

        env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    ctx = LiveContext(topo, here, why, tuple(d for d in topo.devices if d.kind in ("gpu", "accelerator")), env)
    budgets = {k: parse_size(kw[k], "--" + k.replace("_", "-")) if kw[k] else None
               for k in ("dram_budget", "cxl_budget", "reserve")}
    gpu = kw["gpu"]
    if gpu is not None and gpu.isdigit():
        gpu = int(gpu)
    bws = _probe_figures(kw["probe_file"], ctx, gpu) if kw["probe_file"] else None
    cxl_nodes = None
    if kw["cxl_nodes"]:
        from numatune.cpulist import parse_cpulist

        try:
            cxl_nodes = sorted(parse_cpulist(kw["cxl_nodes"]))
        except ValueError:
            raise InputError(f"--cxl-nodes {kw['cxl_nodes']!r}: expected a node list like 2,3 or 2-3") from None
    plan = latency_first(items, budgets["dram_budget"], budgets["cxl_budget"], dram_reserve=budgets["reserve"],
                         context=ctx, gpu=gpu, strict=False, bandwidths=bws, cxl_nodes=cxl_nodes,
                         straddle=kw["straddle"])
    model = {"params": int(params), "optimizer": kw["optimizer"], "layers": kw["layers"], "hidden": kw["hidden"],
             "seq_len": kw["seq_len"], "batch": kw["batch"]}
    if kw["fmt"] == "json":
        from numatune.render.plan_memory import plan_document

        app.echo_json(plan_document(plan, host.label, model))
    else:
        from numatune.render.plan_memory import render_text

        shape = (f", {kw['layers']} layers x {kw['hidden']} hidden, seq {kw['seq_len']}, batch {kw['batch']}"
                 if kw["seq_len"] else ", no activation checkpoints (give --layers --hidden --seq-len)")
        echo(render_text(plan, host.label, f"{params:.3g} parameters, {kw['optimizer']}{shape}"))
    if not plan.fits:
        raise not_fitting(plan)



def _probe_figures(path: str, ctx, gpu):  # noqa: ANN001, ANN202
    """Read bandwidths measured from the local DRAM node (the plan's initiator) in a probe document."""
    import json

    from numatune.errors import InputError
    from numatune.placement.targets import probe_bandwidths, resolve
    from numatune.system.infile import read_input

    raw = read_input(path, "--probe file")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise InputError(f"--probe {path} is not JSON (expected numatune probe --json output)") from None
    node = resolve(("local", gpu) if gpu is not None else "local", ctx).nodes[0]
    return probe_bandwidths(doc, node)
