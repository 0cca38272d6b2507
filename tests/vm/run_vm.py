"""Boot one topology by hand, outside pytest: print the check results, optionally refresh fixtures.

    .venv/bin/python tests/vm/run_vm.py two-socket [--update-fixtures] [--only CHECK ...]
    .venv/bin/python tests/vm/run_vm.py cxl --dry-run     # print the vng command only

Useful when writing a check: the console log and results.json stay in
tests/vm/.cache/runs/<topology>/.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import vm_fixtures  # noqa: E402
import vm_runner  # noqa: E402
import vm_topology  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topology", choices=vm_topology.available(capture_only=True))
    ap.add_argument("--update-fixtures", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="print the vng command and exit")
    ap.add_argument("--only", action="append", default=[], help="run only this check (repeatable)")
    args = ap.parse_args()
    if args.update_fixtures:  # the guest's batch needs to know: some boots take their snapshot only then
        import os

        os.environ["NUMATUNE_VM_UPDATE_FIXTURES"] = "1"
    env = vm_runner.probe()
    topo = vm_topology.load(args.topology)
    if args.dry_run:
        if env.vng and env.kernel_image:
            print(shlex.join(vm_runner.vng_command(env, topo, vm_runner.RUNS / topo.name)))
        print("problems:", env.problems or "none", f"; accel {env.accel} ({env.accel_reason})")
        return 0
    if not env.usable:
        print("cannot boot:", *env.problems, sep="\n  ", file=sys.stderr)
        return 2
    boot = vm_runner.boot(env, topo, extra_batch_args=[a for c in args.only for a in ("--only", c)])
    print(f"boot+batch {boot.seconds:.0f}s rc={boot.returncode} timed_out={boot.timed_out} log={boot.console_log}")
    try:
        results = json.loads(boot.results_path.read_text())
    except (OSError, json.JSONDecodeError):
        print("no results.json; console tail:\n" + vm_runner.tail(boot.console_log), file=sys.stderr)
        return 1
    print(f"set-up {results['setup'].get('seconds')}s, cxl chain {results['setup'].get('cxl_chain')}")
    for name, entry in results["checks"].items():
        print(f"{entry['status']:>7} {name} ({entry.get('seconds')}s)")
        if entry["status"] != "passed":
            print("        " + str(entry["details"]).replace("\n", "\n        ")[:3000])
    if args.update_fixtures:
        print("fixtures:", vm_fixtures.update(topo, boot, env, results))
    failed = [n for n, e in results["checks"].items() if e["status"] not in ("passed", "skipped")]
    return 1 if failed or not results.get("finished") else 0


if __name__ == "__main__":
    sys.exit(main())
