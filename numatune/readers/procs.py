"""Per-process readers for `audit`: numa_maps, status, task stat, sched NUMA faults, cgroup cpuset, GPUs.

Everything goes through the Host, so a saved tree (`numatune snapshot --pid`) reads the same way as
the live node (the snapshot copies whatever `audit PID` reads here, see numatune/commands/snapshot.py).
`ENVIRON_KEYS` are the only environment variables ever read from /proc/PID/environ: the rest of an
environment can hold secrets and is dropped as soon as the file is split, never kept or printed (and
never stored by a snapshot).
"""

from __future__ import annotations

import fnmatch
import heapq
from collections import Counter
from collections.abc import Iterable, Iterator
from operator import itemgetter

from numatune.cpulist import MAX_NODES, parse_cpulist
from numatune.errors import BindingError, NumatuneError, ParseError, PermissionDenied, ProcessGone, ReadError
from numatune.model.order import gpu_order
from numatune.model.order import labels as device_labels
from numatune.model.process import (
    MAX_CHUNKS,
    MAX_LISTED_MAPPINGS,
    Folded,
    GpuContext,
    GpuUse,
    MappingPlacement,
    NumaMemory,
    PolicyUse,
    ProcEntry,
    ProcessInfo,
    SharedAnon,
    ThreadInfo,
)
from numatune.model.resolve import (
    ENV_KEYS,
    GPU_VARS,
    RANK_VARS,
    cgroup_cpuset_dirs,
    local_rank_arg,
    parse_cgroup,
    rank_gpu,
)
from numatune.model.resolve import local_rank as resolve_local_rank
from numatune.model.topology import NvmlGpu, Topology
from numatune.numbers import maybe_int, parse_int
from numatune.pieces import MAX_FIELDS, MAX_RECORDS, keyed, lines, split
from numatune.system.host import Host

# The environment keys, local-rank order, GPU ordering and cgroup parsing are the resolver's (shared with launch).
RANK_KEYS: tuple[str, ...] = tuple(k for k, _ in RANK_VARS)
GPU_ENV_KEYS: tuple[str, ...] = GPU_VARS
ENVIRON_KEYS: tuple[str, ...] = ENV_KEYS

PF_KTHREAD = 0x00200000
_POLICY_STARTS = ("default", "local", "bind", "prefer", "weighted")
_SHM_PREFIXES = ("/dev/zero", "/SYSV", "/dev/shm/", "/memfd:")
_ADDR_WIDTH = 12  # x86-64/arm64 user addresses: "7f1234567000"


# -- numa_maps -----------------------------------------------------------------------------------
def unescape_octal(name: str) -> str:
    """Undo the kernel's `\\ooo` escapes in numa_maps/mountinfo paths ("a\\040b" -> "a b")."""
    if "\\" not in name:
        return name
    out, i = [], 0
    while i < len(name):
        ch = name[i]
        if ch == "\\" and i + 4 <= len(name) and name[i + 1 : i + 4].isdigit():
            out.append(chr(int(name[i + 1 : i + 4], 8)))  # three digits: bounded
            i += 4
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _mapping_kind(token: str) -> str:
    if token == "heap" or token == "stack":
        return token
    if token.startswith("file="):
        path = token[5:]
        return "shm" if path.startswith(_SHM_PREFIXES) else "file"
    return "anon"


# How numa_maps names a shared anonymous mapping (mmap MAP_SHARED|MAP_ANONYMOUS: the kernel backs it with an unlinked
# shmem file "dev/zero", /proc/PID/maps `/dev/zero (deleted)` with `rw-s`; numa_maps escapes the blank). cudaHostAlloc
# and torch's pin_memory() map the CUDA host allocator's chunks this way (driver 580, CUDA 13: fixtures/h100-job-*.md).
SHARED_ANON_FILE = "/dev/zero\\040(deleted)"
# The GPU device files a context maps: a forked worker inherits its rank's /dev/nvidiactl and /dev/nvidiaN mappings
# but never maps /dev/nvidia-uvm or /dev/kfd itself.
CONTEXT_DEVICES = {"nvidia-uvm": "CUDA", "kfd": "ROCm"}


def gpu_device(file: str) -> str | None:
    """The device name when `file` is a GPU driver's device file: /dev/nvidiactl, /dev/nvidiaN, /dev/nvidia-uvm,
    /dev/kfd, /dev/dri/renderD*. Its mappings are the driver's own memory (control pages, doorbells, UVM's
    bookkeeping), not the user's pinned chunks, which are shared anonymous mappings (SHARED_ANON_FILE)."""
    name = file[5:]
    if (name.startswith("nvidia") and "/" not in name) or name == "kfd" or name.startswith("dri/renderD"):
        return name.rpartition("/")[2]
    return None


def _tails(lines: list[str]) -> Counter[str]:
    """Count identical lines once the address is dropped: most mappings of a big process repeat.

    Fast path: slice off a 12-digit address (C-level map); a tail that does not start with " " and a
    policy word means an address of another width, and the exact per-line split is used instead.
    """
    fast = Counter(map(itemgetter(slice(_ADDR_WIDTH, None)), lines))
    ok = all(t[:1] == " " and t[1:].startswith(_POLICY_STARTS) for t in fast if t)
    if ok:
        return Counter({t[1:]: n for t, n in fast.items() if t})
    return Counter(line.partition(" ")[2] for line in lines if line)


