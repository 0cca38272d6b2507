"""AMD XGMI from the KFD topology, checked against rocm-smi's rules on the real MI210 tree."""

from __future__ import annotations

import json

from numatune.model.paths import path_matrix
from numatune.readers.kfd import read_kfd, rocm_smi_topology, xgmi_count, xgmi_links
from numatune.readers.topology import read_topology
from tests.conftest import fixture_root

MI210 = "topo-mi210-xgmi-pcie"
# The two XGMI hives of fixtures/topo-mi210-xgmi-pcie (KFD nodes 2-5 and 6-9), by PCI address.
HIVE_A = {"0000:63:00.0", "0000:43:00.0", "0000:03:00.0", "0000:26:00.0"}
HIVE_B = {"0000:e3:00.0", "0000:c3:00.0", "0000:83:00.0", "0000:a3:00.0"}


def test_xgmi_links_are_the_type_11_io_links(host_of):
    kfd = read_kfd(host_of(MI210))
    direct = [x for x in kfd.links if x.direct and x.type == 11]
    assert len(direct) == 24  # 2 hives x 4 GPUs x 3 peers, each link seen from both ends
    pairs = xgmi_links(kfd)
    assert len(pairs) == 12
    for a, b, link in pairs:
        assert {a, b} <= HIVE_A or {a, b} <= HIVE_B
        assert link.weight == 15 and (link.min_bandwidth_mbps, link.max_bandwidth_mbps) == (50000, 50000)
        assert xgmi_count(link) == 1


def test_rocm_smi_reading_of_the_mi210_tree(host_of):
    """rocm-smi --showtopo per rocm_smi_lib's rules: XGMI/1 hop/weight 15 inside a hive; across the
    sockets PCIE, 3 hops (a CPU-CPU io_link exists), weight 20 + 20 + 32 (GPU-CPU, GPU-CPU, CPU-CPU)."""
    view = rocm_smi_topology(read_kfd(host_of(MI210)))
    assert len(view) == 8 * 7
    for (a, b), (kind, hops, weight) in view.items():
        same_hive = {a, b} <= HIVE_A or {a, b} <= HIVE_B
        assert (kind, hops, weight) == (("XGMI", 1, 15) if same_hive else ("PCIE", 3, 72)), (a, b)


def test_rocm_smi_weights_agree_with_the_kernels_p2p_links(host_of):
    # The kernel computes the indirect paths itself (p2p_links): its weights equal rocm-smi's sums.
    kfd = read_kfd(host_of(MI210))
    view = rocm_smi_topology(kfd)
    bdf = {a.id: a.bdf for a in kfd.agents if a.bdf}
    checked = 0
    for link in kfd.links:
        if not link.direct and link.node_from in bdf and link.node_to in bdf:
            assert view[(bdf[link.node_from], bdf[link.node_to])][2] == link.weight
            checked += 1
    assert checked == 32  # 8 GPUs x 4 GPUs of the other hive


def test_matrix_matches_rocm_smi(host_of):
    """Every GPU pair of the matrix reads as rocm-smi reads it: XGMI where it says XGMI, NODE where it
    says 2 hops (same CPU), SYS where it says 3 or 4 (across CPUs)."""
    topo = read_topology(host_of(MI210))
    m = path_matrix(topo)
    view = rocm_smi_topology(read_kfd(host_of(MI210)))
    expect = {("XGMI", 1): "XGMI", ("PCIE", 2): "NODE", ("PCIE", 3): "SYS", ("PCIE", 4): "SYS"}
    for i, a in enumerate(m.devices):
        for j, b in enumerate(m.devices):
            if i != j:
                kind, hops, _ = view[(a, b)]
                assert m.cells[i][j] == expect[(kind, hops)], (a, b)
    assert sum(row.count("XGMI") for row in m.cells) == 24
    assert m.nvlink == "n/a"


def test_inspect_json_carries_links_and_bandwidth(cli):
    doc = json.loads(cli("--root", str(fixture_root(MI210)), "inspect", "--json").stdout)
    pm = doc["path_matrix"]
    assert doc["schema"] == "numatune.inspect/4"
    assert "XGMI#" in pm["legend"] and "NV#" in pm["legend"]
    assert len(pm["links"]) == 12
    link = pm["links"][0]
    assert link["kind"] == "xgmi" and link["label"] == "XGMI" and link["max_bandwidth_mbps"] == 50000
    assert link["weight"] == 15 and link["source"] == "kfd io_links"
    assert {d["kfd_cpu_agent"] for d in doc["devices"] if d["kind"] == "gpu"} == {0, 1}
    codes = {f["code"] for f in doc["findings"]}
    assert "NT014" in codes and "NT007" not in codes  # never "a node without CPUs" in a tree without CPU topology


def test_text_shows_the_links_table(cli):
    out = cli("--root", str(fixture_root(MI210)), "inspect").stdout
    assert "GPU fabric links" in out and "50000 / 50000" in out and "XGMI#:" in out
