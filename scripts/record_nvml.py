"""Record what NVML says about every NVIDIA GPU of this node, as plain JSON (one file).

NVLink, NVSwitch fabric state, GPU UUIDs and the compute processes on each GPU are not in sysfs;
NVML (the `nvidia-ml-py` package, module `pynvml`) is where nvidia-smi reads them. This script
writes NVML's answers as they came (an unsupported query is kept as its error text, never
guessed), so the answers of a real machine can be kept as a fixture and replayed by tests.

Usage: python3 scripts/record_nvml.py > nvml.json   (needs the NVIDIA driver and pynvml)
"""

from __future__ import annotations

import ctypes
import json
import sys

FORMAT = "numatune.nvml-record/1"
MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper/Blackwell (12 on Ampere); absent links answer "Not Supported"


def _call(fn, *args):  # noqa: ANN001, ANN202 - pynvml is untyped
    """NVML's answer, or {"error": text} for a query this GPU or driver does not support."""
    try:
        value = fn(*args)
    except Exception as exc:  # pynvml raises NVMLError subclasses per return code
        return {"error": str(exc) or type(exc).__name__}
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return value


def _pci(info) -> dict | None:  # noqa: ANN001
    if isinstance(info, dict):  # an error
        return info
    bus_id = info.busId.decode() if isinstance(info.busId, bytes) else info.busId
    return {"bus_id": bus_id, "device_id": info.pciDeviceId, "subsystem_id": info.pciSubSystemId}


def _cpus(mask):  # noqa: ANN001, ANN202
    """NVML's CPU affinity (an array of 64-bit words) as a sorted list of CPU ids."""
    if isinstance(mask, dict):
        return mask
    return [word_index * 64 + bit for word_index, word in enumerate(mask) for bit in range(64) if int(word) >> bit & 1]


def _fabric(nvml, h) -> dict:  # noqa: ANN001
    """NVSwitch fabric registration (Hopper and newer); pynvml's call shape differs between releases."""
    # (function, struct, version constant): the versioned call wants the struct's version field set.
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
        return {"state": int(info.state), "status": int(info.status),
                "cluster_uuid": bytes(info.clusterUuid).hex(), "clique_id": int(info.cliqueId)}
    return last


def record(nvml) -> dict:  # noqa: ANN001 - the pynvml module
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
                    "remote_device_type": _call(getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType",
                                                        lambda *_: {"error": "not in this pynvml"}), h, link),
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
                "numa_node": _call(getattr(nvml, "nvmlDeviceGetNumaNodeId", lambda *_: {"error": "not in this pynvml"}),
                                   h),
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


def main() -> int:
    try:
        import pynvml
    except ImportError:
        print("record_nvml: pynvml (nvidia-ml-py) is not installed", file=sys.stderr)
        return 7
    try:
        data = record(pynvml)
    except pynvml.NVMLError as exc:
        print(f"record_nvml: NVML unavailable: {exc}", file=sys.stderr)
        return 7
    json.dump(data, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