def _parse_tail(tail: str, page_kib: int, where: str = "numa_maps",
                ) -> tuple[str, str, str, int, list[tuple[int, int]]] | None:
    """(policy, kind, file token or "", page bytes, [(node, pages)]) of one numa_maps line without its
    address; None when malformed."""
    toks = split(tail, None, where, MAX_FIELDS, "fields in a line")
    if not toks:
        return None
    first = toks[0]
    if (first == "prefer" or first == "weighted") and len(toks) > 1 and ":" in toks[1]:
        policy, i = first + " " + toks[1], 2
    else:
        policy, i = first, 1
    kind = "anon"
    file = ""
    huge = False
    kpage = 0
    nodes: list[tuple[int, int]] = []
    for tok in toks[i:]:
        if tok[0] == "N" and tok[1:2].isdigit():
            node, _, pages = tok[1:].partition("=")
            if not (node.isdigit() and pages.isdigit()):
                return None
            nodes.append((parse_int(node, where), parse_int(pages, where)))
        elif tok.startswith("kernelpagesize_kB="):
            value = tok[18:]
            if not value.isdigit():
                return None
            kpage = parse_int(value, where)
        elif tok == "huge":
            huge = True
        elif tok == "heap" or tok == "stack" or tok.startswith("file="):
            kind = _mapping_kind(tok)
            if tok[0] == "f":
                file = tok[5:]
    if huge:
        kind = "hugetlb"
    return policy, kind, file, (kpage or (2048 if huge else page_kib)) * 1024, nodes


def policy_nodes(policy: str) -> frozenset[int] | None:
    """The nodes a numa_maps policy names ("bind:0-1", "weighted interleave:0,2", "bind=static:1");
    None for default/local and for "=relative" masks (relative to the cpuset, not node ids)."""
    head, sep, nodes = policy.rpartition(":")
    if not sep or "relative" in head:
        return None
    try:
        return frozenset(parse_cpulist(nodes, MAX_NODES))
    except (ValueError, NumatuneError):
        return None


# The lines of a numa_maps parsed at most: one a mapping, and a process maps at most vm.max_map_count (65,530 by
# default; databases raise it to 262,144): past 524,288 lines is exit 3 naming the file. Each line costs a string
# and, for `audit --mappings`, a record: 838,000 lines under the 32 MiB read bound held 287 MB.
MAX_MAPPINGS = 1 << 19

# Distinct policy texts whose node lists `_placements` parses (a process has a handful): each parse is bounded by
# MAX_NODES ids, so a file of 8,000 distinct "bind:0-65535,N" lines costs at most this many parses (was 60 s).
MAX_POLICIES = 1024
_UNPARSED = object()


def _placements(
    lines: list[str], parsed: dict[str, tuple[str, str, str, int, list[tuple[int, int]]] | None]
) -> Iterator[MappingPlacement]:
    """One MappingPlacement per well-formed line, in file order, from the tails already parsed (never parses twice);
    made as they are asked for, so that a caller who keeps a few holds no more than those."""
    made: dict[str, tuple] = {}  # tail -> the fields after `start`, built once per distinct tail
    named_of: dict[str, frozenset[int] | None] = {}  # at most MAX_POLICIES parsed: past them, "off" is unknown
    name_of: dict[str, str] = {"": ""}
    new = tuple.__new__  # the record's own constructor, without a Python-level call per mapping
    for line in lines:
        addr, _, tail = line.partition(" ")
        fields = made.get(tail)
        if fields is None:
            p = parsed.get(tail)
            if p is None:
                continue
            policy, kind, file, size, nodes = p
            named = named_of.get(policy, _UNPARSED)
            if named is _UNPARSED:
                named = named_of[policy] = policy_nodes(policy) if len(named_of) < MAX_POLICIES else None
            off = None if named is None else sum(n for node, n in nodes if node not in named)
            name = name_of.get(file)
            if name is None:
                name = name_of[file] = unescape_octal(file).rpartition("/")[2]
            fields = made[tail] = (kind, name, policy, size, dict(sorted(nodes)), off)
        if len(addr) > 16:  # wider than any 64-bit address: not a mapping
            continue
        try:
            start = int(addr, 16)
        except ValueError:
            continue
        yield new(MappingPlacement, (start, *fields))


