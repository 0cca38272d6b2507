"""Checks of the CXL switch machine: numatune's tree against ndctl's `cxl list` and sysfs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cxl_compare import CXL_LIST_COMMANDS, compare, compare_links
from vm_checks import Context, check
from vm_guest import CheckFailed, numatune, numatune_json, read, run

LINK_FILES = ("current_link_width", "current_link_speed", "max_link_width", "max_link_speed")


def _sysfs_links() -> dict[str, dict[str, str]]:
    out = {}
    for dev in Path("/sys/bus/pci/devices").iterdir():
        files = {f: read(dev / f, "") for f in LINK_FILES}
        if any(files.values()):
            out[dev.name] = {k: v for k, v in files.items() if v}
    return out


@check("cxl-switch")
def cxl_list_saved(ctx: Context) -> dict[str, Any]:
    """`cxl list` (memdevs, ports, endpoints, regions, decoders) saved for the fixture and the next check."""
    lists: dict[str, Any] = {}
    for key, argv in CXL_LIST_COMMANDS.items():
        res = run(argv, check=True)
        lists[key] = json.loads(res.stdout) if res.stdout.strip() else []
    lists["pci_links"] = _sysfs_links()
    (ctx.out / "cxl-list.json").write_text(json.dumps(lists, indent=1, sort_keys=True) + "\n")
    ctx.cxl_lists = lists
    return {"keys": sorted(lists)}


@check("cxl-switch")
def inspect_cxl_tree(ctx: Context) -> dict[str, Any]:
    """inspect --json's switch, links and 2-way interleave set are what `cxl list` and sysfs say; text shows them."""
    lists = ctx.cxl_lists or json.loads((ctx.out / "cxl-list.json").read_text())
    cxl = numatune_json("inspect", "--json", ok_codes=(0, 1)).get("cxl") or {}
    problems, facts = compare(cxl, lists)
    problems += compare_links(cxl, lists["pci_links"])
    if not facts["switches"]:
        problems.append("cxl list shows no switch port")
    if not any(r["ways"] == ctx.topo.cxl.devices for r in facts["regions"]):
        problems.append(f"no {ctx.topo.cxl.devices}-way region in cxl list: {facts['regions']}")
    text = numatune("inspect").stdout
    for sw in facts["switches"]:
        if f"{sw['port']}: switch" not in text:
            problems.append(f"inspect's text lacks '{sw['port']}: switch'")
    if f"{ctx.topo.cxl.devices}-way" not in text:
        problems.append(f"inspect's text lacks '{ctx.topo.cxl.devices}-way'")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nnumatune cxl: {json.dumps(cxl)[:3000]}")
    return facts
