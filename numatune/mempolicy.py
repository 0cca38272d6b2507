"""Linux uapi/linux/mempolicy.h: the memory-policy modes and flags, as numbers, in one place.

A leaf with no imports, at the bottom of the layers: the model's table of launch's policies
(numatune.model.launch) and the syscalls (numatune.system.memsys, which re-exports them) both read
them from here, so the model does not reach down into the syscall module for a constant.
"""

from __future__ import annotations

MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3
MPOL_LOCAL = 4
MPOL_PREFERRED_MANY = 5  # Linux 5.15
MPOL_WEIGHTED_INTERLEAVE = 6  # Linux 6.9

MODE_NAMES = {
    MPOL_DEFAULT: "default",
    MPOL_PREFERRED: "preferred",
    MPOL_BIND: "bind",
    MPOL_INTERLEAVE: "interleave",
    MPOL_LOCAL: "local",
    MPOL_PREFERRED_MANY: "preferred-many",
    MPOL_WEIGHTED_INTERLEAVE: "weighted-interleave",
}

# mode flags (or'ed into the mode of set_mempolicy/mbind)
MPOL_F_NUMA_BALANCING = 1 << 13
MPOL_F_RELATIVE_NODES = 1 << 14
MPOL_F_STATIC_NODES = 1 << 15
MPOL_MODE_FLAGS = MPOL_F_NUMA_BALANCING | MPOL_F_RELATIVE_NODES | MPOL_F_STATIC_NODES

# get_mempolicy flags
MPOL_F_NODE = 1 << 0  # return the node of addr (with MPOL_F_ADDR) or of the next interleave
MPOL_F_ADDR = 1 << 1  # the policy of the VMA holding addr
MPOL_F_MEMS_ALLOWED = 1 << 2  # the nodes this task may use (its cpuset)

# mbind / move_pages flags
MPOL_MF_STRICT = 1 << 0  # mbind: fail with EIO if pages are not on the policy's nodes (and cannot move)
MPOL_MF_MOVE = 1 << 1  # move pages mapped only by this process
MPOL_MF_MOVE_ALL = 1 << 2  # move shared pages too (CAP_SYS_NICE)