def _largest(placements: Iterable[MappingPlacement], keep: int | None) -> tuple[tuple[MappingPlacement, ...], Folded]:
    """(the `keep` largest placements, largest first, address order among equals; the others summed). `keep`
    None keeps every one, in file order. One pass, holding `keep` of them at a time (heapq.nlargest)."""
    if keep is None:
        return tuple(placements), Folded()
    count = total = off = 0
    by_node: dict[int, int] = {}

    def counted() -> Iterator[tuple[int, int, MappingPlacement]]:
        nonlocal count, total, off
        for i, m in enumerate(placements):
            size = m.page_size
            b = sum(m.pages.values()) * size
            count += 1
            total += b
            off += (m.off_policy_pages or 0) * size
            for n, pages in m.pages.items():
                by_node[n] = by_node.get(n, 0) + pages * size
            yield b, -i, m

    kept = tuple(m for *_, m in heapq.nlargest(keep, counted(), key=itemgetter(0, 1)))
    for m in kept:
        size = m.page_size
        total -= m.bytes
        off -= (m.off_policy_pages or 0) * size
        for n, pages in m.pages.items():
            by_node[n] -= pages * size
    return kept, Folded(count - len(kept), total, {n: b for n, b in sorted(by_node.items()) if b}, off)


def _shared_anon(lines: list[str], parsed: dict[str, tuple[str, str, str, int, list[tuple[int, int]]] | None],
                 ) -> SharedAnon:
    """The shared anonymous mappings summed in one pass (with the bytes on nodes their policy does not name: where
    the allocating thread ran, not where a policy sent them), then the MAX_CHUNKS largest resident ones kept."""
    mine = [line for line in lines if SHARED_ANON_FILE in line]
    every = 0
    unasked: dict[int, int] = {}
    named_of: dict[str, object] = {}
    for m in _placements(mine, parsed):
        every += 1
        named = named_of.get(m.policy, _UNPARSED)
        if named is _UNPARSED:
            named = named_of[m.policy] = policy_nodes(m.policy) if len(named_of) < MAX_POLICIES else _UNPARSED
        if named is _UNPARSED:
            continue  # past MAX_POLICIES distinct policies: not known, not counted as unasked
        for n, pages in m.pages.items():
            if pages and (named is None or n not in named):
                unasked[n] = unasked.get(n, 0) + pages * m.page_size
    kept, rest = _largest((m for m in _placements(mine, parsed) if m.bytes), MAX_CHUNKS)
    by_node = dict(rest.by_node)
    for m in kept:
        for n, pages in m.pages.items():
            by_node[n] = by_node.get(n, 0) + pages * m.page_size
    return SharedAnon(every, len(kept) + rest.mappings, {n: b for n, b in sorted(by_node.items()) if b}, kept,
                      dict(sorted(unasked.items())))


def parse_numa_maps(text: str, page_kib: int = 4, *, per_mapping: bool = False, where: str = "numa_maps",
                    keep: int | None = None) -> NumaMemory:
    """Resident bytes by node, by mapping kind and by policy, in one pass over /proc/PID/numa_maps;
    with `per_mapping`, also every mapping's placement (`audit --mappings`) from the same parse.

    Traps handled: policies with a space ("prefer (many):0-1", "weighted interleave:0-1") and flags
    ("bind=static:0"); octal-escaped file names (never split: the kernel escapes blanks); lines with no
    pages and no kernelpagesize_kB; hugetlb VMAs ("huge") counted in huge pages; N<node> for CPU-less
    nodes. `page_kib` is the base page size, used only by kernels older than 4.0 (no kernelpagesize_kB).
    GPU device-file mappings are the driver's memory (`driver`, `gpu_maps`); shared anonymous mappings are kept
    summed, the MAX_CHUNKS largest kept with their address (`shared_anon`: a CUDA process's host-allocator chunks).
    With `keep`, `by_mapping` holds only the `keep` largest mappings and `mappings_beyond` sums the others (`audit
    --mappings`: memory bounded by `keep`, not by the file); without, every mapping in file order.
    Each distinct line tail (the line without its address) is parsed once, however many lines repeat it.
    A number of more than numbers.MAX_DIGITS digits is ParseError naming WHERE (the file), exit 3.
    """
    lines = split(text, "\n", where, MAX_MAPPINGS, "lines")
    by_node: dict[int, int] = {}
    by_kind: dict[str, dict[int, int]] = {}
    policy_maps: dict[str, int] = {}
    policy_bytes: dict[str, int] = {}
    driver: dict[str, dict[int, int]] = {}
    driver_policy: dict[str, int] = {}  # policy -> resident bytes of GPU driver mappings under it
    gpu_maps: set[str] = set()
    shared: dict[str, tuple[str, str, str, int, list[tuple[int, int]]]] = {}
    parsed: dict[str, tuple[str, str, str, int, list[tuple[int, int]]] | None] = {}
    mappings = 0
    malformed = 0
    for tail, count in _tails(lines).items():
        p = _parse_tail(tail, page_kib, where)
        if per_mapping:
            parsed[tail] = p
        if p is None:
            malformed += count
            continue
        mappings += count
        policy, kind, file, size, nodes = p
        policy_maps[policy] = policy_maps.get(policy, 0) + count
        total = 0
        device = gpu_device(file) if file[:5] == "/dev/" else None
        if device:
            gpu_maps.add(device)
        elif file == SHARED_ANON_FILE:
            shared[tail] = p
        if nodes:
            kind_nodes = by_kind.setdefault(kind, {})
            held = driver.setdefault(device, {}) if device else None
            for node, pages in nodes:
                b = pages * size * count
                by_node[node] = by_node.get(node, 0) + b
                kind_nodes[node] = kind_nodes.get(node, 0) + b
                total += b
                if held is not None:
                    held[node] = held.get(node, 0) + b
        policy_bytes[policy] = policy_bytes.get(policy, 0) + total
        if device and total:
            driver_policy[policy] = driver_policy.get(policy, 0) + total
    policies = tuple(
        PolicyUse(p, policy_maps[p], policy_bytes[p])
        for p in sorted(policy_maps, key=lambda p: (-policy_bytes[p], -policy_maps[p], p))
    )
    listed, beyond = _largest(_placements(lines, parsed), keep) if per_mapping else (None, None)
    return NumaMemory(
        by_node=dict(sorted(by_node.items())),
        by_kind={k: dict(sorted(v.items())) for k, v in by_kind.items()},
        policies=policies,
        mappings=mappings,
        malformed_lines=malformed,
        by_mapping=listed,
        mappings_beyond=beyond if keep is not None else None,
        driver={d: dict(sorted(v.items())) for d, v in sorted(driver.items())},
        driver_policies=driver_policy,
        gpu_maps=tuple(sorted(gpu_maps)),
        shared_anon=_shared_anon(lines, shared) if shared else SharedAnon(),
    )


