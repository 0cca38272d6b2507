#!/usr/bin/env bash
# Install everything the VM tests need, idempotently (safe to run on every CI run).
#
# Why each piece is here (see tests/vm/README section in the top-level README):
#   - qemu-system-x86: the emulator; KVM on our machines is PVM and cannot run a stock kernel,
#     so the harness usually runs QEMU in TCG mode.
#   - busybox-static, udev, kmod: virtme-ng's guest init uses them from the host root
#     (udev provides the virtio-serial links that carry command output back).
#   - numactl, ndctl, daxctl, pciutils, iproute2: run *inside* the guest from the shared host root.
#   - file: virtme-ng reads the kernel version from the image with it.
#   - slurmctld, slurmd, slurm-client, munge: a one-node Slurm run inside the two-socket guest from the host
#     root (checks_slurm.py); prometheus, prometheus-node-exporter: the Prometheus pipeline tests.
#   - linux-image-6.12.*+deb12-amd64: Debian's stock kernel, downloaded and unpacked (not installed)
#     into tests/vm/.cache/kernel, with depmod run so the guest can load modules.
#   - virtme-ng (PyPI, provides `vng`) into the project venv.
#
# Environment: NUMATUNE_VM_CACHE overrides the cache directory; NUMATUNE_VM_SKIP_APT=1 skips apt.
# Under CI=true the engines (Slurm, munge, Prometheus, node_exporter, hwloc) must install: a failure exits 1
# (elsewhere it is logged and their checks skip, saying what is missing).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${NUMATUNE_VM_CACHE:-$here/.cache}"
venv_py="${NUMATUNE_VM_PYTHON:-$repo/.venv/bin/python}"
log() { printf '[vm-setup] %s\n' "$*" >&2; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo -n); else
        log "not root and no sudo: skipping apt-get (the VM tests will skip if QEMU is missing)"
        NUMATUNE_VM_SKIP_APT=1
    fi
fi

apt_pkgs=(qemu-system-x86 busybox-static numactl ndctl daxctl kmod udev pciutils iproute2 file)
# The engines the guest runs: optional outside CI (their checks report "skipped", naming what is missing);
# hwloc's lstopo gives the Slurm check Slurm's own core numbering.
optional_pkgs=(slurmctld slurmd slurm-client munge prometheus prometheus-node-exporter hwloc)
ci=0
[ "${CI:-}" = true ] && ci=1
# Debian 12 ships the `cxl` tool inside ndctl; a separate package exists on some releases.
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
optional=()
for p in "${optional_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || optional+=("$p")
done

if [ "${NUMATUNE_VM_SKIP_APT:-0}" != 1 ]; then
    # apt lists are needed both to install and to find the newest kernel package.
    lists_ok=0
    if compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null \
        && [ "$(apt-cache pkgnames linux-image-6.12 2>/dev/null | grep -c 'deb12-amd64')" -gt 0 ]; then
        lists_ok=1
    fi
    if [ "$lists_ok" = 0 ] || [ "${#missing[@]}" -gt 0 ] || [ "${#optional[@]}" -gt 0 ]; then
        log "apt-get update"
        "${sudo_cmd[@]}" apt-get update -qq </dev/null
    fi
    if [ "${#missing[@]}" -gt 0 ]; then
        log "apt-get install ${missing[*]}"
        "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
    fi
    if [ "${#optional[@]}" -gt 0 ]; then
        log "apt-get install ${optional[*]}"
        if ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${optional[@]}" </dev/null >/dev/null; then
            if [ "$ci" = 1 ]; then
                log "CI=true: could not install the engines ${optional[*]}"
                exit 1
            fi
            log "could not install ${optional[*]}: the Slurm/Prometheus guest checks will report skipped"
        fi
    fi
    if ! command -v cxl >/dev/null 2>&1 && apt-cache show cxl >/dev/null 2>&1; then
        "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends cxl </dev/null >/dev/null
    fi
fi

# --- kernel: newest linux-image-6.12.N+deb12-amd64, unpacked into the cache --------------------
kdir="$cache/kernel"
mkdir -p "$kdir"
want="$(apt-cache pkgnames linux-image-6.12 2>/dev/null \
        | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | sort -V | tail -n1 || true)"
if [ -z "$want" ]; then
    # No apt lists (or no such package): keep whatever kernel is already cached.
    log "no linux-image-6.12.*+deb12-amd64 in apt lists; keeping cached kernel if any"
else
    kver="${want#linux-image-}"
    if [ ! -f "$kdir/boot/vmlinuz-$kver" ] || [ ! -f "$kdir/lib/modules/$kver/modules.dep" ]; then
        log "downloading $want"
        dl="$cache/deb"
        rm -rf "$dl" && mkdir -p "$dl"
        # As root, apt drops to the _apt user, which cannot write into our cache: stay root here.
        sandbox=()
        [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
        (cd "$dl" && apt-get download -qq "${sandbox[@]}" "$want" </dev/null)
        rm -rf "$kdir" && mkdir -p "$kdir"
        dpkg -x "$dl"/*.deb "$kdir"
        rm -rf "$dl"
        depmod -b "$kdir" "$kver"
        log "kernel $kver unpacked into $kdir"
    fi
    printf '%s\n' "$kver" >"$cache/kernel-version"
fi

# --- virtme-ng into the project venv ---------------------------------------------------------
if [ -x "$venv_py" ]; then
    if ! "$venv_py" -c 'import virtme_ng' >/dev/null 2>&1; then
        log "pip install virtme-ng"
        "$venv_py" -m pip install -q 'virtme-ng>=1.30' </dev/null
    fi
else
    log "no venv python at $venv_py: create the project venv first"
    exit 1
fi

# --- udev on the host: virtme-ng's output routing relies on it (no systemd here) ---------------
if ! pgrep -x systemd-udevd >/dev/null 2>&1 && ! pgrep -x udevd >/dev/null 2>&1; then
    for d in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd; do
        if [ -x "$d" ]; then
            log "starting $d --daemon"
            "${sudo_cmd[@]}" "$d" --daemon || log "could not start udevd (continuing)"
            break
        fi
    done
fi

log "ready: qemu=$(command -v qemu-system-x86_64 || echo missing) kernel=$(cat "$cache/kernel-version" 2>/dev/null || echo missing)"
