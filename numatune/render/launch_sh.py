"""`numatune launch --emit FILE`: a POSIX sh wrapper for torchrun --no-python, srun and mpirun.

The wrapper does not embed a per-rank table: it runs `numatune launch` at run time, in each rank's own
environment, so the binding follows the LOCAL_RANK/SLURM_LOCALID, CUDA_VISIBLE_DEVICES and cgroup the
rank really gets on whichever node it lands (a table computed on the login node would be wrong on a
different node type, under a narrower cgroup, or with per-task CUDA_VISIBLE_DEVICES). Every argument
is single-quoted; the command's own arguments pass through as "$@".
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def sh_quote(arg: str) -> str:
    """Single-quote for POSIX sh: only ' needs care ('\\'' closes, escapes and reopens)."""
    return "'" + arg.replace("'", "'\\''") + "'"


def sh_word(arg: str) -> str:
    """Quote only when needed (for display: `--dry-run`)."""
    return arg if arg and _SAFE.fullmatch(arg) else sh_quote(arg)


_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from numatune.cli import main; main(prog_name='numatune')"


def render_wrapper(python: str, package_parent: str, launch_args: Sequence[str], command: Sequence[str]) -> str:
    """The script text. `launch_args` are global and launch options, already canonical."""
    invocation = [python, "-c", _BOOT, package_parent, *launch_args, "--", *command]
    body = " ".join(sh_quote(a) for a in invocation)
    return (
        "#!/bin/sh\n"
        "# Written by `numatune launch --emit`. Each rank runs numatune launch with the local rank from its\n"
        "# own environment (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,\n"
        "# PMI_LOCAL_RANK, PMIX_LOCAL_RANK), binds it to its GPU's NUMA node and execs the command.\n"
        "# Usage: torchrun --nproc-per-node 8 --no-python ./wrap.sh python train.py\n"
        "#        srun ./wrap.sh python train.py\n"
        f'exec {body} "$@"\n'
    )
