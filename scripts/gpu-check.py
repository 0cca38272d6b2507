#!/usr/bin/env python3
"""Check numatune against a real GPU node: one verdict per comparison, from a plain checkout.

    python3 scripts/gpu-check.py [OUTDIR] [--cores 6] [--seconds 90] [--budget 140]

Runs the evidence job of issue 40 (`torchrun --standalone --nproc-per-node 1 --no-python numatune launch
--cpu-bind cores:6 -- python3 examples/gpu-check/train.py SECONDS`: DataLoader workers bound with
numatune.bind_worker(), pinned batches, an MLP with AdamW on GPU 0, a 256 MiB pinned staging buffer) and,
while it runs, audits it (`audit --ranks --json`, `audit PID --json`), snapshots it and replays the snapshot;
before it, compares `inspect --json` with `nvidia-smi topo -m` and with NVML (pynvml, else `nvidia-smi -q -x`),
and `probe --gpu` with CUDA events timed in torch. Prints one line per comparison,

    PASS|FAIL|SKIP name: detail

then a summary. Everything it ran and read is written flat into OUTDIR (default $OUT if set, else
./gpu-check-out): gpu-check.log (every command, its exit status and stderr), verdicts.json, summary.txt and
the captured outputs (nvidia-smi-topo-m.txt, inspect.json, probe-gpu.json, snapshot.tar.gz, ...).

Needs no network and no installed numatune: a `numatune` command running `python3 -m numatune` from this
checkout is put on PATH for the run; a missing Python module is named with what it costs. Without a GPU
(no nvidia-smi, or torch without CUDA) every comparison is `SKIP ...: no GPU` and the exit status is 0;
`--cpu-job` still runs the job part on the CPU (the tests' and a developer's way to try it without a GPU).
Exit status: 0 no FAIL (PASS and SKIP only), 1 at least one FAIL, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
TRAIN = CHECKOUT / "examples" / "gpu-check" / "train.py"
if str(CHECKOUT) not in sys.path:
    sys.path.insert(0, str(CHECKOUT))  # numatune's pure modules (its nvidia-smi parser, CPU lists) from the checkout

STAGING_BYTES = 256 << 20
BANDWIDTH_TOLERANCE = 0.10  # probe --gpu against CUDA events: within 10%
# Every comparison, in the order they run (each prints exactly one verdict).
CHECKS = (
    ("setup", "numatune runs from this checkout"),
    ("inspect-vs-nvidia-smi-topo", "path matrix, CPU and NUMA affinity against `nvidia-smi topo -m`"),
    ("inspect-vs-nvml", "GPU order, bus ids, CPU affinity and NUMA node against NVML"),
    ("probe-gpu-vs-cuda-events", f"host->GPU bandwidth of probe --gpu within {BANDWIDTH_TOLERANCE:.0%} of CUDA events"),
    ("job-started", "torchrun -> numatune launch -> train.py with DataLoader workers"),
    ("launch-binding", "the rank's CPUs = launch's plan = NUMATUNE_BINDING"),
    ("workers-within-rank", "every worker's CPUs within the rank's"),
    ("bind-worker-reports", "bind_worker() reports it stayed within the launcher's binding"),
    ("audit-ranks", "audit --ranks: one rank, its DataLoader workers not counted as ranks"),
    ("audit-rank-pid", "audit PID: the rank's GPU and CPUs"),
    ("audit-pinned-host", "audit PID: the 256 MiB pinned staging buffer is pinned host memory"),
    ("pinned-host-memory-api", "numatune.pinned_host_memory() from inside train.py"),
    ("pinned-chunks-reconciled", "audit's likely pinned chunks against numatune.pinned_host_chunks() inside train.py"),
    ("snapshot", "snapshot --pid of the job, replayed"),
    ("replay-equals-live", "inspect --json of the snapshot equals live (tests/parity.py)"),
    ("job-exit", "train.py exits 0"),
)
GPU_ONLY = {"inspect-vs-nvidia-smi-topo", "inspect-vs-nvml", "probe-gpu-vs-cuda-events", "audit-pinned-host"}
MODULES = (  # module, package, what is lost without it
    ("click", "click", "numatune's command line: nothing runs"),
    ("rich", "rich", "numatune's text tables (the JSON this check reads does not need it)"),
    ("psutil", "psutil", "live enrichment only"),
    ("cpuinfo", "py-cpuinfo", "the CPU model name (live only)"),
    ("yaml", "PyYAML", "check --kubelet-config only"),
    ("pyudev", "pyudev", "device names from udev (live only; pci.ids still names them)"),
    ("torch", "torch", "the job and the CUDA-event timing: those checks are skipped"),
    ("pynvml", "nvidia-ml-py", "NVML: inspect is compared with `nvidia-smi -q -x` instead (bus ids only)"),
)
REQUIRED = ("click",)


# -- verdicts (pure) ----------------------------------------------------------------------------------------------
def verdict_line(status: str, name: str, detail: str) -> str:
    """`PASS name: detail` on one line (newlines in a detail are folded)."""
    return f"{status} {name}: {' '.join(detail.split())}"


def summarize(verdicts: list[dict]) -> tuple[str, int]:
    """(the summary text, the exit status): 1 when any verdict FAILed, else 0."""
    counts = {s: sum(v["status"] == s for v in verdicts) for s in ("PASS", "FAIL", "SKIP")}
    failed = [v["name"] for v in verdicts if v["status"] == "FAIL"]
    text = f"summary: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP"
    if failed:
        text += " (failed: " + ", ".join(failed) + ")"
    return text, 1 if failed else 0


def cpuset(text: str | None) -> frozenset[int]:
    """A kernel CPU list ("0-5,8"); empty for None, "", "N/A"."""
    from numatune.cpulist import parse_cpulist

    if not text or text.strip() in ("N/A", "-"):
        return frozenset()
    return parse_cpulist(text)


def cpulist(cpus) -> str:  # noqa: ANN001 - any iterable of ints
    from numatune.cpulist import format_cpulist

    return format_cpulist(cpus) or "-"


def _gpus(doc: dict) -> list[tuple[str, str, dict]]:
    """inspect --json's GPUs in numatune's numbering: (label GPUi, BDF, device)."""
    devices = {d["bdf"]: d for d in doc.get("devices", ())}
    matrix = doc.get("path_matrix") or {}
    return [(label, bdf, devices.get(bdf, {})) for label, bdf in zip(matrix.get("labels", ()),
                                                                     matrix.get("devices", ()), strict=False)
            if label.startswith("GPU")]


def _node(device: dict) -> int | None:
    return device.get("numa_node") if device.get("numa_node") is not None else device.get("inferred_node")


def topo_problems(topo_text: str, doc: dict) -> list[str]:
    """Where `nvidia-smi topo -m` and inspect --json disagree: the GPU count, every cell between devices both
    list (NICs matched by RDMA name), each GPU's CPU affinity (its local CPUs) and NUMA affinity."""
    from numatune.analysis.vendor import parse_nvidia_smi_topo

    vendor = parse_nvidia_smi_topo(topo_text)
    ours = _gpus(doc)
    if len(ours) != len(vendor.gpus):
        return [f"{len(ours)} GPU(s) in inspect, {len(vendor.gpus)} in nvidia-smi"]
    matrix = doc["path_matrix"]
    index = {label: i for i, label in enumerate(matrix["labels"])}
    rdma = {d["bdf"]: d.get("rdma") or [] for d in doc.get("devices", ())}
    mapped = {label: label for label in vendor.gpus}
    for nic, name in vendor.nic_names.items():
        ours_nic = next((label for label, bdf in zip(matrix["labels"], matrix["devices"], strict=False)
                         if name in rdma.get(bdf, ())), None)
        if ours_nic is not None:
            mapped[nic] = ours_nic
    out = []
    for a, ours_a in mapped.items():
        for b, ours_b in mapped.items():
            theirs, mine = vendor.cell(a, b), matrix["cells"][index[ours_a]][index[ours_b]]
            if theirs is not None and theirs != mine:
                out.append(f"{a}-{b}: {mine} in inspect, {theirs} in nvidia-smi")
    for label, _bdf, device in ours:
        theirs = vendor.cpu_affinity.get(label)
        if theirs is not None and cpuset(theirs) != frozenset(device.get("local_cpus") or ()):
            out.append(f"{label} CPU affinity: {cpulist(device.get('local_cpus') or ())} in inspect, {theirs} "
                       "in nvidia-smi")
        numa = vendor.numa_affinity.get(label)
        if numa not in (None, "N/A") and str(_node(device)) != numa:
            out.append(f"{label} NUMA affinity: {_node(device)} in inspect, {numa} in nvidia-smi")
    return out


