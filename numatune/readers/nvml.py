"""NVML: the one place numatune asks the NVIDIA driver what sysfs does not say.

NVLink, NVSwitch fabric state, GPU UUIDs and the compute processes on each GPU come from NVML (the
`nvidia-ml-py` package, module `pynvml`; install `numatune[nvidia]`). `record` writes NVML's
answers as they came, as plain JSON (format `numatune.nvml-record/1`: an unsupported query is kept
as {"error": text}, never guessed); `snapshot` stores that record in the archive as
`/numatune/nvml.json`, and a saved root replays it, so a tree taken on a DGX shows its NVLinks
anywhere. pynvml and json are imported only when a root has NVIDIA GPUs.

`python3 -m numatune.readers.nvml > nvml.json` prints the record of this node (for fixtures).
"""

from __future__ import annotations

from numatune.errors import InputError, ParseError
from numatune.model.document import MAX_ID, Doc
from numatune.model.topology import FabricLink, GpuFabric, NvmlGpu, NvSwitchMember
from numatune.numbers import PID_MAX, maybe_int
from numatune.system.host import Host

FORMAT = "numatune.nvml-record/1"
SAVED = "/numatune/nvml.json"  # in a snapshot's root, beside sys/ and proc/

MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper/Blackwell (12 on Ampere); absent links answer "Not Supported"
NVLINK_DEVICE_SWITCH = 2  # nvmlIntNvLinkDeviceType_t: 0 GPU, 1 IBM NPU, 2 NVSwitch, 255 unknown
FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}
INSTALL_HINT = "install nvidia-ml-py (pip install 'numatune[nvidia]')"

_LIVE: dict | None = None
_LIVE_NOTE = ""


# -- recording (live) ---------------------------------------------------------------------------------
def _call(fn, *args):  # noqa: ANN001, ANN202 - pynvml is untyped
    """NVML's answer, or {"error": text} for a query this GPU or driver does not support."""
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 - pynvml raises an NVMLError subclass per return code
        return {"error": str(exc) or type(exc).__name__}
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return value


def _missing(*_args):  # noqa: ANN002, ANN202
    return {"error": "not in this pynvml"}


def _pci(info):  # noqa: ANN001, ANN202
    if isinstance(info, dict):  # an error
        return info
    bus_id = info.busId.decode() if isinstance(info.busId, bytes) else info.busId
    return {"bus_id": bus_id, "device_id": info.pciDeviceId, "subsystem_id": info.pciSubSystemId}


def _cpus(mask):  # noqa: ANN001, ANN202
    """NVML's CPU affinity (an array of 64-bit words) as a sorted list of CPU ids."""
    if isinstance(mask, dict):
        return mask
    return [word_index * 64 + bit for word_index, word in enumerate(mask) for bit in range(64) if int(word) >> bit & 1]


def _fabric_v4(nvml, h) -> dict | None:  # noqa: ANN001
    """nvmlGpuFabricInfo_v4 (driver 615+: the cliques list), where this pynvml has it; None to fall back to v3."""
    import ctypes

    struct, version = getattr(nvml, "c_nvmlGpuFabricInfo_v4_t", None), getattr(nvml, "nvmlGpuFabricInfo_v4", None)
    fn = getattr(nvml, "nvmlDeviceGetGpuFabricInfoV", None)
    if struct is None or version is None or fn is None:
        return None
    info = struct()
    info.version = version
    if isinstance(_call(fn, h, ctypes.byref(info)), dict):
        return None
    try:
        count = min(int(info.numCliques), len(info.cliques))
        cliques = [{"type": int(c.type), "id": int(c.id)} for c in info.cliques[:count]]  # ctypes integers
        return {"state": int(info.state), "status": int(info.status), "cluster_uuid": bytes(info.clusterUuid).hex(),
                "cliques": cliques, "health_mask": int(info.healthMask), "health_summary": int(info.healthSummary)}
    except (AttributeError, TypeError, ValueError):  # a pynvml whose v4 struct names its fields otherwise
        return None


