"""One resolver for local rank → GPU → NUMA node, used by `launch` (before a rank starts) and `audit`
(while it runs), so both read the same environment keys, order GPUs the same way and parse cgroups
the same way.

- Local rank: the first launcher variable set (torchrun, Slurm, Open MPI, MPICH/Intel MPI, PMI, PMIx,
  MVAPICH).
- GPU order: numatune.model.order, the one numbering of every command (NVIDIA in PCI bus order with
  every field compared as a number, AMD as ROCm enumerates them: KFD node order).
- Visible-devices lists: CUDA_VISIBLE_DEVICES indexes NVIDIA GPUs only, ROCR/HIP_VISIBLE_DEVICES
  AMD GPUs only (other vendors' GPUs are not in the runtime's enumeration); entries are indices or
  UUIDs, and a UUID may be given by a unique prefix as CUDA accepts it.
- cgroups: the v2 path, else the v1 cpuset controller's; a path that leaves the hierarchy (a cgroup
  namespace shows "/.." paths) names no directory.

Pure: the devices and the environment come in as arguments; nothing here reads the system.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from numatune.errors import BindingError, ParseError
from numatune.model.order import AMD, NVIDIA, amd_vs_pci, gpu_order, pci_sort_key, runtime_devices
from numatune.model.topology import PciDevice
from numatune.numbers import MAX_DIGITS
from numatune.pieces import MAX_FIELDS, lines, split

__all__ = ["gpu_order", "pci_sort_key"]  # re-exported: the order callers of the resolver use

RANK_VARS: tuple[tuple[str, str], ...] = (
    ("LOCAL_RANK", "torchrun"),
    ("SLURM_LOCALID", "Slurm"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"),
    ("MPI_LOCALRANKID", "MPICH/Intel MPI"),
    ("PMI_LOCAL_RANK", "PMI"),
    ("PMIX_LOCAL_RANK", "PMIx"),
    ("MV2_COMM_WORLD_LOCAL_RANK", "MVAPICH"),
)
SIZE_VARS: tuple[tuple[str, str], ...] = (
    ("LOCAL_WORLD_SIZE", "torchrun"),
    ("SLURM_NTASKS_PER_NODE", "Slurm"),
    ("SLURM_TASKS_PER_NODE", "Slurm"),
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"),
    ("MPI_LOCALNRANKS", "MPICH/Intel MPI"),
    ("PMI_LOCAL_SIZE", "PMI"),
    ("PMIX_LOCAL_SIZE", "PMIx"),
    ("MV2_COMM_WORLD_LOCAL_SIZE", "MVAPICH"),
)
GPU_VARS: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
GPU_VAR_VENDOR = {"CUDA_VISIBLE_DEVICES": NVIDIA, "ROCR_VISIBLE_DEVICES": AMD, "HIP_VISIBLE_DEVICES": AMD}
# Every environment key numatune ever reads (launch from its own environment, audit from
# /proc/PID/environ, snapshot --pid keeps these and nothing else): never the rest of an environment.
# The runtime's own per-thread pinning (OpenMP places, GNU and Intel OpenMP affinity): audit's late-binding
# rule takes threads pinned this way for deliberate, not for threads that kept an old mask.
THREAD_AFFINITY_VARS: tuple[str, ...] = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")

ENV_KEYS: tuple[str, ...] = (
    *(k for k, _ in RANK_VARS),
    *(k for k, _ in SIZE_VARS),
    *GPU_VARS,
    "CUDA_DEVICE_ORDER",
    "SLURM_NODEID",
    "OMP_NUM_THREADS",
    *THREAD_AFFINITY_VARS,
    "RANK",
    "WORLD_SIZE",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    # the NIC variables launch --nic sets (a job's own choice is left alone; audit shows them)
    "UCX_NET_DEVICES",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
)

# The variables that tell one rank from another: a rank's workers (DataLoader, multiprocessing, compile workers)
# inherit them, so a descendant carrying the same values is a worker of that rank, not another rank.
RANK_IDENTITY_KEYS: tuple[str, ...] = (*(k for k, _ in RANK_VARS), "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                       "SLURM_JOB_ID", "SLURM_STEP_ID")


def rank_identity(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The rank variables of an environment (ENV_KEYS only, as audit reads /proc/PID/environ)."""
    return tuple((k, environ[k]) for k in RANK_IDENTITY_KEYS if k in environ)


_BDF = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
UUID = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]+$", re.IGNORECASE)


