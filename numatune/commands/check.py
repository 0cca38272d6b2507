"""`numatune check` as a library call: read the node through a Host, run every rule group that can
run on it, then a policy's expectations. The CLI only parses options; `check_report` renders, for the
click command and the click-free entry point (`numatune.entry`) alike. The policy module (TOML,
dataclasses, typing) is imported only when there is a policy.
"""

from __future__ import annotations

from numatune.errors import ParseError
from numatune.model._record import record
from numatune.model.check import CheckResult, IrqPlacement
from numatune.model.findings import Severity
from numatune.model.topology import Topology
from numatune.system.host import Host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from numatune.analysis.policy import Policy
    from numatune.model.irq import IrqReport


def load_policy(path: str | Path) -> Policy:
    """Read a policy file (a missing or unreadable one is one line, exit 3) and validate it."""
    from numatune.analysis.policy import parse_policy
    from numatune.system.infile import load_document, read_text

    text = read_text(path, "policy")
    return parse_policy(load_document(text, f"policy {path}", "toml"), str(path))


def fail_level(option: str | None, policy: Policy | None) -> Severity:
    """--fail-on, else the policy's check.fail_on, else warning."""
    if option is not None:
        return Severity(option)
    if policy is not None and policy.fail_on is not None:
        return policy.fail_on
    return Severity.WARNING


def run_checks(host: Host, policy: Policy | None, pids: Sequence[int] = (),
               sched: SchedFiles | None = None) -> tuple[list[CheckResult], Topology]:
    """(results with the policy's ignore/severity applied and superseded findings dropped, topology)."""
    from numatune.analysis.check import supersede, topology_results
    from numatune.live.enrich import read_inspect_topology

    topo = read_inspect_topology(host, None, names=False)  # no finding names a device by its model
    results = topology_results(topo)
    reserved = (policy.get("irq.rank_cpus") if policy is not None else None) or frozenset()
    irq_results, irq_report, irq_note = _irq_results(host, topo, reserved)
    results += irq_results
    if pids:
        results += _audit_results(host, topo, pids)
    if sched is not None and sched.any:
        results += scheduler_results(host, topo, sched)
    if policy is None:
        return supersede(results), topo
    from numatune.analysis.policy import PolicyFacts, apply_overrides, evaluate_policy

    version, note = None, ""
    if policy.get("tools.numactl_min_version") is not None:
        version, note = numactl_version(host)
    results += evaluate_policy(policy, topo, PolicyFacts(version, note, _placements(irq_report), irq_note))
    return apply_overrides(supersede(results), policy), topo


def check_report(host: Host, source: str, policy: Policy | None = None, policy_name: str | None = None,
                 pids: Sequence[int] = (), fail_on: str | None = None, fmt: str = "text",
                 verbose: bool = False, sched: SchedFiles | None = None) -> tuple[str, bool, list[tuple[str, str]]]:
    """(report text, whether it fails, skipped (subject, reason) pairs): what `check` prints and exits on."""
    from numatune.analysis.check import fails

    level = fail_level(fail_on, policy)
    results, topo = run_checks(host, policy, pids, sched)
    from numatune.readers import host_skipped

    skipped = host_skipped(host, topo.skipped)  # and what irq's and audit's readers could not read
    if fmt == "json":
        from numatune.render.check_json import check_document
        from numatune.render.envelope import dumps

        text = dumps(check_document(source, policy_name, level, results, skipped)) + "\n"
    elif fmt == "junit":
        from numatune.render.junit import check_junit

        text = check_junit(source, level, results)
    else:
        from numatune.model.order import device_names
        from numatune.render.check_text import render_check_text

        text = render_check_text(source, policy_name, level, results, verbose=verbose,
                                 names=device_names(topo.devices))
    return text, fails(results, level), [(s.subject, s.reason) for s in skipped]


def _irq_results(host: Host, topo: Topology, reserved: frozenset[int]):  # noqa: ANN202
    """irq's rules when this root has /proc/interrupts; else one skipped result saying why.

    `reserved`: the policy's rank cores, so irq's own rule about IRQs on rank cores runs too.
    """
    from numatune.analysis.check import grouped_results

    if not host.exists("/proc/interrupts"):
        note = "this root has no /proc/interrupts"
        return [CheckResult("irq.all", "irq", "IRQ placement rules", skipped=note)], None, note
    from numatune.analysis.irq import irq_findings
    from numatune.readers.irqs import read_irq_report

    report = read_irq_report(host, topo)
    note = "" if report.has_proc_irq else "this root has no /proc/irq (IRQ affinity unknown)"
    return grouped_results("irq", irq_findings(topo, report, reserved), "IRQ placement rules"), report, note


@record
class SchedFiles:
    """Scheduler configuration files to check against the node (`check --slurm-conf/--gres-conf/--kubelet-config`)."""

    slurm_conf: str | None = None
    gres_conf: str | None = None
    kubelet_config: str | None = None
    node_name: str | None = None
    resource_slices: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.slurm_conf or self.gres_conf or self.kubelet_config or self.resource_slices)


