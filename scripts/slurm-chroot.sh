#!/usr/bin/env bash
# Debian trixie's Slurm 24.11 (topology/block, which the host's Debian 12 Slurm 22.05 lacks) in a debootstrap
# chroot kept in $NUMATUNE_SLURM_CHROOT (default /var/cache/numatune/trixie-slurm), built once the way the Python
# 3.13 stage builds its own (scripts/trixie-chroot.sh). tests/cluster/slurm_harness.py drives it.
#     bash scripts/slurm-chroot.sh            # build it if it is not there (~2-3 min once), print its path
#     bash scripts/slurm-chroot.sh run CMD... # run CMD in it (private mount namespace, host /proc /sys /dev)
# Needs root. The harness starts slurmctld through `run` in a process group of its own and kills that group.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
# shellcheck source=scripts/trixie-chroot.sh
. scripts/trixie-chroot.sh
ROOT=${NUMATUNE_SLURM_CHROOT:-/var/cache/numatune/trixie-slurm}
PACKAGES="slurmctld,slurmd,slurm-client,munge,procps"
if [ "${1:-}" = run ]; then
  shift
  [ -f "$ROOT/.numatune-stamp" ] || { echo "numatune: no Slurm chroot in $ROOT: bash scripts/slurm-chroot.sh" >&2; exit 3; }
  trixie_inside "$ROOT" "$@"
  exit
fi
trixie_ensure "$ROOT" "$PACKAGES" "Slurm 24.11"
echo "$ROOT"