# -- PCI addresses ---------------------------------------------------------------------------------------
def normalize_bdf(text: str) -> str | None:
    """"18:00.0" → "0000:18:00.0"; None when the text is not a BDF."""
    m = _BDF.match(text.strip())
    if not m:
        return None
    domain = m.group(1) or "0000"
    return f"{domain.lower()}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def enumerated_by(var: str, gpus: Sequence[PciDevice]) -> list[PciDevice]:
    """The GPUs a runtime enumerates for its visible-devices variable: its vendor's only (all when no
    GPU of that vendor is known, e.g. a partial tree without vendor ids), in numatune's order."""
    vendor = GPU_VAR_VENDOR.get(var)
    return list(gpus) if vendor is None else runtime_devices(vendor, gpus)


# -- rank ------------------------------------------------------------------------------------------------
def local_rank(env: Mapping[str, str]) -> tuple[int | None, str | None, str | None]:
    """(rank, variable, launcher) from the first launcher variable set; a value that is not a
    non-negative integer is an error (a launcher bug to report, not to guess around)."""
    for key, who in RANK_VARS:
        value = env.get(key)
        if value is None or value.strip() == "":
            continue
        index = _index(value)
        if index is None:
            raise BindingError(f"{key}={_shown(value)} is not a non-negative integer")
        return index, key, who
    return None, None, None


LOCAL_RANK_ARGS = ("--local-rank", "--local_rank")  # how torch.distributed.launch and deepspeed pass it to a rank


def local_rank_arg(argv: Sequence[str]) -> int | None:
    """The local rank a launcher passed on the command line (`--local-rank=N`, `--local_rank N`: torch.distributed
    .launch without --use-env, deepspeed's launcher), else None (a malformed value too: audit never fails on it)."""
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in LOCAL_RANK_ARGS:
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            return _index(value)
    return None


def _index(value: str) -> int | None:
    """A non-negative decimal integer in ASCII digits (numbers.MAX_DIGITS at most: a variable read from
    another process's environment may hold anything), else None."""
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS:
        return int(text)
    return None


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value)} characters)"


# -- GPU -------------------------------------------------------------------------------------------------
def match_uuid(entry: str, gpus: Sequence[PciDevice], var: str) -> PciDevice:
    """A GPU by UUID or unique UUID prefix (as CUDA accepts them); MIG instances have no PCI function."""
    if entry.upper().startswith("MIG-"):
        raise BindingError(f"{var} entry {entry}: MIG instances cannot be mapped to a PCI device; pass --gpu BDF")
    known = [d for d in gpus if d.nvidia and d.nvidia.uuid]
    if not known:
        raise BindingError(
            f"{var} entry {entry} is a UUID but no GPU UUIDs are known "
            "(no /proc/driver/nvidia/gpus/*/information and no NVML): pass --gpu BDF or use indices"
        )
    hits = [d for d in known if d.nvidia.uuid.lower().startswith(entry.lower())]
    if len(hits) != 1:
        raise BindingError(f"{var} entry {entry} matches {len(hits)} GPUs")
    return hits[0]


def resolve_entry(entry: str, gpus: Sequence[PciDevice], var: str) -> PciDevice:
    """One entry of a visible-devices list: an index into `gpus`, or a UUID."""
    entry = entry.strip()
    index = _index(entry)
    if index is not None:
        if index >= len(gpus):
            raise BindingError(f"{var} names GPU {index} but this root has {len(gpus)} such GPU(s)")
        return gpus[index]
    if UUID.match(entry):
        return match_uuid(entry, gpus, var)
    raise BindingError(f"{var} entry {_shown(entry)} is neither an index nor a GPU UUID")


def visible_devices(
    env: Mapping[str, str], gpus: Sequence[PciDevice]
) -> tuple[str | None, list[PciDevice] | None, bool]:
    """(variable, the GPUs it makes visible in order, whether any entry was a UUID); (None, None, False)
    when no visible-devices variable is set.

    CUDA stops enumerating at the first entry that is not a visible device ("0,-1,2" is GPU0 alone). On
    AMD GPUs ROCm applies ROCR_VISIBLE_DEVICES first and HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES,
    which HIP honours) indexes into what it left: the second variable is returned, its GPUs chained."""
    if _rocr_first(env, gpus):
        second = next((v for v in _AFTER_ROCR if env.get(v) is not None), None)
        if second is not None:
            pool, rocr_uuids = _listed(env, "ROCR_VISIBLE_DEVICES", enumerated_by("ROCR_VISIBLE_DEVICES", gpus))
            chosen, uuids = _listed(env, second, pool)
            return second, chosen, rocr_uuids or uuids
    for var in GPU_VARS:
        if env.get(var) is not None:
            visible, uuids = _listed(env, var, enumerated_by(var, gpus))
            return var, visible, uuids
    return None, None, False


