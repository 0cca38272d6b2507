"""A real Slurm (Debian's slurmctld/slurmd 22.05 + munge) configured by `numatune emit slurm`, in the guest.

Issue 27, item 1. One-node cluster on the two-socket machine, daemons from the host's read-only root:
- phase 1, the node line `numatune emit slurm` writes: slurmd registers without "configuration differs
  from hardware"; `srun` steps with --cpu-bind=sockets|ldoms|cores, --ntasks-per-socket and
  --mem-bind=local run the toucher, and `numatune audit` of the task processes says each sits on the
  CPUs and node Slurm was asked for (sched_getaffinity and numa_maps agree);
- phase 2, `emit slurm --reserve-cores 1 --stand-in-gpu BDF=FILE` (CpuSpecList, a gres.conf gpu line whose
  File= is a stand-in device file): no task ever gets a reserved core, the stand-in GPU with
  --gres-flags=enforce-binding gets exactly the cores numatune wrote in Cores=, and `numatune launch`
  inside `srun` stays inside the step's CPUs and says so (or refuses, naming them);
- `check --slurm-conf` passes on the running configuration and names the line of a deliberately wrong copy.

Abstract ids (CpuSpecList, gres.conf Cores=) are turned into Linux CPUs with Slurm's own reading, never with
numatune's: `slurmd -C` must state the sockets, cores and threads of numatune's node line, and the ids are
mapped by the running slurmd's own abstract CPU map (SlurmdDebug=debug4: `CPU map[ABS]=>LINUX S:C:T`), which
must agree with hwloc's logical numbering read from `lstopo --of xml`; slurmd's own CPU affinity once it
applied CpuSpecList must be those CPUs. TaskPlugin=task/cgroup,task/affinity must start (a slurmd that
cannot is a failure, never a quiet fall-back to task/affinity alone).

What the guest needs (../shared/vm-notes.md): an IPv4 address of its own (a dummy interface) with the
host name in a bind-mounted copy of /etc/hosts, cgroup.conf with IgnoreSystemd=yes (no systemd/dbus),
munged with its own key and socket, every daemon detached from the console, proctrack/linuxproc. Every
wait has a timeout; every daemon this module starts is killed at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import REPO, CheckFailed, EngineMissing, numatune, parse_cpulist, read, run, wait_for

ADDR = "10.77.0.1"
WORK = Path("/tmp/numatune-slurm")
TOUCHER = Path(__file__).with_name("toucher.py")
TOUCH_MIB = 16
BINARIES = ("slurmctld", "slurmd", "srun", "scontrol", "munged", "lstopo-no-graphics")
TASK_PLUGIN = "task/cgroup,task/affinity"
HW_DIFFERS = "configuration differs from hardware"


class Cluster:
    """The daemons of one configuration; `stop()` kills what was started (also on failure)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "SLURM_CONF": str(WORK / "slurm.conf")}

    def daemon(self, argv: list[str]) -> subprocess.Popen[bytes]:
        # Detached from the console: a daemon holding the guest's stdout keeps the command from returning.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, env=self.env)
        self.procs.append(proc)
        return proc

    def slurm(self, *argv: str, timeout: float = 60) -> Any:
        return run(list(argv), timeout=timeout, env=self.env)

    def stop_slurm(self) -> None:
        for proc in [p for p in self.procs if Path(p.args[0]).name in ("slurmctld", "slurmd")]:
            _kill(proc)
            self.procs.remove(proc)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _kill(proc)
        self.procs.clear()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _prepare_guest(log: list[str]) -> str:
    """Address, hosts file, cgroup2 controllers, munge: everything both phases share. Returns the host name."""
    missing = [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if missing:
        raise EngineMissing(f"Slurm/munge/hwloc not installed on the host root ({', '.join(missing)}; Debian: "
                            "slurmctld slurmd slurm-client munge hwloc, which tests/vm/setup.sh installs)")
    shutil.rmtree(WORK, ignore_errors=True)
    for sub in ("state", "spool", "munge"):
        (WORK / sub).mkdir(parents=True)
    os.chmod(WORK / "munge", 0o700)
    host = read("/proc/sys/kernel/hostname").split(".")[0]
    if not Path("/sys/class/net/nt0").exists():
        for argv in (["ip", "link", "add", "nt0", "type", "dummy"], ["ip", "addr", "add", f"{ADDR}/24", "dev", "nt0"],
                     ["ip", "link", "set", "nt0", "up"]):
            run(argv, timeout=20, check=True)
    hosts = WORK / "hosts"
    hosts.write_text(read("/etc/hosts", "") + f"\n{ADDR} {host}\n")
    run(["mount", "--bind", str(hosts), "/etc/hosts"], timeout=20, check=True)
    if not any(f.split()[1:3] == ["/sys/fs/cgroup", "cgroup2"] for f in read("/proc/mounts", "").splitlines()):
        run(["mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"], timeout=20)
    root = Path("/sys/fs/cgroup")
    (root / "system.slice").mkdir(exist_ok=True)
    for d in (root, root / "system.slice"):
        for ctl in ("+cpuset", "+cpu", "+memory"):
            with contextlib.suppress(OSError):
                (d / "cgroup.subtree_control").write_text(ctl)
    log.append(f"host {host}, address {ADDR}, cgroup controllers {read(root / 'cgroup.subtree_control', '')!r}")
    return host


def _start_munge(cluster: Cluster) -> None:
    key = WORK / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = WORK / "munge" / "munge.socket"
    cluster.daemon(["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
                    f"--pid-file={WORK / 'munge' / 'munged.pid'}", f"--log-file={WORK / 'munge' / 'munged.log'}",
                    f"--seed-file={WORK / 'munge' / 'munged.seed'}"])
    if not wait_for(sock.exists, timeout=120):  # each wait ends as soon as it holds: the margin is for a slow guest
        log = read(WORK / "munge" / "munged.log", "")[-800:]
        raise CheckFailed(f"munged did not create its socket in 120 s: {log}")


def _write_config(host: str, node_line: str, task_plugin: str, gres: list[str], debug: str = "info") -> str:
    """slurm.conf (the node line as numatune wrote it, plus NodeAddr), cgroup.conf, gres.conf. Returns slurm.conf."""
    conf = "\n".join([
        "ClusterName=numatune",
        f"SlurmctldHost={host}({ADDR})",
        "AuthType=auth/munge",
        f"AuthInfo=socket={WORK / 'munge' / 'munge.socket'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={WORK / 'state'}",
        f"SlurmdSpoolDir={WORK / 'spool'}",
        f"SlurmctldPidFile={WORK / 'slurmctld.pid'}",
        f"SlurmdPidFile={WORK / 'slurmd.pid'}",
        f"SlurmctldLogFile={WORK / 'slurmctld.log'}",
        f"SlurmdLogFile={WORK / 'slurmd.log'}",
        f"SlurmdDebug={debug}",
        "ProctrackType=proctrack/linuxproc",
        f"TaskPlugin={task_plugin}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        *(["GresTypes=gpu"] if gres else []),
        f"{node_line} NodeAddr={ADDR} State=UNKNOWN",
        f"PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4",
        "",
    ])
    (WORK / "slurm.conf").write_text(conf)
    (WORK / "cgroup.conf").write_text("CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nConstrainCores=yes\n")
    (WORK / "gres.conf").write_text("\n".join(gres) + "\n")
    return conf


def _start_slurm(cluster: Cluster, host: str) -> dict[str, Any]:
    """slurmctld and slurmd in the foreground (-D) of their own sessions; waits for the node to be idle."""
    for log in ("slurmctld.log", "slurmd.log"):
        (WORK / log).unlink(missing_ok=True)
    shutil.rmtree(WORK / "state", ignore_errors=True)
    (WORK / "state").mkdir()
    cluster.daemon(["slurmctld", "-D", "-i"])
    cluster.daemon(["slurmd", "-D"])
    state = {"out": ""}

    def idle() -> bool:
        if any(p.poll() is not None for p in cluster.procs):
            return True
        state["out"] = cluster.slurm("scontrol", "show", "node", host, timeout=20).stdout
        return bool(re.search(r"State=(IDLE|MIXED|ALLOCATED)", state["out"]))

    ok = wait_for(idle, timeout=180, interval=1)
    dead = [f"{Path(p.args[0]).name} exited {p.returncode}" for p in cluster.procs if p.poll() is not None]
    if not ok or dead:
        raise CheckFailed(f"the node never became idle ({'; '.join(dead) or 'timeout 180 s'}):\n{state['out'][-800:]}\n"
                          f"slurmd.log: {read(WORK / 'slurmd.log', '')[-1500:]}\n"
                          f"slurmctld.log: {read(WORK / 'slurmctld.log', '')[-1500:]}")
    logs = read(WORK / "slurmd.log", "") + read(WORK / "slurmctld.log", "")
    if HW_DIFFERS in logs:
        line = next(x for x in logs.splitlines() if HW_DIFFERS in x)
        raise CheckFailed(f"slurmd says the numatune node line is wrong: {line}")
    return {"node": re.sub(r"\s+", " ", state["out"]).strip()[:600]}


def _steps(cluster: Cluster, steps: dict[str, list[str]], timeout: float = 300) -> dict[str, list[dict[str, Any]]]:
    """Start each srun step (tasks run the toucher, which reports and stays); wait for every task's report."""
    procs = {}
    for label, opts in steps.items():
        ready = WORK / f"ready-{label}"
        script = f'exec {sys.executable} {TOUCHER} {TOUCH_MIB} {ready}-$SLURM_PROCID'
        argv = ["srun", "--oversubscribe", f"--job-name={label}", *opts, "sh", "-c", script]
        procs[label] = (argv, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, env=cluster.env, start_new_session=True))
        cluster.procs.append(procs[label][1])
    want = {label: _ntasks(opts) for label, opts in steps.items()}

    def reported() -> bool:
        return all(len(_ready(label)) >= want[label] or procs[label][1].poll() is not None for label in steps)

    wait_for(reported, timeout=timeout, interval=1)
    counts = {label: f"{len(_ready(label))}/{want[label]}" for label in steps}
    out: dict[str, list[dict[str, Any]]] = {}
    for label, (argv, proc) in procs.items():
        files = _ready(label)
        if len(files) < want[label]:
            _kill(proc)
            _, err = proc.communicate(timeout=10)
            raise CheckFailed(f"$ {' '.join(argv)}\n-> {len(files)} of {want[label]} tasks reported within "
                              f"{timeout:.0f} s (rc {proc.returncode}; every step: {counts}): "
                              f"{err.decode(errors='replace')[-1200:]}\n"
                              f"slurmd.log: {read(WORK / 'slurmd.log', '')[-800:]}")
        out[label] = [{**json.loads(f.read_text()), "task": int(f.name.rsplit("-", 1)[1])} for f in files]
    return out


