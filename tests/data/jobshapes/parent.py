"""A launcher for the job-shape matrix that is none of the named ones: starts N copies of a command, each with its
rank in the environment and/or on the command line, and waits on them (an mpirun-like parent; with N=1 and no
variable, the parent carrying SLURM_PROCID/SLURM_LOCALID that srun's task is, running torchrun).

    parent.py N [--env VAR[,VAR...]] -- COMMAND...     ("{i}" in COMMAND becomes the rank)
"""

from __future__ import annotations

import os
import subprocess
import sys


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--")
    head, command = argv[:split], argv[split + 1:]
    n = int(head[0])
    names = head[head.index("--env") + 1].split(",") if "--env" in head else []
    kids = []
    for i in range(n):
        env = dict(os.environ, **{name: str(i) for name in names})
        kids.append(subprocess.Popen([a.replace("{i}", str(i)) for a in command], env=env))
    for k in kids:
        k.wait()


if __name__ == "__main__":
    main()