#: The variables ROCm reads after ROCR_VISIBLE_DEVICES, as indices into what it left visible.
_AFTER_ROCR = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def _rocr_first(env: Mapping[str, str], gpus: Sequence[PciDevice]) -> bool:
    """ROCR_VISIBLE_DEVICES is set and every GPU is AMD's: ROCm applies it before the others."""
    return env.get("ROCR_VISIBLE_DEVICES") is not None and bool(gpus) and \
        not any(d.vendor_id == NVIDIA for d in gpus)


def rocr_chained(env: Mapping[str, str], var: str | None, gpus: Sequence[PciDevice]) -> str:
    """"; an index into ROCR_VISIBLE_DEVICES=..." when visible_devices chained `var` after it, else ""."""
    if var in _AFTER_ROCR and _rocr_first(env, gpus):
        return f"; an index into ROCR_VISIBLE_DEVICES={env['ROCR_VISIBLE_DEVICES']} (ROCm applies it first)"
    return ""


def visible_entries(value: str, var: str) -> list[str]:
    """The entries of a visible-devices list, at most MAX_FIELDS of them (a value read from another process's
    environment may be 32 MiB of commas: 16 million pieces): more is BindingError."""
    try:
        parts = split(value, ",", var, MAX_FIELDS, "entries")
    except ParseError:
        raise BindingError(f"{var} lists more than {MAX_FIELDS:,} entries, more GPUs than any node holds") from None
    return [e.strip() for e in parts if e.strip()]


def _listed(env: Mapping[str, str], var: str, pool: Sequence[PciDevice]) -> tuple[list[PciDevice], bool]:
    value = env[var]
    entries = visible_entries(value, var)
    if not entries or entries[0] in ("-1", "NoDevFiles"):
        raise BindingError(f"{var}={_shown(value)} hides every GPU")
    if var == "CUDA_VISIBLE_DEVICES":  # enumeration stops at the first entry that names no device
        valid = 0
        for e in entries:
            if not (((i := _index(e)) is not None and i < len(pool)) or UUID.match(e)):
                break
            valid += 1
        if valid == 0:
            resolve_entry(entries[0], pool, var)  # the error that says why the first entry names nothing
        entries = entries[:valid]
    return [resolve_entry(e, pool, var) for e in entries], any(UUID.match(e) for e in entries)


def ordering_note(env: Mapping[str, str], gpus: Sequence[PciDevice], var: str | None) -> str:
    """What the index → GPU mapping assumes about the runtime's enumeration order."""
    if var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES") or (
            var is None and gpus and all(d.vendor_id == AMD for d in gpus)):
        amd = runtime_devices(AMD, gpus)
        unlisted, differs = amd_vs_pci(amd, first=gpus.index(amd[0]) if amd[0] in gpus else 0)
        if unlisted and all(d.amd_kfd_node is None for d in amd):
            return f"PCI bus order assumed: {unlisted}"
        said = ("ROCm enumerates GPUs in KFD topology node order (ROCr registers one GPU agent per KFD node, "
                "from node 0 up), " + (differs or "the same as PCI bus order here"))
        return said + (f"; {unlisted}" if unlisted else "")
    order = env.get("CUDA_DEVICE_ORDER")
    if order == "PCI_BUS_ID":
        return "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA indices follow PCI bus order"
    models = {(d.vendor_id, d.device_id) for d in gpus}
    if any(d.device_id is None for d in gpus):
        same = "; GPU models unknown, CUDA's default FASTEST_FIRST order may differ: set CUDA_DEVICE_ORDER=PCI_BUS_ID"
    elif len(models) == 1:
        same = f"; all {len(gpus)} are the same model, so CUDA's default FASTEST_FIRST order agrees"
    else:
        same = ("; the GPUs differ in model, so CUDA's default FASTEST_FIRST order may differ: "
                "set CUDA_DEVICE_ORDER=PCI_BUS_ID")
    shown = f"CUDA_DEVICE_ORDER={order}" if order else "CUDA_DEVICE_ORDER unset"
    return f"PCI bus order assumed ({shown}){same}"