def _ready(label: str) -> list[Path]:
    files = [p for p in WORK.glob(f"ready-{label}-*") if re.fullmatch(rf"ready-{label}-\d+", p.name)]
    return sorted(files, key=lambda p: int(p.name.rsplit("-", 1)[1]))


def _ntasks(opts: list[str]) -> int:
    for o in opts:
        if m := re.fullmatch(r"-n(\d+)|--ntasks=(\d+)", o):
            return int(m[1] or m[2])
    return 1


def _node_cpus() -> dict[int, set[int]]:
    base = Path("/sys/devices/system/node")
    return {int(d.name[4:]): set(parse_cpulist(read(d / "cpulist", ""))) for d in base.glob("node[0-9]*")}


def _socket_cpus() -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        pkg = read(d / "topology" / "physical_package_id", "")
        if pkg:
            out.setdefault(int(pkg), set()).add(int(d.name[3:]))
    return out


def _node_of(cpus: set[int], nodes: dict[int, set[int]]) -> int | None:
    owners = {n for n, cs in nodes.items() if cpus & cs}
    return owners.pop() if len(owners) == 1 else None


def _emit(*args: str) -> dict[str, Any]:
    res = numatune("emit", "slurm", "--json", *args, timeout=240)
    if res.returncode != 0:
        raise CheckFailed(f"numatune emit slurm failed:\n{res.summary()}")
    return json.loads(res.stdout)


