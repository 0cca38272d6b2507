"""NUMATUNE_BINDING: the record launch and bind() leave for the processes they start, read back (pure)."""

from __future__ import annotations

import pytest

from numatune.model.launch import MPOL_BIND, MPOL_INTERLEAVE, CpuBind, MemPolicy
from numatune.plan.inherited import (
    VARIABLE,
    Inherited,
    format_record,
    holding,
    parse_record,
    plan_record,
    relation,
    within_memory,
)
from tests.plan.test_launch import plan

LAUNCHED = Inherited("launch", 578, 0, frozenset(range(6)), "bind", frozenset({0}))


def test_a_record_reads_back_as_written():
    line = format_record("launch", 578, 0, range(6), "bind", [0])
    assert line == "1 by=launch pid=578 node=0 cpus=0-5 mem=bind mems=0"
    assert parse_record(line) == (LAUNCHED, "")
    unbound_cpus = format_record("bind", None, None, (), "interleave", [0, 1])
    assert unbound_cpus == "1 by=bind pid=- node=- cpus=- mem=interleave mems=0-1"
    rec, _ = parse_record(unbound_cpus)
    assert (rec.cpus, rec.mems, rec.node, rec.pid) == (frozenset(), frozenset({0, 1}), None, None)


def test_unknown_keys_are_skipped_and_the_first_of_a_repeated_key_counts():
    rec, why = parse_record("1 later=field by=launch cpus=2 cpus=9 mem=none future")
    assert why == "" and rec.cpus == frozenset({2}) and rec.mem == "none"


@pytest.mark.parametrize(("text", "why"), [
    ("", "is empty"),
    ("2 by=launch cpus=0", "version '2': this numatune reads version 1"),
    ("1 by=someone cpus=0", "by='someone': expected launch or bind"),
    ("1 by=launch cpus=0-x", "NUMATUNE_BINDING: "),
    ("1 by=launch cpus=0-4000000000", "NUMATUNE_BINDING: "),  # bounded: no list of four billion CPUs
    ("1 by=launch mems=5000 mem=bind", "NUMATUNE_BINDING: "),  # beyond MAX_NUMNODES
    ("1 by=launch pid=-3 cpus=0", "'-3' is not a number"),
    ("1 by=launch pid=" + "9" * 60 + " cpus=0", "is not a number"),
    ("1 by=launch cpus=- mem=none", "records no binding"),
    ("1 by=launch cpus=0 " + "x" * 5000, "characters long"),
])
def test_a_value_numatune_did_not_write_is_refused_with_the_reason(text, why):
    rec, said = parse_record(text)
    assert rec is None and why in said and said.startswith(VARIABLE)


def test_a_record_holds_while_the_process_runs_within_its_cpus():
    env = {VARIABLE: "1 by=launch pid=578 node=0 cpus=0-5 mem=bind mems=0"}
    assert holding(env, {2, 3}) == (LAUNCHED, "")  # narrowed since: still within
    assert holding(env, None) == (LAUNCHED, "")  # not checked (a saved root)
    rec, why = holding(env, range(16))  # widened since, or the variable reached another machine
    assert rec is None and why.endswith("6-15 outside it: ignored") and "CPUs 0-15" in why
    assert holding({}, range(16)) == (None, "")
    assert holding({VARIABLE: "junk"}, {0}) == (None, "NUMATUNE_BINDING version 'junk': this numatune reads "
                                                     "version 1: ignored")


@pytest.mark.parametrize(("cpus", "mems", "want"), [
    (range(6), [0], "same"),
    ((), (), "same"),  # cpu_bind and mem_policy none: left as they are
    ([0, 1], [0], "narrows"),
    (range(16), [0], "widens"),
    ([4, 5, 6], (), "widens"),
    (range(8, 16), [1], "moves"),
    ([0, 1], [1], "moves"),  # the memory moves while the CPUs narrow: the worse counts
    ([0], [0, 1], "widens"),
])
def test_relation_to_the_inherited_binding(cpus, mems, want):
    assert relation(LAUNCHED, cpus, mems) == want


def test_a_record_without_cpus_is_narrowed_by_any_mask():
    rec = Inherited("launch", None, 0, frozenset(), "bind", frozenset({0}))
    assert relation(rec, [3], [0]) == "narrows"


def test_memory_outside_the_record_keeps_the_records_policy():
    assert within_memory(LAUNCHED, MemPolicy("bind", MPOL_BIND, (0,))) == (MemPolicy("bind", MPOL_BIND, (0,)), "")
    kept, why = within_memory(LAUNCHED, MemPolicy("interleave", MPOL_INTERLEAVE, (0, 1)))
    assert kept == MemPolicy("bind", MPOL_BIND, (0,))
    assert why.startswith("memory: interleave 0-1 would reach outside the binding numatune launch gave pid 578")
    assert within_memory(LAUNCHED, MemPolicy("none", None)) == (MemPolicy("none", None), "")


def test_launchs_record_of_a_plan():
    p = plan("handmade-launch-2s4gpu-cxl", {"LOCAL_RANK": "2"}, cpu_bind=CpuBind("cores", 2))
    line = plan_record(p, "launch", 4242)
    rec, _ = parse_record(line)
    assert rec == Inherited("launch", 4242, p.node, frozenset(p.cpus), "bind", frozenset({p.node}))
    assert len(p.cpus) == 4 and p.node == 1  # two cores of the third GPU's node, SMT siblings kept
    assert plan_record(p._replace(unbound=True), "launch", 1) is None
    assert plan_record(p._replace(cpus=(), memory=MemPolicy("none", None)), "launch", 1) is None
