"""numatune emit slurm|kubelet|nfd|dra: options only (the use cases are in numatune.commands.emit)."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, MAX_MIB, Count, deliver, format_option

#: The suffixes of the files emit writes as text (slurm.conf, gres.conf, kubelet.yaml, a DRA template).
CONFIG_SUFFIXES = (".conf", ".yaml", ".yml")


def _formats(func):  # noqa: ANN001, ANN201 - click decorator
    """--format text|json, --json and -o FILE (the format from its suffix: .json, or .conf/.yaml/.txt text)."""
    return format_option("text", "json", output=True, text_suffixes=CONFIG_SUFFIXES)(func)


def _stand_in(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values:
        bdf, sep, file = v.partition("=")
        if not sep or not bdf or not file.startswith("/"):
            raise click.BadParameter(f"{v!r}: expected BDF=/absolute/device/file", ctx=ctx, param=param)
        out.append((bdf, file))
    return tuple(out)


@click.group("emit")
def emit_group() -> None:
    """Write scheduler configuration from the node's topology: Slurm, kubelet, node-feature-discovery, DRA.

    Everything is printed (or written with -o), nothing is applied. Works on the live node and on
    --root trees and snapshots alike.
    """


@emit_group.command("slurm")
@click.option("--node-name", default=None, metavar="NAME",
              help="NodeName to write [default: the root's short hostname, else NODE].")
@click.option("--reserve-cores", type=Count(0, MAX_COUNT), default=0, show_default=True,
              help="Cores per NUMA node for the system: adds CpuSpecList (Slurm abstract CPU ids) and MemSpecLimit.")
@click.option("--reserve-memory", type=Count(1, MAX_MIB), default=None, metavar="MIB",
              help="MemSpecLimit in MiB [default with --reserve-cores: 2048].")
@click.option("--numa-as-socket", is_flag=True,
              help="Number sockets by NUMA node (for SlurmdParameters=numa_node_as_socket).")
@click.option("--nic-gres", is_flag=True, help="Also write Name=nic lines for RDMA NICs (/dev/infiniband/uverbsN).")
@click.option("--allow-ecores", is_flag=True,
              help="Hybrid x86: count E-cores, for SlurmdParameters=allow_ecores (slurmd >= 23.02 drops them).")
@click.option("--stand-in-gpu", "stand_ins", multiple=True, metavar="BDF=FILE", callback=_stand_in,
              help="Test a Slurm set-up on a node without GPUs: a gpu line for PCI device BDF with File=FILE and "
                   "Cores= from its NUMA node, labelled a stand-in. Repeatable.")
@_formats
@click.pass_obj
def slurm_cmd(app: App, node_name: str | None, reserve_cores: int, reserve_memory: int | None,
              numa_as_socket: bool, nic_gres: bool, allow_ecores: bool, stand_ins: tuple[tuple[str, str], ...],
              fmt: str, output: Path | None) -> None:
    """The slurm.conf NodeName line and gres.conf lines (one per GPU, Cores= in Slurm's abstract numbering)."""
    from numatune.commands.emit import slurm_output

    deliver(app, slurm_output(app.host, fmt, name=node_name, reserve_cores=reserve_cores,
                             reserve_memory_mib=reserve_memory, numa_as_socket=numa_as_socket, nic_gres=nic_gres,
                             allow_ecores=allow_ecores, stand_ins=stand_ins), output, fmt)


@emit_group.command("kubelet")
@click.option("--reserve-cores", type=Count(0, MAX_COUNT), default=1, show_default=True,
              help="Cores per NUMA node for reservedSystemCPUs (where irq plan puts interrupts).")
@click.option("--kube-reserved", type=Count(0, MAX_MIB), default=1024, show_default=True, metavar="MIB",
              help="kubeReserved memory in MiB.")
@click.option("--system-reserved", type=Count(0, MAX_MIB), default=1024, show_default=True, metavar="MIB",
              help="systemReserved memory in MiB.")
@click.option("--topology-policy", type=click.Choice(("best-effort", "restricted", "single-numa-node")),
              default="restricted", show_default=True, help="topologyManagerPolicy.")
@click.option("--scope", type=click.Choice(("container", "pod")), default="pod", show_default=True,
              help="topologyManagerScope.")
@_formats
@click.pass_context
def kubelet_cmd(ctx: click.Context, reserve_cores: int, kube_reserved: int, system_reserved: int,
                topology_policy: str, scope: str, fmt: str, output: Path | None) -> None:
    """A KubeletConfiguration fragment: static CPU manager, topology manager, Static memory manager."""
    from click.core import ParameterSource

    from numatune.commands.emit import kubelet_output

    app: App = ctx.obj
    explicit = ctx.get_parameter_source("reserve_cores") != ParameterSource.DEFAULT  # the default on 1 core: a note
    deliver(app, kubelet_output(app.host, fmt, refuse_impossible=explicit, reserve_cores=reserve_cores,
                               kube_reserved_mib=kube_reserved, system_reserved_mib=system_reserved,
                               topology_policy=topology_policy, scope=scope),
           output, fmt)


@emit_group.command("nfd")
@_formats
@click.pass_obj
def nfd_cmd(app: App, fmt: str, output: Path | None) -> None:
    """A node-feature-discovery local feature file: NUMA nodes, GPUs per node, GPU-NIC path, CXL capacity and tier."""
    from numatune.commands.emit import nfd_output

    deliver(app, nfd_output(app.host, fmt), output, fmt)


@emit_group.command("dra")
@click.option("--gpus", "count", type=Count(1, MAX_COUNT), default=None, metavar="N",
              help="GPUs per claim, each with a NIC of its own while the node's NICs last [default: every GPU of "
                   "the node].")
@click.option("--numa-form", "form", type=click.Choice(("scalar", "list")), default="scalar", show_default=True,
              help="numaNode as the cluster publishes it: list needs the DRAListTypeAttributes feature gate.")
@click.option("--gpu-class", default=None, metavar="NAME",
              help="DeviceClass of the GPU driver [default: gpu.nvidia.com, gpu.amd.com or gpu.intel.com by vendor].")
@click.option("--nic-class", default="dranet", show_default=True, metavar="NAME",
              help="DeviceClass of the NIC driver (dranet installs none: the default's is written with the "
                   "templates, selecting dranet's NICs with RDMA).")
@click.option("--name", default=None, metavar="NAME",
              help="The template's name [default: gpu-nic-pairs-N]; split templates add -1, -2, ...")
@_formats
@click.pass_obj
def dra_cmd(app: App, count: int | None, form: str, gpu_class: str | None, nic_class: str, name: str | None,
            fmt: str, output: Path | None) -> None:
    """Kubernetes DRA: the standard attributes (pciBusID, pcieRoot, numaNode) each device's driver should publish,
    and a ResourceClaimTemplate that gives each GPU a NIC under its root complex, else on its NUMA node."""
    from numatune.commands.emit import dra_output

    deliver(app, dra_output(app.host, fmt, form=form, count=count, gpu_class=gpu_class, nic_class=nic_class,
                           name=name), output, fmt)
