"""HAND-MADE large roots for the text-scaling tests and benchmarks (issue 41, point 4): generated into a
directory by this code, never shipped. Each is a copy of a real fixture tree (named below) with
generated /proc files on top, shaped as the kernel writes them:

- `mappings_root`: one process (PID 4242, `python train.py`, LOCAL_RANK=0) whose /proc/PID/numa_maps
  holds N mappings (anonymous, heap, stack, file-backed with long paths, a few bound to node 1);
- `threads_root`: one process with N threads in /proc/PID/task, spread over the tree's CPUs;
- `ranks_root`: N processes, each with a local rank (the `audit --ranks` job view);
- `job_archive`: a job of N processes under a torchrun, in a chain of workers or flat (the job tree's worst
  cases), written as a tar;
- `interrupts_root`: vm-two-socket with a /proc/interrupts of N rows, each an IRQ of its NIC
  (`enp65s0-rx-I`), so every row is a row of `irq`'s table.

Tree: intel-xeon-L5640-2node (two nodes, CPUs 0-23) for the processes, vm-two-socket (two nodes, four
CPUs, /proc/irq) for the interrupts.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import fixture_copy, write_process

PROC_TREE = "intel-xeon-L5640-2node"
IRQ_TREE = "vm-two-socket"
PID = 4242
PAGE = 4096


def numa_maps(n: int, remote: bool = True) -> str:
    """N numa_maps lines: one in eight 1-16 MiB (over `--min-size`'s default 1M), the rest smaller; pages
    on both nodes (on node 0 only without REMOTE); one in sixteen `bind:1`; file names long, as a Python
    rank's libraries are."""
    lines = []
    for i in range(n):
        start = 0x7F0000000000 + i * 0x10000
        pages = (256 + (i % 16) * 256) if i % 8 == 0 else 1 + i % 200
        n1 = pages // 3 if remote and i % 5 == 0 else 0
        policy = "bind:1" if remote and i % 16 == 0 else "default"
        if i % 4 == 0:
            what = f"file=/usr/lib/python3/dist-packages/torch/lib/libtorch_part_{i}.so mapped={pages}"
        else:
            what = {2: "heap ", 3: "stack "}.get(i, "") + f"anon={pages}"
        nodes = f"N0={pages - n1}" + (f" N1={n1}" if n1 else "")
        lines.append(f"{start:x} {policy} {what} dirty={pages} {nodes} kernelpagesize_kB=4\n")
    return "".join(lines)


def _process_root(base: Path) -> Path:
    return fixture_copy(PROC_TREE, base / "root")


def mappings_root(base: Path, n: int) -> Path:
    """The tree with process PID holding N mappings."""
    root = _process_root(base)
    write_process(root, PID, "LOCAL_RANK=0\x00", numa_maps(n))
    return root


def threads_root(base: Path, n: int) -> Path:
    """The tree with process PID holding N threads (TIDs PID, PID+1, ...), each last on CPU i % 24."""
    root = _process_root(base)
    proc = write_process(root, PID, "LOCAL_RANK=0\x00", numa_maps(64))
    status = "Name:\tpython\nPPid:\t1\nCpus_allowed_list:\t0-23\nMems_allowed_list:\t0-1\n"
    for i in range(1, n):
        tid = PID + i
        task = proc / "task" / str(tid)
        task.mkdir()
        fields = ["0"] * 33 + [str(i % 24)] + ["0"] * 10  # field 39: the CPU it last ran on
        (task / "stat").write_text(f"{tid} (worker{i % 7}) S 1 " + " ".join(fields) + "\n")
        (task / "status").write_text(status)
    return root


def ranks_root(base: Path, n: int) -> Path:
    """The tree with N processes (PIDs 10000...), each with LOCAL_RANK=i and a few mappings, all on node 0
    where its thread runs (placed well: the job table is the whole report)."""
    root = _process_root(base)
    maps = numa_maps(8, remote=False)
    for i in range(n):
        write_process(root, 10000 + i, f"LOCAL_RANK={i}\x00", maps)
    return root


def job_archive(path: Path, n: int, shape: str) -> Path:
    """PATH: an uncompressed tar of intel-xeon-L5640-2node with a job of N processes under a torchrun (PID 9999):
    "chain", each the worker of the one before (PIDs 10000..., LOCAL_RANK=0, the first the rank); "flat", N ranks
    side by side (LOCAL_RANK=i). The job tree's worst cases (a walk up per process was quadratic in the chain).
    Written in one stream, where N directories of files took minutes on a busy machine."""
    import io
    import tarfile

    from tests.conftest import PROJECT

    maps = numa_maps(8, remote=False).encode()
    fields = " ".join(["0"] * 33) + " 0 " + " ".join(["0"] * 10)
    with tarfile.open(PROJECT / "fixtures" / f"{PROC_TREE}.tar.gz") as src, tarfile.open(path, "w") as out:
        for member in src.getmembers():
            out.addfile(member, src.extractfile(member) if member.isfile() else None)

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{PROC_TREE}/proc/{name}")
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))

        procs = [(9999, 1, b"", b"/usr/bin/python3\x00/usr/local/bin/torchrun\x00train.py\x00")]
        for i in range(n):
            pid = 10000 + i
            rank = 0 if shape == "chain" else i
            procs.append((pid, pid - 1 if shape == "chain" else 9999, f"LOCAL_RANK={rank}\x00".encode(),
                          b"python\x00train.py\x00"))
        for pid, ppid, env, cmd in procs:
            stat = f"{pid} (python) S {ppid} {fields}\n".encode()
            status = f"Name:\tpython\nPPid:\t{ppid}\nCpus_allowed_list:\t0-23\nMems_allowed_list:\t0-1\n".encode()
            for where in (f"{pid}", f"{pid}/task/{pid}"):
                add(f"{where}/stat", stat)
                add(f"{where}/status", status)
            add(f"{pid}/cmdline", cmd)
            add(f"{pid}/environ", env)
            add(f"{pid}/numa_maps", maps if pid != 9999 else b"")
    return path