def _fabric(nvml, h) -> dict:  # noqa: ANN001
    """NVSwitch fabric registration and NVLink domain (Hopper and newer); pynvml's call shape differs between
    releases: v4 (cliques), v3 (cliqueId, healthMask, healthSummary), v2 (healthMask), the unversioned call.

    The versioned call wants the struct's version field set and the struct by pointer: passed by value
    it crashed NVML on a real H100 (found by the lead's capture)."""
    import ctypes

    v4 = _fabric_v4(nvml, h)
    if v4 is not None:
        return v4

    shapes = (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t", "nvmlGpuFabricInfo_v3"),
              ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t", "nvmlGpuFabricInfo_v2"),
              ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t", None))
    last: dict = {"error": "not in this pynvml"}
    for name, struct_name, version in shapes:
        fn, struct = getattr(nvml, name, None), getattr(nvml, struct_name, None)
        if fn is None or struct is None or (version and not hasattr(nvml, version)):
            continue
        info = struct()
        if version:
            info.version = getattr(nvml, version)
        err = _call(fn, h, ctypes.byref(info))  # pynvml passes this argument through as a pointer
        if isinstance(err, dict):
            last = err
            continue
        out = {"state": int(info.state), "status": int(info.status),
               "cluster_uuid": bytes(info.clusterUuid).hex(), "clique_id": int(info.cliqueId)}
        for key, field in (("health_mask", "healthMask"), ("health_summary", "healthSummary")):
            if hasattr(info, field):  # v2 has the mask, v3 the summary too
                out[key] = int(info.healthMask) if field == "healthMask" else int(info.healthSummary)
        return out
    return last


def record(nvml) -> dict:  # noqa: ANN001 - the pynvml module
    """Every NVML answer numatune uses, for every GPU and GPU pair of this node."""
    nvml.nvmlInit()
    try:
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = []
        for index, h in enumerate(handles):
            links = []
            for link in range(MAX_LINKS):
                state = _call(nvml.nvmlDeviceGetNvLinkState, h, link)
                if isinstance(state, dict):
                    links.append({"link": link, "state": state})
                    continue
                links.append({
                    "link": link,
                    "state": "active" if state else "inactive",
                    "version": _call(nvml.nvmlDeviceGetNvLinkVersion, h, link),
                    "remote_pci": _pci(_call(nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2, h, link)),
                    "remote_device_type": _call(getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", _missing),
                                                h, link),
                })
            procs = _call(nvml.nvmlDeviceGetComputeRunningProcesses, h)
            if not isinstance(procs, dict):
                procs = [{"pid": p.pid, "used_gpu_memory": p.usedGpuMemory} for p in procs]
            mem = _call(nvml.nvmlDeviceGetMemoryInfo, h)
            fabric = _fabric(nvml, h)
            gpus.append({
                "index": index,
                "name": _call(nvml.nvmlDeviceGetName, h),
                "uuid": _call(nvml.nvmlDeviceGetUUID, h),
                "pci": _pci(_call(nvml.nvmlDeviceGetPciInfo_v3, h)),
                "numa_node": _call(getattr(nvml, "nvmlDeviceGetNumaNodeId", _missing), h),
                "cpu_affinity": _cpus(_call(nvml.nvmlDeviceGetCpuAffinity, h, 64)),
                "memory_total": mem if isinstance(mem, dict) else mem.total,
                "nvlinks": links,
                "fabric": fabric,
                "compute_processes": procs,
            })
        pairs = []
        for i in range(count):
            for j in range(i + 1, count):
                pairs.append({
                    "a": i, "b": j,
                    "common_ancestor": _call(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j]),
                    "p2p_read": _call(nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j],
                                      nvml.NVML_P2P_CAPS_INDEX_READ),
                    "p2p_nvlink": _call(nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j],
                                        nvml.NVML_P2P_CAPS_INDEX_NVLINK),
                })
        return {
            "format": FORMAT,
            "driver_version": _call(nvml.nvmlSystemGetDriverVersion),
            "cuda_driver_version": _call(nvml.nvmlSystemGetCudaDriverVersion),
            "nvml_version": _call(nvml.nvmlSystemGetNVMLVersion),
            "gpus": gpus,
            "pairs": pairs,
        }
    finally:
        nvml.nvmlShutdown()