def nvml_problems(gpus: list[dict], doc: dict) -> list[str]:
    """Where NVML (`gpus`: index, bdf, and where known cpus and numa_node) and inspect --json disagree: the
    same GPUs in the same order (NVML's index i is inspect's GPUi), each one's CPU affinity and NUMA node."""
    ours = _gpus(doc)
    if len(ours) != len(gpus):
        return [f"{len(ours)} GPU(s) in inspect, {len(gpus)} in NVML"]
    out = []
    for (label, bdf, device), g in zip(ours, sorted(gpus, key=lambda g: g["index"]), strict=True):
        if g["bdf"] != bdf:
            out.append(f"{label}: {bdf} in inspect, NVML index {g['index']} is {g['bdf']}")
        if g.get("cpus") is not None and frozenset(g["cpus"]) != frozenset(device.get("local_cpus") or ()):
            out.append(f"{label} CPU affinity: {cpulist(device.get('local_cpus') or ())} in inspect, "
                       f"{cpulist(g['cpus'])} in NVML")
        if g.get("numa_node") is not None and g["numa_node"] != _node(device):
            out.append(f"{label} NUMA node: {_node(device)} in inspect, {g['numa_node']} in NVML")
    return out


def nvml_bdf(bus_id: str) -> str | None:
    """NVML's and nvidia-smi's "00000000:00:06.0" as sysfs writes it ("0000:00:06.0"): numatune's own reading."""
    from numatune.readers.nvml import nvml_bdf as as_sysfs

    return as_sysfs(bus_id)