def scheduler_results(host: Host, topo: Topology, files: SchedFiles) -> list[CheckResult]:
    """The scheduler codes (analysis.scheduler's and analysis.dra's): each file against what `numatune emit`
    derives from this node (one result per file)."""
    from numatune.analysis.scheduler import check_gres, check_kubelet, check_slurm_node
    from numatune.errors import InputError
    from numatune.plan.slurm import first_host, in_hostlist
    from numatune.readers import schedconf

    out: list[CheckResult] = []
    if files.slurm_conf or files.gres_conf:
        from numatune.commands.emit import node_name, slurm_emit

        params = schedconf.slurmd_parameters(files.slurm_conf) if files.slurm_conf else set()
        layout_opts = {"numa_as_socket": "numa_node_as_socket" in params, "allow_ecores": "allow_ecores" in params}
        e = slurm_emit(host, topo, name=files.node_name, **layout_opts)
        name = files.node_name or node_name(host)
        if files.slurm_conf:
            lines = schedconf.slurm_node_lines(files.slurm_conf)
            mine = [(n, p) for n, p in lines if in_hostlist(name, p["nodename"])]
            if not mine and len(lines) == 1:
                mine = lines  # one node line: it is this node's, whatever the hostname in the root says
            if not mine:
                raise InputError(f"{files.slurm_conf} has no NodeName line for {name!r}",
                                 hint="give the node's name with --node-name")
            number, node = mine[-1]
            name = files.node_name or (name if in_hostlist(name, node["nodename"])
                                       else first_host(node["nodename"]) or name)
            e = slurm_emit(host, topo, name=name, **layout_opts)
            own = schedconf.slurm_node_tokens(files.slurm_conf).get(number, [])
            found = list(check_slurm_node(number, node, e.node, e.layout, e.memory_mib, files.slurm_conf, own))
            out.append(CheckResult("scheduler.slurm_conf", "scheduler", f"slurm.conf node line of {name}",
                                   tuple(found)))
        if files.gres_conf:
            found = list(check_gres(schedconf.gres_lines(files.gres_conf), e.gres, e.layout, name, files.gres_conf))
            out.append(CheckResult("scheduler.gres_conf", "scheduler", f"gres.conf GPU lines of {name}",
                                   tuple(found)))
    if files.kubelet_config:
        doc = schedconf.load_kubelet_config(files.kubelet_config)
        found = list(check_kubelet(doc, topo))
        out.append(CheckResult("scheduler.kubelet_config", "scheduler", "kubelet CPU, memory and topology managers",
                               tuple(found)))
    if files.resource_slices:
        out.append(resource_slice_result(host, topo, files.resource_slices, files.node_name))
    return out


def resource_slice_codes() -> str:
    """The codes `check --resource-slices` reports, "NT540-NT547", from the rule module that registers them."""
    from numatune.analysis import dra
    from numatune.analysis.codes import code_range

    return code_range(dra)


MAX_NAMED = 8  # the nodes a slice file's error names (a cluster's file names thousands)
NODE_MAX_DEVICES = 16_384  # devices of one node's slices checked at most (128 full slices)


