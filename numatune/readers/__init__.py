"""Readers: Host -> model. Each module owns one subsystem; `read_topology` assembles them.

Pure `parse_*` functions take text; `read_*` functions take a Host. No reader imports click, rich,
psutil, pyudev or py-cpuinfo: those only enrich live runs, from `numatune.live.enrich`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from numatune.model.findings import Skipped
    from numatune.system.host import Host

NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # the NVIDIA driver's per-GPU directories (pci and topology read them)


def host_skipped(host: Host, already: tuple[Skipped, ...] = ()) -> tuple[Skipped, ...]:
    """`already` plus what the Host noted while reading (files that exist but are unreadable, links
    leaving a saved root) and `already` lacks: how those notes reach every report."""
    from numatune.model.findings import Skipped

    extra = tuple(Skipped(path, reason) for path, reason in host.notes)
    return already + tuple(s for s in extra if s not in already)
