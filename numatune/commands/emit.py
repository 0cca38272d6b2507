"""`numatune emit` and the scheduler checks as library calls: read the node through a Host once, derive
what Slurm, kubelet and node-feature-discovery should be told. The CLI only parses options and renders.
"""

from __future__ import annotations

import re

from numatune.model.topology import Topology
from numatune.plan.dra import DraEmit
from numatune.plan.slurm import GresLine, NodeLine, SlurmEmit, SlurmLayout
from numatune.system.host import Host

DEFAULT_NODE_NAME = "NODE"


def node_name(host: Host) -> str:
    """The short hostname slurmd registers under (from the root's /proc/sys/kernel/hostname or /etc/hostname)."""
    for path in ("/proc/sys/kernel/hostname", "/etc/hostname"):
        text = (host.read_optional(path) or "").strip()
        if text:
            return text.split(".")[0]
    return DEFAULT_NODE_NAME


def read_emit_topology(host: Host) -> Topology:
    from numatune.live.enrich import read_inspect_topology
    from numatune.readers.pci import pci_ids_from_env

    return read_inspect_topology(host, pci_ids_from_env())


def _as(fmt: str, doc: dict, text: str) -> str:
    """The text of the format asked for: the configuration itself, or the numatune.emit/1 document."""
    if fmt == "json":
        from numatune.render.envelope import dumps

        return dumps(doc) + "\n"
    return text


MAX_CLOSE_PAIRS = 64  # named in the note; a real node has at most a few dozen GPU pairs under one switch


