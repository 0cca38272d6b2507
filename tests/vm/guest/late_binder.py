"""Workload stand-in for late binding, run inside the guest: what a program that binds itself does.

Usage: late_binder.py MIB TO_CPUS READY_FILE

Started on one node (the check runs it under `numactl --cpunodebind=0`, no memory policy), it starts a
helper thread (as NCCL, UCX, OpenMP or a data loader would), touches MIB MiB under the default (local)
policy, and only then binds its main thread to TO_CPUS with sched_setaffinity(0, ...), as an in-process
binding (TensorRT-LLM's configure_cpu_affinity, many training scripts) does. It writes READY_FILE as JSON
(pid, the helper's TID, both threads' masks, pages per node of the touched mapping) and waits to be killed.
Standard library only.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import sys
import threading
import time


def main() -> int:
    mib, to_cpus, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    started = threading.Event()
    helper: dict[str, int] = {}

    def work() -> None:
        helper["tid"] = threading.get_native_id()
        started.set()
        while True:
            time.sleep(3600)

    threading.Thread(target=work, daemon=True).start()
    started.wait()
    size = mib * 1024 * 1024
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.write(b"\x01" * size)  # first touch, on the node it runs on now
    cpus = {int(c) for part in to_cpus.split(",") for c in
            (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))}
    os.sched_setaffinity(0, cpus)  # the late binding: the main thread only
    nodes: dict[str, int] = {}
    with open("/proc/self/numa_maps") as f:
        for line in f:
            if "anon=" in line and int(re.search(r"anon=(\d+)", line)[1]) * 4096 >= size // 2:
                nodes = {n: int(c) * 4096 for n, c in re.findall(r"\bN(\d+)=(\d+)", line)}
    report = {"pid": os.getpid(), "helper_tid": helper["tid"], "main_affinity": sorted(os.sched_getaffinity(0)),
              "helper_affinity": sorted(os.sched_getaffinity(helper["tid"])), "bytes_by_node": nodes, "mib": mib}
    with open(ready + ".tmp", "w") as f:
        json.dump(report, f)
    os.rename(ready + ".tmp", ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