def gpus_from_smi_xml(text: str) -> list[dict]:
    """`nvidia-smi -q -x`: each GPU's index (minor number order as listed), bus id and UUID; it says nothing of
    CPU affinity or NUMA node."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    return [{"index": i, "bdf": nvml_bdf(g.findtext("pci/pci_bus_id") or g.get("id", "")),
             "uuid": g.findtext("uuid")} for i, g in enumerate(root.iter("gpu"))]


def probe_h2d(doc: dict, gpu: int = 0) -> tuple[float, int, int | None] | None:
    """(median host->GPU GB/s at the largest size, that size, the node) from probe --gpu --json: the pair of
    the GPU's own node when measured, else its first measured pair; None when nothing was measured."""
    g = doc.get("gpu") or {}
    own = next((x.get("numa_node") for x in g.get("gpus", ()) if x.get("index") == gpu), None)
    pairs = [p for p in g.get("pairs", ()) if p.get("gpu") == gpu and p.get("status") == "ok" and p.get("h2d_gbps")]
    pairs.sort(key=lambda p: p.get("node") != own)
    if not pairs:
        return None
    sizes = pairs[0]["h2d_gbps"]
    size = max(sizes, key=int)
    return float(sizes[size]["median"]), int(size), pairs[0].get("node")


def within(a: float, b: float, tolerance: float = BANDWIDTH_TOLERANCE) -> bool:
    """|a - b| at most `tolerance` of the larger."""
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


def audit_ranks_verdict(doc: dict, rank_pid: int, workers: list[int], own: set[int] | None = None) -> tuple[str, str]:
    """One rank row for the job's rank; its DataLoader workers shown as workers (a `role` per process), not as
    more processes of the same rank (issue 40: three "rank 0" rows, each owning GPU0). Only the job's own
    processes count (`own`: the tree under its launcher, the_tree()): another job on the node has a rank 0 too."""
    procs = {p["pid"]: p for p in doc.get("processes", ()) if own is None or p["pid"] in own}
    if rank_pid not in procs:
        return "FAIL", f"the rank (PID {rank_pid}) is not in audit --ranks ({sorted(procs)})"
    rank = procs[rank_pid].get("rank")
    same = [pid for pid, p in procs.items() if p.get("rank") == rank and p.get("role", "rank") == "rank"]
    roles = {pid: procs[pid].get("role") for pid in workers if pid in procs}
    if same != [rank_pid]:
        return "FAIL", (f"{len(same)} processes shown as rank {rank} ({', '.join(map(str, sorted(same)))}): the "
                        f"rank {rank_pid} and its DataLoader workers {workers} (issue 40: workers are not ranks)")
    if any(role != "worker" for role in roles.values()):
        return "FAIL", f"workers' roles {roles}: expected worker"
    return "PASS", (f"one rank {rank} (PID {rank_pid}); worker(s) {', '.join(map(str, sorted(roles)))} shown "
                    "as workers" if roles else f"one rank {rank} (PID {rank_pid}); its workers not listed")


def pinned_bytes(proc: dict) -> tuple[int, str]:
    """Bytes audit counts as the process's pinned host memory (pinned_host.bytes_by_node) and from where."""
    pinned = proc.get("pinned_host") or {}
    total = sum(int(v) for v in (pinned.get("bytes_by_node") or {}).values())
    return total, ", ".join(map(str, pinned.get("devices") or ())) or "-"


def api_pinned_total(result: object) -> int:
    """The largest byte figure in numatune.pinned_host_memory()'s answer (its total or its largest range),
    found by key name (bytes, size, total) wherever it sits in the JSON."""
    best = 0
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(value, int) and not isinstance(value, bool) and re.search(r"bytes|size|total", str(key)):
                best = max(best, value)
            else:
                best = max(best, api_pinned_total(value))
    elif isinstance(result, list):
        best = max([api_pinned_total(v) for v in result] or [0])
    return best


def out_dir(arg: str | None, environ: dict) -> Path:
    """OUTDIR as given, else $OUT, else ./gpu-check-out."""
    return Path(arg or environ.get("OUT") or "gpu-check-out")


def status_cpus(pid: int) -> frozenset[int] | None:
    """Cpus_allowed_list of a live process (None when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", text, re.M)
    return cpuset(m.group(1)) if m else None


def children_of() -> dict[int, list[int]]:
    """Every live process's children, by parent PID (one pass over /proc)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                m = re.search(r"^PPid:\s*(\d+)", Path(f"/proc/{entry}/status").read_text(), re.M)
            except OSError:
                continue
            if m:
                kids.setdefault(int(m.group(1)), []).append(int(entry))
    return kids


def the_tree(pid: int) -> set[int]:
    """`pid` and every live process under it (each PID once): a job's own processes."""
    kids = children_of()
    out, todo = {pid}, [pid]
    while todo:
        for child in kids.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    return sorted(children_of().get(pid, []))


