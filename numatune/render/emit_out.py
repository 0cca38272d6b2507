"""`numatune emit` output: the configuration text itself (notes as comments, so it can be pasted or
redirected as is) and the `numatune.emit/1` JSON document (docs/json-schemas.md)."""

from __future__ import annotations

from typing import Any

from numatune.plan.dra import DraEmit
from numatune.plan.slurm import SlurmEmit
from numatune.render.envelope import envelope


def _comments(notes: tuple[str, ...] | list[str]) -> list[str]:
    return [f"# note: {n}" for n in notes]


def slurm_text(e: SlurmEmit) -> str:
    out = [f"# slurm.conf node line written by numatune emit slurm for {e.source}",
           "# (Slurm's abstract numbering: cores socket by socket, see numatune-emit(1))"]
    if e.gres or e.nic_gres:
        out.append("GresTypes=" + ",".join((["gpu"] if e.gres else []) + (["nic"] if e.nic_gres else [])))
    if e.layout.unit == "numa" and not e.layout.problem:
        out.append("SlurmdParameters=numa_node_as_socket")
    line = e.node.text()
    if e.nic_gres:
        line = line.replace(f"Gres=gpu:{e.node.gpus}", f"Gres=gpu:{e.node.gpus},nic:{len(e.nic_gres)}") if e.node.gpus \
            else f"{line} Gres=nic:{len(e.nic_gres)}"
    out.append(line)
    out += ["", "# gres.conf"]
    if e.autodetect:
        out.append(f"# {e.autodetect}")
    # Slurm requires File= on gpu lines: one without it is written commented out, to be completed by hand
    for g in e.gres + e.nic_gres:
        if g.stand_in:
            out.append(f"# {g.note}")
        out.append(g.text(e.node.name) if g.file else f"# {g.text(e.node.name)}  (File= unknown: complete before use)")
    if not any(not g.stand_in for g in e.gres):
        out.append("# no GPU on this node" + (" (the gpu lines above are stand-ins)" if e.gres else ""))
    out += _comments(e.notes)
    return "\n".join(out) + "\n"


def slurm_document(e: SlurmEmit) -> dict[str, Any]:
    return envelope(
        "emit",
        source=e.source,
        target="slurm",
        text=slurm_text(e),
        node={
            "name": e.node.name, "cpus": e.node.cpus, "sockets": e.node.sockets or None,
            "cores_per_socket": e.node.cores_per_socket if e.node.sockets else None,
            "threads_per_core": e.node.threads_per_core, "real_memory_mib": e.node.real_memory_mib,
            "gpus": e.node.gpus, "cpu_spec_list": list(e.node.cpu_spec), "mem_spec_limit_mib": e.node.mem_spec_mib,
            "line": e.node.text(),
        },
        layout={
            "socket_unit": e.layout.unit,
            "problem": e.layout.problem or None,
            "sockets": [[{"core": c.index, "cpus": list(c.cpus)} for c in s] for s in e.layout.sockets],
        },
        gres=[{"index": g.index, "bdf": g.bdf, "name": g.name, "file": g.file, "cores": list(g.cores),
               "links": list(g.links) or None, "note": g.note or None, "stand_in": g.stand_in,
               "line": g.text(e.node.name)}
              for g in e.gres + e.nic_gres],
        autodetect=e.autodetect or None,
        notes=list(e.notes),
    )


def kubelet_text(config: dict[str, Any], notes: tuple[str, ...], source: str) -> str:
    from numatune.plan.kubelet import to_yaml

    head = [f"# KubeletConfiguration fragment written by numatune emit kubelet for {source}",
            "# merge into the node's kubelet config (e.g. /var/lib/kubelet/config.yaml); changing the CPU or memory",
            "# manager policy needs a drained node and removing cpu_manager_state/memory_manager_state first"]
    return "\n".join(head + _comments(notes)) + "\n" + to_yaml(config)


def kubelet_document(config: dict[str, Any], notes: tuple[str, ...], source: str) -> dict[str, Any]:
    return envelope("emit", source=source, target="kubelet", text=kubelet_text(config, notes, source), config=config,
                    notes=list(notes))


