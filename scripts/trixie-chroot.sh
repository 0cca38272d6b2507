# Sourced by scripts/py313.sh and scripts/slurm-chroot.sh: a Debian trixie debootstrap chroot built once from the
# Debian mirror this machine's apt uses (rebuilt when its package list changes), and a way to run a command in it.
# Needs root (debootstrap, mount, chroot). The caller sets SRC (the checkout, bind-mounted at /src).

# the Debian mirror apt uses here (deb822 URIs: or a one-line sources.list), else Debian's CDN
trixie_mirror() {
  local mirror
  mirror=$(grep -hsE '^(URIs:|deb) ' /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  echo "${mirror:-http://deb.debian.org/debian}"
}

# trixie_ensure ROOT PACKAGES WHAT: debootstrap a minbase trixie with PACKAGES (comma-separated) into ROOT unless
# ROOT/.numatune-stamp already names this mirror and list. An exclusive lock (ROOT.lock) keeps two runs at once
# (two stages of scripts/test.sh, two checkouts) from building the same chroot twice.
trixie_ensure() {
  local root=$1 packages=$2 what=$3 mirror stamp start
  mirror=$(trixie_mirror)
  stamp="trixie $mirror $packages"
  mkdir -p "$(dirname "$root")"
  exec {lock}>"$root.lock"
  flock "$lock"
  if [ ! -f "$root/.numatune-stamp" ] || [ "$(cat "$root/.numatune-stamp")" != "$stamp" ]; then
    start=$(date +%s)
    echo "numatune: building the $what chroot in $root from $mirror (once; kept for later runs)" >&2
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    rm -rf "$root.new"
    if ! debootstrap --variant=minbase --include="$packages" trixie "$root.new" "$mirror" >"$root.new.log" 2>&1; then
      tail -n 20 "$root.new.log" >&2
      flock -u "$lock"
      return 1
    fi
    rm -rf "$root"
    mv "$root.new" "$root"
    rm -f "$root.new.log"
    echo "$stamp" >"$root/.numatune-stamp"
    echo "numatune: debootstrap of the $what chroot took $(($(date +%s) - start)) s" >&2
  fi
  flock -u "$lock"
}

# trixie_inside ROOT COMMAND...: run COMMAND chrooted in ROOT, the checkout at /src, /proc /sys /dev the host's, a
# fresh tmpfs on /tmp, in a private mount namespace that ends with the command (nothing stays mounted). Its
# processes stay in the caller's process group: a caller that signals the group signals the command.
trixie_inside() {
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
