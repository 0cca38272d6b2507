"""Fleet fingerprints and grouping (pure)."""

from __future__ import annotations

import copy

from numatune.analysis.fleet import NodeReport, fingerprint, group_fleet, round_gib, shape

DOC = {
    "schema": "numatune.inspect/1",
    "cpu": {"sockets": [0, 1], "threads_per_core": 2, "online": list(range(8))},
    "nodes": [
        {"id": 0, "cpus": [0, 1, 2, 3], "memory_total_kib": 528_000_000, "kind": "dram", "tier": 4,
         "distances": {"0": 10, "1": 21}},
        {"id": 1, "cpus": [4, 5, 6, 7], "memory_total_kib": 528_100_000, "kind": "dram", "tier": 4,
         "distances": {"0": 21, "1": 10}},
    ],
    "devices": [
        {"bdf": "0000:18:00.0", "kind": "gpu", "numa_node": 0},
        {"bdf": "0000:19:00.0", "kind": "nic", "numa_node": 0},
        {"bdf": "0000:98:00.0", "kind": "gpu", "numa_node": 1},
    ],
    "path_matrix": {"labels": ["GPU0", "GPU1", "NIC0"], "devices": ["0000:18:00.0", "0000:98:00.0", "0000:19:00.0"],
                    "cells": [["X", "SYS", "PIX"], ["SYS", "X", "SYS"], ["PIX", "SYS", "X"]]},
    "settings": {"release": "6.8.0"},
    "findings": [],
}


def test_round_gib():
    assert round_gib(int(503.7 * 1048576)) == "500 GiB"
    assert round_gib(int(15.6 * 1048576)) == "16 GiB"
    assert round_gib(int(0.37 * 1048576)) == "0.37 GiB"
    assert round_gib(0) == "0 GiB"
    assert round_gib(None) == "memory unknown"  # a tree without meminfo: unknown, not an empty node


def test_unknown_memory_is_shown_as_unknown_and_kept_apart_from_none():
    unknown = copy.deepcopy(DOC)
    unknown["nodes"][0]["memory_total_kib"] = None
    empty = copy.deepcopy(DOC)
    empty["nodes"][0]["memory_total_kib"] = 0
    assert "memory unknown" in shape(unknown)["node 0"] and "0 GiB" in shape(empty)["node 0"]
    assert "GiB" not in shape(unknown)["node 0"]
    assert fingerprint(shape(unknown)) != fingerprint(shape(empty))


def test_shape():
    s = shape(DOC)
    assert s["sockets"] == "2" and s["numa nodes"] == "2"
    assert s["node 0"] == "4 cpus, 500 GiB, dram, tier 4"
    assert s["distances"] == "10 21 / 21 10"
    assert s["gpus"] == "node 0: 1, node 1: 1" and s["nics"] == "node 0: 1"
    assert s["gpu nearest nic"] == "PIX x1, SYS x1"


def test_fingerprint_ignores_what_identical_nodes_differ_in():
    other = copy.deepcopy(DOC)
    other["nodes"][0]["memory_total_kib"] -= 300_000  # firmware reserving a little more
    other["settings"]["release"] = "5.15.0"
    other["devices"][0]["bdf"] = "0001:18:00.0"
    other["findings"] = [{"code": "NT005", "severity": "info", "message": "m"}]
    assert fingerprint(shape(other)) == fingerprint(shape(DOC))
    moved = copy.deepcopy(DOC)
    moved["devices"][1]["numa_node"] = 1
    assert fingerprint(shape(moved)) != fingerprint(shape(DOC))


def test_tie_is_noted():
    other = copy.deepcopy(DOC)
    other["cpu"]["threads_per_core"] = 1
    fleet = group_fleet([NodeReport("a", DOC), NodeReport("b", other)])
    assert not fleet.reference_is_majority and fleet.notes
    assert fleet.outliers == ("b",)
    assert fleet.groups[1].differs == (("threads per core", "2", "1"),)


def _with_kinds(doc, kinds):
    out = copy.deepcopy(doc)
    out["schema"] = "numatune.inspect/2"
    out["cpu_kinds"] = {"kinds": kinds, "grouped_by": [], "ranked_by": []}
    return out


def test_cpu_kinds_split_the_fingerprint_only_on_hybrid_nodes():
    """Same CPU count, different kinds: different fingerprints; one kind: the inspect/1 fingerprint is kept."""
    one = _with_kinds(DOC, [{"rank": 0, "role": "performance", "name": "Xeon", "cpus": list(range(8))}])
    assert fingerprint(shape(one)) == fingerprint(shape(DOC))
    hybrid = _with_kinds(DOC, [
        {"rank": 0, "role": "performance", "name": "Cortex-X925", "cpus": [4, 5, 6, 7]},
        {"rank": 1, "role": "efficiency", "name": "Cortex-A725", "cpus": [0, 1, 2, 3]},
    ])
    other = _with_kinds(DOC, [
        {"rank": 0, "role": "performance", "name": "Cortex-X925", "cpus": [0, 1]},
        {"rank": 1, "role": "efficiency", "name": "Cortex-A725", "cpus": [2, 3, 4, 5, 6, 7]},
    ])
    assert shape(hybrid)["cpu kinds"] == "4 Cortex-X925 (4-7) > 4 Cortex-A725 (0-3)"
    assert len({fingerprint(shape(d)) for d in (DOC, hybrid, other)}) == 3
    fleet = group_fleet([NodeReport(f"n{i}", d) for i, d in enumerate((hybrid, hybrid, other))])
    assert [len(g.nodes) for g in fleet.groups] == [2, 1] and fleet.outliers == ("n2",)
    assert fleet.groups[1].differs == (("cpu kinds", "4 Cortex-X925 (4-7) > 4 Cortex-A725 (0-3)",
                                        "2 Cortex-X925 (0-1) > 6 Cortex-A725 (2-7)"),)


def test_tally_memory_grows_per_node_by_a_name_not_a_report():
    """Streaming: 4,000 reports of two topologies leave ~a name and a few indexes per node, no documents."""
    import json
    import tracemalloc

    from numatune.analysis.fleet import FleetTally

    other = copy.deepcopy(DOC)
    other["cpu"]["threads_per_core"] = 1
    text = {0: json.dumps(DOC | {"findings": [{"code": "NT005", "severity": "info", "message": "m"}]}),
            1: json.dumps(other)}
    report_bytes = len(text[0])
    tally = FleetTally()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(4000):
            tally.add(f"n{i:05d}", json.loads(text[i % 3 == 0]))  # each report a fresh document, as when read
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert kept / 4000 < 120 < report_bytes  # a name (~55 bytes), its list slot and a few 4-byte indexes
    fleet = tally.result()
    assert fleet.total == 4000 and [len(g.nodes) for g in fleet.groups] == [2666, 1334]
    assert fleet.groups[0].findings[0].nodes[:2] == ("n00001", "n00002")
    assert tally.names[0] == "n00000" and fleet.groups[1].nodes[0] == "n00000"


def test_repeated_names_are_numbered():
    fleet = group_fleet([NodeReport("a", DOC), NodeReport("a", DOC), NodeReport("b", DOC)])
    assert fleet.groups[0].nodes == ("a", "a#2", "b")
