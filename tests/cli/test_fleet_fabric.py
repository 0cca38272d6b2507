"""NVLink domains across a fleet: fleet's report, --emit slurm-topology|slurm-topology-yaml|kueue|labels and
--check-topology, on the SYNTHETIC fleets of tests/fleet_gen.py (GB200 trays made by numatune inspect)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from numatune.plan.cluster import expand
from tests import fleet_gen

SENTINEL_RACKS = {2, 3}


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory):
    return fleet_gen.write_dir(fleet_gen.nvl72_fleet(), tmp_path_factory.mktemp("nvl72") / "reports")


def _blocks(conf: str) -> dict[str, list[str]]:
    out = {}
    for line in conf.splitlines():
        m = re.fullmatch(r"BlockName=(\S+) Nodes=(\S+)", line)
        if m:
            out[m.group(1)] = expand(m.group(2), "test")
    return out


def _rack(trays: range, rack: int, skip: tuple[int, ...] = ()) -> list[str]:
    return [fleet_gen.node_name(rack, t) for t in trays if t not in skip]


def test_topology_conf_one_block_per_domain(cli, fleet_dir):
    result = cli("fleet", str(fleet_dir), "--emit", "slurm-topology")
    assert result.exit_code == 0, result.stderr
    conf = result.stdout
    blocks = _blocks(conf)
    # racks 2 and 3 share the sentinel clique 32766 under different cluster UUIDs: two blocks, never one
    assert sorted(blocks.values()) == sorted([
        _rack(range(1, 19), 1, skip=(5,)), _rack(range(1, 19), 2), _rack(range(1, 19), 3),
        _rack(range(1, 17), 4, skip=(3,)), _rack(range(1, 10), 5), _rack(range(1, 9), 6)])
    # the base block size is the smallest block (8): every block holds at least that many nodes, and the
    # BlockSizes are the base times powers of two up to the number of blocks (6)
    assert "BlockSizes=8,16,32" in conf.splitlines()
    assert "BlockName=block01 Nodes=gb[0101-0104,0106-0118]" in conf.splitlines()
    left = [line for line in conf.splitlines() if line.startswith("# left out:")]
    assert len(left) == 2
    assert "gb0105" in left[0] and "degraded bandwidth" in left[0]
    assert "gb0403" in left[1] and "registration in-progress" in left[1]
    assert not any(n in ("gb0105", "gb0403") for ns in blocks.values() for n in ns)


def test_yaml_kueue_and_labels_say_the_same(cli, fleet_dir):
    conf = _blocks(cli("fleet", str(fleet_dir), "--emit", "slurm-topology").stdout)
    doc = yaml.safe_load(cli("fleet", str(fleet_dir), "--emit", "slurm-topology-yaml").stdout)
    assert len(doc) == 1 and doc[0]["cluster_default"] is True
    block = doc[0]["block"]
    assert block["block_sizes"] == [8, 16, 32]
    assert {b["block"]: expand(b["nodes"], "yaml") for b in block["blocks"]} == conf
    kueue = list(yaml.safe_load_all(cli("fleet", str(fleet_dir), "--emit", "kueue").stdout))
    topology, flavor = kueue
    assert topology["kind"] == "Topology" and topology["apiVersion"].startswith("kueue.x-k8s.io/")
    levels = [x["nodeLabel"] for x in topology["spec"]["levels"]]
    assert levels[-1] == "kubernetes.io/hostname"
    assert flavor["kind"] == "ResourceFlavor" and flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    (select, value), = flavor["spec"]["nodeLabels"].items()
    labels = {}
    for line in cli("fleet", str(fleet_dir), "--emit", "labels").stdout.splitlines():
        if line and not line.startswith("#"):
            node, *pairs = line.split()
            labels[node] = dict(p.split("=", 1) for p in pairs)
    by_block: dict[str, list[str]] = {}
    for node, pairs in labels.items():
        if pairs.get(select) == value:
            by_block.setdefault(pairs[levels[0]], []).append(node)
    assert {k: sorted(v) for k, v in by_block.items()} == {k: sorted(v) for k, v in conf.items()}
    assert labels["gb0105"][select] == "false" and labels["gb0403"][select] == "false"
    cliques = {labels[n]["nvidia.com/gpu.clique"] for n in conf["block02"] + conf["block03"]}
    assert len(cliques) == 2 and all(c.endswith(".32766") for c in cliques)


def test_fleet_report_shows_domains(cli, fleet_dir):
    doc = json.loads(cli("fleet", str(fleet_dir), "--json").stdout)
    nv = doc["nvlink"]
    assert nv["typical_size"] == 18
    sizes = sorted((d["size"], d["partial"], d["degraded"]) for d in nv["domains"])
    assert sizes == [(8, True, False), (9, True, False), (15, True, False), (18, False, False), (18, False, False),
                     (18, False, True)]
    assert [x["node"] for x in nv["no_domain"]] == ["gb0403"]
    text = cli("fleet", str(fleet_dir)).stdout
    assert "NVLink domains: 6" in text and "not healthy: gb0105" in text
    page = cli("fleet", str(fleet_dir), "--format", "html").stdout
    assert "<h2>NVLink domains</h2>" in page and "gb0105: GPU1 degraded bandwidth" in page


def test_check_topology_names_a_moved_node(cli, fleet_dir, tmp_path):
    good = tmp_path / "topology.conf"
    assert cli("fleet", str(fleet_dir), "--emit", "slurm-topology", "-o", str(good)).exit_code == 0
    ok = cli("fleet", str(fleet_dir), "--check-topology", str(good))
    assert ok.exit_code == 0, ok.stdout
    assert "matches" in ok.stdout
    text = good.read_text()
    # gb0201 moved to rack 1's block (in the file), the degraded gb0105 put back, gb0601 dropped
    moved = text.replace("BlockName=block01 Nodes=gb[0101-0104,0106-0118]",
                         "BlockName=block01 Nodes=gb[0101-0118],gb0201") \
        .replace("BlockName=block06 Nodes=gb[0601-0608]", "BlockName=block06 Nodes=gb[0602-0608]") \
        .replace("BlockName=block05 Nodes=gb[0501-0509]", "BlockName=block05 Nodes=gb[0501-0509],gb0699")
    bad = tmp_path / "moved.conf"
    bad.write_text(moved)
    result = cli("fleet", str(fleet_dir), "--check-topology", str(bad))
    assert result.exit_code == 1
    mismatches = [line for line in result.stdout.splitlines() if "mismatch:" in line]
    assert any("gb0201 is in block block01" in m for m in mismatches)
    assert any("gb0105 is in block block01" in m and "not healthy" in m for m in mismatches)
    assert any("gb0601" in m and "in no block" in m for m in mismatches)
    assert any("block block06 has 7 node(s), fewer than the base block size 8" in m for m in mismatches)
    assert "gb0699" in result.stdout  # named in a note: in the file, no report
    yml = tmp_path / "topology.yaml"
    cli("fleet", str(fleet_dir), "--emit", "slurm-topology-yaml", "-o", str(yml))
    assert cli("fleet", str(fleet_dir), "--check-topology", str(yml)).exit_code == 0


def test_pdsh_stream_reads_the_same(cli, fleet_dir):
    fleet = fleet_gen.nvl72_fleet()
    from_pdsh = cli("fleet", "-", "--emit", "slurm-topology", input=fleet_gen.pdsh_text(fleet))
    from_dir = cli("fleet", str(fleet_dir), "--emit", "slurm-topology")
    assert from_pdsh.exit_code == 0, from_pdsh.stderr
    assert _blocks(from_pdsh.stdout) == _blocks(from_dir.stdout)
    # lines of hosts interleaved as pdsh prints them when outputs arrive together
    a, b = fleet[0], fleet[1]
    lines_a = [f"{a[0]}: {x}" for x in a[1].splitlines()]
    lines_b = [f"{b[0]}: {x}" for x in b[1].splitlines()]
    mixed = [x for pair in zip(lines_a, lines_b, strict=True) for x in pair]
    out = cli("fleet", "-", "--emit", "labels", input="\n".join(mixed) + "\n").stdout
    assert {line.split()[0] for line in out.splitlines() if not line.startswith("#")} == {a[0], b[0]}


def test_ib_only_fleet_has_no_blocks(cli, tmp_path):
    reports = fleet_gen.write_dir(fleet_gen.h100_fleet(3), tmp_path / "h100")
    conf = cli("fleet", str(reports), "--emit", "slurm-topology").stdout
    assert _blocks(conf) == {}
    assert "no NVLink domain beyond the node" in conf and "BlockSizes" not in conf
    assert "flat: true" in cli("fleet", str(reports), "--emit", "slurm-topology-yaml").stdout


def test_unnamed_reports_and_bad_options(cli, fleet_dir):
    one = (fleet_dir / "gb0101.json").read_text()
    result = cli("fleet", "-", "--emit", "slurm-topology", input=one + one)
    assert result.exit_code == 3 and "without a node name" in result.stderr
    twice = "".join(f"gb0101: {line}\n" for line in (one + one).splitlines())
    result = cli("fleet", "-", "--emit", "slurm-topology", input=twice)
    assert result.exit_code == 3 and "more than one report for node(s) gb0101" in result.stderr
    assert cli("fleet", str(fleet_dir), "--emit", "labels", "--json").exit_code == 2
    assert cli("fleet", str(fleet_dir), "--emit", "slurm-topology", "-o", "x.yaml").exit_code == 2


def _pdsh(trays: int) -> str:
    import io

    out = io.StringIO()
    fleet_gen.write_pdsh(out, trays)
    return out.getvalue()


def _interleaved(trays: int) -> str:
    """TRAYS reports whose lines alternate two hosts at a time, as pdsh prints outputs that arrive together."""
    lines = _pdsh(trays).splitlines(keepends=True)
    per = len(lines) // trays
    out = []
    for pair in range(0, trays - 1, 2):
        a, b = lines[pair * per:(pair + 1) * per], lines[(pair + 1) * per:(pair + 2) * per]
        out += [x for ab in zip(a, b, strict=True) for x in ab]
    return "".join(out)


@pytest.mark.parametrize(("make", "n"), [(_pdsh, 12), (_interleaved, 4)])
def test_emit_is_linear_in_nodes(make, n):
    """fleet --emit over pdsh output: 4x the trays take about 4x the time (a quadratic reader reads 16x)."""
    import io

    from numatune.commands.fleet import read_fabric
    from numatune.plan.cluster import plan_blocks, topology_conf
    from tests.limits import growth

    def run(text: str) -> None:
        fabric, bad = read_fabric(("-",), stdin=io.StringIO(text))
        assert bad == [] and fabric.nodes
        topology_conf(plan_blocks(fabric))

    assert growth(make, run, n) < 8


@pytest.mark.parametrize(("variant", "code", "words"), [
    ("degraded", "NT030", "degraded bandwidth"),
    ("registering", "NT019", "in-progress"),
    ("sentinel", "NT031", "32766"),
])
def test_check_flags_the_tray(cli, tmp_path, variant, code, words):
    """check on a GB200 tray (the hand-made tree's snapshot with its NVML fabric answers replaced)."""
    root = fleet_gen._variant_archive(tmp_path / f"{variant}.tar.gz", variant)
    doc = json.loads(cli("--root", str(root), "check", "--json").stdout)
    found = [f for c in doc["checks"] for f in c.get("findings", []) if f["code"] == code]
    assert found and all(words in f["message"] for f in found), found


def test_inspect_shows_domain_and_health(cli, tmp_path):
    root = fleet_gen._variant_archive(tmp_path / "degraded.tar.gz", "degraded")
    text = cli("--root", str(root), "inspect").stdout
    table = text[text.index("NVLink domain"):]
    assert f"{fleet_gen.TEMPLATE_DASHED}.{fleet_gen.TEMPLATE_CLIQUE}" in table
    assert "degraded bandwidth (NVLink paths down)" in table
    gpus = json.loads(cli("--root", str(root), "inspect", "--json").stdout)["gpu_fabric"]["nvml_gpus"]
    assert [g["health_mask"] for g in gpus] == [0x1AA, 0x1A9, 0x1AA, 0x1AA]
    assert gpus[1]["health_summary"] == "limited capacity" and gpus[0]["health"] == []


# Kubernetes' own rules for a label (apimachinery validation: a qualified name, an optional DNS-subdomain prefix;
# a value of at most 63 characters) and Kueue's for a Topology's levels (apis/kueue/v1beta2/topology_types.go:
# 1 to 16 levels, unique, kubernetes.io/hostname only as the lowest, each nodeLabel matching its pattern)
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
KUEUE_LEVEL = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])")


