"""Host side of the VM harness: find QEMU/virtme-ng/kernel, pick an accelerator, boot once.

One boot per topology runs ``tests/vm/guest/batch.py`` inside the guest, which writes its
results into the run directory (inside the checkout, shared read-write with the guest).
Everything here is plain functions so ``tests/vm/run_vm.py`` (manual use) and the pytest
fixtures share them.

Facts this relies on (see ../shared/vm-notes.md):
- virtme-ng shares the host root read-only, so the host venv's python runs in the guest;
- its output travels over virtio-serial ports the guest finds through udev;
- QEMU opens the guest's stdout as /proc/self/fd/N with O_TRUNC, so stdout must be a pipe,
  never a regular file (output would be garbled);
- /dev/kvm here is PVM, which cannot run a stock kernel: use TCG unless KVM is real.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import vm_topology

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("NUMATUNE_VM_CACHE", HERE / ".cache")).resolve()


def _runs_dir() -> Path:
    """Where the guest writes its results: inside the cache, one folder per checkout.

    A cache shared by several checkouts (NUMATUNE_VM_CACHE) keeps one kernel and one boot lock for
    the machine; each checkout's runs stay apart so one boot never deletes another's results.
    """
    if CACHE.is_relative_to(REPO):
        return CACHE / "runs"
    return CACHE / "runs" / f"{REPO.name}-{hashlib.sha256(str(REPO).encode()).hexdigest()[:8]}"


RUNS = _runs_dir()
BATCH = HERE / "guest" / "batch.py"

#: Modules the guest never needs; udev would load them at boot, which costs seconds under TCG
#: (AHCI probes the q35 CD-ROM, kvm/edac/watchdog/cpufreq drivers probe the emulated CPU).
GUEST_MODULE_BLACKLIST = (
    "kvm_amd,kvm_intel,kvm,ahci,sr_mod,cdrom,iTCO_wdt,iTCO_vendor_support,i2c_i801,lpc_ich,"
    "powernow_k8,pcspkr,amd64_edac,edac_mce_amd,joydev,evdev,sg,serio_raw"
)

#: Host settings the guest batch reads: opt-in PyTorch checks (guest/checks_placement.py), the README's
#: text reports (guest/checks_probe.py), fixture refreshes (the cxl-switch boot takes its snapshot only
#: then: guest/checks_inspect.py). The per-check watchdog's limit (CHECK_TIMEOUT) is always passed.
GUEST_ENV = ("NUMATUNE_VM_TORCH", "NUMATUNE_VM_README", "NUMATUNE_VM_UPDATE_FIXTURES")

#: Seconds one boot may take, batch included (TCG, 4 vCPUs on 2 shared host cores). The slowest
#: batch seen on a loaded 2-core machine is the cxl one (see README "VM stage"); this is more than
#: twice that, and a guest that stops making progress is stopped much earlier by STALL_TIMEOUT.
BOOT_TIMEOUT = int(os.environ.get("NUMATUNE_VM_TIMEOUT", "2100"))
#: Seconds without any news from the guest (results.json is rewritten when the batch starts, after
#: its set-up and before and after every check) before the boot is stopped: the guest's own
#: per-check watchdog (CHECK_TIMEOUT) fires before this.
STALL_TIMEOUT = int(os.environ.get("NUMATUNE_VM_STALL_TIMEOUT", "1200"))
#: Seconds one check may take in the guest before the batch's watchdog fails it (a hung numatune must
#: not eat the boot budget). The slowest check seen, cxl's launch_mem_policies, took 352 s on a 2-core
#: host running three guests at once (53 s on a quiet one); this is more than twice that. Always passed
#: to the guest (guest/batch.py reads it from here).
CHECK_TIMEOUT = int(os.environ.get("NUMATUNE_VM_CHECK_TIMEOUT", "900"))
#: The guest batch says it is alive through the guest kernel's log every HEARTBEAT seconds (the kernel's
#: console is QEMU's emulated serial port, not virtio), naming the running check and how long ago the
#: shared root (9p over virtio) last answered a stat. A boot whose console has been silent for
#: SILENT_TIMEOUT seconds once the batch started, heartbeat included, froze under QEMU; one whose heartbeat
#: says the root has not answered for ROOT_TIMEOUT seconds lost its virtio device. Neither says anything
#: about numatune (a numatune that hangs is caught by CHECK_TIMEOUT while the heartbeat goes on): the boot
#: is stopped there and then, and retried once (conftest). Seen in fresh-clone CI: cxl guests silent from
#: one check on, their own watchdog never firing, until STALL_TIMEOUT (1200 s).
HEARTBEAT = 30
SILENT_TIMEOUT = int(os.environ.get("NUMATUNE_VM_SILENT_TIMEOUT", "300"))
ROOT_TIMEOUT = int(os.environ.get("NUMATUNE_VM_ROOT_TIMEOUT", "240"))
HEARTBEAT_LINE = re.compile(rb"numatune-vm-heartbeat check=\S* root_silent=(\d+)s")
#: Seconds for the guest to reach the batch (boots take 20-100 s under TCG): a boot that never gets there
#: is a failure outside the project, retried once and then skipped, and must not cost CI half an hour.
START_TIMEOUT = int(os.environ.get("NUMATUNE_VM_START_TIMEOUT", "420"))


@dataclass
class Environment:
    """What a boot needs; ``problems`` non-empty means the VM tests must skip."""

    vng: str | None = None
    qemu: str | None = None
    kernel_image: Path | None = None
    kernel_version: str | None = None
    accel: str = "tcg"
    accel_reason: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return not self.problems


def find_kernel(cache: Path = CACHE) -> tuple[Path, str] | None:
    """The kernel unpacked by setup.sh: (vmlinuz path, version) or None."""
    boot = cache / "kernel" / "boot"
    images = sorted(boot.glob("vmlinuz-6.12.*"), key=lambda p: _version_key(p.name))
    for image in reversed(images):
        version = image.name.removeprefix("vmlinuz-")
        if (cache / "kernel" / "lib" / "modules" / version / "modules.dep").exists():
            return image, version
    return None


def _version_key(name: str) -> list[int]:
    digits = "".join(c if c.isdigit() else " " for c in name)
    return [int(x) for x in digits.split()]


def kvm_choice() -> tuple[str, str]:
    """Pick ``kvm`` only when it can run a stock kernel; returns (accel, why).

    /dev/kvm on our machines is provided by ``kvm_pvm``, which only runs PVM guest kernels:
    QEMU then aborts ("failed to set MSR 0x10a") or the guest dies with an emulation failure.
    Real KVM means kvm_intel or kvm_amd is loaded. NUMATUNE_VM_ACCEL=kvm|tcg overrides.
    """
    forced = os.environ.get("NUMATUNE_VM_ACCEL", "").strip().lower()
    if forced in ("kvm", "tcg"):
        return forced, f"forced by NUMATUNE_VM_ACCEL={forced}"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "/dev/kvm missing or not accessible"
    if Path("/sys/module/kvm_pvm").exists():
        return "tcg", "/dev/kvm is PVM (kvm_pvm), which cannot run a stock kernel"
    if Path("/sys/module/kvm_intel").exists() or Path("/sys/module/kvm_amd").exists():
        return "kvm", "kvm_intel/kvm_amd loaded"
    return "tcg", "no kvm_intel/kvm_amd module loaded"


def probe() -> Environment:
    """Collect everything a boot needs and list precisely what is missing."""
    env = Environment()
    bindir = Path(sys.executable).parent
    env.vng = shutil.which("vng", path=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    env.qemu = shutil.which("qemu-system-x86_64")
    kernel = find_kernel()
    if kernel:
        env.kernel_image, env.kernel_version = kernel
    env.accel, env.accel_reason = kvm_choice()
    if env.qemu is None:
        env.problems.append("qemu-system-x86_64 not found (run: bash tests/vm/setup.sh)")
    if env.vng is None:
        env.problems.append(f"virtme-ng's vng not found next to {sys.executable} (run: bash tests/vm/setup.sh)")
    if kernel is None:
        env.problems.append(
            f"no unpacked linux-image-6.12.*+deb12-amd64 in {CACHE}/kernel (run: bash tests/vm/setup.sh)"
        )
    if not _udev_running():
        env.problems.append(
            "udevd is not running on the host; virtme-ng would silently lose the guest's output "
            "(run: bash tests/vm/setup.sh, or /lib/systemd/systemd-udevd --daemon)"
        )
    return env


def _udev_running() -> bool:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (proc / "comm").read_text().strip() in ("systemd-udevd", "udevd"):
                return True
    return False


@dataclass
class BootResult:
    topology: str
    returncode: int | None
    seconds: float
    timed_out: bool
    run_dir: Path
    console_log: Path
    command: list[str]
    why_stopped: str = ""
    lock_wait: float = 0.0
    froze: bool = False  # stopped because the guest went silent or lost its root (SILENT/ROOT_TIMEOUT)

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.json"

    @property
    def guest_fault(self) -> str | None:
        """Why this boot says nothing about numatune, if it does not: the guest froze (SILENT_TIMEOUT,
        ROOT_TIMEOUT), or its kernel or QEMU said it stalled or crashed (KERNEL_STALLS, KERNEL_CRASHES, QEMU_FAULTS)."""
        return self.why_stopped if self.froze else guest_fault(self.console_log)


#: What the guest kernel prints when it stops making progress by itself: an RCU grace period or a
#: task stuck for minutes, a CPU whose timer never fired. Under TCG this follows a host that froze or
#: jumped its clock (seen once, 23 s into a boot on an idle machine: CPU 1's timer stopped, every later
#: module load waited on RCU). A failure in such a boot says nothing about numatune: the boot is retried.
KERNEL_STALLS = ("rcu_preempt detected stall", "rcu_sched detected stall", "timer wakeup didn't happen",
                 "kthread starved for", "blocked for more than", "soft lockup", "hard LOCKUP")


#: What the guest kernel prints when it crashed by itself: seen in fresh-clone CI, an "Oops: int3" in
#: free_unref_folios during an unrelated daemon's (munged) execve, then "Kernel panic - not syncing": a
#: breakpoint the kernel's live code patching leaves for an instant, which TCG's translated code ran
#: into. Nothing numatune does reaches kernel text; the boot is retried, as for a stall.
KERNEL_CRASHES = ("Kernel panic - not syncing", "] Oops: ")


#: What QEMU itself prints (on the console stream) when a device model gives up: the guest's virtio
#: queue is dead from then on, so its shared root hangs and nothing after says anything about numatune.
#: Seen when a page the guest handed to virtio lay in emulated CXL memory, which QEMU 7.2 serves as
#: MMIO and cannot DMA into (KNOWN.md). The boot is stopped at once rather than after STALL_TIMEOUT.
QEMU_FAULTS = ("virtio: bogus descriptor", "virtio: zero sized buffers")


def _first_line(lines: Iterable[str], patterns: tuple[str, ...]) -> str | None:
    """The first line holding one of ``patterns``, without the kernel's timestamp."""
    for line in lines:
        if any(s in line for s in patterns):
            return line.split("] ", 1)[-1].strip()[:200]
    return None