def rank_gpu(
    env: Mapping[str, str], rank: int | None, devices: Sequence[PciDevice], local_size: int | None = None
) -> tuple[PciDevice, str, str, list[PciDevice]] | None:
    """The GPU of a local rank: (device, how it was found, ordering assumed, the GPUs of the node's ranks).

    None when nothing names one (no visible-devices variable and no rank). Raises BindingError when the
    environment names a GPU that cannot be (an index past the end, an unknown UUID, a rank past the list).
    """
    gpus, kind = gpu_order(devices)
    if not gpus:
        return None
    var, visible, uuids = visible_devices(env, gpus)
    if visible is not None:
        if len(visible) == 1:
            dev, pos = visible[0], 0
            in_use, note = _one_gpu_per_rank(gpus, dev, rank, local_size)
        elif rank is not None and rank < len(visible):
            dev, pos = visible[rank], rank
            in_use = visible[:local_size] if local_size else visible
            note = ""
        elif rank is None:
            raise BindingError(f"{var} lists {len(visible)} GPUs and no local rank says which one is used")
        else:
            raise BindingError(f"local rank {rank} but {var} lists {len(visible)} GPU(s)")
        entry = visible_entries(env[var], var)[pos]
        source = f"{var} entry {pos} ({entry}){rocr_chained(env, var, gpus)}{note}"
        ordering = "UUIDs name GPUs directly: no ordering assumed" if uuids else ordering_note(env, gpus, var)
        return dev, source, ordering, list(in_use)
    if rank is None:
        return None
    if rank >= len(gpus):
        raise BindingError(f"local rank {rank} but this root has {len(gpus)} {kind}(s) and no --gpu")
    in_use = gpus[:local_size] if local_size else gpus
    label = f"GPU{rank} of inspect" if kind == "gpu" else "in PCI bus order"  # inspect labels GPUs only
    return gpus[rank], f"local rank {rank} → {kind} {rank} ({label})", ordering_note(
        env, gpus, None), in_use


def _one_gpu_per_rank(gpus: Sequence[PciDevice], dev: PciDevice, rank: int | None,
                      local_size: int | None) -> tuple[list[PciDevice], str]:
    """The GPUs of the node's ranks when each sees only its own (Slurm's --gpus-per-task): assumed handed
    out in rank order from this one's place (task r holds the r-th of the job's GPUs), so ranks that each
    see one GPU split their node's cores the same way; GPU0.. when that cannot hold."""
    n = local_size or 1
    if n == 1:
        return [dev], ""
    first = gpus.index(dev) - rank if rank is not None and dev in gpus else -1
    if first >= 0 and first + n <= len(gpus):
        held = list(gpus[first:first + n])
        return held, (f"; one visible GPU per rank: the node's {n} rank(s) are assumed to hold "
                      f"GPU{first}-GPU{first + n - 1} of "
                      "inspect, in rank order (as Slurm hands GPUs to tasks)")
    return list(gpus[:n]), "; one visible GPU per rank: the other ranks' GPUs are assumed to be GPU0.. of inspect"


# -- cgroups ---------------------------------------------------------------------------------------------
# The kernel writes a /proc/PID/cgroup path into a PATH_MAX buffer and fails the read (ENAMETOOLONG) past it:
# a longer path is not one a kernel wrote (32,000 levels made a list of every parent directory, 1 GB).
PATH_MAX = 4096


def _cgroup_paths(text: str, where: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 cpuset controller's path) of /proc/PID/cgroup ("0::/x", "4:cpuset,cpu:/y")."""
    v2 = v1 = None
    for line in lines(text, where):
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            if v2 is None:
                v2 = parts[2]
        elif f",{parts[1]},".find(",cpuset,") >= 0 and v1 is None:  # the controllers, never split into a list
            v1 = parts[2]
    return v2, v1


def parse_cgroup(text: str, where: str = "/proc/PID/cgroup") -> str | None:
    """The v2 path ("0::/x"), else the v1 cpuset controller's path, from /proc/PID/cgroup."""
    v2, v1 = _cgroup_paths(text, where)
    return v2 if v2 is not None else v1


def cgroup_cpuset_dirs(text: str, where: str = "/proc/PID/cgroup") -> list[tuple[str, str, str]]:
    """Where a process's cpuset lives, innermost first: (directory, cpus file, mems file), for v2 and v1.

    Empty when the path leaves the hierarchy: inside a cgroup namespace /proc/PID/cgroup shows the
    outer process's cgroup as "/../x", which names no directory the reader may open; and for a path of
    PATH_MAX bytes or more, which no kernel writes (the directories are at most PATH_MAX / 2 levels).
    """
    v2, v1 = _cgroup_paths(text, where)
    out = []
    for path, base, cpus, mems in ((v2, "/sys/fs/cgroup", "cpuset.cpus.effective", "cpuset.mems.effective"),
                                   (v1, "/sys/fs/cgroup/cpuset", "cpuset.effective_cpus", "cpuset.effective_mems")):
        if path is None or len(path) >= PATH_MAX:
            continue
        rel = path.strip("/")
        if ".." in rel.split("/"):
            continue
        while True:
            out.append((f"{base}/{rel}".rstrip("/"), cpus, mems))
            if not rel:
                break
            rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return out
