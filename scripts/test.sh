#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine and run the whole suite, VM stage included
# (the README's test command; .ci/run runs exactly this). The quick loop: .venv/bin/python -m pytest -m "not vm"
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
if command -v apt-get >/dev/null 2>&1; then
  missing() { for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || printf '%s ' "$pkg"; done; }
  need=$(missing numactl hwloc pciutils librsvg2-bin man-db)
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
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
# PyTorch (CPU) and numpy for the tensor-placement tests: torch 2.13.0 installs from the machine's local
# wheel in about 25 s, numpy in about 4 s. Where they cannot be installed those tests skip, saying why.
# torchrun runs the README's launcher recipes (tests/cli/test_recipes.py): under CI=true it must install.
.venv/bin/pip install -q torch==2.13.0 numpy ||
  optional_failed "torch/numpy could not be installed; the tensor placement and torchrun recipe tests will skip"
# Ray for numatune.bind_actor's test with real actors (tests/placement/test_binding.py): an 80 MB wheel that
# adds only msgpack and protobuf to this venv; the test takes 20-30 s (a local Ray instance). Else it skips.
.venv/bin/pip install -q ray==2.60.0 ||
  echo "numatune: ray could not be installed; the Ray actor test will skip (a stand-in test still runs)" >&2
if [ -f tests/vm/setup.sh ]; then
  bash tests/vm/setup.sh || optional_failed "VM set-up failed; the VM tests will skip with the reason"
fi
.venv/bin/ruff check numatune tests benchmarks
status=0
.venv/bin/python -m pytest "$@" || status=$?
# A second CPython: the quick loop under Debian trixie's Python 3.13 (scripts/py313.sh: a debootstrap chroot kept
# in /var/cache/numatune, built once in ~4 min; the run ~5-10 min on 2 cores). Under CI=true (or NUMATUNE_PY313=1)
# it runs and a failure fails the run; NUMATUNE_PY313=0 leaves it out. It needs root (debootstrap, chroot).
if [ "${NUMATUNE_PY313:-$ci}" = 1 ]; then
  echo "numatune: the quick loop again under Python 3.13 (scripts/py313.sh)" >&2
  $SUDO bash scripts/py313.sh -m "not vm" -q || {
    code=$?
    echo "numatune: the Python 3.13 stage failed (exit $code)" >&2
    [ "$status" != 0 ] || status=$code
  }
fi
exit "$status"
