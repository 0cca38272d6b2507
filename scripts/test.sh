#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine and run the whole suite, VM stage included
# (the README's test command; .ci/run runs exactly this). The quick loop: .venv/bin/python -m pytest -m "not vm"
# Stages and what runs beside what (docs/development.md, "CI time"): set-up (apt, venv, pip, the VM kernel) with
# the two Debian trixie chroots built beside it; then, with no arguments, the VM stage (pytest -m vm: one QEMU guest
# at a time, mostly waiting on its emulated CPUs) runs beside the quick loop and, after it, the quick loop again
# under Python 3.13. Each stage's wall time is printed at the end. With arguments, pytest ARGS runs alone, as before.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
# Under CI=true the engines the tests drive must be there: a failed install stops the run here (and a test
# that finds an engine missing fails, tests/conftest.py engine_missing); elsewhere it is said and the tests skip.
ci=0
[ "${CI:-}" = true ] && ci=1
optional_failed() {
  echo "numatune: $1" >&2
  if [ "$ci" = 1 ]; then echo "numatune: CI=true: the engines must be installed" >&2; exit 1; fi
}
# Per-stage wall times: `stage NAME` starts a stage's clock, `took NAME` stops it; printed at the end.
t0=$(date +%s)
declare -A began=()
times=()
stage() { began[$1]=$(date +%s); }
took() { times+=("$1 $(($(date +%s) - ${began[$1]}))s${2:+ ($2)}"); echo "numatune: stage $1 took $(($(date +%s) - ${began[$1]})) s" >&2; }
summary() {
  echo "numatune: wall time per stage (total $(($(date +%s) - t0)) s):" >&2
  for t in "${times[@]}"; do echo "numatune:   $t" >&2; done
}
logs=$(mktemp -d "${TMPDIR:-/tmp}/numatune-test.XXXXXX")
# Python 3.13 (scripts/py313.sh) and Slurm 24.11 (scripts/slurm-chroot.sh, tests/cluster) come from debootstrap
# chroots kept in /var/cache/numatune, built once (~3 min each). Under CI=true both run and a failure fails the
# run; NUMATUNE_PY313=0|1 and NUMATUNE_SLURM=0|1 say otherwise (without the Slurm chroot tests/cluster skips).
py313=${NUMATUNE_PY313:-$ci}
slurm=${NUMATUNE_SLURM:-$ci}
stage setup
if command -v apt-get >/dev/null 2>&1; then
  missing() { for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || printf '%s ' "$pkg"; done; }
  need=$(missing numactl hwloc pciutils librsvg2-bin man-db)
  # debootstrap for the chroots, installed here so that their builds below never run apt beside this one
  if [ "$py313$slurm" != 00 ]; then need="$need$(missing debootstrap)"; fi
  # prometheus (promtool), prometheus-node-exporter, systemd (systemd-analyze): the fleet recipes' tests
  # (tests/test_fleet_prometheus.py), which skip naming what is missing; Slurm and munge for the VM stage
  # come from tests/vm/setup.sh. Optional outside CI: a failed install is said; under CI=true it is fatal.
  optional=$(missing prometheus prometheus-node-exporter systemd)
  if [ -n "$need$optional" ]; then
    $SUDO apt-get update -qq || echo "numatune: apt-get update failed" >&2
  fi
  if [ -n "$need" ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
  fi
  if [ -n "$optional" ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $optional >/dev/null ||
      optional_failed "could not install $optional(the Prometheus recipe tests will skip)"
  fi
fi
stage chroots
# Built in the background: debootstrap waits on the mirror and dpkg while pip and the VM set-up run.
pids_chroot=()
if [ "$slurm" = 1 ]; then
  $SUDO bash scripts/slurm-chroot.sh >"$logs/slurm-chroot.log" 2>&1 &
  pids_chroot+=("$!:slurm")
fi
if [ "$py313" = 1 ]; then
  $SUDO bash scripts/py313.sh --build >"$logs/py313-chroot.log" 2>&1 &
  pids_chroot+=("$!:py313")
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
status=0
fail() {  # fail NAME CODE: a failed stage fails the run (the first failure's status is the run's)
  echo "numatune: the $1 stage failed (exit $2)" >&2
  [ "$status" != 0 ] || status=$2
}
# With no arguments the VM stage runs beside everything after its own set-up (docs/development.md, "CI time").
split=0
if [ $# -eq 0 ] && [ "${NUMATUNE_VM:-}" != 0 ]; then split=1; fi
# numpy for the tensor-placement tests and the VM's placement checks (the guests run this venv's python), so it
# is installed before any guest starts; about 4 s.
.venv/bin/pip install -q numpy ||
  optional_failed "numpy could not be installed; the tensor placement tests will skip"
if [ -f tests/vm/setup.sh ]; then
  bash tests/vm/setup.sh || optional_failed "VM set-up failed; the VM tests will skip with the reason"
fi
# Bytecode for the checkout before any guest starts: the guests share it read-write, and a module compiled under
# TCG costs seconds where the host takes milliseconds.
.venv/bin/python -m compileall -q numatune tests >/dev/null || true
took setup
if [ "$split" = 1 ]; then
  # The VM stage (one guest at a time under the boot lock; a guest's checks keep about one host core busy)
  # beside the rest of the set-up, the quick loop and then the Python 3.13 run; its output is shown whole at
  # its end.
  stage vm
  .venv/bin/python -m pytest -p no:cacheprovider -m vm tests/vm >"$logs/vm.log" 2>&1 &
  vm_pid=$!
  # a run that ends early (a fatal set-up step under CI=true, a TERM) stops its VM stage's pytest too; a
  # Ctrl-C reaches both anyway (one process group)
  trap 'kill -INT "$vm_pid" 2>/dev/null || true' EXIT TERM
fi
stage tools
# PyTorch (CPU) for the tensor-placement tests: torch 2.13.0 installs from the machine's local wheel in about
# 25 s. Where it cannot be installed those tests skip, saying why. torchrun runs the README's launcher recipes
# (tests/cli/test_recipes.py): under CI=true it must install. No guest imports it unless NUMATUNE_VM_TORCH=1,
# which is then set for a VM run of its own (docs/vm-tests.md).
.venv/bin/pip install -q torch==2.13.0 ||
  optional_failed "torch could not be installed; the tensor placement and torchrun recipe tests will skip"
# Ray for numatune.bind_actor's test with real actors (tests/placement/test_binding.py): an 80 MB wheel that
# adds only msgpack and protobuf to this venv; the test takes 20-30 s (a local Ray instance). Else it skips.
.venv/bin/pip install -q ray==2.60.0 ||
  echo "numatune: ray could not be installed; the Ray actor test will skip (a stand-in test still runs)" >&2
.venv/bin/ruff check numatune tests benchmarks || fail ruff $?
took tools "torch, ray, ruff$([ "$split" = 0 ] || echo ', beside the VM stage')"
for entry in "${pids_chroot[@]}"; do
  pid=${entry%%:*} name=${entry#*:}
  if ! wait "$pid"; then
    tail -n 20 "$logs/$name-chroot.log" >&2
    case $name in
      py313) py313=0; fail "Python 3.13 chroot" 1 ;;
      slurm) optional_failed "the Slurm 24.11 chroot could not be built (tests/cluster will skip)" ;;
    esac
  fi
done
took chroots "built beside the set-up"
py313_stage() {
  stage py313
  echo "numatune: the quick loop again under Python 3.13 (scripts/py313.sh)" >&2
  $SUDO bash scripts/py313.sh -m "not vm" -q || fail "Python 3.13" $?
  took py313 "beside the VM stage"
}
if [ "$split" = 1 ]; then
  stage quick
  .venv/bin/python -m pytest -m "not vm" || fail "quick loop" $?
  took quick "beside the VM stage"
  [ "$py313" != 1 ] || py313_stage
  echo "numatune: waiting for the VM stage (its output follows)" >&2
  vm_status=0
  wait "$vm_pid" || vm_status=$?
  cat "$logs/vm.log"
  took vm
  [ "$vm_status" = 0 ] || fail VM "$vm_status"
else
  stage pytest
  .venv/bin/python -m pytest "$@" || fail pytest $?
  took pytest
  [ "$py313" != 1 ] || py313_stage
fi
summary
rm -rf "$logs"
exit "$status"