def _close_pairs(gpus: list, index: list[int]) -> list[str]:
    """"0-1 PIX" for each GPU pair under one PCIe switch (PIX or PXB: the same host bridge and root port), in
    the order pair by pair gives, at most MAX_CLOSE_PAIRS and then how many in all: only the GPUs of one root
    port are compared (2,000 GPUs were 2 million `connection`s and a list search each)."""
    from bisect import bisect_right

    from numatune.model.paths import connection

    def port(g) -> tuple[str, str] | None:  # noqa: ANN001 - a PciDevice
        return (g.host_bridge, g.ancestors[0]) if g.host_bridge and g.path and g.ancestors else None

    ports: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(gpus):
        if port(g) is not None:
            ports.setdefault(port(g), []).append(i)
    out: list[str] = []
    for i, a in enumerate(gpus):
        mates = ports.get(port(a), [])
        for k in range(bisect_right(mates, i), len(mates)):  # the later GPUs of its port, until the note is full
            if len(out) == MAX_CLOSE_PAIRS:
                break
            j = mates[k]
            kind = connection(a, gpus[j])
            if kind in ("PIX", "PXB"):
                out.append(f"{index[i]}-{index[j]} {kind}")
    total = sum(len(p) * (len(p) - 1) // 2 for p in ports.values())  # every pair of one port is PIX or PXB
    return out + ([f"... {total:,} pairs in all"] if total > len(out) else [])


def slurm_output(host: Host, fmt: str, **options) -> str:  # noqa: ANN003 - slurm_emit's keywords
    """`emit slurm`: the slurm.conf node line and gres.conf lines, or their JSON."""
    from numatune.render.emit_out import slurm_document, slurm_text

    e = slurm_emit(host, read_emit_topology(host), **options)
    return _as(fmt, slurm_document(e), slurm_text(e))


def kubelet_output(host: Host, fmt: str, *, refuse_impossible: bool = False,
                   **options) -> str:  # noqa: ANN003 - kubelet_plan's keywords
    """`emit kubelet`: the KubeletConfiguration fragment (isolated CPUs never reserved), or its JSON.
    `refuse_impossible`: the user typed --reserve-cores, so one that takes every core of a node is exit 2
    (plan.irq's rule, as emit slurm and irq plan apply it); kubelet's default there is a note instead."""
    from numatune.plan.irq import refuse_impossible_reserve
    from numatune.plan.kubelet import kubelet_plan
    from numatune.readers.irqs import read_isolated
    from numatune.render.emit_out import kubelet_document, kubelet_text

    topo = read_emit_topology(host)
    isolated = read_isolated(host)
    if refuse_impossible:
        refuse_impossible_reserve(topo, options.get("reserve_cores", 0), isolated)
    plan = kubelet_plan(topo, isolated=isolated, **options)
    return _as(fmt, kubelet_document(plan.config, plan.notes, topo.source),
               kubelet_text(plan.config, plan.notes, topo.source))


def nfd_output(host: Host, fmt: str) -> str:
    """`emit nfd`: the node-feature-discovery feature file, or its JSON."""
    from numatune.plan.nfd import features_file, nfd_labels, omitted
    from numatune.render.emit_out import nfd_document

    topo = read_emit_topology(host)
    labels = nfd_labels(topo)
    text = features_file(labels, topo.source, omitted(topo))
    return _as(fmt, nfd_document(labels, text, topo.source), text)


def dra_output(host: Host, fmt: str, **options) -> str:  # noqa: ANN003 - dra_emit's keywords
    """`emit dra`: the standard attributes, the pairs and the claim template, or their JSON."""
    from numatune.render.emit_out import dra_document, dra_text

    e = dra_emit(host, **options)
    return _as(fmt, dra_document(e), dra_text(e))


#: A DNS subdomain (RFC 1123), what Kubernetes accepts as a ResourceClaimTemplate's and a DeviceClass's name.
_K8S_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def dra_emit(host: Host, *, form: str = "scalar", count: int | None = None, gpu_class: str | None = None,
             nic_class: str = "dranet", name: str | None = None) -> DraEmit:
    """`emit dra`: the node's standard DRA attributes and a GPU+NIC claim template (a count above the node's
    GPUs is the user's error, exit 2)."""
    from numatune.errors import UsageError
    from numatune.plan.dra import K8S_NAME_MAX, dra_plan

    for option, value in (("--name", name), ("--gpu-class", gpu_class), ("--nic-class", nic_class)):
        if value is not None and not _K8S_NAME.fullmatch(value):
            raise UsageError(f"{option} {value[:80]!r}: not a Kubernetes object name "
                             "(lower-case letters, digits, '-' and '.', starting and ending with a letter or "
                             "digit, at most 253 characters)")
    topo = read_emit_topology(host)
    try:
        plan = dra_plan(topo, form=form, count=count, gpu_device_class=gpu_class, nic_device_class=nic_class,
                        name=name)
    except ValueError as exc:
        raise UsageError(f"--gpus {count}: {exc}") from None
    names = [c["metadata"]["name"] for c in plan.claims]
    longest = max(names, key=len, default="")
    if name is not None and len(longest) > K8S_NAME_MAX:  # split templates are NAME-1, NAME-2, ...
        raise UsageError(f"--name {name[:80]!r}: {len(plan.claims)} templates are written ({plan.count} GPUs), "
                         f"named NAME-1 to NAME-{len(plan.claims)}: {len(longest)} characters, more than the "
                         f"{K8S_NAME_MAX} Kubernetes takes; give a name of at most "
                         f"{K8S_NAME_MAX - (len(longest) - len(name))} characters")
    return plan


def slurm_emit(host: Host, topo: Topology, *, name: str | None = None, reserve_cores: int = 0,
               reserve_memory_mib: int | None = None, numa_as_socket: bool = False,
               nic_gres: bool = False, allow_ecores: bool = False,
               stand_ins: tuple[tuple[str, str], ...] = ()) -> SlurmEmit:
    from numatune.plan.cores import cluster_summary
    from numatune.plan.slurm import (
        autodetect_note,
        device_cores,
        fabric_link_counts,
        gpu_memory_kib,
        gpus_in_bus_order,
        gres_lines,
        housekeeping_cpus,
        real_memory_mib,
        slurm_layout,
        slurmd_ecores,
        too_small_to_reserve,
    )
    from numatune.readers.sched import read_cpu_groups, read_meminfo_total_kib, read_render_nodes, read_uverbs

    layout = slurm_layout(topo, read_cpu_groups(host, topo), numa_as_socket=numa_as_socket, allow_ecores=allow_ecores)
    total_kib = read_meminfo_total_kib(host)
    memory = real_memory_mib(topo, total_kib)
    detected = total_kib // 1024 if total_kib is not None else memory  # what slurmd registers (NT521's limit)
    notes = list(layout.notes)
    gpu_kib = gpu_memory_kib(topo)
    if gpu_kib:
        held = _fmt([n.id for n in topo.nodes if n.kind == "gpu" and n.memory_total_kib])
        notes.append(f"RealMemory leaves out GPU memory nodes {held} ({gpu_kib // 1024} MiB of GPU HBM the kernel "
                     "counts in MemTotal, and slurmd -C reports): jobs' --mem is host memory, from the nodes with "
                     "CPUs; slurmd accepts a RealMemory below what it detects")
    if layout.problem:
        notes.append(f"no Sockets/CoresPerSocket or Cores=: {layout.problem}")
    spec: tuple[int, ...] = ()
    mem_spec = None
    if reserve_cores:
        abs_of = layout.abstract_cpu()
        from numatune.plan.irq import refuse_impossible_reserve
        from numatune.readers.irqs import read_isolated

        isolated = read_isolated(host)
        refuse_impossible_reserve(topo, reserve_cores, isolated)
        cpus = housekeeping_cpus(topo, reserve_cores, isolated)
        spec = tuple(sorted(abs_of[c] for c in cpus if c in abs_of))
        small = too_small_to_reserve(topo, reserve_cores, isolated)
        if small:
            notes.append(f"node(s) {_fmt(small)} have no more than {reserve_cores} core(s): none of their CPUs is in "
                         "CpuSpecList (reserving all would leave jobs no CPU there)")
        mem_spec = reserve_memory_mib if reserve_memory_mib is not None else 2048
        notes.append(f"CpuSpecList: Linux CPUs {_fmt(cpus)} ({reserve_cores} core(s) of each node with CPUs: the "
                     "first, on hybrid CPUs the least performant) as Slurm abstract CPU ids; MemSpecLimit="
                     f"{mem_spec} MiB for slurmd and system daemons (needs TaskPlugin=task/cgroup and "
                     "ConstrainRAMSpace for the memory part)")
        missing = {c for c in cpus if c not in abs_of}
        if missing and not allow_ecores and missing <= slurmd_ecores(topo):
            notes.append(f"reserved CPUs {_fmt(sorted(missing))} are E-cores slurmd leaves out: jobs never run "
                         "there, so CpuSpecList does not name them")
        elif missing:
            notes.append("some reserved CPUs have no Slurm abstract id (see the notes above): CpuSpecList is partial")
    elif reserve_memory_mib is not None:
        mem_spec = reserve_memory_mib
    gpus = gpus_in_bus_order(topo)
    standing = _stand_in_lines(topo, layout, stand_ins, first_index=len(gpus))
    node = NodeLine(name or node_name(host), layout.cpus, 0 if layout.problem else len(layout.sockets),
                    layout.cores_per_socket, layout.threads_per_core,
                    memory, len(gpus) + len(standing), spec, mem_spec)
    if layout.unit == "numa" and not layout.problem:
        notes.append("sockets are NUMA nodes: needs SlurmdParameters=numa_node_as_socket in slurm.conf (hwloc 2)")
    links, links_note = fabric_link_counts(topo)
    lines = tuple(gres_lines(topo, layout, read_render_nodes(host, topo.devices), links)) + standing
    same: dict[str, list[str]] = {}
    for g in lines:
        if g.note and not g.stand_in:
            same.setdefault(g.note, []).append(f"{g.index} ({g.bdf})")
    notes += [f"GPU{'s' if len(who) > 1 else ''} {', '.join(who)}: {note}" for note, who in same.items()]
    if gpus and all(g.cores for g in lines):
        split = [g for g in gpus if _node_narrower_than_socket(topo, layout, g.node)]
        if split:
            notes.append("GPUs " + ", ".join(g.bdf for g in split) + " sit on a NUMA node smaller than its socket "
                         "(sub-NUMA clustering): Cores= must name the whole socket, or use --numa-as-socket with "
                         "SlurmdParameters=numa_node_as_socket for node-level binding")
    clusters = cluster_summary(topo)
    if clusters and not layout.problem:
        notes.append(clusters + (
            ": with --numa-as-socket Slurm's sockets are these nodes, so a task bound to a socket "
            "(--cpu-bind=sockets) gets one cluster's cores and memory; a job with fewer tasks per socket than "
            "clusters leaves the others idle: give such jobs a partition of nodes without numa_node_as_socket"
            if layout.unit == "numa" else
            ": a task bound to one NUMA node (srun --cpu-bind=ldoms, or numatune launch's default --cpu-bind node) "
            "gets one cluster's cores and memory; with fewer tasks per socket than clusters bind them to sockets "
            "(srun --cpu-bind=sockets; numatune launch --cpu-bind socket --mem-policy socket)"))
    close = _close_pairs(gpus, [line.index for line in lines])
    if links_note:
        notes.append(links_note)
    elif len(gpus) > 1 and not any(g.links for g in lines):
        notes.append("Links= omitted: no NVLink/XGMI link counts are known here (Slurm's Links= counts direct GPU "
                     "links; AutoDetect gives 0 for PCIe-only pairs)"
                     + (f"; GPUs under one PCIe switch: {', '.join(close)}" if close else ""))
    nics: list[GresLine] = []
    if nic_gres:
        uverbs = read_uverbs(host, topo.nics)
        for i, nic in enumerate(sorted((n for n in topo.nics if n.bdf in uverbs), key=lambda d: d.bdf)):
            cores, why = device_cores(topo, layout, nic)
            nics.append(GresLine(i, nic.bdf, "nic", f"/dev/infiniband/{uverbs[nic.bdf]}", cores,
                                 note=f"no Cores=: {why}" if why else ""))
        if nics:
            notes.append("Name=nic lines: jobs ask --gres=nic:1 (with --gres-flags=enforce-binding) to get the RDMA "
                         "NIC on their socket; the device cgroup then limits them to that uverbs file")
        else:
            notes.append("--nic-gres: no NIC with an InfiniBand verbs device (infiniband_verbs/uverbsN) in this root")
    auto = autodetect_note(topo, lines, one_socket=len(layout.sockets) == 1)
    if auto and gpus and any(_node_narrower_than_socket(topo, layout, g.node) for g in gpus):
        auto = ("AutoDetect would report each GPU's NUMA-node CPUs, which are not whole sockets here (sub-NUMA "
                "clustering): slurmd rejects that affinity unless SlurmdParameters=numa_node_as_socket; keep these "
                "lines, or use --numa-as-socket with that parameter")
    return SlurmEmit(topo.source, layout, node, lines, tuple(nics), auto, tuple(notes), detected)


def _stand_in_lines(topo: Topology, layout: SlurmLayout, stand_ins: tuple[tuple[str, str], ...],
                    first_index: int) -> tuple[GresLine, ...]:
    """gres.conf gpu lines for PCI devices that stand in for GPUs (`--stand-in-gpu BDF=FILE`): Cores= from the
    device's NUMA node exactly as for a GPU, File= the given file, each line labelled a stand-in."""
    from numatune.errors import InputError
    from numatune.model.resolve import normalize_bdf
    from numatune.plan.slurm import device_cores

    out = []
    for i, (bdf_text, file) in enumerate(stand_ins):
        bdf = normalize_bdf(bdf_text)
        dev = next((d for d in topo.devices if d.bdf == bdf), None)
        if dev is None:
            raise InputError(f"--stand-in-gpu {bdf_text}: no such PCI device in {topo.source}")
        cores, why = device_cores(topo, layout, dev)
        note = (f"stand-in: {file} is not a GPU; PCI device {dev.bdf} ({dev.kind}, node "
                f"{'unknown' if dev.node is None else dev.node}) stands in for one, to test Cores= binding on a node "
                "without GPUs" + (f"; no Cores=: {why}" if why else ""))
        out.append(GresLine(first_index + i, dev.bdf, "gpu", file, cores, note=note, stand_in=True))
    return tuple(out)


def _node_narrower_than_socket(topo: Topology, layout: SlurmLayout, node_id: int | None) -> bool:
    from numatune.plan.slurm import cpu_node_of

    if layout.unit != "package" or layout.problem:
        return False
    nid = cpu_node_of(topo, node_id)
    node = topo.node(nid) if nid is not None else None
    if node is None:
        return False
    online = {c.id for c in topo.cpus if c.online}
    mine = set(node.cpus) & online
    sockets = {layout.socket_of_cpu(c) for c in mine}
    socket_cpus = {cpu for s in sockets if s is not None for core in layout.sockets[s] for cpu in core.cpus}
    return bool(mine) and mine != socket_cpus


def _fmt(cpus: tuple[int, ...]) -> str:
    from numatune.cpulist import format_cpulist

    return format_cpulist(cpus) or "none"