# -- the run ------------------------------------------------------------------------------------------------------
class Run:
    """The output directory, the log, the verdicts and the time left."""

    def __init__(self, out: Path, budget: float) -> None:
        self.out = out
        self.deadline = time.monotonic() + budget
        self.verdicts: list[dict] = []
        self.log = open(out / "gpu-check.log", "w")  # noqa: SIM115 - open for the whole run
        self.env = dict(os.environ)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def note(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def verdict(self, status: str, name: str, detail: str) -> None:
        self.verdicts.append({"status": status, "name": name, "detail": " ".join(detail.split())})
        self.note(verdict_line(status, name, detail))

    def done(self, name: str) -> bool:
        return any(v["name"] == name for v in self.verdicts)

    def skip_rest(self, why: str) -> None:
        for name, _ in CHECKS:
            if not self.done(name):
                self.verdict("SKIP", name, why)

    def write(self, name: str, data: str | bytes) -> Path:
        path = self.out / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        return path

    def run(self, argv: list[str], *, timeout: float, save: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess | None:
        """Run a command (its stdout saved as `save`); None when it could not start or ran out of time."""
        timeout = max(1.0, min(timeout, self.left()))
        started = time.monotonic()
        self.log.write(f"$ {' '.join(argv)}\n")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or self.env,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.log.write(f"  -> {type(exc).__name__}: {exc}\n")
            return None
        self.log.write(f"  -> exit {done.returncode} in {time.monotonic() - started:.1f} s\n")
        if done.stderr.strip():
            self.log.write("  stderr: " + done.stderr[-3000:].replace("\n", "\n  ") + "\n")
        self.log.flush()
        if save is not None:
            self.write(save, done.stdout)
        return done


def missing_modules() -> list[tuple[str, str, str]]:
    return [(m, pkg, why) for m, pkg, why in MODULES if importlib.util.find_spec(m) is None]


def make_wrapper(bindir: Path) -> Path:
    """A `numatune` command running this checkout's package with this interpreter."""
    path = bindir / "numatune"
    import shlex

    path.write_text("#!/bin/sh\n"
                    f"PYTHONPATH={shlex.quote(str(CHECKOUT))}${{PYTHONPATH:+:$PYTHONPATH}} "
                    f"exec {shlex.quote(sys.executable)} -m numatune \"$@\"\n")
    path.chmod(0o755)
    return path


def gpu_presence(run: Run, has_torch: bool) -> str | None:
    """None when a GPU can be used here, else why not."""
    smi = shutil.which("nvidia-smi", path=run.env["PATH"])
    if smi is None:
        return "nvidia-smi not found"
    listed = run.run([smi, "-L"], timeout=30, save="nvidia-smi-L.txt")
    if listed is None or listed.returncode != 0 or "GPU 0" not in listed.stdout:
        return "nvidia-smi -L lists no GPU"
    if not has_torch:
        return "torch is not installed"
    probe = run.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count(), torch.__version__)"],
                    timeout=90)
    if probe is None or probe.returncode != 0 or probe.stdout.split()[:1] in ([], ["0"]):
        return "torch sees no CUDA device" + (f" (torch {probe.stdout.split()[1]})" if probe and probe.stdout.split()
                                               [1:] else "")
    return None


def check_inspect(run: Run, doc: dict | None) -> None:
    topo = run.run(["nvidia-smi", "topo", "-m"], timeout=30, save="nvidia-smi-topo-m.txt")
    run.run(["nvidia-smi", "-q", "-x"], timeout=30, save="nvidia-smi-q.xml")
    if doc is None:
        run.verdict("FAIL", "inspect-vs-nvidia-smi-topo", "numatune inspect --json failed (gpu-check.log)")
    elif topo is None or topo.returncode != 0:
        run.verdict("SKIP", "inspect-vs-nvidia-smi-topo", "nvidia-smi topo -m failed")
    else:
        try:
            problems = topo_problems(topo.stdout, doc)
        except ValueError as exc:
            run.verdict("FAIL", "inspect-vs-nvidia-smi-topo", f"cannot parse nvidia-smi topo -m: {exc}")
        else:
            gpus = _gpus(doc)
            run.verdict("FAIL" if problems else "PASS", "inspect-vs-nvidia-smi-topo", "; ".join(problems) or (
                f"{len(gpus)} GPU(s): every matrix cell, CPU affinity ("
                + ", ".join(f"{label} {cpulist(d.get('local_cpus') or ())}" for label, _, d in gpus)
                + ") and NUMA affinity agree"))
    gpus, source = read_nvml(run)
    if doc is None:
        run.verdict("FAIL", "inspect-vs-nvml", "numatune inspect --json failed")
    elif gpus is None:
        run.verdict("SKIP", "inspect-vs-nvml", source)
    else:
        problems = nvml_problems(gpus, doc)
        detail = "; ".join(problems) or ", ".join(
            f"GPU{g['index']} {g['bdf']}" + (f" CPUs {cpulist(g['cpus'])}" if g.get("cpus") is not None else "")
            + (f" node {g['numa_node']}" if g.get("numa_node") is not None else " (NVML gives no NUMA node)")
            for g in gpus) + f" agree ({source})"
        run.verdict("FAIL" if problems else "PASS", "inspect-vs-nvml", detail)


def read_nvml(run: Run) -> tuple[list[dict] | None, str]:
    """Each GPU's index, BDF, CPU affinity and NUMA node from pynvml, else bus ids from `nvidia-smi -q -x`."""
    try:
        import pynvml
    except ImportError:
        xml = run.out / "nvidia-smi-q.xml"
        if xml.exists() and xml.stat().st_size:
            return gpus_from_smi_xml(xml.read_text()), "nvidia-smi -q -x (pynvml not installed: bus ids only)"
        return None, "neither pynvml (nvidia-ml-py) nor nvidia-smi -q -x"
    pynvml.nvmlInit()
    try:
        words = (os.cpu_count() or 64) // 64 + 1
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            bus = pynvml.nvmlDeviceGetPciInfo(h).busId
            mask = pynvml.nvmlDeviceGetCpuAffinity(h, words)
            cpus = [w * 64 + b for w, word in enumerate(mask) for b in range(64) if int(word) >> b & 1]
            try:
                numa = int(pynvml.nvmlDeviceGetNumaNodeId(h))
            except Exception:  # noqa: BLE001 - NVMLError_NotSupported, or not in this pynvml
                numa = None
            gpus.append({"index": i, "bdf": nvml_bdf(bus.decode() if isinstance(bus, bytes) else bus),
                         "cpus": cpus, "numa_node": numa})
    finally:
        pynvml.nvmlShutdown()
    run.write("nvml.json", json.dumps(gpus, indent=1) + "\n")
    return gpus, "pynvml"


