#!/usr/bin/env bash
# Run pytest ARGS under a second CPython: Debian trixie's python3.13, in a debootstrap chroot of trixie from the
# Debian mirror this machine's apt uses. The chroot (with a virtual environment holding the test extras) is built
# once and kept in $NUMATUNE_CHROOT (default /var/cache/numatune/trixie-py313); it is rebuilt when this script's
# package list changes. The checkout is bind-mounted at /src (an editable install, so the chroot never goes stale),
# /proc, /sys and /dev are the host's (the live tests read them), all in a private mount namespace that ends with
# the run. Needs root (debootstrap, mount, chroot). scripts/test.sh runs it after the main suite:
#     bash scripts/py313.sh -m "not vm" -q
# Measured on a 2-core machine: building the chroot ~4 min (debootstrap 2-3 min, the venv 1 min); each later
# run only mounts it.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
ROOT=${NUMATUNE_CHROOT:-/var/cache/numatune/trixie-py313}
# what the suite drives: the tools scripts/test.sh installs, a C compiler (probe's helper), kernel headers, git
PACKAGES="python3,python3-venv,numactl,hwloc,pciutils,man-db,librsvg2-bin,jq,procps,util-linux,gcc,libc6-dev"
PACKAGES="$PACKAGES,linux-libc-dev,git"
# the Debian mirror apt uses here (deb822 URIs: or a one-line sources.list), else Debian's CDN
MIRROR=$(grep -hsE '^(URIs:|deb) ' /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list 2>/dev/null |
  grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
STAMP="trixie $MIRROR $PACKAGES"
DEPS=$(sha256sum pyproject.toml | cut -c1-16)  # the test extras: a change reinstalls the venv, not the chroot

build() {
  echo "numatune: building the python3.13 chroot in $ROOT from $MIRROR (once; kept for later runs)" >&2
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  rm -rf "$ROOT.new"
  mkdir -p "$(dirname "$ROOT")"
  debootstrap --variant=minbase --include="$PACKAGES" trixie "$ROOT.new" "$MIRROR" >"$ROOT.new.log" 2>&1 ||
    { tail -n 20 "$ROOT.new.log" >&2; exit 1; }
  rm -rf "$ROOT"
  mv "$ROOT.new" "$ROOT"
  rm -f "$ROOT.new.log"
  echo "$STAMP" >"$ROOT/.numatune-stamp"
}

venv() {  # the test extras in /opt/venv
  inside "$ROOT" bash -c 'rm -rf /opt/venv && python3 -m venv /opt/venv && /opt/venv/bin/pip install -q -e "/src[test]"'
  echo "$DEPS" >"$ROOT/.numatune-venv"
}

inside() {  # inside ROOT COMMAND...: run COMMAND chrooted in ROOT, the checkout at /src, in a private mount namespace
  local root=$1
  shift
  unshare --mount --propagation private -- bash -s "$root" "$SRC" "$@" <<'EOF'
set -e
root=$1 src=$2
shift 2
for d in proc sys dev; do mkdir -p "$root/$d"; mount --rbind "/$d" "$root/$d"; done
mkdir -p "$root/src" "$root/tmp"
mount --bind "$src" "$root/src"
mount -t tmpfs tmpfs "$root/tmp"
for f in /etc/resolv.conf /etc/pip.conf; do [ -f "$f" ] && cp "$f" "$root$f"; done
# this machine's trust store (a proxy's CA), pip configuration and local wheel indexes serve the chroot's pip too
for f in /etc/ssl/certs/ca-certificates.crt; do [ -f "$f" ] && [ -f "$root$f" ] && mount --bind -o ro "$f" "$root$f"; done
for d in /opt/pypi /opt/pypi-more /opt/wheels /etc/xdg/pip; do
  if [ -d "$d" ]; then mkdir -p "$root$d"; mount --bind -o ro "$d" "$root$d"; fi
done
mapfile -t pip_env < <(env | grep -E '^PIP_[A-Z_]+=' || true)
exec chroot "$root" /usr/bin/env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  PIP_DISABLE_PIP_VERSION_CHECK=1 "${pip_env[@]}" "$@"
EOF
}

start=$(date +%s)
if [ ! -f "$ROOT/.numatune-stamp" ] || [ "$(cat "$ROOT/.numatune-stamp")" != "$STAMP" ]; then
  build
  echo "numatune: debootstrap took $(($(date +%s) - start)) s" >&2
fi
if [ ! -f "$ROOT/.numatune-venv" ] || [ "$(cat "$ROOT/.numatune-venv")" != "$DEPS" ]; then
  venv
  echo "numatune: the chroot and its venv took $(($(date +%s) - start)) s to make" >&2
fi
inside "$ROOT" bash -c 'cd /src && python --version >&2 && exec python -m pytest -p no:cacheprovider "$@"' pytest "$@"
