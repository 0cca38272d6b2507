"""The live side of `numatune launch`: what this process may use, which tools exist, and the exec.

Reads go through the Host (so a saved root answers the same questions), except the calling process's
own affinity (sched_getaffinity), which only exists live. Applying is sched_setaffinity and
set_mempolicy (ctypes) or numactl/taskset, then execvpe: the process is replaced, so the command's
exit status and signals reach the launcher untouched.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from numatune.cpulist import format_cpulist
from numatune.errors import BindingError, CommandNotExecutable, CommandNotRunnable, NumatuneError, PermissionDenied
from numatune.model.launch import LaunchFacts, LaunchOptions, LaunchPlan, Numactl
from numatune.model.topology import PciDevice, Topology
from numatune.numbers import maybe_int, parse_int
from numatune.system import memsys
from numatune.system.host import Host

ISOLATED = "/sys/devices/system/cpu/isolated"



# -- facts --------------------------------------------------------------------------------------------
def which(name: str) -> str | None:
    """shutil.which without importing shutil (the launch path counts milliseconds)."""
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def probe_numactl(path: str) -> Numactl:
    """Version and policy options: `numactl --version` (2.0.19+ answers), else the usage text it prints."""
    import subprocess

    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        text = out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError):
        return Numactl(path, None, False, False)
    m = re.search(r"([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})", text) if out.returncode == 0 else None
    version = m.group(0) if m else None
    vt = tuple(parse_int(x, "numactl --version") for x in m.groups()) if m else None
    many = "--preferred-many" in text or (vt is not None and vt >= (2, 0, 15))
    weighted = "--weighted-interleave" in text or (vt is not None and vt >= (2, 0, 19))
    return Numactl(path, version, many, weighted)


def installed_numactl_version(path: str) -> str | None:
    """numactl's version: `numactl --version` (2.0.19+), else the package manager's (dpkg, rpm)."""
    import subprocess

    version = probe_numactl(path).version
    if version is not None:
        return version
    for cmd in (["dpkg-query", "-W", "-f=${Version}", "numactl"], ["rpm", "-q", "--qf", "%{VERSION}", "numactl"]):
        if which(cmd[0]) is None:
            continue
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        text = done.stdout.strip()
        if done.returncode == 0 and text:
            return text.split()[-1]
    return None


def cgroup_cpuset(host: Host) -> tuple[frozenset[int] | None, str | None]:
    """cpuset.cpus.effective of this process's cgroup (v2, or v1 cpuset), walking up to the first that has it.

    The path is parsed by the resolver audit uses; one that leaves the hierarchy (a cgroup namespace's
    "/.." path) gives no cpuset rather than an error.
    """
    from numatune.model.resolve import cgroup_cpuset_dirs

    for base, cpus_file, _ in cgroup_cpuset_dirs(host.read_optional("/proc/self/cgroup") or "", "/proc/self/cgroup"):
        logical = f"{base}/{cpus_file}"
        cpus = host.read_cpulist(logical)
        if cpus:
            return cpus, logical
    return None, None


def gather_facts(
    host: Host, environ: Mapping[str, str], *, probe: bool, topo: Topology | None = None,
    devices: Sequence[PciDevice] = (),
) -> LaunchFacts:
    """Everything the plan needs beyond the topology. `probe` runs numactl to learn its options; `topo`
    (for --cpu-bind exclusive, core-complex and cores:N) reads the last-level-cache groups of its online
    CPUs; `devices` (for --nic) the verbs ports of their RDMA devices."""
    from numatune.model.resolve import ENV_KEYS
    from numatune.readers.nodes import read_interleave_weights
    from numatune.readers.settings import read_release

    env = {k: environ[k] for k in ENV_KEYS if k in environ}
    allowed = affinity = mems = None
    source = "every online CPU of the root"
    if host.is_live:
        allowed = affinity = frozenset(os.sched_getaffinity(0))
        source = "sched_getaffinity"
        if env.get("SLURM_JOB_ID"):  # inside srun: those CPUs are the job step's, which launch must keep
            step = f" step {env['SLURM_STEP_ID']}" if env.get("SLURM_STEP_ID") else ""
            source = f"Slurm job {env['SLURM_JOB_ID']}{step}'s CPUs, sched_getaffinity"
        cg, where = cgroup_cpuset(host)
        if cg is not None and not allowed <= cg:
            allowed &= cg
            source += f" ∩ {where}"
        elif cg is not None and allowed == cg and cg != host.read_cpulist("/sys/devices/system/cpu/online"):
            source += f" = the cgroup's {where}"  # the container's or job's cpuset gave this mask (NT411 names it)
        status = host.read_optional("/proc/self/status") or ""
        m = re.search(r"^Mems_allowed_list:\s*(\S+)", status, re.MULTILINE)
        if m:
            from numatune.cpulist import parse_cpulist

            mems = parse_cpulist(m.group(1))
    numactl_path = which("numactl")
    numactl = None
    if numactl_path:
        numactl = probe_numactl(numactl_path) if probe else Numactl(numactl_path, None, False, False)
    return LaunchFacts(
        env=env,
        allowed_cpus=allowed,
        allowed_source=source,
        affinity_cpus=affinity,
        allowed_mems=mems,
        isolated=host.read_cpulist(ISOLATED) or frozenset(),
        kernel=read_release(host),
        numactl=numactl,
        taskset=which("taskset"),
        direct_ok=memsys.supported(),
        current_weights=read_interleave_weights(host),
        cache_groups=_cache_groups(host, topo) if topo is not None else (),
        rdma_ports=read_rdma_ports(host, devices),
    )


def _cache_groups(host: Host, topo: Topology) -> tuple[frozenset[int], ...]:
    from numatune.readers.caches import llc_groups

    return llc_groups(host, [c.id for c in topo.cpus if c.online])


def read_rdma_ports(host: Host, devices: Sequence[PciDevice]) -> dict[str, tuple[int, ...]]:
    """RDMA device -> its verbs port numbers (/sys/class/infiniband/NAME/ports/N); (1,) when unreadable."""
    out = {}
    for d in devices:
        for name in d.rdma:
            where = f"/sys/class/infiniband/{name}/ports"
            ports = sorted(n for n in (maybe_int(p, where) for p in host.listdir(where)) if n is not None and n >= 0)
            out[name] = tuple(ports) or (1,)
    return out


# -- topology and devices (only what launch needs) -------------------------------------------------------
def read_launch_topology(host: Host, *, node_kinds: bool) -> Topology:
    """CPUs and nodes without PCI or the kernel-settings pass (launch is on every rank's start);
    `node_kinds` adds the CXL/DAX scan that tells CXL nodes apart."""
    from numatune.readers.topology import read_topology

    return read_topology(host, devices=False, cxl=node_kinds, settings=False)


def read_launch_devices(host: Host, topo: Topology, bdf: str | None = None, *, nics: bool = False) -> list[PciDevice]:
    """GPUs and accelerators (with NVIDIA UUIDs and AMD KFD nodes), plus the `--gpu` BDF if it is any other
    device, plus the NICs (with their RDMA devices and netdevs) when `nics` (--nic)."""
    from numatune.readers.gpumem import attach_gpu_memory, read_numa_status
    from numatune.readers.kfd import read_kfd
    from numatune.readers.pci import read_pci_devices

    kfd = read_kfd(host)
    devices, _ = read_pci_devices(host, topo.nodes, kfd=kfd)
    nvml = ()
    if not host.is_live and any(d.vendor_id == 0x10DE for d in devices):
        # A saved root: the UUIDs of its saved NVML record, as audit reads them (CUDA_VISIBLE_DEVICES=GPU-...
        # must resolve the same way), and its NUMA answers (a Grace GPU with numa_node -1). Live, NVML stays
        # off launch's start-up: the driver's numa_status names a Grace GPU's memory node.
        from numatune.readers.fabric import with_nvml_uuids
        from numatune.readers.nvml import fabric_from_record, load_record

        doc, note = load_record(host)
        if doc is not None:
            fabric = fabric_from_record(doc, note, "nvml record")
            devices, nvml = with_nvml_uuids(devices, fabric), fabric.nvml_gpus
    _, devices = attach_gpu_memory(topo.nodes, devices, read_numa_status(host), nvml, kfd)
    kinds = ("gpu", "accelerator", "nic") if nics else ("gpu", "accelerator")
    out = [d for d in devices if d.kind in kinds or (bdf and d.bdf.lower() == bdf)]
    if bdf and not any(d.bdf.lower() == bdf for d in out):
        dev = read_pci_function(host, bdf, topo)
        if dev is not None:
            out.append(dev)
    return out


def read_pci_function(host: Host, bdf: str, topo: Topology) -> PciDevice | None:
    """Any PCI function (a bridge, an FPGA, a display numatune does not report) by address."""
    from numatune.readers.pci import device_kind

    base = f"/sys/bus/pci/devices/{bdf}"
    if not host.exists(base):
        return None
    path = host.resolve(base) or base
    numa = host.read_int(f"{path}/numa_node")
    local = host.read_cpulist(f"{path}/local_cpulist") or host.read_cpumask(f"{path}/local_cpus") or frozenset()
    class_code = host.read_int(f"{path}/class", 16) or 0
    vendor = host.read_int(f"{path}/vendor", 16)
    inferred = None
    if (numa is None or numa < 0) and local:
        homes = [n.id for n in topo.nodes if n.cpus and local <= set(n.cpus)]
        inferred = homes[0] if len(homes) == 1 and local != {c for n in topo.nodes for c in n.cpus} else None
    return PciDevice(
        bdf=bdf,
        path=path,
        class_code=class_code,
        vendor_id=vendor,
        device_id=host.read_int(f"{path}/device", 16),
        kind=device_kind(class_code, vendor),
        numa_node=numa if numa is not None and numa >= 0 else None,
        inferred_node=inferred,
        inferred_from="local_cpulist" if inferred is not None else None,
        local_cpus=tuple(sorted(local)),
    )


# -- the whole live plan ---------------------------------------------------------------------------------
KIND_POLICIES = ("cxl-spill", "weighted", "preferred-many")  # policies that need the CXL/DAX scan


def plan_live(host: Host, environ: Mapping[str, str], opts: LaunchOptions, command: Sequence[str] = (), *,
              rebind: bool = False, within: frozenset[int] | None = None, within_source: str = "") -> LaunchPlan:
    """launch's planning for `host` (the live node or a saved root): what it reads, then plan_launch.

    Reads only what the options need (no PCI scan for --node without --nic, the CXL scan only for the
    policies that name CXL nodes, the cache groups only for the modes that split cores). `rebind`
    (numatune.bind, in a process that is already running) plans within the cgroup's CPUs rather than
    the calling thread's current mask, which may be the very binding being replaced; inside a Slurm
    step the step's CPUs stay the limit, as for launch. `within` (the CPUs a launcher recorded in
    NUMATUNE_BINDING, `within_source` saying so) narrows the allowed CPUs further.
    """
    from numatune.analysis.binding_failures import openmp_line, openmp_repinning
    from numatune.plan.launch import normalize_bdf, plan_launch

    topo = read_launch_topology(host, node_kinds=opts.mem_policy in KIND_POLICIES)
    devices: list[PciDevice] = []
    if opts.node is None or opts.gpu is not None:
        bdf = normalize_bdf(opts.gpu) if opts.gpu else None
        devices = read_launch_devices(host, topo, bdf, nics=opts.nic != "none")
    elif opts.nic != "none":
        devices = [d for d in read_launch_devices(host, topo, nics=True) if d.kind == "nic"]
    probe = opts.mem_policy in ("preferred-many", "weighted") and opts.via in ("auto", "numactl")
    caches = opts.cpu_bind.mode in ("core-complex", "exclusive", "cores")  # cores in cache order
    facts = gather_facts(host, environ, probe=probe, topo=topo if caches else None,
                         devices=[d for d in devices if d.kind == "nic"])
    if rebind and host.is_live and not facts.env.get("SLURM_JOB_ID"):
        cpuset, where = cgroup_cpuset(host)
        if cpuset is not None:
            facts = facts._replace(allowed_cpus=cpuset, allowed_source=f"{where} (a re-bind: not the current mask)")
        else:
            facts = facts._replace(allowed_cpus=None, allowed_source="every online CPU (no cgroup cpuset readable; "
                                                                     "a re-bind: not the current mask)")
    if within is not None:
        allowed = within if facts.allowed_cpus is None else facts.allowed_cpus & within
        facts = facts._replace(allowed_cpus=allowed, allowed_source=f"{facts.allowed_source} ∩ {within_source}")
    try:
        plan = plan_launch(topo, devices, facts, opts, command)
    except BindingError as exc:
        raise named_failure(exc, topo) from None
    found = openmp_repinning(environ)
    if found and plan.cpus:  # the OpenMP runtime of the command re-pins what launch binds (NT412)
        plan = plan._replace(warnings=(*plan.warnings, openmp_line(found)))
    if host.notes:  # files that exist but could not be read, links leaving a saved root
        plan = plan._replace(warnings=plan.warnings + tuple(f"cannot read {p}: {r}" for p, r in host.notes))
    return plan


def named_failure(exc: BindingError, topo: Topology) -> BindingError:
    """A planning error named by its cause where the plan knows it (the catalogue of
    numatune/analysis/binding_failures.py): a memory-only node given as the CPU node (NT413), a cpuset without
    a CPU of the rank's node (NT411). Others are returned as they are."""
    from numatune.analysis.binding_failures import cpuset_excludes, memory_only_node
    from numatune.model.gpumem import nearest_cpu_node

    cause = getattr(exc, "cause", None)
    if not cause:
        return exc
    if cause[0] == "memory-only":
        _, node, kind = cause
        line = memory_only_node(node, kind, nearest_cpu_node(topo, node))
    else:
        _, node, cpus, allowed, source = cause
        line = cpuset_excludes(node, cpus, allowed, source)
    named = type(exc)(line, hint=exc.hint)
    named.cause = cause  # type: ignore[attr-defined]
    return named