CUDA_EVENTS = r"""
import json, sys, torch
n, samples = int(sys.argv[1]), []
host = torch.empty(n, dtype=torch.uint8).pin_memory()
host.fill_(1)
dev = torch.empty(n, dtype=torch.uint8, device="cuda:0")
dev.copy_(host, non_blocking=True)
torch.cuda.synchronize()
for _ in range(7):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    dev.copy_(host, non_blocking=True)
    b.record()
    b.synchronize()
    samples.append(n / 1e9 / (a.elapsed_time(b) / 1e3))
samples.sort()
print(json.dumps({"bytes": n, "h2d_gbps": samples, "median": samples[len(samples) // 2], "torch": torch.__version__}))
"""


def check_probe(run: Run) -> None:
    done = run.run(["numatune", "probe", "--gpu", "--json", "--time-budget", "3"], timeout=120, save="probe-gpu.json")
    if done is None or done.returncode != 0:
        run.verdict("FAIL", "probe-gpu-vs-cuda-events", "numatune probe --gpu --json failed (gpu-check.log)")
        return
    found = probe_h2d(json.loads(done.stdout))
    if found is None:
        reason = (json.loads(done.stdout).get("gpu") or {}).get("reason")
        run.verdict("FAIL", "probe-gpu-vs-cuda-events", f"probe --gpu measured no host->GPU pair ({reason})")
        return
    ours, size, node = found
    argv = [sys.executable, "-c", CUDA_EVENTS, str(size)]
    if node is not None:  # the host buffer on the node probe measured, as probe binds its own
        argv = ["numatune", "launch", "-q", "--numa-node", str(node), "--cpu-bind", "node", "--", *argv]
    events = run.run(argv, timeout=120, save="cuda-events.json")
    if events is None or events.returncode != 0:
        run.verdict("FAIL", "probe-gpu-vs-cuda-events", "the CUDA-event timing in torch failed (gpu-check.log)")
        return
    theirs = json.loads(events.stdout)["median"]
    run.verdict("PASS" if within(ours, theirs) else "FAIL", "probe-gpu-vs-cuda-events",
                f"host->GPU0 {size >> 20} MiB from node {node}: probe --gpu {ours:.1f} GB/s, CUDA events in torch "
                f"{theirs:.1f} GB/s ({abs(ours - theirs) / max(ours, theirs):.1%} apart, "
                f"{BANDWIDTH_TOLERANCE:.0%} allowed)")


def torchrun(env: dict) -> list[str]:
    found = shutil.which("torchrun", path=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]))
    return [found] if found else [sys.executable, "-m", "torch.distributed.run"]


def check_job(run: Run, args: argparse.Namespace, gpu: bool, inspect_doc: dict | None) -> None:
    node = [] if gpu else ["--numa-node", "0"]  # without a GPU, launch needs a node (torchrun: not --node)
    bind = ["--cpu-bind", f"cores:{args.cores}", *node]
    rank_env = {**run.env, "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    plan_run = run.run(["numatune", "launch", "--json", *bind, "--", "true"], timeout=60, save="launch-plan.json",
                       env=rank_env)
    plan = json.loads(plan_run.stdout) if plan_run is not None and plan_run.returncode == 0 else None
    for stale in run.out.glob("bind-worker-*.json"):
        stale.unlink()
    for name in ("train-ready.json", "train-stop"):
        (run.out / name).unlink(missing_ok=True)
    argv = [*torchrun(run.env), "--standalone", "--nproc-per-node", "1", "--no-python", "numatune", "launch", *bind,
            "--", sys.executable, str(TRAIN), str(args.seconds)]
    run.log.write(f"$ {' '.join(argv)} > train.log\n")
    log = open(run.out / "train.log", "w")  # noqa: SIM115 - the job's output, closed below
    job = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**run.env, "GPU_CHECK_OUT": str(run.out)},
                           start_new_session=True)
    started = time.monotonic()
    try:
        ready = wait_ready(run, job, min(args.ready_timeout, run.left()))
        run.log.write(f"  -> train-ready.json after {time.monotonic() - started:.1f} s\n")
        if ready is None:
            tail = (run.out / "train.log").read_text()[-600:]
            run.verdict("FAIL", "job-started", f"no train-ready.json (exit {job.poll()}); train.log ends: {tail}")
            return
        run.write("train-ready.json", json.dumps(ready, indent=1) + "\n")
        rank, workers = ready["pid"], ready["workers"]
        run.verdict("PASS", "job-started", f"rank PID {rank} on {ready['device']} (torch {ready['torch']}, CUDA "
                    f"{ready['cuda']}), DataLoader workers {workers}")
        check_binding(run, plan, ready, args.cores)
        check_workers(run, rank, workers)
        check_audit(run, rank, workers, gpu, inspect_doc, the_tree(job.pid))
        check_pinned_api(run, ready, gpu)
        check_pinned_chunks(run, ready, gpu)
        check_snapshot(run, rank, workers, inspect_doc)
    finally:
        (run.out / "train-stop").write_text("")
        try:
            code = job.wait(timeout=max(5.0, min(30.0, run.left() + 10)))
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            code = job.wait()
            run.note(f"note: the job did not stop within the time left: killed (exit {code})")
        log.close()
        run.log.write(f"  -> the job exited {code} after {time.monotonic() - started:.1f} s\n")
        (run.out / "train-stop").unlink(missing_ok=True)
    if not run.done("job-exit"):
        run.verdict("PASS" if code == 0 else "FAIL", "job-exit", f"torchrun exited {code} (train.log)")


