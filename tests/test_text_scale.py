"""Text reports cost about what their JSON costs (issue 41, point 4).

rich.table laid out every cell through its renderer (~100 µs a cell): `audit PID --mappings --min-size 0` on
40,000 mappings took 14-35 s in text against 0.5-0.8 s in JSON, `irq` on a 20,000-row /proc/interrupts 34 s
against 1.4 s. The roots are generated here (tests/big_roots.py); each command runs in a child process, and
the CPU time (user + system) of a text run is compared with that of the JSON run of the same input: a loaded
2-core machine stretches wall time far more than CPU time, and both runs alike.
"""

from __future__ import annotations

import os

import pytest

from numatune.model.process import MAX_LISTED_MAPPINGS
from tests.big_roots import PID, interrupts_root, mappings_root, ranks_root, threads_root
from tests.limits import Limited, run_limited

MAPPINGS, IRQ_ROWS, THREADS, RANKS = 40_000, 20_000, 5_000, 1_000
BOUND = 10  # CPU seconds, the promise's 10 s: these text runs took 1-3 s (rich.table: 4-35 s)
MIB = 1024  # the JSON of 40,000 mappings peaks at ~190 MB resident: time is what is measured here


def _run(*args: str, **env: str) -> Limited:
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    done = run_limited(*args, seconds=60, mib=MIB, env={**full, **env})
    assert done.returncode == 0, done.stderr[-300:]
    return done


def _within_3x(text: Limited, doc: Limited) -> None:
    assert text.cpu < BOUND, text.cpu
    assert text.cpu <= 3 * doc.cpu, (text.cpu, doc.cpu)


def _rows(text: Limited, start: str) -> list[str]:
    return [line for line in text.stdout.splitlines() if line.startswith(start)]


@pytest.fixture(scope="module")
def mappings(tmp_path_factory) -> tuple[tuple[str, ...], Limited]:
    """The audit of a 40,000-mapping process (its arguments) and its JSON run."""
    root = mappings_root(tmp_path_factory.mktemp("mappings"), MAPPINGS)
    args = ("--root", str(root), "audit", str(PID), "--mappings", "--min-size", "0")
    return args, _run(*args, "--json")


def test_a_40000_mapping_audit_prints_the_largest_within_3x_its_json(mappings):
    """The 16,384 largest mappings one line each (audit keeps no more: issue 47), the rest on one line that says so."""
    args, doc = mappings
    text = _run(*args)
    _within_3x(text, doc)
    rows = _rows(text, "│ 7f")
    assert len(rows) == MAX_LISTED_MAPPINGS and len({len(r) for r in rows}) == 1  # one line each, aligned
    rest = MAPPINGS - MAX_LISTED_MAPPINGS
    assert f"{rest} smaller mappings ({rest} past the {MAX_LISTED_MAPPINGS} largest, summed as read)" in text.stdout


def test_the_default_min_size_folds_and_says_what_it_folded(mappings):
    args, doc = mappings
    text = _run(*args[:-2])  # no --min-size: 1M
    _within_3x(text, doc)
    assert len(_rows(text, "│ 7f")) == MAPPINGS // 8  # the 1-16 MiB mappings; the rest on one line
    assert f"{MAPPINGS - MAPPINGS // 8} smaller mappings" in text.stdout


def test_a_40000_mapping_audit_on_a_colour_terminal_within_3x_its_json(mappings):
    """FORCE_COLOR: laid out for a 250-column terminal and written in colour (off-policy pages in bold red)."""
    args, doc = mappings
    text = _run(*args, FORCE_COLOR="1", COLUMNS="250")
    _within_3x(text, doc)
    assert "\x1b[1;31m" in text.stdout and len(_rows(text, "│ 7f")) == MAX_LISTED_MAPPINGS


def test_a_20000_row_interrupts_table_within_3x_its_json(tmp_path):
    args = ("--root", str(interrupts_root(tmp_path, IRQ_ROWS)), "irq")
    text = _run(*args)
    _within_3x(text, _run(*args, "--json"))
    assert sum("enp65s0-rx-" in line for line in text.stdout.splitlines()) == IRQ_ROWS


def test_a_process_of_5000_threads_within_3x_its_json(tmp_path):
    """Off a terminal every thread is listed (on one, the first 24)."""
    args = ("--root", str(threads_root(tmp_path, THREADS)), "audit", str(PID))
    text = _run(*args)
    _within_3x(text, _run(*args, "--json"))
    assert sum(" worker" in line for line in text.stdout.splitlines()) == THREADS - 1


def test_a_job_of_1000_ranks_within_3x_its_json(tmp_path):
    args = ("--root", str(ranks_root(tmp_path, RANKS)), "audit", "--ranks")
    text = _run(*args)
    _within_3x(text, _run(*args, "--json"))
    assert len([line for line in _rows(text, "│") if "python train.py" in line]) == RANKS
    assert f"{RANKS} rank(s), 0 worker(s)" in text.stdout  # the job view counts ranks (issue 40)