# -- applying -----------------------------------------------------------------------------------------------
def set_mempolicy(mode: int, nodes: Sequence[int]) -> None:
    """set_mempolicy(2) for the calling thread; inherited by the exec'd command (memsys does the call). A refusal
    (EPERM: seccomp, no CAP_SYS_NICE) is PermissionDenied naming the cause (NT410)."""
    from numatune.analysis.binding_failures import refused

    try:
        memsys.set_mempolicy(mode, nodes)
    except memsys.SyscallFailed as exc:
        line = refused("set_mempolicy", exc.errno, f"{memsys.mode_name(mode)}, nodes {format_cpulist(nodes)}")
        if line is None:
            raise
        raise PermissionDenied(line) from None


def set_affinity(cpus: Sequence[int]) -> None:
    """sched_setaffinity(2) of the calling process; a refusal is PermissionDenied naming the cause (NT410)."""
    from numatune.analysis.binding_failures import refused

    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        line = refused("sched_setaffinity", exc.errno or 0, format_cpulist(cpus))
        if line is not None:
            raise PermissionDenied(line) from None
        raise NumatuneError(f"sched_setaffinity({format_cpulist(cpus)}) failed: {exc.strerror}") from exc


def bind_direct(plan: LaunchPlan) -> None:
    """The calling process's part of a plan: for `direct` the affinity and memory policy; for numactl and
    taskset (whose argv binds) the same calls as a check first, so that a refusal (a seccomp filter, no
    CAP_SYS_NICE) stops launch with the cause and the fix (NT410) instead of the exec'd tool failing with a line
    of its own, or the command running without the binding. The exec'd tool sets the same binding again; the
    process keeps it across exec either way. Shared by launch's exec and compare's child processes."""
    if plan.method == "direct":
        if plan.cpus:
            set_affinity(plan.cpus)
        if plan.memory.mode is not None:
            set_mempolicy(plan.memory.mode, plan.memory.nodes)
        return
    if plan.method not in ("numactl", "taskset"):
        return
    try:  # the check: only a refusal stops here; any other error is the tool's to report, as before
        if plan.cpus:
            set_affinity(plan.cpus)
        if plan.memory.mode is not None and plan.method == "numactl" and memsys.supported():
            set_mempolicy(plan.memory.mode, plan.memory.nodes)
    except PermissionDenied:
        raise
    except NumatuneError:
        pass


