"""Guest entry point: set the machine up, run every check for this topology, write JSON.

Run by virtme-ng inside the VM as
    <host venv python> tests/vm/guest/batch.py --topology FILE --out RUN_DIR
RUN_DIR lies in the checkout, which the guest shares read-write. results.json is rewritten
after every check, so a guest that dies half-way still leaves the results it had; the host
tells "never started" (a boot problem: retry, then skip) from "started" (checks count).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

# The guest checks this checkout's numatune, also from a venv that does not have it installed.
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1]),
                str(Path(__file__).resolve().parents[3])]

import vm_checks  # noqa: E402
import vm_guest  # noqa: E402
import vm_runner  # noqa: E402
import vm_setup  # noqa: E402
import vm_topology  # noqa: E402

#: The host's per-check limit (vm_runner.CHECK_TIMEOUT, passed into the guest's environment).
CHECK_TIMEOUT = vm_runner.CHECK_TIMEOUT


class CheckTimeout(vm_guest.CheckFailed):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise CheckTimeout(f"check still running after {CHECK_TIMEOUT} s: killed by the batch watchdog")


class Heartbeat:
    """Tells the host, through the guest kernel's log, that the guest runs (vm_runner.HEARTBEAT).

    The kernel log reaches the host over QEMU's emulated serial port, not over virtio: the heartbeat goes
    on when the shared root (9p over virtio) stops answering, and says so; it stops only when the guest
    itself froze. A second thread stats the run directory every few seconds to time the root's answers.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.check = ""
        self.root_answered = time.monotonic()

    def start(self) -> None:
        for target in (self._probe_root, self._beat):
            threading.Thread(target=target, daemon=True).start()

    def _probe_root(self) -> None:
        while True:
            with contextlib.suppress(OSError):  # an error is an answer too
                os.stat(self.out)  # blocks while the 9p device is dead
            self.root_answered = time.monotonic()
            time.sleep(5)

    def _beat(self) -> None:
        try:
            fd, level = os.open("/dev/kmsg", os.O_WRONLY), "<5>"
        except OSError:  # not root: the batch's own output, which also reaches the console
            fd, level = sys.stdout.fileno(), ""
        while True:
            silent = int(time.monotonic() - self.root_answered)
            line = f"{level}numatune-vm-heartbeat check={self.check or '-'} root_silent={silent}s\n"
            with contextlib.suppress(OSError):
                os.write(fd, line.encode())
            time.sleep(vm_runner.HEARTBEAT)


def write(out: Path, results: dict[str, Any]) -> None:
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True, default=str))
    os.replace(tmp, out / "results.json")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", action="append", default=[], help="run only these checks (debugging)")
    args = ap.parse_args()
    topo = vm_topology.load(args.topology)
    out: Path = args.out
    results: dict[str, Any] = {
        "started": True,
        "finished": False,
        "topology": topo.name,
        "env": vm_guest.env_dump(),
        "setup": {"log": []},
        "checks": {},
    }
    write(out, results)
    heartbeat = Heartbeat(out)
    heartbeat.check = "set-up"
    heartbeat.start()
    setup_log: list[str] = results["setup"]["log"]
    ctx = vm_checks.Context(topo=topo, out=out)
    t0 = time.monotonic()
    try:
        ctx.nics = vm_setup.bring_up_nics(topo, setup_log)
    except Exception:  # recorded; the checks that need NICs fail with their own message
        setup_log.append("bring_up_nics failed:\n" + traceback.format_exc())
    if topo.cxl:
        try:
            ctx.cxl_chain = vm_setup.cxl_to_system_ram(topo, setup_log)
        except Exception as exc:
            ctx.cxl_error = f"{type(exc).__name__}: {exc}"
            setup_log.append("cxl_to_system_ram failed:\n" + traceback.format_exc())
    results["setup"]["seconds"] = round(time.monotonic() - t0, 1)
    results["setup"]["cxl_chain"] = ctx.cxl_chain
    write(out, results)

    signal.signal(signal.SIGALRM, _alarm)
    for check in vm_checks.for_topology(topo.name):
        if args.only and check.name not in args.only:
            continue
        results["running"] = check.name
        heartbeat.check = check.name
        write(out, results)
        start = time.monotonic()
        entry: dict[str, Any]
        try:
            signal.alarm(CHECK_TIMEOUT)
            try:
                details = check.func(ctx)
            finally:
                signal.alarm(0)
            entry = {"status": "passed", "details": details}
        except vm_guest.CheckSkipped as exc:
            entry = {"status": "skipped", "details": str(exc),
                     "engine_missing": isinstance(exc, vm_guest.EngineMissing)}
        except vm_guest.CheckFailed as exc:
            entry = {"status": "failed", "details": str(exc)}
        except AssertionError as exc:
            entry = {"status": "failed", "details": f"{exc}\n{traceback.format_exc(limit=3)}"}
        except Exception:
            entry = {"status": "error", "details": traceback.format_exc()}
        entry["seconds"] = round(time.monotonic() - start, 1)
        results["checks"][check.name] = entry
        print(f"[vm-batch] {check.name}: {entry['status']} ({entry['seconds']}s)", flush=True)
        write(out, results)

    results["running"] = None
    results["finished"] = True
    results["env"]["uptime_end"] = vm_guest.read("/proc/uptime").split()[0]
    write(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
