"""numatune inspect through the CLI: golden outputs, every fixture in every format, bad input."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import GOLDEN, fixture_root, tree_fixtures

# A machine's expected outputs are tests/golden/NAME/inspect.json (and inspect.txt for the table): to add
# them, make the directory (and an empty inspect.txt for a table) and run `pytest --update-golden`.
GOLDEN_TREES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
TABLE_TREES = sorted(p.parent.name for p in GOLDEN.glob("*/inspect.txt"))


@pytest.mark.parametrize("name", GOLDEN_TREES)
def test_json_golden(cli, golden, name):
    result = cli("--root", str(fixture_root(name)), "inspect", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    doc["source"] = name  # the absolute path differs between checkouts
    golden(f"{name}/inspect.json", json.dumps(doc, indent=2) + "\n")


@pytest.mark.parametrize("name", TABLE_TREES)
def test_table_golden(cli, golden, name):
    result = cli("--root", str(fixture_root(name)), "inspect")
    assert result.exit_code == 0, result.stderr
    golden(f"{name}/inspect.txt", result.stdout.replace(str(fixture_root(name)), name))


@pytest.mark.parametrize("fmt", ["table", "json", "prometheus"])
@pytest.mark.parametrize("name", tree_fixtures())
def test_every_fixture_every_format(cli, name, fmt):
    result = cli("--root", str(fixture_root(name)), "inspect", "--format", fmt)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    if fmt == "json":
        doc = json.loads(result.stdout)
        assert doc["schema"] == "numatune.inspect/4"
        for node in doc["nodes"]:
            assert isinstance(node["id"], int) and all(isinstance(c, int) for c in node["cpus"])
            assert all(isinstance(k, str) for k in node["distances"])
        for dev in doc["devices"]:
            assert dev["numa_node"] is None or dev["numa_node"] >= 0
        for f in doc["findings"]:
            assert set(f) >= {"code", "severity", "message", "fix"}


def test_json_contract_on_two_socket_tree(cli):
    doc = json.loads(cli("--root", str(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), "inspect", "--json").stdout)
    assert [n["id"] for n in doc["nodes"]] == [0, 1]
    assert doc["nodes"][1]["distances"] == {"0": 21, "1": 10}
    nic = next(d for d in doc["devices"] if d["bdf"] == "0000:82:00.0")
    assert nic["numa_node"] == 1 and nic["rdma"] == ["mlx4_0"] and nic["local_cpus"] == list(range(8, 16))
    nvme = next(d for d in doc["devices"] if d["kind"] == "nvme")
    assert nvme["numa_node"] is None and nvme["inferred_node"] == 0
    assert any(f["code"] == "NT001" for f in doc["findings"])


def test_findings_on_known_trees(cli):
    codes = lambda name: {f["code"] for f in json.loads(  # noqa: E731
        cli("--root", str(fixture_root(name)), "inspect", "--json").stdout)["findings"]}
    assert "NT008" in codes("8em64t-2s2ca2c-buggynuma")  # every node claims the same CPUs
    assert "NT006" in codes("16em64t-4s2c2t-offlines")
    assert "NT011" in codes("20s390-2g6s4c")
    assert "NT001" in codes("vm-accel-nvidia-p100")


def test_root_from_environment(cli):
    result = cli("inspect", "--json", env={"NUMATUNE_ROOT": str(fixture_root("256ppc-8n8s4t"))})
    assert result.exit_code == 0 and len(json.loads(result.stdout)["nodes"]) == 8


# -- bad input: small hand-made trees, labelled as such -----------------------------------------------

def hand_made_tree(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"sys/devices/system/node/node0/cpulist": "0-x\n", "sys/devices/system/cpu/online": "0\n"},
         "malformed /sys/devices/system/node/node0/cpulist"),
        ({"sys/devices/system/cpu/online": "zz\n"}, "malformed /sys/devices/system/cpu/online"),
    ],
)
def test_malformed_files_give_one_line(cli, tmp_path, files, message):
    root = hand_made_tree(tmp_path, files)
    result = cli("--root", str(root), "inspect")
    assert result.exit_code == 3
    assert result.stderr.startswith(f"numatune: error: {message}")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_bad_distance_row_is_skipped_with_a_note(cli, tmp_path):
    root = hand_made_tree(tmp_path, {
        "sys/devices/system/node/online": "0-1\n",
        "sys/devices/system/node/node0/cpulist": "0\n",
        "sys/devices/system/node/node0/distance": "10 21 30\n",
        "sys/devices/system/node/node1/cpulist": "1\n",
        "sys/devices/system/node/node1/distance": "21 ten\n",
        "sys/devices/system/cpu/online": "0-1\n",
    })
    result = cli("--root", str(root), "inspect", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert all(n["distances"] == {} for n in doc["nodes"])
    reasons = " ".join(s["reason"] for s in doc["skipped"])
    assert "3 entries for 2 online nodes" in reasons and "malformed distance row" in reasons
    assert "NT009" in {f["code"] for f in doc["findings"]}


def test_missing_root_and_non_tree(cli, tmp_path):
    result = cli("--root", str(tmp_path / "nope"), "inspect")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    result = cli("--root", str(tmp_path), "inspect")
    assert result.exit_code == 3 and "not a sysfs/procfs tree" in result.stderr
    assert "hint:" in result.stderr


def test_pci_device_with_unknown_node_and_dangling_links(cli, tmp_path):
    hand_made_tree(tmp_path, {
        "sys/devices/system/cpu/online": "0-3\n",
        "sys/devices/system/node/online": "0-1\n",
        "sys/devices/system/node/node0/cpulist": "0-1\n",
        "sys/devices/system/node/node1/cpulist": "2-3\n",
        "sys/devices/pci0000:00/0000:00:01.0/numa_node": "1\n",
        "sys/devices/pci0000:00/0000:00:01.0/class": "0x060400\n",
        "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class": "0x030200\n",
        "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor": "0x10de\n",
        "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node": "-1\n",
        "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/local_cpulist": "0-3\n",
    })
    links = tmp_path / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0", links / "0000:00:01.0")
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", links / "0000:01:00.0")
    os.symlink("../../../devices/pci0000:00/gone", links / "0000:02:00.0")  # dangling: skipped, no crash
    doc = json.loads(cli("--root", str(tmp_path), "inspect", "--json").stdout)
    (gpu,) = doc["devices"]
    assert gpu["kind"] == "gpu" and gpu["numa_node"] is None
    assert (gpu["inferred_node"], gpu["inferred_from"]) == (1, "upstream bridge")


def test_snapshot_round_trip_matches_live(cli, tmp_path):
    """inspect of a snapshot equals inspect live, apart from what changes by the second."""
    archive = tmp_path / "node.tar.gz"
    assert cli("snapshot", "-o", str(archive)).exit_code == 0
    live = json.loads(cli("inspect", "--json").stdout)
    saved = json.loads(cli("--root", str(archive), "inspect", "--json").stdout)
    from tests.parity import comparable, differences

    assert not (diff := differences(comparable(saved), comparable(live))), diff


@pytest.mark.parametrize("name", ["vm-cxl-switch", "vm-cxl-pool", "fakeheteromemtiers"])
def test_hmat_figures_the_firmware_left_at_0_are_unknown_in_every_output(cli, name):
    """QEMU's HMAT (vm-cxl-switch, vm-cxl-pool: every figure; fakeheteromemtiers: the latencies) leaves figures at
    0 in sysfs: never `0 ns` or `0 MB/s`, but `-` with the reason in text and HTML, null with the reason in
    JSON, and no figure in the picture."""
    import re

    from numatune.model.topology import HMAT_UNKNOWN

    root = str(fixture_root(name))
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    entries = [e for n in doc["nodes"] for e in n["hmat"]]
    assert entries and all(e["unknown_reason"] for e in entries)
    fields = ("read_latency_ns", "write_latency_ns", "read_bandwidth_mbps", "write_bandwidth_mbps")
    assert all(e[f] is None or e[f] > 0 for e in entries for f in fields)
    assert any(e[f] is None for e in entries for f in fields)
    text = cli("--root", root, "inspect", env={"COLUMNS": "200"}).stdout
    hmat = text[text.index("HMAT"):]
    hmat = hmat[:hmat.index(HMAT_UNKNOWN) + len(HMAT_UNKNOWN)]
    rows = [r for r in hmat.splitlines() if "access" in r and "target" not in r]
    figures = [[c.strip() for c in r.split("│")[4:8]] for r in rows]  # read/write ns, read/write MB/s
    assert figures and all("0" not in f for f in figures) and any("-" in f for f in figures)
    html = cli("--root", root, "inspect", "--format", "html").stdout
    assert f"<p>{HMAT_UNKNOWN}</p>" in html
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", r)[3:] for r in html.split("<h2>HMAT")[1].split("</table>")[0]
             .splitlines() if "access" in r]
    assert cells and all("0" not in c for c in cells) and any("-" in c for c in cells)
    svg = cli("--root", root, "inspect", "--format", "svg").stdout
    assert not re.search(r"\b0 ns|\b0 MB/s|\b0(\.0)? GB/s", svg)


def test_grace_gpu_memory_section_and_json(cli):
    result = cli("--root", str(fixture_root("handmade-gb200-numa")), "inspect")
    assert result.exit_code == 0, result.stderr
    assert "GPU memory: NUMA mode: GPU memory onlined as CPU-less NUMA nodes 2,10,18,26" in result.stdout
    assert "GPU2 0018:01:00.0: CPUs on node 1" in result.stdout
    assert "gpu GPU3 MIG" in result.stdout  # node 27..33: GPU3's empty placeholders
    doc = json.loads(cli("--root", str(fixture_root("handmade-gb200-numa")), "inspect", "--json").stdout)
    mem = doc["gpu_memory"]
    assert mem["mode"] == "numa" and mem["nodes_per_socket"] == {"0": [0], "1": [1]}
    assert [(g["label"], g["cpu_node"], g["memory_node"]) for g in mem["gpus"]] == [
        ("GPU0", 0, 2), ("GPU1", 0, 10), ("GPU2", 1, 18), ("GPU3", 1, 26)]
    assert {n["id"]: n["gpu"] for n in doc["nodes"] if n["mig_placeholder"]}[27] == "0019:01:00.0"


def test_grace_distances_leave_the_empty_mig_placeholders_out_and_say_so(cli):
    """34 nodes of a GB200 tray: the SLIT table has the 6 that hold CPUs or memory (it was 212 columns wide in a
    file), names the 28 empty ones under it, and --json keeps all 34 rows."""
    root = str(fixture_root("handmade-gb200-numa"))
    text = cli("--root", root, "inspect").stdout
    head = next(line for line in text.splitlines()[text.splitlines().index("Distances") + 1:] if line[:1] == "┃")
    assert [c.strip() for c in head.strip("┃").split("┃")] == ["node", "0", "1", "2", "10", "18", "26"]
    assert "Distances: empty nodes 3-9,11-17,19-25,27-33 (no CPUs, no memory) left out" in text
    lines = text.splitlines()
    table = lines[lines.index("Distances"):lines.index("SLIT; 10 = local")]
    assert max(map(len, table)) == 44  # was 212 characters a row
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    assert len(doc["nodes"]) == 34 and all(len(n["distances"]) == 34 for n in doc["nodes"])


def test_gb200_reads_as_its_published_nvidia_smi_topo_and_numactl(cli):
    """sglang#11208's `nvidia-smi topo -m` of a GB200 tray: NV18 between every GPU pair, CPU affinity 0-71 for
    GPU0-1 and 72-143 for GPU2-3 (NVML's; the functions' local_cpulist is every CPU); the TensorRT-LLM blog's
    `numactl -H`: 11 among one GPU's nodes, 40 between GPUs', 80/120 from the Graces. The fixture had SYS,
    0-143 and 255."""
    doc = json.loads(cli("--root", str(fixture_root("handmade-gb200-numa")), "inspect", "--json").stdout)
    m = doc["path_matrix"]
    gpus = [i for i, label in enumerate(m["labels"]) if label.startswith("GPU")]
    assert [[m["cells"][a][b] for b in gpus] for a in gpus] == [
        ["X" if a == b else "NV18" for b in gpus] for a in gpus]
    assert [m["cpu_affinity"][i] for i in gpus] == [list(range(72))] * 2 + [list(range(72, 144))] * 2
    dist = {n["id"]: {int(k): v for k, v in n["distances"].items()} for n in doc["nodes"]}
    assert dist[2][3] == dist[2][9] == 11 and dist[2][10] == dist[2][26] == dist[10][18] == 40
    assert (dist[0][1], dist[0][2], dist[0][18], dist[1][18], dist[1][2]) == (40, 80, 120, 80, 120)
    assert dist[2][2] == 10 and all(dist[a][b] == dist[b][a] for a in dist for b in dist)
    sizes = {n["id"]: n["memory_total_kib"] for n in doc["nodes"] if n["id"] in (0, 1, 2)}
    assert sizes == {0: 489935 * 1024, 1: 489795 * 1024, 2: 188416 * 1024}


def test_snc4_clustering_line(cli):
    result = cli("--root", str(fixture_root("handmade-snc4-8gpu")), "inspect")
    assert "Sub-NUMA clustering: SNC-4 (socket 0: nodes 0-3; socket 1: nodes 4-7)" in result.stdout