def apply_plan(plan: LaunchPlan, environ: Mapping[str, str]) -> NoReturn:
    """Bind (for the direct method) and exec the plan's argv, with NUMATUNE_BINDING saying what was bound
    (plan.inherited); never returns."""
    from numatune.plan.inherited import VARIABLE, plan_record

    env = dict(environ)
    env.update(plan.env)
    line = plan_record(plan, "launch", os.getpid())  # what was bound, for numatune.bind_worker() in the command
    if line is not None:
        env[VARIABLE] = line
    bind_direct(plan)
    program = plan.command[0] if plan.command else ""
    if not program or ("/" not in program and which(program) is None):
        raise CommandNotRunnable(f"cannot run {program!r}: command not found")
    if "/" in program:  # checked here too: numactl and taskset exit 1, not 126/127, when their exec fails
        if not os.path.exists(program):
            raise CommandNotRunnable(f"cannot run {program!r}: command not found")
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise CommandNotExecutable(f"cannot run {program!r}: Permission denied")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(plan.argv[0], list(plan.argv), env)
    except FileNotFoundError as exc:
        raise CommandNotRunnable(f"cannot run {plan.argv[0]!r}: command not found") from exc
    except OSError as exc:
        raise CommandNotExecutable(f"cannot run {plan.argv[0]!r}: {exc.strerror or exc}") from exc
