"""What may differ between a command run live and the same command on a fresh snapshot of that node.

The one list, used by the parity test on this machine (tests/cli/test_parity.py) and by the VM stage
(snapshot in the guest, replay on the host). Everything not named here must be equal.
Patterns are dotted paths into a JSON report; `*` is any list item or any key.
"""

from __future__ import annotations

import fnmatch
from typing import Any

# Where the report came from: differs by design. Live, inspect asks NVML; a snapshot replays the NVML record it
# saved, and says so: the note ("NVML (live)" / "NVML record saved in this root ...") and each NVLink's source
# ("nvml" / "nvml record /numatune/nvml.json") name the origin of the same answers.
ORIGIN = ("source", "live", "path_matrix.nvlink.note", "path_matrix.links.*.source", "path_matrix.nvswitch.*.source")
# Values that give the same answer from the other origin, compared as one: NVLink seen through NVML asked live
# ("nvml") or through its saved record ("saved"). A replay that lost the record ("not visible") still differs.
SAME_ANSWER = {"path_matrix.nvlink.state": {"saved": "nvml"}}
# Facts only a live node has: none left (irqbalance's process and numactl's version are kept in a snapshot).
LIVE_ONLY: tuple[str, ...] = ()
# Values that change by the second on a running node.
VOLATILE = (
    "nodes.*.memory_free_kib", "nodes.*.hugepages.*.free",  # inspect
    "devices.*.irqs.*.total", "devices.*.irqs.*.per_cpu", "devices.*.irqs.*.per_node",  # irq: counters
    "devices.*.irqs.*.remote_share",
    "processes.*.threads.*.cpu",  # audit: where a thread last ran
    "processes.*.access_counters.values",  # audit: NUMA hinting-fault counters
    "dram.budget_bytes", "dram.budget_source",  # plan-memory: the budget is the node's free memory now,
    "reasons",  # and its reasons name it (and, live, the calling thread that chose the node: dram.node is compared)
)
IGNORED = ORIGIN + LIVE_ONLY + VOLATILE
# Between two reads of a live process (not a snapshot, whose bytes stay put) its pages and threads move.
# Its run state (R/S) changes with the scheduler; its policies' byte counts with its pages.
MOVING = tuple(f"processes.*.{f}" for f in ("memory_by_node", "memory_by_kind", "memory_total", "mappings", "threads",
                                            "access_counters", "remote_bytes", "slow_tier_bytes", "state",
                                            "policies.*.bytes"))


def comparable(doc: Any, ignored: tuple[str, ...] = IGNORED, at: str = "") -> Any:
    """`doc` without the fields matching `ignored` (as dotted paths); a rendered `text` (emit's
    configuration files) names the source in its header, which is replaced by `<source>`."""
    if not at and isinstance(doc, dict) and isinstance(doc.get("text"), str) and isinstance(doc.get("source"), str):
        doc = {**doc, "text": doc["text"].replace(f" for {doc['source']}\n", " for <source>\n")}
    if isinstance(doc, dict):
        out = {}
        for key, value in doc.items():
            path = f"{at}.{key}" if at else str(key)
            if any(fnmatch.fnmatchcase(path, p) for p in ignored):
                continue
            out[key] = comparable(value, ignored, path)
        return out
    if isinstance(doc, list):
        return [comparable(v, ignored, f"{at}.{i}" if at else str(i)) for i, v in enumerate(doc)]
    same = SAME_ANSWER.get(at)
    return same.get(doc, doc) if same is not None and isinstance(doc, str) else doc


def differences(a: Any, b: Any, at: str = "") -> list[str]:
    """The dotted paths where two comparable documents differ, with both values (the assertion message
    of a parity test: a failure under load must say which field moved)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            path = f"{at}.{key}" if at else str(key)
            if key not in a or key not in b:
                out.append(f"{path}: only in {'second' if key not in a else 'first'}")
            else:
                out += differences(a[key], b[key], path)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, f"{at}.{i}" if at else str(i))]
    return [] if a == b else [f"{at or '.'}: {str(a)[:200]} != {str(b)[:200]}"]
