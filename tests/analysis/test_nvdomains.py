"""A fleet's NVLink domains from the reports' gpu_fabric objects (analysis.nvdomains)."""

from __future__ import annotations

from numatune.analysis.nvdomains import DomainTally, drift, node_fabric
from numatune.plan.cluster import TopologyFile

U1, U2 = "1" * 32, "2" * 32


def _gpu(i: int, domain: str | None, state: str = "completed", health: list | None = None) -> dict:
    return {"index": i, "fabric_state": state, "fabric_status": "success", "domain": domain,
            "cluster_uuid": U1, "health": health or []}


def test_a_node_is_one_domain_or_says_why_not():
    ok = node_fabric("n1", {"nvml_gpus": [_gpu(0, "d1.1"), _gpu(1, "d1.1")]})
    assert ok.domain == "d1.1" and ok.problems == ()
    split = node_fabric("n2", {"nvml_gpus": [_gpu(0, "d1.1"), _gpu(1, "d2.1")]})
    assert split.domain is None and split.domains == ("d1.1", "d2.1")
    sick = node_fabric("n3", {"nvml_gpus": [_gpu(0, "d1.1", health=["route unhealthy"])]})
    assert sick.problems == ("GPU0 route unhealthy",)
    local = node_fabric("n4", {"nvml_gpus": [dict(_gpu(0, None), cluster_uuid="0" * 32)]})
    assert local.gpus == 0  # a node-local NVSwitch: no domain beyond the node, nothing wrong
    old = node_fabric("n5", {"nvml_gpus": [{"index": 0, "fabric_state": "completed", "fabric_status": "success",
                                           "cluster_uuid": U2, "clique_id": 7, "health_mask": 0x1A9}]})
    assert old.domain == "22222222-2222-2222-2222-222222222222.7" and "degraded" in old.problems[0]


def test_hostile_values_are_unknown_not_errors():
    for junk in (None, 3, "x", [], {"nvml_gpus": "x"}, {"nvml_gpus": [1, None, {"fabric_state": 5}]},
                 {"nvml_gpus": [{"fabric_state": "completed", "domain": ["x"], "health": "bad", "index": True}]}):
        node_fabric("n", junk)


def test_tally_and_drift():
    tally = DomainTally()
    for i in range(1, 4):
        tally.add(f"a{i}", {"nvml_gpus": [_gpu(0, "d1.1")]})
        tally.add(f"b{i}", {"nvml_gpus": [_gpu(0, "d2.1")]})
    tally.add("c1", {"nvml_gpus": []})
    fabric = tally.result()
    assert [d.healthy for d in fabric.domains] == [("a1", "a2", "a3"), ("b1", "b2", "b3")]
    assert fabric.no_domain == ("c1",)
    good = TopologyFile((("x", ("a1", "a2", "a3")), ("y", ("b1", "b2", "b3"))), (3, 6))
    assert drift(fabric, good) == ([], [])
    moved = TopologyFile((("x", ("a1", "a2", "a3", "b1")), ("y", ("b2", "b3", "c1"))), (3, 6))
    mismatches, _ = drift(fabric, moved)
    assert any(m.startswith("b1 is in block x") for m in mismatches)
    assert any(m.startswith("c1 is in block y") for m in mismatches)
    bad_sizes = TopologyFile(good.blocks, (3, 5))
    assert any("not the base 3 times a power of two" in m for m in drift(fabric, bad_sizes)[0])