def interrupts_text(n: int) -> str:
    """/proc/interrupts of vm-two-socket's four CPUs and N rows of its NIC's queues."""
    head = "           CPU0       CPU1       CPU2       CPU3\n"
    rows = "".join(f"{100 + i:5d}: {i % 97:10d} {i % 13:10d} {0:10d} {i % 5:10d}  PCI-MSI {i}-edge  enp65s0-rx-{i}\n"
                   for i in range(n))
    return head + rows


def interrupts_root(base: Path, n: int) -> Path:
    root = fixture_copy(IRQ_TREE, base / "root")
    (root / "proc/interrupts").write_text(interrupts_text(n))
    return root


def topology_root(base: Path, cpus: int, nodes: int, distances: bool = True) -> Path:
    """A machine of CPUS CPUs (two threads a core, one package per node that has CPUs) over NODES nodes: the
    CPUs spread evenly over the first min(NODES, CPUS // 2) nodes, the rest memory-only (as CXL expanders
    are); each node's distance row (10 to itself, 20 + the hop count to the others) when DISTANCES."""
    from numatune.cpulist import format_cpulist

    root = base / "root"
    cpu_dir = root / "sys/devices/system/cpu"
    node_dir = root / "sys/devices/system/node"
    with_cpus = max(1, min(nodes, cpus // 2))
    per = cpus // with_cpus
    node_cpus: dict[int, list[int]] = {n: [] for n in range(nodes)}
    for c in range(cpus):
        node_cpus[min(c // per, with_cpus - 1)].append(c)
    cpu_dir.mkdir(parents=True)
    for name in ("online", "possible", "present"):
        (cpu_dir / name).write_text(f"0-{cpus - 1}\n")
    for n, members in node_cpus.items():
        for c in members:
            topo = cpu_dir / f"cpu{c}" / "topology"
            topo.mkdir(parents=True)
            first = c - c % 2
            (topo / "thread_siblings_list").write_text(f"{first}-{first + 1}\n")
            (topo / "core_id").write_text(f"{first // 2}\n")
            (topo / "physical_package_id").write_text(f"{n}\n")
            (topo / "package_cpus_list").write_text(format_cpulist(members) + "\n")
    node_dir.mkdir(parents=True)
    for name in ("online", "possible"):
        (node_dir / name).write_text(f"0-{nodes - 1}\n")
    for n in range(nodes):
        d = node_dir / f"node{n}"
        d.mkdir()
        (d / "cpulist").write_text(format_cpulist(node_cpus[n]) + "\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       16384000 kB\nNode {n} MemFree:        8000000 kB\n")
        if distances:
            (d / "distance").write_text(" ".join("10" if m == n else str(20 + abs(m - n) % 10)
                                                 for m in range(nodes)) + "\n")
    (root / "proc").mkdir()
    (root / "proc/meminfo").write_text(f"MemTotal: {16384000 * nodes} kB\n")
    return root
