"""compare's run: one timed run of the user's command under one placement, as the command measured it
and the analysis judges it (numatune.analysis.compare)."""

from __future__ import annotations

from typing import NamedTuple

PENALTY = 0.15  # above this slowdown, placement matters (the standard advice)
PROOF_SHARE = 0.90  # a run whose own memory is less than this on the asked nodes is flagged
SPREAD_SHARE = 0.5  # interleave over n nodes: a run where some asked node holds under this x 1/n is flagged


class Run(NamedTuple):
    placement: str
    round: int  # -1 for warm-up
    seconds: float
    value: float  # what is compared: seconds, or the --metric figure
    status: int
    by_node: dict[int, int]  # own bytes per node at the largest sample
    samples: int  # numa_maps samples taken
    on_expected: float | None  # share of own memory on the expected nodes (None: not judged)
    spread: float | None = None  # interleave: n x the smallest asked node's share (1 even, 0 a node got none)