def _hwloc_cores() -> list[list[int]]:
    """Linux CPUs of each core in hwloc's logical order: Slurm's abstract core i is hwloc's core i, and its
    abstract CPU j (threads of a core in a row) hwloc's PU j (slurmd's xcpuinfo reads them the same way)."""
    import xml.etree.ElementTree as ET

    res = run(["lstopo-no-graphics", "--of", "xml", "-"], timeout=120, check=True)
    cores = [[int(pu.get("os_index", "-1")) for pu in core.iter("object") if pu.get("type") == "PU"]
             for core in ET.fromstring(res.stdout).iter("object") if core.get("type") == "Core"]
    if not cores or any(not c for c in cores):
        raise CheckFailed(f"hwloc lists no cores with PUs: {res.stdout[:600]}")
    return cores


def _slurmd_reading(cluster: Cluster, emit: dict[str, Any]) -> dict[str, int]:
    """`slurmd -C` (Slurm's own reading of the hardware) states numatune's node line's counts."""
    res = cluster.slurm("slurmd", "-C", timeout=120)
    got = {k: int(v) for k, v in re.findall(r"\b(CPUs|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=(\d+)",
                                              res.stdout)}
    line = emit["node"]["line"]
    want = {k: int(v) for k, v in re.findall(r"\b(CPUs|Sockets|CoresPerSocket|ThreadsPerCore)=(\d+)", line)}
    want["SocketsPerBoard"] = want.pop("Sockets", 0)
    if res.returncode != 0 or got != want:
        raise CheckFailed(f"slurmd -C reads {got or res.summary()}, numatune's node line says {want} ({line})")
    return got