def parse_maps(text: str, where: str = "/proc/self/maps") -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, path) of each line of /proc/PID/maps, in address order; the path as the kernel
    prints it ("/dev/zero (deleted)" for shared anonymous memory, "" for private anonymous memory, "[heap]").
    Malformed lines are skipped."""
    out = []
    for line in split(text, "\n", where, MAX_RECORDS, "lines"):
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        lo_s, _, hi_s = fields[0].partition("-")
        lo, hi = maybe_int(lo_s, where, base=16), maybe_int(hi_s, where, base=16)
        if lo is not None and hi is not None:
            out.append((lo, hi, fields[1], fields[5].strip() if len(fields) > 5 else ""))
    return sorted(out)


# -- status, stat, sched, vmstat, environ --------------------------------------------------------
def parse_status(text: str, where: str = "status") -> dict[str, str]:
    out = {}
    for line in lines(text, where):
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def parse_stat(text: str, where: str = "stat") -> dict[str, object]:
    """/proc/PID/stat: the comm may hold blanks and parentheses, so split after the LAST ')'."""
    head, sep, rest = text.rpartition(")")
    if not sep:
        raise ValueError("no ')' in stat")
    fields = rest.split()  # fields[0] is field 3 (state)
    comm = head.partition("(")[2]
    if len(fields) < 7:
        raise ValueError("too few fields in stat")
    cpu = maybe_int(fields[36], where) if len(fields) > 36 else None
    return {
        "comm": comm,
        "state": fields[0],
        "ppid": _field(fields[1], where),
        "flags": _field(fields[6], where),
        "cpu": cpu,  # field 39: the CPU it last ran on
    }


def _field(text: str, where: str) -> int:
    """A stat field: ValueError when not a number (the callers' "malformed"), ParseError when too long."""
    value = maybe_int(text, where)
    if value is None:
        raise ValueError(f"not a number: {text[:20]!r}")
    return value


def parse_sched_numa_faults(text: str, where: str = "sched") -> dict[int, int]:
    """NUMA-balancing hinting faults per node ("numa_faults node=N task_private=A task_shared=B ...").

    Old kernels swapped the private/shared labels, so only their sum is used.
    """
    out: dict[int, int] = {}
    for line in lines(text, where):
        if not line.startswith("numa_faults node="):
            continue
        fields = dict(tok.split("=", 1) for tok in split(line, None, where, 64, "fields in a line")[1:] if "=" in tok)
        node = maybe_int(fields.get("node", ""), where)
        private = maybe_int(fields.get("task_private", "0"), where)
        shared = maybe_int(fields.get("task_shared", "0"), where)
        if node is not None and private is not None and shared is not None:
            out[node] = out.get(node, 0) + private + shared
    return out


def parse_vmstat(text: str, where: str = "/proc/vmstat") -> dict[str, int]:
    out = {}
    for number, line in enumerate(lines(text, where), 1):
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = parse_int(value, where, line=number)
    return out


def parse_environ(data: str, keys: tuple[str, ...] = ENVIRON_KEYS) -> dict[str, str]:
    """Only the named keys (the last entry of each, in the order they first appear); every other variable
    is never even split out of the text, let alone stored (an environment of millions of entries costs one
    search a key)."""
    return keyed(data, "\x00", keys)


def local_rank(environ: dict[str, str]) -> tuple[int | None, str | None]:
    """(rank, variable) as launch finds it; a malformed value means no rank here (audit reports, never fails)."""
    try:
        rank, key, _ = resolve_local_rank(environ)
    except BindingError:
        return None, None
    return rank, key


# -- reading one process -------------------------------------------------------------------------
class _Reader:
    """Reads files of one PID, turning "it vanished" and "not allowed" into numatune's errors."""

    def __init__(self, host: Host, pid: int) -> None:
        self.host, self.pid, self.base = host, pid, f"/proc/{pid}"

    def gone(self) -> bool:
        return not self.host.is_dir(self.base)

    def read(self, rel: str) -> str:
        path = f"{self.base}/{rel}"
        try:
            return self.host.read_text(path)
        except PermissionDenied as exc:
            raise PermissionDenied(
                f"permission denied reading {path}: process {self.pid} belongs to another user",
                hint="run as root or as the process owner (reading numa_maps needs ptrace access)",
            ) from exc
        except ReadError as exc:
            if self.gone():
                raise ProcessGone(f"process {self.pid} exited while being read") from exc
            raise

    def optional(self, rel: str) -> str | None:
        try:
            return self.read(rel)
        except PermissionDenied:
            return None
        except ProcessGone:
            raise
        except NumatuneError:
            return None


def pid_exists(host: Host, pid: int) -> bool:
    return host.is_dir(f"/proc/{pid}")


def no_such_process(host: Host, pid: int) -> ProcessGone:
    """The error for a PID that is not there: on the live node, check it with ps; in a saved root, the PIDs
    it does hold (a snapshot keeps only the processes it was asked for)."""
    if host.is_live:
        return ProcessGone(f"no process with PID {pid}", hint="check the PID with `ps -p PID`")
    held = sorted((n for n in host.listdir("/proc") if n.isdigit() and len(n) <= 9), key=lambda n: (len(n), n))
    shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
    return ProcessGone(f"PID {pid} is not in {host.label}: it holds " + (f"PID(s) {shown}" if held else "no process"),
                       hint="a snapshot keeps the processes given to `snapshot --pid`" if not held else "")


def _parsed(r: _Reader, name: str, parse):  # noqa: ANN001, ANN202
    """A /proc/PID file parsed; malformed is bad input (exit 3) unless the process exited meanwhile (exit 6)."""
    text = r.read(name)
    try:
        return parse(text)
    except ValueError as exc:
        if r.gone():
            raise ProcessGone(f"process {r.pid} exited while being read") from exc
        raise ParseError(f"/proc/{r.pid}/{name}", str(exc)) from exc


def read_process(
    host: Host, pid: int, topo: Topology | None = None, *, threads: bool = True, numa_maps: str | None = None,
    mappings: bool = False,
) -> ProcessInfo:
    """Everything audit needs about one PID. Raises ProcessGone / PermissionDenied with one clear line.

    `numa_maps` is the file's text when the caller already read it (audit prefetches it in a thread);
    `mappings` keeps every mapping's placement (memory.by_mapping) from the same parse.
    """
    r = _Reader(host, pid)
    if r.gone():
        raise no_such_process(host, pid)
    notes: list[str] = []
    stat = _parsed(r, "stat", lambda text: parse_stat(text, f"/proc/{pid}/stat"))
    status = _parsed(r, "status", lambda text: parse_status(text, f"/proc/{pid}/status"))
    kernel_thread = bool(stat["flags"] & PF_KTHREAD)  # type: ignore[operator]
    cmdline_raw = r.optional("cmdline") or ""
    cmdline = tuple(a for a in split(cmdline_raw, "\x00", f"/proc/{pid}/cmdline", MAX_RECORDS, "arguments")
                    if a) if cmdline_raw else ()
    comm = status.get("Name") or str(stat["comm"])
    memory = NumaMemory()
    if not kernel_thread:
        maps = numa_maps if numa_maps is not None else r.optional("numa_maps")
        if maps is None:
            # live, or a snapshot that could not read it where it was taken: the clear PermissionDenied (exit 4),
            # never "ok" on memory nobody saw
            if host.exists(f"/proc/{pid}/numa_maps") and host.is_live:
                r.read("numa_maps")
            if f"/proc/{pid}/numa_maps" in host.snapshot_facts("unreadable"):
                raise PermissionDenied(f"/proc/{pid}/numa_maps could not be read where this snapshot was taken "
                                       f"(SNAPSHOT.txt): process {pid}'s memory placement is unknown",
                                       hint="take the snapshot as root or as the process owner")
            notes.append("numa_maps not available: memory placement unknown")
        else:
            memory = parse_numa_maps(maps, per_mapping=mappings, where=f"/proc/{pid}/numa_maps",
                                     keep=MAX_LISTED_MAPPINGS if mappings else None)
            if memory.malformed_lines:
                notes.append(f"{memory.malformed_lines} malformed numa_maps line(s) skipped")
            if not maps.strip():
                kernel_thread = not cmdline  # exited-to-zombie or kernel thread: no address space
    thread_infos = _read_threads(r, stat, status) if threads else ()
    environ_text = r.optional("environ")
    environ = parse_environ(environ_text) if environ_text else {}
    del environ_text  # the full environment is never kept
    rank, rank_key = local_rank(environ)
    cgroup, cpuset_cpus, cpuset_mems = _read_cpuset(host, r.optional("cgroup"), f"{r.base}/cgroup")
    faults = _read_numa_faults(r, [t.tid for t in thread_infos] or [pid])
    gpus_open = read_open_gpus(host, pid, topo) if topo is not None and not kernel_thread else ()
    context = gpu_context(pid, memory, topo)
    gpu, gpu_note = choose_gpu(gpus_open, environ, rank, topo, pid) if topo is not None else (None, None)
    if gpu is not None and gpu.bdf and topo is not None:  # named as inspect, launch and emit name it
        gpu = GpuUse(gpu.bdf, gpu.node, gpu.source, gpu.index, device_labels(topo.devices).get(gpu.bdf.lower()))
    if gpu_note:
        notes.append(gpu_note)
    if r.gone():
        raise ProcessGone(f"process {pid} exited while being read")
    return ProcessInfo(
        pid=pid,
        comm=comm,
        cmdline=cmdline,
        ppid=stat["ppid"],  # type: ignore[arg-type]
        state=str(stat["state"]),
        threads=thread_infos,
        cpus_allowed=tuple(sorted(_cpulist(status.get("Cpus_allowed_list")))),
        mems_allowed=tuple(sorted(_cpulist(status.get("Mems_allowed_list")))),
        cgroup=cgroup,
        cpuset_cpus=cpuset_cpus,
        cpuset_mems=cpuset_mems,
        memory=memory,
        kernel_thread=kernel_thread,
        environ=environ,
        gpus_open=gpus_open,
        gpu=gpu,
        rank=rank,
        rank_source=rank_key,
        numa_faults=faults,
        notes=tuple(notes),
        gpu_context=context,
    )


_NVML_INDEX: list = [None, {}]  # (the NVML GPUs indexed, pid -> their GPUs): built once per topology read


def nvml_processes(topo: Topology | None) -> dict[int, tuple[NvmlGpu, ...]]:
    """pid -> the GPUs NVML lists it on as a compute process, indexed once per topology (a set lookup per process:
    4,000 ranks against 300,000 listed PIDs scanned the tuples for 24 s)."""
    gpus = topo.fabric.nvml_gpus if topo is not None else ()
    if _NVML_INDEX[0] is not gpus:
        index: dict[int, tuple[NvmlGpu, ...]] = {}
        for g in gpus:
            for pid in g.processes:
                index[pid] = (*index.get(pid, ()), g)
        _NVML_INDEX[:] = [gpus, index]
    return _NVML_INDEX[1]


def gpu_context(pid: int, memory: NumaMemory, topo: Topology | None) -> GpuContext | None:
    """Whether the process holds a GPU context, and the evidence: NVML's compute processes, else a mapping of
    /dev/nvidia-uvm (CUDA) or /dev/kfd (ROCm). Open descriptors and /dev/nvidiactl mappings do not count: a forked
    worker inherits both from its rank without a context of its own."""
    for g in nvml_processes(topo).get(pid, ()):
        return GpuContext("CUDA", f"NVML lists it as a compute process on GPU {g.index}")
    for device, runtime in CONTEXT_DEVICES.items():
        if device in memory.gpu_maps:
            return GpuContext(runtime, f"it maps /dev/{device}")
    return None


def _cpulist(text: str | None) -> frozenset[int]:
    if not text:
        return frozenset()
    try:
        return parse_cpulist(text)
    except ValueError:
        return frozenset()


def _read_threads(r: _Reader, stat: dict, status: dict[str, str]) -> tuple[ThreadInfo, ...]:
    out = []
    for name in r.host.listdir(f"{r.base}/task"):
        if not name.isdigit():
            continue
        st = r.optional(f"task/{name}/stat")
        ss = r.optional(f"task/{name}/status")
        if st is None:
            continue  # the thread exited between listing and reading: not the process
        try:
            t = parse_stat(st, f"{r.base}/task/{name}/stat")
        except ValueError:
            continue
        allowed = (_cpulist(parse_status(ss, f"{r.base}/task/{name}/status").get("Cpus_allowed_list")) if ss
                   else frozenset())
        tid = parse_int(name, f"{r.base}/task")
        out.append(ThreadInfo(tid, str(t["comm"]), t["cpu"], tuple(sorted(allowed)), str(t["state"])))  # type: ignore[arg-type]
    if not out:  # no task/ directory (a partial capture): the main thread from the process files
        allowed = _cpulist(status.get("Cpus_allowed_list"))
        out.append(ThreadInfo(r.pid, str(stat["comm"]), stat["cpu"], tuple(sorted(allowed)), str(stat["state"])))
    return tuple(out)


def _read_numa_faults(r: _Reader, tids: list[int]) -> dict[int, int]:
    """Sum of every thread's hinting faults (each task keeps its own); the process file if no task/."""
    texts = [(r.optional(f"task/{tid}/sched"), f"{r.base}/task/{tid}/sched") for tid in tids]
    if not any(text for text, _ in texts):
        texts = [(r.optional("sched"), f"{r.base}/sched")]
    total: dict[int, int] = {}
    for text, where in texts:
        for node, n in parse_sched_numa_faults(text or "", where).items():
            total[node] = total.get(node, 0) + n
    return total


def _read_cpuset(
    host: Host, cgroup_text: str | None, where: str
) -> tuple[str | None, tuple[int, ...] | None, tuple[int, ...] | None]:
    if not cgroup_text:
        return None, None, None
    path = parse_cgroup(cgroup_text, where)
    if path is None:
        return None, None, None
    for base, cpus_file, mems_file in cgroup_cpuset_dirs(cgroup_text, where):
        cpus = host.read_cpulist(f"{base}/{cpus_file}")
        if cpus is not None:
            mems = host.read_cpulist(f"{base}/{mems_file}")
            return path, tuple(sorted(cpus)), tuple(sorted(mems)) if mems is not None else None
    return path, None, None


# -- GPUs ----------------------------------------------------------------------------------------
def _gpu_for_nvidia_minor(topo: Topology, minor: int) -> tuple[str | None, int | None]:
    for d in topo.devices:
        if d.nvidia is not None and d.nvidia.minor == minor:
            return d.bdf, d.node
    return None, None


def read_open_gpus(host: Host, pid: int, topo: Topology) -> tuple[GpuUse, ...]:
    """GPU device nodes among the open file descriptors: /dev/nvidiaN, /dev/dri/renderD*, /dev/kfd."""
    seen: dict[str, GpuUse] = {}
    for fd in host.listdir(f"/proc/{pid}/fd"):
        target = host.read_link(f"/proc/{pid}/fd/{fd}")
        if not target or not target.startswith("/dev/") or target in seen:
            continue
        name = target[5:]
        if name.startswith("nvidia") and name[6:].isdigit():
            minor = parse_int(name[6:], f"/proc/{pid}/fd/{fd}")
            bdf, node = _gpu_for_nvidia_minor(topo, minor)
            seen[target] = GpuUse(bdf, node, f"fd {target}", minor)
        elif name.startswith("dri/renderD") and name[11:].isdigit():
            dev = host.resolve(f"/sys/class/drm/{name[4:]}/device")
            bdf = dev.rsplit("/", 1)[-1] if dev else None
            pci = topo.device(bdf) if bdf else None
            seen[target] = GpuUse(bdf, pci.node if pci else None, f"fd {target}",
                                    parse_int(name[11:], f"/proc/{pid}/fd/{fd}"))
        elif name == "kfd":
            seen[target] = GpuUse(None, None, "fd /dev/kfd (AMD GPU in use; which one from ROCR/HIP_VISIBLE_DEVICES)")
    return tuple(seen.values())


def choose_gpu(
    opened: tuple[GpuUse, ...], environ: dict[str, str], rank: int | None, topo: Topology, pid: int | None = None
) -> tuple[GpuUse | None, str | None]:
    """The one GPU a process uses: NVML's compute processes, else a single open device node, else the
    visible-devices list and the rank (the resolver launch uses).

    Returns (gpu, note); the note says what was assumed or why no GPU could be told.
    """
    on = list(nvml_processes(topo).get(pid, ())) if pid is not None else []
    if len(on) == 1:
        d = topo.device(on[0].bdf) or next((x for x in topo.devices if x.bdf.lower() == on[0].bdf), None)
        return GpuUse(on[0].bdf, d.node if d else None, f"NVML: a compute process on GPU {on[0].index}",
                      on[0].index), None
    concrete = [g for g in opened if g.bdf is not None]
    if len(concrete) == 1:
        return concrete[0], None
    from_env, env_note = _gpu_from_env(environ, rank, topo)
    if from_env is not None:
        if concrete and from_env.bdf not in {g.bdf for g in concrete}:
            return from_env, f"the GPU named by the environment ({from_env.bdf}) is not among its open GPUs"
        return from_env, None
    if len(on) > 1:
        return None, f"NVML shows it on {len(on)} GPUs and no local rank tells which one it mainly uses"
    if len(concrete) > 1:
        return None, f"it holds {len(concrete)} GPUs open and no local rank tells which one it uses"
    if env_note:
        return None, env_note
    if any(g.source.startswith("fd /dev/kfd") for g in opened):
        return None, "it uses an AMD GPU (/dev/kfd) but neither ROCR/HIP_VISIBLE_DEVICES nor a rank says which"
    return None, None


def _gpu_from_env(environ: dict[str, str], rank: int | None, topo: Topology) -> tuple[GpuUse | None, str | None]:
    try:
        found = rank_gpu(environ, rank, topo.devices)
    except BindingError as exc:
        return None, f"its environment names no usable GPU: {exc}"
    if found is None:
        return None, None
    dev, source, ordering, _ = found
    index = None
    gpus, _ = gpu_order(topo.devices)
    if dev in gpus:
        index = gpus.index(dev)
    if ordering and "assumed" in ordering and "UUID" not in source:
        source += " (PCI bus order assumed)"
    elif ordering and "PCI_BUS_ID" in ordering:
        source += " (PCI bus order)"
    elif ordering and "KFD topology node order" in ordering:
        source += " (ROCm's KFD node order)"
    minor = dev.nvidia.minor if dev.nvidia else index
    return GpuUse(dev.bdf, dev.node, source, minor), None


# -- finding processes ---------------------------------------------------------------------------
def _each_process(host: Host):  # noqa: ANN202 - iterator of (pid, parsed stat, cmdline text)
    """Every process of the root, in one pass over /proc: its PID, its parsed stat and its command line with the
    NULs between arguments kept. One that exits meanwhile (or whose stat is not a process's) is skipped."""
    for name in host.listdir("/proc"):
        if not name.isdigit():
            continue
        text = host.read_optional(f"/proc/{name}/stat")
        if not text:
            continue
        try:
            st = parse_stat(text, f"/proc/{name}/stat")
        except ValueError:
            continue
        pid = parse_int(name, "/proc")
        try:
            yield pid, st, _Reader(host, pid).optional("cmdline") or ""
        except ProcessGone:
            continue


def list_processes(host: Host) -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, comm, argv0 basename) for every process in the root; exited ones are skipped."""
    out = {}
    for pid, st, cmd in _each_process(host):
        argv0 = cmd.split("\x00", 1)[0] if "\x00" in cmd else cmd.split(" ", 1)[0]
        out[pid] = (st["ppid"], str(st["comm"]), argv0.rsplit("/", 1)[-1])  # type: ignore[arg-type]
    return out


# The command line a job-tree entry keeps of every process (a launcher's name, a worker's `-c` code, `--local-rank`):
# bounded, so that a node of 300,000 processes with megabytes of arguments each costs what its PIDs cost.
MAX_ARGS = 32
MAX_ARG = 512


def process_table(host: Host) -> dict[int, ProcEntry]:
    """pid -> ProcEntry (ppid, comm, the first MAX_ARGS arguments cut to MAX_ARG characters, the rank variables of
    its environment: ENVIRON_KEYS only) for every process of the root: what the job tree reads (`audit --ranks`,
    `--children`). An exited process is skipped; an environment that cannot be read (another user's) is empty."""
    out = {}
    for pid, st, raw in _each_process(host):
        args = raw.split("\x00", MAX_ARGS)[:MAX_ARGS]
        cmdline = tuple(a[:MAX_ARG] for a in args if a)
        env = rank_environ(host, pid) or {}
        out[pid] = ProcEntry(pid, st["ppid"], str(st["comm"]), cmdline, env)  # type: ignore[arg-type]
    return out


def as_listing(table: dict[int, ProcEntry]) -> dict[int, tuple[int, str, str]]:
    """process_table in list_processes's shape (pid -> (ppid, comm, argv0 basename)), for match_name."""
    return {pid: (e.ppid or 0, e.comm, e.cmdline[0].rsplit("/", 1)[-1] if e.cmdline else "")
            for pid, e in table.items()}


def descendants(table: dict[int, tuple[int, str, str]], root: int) -> list[int]:
    """Every process under `root` (children first-level first), not `root` itself; each once, however the parent
    links run (a PPid cycle, a process that names itself its parent)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        if ppid != pid:
            children.setdefault(ppid, []).append(pid)
    seen = {root}
    out: list[int] = []
    queue = sorted(children.get(root, []))
    i = 0
    while i < len(queue):
        pid = queue[i]
        i += 1
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        queue.extend(sorted(c for c in children.get(pid, []) if c not in seen))
    return out


def rank_environ(host: Host, pid: int) -> dict[str, str] | None:
    """The named keys (ENVIRON_KEYS) of a process's environment; None when it exited, is another user's or cannot
    be read (not known to be a rank)."""
    try:
        return parse_environ(_Reader(host, pid).read("environ"))
    except NumatuneError:
        return None


def rank_ancestors(host: Host, procs: list[ProcessInfo], topo: Topology | None = None) -> dict[int, ProcessInfo]:
    """The processes above the audited ones that place them in their job, not among `procs` (a worker audited alone:
    its rank; a rank: its launchers), read without their threads: what tells a rank from its workers and judges a
    worker. Up from each process while it carries rank variables or is a launcher or wrapper: its parent (the rank
    that set its own variables, the launcher), and on while that parent does too. Each ancestor is read once
    (a visited set: a PPid cycle ends, and the launcher above every rank is read once)."""
    from numatune.model.jobshape import LAUNCHERS, WRAPPERS, launcher_name

    by_pid = {p.pid: p for p in procs}
    known: dict[int, ProcessInfo] = {}
    seen: set[int] = set(by_pid)

    def carries(p: ProcessInfo) -> bool:
        return p.rank is not None or p.comm in WRAPPERS or p.comm in LAUNCHERS \
            or launcher_name(p.comm, p.cmdline) is not None or local_rank_arg(p.cmdline) is not None

    for p in procs:
        cur = p
        while carries(cur) and cur.ppid and cur.ppid != cur.pid and cur.ppid not in seen:
            seen.add(cur.ppid)
            try:
                parent = read_process(host, cur.ppid, topo, threads=False)
            except NumatuneError:
                break
            known[parent.pid] = cur = parent
    return known


def match_name(table: dict[int, tuple[int, str, str]], pattern: str, exclude: int | None = None) -> list[int]:
    """PIDs whose comm or argv[0] basename matches a shell glob (a plain word matches as a substring)."""
    glob = any(c in pattern for c in "*?[")
    out = []
    for pid, (_, comm, argv0) in sorted(table.items()):
        if pid == exclude:
            continue
        names = (comm, argv0)
        if glob:
            hit = any(fnmatch.fnmatchcase(n, pattern) for n in names if n)
        else:
            hit = any(pattern in n for n in names if n)
        if hit:
            out.append(pid)
    return out