def _valid_label(key: str, value: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return ((not prefix or (len(prefix) <= 253 and DNS_SUBDOMAIN.fullmatch(prefix) is not None))
            and len(name) <= 63 and LABEL_NAME.fullmatch(name) is not None
            and len(value) <= 63 and (value == "" or LABEL_NAME.fullmatch(value) is not None))


def test_kueue_objects_and_labels_hold_the_apis_validation(cli, fleet_dir):
    topology, flavor = yaml.safe_load_all(cli("fleet", str(fleet_dir), "--emit", "kueue").stdout)
    assert topology["apiVersion"] == flavor["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    levels = [x["nodeLabel"] for x in topology["spec"]["levels"]]
    assert 1 <= len(levels) <= 16 and len(set(levels)) == len(levels)
    assert all(KUEUE_LEVEL.fullmatch(x) and len(x) <= 316 for x in levels)
    assert "kubernetes.io/hostname" not in levels[:-1]
    assert all(_valid_label(k, str(v)) for k, v in flavor["spec"]["nodeLabels"].items())
    lines = [x for x in cli("fleet", str(fleet_dir), "--emit", "labels").stdout.splitlines()
             if x and not x.startswith("#")]
    assert len(lines) == len(fleet_gen.nvl72_fleet())
    for line in lines:
        node, *pairs = line.split()
        assert pairs, line
        for pair in pairs:
            key, _, value = pair.partition("=")
            assert _valid_label(key, value), (node, pair)