def _slurmd_cpu_map(hw_cores: list[list[int]]) -> list[list[int]]:
    """The running slurmd's abstract CPU map (its debug4 `CPU map[ABS]=>LINUX S:C:T s:c:t` lines) as Linux CPUs
    per abstract core, checked against hwloc's logical numbering (which slurmd reads it from)."""
    rows = {}
    for m in re.finditer(r"CPU map\[(\d+)\]=>(\d+) S:C:T (\d+):(\d+):(\d+)", read(WORK / "slurmd.log", "")):
        rows[int(m[1])] = tuple(int(x) for x in m.groups()[1:])
    if not rows:
        raise CheckFailed(f"slurmd logged no abstract CPU map at debug4: {read(WORK / 'slurmd.log', '')[-800:]}")
    per_core: dict[tuple[int, int], list[int]] = {}
    for ab in sorted(rows):
        linux, sock, core, _ = rows[ab]
        per_core.setdefault((sock, core), []).append(linux)
    cores = [per_core[k] for k in sorted(per_core)]
    flat = [rows[ab][0] for ab in sorted(rows)]
    if cores != hw_cores or flat != [cpu for c in hw_cores for cpu in c]:
        raise CheckFailed(f"slurmd's abstract CPU map {rows} disagrees with hwloc's logical cores {hw_cores}")
    return cores


def _cores_to_linux(cores: list[list[int]], ids: list[int]) -> set[int]:
    """gres.conf Cores= (abstract core ids) as Linux CPUs, through hwloc's numbering."""
    if max(ids, default=-1) >= len(cores):
        raise CheckFailed(f"Cores= {ids} names a core hwloc does not have ({len(cores)} cores)")
    return {cpu for i in ids for cpu in cores[i]}


@contextlib.contextmanager
def _cluster(log: list[str]) -> Iterator[tuple[Cluster, str]]:
    cluster = Cluster("numatune", log)
    try:
        host = _prepare_guest(log)
        _start_munge(cluster)
        yield cluster, host
    finally:
        for label in ("slurmctld", "slurmd"):
            tail = read(WORK / f"{label}.log", "").splitlines()[-4:]
            log.append(f"{label}.log tail: {tail}")
        cluster.stop()
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "/etc/hosts"], timeout=20, capture_output=True, check=False)