def guest_fault(console: Path) -> str | None:
    """The first console line in which the guest kernel (or QEMU under it) reports that the guest
    stopped making progress or crashed."""
    try:
        with console.open(errors="replace") as f:
            return _first_line(f, KERNEL_STALLS + KERNEL_CRASHES + QEMU_FAULTS)
    except OSError:
        return None


def qemu_fault(text: bytes) -> str | None:
    """The line of ``text`` in which QEMU reports a dead device (QEMU_FAULTS), if any."""
    return _first_line(text.decode(errors="replace").splitlines(), QEMU_FAULTS)


def guest_command(topo: vm_topology.Topology, run_dir: Path, extra: list[str] | None = None) -> str:
    """Shell command virtme-ng runs in the guest (the host venv's python, via the shared root)."""
    argv = [sys.executable, str(BATCH), "--topology", str(topo.path), "--out", str(run_dir), *(extra or [])]
    passed = [f"{k}={os.environ[k]}" for k in GUEST_ENV if os.environ.get(k)]
    passed.append(f"NUMATUNE_VM_CHECK_TIMEOUT={CHECK_TIMEOUT}")  # the guest inherits no host environment
    argv = ["env", *passed, *argv]
    return shlex.join(argv)


def vng_command(env: Environment, topo: vm_topology.Topology, run_dir: Path,
                extra_batch_args: list[str] | None = None) -> list[str]:
    assert env.vng and env.kernel_image
    qemu = vm_topology.qemu_args(topo, run_dir)
    cmd = [
        env.vng,
        "--run", str(env.kernel_image),
        "--verbose",
        "--cpus", str(topo.ncpus),
        "--memory", f"{topo.memory_mib}M",
        "--rwdir", str(REPO),
        *(() if RUNS.is_relative_to(REPO) else ("--rwdir", str(RUNS))),
        "--cwd", str(REPO),
        "--name", f"numatune-{topo.name}",
        # "=" form: the value starts with "-", which argparse would take for an option.
        "--qemu-opts=" + vm_topology.qemu_opts_string(qemu),
    ]
    if env.accel != "kvm":
        cmd.append("--disable-kvm")
    for a in (*topo.append, f"module_blacklist={GUEST_MODULE_BLACKLIST}"):
        cmd.append(f"--append={a}")
    cmd.append("--exec=" + guest_command(topo, run_dir, extra_batch_args))
    return cmd


