"""What a process of a training job is by what the kernel shows of it (its comm and command line): a launcher by
name, a wrapper, or a rank's worker or helper of a known kind. The names are here once: the job tree
(numatune.analysis.jobtree) and the reader of a job's ancestors (numatune.readers.procs) use them."""

from __future__ import annotations

from collections.abc import Sequence

# Programs that only start the rank (torchrun --no-python bash run.sh; timeout 600 python ...): a process of that
# name that carries rank variables and waits on a child of the job is a launcher, its child the rank.
WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "env", "numactl", "taskset", "timeout", "stdbuf", "nice",
                      "chrt", "nohup", "time"})
# Launchers by their program name (comm, or the script an interpreter runs): above their ranks, never ranks.
LAUNCHERS = frozenset({"torchrun", "srun", "slurmstepd", "mpirun", "mpiexec", "mpiexec.hydra", "orterun", "orted",
                       "prterun", "prted", "prte", "hydra_pmi_proxy", "pmi_proxy", "deepspeed", "accelerate"})
# ... and by the module an interpreter runs (`python -m torch.distributed.run`).
LAUNCHER_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torch.distributed.launch",
                    "deepspeed.launcher.launch": "deepspeed", "deepspeed.launcher.runner": "deepspeed",
                    "accelerate.commands.launch": "accelerate", "accelerate.commands.accelerate_cli": "accelerate"}
# A rank's workers and helpers as their command line shows them (Python's multiprocessing, torch).
_PATTERNS = (("multiprocessing.spawn", "spawn"), ("multiprocessing.forkserver", "forkserver"),
             ("multiprocessing.resource_tracker", "resource_tracker"),
             ("multiprocessing.semaphore_tracker", "resource_tracker"),
             ("_inductor/compile_worker", "compile"))
# Processes that adopt orphans (PID 1 too): a rank's resource tracker or spawn worker left behind when its rank died
# hangs under one, which is never that worker's rank nor a launcher.
REAPERS = frozenset({"systemd", "init", "tini", "dumb-init", "docker-init", "containerd-shim", "conmon",
                     "s6-svscan", "runsvdir"})
HELPER_KINDS = frozenset({"resource_tracker", "torch_shm_manager", "subprocess"})  # and the forkserver itself
_SCAN_ARGS = 8  # an interpreter's options before its script or -m MODULE


def _base(arg: str) -> str:
    return arg.rpartition("/")[2]


def launcher_name(comm: str, argv: Sequence[str]) -> str | None:
    """The launcher a process is by its name (torchrun, srun, slurmstepd, mpirun, orted, prted, hydra_pmi_proxy,
    deepspeed, accelerate), the script its interpreter runs or its `-m` module; None for any other program."""
    first = _base(argv[0]) if argv else ""
    for name in (comm, first):
        if name in LAUNCHERS:
            return name
    if first.startswith("python"):
        rest = argv[1:_SCAN_ARGS + 1]
        for i, arg in enumerate(rest):
            if arg == "-m":
                return LAUNCHER_MODULES.get(rest[i + 1]) if i + 1 < len(rest) else None
            if arg.startswith("-m") and len(arg) > 2:
                return LAUNCHER_MODULES.get(arg[2:])
            if arg == "-c":
                return None
            if not arg.startswith("-"):
                return _base(arg) if _base(arg) in LAUNCHERS else None
    return None


def worker_pattern(comm: str, argv: Sequence[str]) -> str | None:
    """What a rank's child is by what the kernel shows: `dataloader` (torch names a DataLoader worker's main thread
    pt_data_worker), `spawn`, `forkserver`, `resource_tracker` (the -c code multiprocessing runs), `compile`
    (torch's inductor compile workers), `torch_shm_manager`; None for a plain fork or another program."""
    if comm == "pt_data_worker":
        return "dataloader"
    if argv and (_base(argv[0]) == "torch_shm_manager" or comm == "torch_shm_manag"):
        return "torch_shm_manager"
    for arg in argv[1:_SCAN_ARGS + 2]:
        for marker, kind in _PATTERNS:
            if marker in arg:
                return kind
    return None