@check("two-socket", engines=True)
def slurm_places_as_numatune_says(ctx: Context) -> dict[str, Any]:
    """A real slurmctld/slurmd from `emit slurm`: srun bindings = audit, reserved cores unused, launch inside."""
    t0 = time.monotonic()
    log: list[str] = []
    timings: dict[str, float] = {}
    details: dict[str, Any] = {"log": log, "phase_seconds": timings}

    def lap(name: str) -> None:  # seconds since the previous lap: where the check's time goes
        timings[name] = round(time.monotonic() - t0 - sum(timings.values()), 1)

    nodes, sockets = _node_cpus(), _socket_cpus()
    bdf = _stand_in_device()
    # Both emits at once (a numatune start costs 10-20 s under TCG).
    standin = WORK.parent / "numatune-standin-gpu0"
    with _parallel() as par:
        par.numatune("plain", "emit", "slurm", "--json")
        par.numatune("reserved", "emit", "slurm", "--json", "--reserve-cores", "1", "--reserve-memory", "256",
                     f"--stand-in-gpu={bdf}={standin}")
    plain, reserved = par.json("plain"), par.json("reserved")
    lap("emit")
    details["emit"] = {"plain": plain["node"]["line"], "reserved": reserved["node"]["line"],
                       "gres": [g["line"] for g in reserved["gres"]]}
    with _cluster(log) as (cluster, host):
        # -- phase 1: the plain node line ---------------------------------------------------------------
        task_plugin = TASK_PLUGIN
        conf = _write_config(host, plain["node"]["line"], task_plugin, [])
        wrong = WORK / "wrong-slurm.conf"
        wrong_text = conf.replace("CoresPerSocket=2", "CoresPerSocket=4")
        wrong.write_text(wrong_text)
        wrong_line = 1 + next(i for i, x in enumerate(wrong_text.splitlines()) if x.startswith("NodeName="))
        with _parallel() as checks:  # the two checks run while the daemons start
            checks.numatune("good", "check", "--slurm-conf", str(WORK / "slurm.conf"), "--json",
                            "--fail-on", "error", ok=(0, 1))
            checks.numatune("wrong", "check", "--slurm-conf", str(wrong), "--json", "--fail-on", "error", ok=(0, 1))
            details["slurmd_C"] = _slurmd_reading(cluster, plain)
            try:
                details["phase1"] = _start_slurm(cluster, host)
            except CheckFailed as exc:  # no fall-back: the check is about task/cgroup's confinement
                raise CheckFailed(f"TaskPlugin={task_plugin} could not start: {exc}") from exc
        details["task_plugin"] = task_plugin
        details["check"] = _judge_checks(checks, wrong, wrong_line)
        lap("start_slurm_and_check")
        steps = {
            "sockets": ["-n2", "-c2", "--ntasks-per-socket=1", "--cpu-bind=sockets", "--mem-bind=local"],
            "ldoms": ["-n2", "-c2", "--ntasks-per-socket=1", "--cpu-bind=ldoms", "--mem-bind=local"],
            "cores": ["-n4", "--cpu-bind=cores", "--mem-bind=local"],
            "per-socket": ["-n2", "--ntasks-per-socket=1", "--cpu-bind=cores", "--mem-bind=local"],
        }
        tasks = _steps(cluster, steps)
        pids = [t["pid"] for ts in tasks.values() for t in ts]
        res = numatune("audit", "--json", *map(str, pids), timeout=240)
        if res.returncode != 0:
            raise CheckFailed(f"numatune audit of the Slurm tasks failed:\n{res.summary()}")
        audited = {p["pid"]: p for p in json.loads(res.stdout)["processes"]}
        details["phase1_tasks"] = _judge_phase1(tasks, audited, nodes, sockets)
        details["task_cgroup"] = {label: _task_cgroup(t) for label, ts in tasks.items() for t in ts[:1]}
        lap("steps_and_audit")
        for _, proc in list(_srun_procs(cluster)):
            _kill(proc)
            cluster.procs.remove(proc)
        # The job shapes of checks_jobs.py on this phase's Slurm (reported there, as slurm_job_tree and
        # slurm_bind_worker): never raises, whatever the shapes show.
        from checks_jobs import run_under_slurm

        run_under_slurm(ctx, cluster, WORK)
        lap("job_shapes")
        details["readme_srun"] = _readme_srun(cluster, nodes)
        lap("readme_srun")

        # -- phase 2: CpuSpecList + a stand-in GPU -----------------------------------------------------
        cluster.stop_slurm()
        _make_standin(standin)
        gres = [g["line"] for g in reserved["gres"]]
        _write_config(host, reserved["node"]["line"], task_plugin, gres, debug="debug4")
        details["phase2"] = _start_slurm(cluster, host)
        lap("restart_reserved")
        spec = set(reserved["node"]["cpu_spec_list"])
        hw_cores = _slurmd_cpu_map(_hwloc_cores())
        reserved_cpus = _cpus_to_linux(hw_cores, spec)
        gpu_cores = _cores_to_linux(hw_cores, reserved["gres"][0]["cores"])
        slurmd_cpus = _slurmd_affinity(cluster)
        if slurmd_cpus != reserved_cpus:
            raise CheckFailed(f"slurmd bound itself to CPUs {sorted(slurmd_cpus or [])} for CpuSpecList "
                              f"{sorted(spec)}, hwloc's numbering gives {sorted(reserved_cpus)}")
        details["hwloc_cores"] = hw_cores
        too_many = cluster.slurm("srun", "-n3", "--cpu-bind=cores", "--immediate=15", "true", timeout=60)
        if too_many.returncode == 0:
            raise CheckFailed(f"srun -n3 ran although CpuSpecList leaves 2 cores: {too_many.summary()}")
        tasks2 = _steps(cluster, {
            "spec": ["-n2", "--cpu-bind=cores"],
            "gpu": ["-n1", "--gres=gpu:1", "--gres-flags=enforce-binding", "--cpu-bind=cores"],
        })
        for label, ts in tasks2.items():
            for t in ts:
                if set(t["affinity"]) & reserved_cpus:
                    raise CheckFailed(f"step {label} task {t['task']} runs on reserved CPUs "
                                      f"{sorted(set(t['affinity']) & reserved_cpus)} (CpuSpecList {sorted(spec)})")
        gpu_task = tasks2["gpu"][0]
        if not set(gpu_task["affinity"]) <= gpu_cores - reserved_cpus or not gpu_task["affinity"]:
            raise CheckFailed(f"the stand-in GPU's task got CPUs {gpu_task['affinity']}, not inside Cores= "
                              f"{reserved['gres'][0]['cores']} = Linux CPUs {sorted(gpu_cores)} minus reserved")
        details["phase2_tasks"] = {k: [t["affinity"] for t in v] for k, v in tasks2.items()}
        lap("reserved_and_gres_steps")
        details["reserved_cpus"] = sorted(reserved_cpus)
        details["gpu_cores_linux"] = sorted(gpu_cores)
        for _, proc in list(_srun_procs(cluster)):
            _kill(proc)
            cluster.procs.remove(proc)
        details["launch"] = _launch_inside_srun(cluster, nodes, reserved_cpus)
        lap("launch_inside_srun")
    details["seconds"] = round(time.monotonic() - t0, 1)
    return details


def _stand_in_device() -> str:
    """The NVMe (or NIC) behind the expander on node 1: the PCI device that stands in for a GPU."""
    for cls in ("nvme", "net"):
        for d in sorted(Path(f"/sys/class/{cls}").glob("*")):
            dev = (d / "device").resolve()
            if read(dev / "numa_node", "-1") == "1" and re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d",
                                                                      dev.name):
                return dev.name
    raise CheckFailed("no PCI device on node 1 to stand in for a GPU")


