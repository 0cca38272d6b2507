#!/usr/bin/env bash
# Run pytest ARGS under a second CPython: Debian trixie's python3.13, in a debootstrap chroot of trixie from the
# Debian mirror this machine's apt uses (scripts/trixie-chroot.sh). The chroot (with a virtual environment holding
# the test extras) is built once and kept in $NUMATUNE_CHROOT (default /var/cache/numatune/trixie-py313); it is
# rebuilt when this script's package list changes. The checkout is bind-mounted at /src (an editable install, so
# the chroot never goes stale), /proc, /sys and /dev are the host's (the live tests read them), all in a private
# mount namespace that ends with the run. Needs root (debootstrap, mount, chroot). scripts/test.sh runs it:
#     bash scripts/py313.sh -m "not vm" -q
# `bash scripts/py313.sh --build` only makes the chroot and its venv.
# Measured on a 2-core machine: building the chroot ~4 min (debootstrap 2-3 min, the venv 1 min); each later
# run only mounts it.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
# shellcheck source=scripts/trixie-chroot.sh
. scripts/trixie-chroot.sh
ROOT=${NUMATUNE_CHROOT:-/var/cache/numatune/trixie-py313}
# what the suite drives: the tools scripts/test.sh installs, a C compiler (probe's helper), kernel headers, git
PACKAGES="python3,python3-venv,numactl,hwloc,pciutils,man-db,librsvg2-bin,jq,procps,util-linux,gcc,libc6-dev"
PACKAGES="$PACKAGES,linux-libc-dev,git"
DEPS=$(sha256sum pyproject.toml | cut -c1-16)  # the test extras: a change reinstalls the venv, not the chroot

start=$(date +%s)
trixie_ensure "$ROOT" "$PACKAGES" python3.13
if [ ! -f "$ROOT/.numatune-venv" ] || [ "$(cat "$ROOT/.numatune-venv")" != "$DEPS" ]; then
  # the test extras in /opt/venv
  trixie_inside "$ROOT" bash -c 'rm -rf /opt/venv && python3 -m venv /opt/venv && /opt/venv/bin/pip install -q -e "/src[test]"'
  echo "$DEPS" >"$ROOT/.numatune-venv"
  echo "numatune: the chroot and its venv took $(($(date +%s) - start)) s to make" >&2
fi
[ "${1:-}" != --build ] || exit 0
trixie_inside "$ROOT" bash -c 'cd /src && python --version >&2 && exec python -m pytest -p no:cacheprovider "$@"' pytest "$@"
