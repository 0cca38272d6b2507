"""NVLink domains (multi-node NVLink, GB200/GB300 NVL72): what NVML's fabric info says and how numatune reads it.

NVML's `nvmlGpuFabricInfo_v3_t` gives each GPU the UUID of its NVLink cluster (`clusterUuid`, 16 bytes), a
clique id (`cliqueId`), the registration `state` and `status`, a `healthMask` and a `healthSummary`;
`nvmlGpuFabricInfo_v4_t` replaces the one clique id with a list of (type, id) cliques. A domain -- the GPUs a
job may span over NVLink -- is (cluster UUID, clique id), never the clique alone: unrelated racks report the
same sentinel clique 32766 under different cluster UUIDs (meta-pytorch/torchcomms#3612).

The health mask's layout is nvml.h's (NVML_GPU_FABRIC_HEALTH_MASK_*; the same in nvidia-ml-py and the Rust
nvml bindings): 2-bit fields at bits 0 (degraded bandwidth), 2 (route recovery in progress), 4 (route
unhealthy) and 6 (access-timeout recovery in progress), each 0 = not supported, 1 = true, 2 = false; and a
4-bit field at bit 8 (incorrect configuration): 0 not supported, 1 none, 2 incorrect SysGUID, 3 incorrect
chassis serial number, 4 no partition, 5 insufficient NVLinks, 6 incompatible GPU firmware, 7 invalid
location. So 0xaa (the mask quoted in NVIDIA/nccl#2186) decodes as "false" in every 2-bit field: healthy
by the mask alone. Pure: nothing here reads anything.
"""

from __future__ import annotations

SENTINEL_CLIQUE = 32766  # the clique id unrelated racks share (torchcomms#3612): meaningful only with its UUID
ZERO_UUID = "0" * 32

# (field name, shift, mask, {value: meaning}); a 2-bit field's 1 is "true" (the problem is there), 2 "false".
_FLAG = {0: "not supported", 1: "true", 2: "false"}
HEALTH_FIELDS = (
    ("degraded_bandwidth", 0, 0x3, _FLAG),
    ("route_recovery", 2, 0x3, _FLAG),
    ("route_unhealthy", 4, 0x3, _FLAG),
    ("access_timeout_recovery", 6, 0x3, _FLAG),
    ("incorrect_configuration", 8, 0xF, {0: "not supported", 1: "none", 2: "incorrect SysGUID",
                                          3: "incorrect chassis serial number", 4: "no partition",
                                          5: "insufficient NVLinks", 6: "incompatible GPU firmware",
                                          7: "invalid location"}),
)
HEALTH_SUMMARY = {0: "not supported", 1: "healthy", 2: "unhealthy", 3: "limited capacity"}
# What each field's "true" (or a configuration error) means, for messages.
PROBLEM = {
    "degraded_bandwidth": "degraded bandwidth (NVLink paths down)",
    "route_recovery": "route recovery in progress",
    "route_unhealthy": "route unhealthy",
    "access_timeout_recovery": "access-timeout recovery in progress",
}


def decode_health(mask: int | None) -> dict[str, str]:
    """The health mask's named fields (field -> meaning); {} for an unknown mask. A value nvml.h does not name
    is kept as its number ("value 3")."""
    if mask is None or mask < 0:
        return {}
    out = {}
    for name, shift, width, names in HEALTH_FIELDS:
        value = (mask >> shift) & width
        out[name] = names.get(value, f"value {value}")
    return out


def health_problems(mask: int | None, summary: str | None = None) -> list[str]:
    """What is wrong by the mask and summary, in words ([] when nothing is, or nothing is known)."""
    fields = decode_health(mask)
    out = [PROBLEM[name] for name in PROBLEM if fields.get(name) == "true"]
    config = fields.get("incorrect_configuration")
    if config not in (None, "not supported", "none"):
        out.append(f"incorrect configuration: {config}")
    if summary in ("unhealthy", "limited capacity") and not out:
        out.append(f"health summary {summary}")
    return out


def dashed_uuid(hex32: str | None) -> str | None:
    """A cluster UUID as 32 hex digits -> the 8-4-4-4-12 form the GPU operator's labels write; else None."""
    if not hex32 or len(hex32) != 32 or any(c not in "0123456789abcdef" for c in hex32):
        return None
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


def domain_label(cluster_uuid: str | None, clique: int | None) -> str | None:
    """`<cluster UUID>.<clique>`: the value of the GPU operator's `nvidia.com/gpu.clique` label; None when the
    GPU is in no domain (no UUID, the zero UUID, or no clique)."""
    uuid = dashed_uuid(cluster_uuid)
    if uuid is None or cluster_uuid == ZERO_UUID or clique is None:
        return None
    return f"{uuid}.{clique}"


def domain_clique(clique_id: int | None, cliques: tuple[tuple[int, int], ...]) -> int | None:
    """The clique that names the domain: v3's cliqueId, else the first (lowest type) of v4's cliques."""
    if clique_id is not None:
        return clique_id
    return min(cliques)[1] if cliques else None
