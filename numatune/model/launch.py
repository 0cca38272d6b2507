"""What `numatune launch` decides: which rank, which GPU, which node, which CPUs, which memory policy.

Immutable records built by `plan/launch.py` from a Topology and the live facts gathered by `bind.py`,
consumed by the renderers and `bind.apply_plan`. They are `@record`s (numatune.model._record), not
frozen dataclasses or typing.NamedTuple, on purpose: launch runs in front of every rank, and a frozen
dataclass costs one exec per generated method, typing an import; see README, Performance.
Never mutate the shared empty-dict defaults.
"""

from __future__ import annotations

# Linux uapi/linux/mempolicy.h: defined once, in numatune.mempolicy (a leaf; system.memsys re-exports them)
from numatune.mempolicy import (
    MPOL_BIND,
    MPOL_INTERLEAVE,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)
from numatune.model._record import record

TYPE_CHECKING = False  # annotations only, as in model.topology
if TYPE_CHECKING:
    from collections.abc import Mapping

CPU_BIND_MODES = ("node", "socket", "exclusive", "core-complex", "cores:N", "none")
TORCH_MODES = ("node", "socket", "exclusive", "core-complex")  # torchrun --numa-binding's vocabulary
NIC_TRANSPORTS = ("rdma", "tcp")  # --nic-transport: what the job's NCCL/Gloo traffic uses
CPU_KIND_CHOICES = ("performance", "efficiency", "any")  # --cpu-kind: which CPU kinds a rank gets first
MEM_POLICIES = ("bind", "preferred", "preferred-many", "interleave", "weighted", "cxl-spill", "socket",
                "socket-interleave", "gpu-memory", "none")
METHODS = ("auto", "numactl", "taskset", "direct")

# policy name -> (MPOL_* mode, minimal kernel, numactl option, minimal numactl)
POLICY_SUPPORT: dict[str, tuple[int, tuple[int, int], str, str]] = {
    "bind": (MPOL_BIND, (2, 6), "--membind", "any"),
    "cxl-spill": (MPOL_BIND, (2, 6), "--membind", "any"),
    "socket": (MPOL_BIND, (2, 6), "--membind", "any"),
    "socket-interleave": (MPOL_INTERLEAVE, (2, 6), "--interleave", "any"),
    "gpu-memory": (MPOL_BIND, (2, 6), "--membind", "any"),
    "preferred": (MPOL_PREFERRED, (2, 6), "--preferred", "any"),
    "interleave": (MPOL_INTERLEAVE, (2, 6), "--interleave", "any"),
    "preferred-many": (MPOL_PREFERRED_MANY, (5, 15), "--preferred-many", "2.0.15"),
    "weighted": (MPOL_WEIGHTED_INTERLEAVE, (6, 9), "--weighted-interleave", "2.0.19"),
}


@record
class CpuBind:
    mode: str  # node | socket | exclusive | core-complex | cores | none
    cores: int | None = None  # for cores:N


@record
class LaunchOptions:
    """The user's choices, already parsed and validated for syntax."""

    rank: int | None = None
    local_size: int | None = None
    gpu: str | None = None
    node: int | None = None
    cpu_bind: CpuBind = CpuBind("node")
    reserve_cores: int = 0
    allow_isolated: bool = False
    mem_policy: str = "bind"
    mem_nodes: tuple[int, ...] | None = None
    weights: dict[int, int] | None = None
    via: str = "auto"
    best_effort: bool = False
    cpu_kind: str = "performance"  # performance | efficiency | any (see plan.launch.order_by_kind)
    nic: str = "none"  # none | auto | a NIC name (mlx5_0, ib0, eth2, a BDF): the rank's own NIC
    nic_transport: str = "rdma"  # rdma | tcp (tcp also exports NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME)


@record
class Numactl:
    path: str
    version: str | None  # "2.0.19" when `numactl --version` answers; else None
    preferred_many: bool  # --preferred-many in its usage text (numactl >= 2.0.15)
    weighted: bool  # --weighted-interleave in its usage text (numactl >= 2.0.19)


@record
class LaunchFacts:
    """What the plan needs to know about the process and node it runs on (gathered by bind.py)."""

    env: dict[str, str] = {}  # only the launcher keys in plan.ENV_KEYS
    allowed_cpus: frozenset[int] | None = None  # None: every online CPU (a saved root)
    allowed_source: str = "every online CPU of the root"
    # sched_getaffinity(0) alone, before the cgroup cpuset is applied (what torch.numa.binding reads);
    # None when not live or not read
    affinity_cpus: frozenset[int] | None = None
    allowed_mems: frozenset[int] | None = None
    isolated: frozenset[int] = frozenset()
    kernel: str | None = None  # release string
    numactl: Numactl | None = None
    taskset: str | None = None
    direct_ok: bool = True  # set_mempolicy syscall number known for this architecture
    current_weights: dict[int, int] = {}
    # Last-level-cache groups (the highest data/unified cache level's shared_cpu_list of each online CPU,
    # as torch.numa.binding reads them); () when not read or the tree has no cache information.
    cache_groups: tuple[frozenset[int], ...] = ()
    rdma_ports: dict[str, tuple[int, ...]] = {}  # RDMA device -> its verbs ports (only read for --nic)