@contextlib.contextmanager
def boot_lock() -> Iterator[None]:
    """One boot at a time on this machine (2 shared cores), even across pytest processes."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "boot.lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def boot(env: Environment, topo: vm_topology.Topology, timeout: int = BOOT_TIMEOUT,
         extra_batch_args: list[str] | None = None, stall: int = STALL_TIMEOUT, silent: int = SILENT_TIMEOUT,
         root: int = ROOT_TIMEOUT) -> BootResult:
    """Boot ``topo`` once and run the guest batch; the guest writes run_dir/results.json.

    The clock starts once this machine's boot lock is held (waiting for another checkout's boot
    is not the guest's time). The boot is stopped after ``timeout`` seconds in all, or after
    STALL_TIMEOUT seconds in which results.json did not change, or when the guest froze (SILENT_TIMEOUT,
    ROOT_TIMEOUT, QEMU_FAULTS); either way the results the guest wrote so far stay, and ``why_stopped``
    says which limit was hit.
    """
    run_dir = RUNS / topo.name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    vm_topology.prepare_backing_files(topo, run_dir)
    cmd = vng_command(env, topo, run_dir, extra_batch_args)
    console = run_dir / "console.log"
    results = run_dir / "results.json"
    path_env = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    child_env = {**os.environ, "PATH": path_env}
    asked = time.monotonic()
    timed_out = froze = False
    why = ""
    with boot_lock(), console.open("wb") as log:
        start = time.monotonic()
        log.write(("$ " + " ".join(cmd) + "\n").encode())
        log.flush()
        # stdout must be a pipe (QEMU truncates a regular-file stdout); stdin must not be a tty.
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        deadline = start + timeout
        last_news, last_mtime, last_output = start, None, start
        fault, line_start, root_silent = None, b"", 0
        os.set_blocking(proc.stdout.fileno(), False)
        while True:
            chunk = proc.stdout.read(65536)
            if chunk:
                log.write(chunk)
                log.flush()
                fault = fault or qemu_fault(line_start + chunk)
                for beat in HEARTBEAT_LINE.finditer(line_start + chunk):
                    root_silent = int(beat.group(1))
                line_start = chunk.rsplit(b"\n", 1)[-1][-200:]
                last_output = time.monotonic()
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.2)
            now = time.monotonic()
            mtime = _mtime(results)
            if mtime != last_mtime:
                last_news, last_mtime = now, mtime
            if fault:
                why = f"QEMU reported a dead device ({fault!r}): the guest cannot go on"
            elif last_mtime is not None and now - last_output > silent:
                why = (f"the guest went silent: no console output for {silent} s, not even the batch's heartbeat"
                       f" (every {HEARTBEAT} s through the kernel log): it froze under QEMU"
                       " (NUMATUNE_VM_SILENT_TIMEOUT)")
                froze = True
            elif root_silent >= root:
                why = (f"the guest's shared root (9p over virtio) has not answered for {root_silent} s, its"
                       " heartbeat says: QEMU's device stopped (NUMATUNE_VM_ROOT_TIMEOUT)")
                froze = True
            elif now > deadline:
                why = f"the boot's limit of {timeout} s (NUMATUNE_VM_TIMEOUT)"
            elif last_mtime is None and now - start > min(stall, START_TIMEOUT):
                why = f"the guest batch not starting within {min(stall, START_TIMEOUT)} s (NUMATUNE_VM_START_TIMEOUT)"
            elif now - last_news > stall:
                why = f"{stall} s without news from the guest (NUMATUNE_VM_STALL_TIMEOUT)"
            if why:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                log.write(f"\n[harness] killed after {now - start:.0f}s: {why}\n".encode())
                break
        rest = proc.stdout.read()
        if rest:
            log.write(rest)
    return BootResult(
        topology=topo.name,
        returncode=proc.returncode,
        seconds=time.monotonic() - start,
        timed_out=timed_out,
        why_stopped=why,
        froze=froze,
        lock_wait=start - asked,
        run_dir=run_dir,
        console_log=console,
        command=cmd,
    )


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"
