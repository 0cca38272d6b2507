"""The training job scripts/gpu-check.py runs on a GPU node, as the 2026-11-28 evidence job was run:

    torchrun --standalone --nproc-per-node 1 --no-python \\
        numatune launch --cpu-bind cores:6 -- python3 train.py SECONDS

A DataLoader with two persistent workers that pin their batches (`pin_memory=True`) and bind themselves with
`worker_init_fn=numatune.bind_worker()`, an MLP trained with AdamW on the GPU, and a 256 MiB staging buffer in
pinned host memory. It runs SECONDS at most, or until the file `train-stop` appears in its output directory
($GPU_CHECK_OUT, else the current one). Once both workers have delivered a batch it writes `train-ready.json`
there: its PID, CPUs, NUMATUNE_BINDING, the workers' PIDs, and what `numatune.pinned_host_memory()` and
`numatune.pinned_host_chunks()` say (when
this numatune has it). Each worker writes its bind report to `bind-worker-PID.json`. Without CUDA (a CPU build
of torch) the same job runs on the CPU, without pinned memory: the check script's test mode.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

import numatune

STAGING_BYTES = 256 << 20
FEATURES, HIDDEN, CLASSES, BATCH = 1024, 2048, 16, 256


class Random(torch.utils.data.Dataset):
    """Random samples; each says which process made it, so the job knows its workers."""

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(FEATURES, generator=g), i % CLASSES, os.getpid()


def pinned_answer() -> dict:
    """numatune.pinned_host_memory() of this process, as JSON, or why it was not asked."""
    if not hasattr(numatune, "pinned_host_memory"):
        return {"status": "SKIP", "detail": "numatune.pinned_host_memory is not in this numatune"}
    try:
        result = numatune.pinned_host_memory()
    except Exception as exc:  # noqa: BLE001 - the check reports any failure as it came
        return {"status": "ERROR", "detail": f"{type(exc).__name__}: {exc}"}
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    elif isinstance(result, list):  # PinnedRange records: named fields, so the check reads `size` by name
        result = [r._asdict() if hasattr(r, "_asdict") else r for r in result]
    try:
        json.dumps(result)
    except TypeError:
        result = repr(result)
    return {"status": "OK", "result": result}


def chunks_answer() -> dict:
    """numatune.pinned_host_chunks() of this process (the shared anonymous chunks audit counts from outside, each with
    the allocations the CUDA driver reports in it) and describe_chunks()'s sentence, as JSON, or why not asked."""
    if not hasattr(numatune, "pinned_host_chunks"):
        return {"status": "SKIP", "detail": "numatune.pinned_host_chunks is not in this numatune"}
    try:
        chunks = numatune.pinned_host_chunks()
    except Exception as exc:  # noqa: BLE001 - the check reports any failure as it came
        return {"status": "ERROR", "detail": f"{type(exc).__name__}: {exc}"}
    page = os.sysconf("SC_PAGE_SIZE")
    return {"status": "OK", "describe": numatune.describe_chunks(chunks), "chunks": [
        {"start": f"{c.start:x}", "size": c.size, "resident_bytes": c.pages.present * page, "pinned": c.pinned,
         "allocations": len(c.allocations), "allocated": c.allocated} for c in chunks]}


def write(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    os.replace(tmp, path)


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 25.0
    out = os.environ.get("GPU_CHECK_OUT") or "."
    stop = os.path.join(out, "train-stop")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    staging = torch.empty(STAGING_BYTES, dtype=torch.uint8).pin_memory() if cuda else None
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, HIDDEN),
                                torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(
        Random(), batch_size=BATCH, num_workers=2, pin_memory=cuda, persistent_workers=True,
        worker_init_fn=numatune.bind_worker(report_to=os.path.join(out, "bind-worker-{pid}.json")))
    print(f"train.py: pid {os.getpid()} on {device}, CPUs {sorted(os.sched_getaffinity(0))}, "
          f"NUMATUNE_BINDING={os.environ.get('NUMATUNE_BINDING')!r}", flush=True)
    started, steps, workers, ready = time.monotonic(), 0, set(), False
    while time.monotonic() - started < seconds and not os.path.exists(stop):
        for x, y, pids in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if staging is not None:
                staging[: x.numel() * 4].view(torch.float32).view_as(x).copy_(x, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            workers.update(int(p) for p in pids.unique())
            if not ready and len(workers) >= 2:
                ready = True
                write(os.path.join(out, "train-ready.json"), {
                    "pid": os.getpid(), "ppid": os.getppid(), "cpus": sorted(os.sched_getaffinity(0)),
                    "binding": os.environ.get("NUMATUNE_BINDING"), "workers": sorted(workers),
                    "device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda,
                    "staging_bytes": STAGING_BYTES if staging is not None else 0,
                    "staging_address": hex(staging.data_ptr()) if staging is not None else None,
                    "pinned_host_memory": pinned_answer(), "pinned_host_chunks": chunks_answer(),
                    "steps": steps})
                print(f"train.py: ready after {steps} step(s), workers {sorted(workers)}", flush=True)
            if time.monotonic() - started >= seconds or os.path.exists(stop):
                break
    if cuda:
        torch.cuda.synchronize()
    print(f"train.py: {steps} step(s) in {time.monotonic() - started:.1f} s, loss {loss.item():.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
