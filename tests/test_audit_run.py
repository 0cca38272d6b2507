"""numatune.commands.audit used directly, without click: job targets of a real launcher, errors, --sample progress."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from numatune.analysis.locality import Thresholds
from numatune.commands.audit import AuditRun, prefetch_numa_maps
from numatune.errors import ProcessGone
from numatune.system.host import Host

# A launcher with two ranks (LOCAL_RANK 0 and 1), each touching 4 MiB.
PARENT = textwrap.dedent("""\
    import os, subprocess, sys
    rank = "import mmap, sys; m = mmap.mmap(-1, 4 << 20); m[::4096] = bytes(1024); print('ready', flush=True); " \\
           "sys.stdin.readline()"
    kids = [subprocess.Popen([sys.executable, "-c", rank], env=dict(os.environ, LOCAL_RANK=str(r)),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for r in range(2)]
    for k in kids:
        assert k.stdout.readline().strip() == "ready"
    print(" ".join(str(k.pid) for k in kids), flush=True)
    sys.stdin.readline()
    for k in kids:
        k.stdin.write("\\n"); k.stdin.flush(); k.wait()
""")


@pytest.fixture
def launcher():
    p = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    kids = [int(x) for x in p.stdout.readline().split()]
    yield p.pid, kids
    p.stdin.write("\n")
    p.stdin.flush()
    p.wait(timeout=20)


def test_children_targets_and_pass_of_a_real_launcher(launcher):
    parent, kids = launcher
    run = AuditRun(Host.open("/"), (parent,), True, (), Thresholds())
    pids, strict, job = run.targets()
    assert pids == kids and len(kids) == 2
    assert strict == set()  # a rank that exits mid-read is a note, not an error
    assert job == {"launchers": [parent], "ranks": []}

    audits, job, notes, helpers = run.run()
    assert [a.process.pid for a in audits] == kids
    assert [a.process.rank for a in audits] == [0, 1]
    assert job["ranks"] == [{"rank": r, "pid": pid, "helper_processes": 0, "workers": []}
                            for r, pid in enumerate(kids)]
    assert [a.role for a in audits] == ["rank", "rank"]
    assert helpers == {kids[0]: 0, kids[1]: 0}
    assert notes == []
    for a in audits:  # 4 MiB touched by each rank shows up in its numa_maps totals
        assert sum(a.process.memory.by_node.values()) >= 4 << 20


def test_plain_pids_are_strict_and_prefetched_maps_are_used(launcher):
    parent, kids = launcher
    host = Host.open("/")
    thread, maps = prefetch_numa_maps(host, tuple(kids))
    thread.join()
    assert set(maps) == set(kids) and all(maps.values())
    run = AuditRun(host, tuple(kids), False, (), Thresholds())
    assert run.targets() == (kids, set(kids), None)
    audits, job, notes, helpers = run.run(prefetched=maps)
    assert [a.process.pid for a in audits] == kids and job is None and helpers == {}
    assert [a.role for a in audits] == ["rank", "rank"]  # a role without the job view too


def test_missing_pid_and_unmatched_name_raise_numatune_errors():
    run = AuditRun(Host.open("/"), (2**22 + 1,), False, (), Thresholds())  # above pid_max's default ceiling
    with pytest.raises(ProcessGone, match="no process with PID"):
        run.run()
    run = AuditRun(Host.open("/"), (), False, ("no-such-command-*-xyz",), Thresholds())
    with pytest.raises(ProcessGone, match="no process matches --name"):
        run.run()


def test_sample_reports_progress_and_closes_it(launcher):
    _, kids = launcher
    calls: list[tuple[str, float, float]] = []
    run = AuditRun(Host.open("/"), (kids[0],), False, (), Thresholds())
    audits, _, _, _ = run.run(0.25, progress=lambda what, done, total: calls.append((what, done, total)))
    assert [a.process.pid for a in audits] == [kids[0]]
    assert calls[-1][1:] == (0.25, 0.25)  # the last call says the wait is over
    assert len(calls) >= 3 and all(0 <= done < total for _, done, total in calls[:-1])
    assert calls[0][0] in ("counting DRAM loads", "sampling NUMA-balancing faults")
    assert len({what for what, _, _ in calls}) == 1


def test_library_imports_neither_click_nor_rich():
    from tests.conftest import imports_of

    code = imports_of("import numatune.commands.audit", ("click", "rich"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=root)).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("shape", ["chain", "flat"])
def test_the_job_view_grows_linearly_with_the_job(tmp_path, shape):
    """`audit --ranks` of a job of N processes under a torchrun, a chain of workers (each the worker of the one
    before: the job tree walked up once per worker, 4,000 took 9.97 s) or flat: reading and placing grow as the job
    (the 1,000-6,000 figures: benchmarks/bench_jobtree.py)."""
    from tests.big_roots import job_archive
    from tests.limits import growth

    def make(n):
        return job_archive(tmp_path / f"{shape}-{n}.tar", n, shape)

    def audit(root):
        return AuditRun(Host.open(str(root)), (), False, (), Thresholds(), ranks=True).run()[0]

    audits = audit(make(12))
    assert [a.role for a in audits].count("launcher") == 1
    assert [a.role for a in audits].count("rank") == (1 if shape == "chain" else 12)
    assert growth(make, audit, 100) < 8
