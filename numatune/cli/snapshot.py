"""numatune snapshot."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import PID


@click.command("snapshot")
@click.option("-o", "--output", required=True, type=click.Path(readable=False, path_type=Path),
              help="Archive (.tar.gz, .tgz, .tar) or an empty directory to create.")
@click.option("--pid", "pids", type=PID, multiple=True,
              help="Also capture what `audit PID` reads of this process (repeatable).")
@click.pass_obj
def snapshot_cmd(app: App, output: Path, pids: tuple[int, ...]) -> None:
    """Save exactly what numatune's commands read, for --root.

    Every command (inspect, irq, irq plan, check, launch --dry-run, and audit for each --pid) is
    run dry and the files it touched are copied, so a replay reads what live reads. No binary files
    and no process environments are taken (with --pid, only the named keys such as LOCAL_RANK and
    CUDA_VISIBLE_DEVICES). The archive replays with `numatune --root FILE COMMAND`.
    """
    from numatune.cli import main
    from numatune.cli._options import output_name
    from numatune.commands.snapshot import snapshot

    cap = snapshot(app.host, output, pids, main, lambda host: App(root=host.root, color=False, host=host))
    app.note(f"wrote {output_name(output)}: {len(cap.files)} files, {len(cap.links)} links")
    for error in cap.errors:
        app.warn(f"this snapshot may be incomplete: {error} (a bug: please report it)")
    if cap.unreadable:
        app.warn(f"{len(cap.unreadable)} files could not be read (run as root): listed in SNAPSHOT.txt")