def wait_ready(run: Run, job: subprocess.Popen, timeout: float) -> dict | None:
    path = run.out / "train-ready.json"
    end = time.monotonic() + timeout
    while time.monotonic() < end and job.poll() is None:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.5)
    return json.loads(path.read_text()) if path.exists() else None


def check_binding(run: Run, plan: dict | None, ready: dict, cores: int) -> None:
    from numatune.plan.inherited import parse_record

    mask = status_cpus(ready["pid"]) or frozenset(ready["cpus"])
    planned = frozenset(plan["cpu_bind"]["cpus"]) if plan else None
    rec, why = parse_record(ready["binding"]) if ready.get("binding") else (None, "NUMATUNE_BINDING is not set")
    problems = []
    if planned is None:
        problems.append("numatune launch --json failed")
    elif mask != planned:
        problems.append(f"the rank runs on CPUs {cpulist(mask)}, launch planned {cpulist(planned)}")
    if rec is None:
        problems.append(f"no launch record in the rank: {why}")
    elif rec.cpus != mask:
        problems.append(f"NUMATUNE_BINDING says CPUs {cpulist(rec.cpus)}, the rank runs on {cpulist(mask)}")
    run.verdict("FAIL" if problems else "PASS", "launch-binding", "; ".join(problems) or (
        f"rank PID {ready['pid']}: CPUs {cpulist(mask)} ({len(mask)} CPUs for cores:{cores}) = launch's plan = "
        f"NUMATUNE_BINDING {ready['binding']!r}"))


def check_workers(run: Run, rank: int, workers: list[int]) -> None:
    rank_cpus = status_cpus(rank) or frozenset()
    kids = sorted(set(children(rank)) | set(workers))
    masks = {pid: status_cpus(pid) for pid in kids}
    outside = {pid: m for pid, m in masks.items() if m is not None and not m <= rank_cpus}
    shown = ", ".join(f"{pid} {cpulist(m) if m is not None else 'gone'}" for pid, m in masks.items())
    if outside:
        run.verdict("FAIL", "workers-within-rank", f"outside the rank's CPUs {cpulist(rank_cpus)}: " + ", ".join(
            f"{pid} on {cpulist(m)}" for pid, m in outside.items()))
    else:
        run.verdict("PASS", "workers-within-rank",
                    f"the rank's CPUs {cpulist(rank_cpus)}; its child processes: {shown}")
    reports = {}
    for pid in workers:
        path = run.out / f"bind-worker-{pid}.json"
        if path.exists():
            reports[pid] = json.loads(path.read_text())
    if not reports:
        run.verdict("FAIL", "bind-worker-reports", f"no bind-worker-PID.json from the workers {workers}")
        return
    bad = {pid: r.get("inherited") for pid, r in reports.items()
           if not (r.get("inherited") or {}).get("within") or r["inherited"].get("relation") not in ("same", "narrows")}
    run.verdict("FAIL" if bad else "PASS", "bind-worker-reports", (
        f"not within the launcher's binding: {bad}" if bad else ", ".join(
            f"{pid}: bound={r['bound']} CPUs {r['cpulist']} ({r['inherited']['relation']} as launch's)"
            for pid, r in reports.items())))