def nfd_document(labels: dict[str, str], text: str, source: str) -> dict[str, Any]:
    return envelope("emit", source=source, target="nfd", text=text, labels=labels, notes=[])


def dra_text(e: DraEmit) -> str:
    """The attribute table and pairings as comments, then the ResourceClaimTemplate: valid YAML as a whole,
    for `kubectl apply -f`."""
    from numatune.plan.dra import PREFIX
    from numatune.plan.kubelet import to_yaml

    head = [f"# DRA standard device attributes (resource.kubernetes.io/*) written by numatune emit dra for {e.source}",
            "# what each device's DRA driver should publish, derived from sysfs by the standard's rules"
            f" (numaNode in {e.form} form)"]
    rows = [("device", "kind", "pciBusID", "pcieRoot", "numaNode")]
    for d in e.devices:
        numa = {"none": "-", "unknown": "?"}.get(d.numa_state) or (
            str(list(d.numa_nodes or (d.numa_node,))) if e.form == "list" else str(d.numa_node))
        rows.append((d.label or "-", d.kind, d.pci_bus_id, d.pcie_root or ("?" if d.pcie_root_unknown else "-"),
                     numa))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = ["# " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if not e.devices:
        table = ["# no GPU, NIC, NVMe, CXL device or accelerator on this node"]
    pairs = [f"# {p.gpu.label}: " + (f"with {p.nic.label or p.nic.bdf} on {p.match.removeprefix(PREFIX)}: "
                                     if p.nic is not None and p.match else "no NIC: ") + p.reason for p in e.pairs]
    if any(d.numa_state == "unknown" or d.pcie_root_unknown for d in e.devices):
        table.append("# -: not to be published (numaNode: numa_node -1, no NUMA affinity); ?: unknown, this tree "
                     "lacks the device's sysfs")
    out = head + table + (["#", "# GPU and NIC pairs:"] + pairs if pairs else []) + _comments(e.notes)
    if not e.claims:
        out.append(f"# no ResourceClaimTemplate: {e.match_reason}")
        return "\n".join(out) + "\n"
    how = (f"matchAttribute {e.match}" if e.match else "no constraint")
    what = "ResourceClaimTemplate" if len(e.claims) == 1 else f"{len(e.claims)} ResourceClaimTemplates"
    if e.nic_count == e.count:
        out.append(f"# {what}: {e.count} GPU(s), each with a NIC by {how}: {e.match_reason}")
    elif e.nic_count:
        out.append(f"# {what}: {e.count} GPU(s) and {e.nic_count} NIC(s) (all the node has), each NIC with a GPU "
                   f"by {how}: {e.match_reason}")
    else:
        out.append(f"# {what}: {e.count} GPU(s) and no NIC: {e.match_reason}")
    for c in e.device_classes:
        out.append(f"# DeviceClass {c['metadata']['name']}: the NIC requests' class, which no driver installs")
    docs = (*e.device_classes, *e.claims)
    return "\n".join(out) + "".join("\n---\n" + to_yaml(c).rstrip("\n") for c in docs) + "\n"


def dra_document(e: DraEmit) -> dict[str, Any]:
    return envelope(
        "emit", source=e.source, target="dra", text=dra_text(e), form=e.form,
        devices=[{"label": d.label, "bdf": d.bdf, "kind": d.kind, "attributes": d.attributes(e.form),
                  "numa_node_list": list(d.numa_nodes) if d.numa_nodes else None,
                  "numa_node_state": d.numa_state,
                  "omitted": {n: why for n, why in d.omitted}} for d in e.devices],
        pairs=[{"gpu": p.gpu.label, "gpu_bdf": p.gpu.bdf, "nic": p.nic.label if p.nic else None,
                "nic_bdf": p.nic.bdf if p.nic else None, "match": p.match, "shared": p.shared, "reason": p.reason}
               for p in e.pairs],
        count=e.count, nic_count=e.nic_count, claim=e.claim, claims=list(e.claims),
        device_classes=list(e.device_classes), match=e.match, match_reason=e.match_reason, notes=list(e.notes))