def live_record() -> tuple[dict | None, str]:
    """This node's record (asked once per process: snapshot's runs share it), or None and why not."""
    global _LIVE, _LIVE_NOTE
    if _LIVE is None and not _LIVE_NOTE:
        try:
            import pynvml
        except ImportError:
            _LIVE_NOTE = f"NVML not available: {INSTALL_HINT}"
            return None, _LIVE_NOTE
        try:
            _LIVE = record(pynvml)
        except Exception as exc:  # noqa: BLE001 - NVMLError (no driver, library missing, permission)
            _LIVE_NOTE = f"NVML not available: {exc}"
        else:
            _LIVE_NOTE = "NVML (live)"
    return _LIVE, _LIVE_NOTE


def snapshot_bytes(host: Host) -> bytes | None:
    """What `snapshot` stores as SAVED: the live record as JSON, or a saved root's record as it is."""
    if not host.is_live:
        data = host.read_optional(SAVED)
        return data.encode() if data else None
    doc, _ = live_record()
    if doc is None:
        return None
    import json

    return (json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n").encode()


def load_record(host: Host) -> tuple[dict | None, str]:
    """A saved root's record (read through the Host), or None and why not."""
    text = host.read_optional(SAVED)
    if text is None:
        return None, f"no NVML record in this root ({SAVED}: take the snapshot with NVML installed)"
    from numatune.system.infile import load_document

    try:
        doc = load_document(text, SAVED)
    except InputError as exc:
        raise ParseError(SAVED, exc.message.removeprefix(f"{SAVED} ")) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("gpus"), list):
        raise ParseError(SAVED, f"not an NVML record of format {FORMAT}")
    return doc, f"NVML record saved in this root ({SAVED})"


# -- interpreting a record (pure) ------------------------------------------------------------------------
def nvml_bdf(bus_id: object) -> str | None:
    """NVML's "00000000:18:00.0" as sysfs writes it ("0000:18:00.0"); wider domains keep their digits."""
    if not isinstance(bus_id, str) or bus_id.count(":") != 2:
        return None
    domain, bus, rest = bus_id.strip().lower().split(":")
    value = maybe_int(domain, SAVED, base=16) if len(domain) <= 16 else None  # NVML writes 8 digits
    if value is None or value < 0:
        return None
    return f"{value:04x}:{bus}:{rest}"


def _answer(doc: Doc, key: str) -> Doc | None:
    """A record's answer to one query, or None when NVML did not give one: absent, or kept as {"error": text}
    (an unsupported query, never guessed)."""
    node = doc.at(key)
    value = node.value
    if value is None or (isinstance(value, dict) and "error" in value):
        return None
    return node


def _text(doc: Doc, key: str) -> str | None:
    """A string answer (a name, a UUID, a version), None when NVML gave none."""
    node = _answer(doc, key)
    return node.str() if node is not None else None