def check_audit(run: Run, rank: int, workers: list[int], gpu: bool, inspect_doc: dict | None,
                own: set[int] | None = None) -> None:
    ranks = run.run(["numatune", "audit", "--ranks", "--json"], timeout=90, save="audit-ranks.json")
    if ranks is None or ranks.returncode not in (0, 1):
        run.verdict("FAIL", "audit-ranks", "numatune audit --ranks --json failed (gpu-check.log)")
    else:
        status, detail = audit_ranks_verdict(json.loads(ranks.stdout), rank, workers, own)
        run.verdict(status, "audit-ranks", detail)
    one = run.run(["numatune", "audit", str(rank), "--json"], timeout=90, save=f"audit-{rank}.json")
    if one is None or one.returncode not in (0, 1):
        run.verdict("FAIL", "audit-rank-pid", f"numatune audit {rank} --json failed (gpu-check.log)")
        run.verdict("FAIL" if gpu else "SKIP", "audit-pinned-host", "no audit of the rank" if gpu else "no GPU")
        return
    proc = next((p for p in json.loads(one.stdout).get("processes", ()) if p["pid"] == rank), None)
    if proc is None:
        run.verdict("FAIL", "audit-rank-pid", f"audit {rank} lists no process {rank}")
        return
    problems = []
    mask = status_cpus(rank)
    if mask is not None and frozenset(proc.get("cpus_allowed") or ()) != mask:
        problems.append(f"CPUs {cpulist(proc.get('cpus_allowed') or ())} in audit, {cpulist(mask)} in /proc")
    gpu0 = next((bdf for label, bdf, _ in _gpus(inspect_doc or {}) if label == "GPU0"), None)
    seen = (proc.get("gpu") or {}).get("bdf")
    if gpu and seen != gpu0:
        problems.append(f"GPU {seen} in audit, the job uses GPU0 {gpu0}")
    gpu_seen = f"GPU {seen} ({(proc.get('gpu') or {}).get('source')})" if seen else "no GPU"
    run.verdict("FAIL" if problems else "PASS", "audit-rank-pid", "; ".join(problems) or (
        f"PID {rank}: CPUs {cpulist(proc.get('cpus_allowed') or ())}, {gpu_seen}, verdict {proc.get('verdict')}"))
    if not gpu:
        run.verdict("SKIP", "audit-pinned-host", "no GPU: nothing is pinned")
        return
    total, devices = pinned_bytes(proc)
    run.verdict("PASS" if total >= STAGING_BYTES else "FAIL", "audit-pinned-host",
                f"audit counts {total / (1 << 20):.0f} MiB of pinned host memory on the rank (from: {devices}); the "
                f"job pinned {STAGING_BYTES >> 20} MiB plus its batches")


def check_pinned_api(run: Run, ready: dict, gpu: bool) -> None:
    answer = ready.get("pinned_host_memory") or {}
    if answer.get("status") == "SKIP":
        run.verdict("SKIP", "pinned-host-memory-api", answer.get("detail", ""))
    elif answer.get("status") != "OK":
        run.verdict("FAIL", "pinned-host-memory-api", f"numatune.pinned_host_memory() raised {answer.get('detail')}")
    elif not gpu:
        run.verdict("PASS", "pinned-host-memory-api", f"answered without CUDA: {json.dumps(answer['result'])[:300]}")
    else:
        total = api_pinned_total(answer["result"])
        run.verdict("PASS" if total >= STAGING_BYTES else "FAIL", "pinned-host-memory-api",
                    f"largest figure {total / (1 << 20):.0f} MiB (the staging buffer at {ready.get('staging_address')}"
                    f" is {STAGING_BYTES >> 20} MiB): {json.dumps(answer['result'])[:300]}")


def chunks_verdict(proc: dict | None, answer: dict, staging: str | None) -> tuple[str, str]:
    """audit's chunks (`pinned_host.chunks`, from outside) against the inside view (train.py's pinned_host_chunks()
    answer): every chunk audit lists is a shared anonymous mapping of the process, and the staging buffer's chunk
    is one the driver pinned; the detail says the reconciliation (describe_chunks())."""
    if answer.get("status") == "SKIP":
        return "SKIP", answer.get("detail", "")
    if answer.get("status") != "OK":
        return "FAIL", f"numatune.pinned_host_chunks() raised {answer.get('detail')}"
    pinned = (proc or {}).get("pinned_host") or {}
    inside = {c["start"]: c for c in answer.get("chunks") or ()}
    outside = [c["start"] for c in pinned.get("chunks") or ()]
    total = sum(int(v) for v in (pinned.get("bytes_by_node") or {}).values())
    problems = []
    missing = [s for s in outside if s not in inside]
    if missing:
        problems.append(f"audit lists chunk(s) the process does not map as shared anonymous memory: {missing[:8]}")
    start = f"{int(staging, 16):x}" if staging else None
    if start is not None and not (inside.get(start) or {}).get("pinned"):
        problems.append(f"the staging buffer's chunk {start} is not among the chunks the driver pinned")
    seen = (f"audit: {pinned.get('chunk_count', len(outside))} chunk(s), {total / (1 << 20):.1f} MiB; inside: "
            f"{answer.get('describe', '')}")
    return ("FAIL", "; ".join(problems) + f" ({seen})") if problems else ("PASS", seen)


def check_pinned_chunks(run: Run, ready: dict, gpu: bool) -> None:
    """The outside view reconciled with the inside one: reads the `audit PID --json` check_audit saved."""
    if not gpu:
        run.verdict("SKIP", "pinned-chunks-reconciled", "no GPU: nothing is pinned")
        return
    saved = run.out / f"audit-{ready['pid']}.json"
    procs = json.loads(saved.read_text()).get("processes", ()) if saved.exists() else ()
    proc = next((p for p in procs if p.get("pid") == ready["pid"]), None)
    status, detail = chunks_verdict(proc, ready.get("pinned_host_chunks") or {}, ready.get("staging_address"))
    run.verdict(status, "pinned-chunks-reconciled", detail)