def _make_standin(path: Path) -> None:
    """A character device with /dev/null's numbers: slurmd stats File= for its major/minor."""
    path.unlink(missing_ok=True)
    os.mknod(path, 0o666 | 0o020000, os.makedev(1, 3))


def _cpus_to_linux(cores: list[list[int]], ids: set[int]) -> set[int]:
    """CpuSpecList (Slurm's abstract CPU ids: hwloc's logical PUs, threads of a core in a row) as Linux CPUs."""
    flat = [cpu for core in cores for cpu in core]
    if max(ids, default=-1) >= len(flat):
        raise CheckFailed(f"CpuSpecList {sorted(ids)} names a CPU hwloc does not have ({len(flat)} PUs)")
    return {flat[i] for i in ids}


def _slurmd_affinity(cluster: Cluster) -> set[int] | None:
    """The CPUs slurmd bound itself to (it does, to the CpuSpecList CPUs, once it applied them)."""
    for p in cluster.procs:
        if Path(p.args[0]).name == "slurmd" and p.poll() is None:
            for line in read(f"/proc/{p.pid}/status", "").splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    return set(parse_cpulist(line.split(":", 1)[1]))
    return None


def _judge_checks(par: _Parallel, wrong: Path, wrong_line: int) -> dict[str, Any]:
    good, bad = par.json("good"), par.json("wrong")
    sched = [r for r in good["checks"] if r["name"].startswith("scheduler") and r["status"] == "passed"]
    if not sched:
        raise CheckFailed(f"check --slurm-conf ran no scheduler check: {[r['name'] for r in good['checks']]}")
    good_findings = [f for f in good["findings"] if f["code"].startswith("NT52")]
    if good_findings:
        raise CheckFailed(f"check --slurm-conf on the running configuration reports {good_findings}")
    bad_findings = [f for f in bad["findings"] if f["code"] == "NT520"]
    if not bad_findings:
        raise CheckFailed(f"check --slurm-conf on a copy with CoresPerSocket=4 reports no NT520: {bad['findings']}")
    subject = bad_findings[0].get("subject", "")
    if subject != f"{wrong}:{wrong_line}":
        raise CheckFailed(f"NT520 names {subject!r}, not the NodeName line {wrong}:{wrong_line}")
    return {"running": "no NT52x finding", "scheduler_results": len(sched), "wrong": bad_findings[0]["message"],
            "subject": subject}


def _judge_phase1(tasks: dict[str, list[dict[str, Any]]], audited: dict[int, dict[str, Any]],
                  nodes: dict[int, set[int]], sockets: dict[int, set[int]]) -> dict[str, Any]:
    """Each task: sched_getaffinity is what the binding asks for; audit says the same CPUs, that node, ok."""
    out: dict[str, Any] = {}
    for label, ts in tasks.items():
        rows = []
        for t in ts:
            cpus = set(t["affinity"])
            a = audited.get(t["pid"])
            if a is None:
                raise CheckFailed(f"audit has no row for {label} task {t['task']} (pid {t['pid']})")
            if label in ("sockets", "ldoms"):
                unit = sockets if label == "sockets" else nodes
                whole = [s for s, cs in unit.items() if cs == cpus]
                if not whole:
                    raise CheckFailed(f"--cpu-bind={label} task {t['task']} has CPUs {sorted(cpus)}: not one "
                                      f"whole {label[:-1]} ({unit})")
            elif len(cpus) != 1:
                raise CheckFailed(f"--cpu-bind=cores task {t['task']} of {label} has CPUs {sorted(cpus)}, not one core")
            node = _node_of(cpus, nodes)
            if set(a["cpus_allowed"]) != cpus:
                raise CheckFailed(f"audit says {label} task {t['task']} may run on {a['cpus_allowed']}, "
                                  f"sched_getaffinity says {sorted(cpus)}")
            if a["home_nodes"] != [node]:
                raise CheckFailed(f"audit's home node for {label} task {t['task']} is {a['home_nodes']}, "
                                  f"its CPUs {sorted(cpus)} are node {node}'s")
            touched = {int(k): v for k, v in t["bytes_by_node"].items()}
            if sum(touched.values()) and touched.get(node, 0) < 0.9 * sum(touched.values()):
                raise CheckFailed(f"--mem-bind=local: {label} task {t['task']} on node {node} has its buffer on "
                                  f"{touched}")
            if a["verdict"] != "ok":
                raise CheckFailed(f"audit calls {label} task {t['task']} {a['verdict']}: {a['reasons']}")
            rows.append({"task": t["task"], "cpus": sorted(cpus), "node": node, "policy": t["policy"],
                         "audit": a["verdict"]})
        if label in ("sockets", "ldoms", "per-socket"):
            used = [_node_of(set(r["cpus"]), nodes) for r in rows]
            if sorted(used) != sorted(set(used)):
                raise CheckFailed(f"--ntasks-per-socket=1 put two tasks of {label} on one socket: {rows}")
        if label == "cores" and len({r["cpus"][0] for r in rows}) != len(rows):
            raise CheckFailed(f"--cpu-bind=cores gave two tasks one core: {rows}")
        out[label] = rows
    return out