@record
class NicChoice:
    """The rank's NIC: which, how near its GPU, and the variables that name it."""

    bdf: str
    rdma: str | None
    netdev: str | None
    path: str  # PIX | PXB | PHB | NODE | SYS | "named" (--nic NAME with no GPU to compare)
    source: str  # "nearest to GPU 0000:18:00.0 (PIX)", "--nic mlx5_3"
    shared_with: tuple[str, ...] = ()  # other GPUs in use whose nearest NIC is the same


@record
class TorchView:
    """What `torchrun --numa-binding=MODE` would give this rank (torch.numa.binding, PyTorch 2.9+)."""

    mode: str
    node: int | None
    cpus: tuple[int, ...]  # empty when it would fail
    same: bool
    error: str | None = None  # why torchrun would fail instead of binding
    because: tuple[str, ...] = ()  # why numatune differs


@record
class NodeSplit:
    """numatune's split of a rank's node among the ranks sharing it, for the torchrun comparison."""

    shares: Mapping[int, frozenset[int]]  # position of each rank sharing the node -> its CPUs
    usable: frozenset[int]  # the node's CPUs numatune may bind (allowed, not isolated, not reserved)
    reserved: frozenset[int]  # the CPUs --reserve-cores keeps out


@record
class RankInfo:
    rank: int
    rank_source: str  # "LOCAL_RANK=3" | "--rank" | "default (no launcher variable)"
    local_size: int | None
    size_source: str | None


@record
class GpuChoice:
    bdf: str
    kind: str
    pci_index: int | None  # position among the node's GPUs in PCI bus order
    index: int | None  # GPUi of inspect: position in numatune's one device order (model/order.py)
    source: str  # how it was chosen
    ordering: str | None  # the device ordering assumed, when indices were involved
    uuid: str | None = None
    numa_node: int | None = None
    inferred_node: int | None = None
    inferred_from: str | None = None


@record
class MemPolicy:
    policy: str  # one of MEM_POLICIES
    mode: int | None  # MPOL_* (None for "none")
    nodes: tuple[int, ...] = ()
    weights: dict[int, int] = {}  # weighted only
    weights_source: str | None = None  # "--weights" | "HMAT read bandwidth" | "kernel"


@record
class KindShare:
    """The rank's CPUs of one CPU kind (launch says which kind each rank got)."""

    rank: int  # the kind's rank, 0 = most performant
    role: str  # performance | efficiency | unranked
    name: str | None
    cpus: tuple[int, ...]


@record
class NodeSpread:
    """A launch without GPUs: the node's local ranks spread over its nodes with CPUs, rank r of n on node r·N/n
    (as CPU launchers such as torch.backends.xeon.run_cpu spread ranks over sockets and nodes)."""

    nodes: tuple[int, ...]  # the N nodes with CPUs this process may use, in id order
    ranks: int | None  # n, the local world size; None when no launcher variable gives it (one rank per node assumed)
    index: int  # this rank's node's position in `nodes`
    reason: str  # the sentence launch prints (stderr note, dry run)

    def node_of(self, rank: int) -> int:
        """The node of local rank `rank`."""
        count = len(self.nodes)
        return self.nodes[rank * count // self.ranks if self.ranks else rank % count]


@record
class ClusterShare:
    """Fewer local ranks on a socket than its sub-NUMA clusters (SNC, NPS): each is bound to one cluster's cores
    and memory. `options` are what give the rank the whole socket's instead."""

    clustering: str  # "SNC-4", "NPS4", "2 nodes per socket"
    socket: int
    nodes: tuple[int, ...]  # the socket's nodes with CPUs (its clusters)
    ranks: int  # the local ranks on the socket
    cores: int  # physical cores the rank is bound to (its cluster's, or its share of them)
    socket_cores: int
    memory_kib: int  # memory of the nodes the rank's policy allocates from, within the socket
    socket_memory_kib: int
    options: tuple[str, ...]  # ("--cpu-bind", "socket", "--mem-policy", "socket"), or the half that applies
    reason: str


@record
class LaunchPlan:
    rank: RankInfo
    gpu: GpuChoice | None
    node: int | None
    node_source: str
    cpu_mode: str
    cpus: tuple[int, ...]  # empty: no CPU binding
    memory: MemPolicy
    method: str  # numactl | taskset | direct | exec
    argv: tuple[str, ...]  # what is exec'd (for direct: the command itself, after the syscalls)
    command: tuple[str, ...]
    env: dict[str, str]  # variables set for the command (OMP_NUM_THREADS)
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    unbound: bool = False  # --best-effort fell back to an unbound run
    cpu_kinds: tuple[KindShare, ...] = ()  # the CPU kinds the rank's CPUs belong to (hybrid CPUs only)
    nic: NicChoice | None = None  # --nic: the rank's own NIC
    torch: TorchView | None = None  # torchrun --numa-binding's choice for the same rank and mode
    confined: str = ""  # "the allowed CPUs 3 (Slurm job 7 step 0's CPUs, ...)" when the process may not use them all
    spread: NodeSpread | None = None  # no GPU and no --node: the ranks spread over the nodes with CPUs
    clusters: ClusterShare | None = None  # fewer ranks on the socket than its clusters: one cluster each

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about a binding that is not an error: printed on stderr before the exec
        (--quiet silences them), in the dry run and as `notes` in JSON."""
        return tuple(x.reason for x in (self.spread, self.clusters) if x is not None)