def check_snapshot(run: Run, rank: int, workers: list[int], inspect_doc: dict | None) -> None:
    archive = run.out / "snapshot.tar.gz"
    archive.unlink(missing_ok=True)
    pids = [a for pid in [rank, *workers] for a in ("--pid", str(pid))]
    done = run.run(["numatune", "snapshot", "-o", str(archive), *pids], timeout=120)
    if done is None or done.returncode != 0 or not archive.exists():
        run.verdict("FAIL", "snapshot", "numatune snapshot failed (gpu-check.log)")
        run.verdict("SKIP", "replay-equals-live", "no snapshot")
        return
    replay = run.run(["numatune", "--root", str(archive), "audit", "--ranks", "--json"], timeout=90,
                     save="replay-audit-ranks.json")
    got = sorted(p["pid"] for p in json.loads(replay.stdout)["processes"]) if replay and replay.returncode in (0, 1) \
        else None
    run.verdict("PASS" if got is not None and set([rank, *workers]) <= set(got) else "FAIL", "snapshot",
                f"{archive.name} ({archive.stat().st_size} bytes); its audit --ranks lists PIDs {got}")
    again = run.run(["numatune", "--root", str(archive), "inspect", "--json"], timeout=90, save="replay-inspect.json")
    now = run.run(["numatune", "inspect", "--json"], timeout=90, save="inspect-at-snapshot.json")  # the same moment
    if now is not None and now.returncode in (0, 1):
        inspect_doc = json.loads(now.stdout)
    try:
        from tests.parity import comparable, differences
    except ImportError:
        run.verdict("SKIP", "replay-equals-live", "tests/parity.py is not in this checkout")
        return
    if again is None or again.returncode != 0 or inspect_doc is None:
        run.verdict("FAIL", "replay-equals-live", "inspect --json of the snapshot failed")
        return
    diff = differences(comparable(json.loads(again.stdout)), comparable(inspect_doc))
    run.verdict("FAIL" if diff else "PASS", "replay-equals-live", "; ".join(diff[:5]) or
                "inspect --json of the snapshot equals live but for what tests/parity.py names")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", nargs="?", help="where the captured files go (default $OUT, else ./gpu-check-out)")
    parser.add_argument("--cores", type=int, default=6, help="launch --cpu-bind cores:N for the rank (default 6)")
    parser.add_argument("--seconds", type=float, default=90.0, help="the job's longest run (default 90)")
    parser.add_argument("--budget", type=float, default=140.0,
                        help="seconds for the checks' steps (default 140; stopping the job adds at most 30)")
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="seconds to wait for the job's workers")
    parser.add_argument("--cpu-job", action="store_true", help="without a GPU, still run the job part on the CPU")
    args = parser.parse_args(argv)
    if args.cores < 1 or args.seconds <= 0 or args.budget <= 0:
        parser.error("--cores, --seconds and --budget must be positive")
    out = out_dir(args.outdir, os.environ)
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out.resolve(), args.budget)
    bindir = Path(tempfile.mkdtemp(prefix="gpu-check-bin-"))
    try:
        return checks(run, args, bindir)
    finally:
        shutil.rmtree(bindir, ignore_errors=True)
        run.log.close()


def checks(run: Run, args: argparse.Namespace, bindir: Path) -> int:
    run.note(f"gpu-check: numatune from {CHECKOUT}, Python {sys.version.split()[0]} ({sys.executable}), output in "
             f"{run.out}")
    missing = missing_modules()
    for module, package, why in missing:
        run.note(f"MISSING Python module {module} (pip package {package}): {why}")
    wrapper = make_wrapper(bindir)
    run.env["PATH"] = os.pathsep.join([str(bindir), os.path.dirname(sys.executable), run.env.get("PATH", "")])
    run.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), run.env.get("PYTHONPATH")]))
    run.env.pop("NUMATUNE_ROOT", None)
    version = run.run(["numatune", "--version"], timeout=60)
    blocked = [m for m, _, _ in missing if m in REQUIRED]
    if version is None or version.returncode != 0 or blocked:
        why = f"missing {', '.join(blocked)}" if blocked else "numatune --version failed (gpu-check.log)"
        run.verdict("FAIL", "setup", why)
        run.skip_rest("setup failed")
        return finish(run)
    run.verdict("PASS", "setup", f"{version.stdout.strip()} via {wrapper} (python3 -m numatune, PYTHONPATH={CHECKOUT})")
    has_torch = all(m != "torch" for m, _, _ in missing)
    no_gpu = gpu_presence(run, has_torch)
    if no_gpu is not None and not args.cpu_job:
        run.note(f"no GPU: {no_gpu}: every comparison is skipped")
        run.skip_rest(f"no GPU: {no_gpu}")
        return finish(run)
    inspect = run.run(["numatune", "inspect", "--json"], timeout=90, save="inspect.json")
    inspect_doc = json.loads(inspect.stdout) if inspect is not None and inspect.returncode in (0, 1) else None
    if no_gpu is None:
        check_inspect(run, inspect_doc)
        check_probe(run)
    else:
        for name in sorted(GPU_ONLY - {"audit-pinned-host"}, key=[n for n, _ in CHECKS].index):
            run.verdict("SKIP", name, f"no GPU: {no_gpu}")
    if not has_torch:
        run.skip_rest("torch is not installed")
    elif run.left() < 30:
        run.skip_rest("out of time (--budget)")
    else:
        check_job(run, args, no_gpu is None, inspect_doc)
        run.skip_rest("not reached")
    return finish(run)


def finish(run: Run) -> int:
    text, code = summarize(run.verdicts)
    run.note(text)
    run.write("verdicts.json", json.dumps(run.verdicts, indent=1) + "\n")
    run.write("summary.txt", "\n".join(verdict_line(v["status"], v["name"], v["detail"]) for v in run.verdicts)
              + f"\n{text}\n")
    run.note("files: " + " ".join(sorted(p.name for p in run.out.iterdir())))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
