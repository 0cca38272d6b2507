"""launch where there is no GPU to find (issue 43): the local ranks spread over the nodes with CPUs, rank r of n on
node r·N/n, and the plan says why; on one node that node, "nothing else was possible". And sub-NUMA clustering
with fewer ranks on a socket than its clusters (issue 42): each rank gets one cluster, and the plan names the
socket mode."""

from __future__ import annotations

import json

import pytest

from numatune.model.launch import CpuBind
from numatune.plan.cores import physical_cores
from tests.conftest import fixture_root
from tests.plan.test_launch import load, plan

# CPU-only trees with several nodes (two sockets, an 8-node EPYC Naples, an Arm server with 2 nodes per package)
MULTI = ["vm-two-socket", "intel-xeon-L5640-2node", "x86_64-epyc_7451", "128arm-2pa2n8cluster4co"]
SNC4 = "handmade-snc4-8gpu"


def _cpu_nodes(name: str) -> list[int]:
    topo, devices = load(name)
    assert not [d for d in devices if d.kind in ("gpu", "accelerator")], f"{name} has a GPU"
    return [n.id for n in topo.nodes if n.cpus]


@pytest.mark.parametrize("name", MULTI)
@pytest.mark.parametrize("size", [1, 2, 3, 4, 8])
def test_ranks_spread_over_the_nodes_with_cpus(name, size):
    nodes = _cpu_nodes(name)
    topo, _ = load(name)
    per_node = -(-size // len(nodes))
    fits = all(len(physical_cores(topo, topo.node(n).cpus)) >= per_node for n in nodes)
    mode = "exclusive" if fits else "node"  # more ranks than a node's cores: exclusive is refused (exit 7)
    seen: dict[int, set[int]] = {}
    for rank in range(size):
        p = plan(name, {"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(size)}, cpu_bind=CpuBind(mode))
        want = nodes[rank * len(nodes) // size]
        assert p.node == want and p.gpu is None, (rank, p.reasons)
        assert p.spread is not None and p.spread.nodes == tuple(nodes) and p.spread.ranks == size
        assert set(p.cpus) <= set(topo.node(want).cpus) and p.memory.nodes == (want,)
        assert f"rank {rank} → node {want}" in p.spread.reason and p.spread.reason in p.notes
        if fits:
            assert not seen.get(want, set()) & set(p.cpus), "exclusive shares of one node overlap"
        seen.setdefault(want, set()).update(p.cpus)
    used = {nodes[r * len(nodes) // size] for r in range(size)}
    assert set(seen) == used and len(used) == min(size, len(nodes))  # as many nodes as ranks, up to all of them


def test_ranks_sharing_a_node_split_its_cores_and_say_so():
    nodes = _cpu_nodes("vm-two-socket")
    plans = [plan("vm-two-socket", {"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "4"}) for r in range(4)]
    assert [p.node for p in plans] == [nodes[0], nodes[0], nodes[1], nodes[1]]
    assert all(any(r.startswith("sharing: 2 rank(s) on node") for r in p.reasons) for p in plans)
    assert any("overlap" in w for w in plans[0].warnings)  # --cpu-bind node: the two share the node's CPUs


def test_one_node_is_bound_and_said_to_be_the_only_choice():
    assert _cpu_nodes("dev-1node-x86") == [0]
    p = plan("dev-1node-x86")
    assert p.node == 0 and p.cpus and p.memory.nodes == (0,)
    assert "only node with CPUs" in p.spread.reason and "nothing else was possible" in p.spread.reason


def test_without_a_local_world_size_one_rank_per_node_is_assumed():
    nodes = _cpu_nodes("x86_64-epyc_7451")
    for rank in (0, 3, 9):
        p = plan("x86_64-epyc_7451", {"LOCAL_RANK": str(rank)})
        assert p.node == nodes[rank % len(nodes)] and p.spread.ranks is None
        assert "one rank per node assumed" in p.spread.reason


def test_only_the_nodes_this_process_may_use():
    topo, _ = load("vm-two-socket")
    second = topo.nodes[1]
    p = plan("vm-two-socket", {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
             fkw={"allowed_cpus": frozenset(second.cpus), "allowed_source": "a cgroup"})
    assert p.node == second.id and p.spread.nodes == (second.id,) and "this process may use" in p.spread.reason


def test_a_gpu_or_a_node_asked_for_is_not_spread():
    assert plan("vm-two-socket", {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, node=0).spread is None
    assert plan("handmade-launch-2s4gpu-cxl", {"LOCAL_RANK": "1"}).spread is None


def test_the_cli_prints_the_reason_and_the_json_has_the_field(cli):
    root = str(fixture_root("vm-two-socket"))
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    text = cli("--root", root, "launch", "--dry-run", "--", "true", env=env)
    assert text.exit_code == 0 and "note: no GPU in this root: the 2 local rank(s) are spread" in text.stdout
    doc = json.loads(cli("--root", root, "launch", "--json", "--", "true", env=env).stdout)
    assert doc["spread"]["node"] == doc["node"] == _cpu_nodes("vm-two-socket")[1]
    assert doc["spread"]["ranks"] == 2 and doc["notes"] == [doc["spread"]["reason"]] and doc["gpu"] is None


def test_bind_spreads_as_launch_does():
    from numatune import bind

    root = str(fixture_root("vm-two-socket"))
    report = bind(dry_run=True, root=root, environ={"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert report.node == _cpu_nodes("vm-two-socket")[1] and report.plan.spread is not None
    assert report.to_dict()["plan"]["spread"]["node"] == report.node


# -- sub-NUMA clustering: fewer ranks on a socket than its clusters ---------------------------------------------
def _snc_sizes(node: int) -> tuple[int, int, int, int, tuple[int, ...]]:
    """(cores of `node`, cores of its socket, KiB of node, KiB of socket, the socket's nodes), from the tree."""
    topo, _ = load(SNC4)
    package = {c.id: c.package for c in topo.cpus}
    socket = [n for n in topo.nodes if n.cpus and package[n.cpus[0]] == package[topo.node(node).cpus[0]]]
    cores = len(physical_cores(topo, topo.node(node).cpus))
    socket_cores = len(physical_cores(topo, [c for n in socket for c in n.cpus]))
    return (cores, socket_cores, topo.node(node).memory_total_kib, sum(n.memory_total_kib for n in socket),
            tuple(n.id for n in socket))


def test_snc4_two_ranks_each_get_one_cluster_and_are_told_the_socket_mode():
    for rank in (0, 1):
        p = plan(SNC4, {"CUDA_VISIBLE_DEVICES": "0,4", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2"})
        cores, socket_cores, kib, socket_kib, socket = _snc_sizes(p.node)
        assert len(socket) > 1 and p.node in socket
        c = p.clusters
        assert c is not None and c.clustering == f"SNC-{len(socket)}" and c.nodes == socket and c.ranks == 1
        assert (c.cores, c.socket_cores, c.memory_kib, c.socket_memory_kib) == (cores, socket_cores, kib, socket_kib)
        assert c.options == ("--cpu-bind", "socket", "--mem-policy", "socket")
        assert f"{cores} of the socket's {socket_cores} cores" in c.reason
        assert "--cpu-bind socket --mem-policy socket gives it the whole socket's" in c.reason
        assert c.reason in p.notes


def test_snc4_says_only_what_still_limits_the_rank():
    env = {"CUDA_VISIBLE_DEVICES": "0,4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    assert plan(SNC4, env, cpu_bind=CpuBind("socket")).clusters.options == ("--mem-policy", "socket")
    assert plan(SNC4, env, mem_policy="socket").clusters.options == ("--cpu-bind", "socket")
    assert plan(SNC4, env, cpu_bind=CpuBind("socket"), mem_policy="socket").clusters is None
    assert plan(SNC4, env, cpu_bind=CpuBind("cores", 2)).clusters.options == ("--mem-policy", "socket")


def test_snc4_filled_or_unknown_says_nothing():
    assert plan(SNC4, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"}).clusters is None  # 4 ranks per socket
    assert plan(SNC4, {"LOCAL_RANK": "1"}).clusters is None  # how many share the socket is not known
    assert plan("vm-two-socket", {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}).clusters is None  # no clustering


def test_naples_dies_without_gpus_spread_and_clusters_together():
    p = plan("x86_64-epyc_7451", {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"})
    assert p.spread is not None and p.clusters is not None
    assert p.clusters.clustering == "4 dies per socket (EPYC Naples)"
    assert p.clusters.ranks == 1 and len(p.notes) == 2


def test_snc4_note_in_text_and_json(cli):
    root = str(fixture_root(SNC4))
    env = {"CUDA_VISIBLE_DEVICES": "0,4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    text = cli("--root", root, "launch", "--dry-run", "--", "true", env=env).stdout
    assert "note: SNC-4: socket 0 has 4 clusters" in text and "--mem-policy socket" in text
    doc = json.loads(cli("--root", root, "launch", "--json", "--", "true", env=env).stdout)
    assert doc["clusters"]["options"] == ["--cpu-bind", "socket", "--mem-policy", "socket"]
    assert doc["clusters"]["reason"] in doc["notes"]


@pytest.mark.parametrize("numa_as_socket", [False, True])
def test_emit_slurm_says_a_task_bound_by_node_gets_one_cluster(cli, numa_as_socket):
    extra = ["--numa-as-socket"] if numa_as_socket else []
    doc = json.loads(cli("--root", str(fixture_root(SNC4)), "emit", "slurm", "-f", "json", *extra).stdout)
    cores, socket_cores, *_ = _snc_sizes(0)
    note = next(n for n in doc["notes"] if n.startswith("SNC-4: 4 NUMA nodes per socket"))
    assert f"node 0 holds {cores} of socket 0's {socket_cores} cores" in note
    assert ("numa_node_as_socket" in note) if numa_as_socket else ("--cpu-bind socket --mem-policy socket" in note)
    plain = json.loads(cli("--root", str(fixture_root("handmade-launch-2s4gpu-cxl")), "emit", "slurm", "-f",
                           "json").stdout)
    assert not any("per socket" in n for n in plain["notes"])


def test_emit_kubelet_names_align_by_socket_on_snc_only(cli):
    text = cli("--root", str(fixture_root(SNC4)), "emit", "kubelet").stdout
    assert "# note: SNC-4: 4 NUMA nodes per socket" in text and "align-by-socket" in text
    assert "align-by-socket" not in cli("--root", str(fixture_root("vm-two-socket")), "emit", "kubelet").stdout
