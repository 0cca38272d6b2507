"""Turn a guest's `numatune snapshot` tarball into fixtures/vm-<topology>.tar.gz plus its provenance.

Fixture trees committed to the repo must come from `numatune snapshot` run inside the guest
(never from a hand-made copy), so the fast unit tests parse exactly what a real 6.12 kernel
writes. Updating is opt-in (NUMATUNE_VM_UPDATE_FIXTURES=1 or run_vm.py --update-fixtures):
a normal test run must not rewrite tracked files. The snapshot is unwrapped in a temporary
directory, PROVENANCE.md is added, and the tree is packed like every fixture
(tests/fixture_archives.py: reproducible, the whole tree); the same note is written beside it as
fixtures/vm-<topology>.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import vm_runner
import vm_topology

if str(vm_runner.REPO) not in sys.path:  # run_vm.py runs outside pytest
    sys.path.insert(0, str(vm_runner.REPO))
from tests.fixture_archives import FIXTURES, SUFFIX, pack  # noqa: E402


def qemu_version(qemu: str | None) -> str:
    if not qemu:
        return "unknown"
    out = subprocess.run([qemu, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else "unknown"


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Regular files, directories and relative symlinks only; no absolute or '..' member names.

    An absolute symlink would point into the machine that runs the unit tests, so it is dropped.
    """
    ok = []
    for m in tar.getmembers():
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts:
            continue
        if m.issym() and m.linkname.startswith("/"):
            continue
        if m.isfile() or m.isdir() or m.issym():
            ok.append(m)
    return ok


def update(topo: vm_topology.Topology, boot: vm_runner.BootResult, env: vm_runner.Environment,
           results: dict[str, Any]) -> Path:
    """Replace fixtures/vm-<name>.tar.gz (and vm-<name>.md) with the guest's snapshot; returns the archive."""
    tarball = boot.run_dir / "snapshot.tar.gz"
    if not tarball.exists():
        raise FileNotFoundError(f"{tarball}: the guest's snapshot check produced no tarball")
    name = f"vm-{topo.name}"
    with tempfile.TemporaryDirectory(prefix="numatune-vm-fixture-") as tmp:
        staging = Path(tmp) / "tree"
        staging.mkdir()
        with tarfile.open(tarball) as tar:
            tar.extractall(staging, members=_safe_members(tar), filter="data")
        # A tarball with a single top-level directory (e.g. snapshot-HOST/) is unwrapped.
        entries = list(staging.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() and entries[0].name not in ("sys", "proc") \
            else staging
        note = provenance(topo, boot, env, results)
        (root / "PROVENANCE.md").write_text(note)
        lists = boot.run_dir / "cxl-list.json"  # ndctl's view of the same boot (tests/readers/test_cxl_tree.py)
        if lists.exists():
            (root / "cxl-list.json").write_text(lists.read_text())
        dest = pack(root, FIXTURES / f"{name}{SUFFIX}", name=name)
    (FIXTURES / f"{name}.md").write_text(note)
    return dest


def provenance(topo: vm_topology.Topology, boot: vm_runner.BootResult, env: vm_runner.Environment,
               results: dict[str, Any]) -> str:
    snap = results.get("checks", {}).get("snapshot", {}).get("details", {})
    chain = results.get("setup", {}).get("cxl_chain")
    rel_topo = topo.path.relative_to(vm_runner.REPO)
    lines = [
        f"# fixtures/vm-{topo.name}{SUFFIX}",
        "",
        "Captured by `numatune snapshot` inside a QEMU guest booted by the VM harness (tests/vm).",
        "Do not edit by hand: re-capture with",
        "`NUMATUNE_VM_UPDATE_FIXTURES=1 .venv/bin/python -m pytest -m vm tests/vm` or",
        f"`.venv/bin/python tests/vm/run_vm.py {topo.name} --update-fixtures`.",
        "",
        f"- kernel: Debian `linux-image-{env.kernel_version}`"
        f" (guest `uname -r`: {results.get('env', {}).get('uname')})",
        f"- topology file: `{rel_topo}` ({topo.description})",
        f"- QEMU: {qemu_version(env.qemu)}, accelerator {env.accel} ({env.accel_reason})",
        f"- date: {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- command in the guest: `{_generic(snap.get('command', 'numatune snapshot -o snapshot.tar.gz'), boot)}`",
    ]
    if chain:
        lines.append(f"- CXL set-up before the snapshot: {json.dumps(chain)} "
                     "(cxl create-region -> ndctl create-namespace -m devdax -> daxctl reconfigure-device "
                     "--mode=system-ram)")
    lines += [
        "- NICs were brought up (`ip link set DEV up`) so their MSI vectors exist in /proc/irq.",
        "- Packed whole (tests/fixture_archives.py); this note is also fixtures/"
        f"vm-{topo.name}.md and PROVENANCE.md inside the archive.",
        "",
        "QEMU options:",
        "",
        "```",
        *_pairs(vm_topology.qemu_args(topo, Path("CACHE"))),
        "```",
        "",
    ]
    return "\n".join(lines)


def _generic(command: str, boot: vm_runner.BootResult) -> str:
    """The command without this machine's paths (the checkout and the run folder)."""
    return command.replace(str(boot.run_dir), "RUN_DIR").replace(str(vm_runner.REPO), "CHECKOUT")


def _pairs(args: list[str]) -> list[str]:
    """["-m", "x", "-smp", "4"] -> ["-m x", "-smp 4"] for a readable note."""
    return [f"{args[i]} {args[i + 1]}" for i in range(0, len(args) - 1, 2)]
