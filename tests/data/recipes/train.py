"""The `train.py` the README's CPU-node launcher recipes run in the tests (tests/cli/test_recipes.py on the host,
tests/vm/guest/checks_slurm.py under srun): it reports where it runs (PID, local rank, CPUs, OMP_NUM_THREADS) in
ready-RANK of its working directory and waits until a file `stop` appears there (at most 300 s)."""

import json
import os
import pathlib
import time

rank = os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID")
report = {"pid": os.getpid(), "rank": int(rank), "affinity": sorted(os.sched_getaffinity(0)),
          "omp": os.environ.get("OMP_NUM_THREADS")}
pathlib.Path(f"ready-{rank}.tmp").write_text(json.dumps(report))
os.rename(f"ready-{rank}.tmp", f"ready-{rank}")
end = time.monotonic() + 300
while not pathlib.Path("stop").exists() and time.monotonic() < end:
    time.sleep(0.1)