def resource_slice_result(host: Host, topo: Topology, path: str, name: str | None) -> CheckResult:
    """The standard attributes this node's ResourceSlices publish against the node's own (the codes of
    analysis.dra, see `resource_slice_codes`)."""
    from numatune.analysis.dra import check_slices, may_offer, node_devices, over_limit, slice_nodes
    from numatune.commands.emit import node_name
    from numatune.errors import InputError
    from numatune.plan.dra import NUMA_NODE, dra_plan
    from numatune.readers import schedconf

    slices = schedconf.load_resource_slices(path)  # its structure typed on reading
    name = name or node_name(host)
    hint = "give the output of `kubectl get resourceslices -o yaml`"
    mine = []
    total = 0
    for s in slices:
        if not may_offer(s, name):
            continue
        spec = s.get("spec") if isinstance(s.get("spec"), dict) else {}
        meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
        slice_name = str(meta.get("name", "?"))
        over = over_limit(s)
        if over is not None:
            count, limit, why = over
            raise InputError(f"{path}: ResourceSlice {slice_name} lists {count:,} devices; the API allows at most "
                             f"{limit} in one slice{f' where {why}' if why else ''}, so no cluster holds it",
                             hint=hint)
        schedconf.node_selection_fields(path, s)  # allNodes and nodeSelector typed before they are evaluated
        devices = node_devices(s, name)  # at most the API's 128 (over_limit), so the bound below stops the walk
        if devices is None:
            continue
        total += len(devices)
        if total > NODE_MAX_DEVICES:
            break  # refused below, before another slice is read
        mine.append((slice_name, str(spec.get("driver", "?")), devices))
    if not mine:
        nodes = sorted(set().union(*(slice_nodes(s) for s in slices)))
        shown = ", ".join(nodes[:MAX_NAMED]) + (f" and {len(nodes) - MAX_NAMED} more" if len(nodes) > MAX_NAMED else "")
        raise InputError(f"{path} has no ResourceSlice for node {name!r}"
                         + (f" (its slices are for {shown})" if nodes else
                            " (none of its slices or devices names a node or selects this one: network-attached "
                            "devices of other nodes only)"),
                         hint="give the node's name with --node-name")
    if total > NODE_MAX_DEVICES:
        raise InputError(f"{path}: the ResourceSlices of node {name!r} list at least {total:,} devices; numatune "
                         f"checks at most {NODE_MAX_DEVICES:,} for one node (YAML aliases can repeat one slice "
                         "without end)",
                         hint=hint)
    listed = any(isinstance(d.attributes.get(NUMA_NODE), dict) and "ints" in d.attributes[NUMA_NODE]
                 for _, _, devs in mine for d in devs)
    plan = dra_plan(topo, form="list" if listed else "scalar")  # the claim `emit dra` writes, in the form published
    result = check_slices(mine, plan.devices, topo, needs=(plan.match,) if plan.match else ())
    drivers = sorted({d for _, d, _ in mine})
    what = (f"DRA ResourceSlices of {name} ({', '.join(drivers)}): {result.checked} device(s) with a PCI address "
            "against the node's standard attributes")
    if result.offered:
        what += f" ({result.offered} of them offered by allNodes or a nodeSelector rather than a nodeName)"
    if result.elsewhere:
        what += (f"; {result.elsewhere} offered by allNodes or a nodeSelector with a PCI address "
                 "that is no device of this node, not judged")
    if result.by_labels:
        what += (f"; {result.by_labels} selected by node labels numatune cannot read (a saved tree holds none): "
                 "taken as this node's where their PCI address is")
    if result.unaddressed:
        what += f"; {result.unaddressed} without a PCI address not checkable"
    if result.numa_unknown:
        what += (f"; the numaNode of {result.numa_unknown} not checkable (this tree holds no numa_node for them: "
                 "unknown, not -1)")
    skipped = None if result.checked else (
        f"the ResourceSlices of {name} publish no device" if not (result.unaddressed or result.elsewhere) else
        f"none of the {result.unaddressed + result.elsewhere} published device(s) offered to {name} has a PCI "
        "address of this node (resource.kubernetes.io/pciBusID or a driver attribute holding one)")
    return CheckResult("scheduler.resource_slices", "scheduler", what, result.findings, skipped)


def _placements(report: IrqReport | None) -> tuple[IrqPlacement, ...] | None:
    if report is None or not report.has_proc_irq:
        return None
    return tuple(IrqPlacement(irq.irq, dev.bdf, dev.label, frozenset(irq.where))
                 for dev in report.devices for irq in dev.irqs if irq.where is not None)


def _audit_results(host: Host, topo: Topology, pids: Sequence[int]) -> list[CheckResult]:
    from numatune.analysis.check import grouped_results
    from numatune.analysis.jobtree import job_findings
    from numatune.readers.procs import rank_ancestors, read_process

    procs = [read_process(host, pid, topo) for pid in pids]
    findings = job_findings(topo, procs, rank_ancestors(host, procs, topo))
    return grouped_results("audit", findings, "process locality rules")


NUMACTL_SAVED = "/numatune/numactl.json"  # in a snapshot's root: what numactl_version said where it was taken


def numactl_version(host: Host) -> tuple[str | None, str]:
    """numactl's installed version on the live node (or as a snapshot recorded it), and why not when
    it cannot be known."""
    if not host.is_live:
        from numatune.model.document import Doc
        from numatune.system.infile import load_document

        text = host.read_optional(NUMACTL_SAVED)
        if text is None:
            return None, "numactl's version is only known on the live node, not in a saved root"
        doc = load_document(text, NUMACTL_SAVED)
        if not isinstance(doc, dict) or "note" not in doc:
            raise ParseError(NUMACTL_SAVED, "not a numatune record of numactl's version")
        record = Doc(doc, NUMACTL_SAVED)
        return record.str("version", most=200), record.str("note", required=True, most=1000)
    from numatune.live.bind import installed_numactl_version, which

    path = which("numactl")
    if path is None:
        return None, "numactl is not installed (not on PATH)"
    version = installed_numactl_version(path)
    if version is None:
        return None, "numactl is installed but its version could not be found (no --version, dpkg or rpm)"
    return version, ""


def numactl_record(host: Host) -> bytes:
    """What a snapshot stores as NUMACTL_SAVED, so `check --policy` judges numactl on replay as live."""
    import json

    version, note = numactl_version(host)
    return (json.dumps({"version": version, "note": note}) + "\n").encode()
