"""Workload for numatune.bind() on a real two-node kernel, run inside the guest (issue 36).

Usage: inside_binder.py THREADS MIB NODE READY_FILE   (PYTHONPATH = the repository)

Started on node 0 (the check runs it under `numactl --cpunodebind=0`, no memory policy), it starts THREADS
threads (as NCCL, UCX, OpenMP or a data loader would), touches MIB MiB under the default (local) policy,
records where those pages are, and only then calls numatune.bind(node=NODE), the in-process binding. It
writes READY_FILE as JSON: pid, the threads' TIDs, every thread's mask after the call (sched_getaffinity),
the buffer's address range and its bytes per node before and after (its own numa_maps line), and
numatune's report (to_dict). Then it waits to be killed, the threads still alive.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import re
import sys
import threading
import time


def bytes_by_node(addr: int) -> tuple[int, int, dict[str, int]]:
    """(start, end, node -> bytes) of the mapping holding `addr`, from /proc/self/maps and numa_maps."""
    start = end = 0
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                start, end = lo, hi
    with open("/proc/self/numa_maps") as f:
        for line in f:
            if int(line.split()[0], 16) == start:
                kib = int(re.search(r"kernelpagesize_kB=(\d+)", line)[1])
                return start, end, {n: int(c) * kib * 1024 for n, c in re.findall(r"\bN(\d+)=(\d+)", line)}
    return start, end, {}


def main() -> int:
    threads, mib, node, ready = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    tids: list[int] = []
    lock = threading.Lock()
    started = threading.Barrier(threads + 1)

    def work() -> None:
        with lock:
            tids.append(threading.get_native_id())
        started.wait()
        while True:
            time.sleep(3600)

    for _ in range(threads):
        threading.Thread(target=work, daemon=True).start()
    started.wait()
    size = mib * 1024 * 1024
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.write(b"\x01" * size)  # first touch, on the node it runs on now
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    before = bytes_by_node(addr)[2]
    import numatune

    report = numatune.bind(node=node)
    start, end, after = bytes_by_node(addr)
    masks = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
    out = {"pid": os.getpid(), "tids": tids, "masks": masks, "buffer": [hex(start), hex(end)], "size": size,
           "before": before, "after": after, "report": report.to_dict()}
    with open(ready + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(ready + ".tmp", ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