def _task_cgroup(task: dict[str, Any]) -> dict[str, Any]:
    """task/cgroup confined the task: it sits in a job cgroup of slurmstepd whose effective cpuset holds its
    CPUs (task/affinity alone leaves it in slurmd's cgroup)."""
    path = next((x.split("::", 1)[1] for x in read(f"/proc/{task['pid']}/cgroup", "").splitlines()
                 if x.startswith("0::")), "")
    if "/job_" not in path:
        raise CheckFailed(f"task {task['task']} (pid {task['pid']}) is in cgroup {path!r}, not a Slurm job's: "
                          "task/cgroup did not confine it")
    job = Path("/sys/fs/cgroup") / path.lstrip("/").split("/step_")[0]
    cpus = set(parse_cpulist(read(job / "cpuset.cpus.effective", "")))
    if not cpus or not set(task["affinity"]) <= cpus:
        raise CheckFailed(f"task {task['task']}'s job cgroup {job} has cpuset {sorted(cpus)}, the task runs on "
                          f"{task['affinity']}")
    return {"cgroup": path, "job_cpus": sorted(cpus)}


def readme_srun_recipe() -> str:
    """The README's CPU-node srun recipe, as written (the console block after "On a node without GPUs")."""
    text = (REPO / "docs" / "launchers.md").read_text().split("On a node without GPUs", 1)[1]
    block = re.findall(r"^```console\n(.*?)^```", text, re.M | re.S)[0]
    return next(line[2:] for line in block.splitlines() if line.startswith("$ srun "))