def fabric_from_record(record: dict | Doc, note: str, source: str) -> GpuFabric:
    """NVLink pairs (NV#), the GPUs on an NVSwitch fabric (one group, never its pairs), UUIDs, fabric state and
    compute processes. The record (live, or a saved root's: a document like any a user gives) is read through
    model.document: a field of another type than `record` writes is InputError naming it, never a Python error."""
    doc = record if isinstance(record, Doc) else Doc(record, SAVED)
    gpus: list[NvmlGpu] = []
    direct: dict[tuple[str, str], int] = {}
    to_switch: dict[str, int] = {}
    bdfs = {}
    records = doc.records("gpus")
    for g in records:
        pci = _answer(g, "pci")
        bdf = nvml_bdf(pci.mapping().scalar("bus_id")) if pci is not None else None
        if bdf is not None:
            bdfs[g.int("index", 0, MAX_ID)] = bdf
    known = set(bdfs.values())
    for g in records:
        bdf = bdfs.get(g.int("index", 0, MAX_ID))
        if bdf is None:
            continue
        active = 0
        links = _answer(g, "nvlinks")
        for link in links.records() if links is not None else ():
            state = _answer(link, "state")
            if state is None or state.scalar() != "active":
                continue
            active += 1
            remote = _answer(link, "remote_pci")
            peer = nvml_bdf(remote.mapping().scalar("bus_id")) if remote is not None else None
            kind = _answer(link, "remote_device_type")
            rtype = kind.int(lo=0, hi=MAX_ID) if kind is not None else None
            if rtype == NVLINK_DEVICE_SWITCH or (peer is not None and peer not in known and rtype != 0):
                to_switch[bdf] = to_switch.get(bdf, 0) + 1
            elif peer in known and peer != bdf:
                key = (min(bdf, peer), max(bdf, peer))
                direct[key] = direct.get(key, 0) + 1  # counted from both ends: halved below
        fabric = _answer(g, "fabric")
        fabric_state = fabric.mapping().int("state", 0, MAX_ID) if fabric is not None else None
        status = fabric.int("status", -(1 << 31), 1 << 32) if fabric is not None else None
        domain = _domain(fabric) if fabric is not None else {}
        procs = _answer(g, "compute_processes")
        numa = _answer(g, "numa_node")
        affinity = _answer(g, "cpu_affinity")
        gpus.append(NvmlGpu(
            index=g.int("index", 0, MAX_ID, default=len(gpus)),
            bdf=bdf,
            uuid=_text(g, "uuid"),
            name=_text(g, "name"),
            nvlinks_active=active,
            fabric_state=FABRIC_STATES.get(fabric_state, str(fabric_state)) if fabric_state is not None else None,
            fabric_status=("success" if status == 0 else f"NVML error {status}") if status is not None else None,
            processes=tuple(sorted(pid for p in procs.records() if (pid := p.int("pid", 0, PID_MAX)) is not None))
            if procs is not None else (),
            numa_node=node if numa is not None and (node := numa.int(lo=-1, hi=MAX_ID)) >= 0 else None,
            cpu_affinity=tuple(sorted(affinity.ints(lo=0, hi=MAX_ID))) if affinity is not None else (),
            **domain,
        ))
    links = [FabricLink(a, b, "nvlink", (n + 1) // 2, source=source) for (a, b), n in sorted(direct.items())]
    return GpuFabric(
        links=tuple(links),
        nvswitch=tuple(NvSwitchMember(bdf, n, source) for bdf, n in sorted(to_switch.items())),
        nvlink="nvml" if source == "nvml" else "saved",
        nvlink_note=note,
        nvml_gpus=tuple(sorted(gpus, key=lambda x: x.index)),
        driver_version=_text(doc, "driver_version"),
    )


def _domain(fabric: Doc) -> dict:
    """A GPU's NVLink domain fields (model.topology.NvmlGpu) from its record's "fabric" answer."""
    from numatune.model.nvfabric import HEALTH_SUMMARY, domain_clique, domain_label, health_problems

    f = fabric.mapping()
    uuid = f.str("cluster_uuid", most=64)
    uuid = uuid.lower() if uuid is not None and len(uuid) == 32 and all(c in "0123456789abcdefABCDEF" for c in uuid) \
        else None
    clique = f.int("clique_id", 0, (1 << 32) - 1)
    cliques = []
    for c in f.records("cliques", most=64):  # NVML_GPU_FABRIC_CLIQUE_MAX entries at most
        kind, ident = c.int("type", 0, 255), c.int("id", 0, (1 << 32) - 1)
        if kind is not None and ident is not None:
            cliques.append((kind, ident))
    mask = f.int("health_mask", 0, (1 << 32) - 1)
    summary_code = f.int("health_summary", 0, 255)
    summary = HEALTH_SUMMARY.get(summary_code, f"value {summary_code}") if summary_code is not None else None
    return {"cluster_uuid": uuid, "clique_id": clique, "cliques": tuple(sorted(cliques)), "health_mask": mask,
            "health_summary": summary, "domain": domain_label(uuid, domain_clique(clique, tuple(sorted(cliques)))),
            "health": tuple(health_problems(mask, summary))}


def read_nvidia_fabric(host: Host) -> GpuFabric:
    """NVLink facts for a root with NVIDIA GPUs: live NVML, else the saved record, else 'not visible'."""
    if host.is_live:
        doc, note = live_record()
        source = "nvml"
    else:
        doc, note = load_record(host)
        source = f"nvml record {SAVED}"
    if doc is None:
        return GpuFabric(nvlink="not visible", nvlink_note=note)
    return fabric_from_record(doc, note, source)


def main() -> int:
    """Print this node's NVML record (exit 7, unsupported, when NVML cannot be used)."""
    import json
    import sys

    from numatune.errors import ExitCode

    doc, note = live_record()
    if doc is None:
        print(f"numatune: {note}", file=sys.stderr)
        return ExitCode.UNSUPPORTED
    json.dump(doc, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
