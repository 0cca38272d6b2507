"""Guest machine set-up done once per boot, before the checks.

- NICs are brought up: their MSI vectors only appear in /proc/irq once the driver requests
  them (at `ip link set DEV up`), and the IRQ checks need them.
- CXL (QEMU 7.2 emulates persistent CXL memory only) is turned into system RAM the way an
  admin would: cxl create-region -> ndctl create-namespace -m devdax -> daxctl
  reconfigure-device --mode=system-ram. Debian's kernel auto-onlines hot-added memory, which
  makes daxctl abort, so auto_online_blocks is set to offline around the daxctl call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import vm_topology
from vm_guest import CheckFailed, read, run, wait_for

AUTO_ONLINE = Path("/sys/devices/system/memory/auto_online_blocks")


def bring_up_nics(topo: vm_topology.Topology, log: list[str]) -> list[str]:
    """`ip link set DEV up` for every PCI NIC; returns the interface names."""
    names = []
    for dev in sorted(Path("/sys/class/net").iterdir()):
        if not (dev / "device").exists():
            continue
        names.append(dev.name)
        log.append(run(["ip", "link", "set", dev.name, "up"]).summary())
    wait_for(lambda: all(list((Path("/sys/class/net") / n / "device" / "msi_irqs").glob("*")) for n in names), 10)
    return names


def _json(text: str) -> Any:
    text = text.strip()
    return json.loads(text) if text else []


def cxl_to_system_ram(topo: vm_topology.Topology, log: list[str]) -> dict[str, Any]:
    """Create a region over every memdev (interleaved when there are several) and online it as a new
    CPU-less NUMA node; return the chain."""
    assert topo.cxl is not None
    mems = [f"mem{i}" for i in range(topo.cxl.devices)]
    run(["modprobe", "-a", "cxl_acpi", "cxl_pci", "cxl_mem", "cxl_pmem", "cxl_port", "dax_pmem", "kmem"])
    if not wait_for(lambda: all(Path(f"/sys/bus/cxl/devices/{m}").exists() for m in mems), 30):
        raise CheckFailed(f"not all of {mems} in /sys/bus/cxl/devices after 30 s "
                          "(cxl_pci failed to probe? pcie_ports=compat missing?)")
    run(["udevadm", "settle", "-t", "20"])
    decoders = _json(run(["cxl", "list", "-D", "-d", "root"], check=True).stdout)
    log.append(f"root decoders: {decoders}")
    root = next((d["decoder"] for d in decoders if d.get("pmem_capable")), None) or decoders[0]["decoder"]
    ways = ["-w", str(len(mems))] + (["-g", str(topo.cxl.granularity)] if len(mems) > 1 else [])
    res = run(["cxl", "create-region", "-m", "-d", root, "-t", "pmem", *ways, *mems], check=True)
    log.append(res.summary())
    region = _json(res.stdout)
    region_name = region.get("region") if isinstance(region, dict) else None
    res = run(["ndctl", "create-namespace", "-m", "devdax"], check=True)
    log.append(res.summary())
    namespace = _json(res.stdout)
    dax = namespace.get("daxregion", {}).get("devices", [{}])[0].get("chardev", "dax0.0")
    saved = read(AUTO_ONLINE, "")
    try:
        if saved:
            AUTO_ONLINE.write_text("offline")
        res = run(["daxctl", "reconfigure-device", "--mode=system-ram", dax], check=True)
        log.append(res.summary())
    finally:
        if saved:
            AUTO_ONLINE.write_text(saved)
    target = int(read(f"/sys/bus/dax/devices/{dax}/target_node", "-1"))
    chain = {"memdev": mems[0] if len(mems) == 1 else mems, "root_decoder": root, "region": region_name,
             "dax": dax, "node": target, "namespace": namespace.get("dev")}
    log.append(f"cxl chain: {chain}")
    return chain