def _readme_srun(cluster: Cluster, nodes: dict[int, set[int]]) -> dict[str, Any]:
    """The README's srun line run as written by a shell in a directory holding train.py (tests/data/recipes): each
    of the two ranks is bound by numatune launch to its own core of node 0 inside the job's cgroup, and `numatune
    audit` of their PIDs says so."""
    recipe = readme_srun_recipe()
    work = WORK / "recipe"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copy(REPO / "tests" / "data" / "recipes" / "train.py", work / "train.py")
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    if not os.access(Path(sys.executable).parent / "numatune", os.X_OK):  # a venv without numatune installed
        shim = WORK / "bin" / "numatune"  # (the checkout on PYTHONPATH): the recipe's `numatune` runs this checkout
        shim.parent.mkdir(exist_ok=True)
        shim.write_text(f"#!/bin/sh\nPYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}} "
                        f'exec {sys.executable} -m numatune "$@"\n')
        shim.chmod(0o755)
        path = f"{shim.parent}:{path}"
    env = {**cluster.env, "PATH": path}
    proc = subprocess.Popen(["bash", "-c", recipe], cwd=work, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        started = wait_for(lambda: all((work / f"ready-{r}").exists() for r in (0, 1)) or proc.poll() is not None,
                           timeout=300, interval=1)
        if not started or proc.poll() is not None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            raise CheckFailed(f"$ {recipe}\n-> the ranks did not report within 300 s (rc {proc.returncode}): "
                              f"{(out + err)[-1500:]}")
        ranks = {r: json.loads((work / f"ready-{r}").read_text()) for r in (0, 1)}
        res = numatune("audit", "--json", *(str(ranks[r]["pid"]) for r in (0, 1)), timeout=240)
        if res.returncode != 0:
            raise CheckFailed(f"numatune audit of the recipe's ranks failed:\n{res.summary()}")
        audited = {p["pid"]: p for p in json.loads(res.stdout)["processes"]}
        jobs = {r: _task_cgroup({"pid": ranks[r]["pid"], "task": r, "affinity": ranks[r]["affinity"]}) for r in ranks}
    finally:
        (work / "stop").touch()
    out, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise CheckFailed(f"$ {recipe}\n-> rc {proc.returncode}: {(out + err)[-1500:]}")
    rows = {}
    for r, report in ranks.items():
        a = audited[report["pid"]]
        cpus = set(a["cpus_allowed"])
        if a["rank"] != r or sorted(cpus) != report["affinity"] or len(cpus) != 1 or not cpus <= nodes[0]:
            raise CheckFailed(f"$ {recipe}\n-> rank {r}: audit says rank {a['rank']} on CPUs {sorted(cpus)}, the "
                              f"rank reads {report['affinity']}; want one CPU of node 0 {sorted(nodes[0])}\n{err}")
        if a["home_nodes"] != [0] or f"numatune: rank {r} → node 0" not in err:
            raise CheckFailed(f"$ {recipe}\n-> rank {r}: home nodes {a['home_nodes']}; launch said: {err[-800:]}")
        rows[r] = {"cpus": sorted(cpus), "omp": report["omp"], **jobs[r]}
    if rows[0]["cpus"] == rows[1]["cpus"]:
        raise CheckFailed(f"$ {recipe}\n-> both ranks on CPU {rows[0]['cpus']}")
    return {"recipe": recipe, "ranks": rows, "launch": err.strip().splitlines()[-2:]}


def _srun_procs(cluster: Cluster) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    for p in cluster.procs:
        if Path(p.args[0]).name == "srun":
            yield p.args[0], p


def _launch_inside_srun(cluster: Cluster, nodes: dict[int, set[int]], reserved: set[int]) -> dict[str, Any]:
    """Two tasks (one core each, one per socket) each run `numatune launch --node 0`: the node-0 task is bound
    inside its step's CPUs and says Slurm's; the other has no node-0 CPU in its step and is refused."""
    probe = f"{sys.executable} -c 'import os; print(\"AFFINITY\", sorted(os.sched_getaffinity(0)))'"
    script = (f"echo STEP $(grep Cpus_allowed_list /proc/self/status | cut -f2); "
              f"exec {sys.executable} -m numatune launch --node 0 -- {probe}")
    res = cluster.slurm("srun", "--oversubscribe", "-n2", "--ntasks-per-socket=1", "--cpu-bind=cores", "--label",
                        "--chdir", str(Path(__file__).resolve().parents[3]), "sh", "-c", script, timeout=240)
    text = res.stdout + res.stderr
    by_task: dict[int, list[str]] = {}
    for line in text.splitlines():
        if m := re.match(r"\s*(\d+): (.*)", line):
            by_task.setdefault(int(m[1]), []).append(m[2])
    rows = {}
    for task, lines in sorted(by_task.items()):
        step = next((set(parse_cpulist(x.split()[1])) for x in lines if x.startswith("STEP ")), None)
        if step is None:
            continue
        if step & reserved:
            raise CheckFailed(f"launch task {task}: the step's CPUs {sorted(step)} include reserved {sorted(reserved)}")
        got = next((x for x in lines if x.startswith("AFFINITY ")), None)
        said = " | ".join(x for x in lines if x.startswith("numatune"))
        if step & nodes[0]:
            if got is None:
                raise CheckFailed(f"launch task {task} (step CPUs {sorted(step)}) did not run the command:\n"
                                  f"{text[-1500:]}")
            cpus = set(json.loads(got.split(" ", 1)[1]))
            if not cpus or not cpus <= step & nodes[0]:
                raise CheckFailed(f"launch task {task}: bound to {sorted(cpus)}, outside the step's node-0 CPUs "
                                  f"{sorted(step & nodes[0])}")
            if "Slurm" not in said:
                raise CheckFailed(f"launch task {task} does not say it kept Slurm's CPUs: {said!r}")
        else:
            if got is not None or "error" not in said or "Slurm" not in said:
                raise CheckFailed(f"launch task {task} (step CPUs {sorted(step)}, none on node 0) should be refused "
                                  f"naming Slurm's CPUs: {lines}")
        rows[task] = {"step_cpus": sorted(step), "said": said[:300], "affinity": got}
    if len(rows) != 2:
        raise CheckFailed(f"expected two launch tasks, got {sorted(rows)}:\n{text[-1500:]}")
    return rows


class _Parallel:
    """numatune commands started together (each start costs 10-20 s under TCG), collected by name."""

    def __init__(self) -> None:
        self.procs: dict[str, tuple[list[str], subprocess.Popen[str], tuple[int, ...]]] = {}
        self.results: dict[str, tuple[int, str, str]] = {}

    def numatune(self, name: str, *args: str, ok: tuple[int, ...] = (0,)) -> None:
        argv = [sys.executable, "-m", "numatune", *args]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=Path(__file__).resolve().parents[3])
        self.procs[name] = (argv, proc, ok)

    def finish(self, timeout: float = 240) -> None:
        for name, (argv, proc, ok) in self.procs.items():
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            self.results[name] = (proc.returncode, out, err)
            if proc.returncode not in ok:
                raise CheckFailed(f"$ {' '.join(argv)}\n-> rc={proc.returncode}\n{err[-1200:]}")

    def json(self, name: str) -> dict[str, Any]:
        rc, out, err = self.results[name]
        try:
            return json.loads(out)
        except json.JSONDecodeError as exc:
            raise CheckFailed(f"{name}: no JSON ({exc}): {err[-800:]}") from exc


@contextlib.contextmanager
def _parallel() -> Iterator[_Parallel]:
    par = _Parallel()
    try:
        yield par
    except BaseException:
        for _, proc, _ in par.procs.values():
            with contextlib.suppress(OSError):
                proc.kill()
        raise
    par.finish()
