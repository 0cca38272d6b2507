"""The harness's own limits, without a VM: a stand-in for virtme-ng plays a guest that stalls or overruns.

These run in the quick loop (no ``vm`` mark): they prove that a boot which runs out of time keeps every
result the guest wrote, says which limit stopped it and which check was running, and that waiting for
another checkout's boot does not count against the guest.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import vm_runner
import vm_topology

#: A stand-in for ``vng``: finds ``--out RUN_DIR`` in its --exec command, writes results.json as the real
#: batch does (two checks done, a third running), then sleeps for the seconds given in $FAKE_GUEST_SLEEP.
FAKE_VNG = textwrap.dedent('''\
    import json, os, shlex, sys, time
    exec_arg = next(a for a in sys.argv if a.startswith("--exec="))
    argv = shlex.split(exec_arg[len("--exec="):])
    out = argv[argv.index("--out") + 1]
    checks = {"first": {"status": "passed", "seconds": 0.1}, "second": {"status": "failed", "seconds": 0.1,
              "details": "it disagreed"}}
    doc = {"started": True, "finished": False, "running": "third", "checks": checks, "setup": {}}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f)
    print("[vm-batch] first: passed", flush=True)
    if os.environ.get("FAKE_GUEST_STALL"):
        print("[   23.864071] rcu: rcu_preempt kthread timer wakeup didn't happen for 5251 jiffies!", flush=True)
    if os.environ.get("FAKE_GUEST_PANIC"):  # as a fresh-clone CI's two-socket guest printed it
        print("[  463.676497] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI", flush=True)
        print("[  463.677930] RIP: 0010:free_unref_folios+0xed/0x7e0", flush=True)
        print("[  463.678204] Kernel panic - not syncing: Fatal exception in interrupt", flush=True)
        sys.exit(0)
    if os.environ.get("FAKE_ROOT_DEAD"):  # the batch's heartbeat: alive, but the shared root stopped answering
        print("[  301.000001] numatune-vm-heartbeat check=third root_silent=30s", flush=True)
        print("[  331.000001] numatune-vm-heartbeat check=third root_silent=60s", flush=True)
    if os.environ.get("FAKE_QEMU_FAULT"):  # QEMU's own line, split over two writes as a pipe may deliver it
        sys.stdout.write("qemu-system-x86_64: virtio: bogus desc"); sys.stdout.flush(); time.sleep(0.5)
        print("riptor or out of resources", flush=True)
    time.sleep(float(os.environ["FAKE_GUEST_SLEEP"]))
''')


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> vm_runner.Environment:
    script = tmp_path / "vng"
    script.write_text(f"#!{sys.executable}\n{FAKE_VNG}")
    script.chmod(0o755)
    kernel = tmp_path / "vmlinuz-6.12.0"
    kernel.write_bytes(b"")
    monkeypatch.setattr(vm_runner, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(vm_runner, "CACHE", tmp_path / "cache")
    return vm_runner.Environment(vng=str(script), qemu="qemu-system-x86_64", kernel_image=kernel,
                                 kernel_version="6.12.0")


def test_stalled_guest_is_stopped_and_keeps_its_results(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "60")
    start = time.monotonic()
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=120, stall=2)
    assert time.monotonic() - start < 30
    assert boot.timed_out
    assert "without news from the guest" in boot.why_stopped
    results = json.loads(boot.results_path.read_text())
    assert results["running"] == "third"
    assert set(results["checks"]) == {"first", "second"}
    assert "killed after" in boot.console_log.read_text()


def test_overall_limit_names_itself(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "60")
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=2, stall=100)
    assert boot.timed_out
    assert "NUMATUNE_VM_TIMEOUT" in boot.why_stopped


def test_guest_that_finishes_is_not_stopped(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "0")
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=60, stall=30)
    assert not boot.timed_out and boot.why_stopped == ""
    assert boot.returncode == 0


def test_waiting_for_the_boot_lock_is_not_guest_time(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "0")
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with vm_runner.boot_lock():
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    threading.Timer(3, release.set).start()
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=2, stall=2)
    t.join()
    assert boot.lock_wait >= 2.5
    assert not boot.timed_out, boot.why_stopped


def _session(fake_env: vm_runner.Environment) -> Any:
    import conftest

    session = conftest.VmSession()
    session._env = fake_env
    return session


def _skipped_why(run: Any) -> str:
    """After two stalled boots: the last boot's passed check stands, every check of the topology that did not
    pass is skipped with the same reason; that reason."""
    import vm_checks

    checks = run.results["checks"]
    assert checks["first"]["status"] == "passed"  # the stand-in guest's one passed check
    names = [c.name for c in vm_checks.for_topology("two-socket")]
    assert names and all(checks[n]["status"] == "skipped" for n in names)
    assert "second" not in checks and run.results["running"] is None
    return checks[names[0]]["details"]


def test_a_failure_in_a_boot_whose_guest_faulted_is_retried_then_skipped(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "0")
    monkeypatch.setenv("FAKE_GUEST_STALL", "1")
    monkeypatch.delenv("NUMATUNE_VM", raising=False)
    run = _session(fake_env).get("two-socket")
    assert len(run.boots) == 2 and run.skip_reason is None
    why = _skipped_why(run)
    assert "outside the project" in why and "timer wakeup didn't happen" in why
    assert "['second', 'third']" in why  # the failed check and the one left running


def test_a_guest_kernel_crash_is_retried_then_skipped(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "0")
    monkeypatch.setenv("FAKE_GUEST_PANIC", "1")
    monkeypatch.delenv("FAKE_GUEST_STALL", raising=False)
    monkeypatch.delenv("NUMATUNE_VM", raising=False)
    run = _session(fake_env).get("two-socket")
    assert len(run.boots) == 2 and run.skip_reason is None
    why = _skipped_why(run)
    assert "outside the project" in why and "Oops: int3" in why


def test_a_dead_qemu_device_stops_the_boot_at_once_then_it_is_retried_and_skipped(fake_env, monkeypatch) -> None:
    # QEMU 7.2 gave up on a virtio queue (a page in emulated CXL memory): the guest sat silent until the
    # stall limit (1200 s) in CI. The line is seen in the console stream, even split over two reads.
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "60")
    monkeypatch.setenv("FAKE_QEMU_FAULT", "1")
    monkeypatch.delenv("FAKE_GUEST_STALL", raising=False)
    monkeypatch.delenv("NUMATUNE_VM", raising=False)
    start = time.monotonic()
    run = _session(fake_env).get("two-socket")
    assert time.monotonic() - start < 40  # two boots, each stopped within seconds of the line
    assert len(run.boots) == 2
    assert all("QEMU reported a dead device" in b.why_stopped for b in run.boots)
    why = _skipped_why(run)
    assert "virtio: bogus descriptor or out of resources" in why and "outside the project" in why


def test_a_silent_guest_is_stopped_as_frozen_then_retried_and_skipped(fake_env, monkeypatch) -> None:
    # CI: a cxl guest printed nothing from one check on (not even its own watchdog's line) and was stopped
    # only by the 1200 s stall limit, failing CI. Silence after the batch started is a frozen guest.
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "60")
    monkeypatch.delenv("FAKE_QEMU_FAULT", raising=False)
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=120, stall=100, silent=2)
    assert boot.froze and "went silent" in boot.why_stopped and "NUMATUNE_VM_SILENT_TIMEOUT" in boot.why_stopped
    assert boot.guest_fault == boot.why_stopped
    monkeypatch.delenv("NUMATUNE_VM", raising=False)
    monkeypatch.setattr(vm_runner, "SILENT_TIMEOUT", 2)
    real_boot = vm_runner.boot
    monkeypatch.setattr(vm_runner, "boot", lambda env, topo: real_boot(env, topo, timeout=120, stall=100, silent=2))
    run = _session(fake_env).get("two-socket")
    assert len(run.boots) == 2
    why = _skipped_why(run)
    assert "outside the project" in why and "went silent" in why


def test_a_guest_whose_root_stopped_answering_is_stopped_at_once(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "60")
    monkeypatch.setenv("FAKE_ROOT_DEAD", "1")
    start = time.monotonic()
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=120, stall=100, silent=100, root=60)
    assert time.monotonic() - start < 30
    assert boot.froze and "has not answered for 60 s" in boot.why_stopped


def test_a_heartbeat_that_says_the_root_answers_keeps_the_boot(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "3")
    monkeypatch.setenv("FAKE_ROOT_DEAD", "1")
    boot = vm_runner.boot(fake_env, vm_topology.load("two-socket"), timeout=120, stall=100, silent=100, root=61)
    assert not boot.froze and boot.why_stopped == "" and boot.returncode == 0


def test_qemu_fault_is_found_in_the_console_stream() -> None:
    assert vm_runner.qemu_fault(b"[ 12.0] ok\nqemu-system-x86_64: virtio: bogus descriptor or out of resources\n")
    assert vm_runner.qemu_fault(b"[vm-batch] probe: passed (91.3s)\n") is None


def test_a_failure_in_a_sound_boot_is_the_projects(fake_env, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GUEST_SLEEP", "0")
    monkeypatch.delenv("FAKE_GUEST_STALL", raising=False)
    monkeypatch.delenv("NUMATUNE_VM", raising=False)
    run = _session(fake_env).get("two-socket")
    assert len(run.boots) == 1 and run.skip_reason is None
    assert run.boots[0].guest_fault is None
    assert run.results["checks"]["second"]["status"] == "failed"  # its test fails: not retried away


def test_shared_cache_keeps_each_checkouts_runs_apart(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(vm_runner, "CACHE", tmp_path / "shared")
    runs = vm_runner._runs_dir()
    assert runs.parent == tmp_path / "shared" / "runs"
    assert runs.name.startswith(vm_runner.REPO.name + "-")
    monkeypatch.setattr(vm_runner, "RUNS", runs)
    env = vm_runner.Environment(vng="vng", kernel_image=tmp_path / "vmlinuz")
    cmd = vm_runner.vng_command(env, vm_topology.load("two-socket"), runs / "two-socket")
    assert cmd[cmd.index(str(runs)) - 1] == "--rwdir"  # the guest can write its results there


class _Session:
    def __init__(self, run: Any) -> None:
        self.run = run

    def get(self, name: str) -> Any:
        return self.run


@pytest.mark.parametrize("ci", ["true", ""])
def test_an_engine_check_that_did_not_run_fails_under_ci(monkeypatch, ci: str) -> None:
    """The Slurm and Prometheus checks: skipped for a missing package (in the guest) or a VM harness that cannot
    run here, loudly, except under CI=true, where a green run must prove the engines ran. Other skips stay."""
    import test_vm_checks
    import vm_checks
    from conftest import TopologyRun

    engines = {c.name for c in vm_checks.for_topology("two-socket") if c.engines}
    assert engines == {"slurm_places_as_numatune_says", "slurm_job_tree", "slurm_bind_worker",
                       "prometheus_scrapes_the_live_textfile"}
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    missing = {"status": "skipped", "details": "slurmd not installed", "engine_missing": True}
    run = TopologyRun(results={"started": True, "checks": {"slurm_places_as_numatune_says": missing}})
    run.boots.append(vm_runner.BootResult("two-socket", 0, 1.0, False, Path("/run"), Path("/run/console.log"), []))
    with pytest.raises(outcome, match="slurmd not installed"):
        test_vm_checks.test_vm_check(_Session(run), "two-socket", "slurm_places_as_numatune_says")
    unusable = TopologyRun(skip_reason="VM harness cannot run here: no qemu", unusable=True)
    with pytest.raises(outcome, match="no qemu"):
        test_vm_checks.test_vm_check(_Session(unusable), "two-socket", "prometheus_scrapes_the_live_textfile")
    with pytest.raises(pytest.skip.Exception):  # a check without an engine skips either way
        test_vm_checks.test_vm_check(_Session(unusable), "two-socket", "snapshot_parity")
    stalled = TopologyRun(skip_reason="VM boot of 'two-socket' failed twice, outside the project")
    with pytest.raises(pytest.skip.Exception):  # a boot that failed outside the project: retried, then skipped
        test_vm_checks.test_vm_check(_Session(stalled), "two-socket", "slurm_places_as_numatune_says")
