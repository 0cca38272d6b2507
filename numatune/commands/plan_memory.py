"""`numatune plan-memory` as a library call: the training buffers of a model, the node's DRAM and CXL
(read through `app.host`), the latency-first plan (numatune.plan.memory), rendered as text or JSON.

The command line layer parses the options and hands in `app` (host, root, echo_json) and click's values.
"""

from __future__ import annotations

import os

from numatune.numbers import parse_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

def plan_memory(app, kw: Mapping[str, Any]) -> None:  # noqa: ANN001
    """Plan and print which buffers go to local DRAM and which to CXL; exit 7 (not_fitting) when one fits nowhere."""
    from numatune.errors import UsageError
    from numatune.placement.targets import LiveContext
    from numatune.plan.memory import latency_first, not_fitting, training_items
    from numatune.readers.topology import read_topology

    params = kw["params"]  # a positive count below 1e30 (cli._options.LargeCount: 7e9, 7B)
    if kw["gpu"] is not None and kw["node"] is not None:
        raise UsageError("--gpu and --node are exclusive")
    items = training_items(params, optimizer=kw["optimizer"], layers=kw["layers"], hidden=kw["hidden"],
                           seq_len=kw["seq_len"], batch=kw["batch"])
    host = app.host
    topo = read_topology(host, devices=kw["gpu"] is not None, cxl=True, settings=False)
    if kw["node"] is not None and topo.node(kw["node"]) is None:  # an impossible request: exit 2, as launch's
        known = ",".join(str(n.id) for n in topo.nodes) or "none"
        raise UsageError(f"--node {kw['node']}: node {kw['node']} does not exist (nodes: {known})")
    here, why = kw["node"], "--node"
    env: dict[str, str] = {}
    if here is None and kw["gpu"] is None:
        if host.is_live:
            from numatune.placement.targets import _here

            here, why = _here(host, topo)
        else:
            cpu_nodes = [n.id for n in topo.nodes if n.cpus]
            if len(cpu_nodes) != 1:
                raise UsageError(f"--root {app.root} has {len(cpu_nodes)} nodes with CPUs: pass --gpu or --node")
            here, why = cpu_nodes[0], "the only node with CPUs"
    if host.is_live:
        from numatune.plan.launch import ENV_KEYS

        env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    ctx = LiveContext(topo, here, why, tuple(d for d in topo.devices if d.kind in ("gpu", "accelerator")), env)
    budgets = {k: kw[k] for k in ("dram_budget", "cxl_budget", "reserve")}  # bytes (cli._options.Size)
    gpu = kw["gpu"]
    if gpu is not None:
        from numatune.model.order import gpu_order

        gpus = gpu_order(ctx.devices)[0]
        if not gpus:  # said here: the planner would name its own ('local', GPU) target, not the option
            raise UsageError(f"--gpu {gpu[:40]}: this root has no GPU", hint="pass --node, or leave both out")
        if gpu.isascii() and gpu.isdigit() and (len(gpu) > 9 or parse_int(gpu, "--gpu") >= len(gpus)):
            raise UsageError(f"--gpu {gpu[:40]}: this root has {len(gpus)} GPU(s), GPU0-GPU{len(gpus) - 1} of "
                             "inspect")
    if gpu is not None and gpu.isascii() and gpu.isdigit() and len(gpu) <= 9:
        gpu = parse_int(gpu, "--gpu")
    bws = _probe_figures(kw["probe_file"], ctx, gpu) if kw["probe_file"] else None
    cxl_nodes = None
    if kw["cxl_nodes"]:
        from numatune.cpulist import parse_cpulist

        try:
            cxl_nodes = sorted(parse_cpulist(kw["cxl_nodes"]))
        except ValueError:
            raise UsageError(f"--cxl-nodes {kw['cxl_nodes']!r}: expected a node list like 2,3 or 2-3") from None
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
        from numatune.render.printable import echo

        shape = (f", {kw['layers']} layers x {kw['hidden']} hidden, seq {kw['seq_len']}, batch {kw['batch']}"
                 if kw["seq_len"] else ", no activation checkpoints (give --layers --hidden --seq-len)")
        echo(render_text(plan, host.label, f"{params:.3g} parameters, {kw['optimizer']}{shape}"))
    if not plan.fits:
        raise not_fitting(plan)


def _probe_figures(path: str, ctx, gpu):  # noqa: ANN001, ANN202
    """Read bandwidths measured from the local DRAM node (the plan's initiator) in a probe document."""
    from numatune.model.document import Doc
    from numatune.placement.targets import probe_bandwidths, resolve
    from numatune.system.infile import MAX_REPORT_BYTES, load_document, read_text

    text = read_text(path, "--probe file", MAX_REPORT_BYTES)
    doc = load_document(text, f"--probe {path}")
    node = resolve(("local", gpu) if gpu is not None else "local", ctx).nodes[0]
    return probe_bandwidths(Doc(doc, f"--probe {path}"), node)
