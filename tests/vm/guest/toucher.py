"""Workload stand-in run inside the guest: touch N MiB, report where it runs, then wait.

Usage: toucher.py MIB READY_FILE [--exit] [--no-thp]

Writes READY_FILE as JSON once the memory is touched: its pid, sched_getaffinity,
Cpus_allowed_list/Mems_allowed_list from /proc/self/status, and for the touched mapping the
numa_maps policy and pages per node. Without --exit it then sleeps until killed so that
`numatune audit` and `numastat -p` can look at it from outside. With --no-thp it first opts out of
transparent huge pages (PR_SET_THP_DISABLE): khugepaged would otherwise collapse a half-used 2 MiB range
later, filling its empty pages, and the process's anonymous bytes would grow while it sleeps (a check
that reads it twice, live and from a snapshot, needs it to hold still). Standard library only.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import re
import sys
import time

PR_SET_THP_DISABLE = 41  # linux/prctl.h


def main() -> int:
    mib, ready = int(sys.argv[1]), sys.argv[2]
    if "--no-thp" in sys.argv[3:]:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_THP_DISABLE)")
    size = mib * 1024 * 1024
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.write(b"\x01" * size)  # fault in every page under the inherited memory policy
    start = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    with open("/proc/self/status") as f:
        status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
    with open("/proc/self/numa_maps") as f:
        maps = f.read().splitlines()
    policy, nodes = "", {}
    for line in maps:
        addr, rest = line.split(" ", 1)
        if int(addr, 16) == start:
            m = re.match(r"(.*?)\s(?:anon|dirty|mapped|N\d+)=", rest)
            policy = m[1] if m else rest.split()[0]
            nodes = {n: int(c) * 4096 for n, c in re.findall(r"\bN(\d+)=(\d+)", line)}
    report = {
        "pid": os.getpid(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "cpus_allowed_list": status.get("Cpus_allowed_list", "").strip(),
        "mems_allowed_list": status.get("Mems_allowed_list", "").strip(),
        "policy": policy,
        "bytes_by_node": nodes,
        "mib": mib,
    }
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.rename(tmp, ready)
    if "--exit" in sys.argv[3:]:
        return 0
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
