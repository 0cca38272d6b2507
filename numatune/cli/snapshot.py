"""numatune snapshot."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App


@click.command("snapshot")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Archive (.tar.gz, .tgz, .tar) or an empty directory to create.")
@click.option("--pid", "pids", type=int, multiple=True,
              help="Also capture this process's numa_maps, status, sched and task stats (repeatable).")
@click.pass_obj
def snapshot_cmd(app: App, output: Path, pids: tuple[int, ...]) -> None:
    """Save what numatune reads (sysfs subsets, /proc files, NVIDIA driver info) for --root.

    No binary files and no process environments are taken (with --pid, only the named keys such as
    LOCAL_RANK and CUDA_VISIBLE_DEVICES). The archive replays with `numatune --root FILE COMMAND`.
    """
    from numatune.capture import snapshot

    cap = snapshot(app.host, output, pids)
    app.note(f"wrote {output}: {len(cap.files)} files, {len(cap.links)} links")
