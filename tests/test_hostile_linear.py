"""Linear parsers (issue 41, point 3): small inputs whose cost grew faster than their size, each answered with
exit 0, 1, 2 or 3 within 10 s and 256 MiB (never exit 70 or a traceback), and each parser's time doubling
with its input.

Every input is hand-made in the test (nothing large is shipped): YAML merge-key chains, CPU lists whose
stride groups overlap, TOML keys dotted thousands deep, an NVML record of 12,000 GPUs on an NVSwitch, a KFD
topology of thousands of GPU agents, Slurm host lists that never close their bracket, reports with 10,000
path-matrix labels, and trees of 1,000 NUMA nodes to draw. Roots are a fixture copy with files added, or a
small archive. Commands run in a child process under RLIMIT_AS and a timeout (tests/limits.py).
"""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from tests.conftest import fixture_copy, fixture_root
from tests.limits import best_seconds, growth, run_limited

SECONDS, MIB = 10, 256


def answered(*args: str, codes: tuple[int, ...] = (0, 3), env: dict[str, str] | None = None):
    """`numatune ARGS` within the limits, one of `codes`, no traceback; exit 3 and 2 are at most two lines."""
    r = run_limited(*args, seconds=SECONDS, mib=MIB, env=env)
    assert r.within(SECONDS, MIB), (args[-3:], r.returncode, r.wall, r.peak_mib, r.stderr[-300:])
    assert r.returncode in codes, (args[-3:], r.returncode, r.stderr[-500:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-500:]
    if r.returncode in (2, 3):
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr
    return r


def test_growth_tells_a_quadratic_parser_from_a_linear_one():
    """The yardstick itself: the retry of a high ratio must not let a quadratic run pass under 8."""
    def pairs(items):
        return sum(1 for a in items for b in items if a is b)

    assert growth(lambda n: list(range(n)), pairs, 300) > 8
    assert growth(lambda n: list(range(n)), lambda items: sorted(items, reverse=True), 20_000) < 8


def _archive(path, files: dict[str, bytes]) -> str:
    """A gzip tar root: sys/, proc/ and `files` (name -> content), directories implied."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name in ("sys", "proc"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


ROOT = "dev-1node-x86"


# -- YAML merge keys ------------------------------------------------------------------------------------
def _merge_chain(n: int) -> str:
    """x{i}: &a{i} {<<: *a{i-1}, k{i}: 0}: map i copies the i-1 pairs of the one before (n^2/2 in all)."""
    return "kind: KubeletConfiguration\na0: &a0 {k0: 0}\n" + "".join(
        f"x{i}: &a{i} {{<<: *a{i - 1}, k{i}: 0}}\n" for i in range(1, n))


@pytest.mark.parametrize("args", [["check", "--kubelet-config", "{f}"],
                                  ["check", "--resource-slices", "{f}", "--node-name", "NODE"]],
                         ids=["kubelet-config", "resource-slices"])
def test_a_yaml_merge_key_chain_is_counted_before_it_is_built(tmp_path, args):
    """440 KB of merge keys grew 4x per doubling and ended in MemoryError: PyYAML copied every merged map before
    the alias bound counted. The merges are counted on the composed nodes, in linear time: exit 3, one line."""
    doc = tmp_path / "merge.yaml"
    doc.write_text(_merge_chain(12_000))
    assert doc.stat().st_size > 440_000
    r = answered("--root", str(fixture_root(ROOT)), *[a.format(f=doc) for a in args], codes=(3,))
    assert f"{doc}: its YAML merge keys (<<: *name) copy more than 16 entries for each value written" in r.stderr, (
        r.stderr)


SPELLINGS = {  # a merge key's tag as the text may spell it: PyYAML resolves each to tag:yaml.org,2002:merge
    "verbatim": ("", "!<tag:yaml.org,2002:%6Derge> :"),
    "tag-directive": ("%TAG !m! tag:yaml.org,2002:me\n---\n", "!m!rge :"),
    "secondary": ("", "!!merge :"),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_merge_key_spelled_without_its_name_is_counted_too(tmp_path, spelling):
    """The guard looked for `<<` or "merge" in the text: `!<tag:yaml.org,2002:%6Derge>` or a %TAG prefix skipped it
    (256 KB: 10.8 s, 322 MB). It is run on the composed nodes, whose tags are resolved: exit 3, one line."""
    head, key = SPELLINGS[spelling]
    doc = tmp_path / "merge.yaml"
    body = _merge_chain(6_500).split("\n", 1)[1].replace("<<:", key)
    doc.write_text(head + "kind: KubeletConfiguration\n" + body)
    assert doc.stat().st_size > 256_000 and "<<" not in doc.read_text()
    r = answered("--root", str(fixture_root(ROOT)), "check", "--kubelet-config", str(doc), codes=(3,))
    assert f"{doc}: its YAML merge keys (<<: *name) copy more than 16 entries for each value written" in r.stderr, (
        r.stderr)


def test_yaml_merge_keys_are_counted_in_linear_time():
    from numatune.errors import InputError
    from numatune.system.infile import load_document

    def refused(text: str) -> None:
        with pytest.raises(InputError, match="merge keys"):
            load_document(text, "f", "yaml")

    assert growth(_merge_chain, refused, 3000) < 8
    doubling = "a0: &a0 {k: 1}\n" + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, 60))
    refused(doubling)  # each map merges the one before twice: 2^59 pairs before keys are made unique
    refused("a: &a {x: 1, <<: *a}\n")  # a map merged into itself


def test_honest_merge_keys_are_read():
    from numatune.system.infile import load_document

    text = ("base: &b {cpu: 1, memory: 2Gi}\nmore: &m {gpu: 1}\n"
            + "".join(f"n{i}: {{<<: [*b, *m], name: n{i}}}\n" for i in range(200)))
    doc = load_document(text, "f", "yaml")
    assert doc["n199"] == {"cpu": 1, "memory": "2Gi", "gpu": 1, "name": "n199"} and len(doc) == 202


# -- CPU lists ------------------------------------------------------------------------------------------
OVERLAP = "0-65535:65536/1"  # 16 bytes: 65,536 groups of 65,536 ids each, about 2^31 inserts


def test_an_overlapping_stride_in_a_root_is_refused_naming_the_file(tmp_path):
    """inspect of a root with it in a node's cpulist took 60 s."""
    path = _archive(tmp_path / "stride.tar.gz", {"sys/devices/system/node/node0/cpulist": OVERLAP.encode() + b"\n"})
    r = answered("--root", path, "inspect", "--json", codes=(3,))
    assert "/sys/devices/system/node/node0/cpulist" in r.stderr and "bad stride" in r.stderr, r.stderr


def test_an_overlapping_stride_in_a_policy_or_an_option_is_refused(tmp_path):
    """A policy's irq.rank_cpus took 52 s; `irq --exclude-cpus` never answered."""
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[irq]\nrank_cpus = "{OVERLAP}"\n')
    r = answered("--root", str(fixture_root(ROOT)), "check", "--policy", str(policy), codes=(3,))
    assert "rank_cpus" in r.stderr and "bad stride" in r.stderr, r.stderr
    r = answered("--root", str(fixture_root(ROOT)), "irq", "--exclude-cpus", OVERLAP, codes=(2,))
    assert "not a CPU list" in r.stderr


def test_stride_groups_are_the_kernels():
    """bitmap_parselist's rule: a group uses at most its own length (used <= group), so groups never overlap and
    the ids a list produces are counted before any is made."""
    from numatune.cpulist import MAX_ID, parse_cpulist

    assert parse_cpulist("0-15:4/4") == frozenset(range(16))
    assert parse_cpulist("0-9:2/5") == {0, 1, 5, 6}
    assert len(parse_cpulist(f"0-{MAX_ID - 1}:1/1")) == MAX_ID
    for bad in (OVERLAP, "0-7:5/4", "0-7:3/0"):
        with pytest.raises(ValueError, match="bad stride"):
            parse_cpulist(bad)
    assert best_seconds(lambda: pytest.raises(ValueError, parse_cpulist, ",".join([OVERLAP] * 10_000)), 1) < 1

    def strides(n: int) -> str:
        return ",".join(f"{i * 8}-{i * 8 + 7}:{1 + i % 4}/4" for i in range(n))

    assert growth(strides, parse_cpulist, 2000) < 8


# -- TOML dotted keys -----------------------------------------------------------------------------------
def test_toml_keys_dotted_thousands_deep_are_refused_before_parsing(tmp_path):
    """`severity.a.a.a... = 1` (no brackets): 40 KB took 1.9 GB in tomllib, MemoryError."""
    policy = tmp_path / "policy.toml"
    policy.write_text("severity." + ".".join(["a"] * 20_000) + " = 1\n")
    assert policy.stat().st_size > 40_000
    r = answered("--root", str(fixture_root(ROOT)), "check", "--policy", str(policy), codes=(3,))
    assert f"{policy} nests deeper than 64 levels" in r.stderr and r.peak_mib < 64, (r.stderr, r.peak_mib)


@pytest.mark.parametrize(("text", "deepest"), [
    ("a.b.c = 1\n", 2), ("[t.u]\nv.w = 1.5\n", 1 + 1 + 1), ('x = {p.q.r = 1, "s.t" = 2}\n', 1 + 2),
    ("a = 1.5\nb = [1.5, 2.5]\n", 1), ('"a.b.c" = 1\n', 0), ("t = 1979-05-27T07:32:00\n", 0),
    ('a = "[[[" # [[[[\nb = [[1]]\n[t]\n', 2),
])
def test_toml_depth_counts_dotted_keys_not_values(text, deepest):
    """Brackets, and the dots of keys only, from each `=` back to the line's start or an inline table's `{` or
    `,` (a value's or a string's dots are not a key's); the most dotted header and key add up."""
    from numatune.system.infile import load_document, nesting

    assert nesting(text, "toml") == deepest
    load_document(text, "f", "toml")


def test_toml_depth_is_linear():
    from numatune.system.infile import nesting

    assert growth(lambda n: "".join(f"k{i}.a.b = {i}.5\n" for i in range(n)), lambda t: nesting(t, "toml"),
                  20_000) < 8
    assert growth(lambda n: "a.b" * n, lambda t: nesting(t, "toml"), 300_000) < 8


# -- NVSwitch -------------------------------------------------------------------------------------------
def _switch_gpu(index: int, bus_id: str) -> dict:
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{index}", "pci": {"bus_id": bus_id},
            "nvlinks": [{"link": n, "state": "active", "remote_pci": {"bus_id": "00000000:05:00.0"},
                         "remote_device_type": 2} for n in range(18)],
            "fabric": {"state": 3, "status": 0}, "compute_processes": []}


def _dgx_with_nvml(tmp_path, phantoms: int = 0):
    """The hand-made DGX H100 (8 GPUs) with an NVML record of its GPUs on NVSwitch, plus `phantoms` more GPUs
    that the tree does not have (one NVSwitch link each)."""
    from tests.handmade_dgx_h100 import PAIRS

    root = fixture_copy("handmade-dgx-h100-ids", tmp_path)
    gpus = [_switch_gpu(i, f"00000000:{gpu:02X}:00.0") for i, (gpu, *_rest) in enumerate(PAIRS)]
    gpus += [{"index": 8 + i, "pci": {"bus_id": f"{1 + (i >> 13):08X}:{(i >> 5) & 255:02X}:{i & 31:02X}.0"},
              "nvlinks": [{"state": "active", "remote_device_type": 2}]} for i in range(phantoms)]
    (root / "numatune").mkdir(exist_ok=True)
    (root / "numatune/nvml.json").write_text(json.dumps({"format": "numatune.nvml-record/1", "gpus": gpus}))
    return root


def test_an_nvswitch_record_of_12000_gpus_is_one_group(tmp_path):
    """Every pair of switched GPUs was a link object: 12,000 GPUs (1.4 MB) ran past 60 s into MemoryError.
    The members are one group; the matrix's GPUs keep NV18 between every two."""
    root = _dgx_with_nvml(tmp_path, 12_000)
    assert (root / "numatune/nvml.json").stat().st_size > 1_000_000
    doc = json.loads(answered("--root", str(root), "inspect", "--json", codes=(0,)).stdout)
    pm = doc["path_matrix"]
    assert pm["links"] == [] and [m["label"] for m in pm["nvswitch"]] == [f"GPU{i}" for i in range(8)]
    assert {m["count"] for m in pm["nvswitch"]} == {18} and len(doc["gpu_fabric"]["nvml_gpus"]) == 12_008
    assert {pm["cells"][i][j] for i in range(8) for j in range(8) if i != j} == {"NV18"}


def test_an_nvswitch_machine_prints_every_pair_as_before(tmp_path, cli):
    """What inspect prints for a real NVSwitch machine is unchanged: the links table lists the 28 pairs."""
    root = _dgx_with_nvml(tmp_path)
    out = cli("--root", str(root), "inspect").stdout
    table = out[out.index("GPU fabric links"):out.index("NVLink domain")]  # the links table alone
    rows = [line.split("│")[1:3] for line in table.splitlines() if line.startswith("│ GPU")]
    assert [(p.strip(), link.strip()) for p, link in rows] == [
        (f"GPU{i}-GPU{j}", "NV18") for i in range(8) for j in range(i + 1, 8)]


def test_the_nvml_record_is_read_in_linear_time():
    from numatune.readers.nvml import FORMAT, fabric_from_record

    def record(n: int) -> dict:
        return {"format": FORMAT, "gpus": [_switch_gpu(i, f"00000000:{i >> 5:02X}:{i & 31:02X}.0") for i in range(n)]}

    assert growth(record, lambda doc: fabric_from_record(doc, "", "nvml"), 500) < 8


# -- KFD agents and the path matrix ----------------------------------------------------------------------
KFD = "sys/class/kfd/kfd/topology/nodes"


def _kfd(path, agents: int) -> str:
    """One CPU agent and `agents` GPU agents, each with a PCIe io_link to the CPU (a 260 KB archive for 4,000)."""
    files = {"sys/devices/system/node/node0/cpulist": b"0-3\n", f"{KFD}/0/properties": b"cpu_cores_count 4\n"}
    for i in range(1, agents + 1):
        files[f"{KFD}/{i}/properties"] = b"simd_count 1\nlocation_id %d\ndomain %d\nvendor_id 4098\n" % (
            (i % 8192) << 3, i // 8192)
        files[f"{KFD}/{i}/io_links/0/properties"] = b"node_from %d\nnode_to 0\ntype 2\nweight 20\n" % i
    return _archive(path, files)


def test_4000_kfd_agents_are_refused_naming_the_topology(tmp_path):
    """Every agent scanned every link and 4,000 GPUs made a 16-million-cell matrix: 1.9-3.5 GB."""
    r = answered("--root", _kfd(tmp_path / "kfd.tar.gz", 4000), "inspect", "--json", codes=(3,))
    assert f"malformed /{KFD}: 4,001 agents, more than the 1024" in r.stderr, r.stderr


@pytest.mark.parametrize("fmt", ["json", "text", "svg", "html"])
def test_1000_gpus_leave_the_matrix_out_with_a_note(tmp_path, fmt):
    """Under the agent bound, 1,000 GPUs are listed and numbered, the million-cell matrix is not made (17 s)."""
    r = answered("--root", _kfd(tmp_path / "kfd.tar.gz", 1000), "inspect", "--format", fmt, codes=(0,))
    if fmt == "json":
        pm = json.loads(r.stdout)["path_matrix"]
        assert pm["cells"] == [] and len(pm["labels"]) == 1000 and len(pm["names"]) == 1000
        assert pm["cells_note"].startswith("1000 GPUs and 0 NICs: the GPU/NIC path matrix is left out above 256")
    elif fmt == "text":
        assert "the GPU/NIC path matrix is left out above 256 devices" in r.stdout and "GPU999 = " in r.stdout
    else:
        assert "the matrix is drawn up to 64" in r.stdout or "the matrix is shown up to 64" in r.stdout
        assert "Not drawn: 872 of 1,000 devices" in r.stdout and len(r.stdout) < 4 << 20


def test_agents_and_the_matrix_grow_linearly(tmp_path, monkeypatch):
    """Reading the KFD topology and placing its GPUs, and the matrix's lookups (a scan of every fabric link for
    each cell was most of 17 s at 1,000 GPUs), grow as the input."""
    import numatune.model.paths as paths
    from numatune.commands.inspect import inspect_report
    from numatune.system.host import Host

    monkeypatch.setattr(paths, "MAX_MATRIX_DEVICES", 0)
    assert growth(lambda n: _kfd(tmp_path / f"k{n}.tar.gz", n), lambda p: inspect_report(Host.open(p), None),
                  200) < 8
    from numatune.model.topology import FabricLink, GpuFabric, NvSwitchMember

    def fabric(n: int) -> GpuFabric:
        bdfs = [f"0000:{i >> 5:02x}:{i & 31:02x}.0" for i in range(n)]
        return GpuFabric(links=tuple(FabricLink(a, b, "xgmi", 1) for a, b in zip(bdfs, bdfs[1:], strict=False)),
                         nvswitch=tuple(NvSwitchMember(b, 18) for b in bdfs))

    def cells(f: GpuFabric) -> None:
        index = paths.FabricIndex(f)
        for m in f.nvswitch[:50]:
            for x in f.nvswitch:
                index.link(m.bdf, x.bdf)

    assert growth(fabric, cells, 400) < 8


# -- Slurm host lists -----------------------------------------------------------------------------------
def test_a_host_list_that_never_closes_its_bracket_is_one_line(tmp_path):
    """`NodeName=a[a[a[...` ran a backtracking expression: 320 KB took 33 s."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=" + "a[" * 160_000 + " CPUs=4\n")
    assert conf.stat().st_size > 320_000
    r = answered("--root", str(fixture_root(ROOT)), "check", "--slurm-conf", str(conf), codes=(3,))
    assert "bad hostlist 'a[a[a[" in r.stderr and "the bracket at character 2" in r.stderr, r.stderr


@pytest.mark.parametrize(("name", "text", "words"), [
    ("gres.conf", "Name=gpu File=/dev/nvidia[0-999999]\n", "names more than 1024 hosts"),
    ("gres.conf", "".join(f"Name=gpu File=/dev/nvidia[0-{i}]\n" for i in range(100)),
     "names more than 1024 GPU device files"),
    ("slurm.conf", "NodeName=DEFAULT " + " ".join(f"K{i}=1" for i in range(100_000))
     + "\n" + "NodeName=n[1-2] CPUs=4\n" * 20_000, "Slurm's lines set at most a few dozen keys"),
    ("gres.conf", "Name=gpu File=/dev/" + "n" * 300_000 + "[0-999]\n", "names more than 16 MiB of host names"),
])
def test_scheduler_files_are_bounded_by_what_they_expand_to(tmp_path, name, text, words):
    """A million device files (each a finding), 100,000 default keys copied into each of 20,000 node lines, a
    300 KB prefix times a million hosts: refused before they are made."""
    conf = tmp_path / name
    conf.write_text(text)
    flag = "--gres-conf" if name == "gres.conf" else "--slurm-conf"
    r = answered("--root", str(fixture_root(ROOT)), "check", flag, str(conf), "--node-name", "n1", codes=(3,))
    assert words in r.stderr, r.stderr


def test_host_lists_are_matched_as_they_expand():
    from numatune.plan.slurm import expand_hostlist, first_host, in_hostlist

    for expr in ("gpu[01-03,7],login", "r[1-2]n[08-11]x", "a[0-3,10-12]b", "n[1-20]", "x,y,,z", "a[5-3,9]"):
        names = expand_hostlist(expr)
        assert all(in_hostlist(n, expr) for n in names), expr
        assert first_host(expr) == (names[0] if names else None)
    assert not in_hostlist("gpu7x", "gpu[01-03,7]") and not in_hostlist("gpu07", "gpu[01-03,7]")
    assert not in_hostlist("r3n08x", "r[1-2]n[08-11]x") and not in_hostlist("n007", "n[1-20]")
    assert in_hostlist("n7", "n[1-20]") and not in_hostlist("n21", "n[1-20]")


def test_host_lists_are_parsed_and_matched_in_linear_time():
    from numatune.errors import InputError
    from numatune.plan.slurm import expand_hostlist, in_hostlist

    def unclosed(text: str) -> None:
        with pytest.raises(InputError, match="bad hostlist"):
            expand_hostlist(text)

    assert growth(lambda n: "a[" * n, unclosed, 20_000) < 8
    assert growth(lambda n: "a" * n + "[", unclosed, 100_000) < 8
    assert growth(lambda n: "a[1]" * n, lambda t: in_hostlist("a1" * 10, t), 50_000) < 8
    assert growth(lambda n: ",".join(f"n{i}[1-9]" for i in range(n)), lambda t: in_hostlist("n9999[9]", t),
                  5_000) < 8


# -- reports with many labels ----------------------------------------------------------------------------
def _report(labels: int, nodes: int = 1) -> dict:
    """An inspect report whose path matrix names `labels` GPUs and as many NICs, with one-cell rows."""
    names = [f"GPU{i}" for i in range(labels)] + [f"NIC{i}" for i in range(labels)]
    return {"schema": "numatune.inspect/4", "cpu": {"sockets": [0], "online": [0], "offline": []},
            "nodes": [{"id": i, "cpus": [i], "memory_total_kib": 1 << 20, "distances": {str(i): 10}}
                      for i in range(nodes)],
            "devices": [], "settings": {}, "findings": [],
            "path_matrix": {"labels": names, "devices": [f"0000:00:00.{i}" for i in range(len(names))],
                            "cells": [["X"] for _ in names]}}


def test_diff_and_fleet_of_reports_with_40000_labels(tmp_path):
    """Each GPU label scanned every label for the nearest NIC: 10,000 labels 23 s, 40,000 no answer."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_report(20_000)))
    b.write_text(json.dumps(_report(20_000, nodes=2)))
    answered("diff", str(a), str(b), codes=(0, 1))
    answered("fleet", str(a), str(b), codes=(0, 1))


def test_report_views_grow_linearly():
    """diff's view and fleet's shape: per label and per node, work bounded by what the report holds (40,000
    nodes without a distance were a dash for each node of each row)."""
    from numatune.analysis.diff import view
    from numatune.analysis.fleet import shape

    assert growth(_report, view, 2_000) < 8
    assert growth(_report, shape, 2_000) < 8
    assert growth(lambda n: _report(1, nodes=n), shape, 2_000) < 8
    whole = _report(1, nodes=3)
    for n in whole["nodes"]:
        n["distances"] = {"0": 10, "1": 20, "2": 30}
    assert shape(whole)["distances"] == "10 20 30 / 10 20 30 / 10 20 30"
    assert shape(_report(1, nodes=3))["distances"] == "0:10 / 1:10 / 2:10"


# -- pictures -------------------------------------------------------------------------------------------
def _nodes(path, n: int) -> str:
    """`n` NUMA nodes with one CPU each and a full distance matrix (78 KB for 1,000)."""
    row = " ".join(["20"] * n).encode() + b"\n"
    files = {}
    for i in range(n):
        files[f"sys/devices/system/node/node{i}/cpulist"] = b"%d\n" % i
        files[f"sys/devices/system/node/node{i}/distance"] = row
    return _archive(path, files)


@pytest.mark.parametrize("fmt", ["svg", "html"])
def test_a_1000_node_tree_draws_64_nodes_and_says_so(tmp_path, fmt):
    """inspect -f svg of 1,000 nodes was a 188 MB file in 25 s and 1.2 GB (a million distance cells); html
    embeds the picture and wrote the million cells again as a table (N^3 with its column lookups)."""
    r = answered("--root", _nodes(tmp_path / "n.tar.gz", 1000), "inspect", "--format", fmt, codes=(0,))
    assert "Not drawn: 936 of 1,000 NUMA nodes" in r.stdout and len(r.stdout) < 4 << 20, len(r.stdout)


@pytest.fixture(scope="module")
def kernel_most_nodes(tmp_path_factory):
    """A generated machine of 1,024 nodes (MAX_NUMNODES; 64 CPUs on the first 32) each with a full distance row: a
    million distances, as an archive."""
    from tests.big_roots import topology_root

    base = tmp_path_factory.mktemp("nodes")
    return _tar_of(topology_root(base, 64, 1024), base / "n.tar.gz")


@pytest.mark.parametrize("args", [["inspect", "--json"], ["inspect", "--format", "prometheus"],
                                  ["launch", "--node", "0", "--dry-run", "--", "true"], ["snapshot", "-o", "{out}"]],
                         ids=lambda a: " ".join(a[:3]))
def test_a_million_distances_within_the_bounds(kernel_most_nodes, tmp_path, args):
    """4,096 nodes of distance rows (16.7 million distances in a 1.1 MB archive) took `launch` 690 MB and `inspect
    --json` 18-26 s and 2 GB; no kernel numbers more than 1,024 nodes, and that many are read and written in time
    and memory linear in their distances: the JSON writer and Prometheus write a row of numbers in one join (290
    MB before), and snapshot's dry runs read each row once (eleven times: 21 s)."""
    out = str(tmp_path / "snap.tar.gz")
    r = answered("--root", kernel_most_nodes, *[a.format(out=out) for a in args], codes=(0,))
    if args[0] == "inspect" and args[1] == "--json":
        nodes = json.loads(r.stdout)["nodes"]
        assert len(nodes) == 1024 and nodes[1023]["distances"]["1023"] == 10 and len(nodes[5]["distances"]) == 1024
    elif args[0] == "inspect":
        assert r.stdout.count("numatune_node_distance{") == 1024 * 1024


def test_more_nodes_than_a_kernel_numbers_are_refused(tmp_path):
    path = _archive(tmp_path / "n.tar.gz", {f"sys/devices/system/node/node{i}/cpulist": b"\n" for i in range(1025)})
    for args in (["inspect", "--json"], ["launch", "--node", "0", "--dry-run", "--", "true"]):
        r = answered("--root", path, *args, codes=(3,))
        assert "malformed /sys/devices/system/node: 1,025 nodes, more than the 1,024 any kernel numbers" in r.stderr


def test_distances_are_read_and_written_in_time_linear_in_them(tmp_path):
    """Four times the nodes is sixteen times the distances: the reader, the JSON writer and the exposition grow
    as the distances (a cubic step would read 64)."""
    from numatune.commands.inspect import inspect_json, inspect_report
    from numatune.render.prometheus import inspect_metrics
    from numatune.system.host import Host

    def run(path: str) -> None:
        inspect_json(Host.open(path), None)
        topo, _, findings = inspect_report(Host.open(path), None)
        inspect_metrics(topo, findings)

    small, large = _nodes(tmp_path / "s.tar.gz", 64), _nodes(tmp_path / "l.tar.gz", 256)
    ratio = min(best_seconds(lambda: run(large)) / best_seconds(lambda: run(small)) for _ in range(2))
    assert ratio < 32, ratio


def test_the_picture_grows_with_what_it_draws_not_the_document():
    from numatune.render.picture import render_svg

    def doc(n: int) -> dict:
        d = _report(n // 4, nodes=n)
        for node in d["nodes"]:
            node["distances"] = {str(i): 10 + (i != node["id"]) * 10 for i in range(0, n, max(1, n // 64))}
        d["devices"] = [{"bdf": f"0000:{i >> 5:02x}:{i & 31:02x}.0", "kind": "gpu", "numa_node": i % n}
                        for i in range(n)]
        d["findings"] = [{"code": "NT001", "severity": "info", "message": "m", "subject": f"node {i}"}
                         for i in range(n)]
        return d

    assert growth(doc, render_svg, 400) < 8
    assert len(render_svg(doc(4000))) < 2 << 20


# -- many GPUs and NICs (found by trying: each GPU compared with every NIC) -------------------------------
def _pci_tree(path, gpus: int, nics: int) -> str:
    """`gpus` NVIDIA GPUs and `nics` NICs as PCI functions under one root port of one host bridge."""
    files, links = {"sys/devices/system/node/node0/cpulist": b"0-3\n"}, []
    for i in range(gpus + nics):
        bdf = f"0000:{1 + (i >> 8):02x}:{(i >> 3) & 31:02x}.{i & 7}"
        d = f"sys/devices/pci0000:00/0000:00:01.0/{bdf}"
        files[f"{d}/class"] = b"0x030200\n" if i < gpus else b"0x020000\n"
        files[f"{d}/vendor"] = b"0x10de\n" if i < gpus else b"0x15b3\n"
        files[f"{d}/numa_node"] = b"0\n"
        links.append((f"sys/bus/pci/devices/{bdf}", f"../../../devices/pci0000:00/0000:00:01.0/{bdf}"))
    _archive(path, files)
    with tarfile.open(path, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for m, data in members:
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return str(path)


@pytest.fixture(scope="module")
def many_devices(tmp_path_factory):
    return _pci_tree(tmp_path_factory.mktemp("pci") / "pci.tar.gz", 2000, 2000)


@pytest.mark.parametrize("args", [["inspect", "--json"], ["check", "--json"], ["emit", "slurm"], ["emit", "dra"],
                                  ["irq", "--json"], ["inspect", "--format", "prometheus"]],
                         ids=lambda a: " ".join(a))
def test_2000_gpus_and_2000_nics_are_read_in_linear_time(many_devices, args):
    """A 280 KB archive: each GPU's nearest NIC was a scan of every NIC (inspect, check, prometheus, nfd), emit
    slurm compared every GPU pair (and searched a list for each), emit dra scanned the NICs per GPU twice, and
    irq looked each device up by a scan of all of them (8,000 NICs: 6.6 s)."""
    r = answered("--root", many_devices, *args, codes=(0, 1))
    if args == ["emit", "slurm"]:
        assert "GPUs under one PCIe switch: 0-1 PIX, 0-2 PIX" in r.stdout and "1,999,000 pairs in all" in r.stdout


def _scan_nearest(gpu, nics):
    """The scan NicIndex replaces: the first NIC of the nearest path kind."""
    from numatune.model.paths import RANK, connection

    best = None
    for nic in nics:
        kind = connection(gpu, nic)
        if best is None or RANK[kind] < RANK[best[1]]:
            best = (nic, kind)
    return best


def test_the_nic_index_finds_what_the_scan_found():
    """Random devices over every fact `connection` reads (function, bridges, host bridge, node, KFD agent)."""
    import random

    from numatune.model.paths import NicIndex
    from numatune.model.topology import PciDevice

    rng = random.Random(41)

    def dev(kind: str, i: int) -> PciDevice:
        chain = tuple(rng.choice(["0000:00:01.0", "0000:00:02.0", "0000:01:00.0"]) for _ in range(rng.randint(0, 2)))
        return PciDevice(bdf=rng.choice([f"0000:{i:02x}:00.0", "0000:99:00.0"]), path=rng.choice(["", "/sys/x"]),
                         class_code=0, vendor_id=0, device_id=0, kind=kind, numa_node=rng.choice([None, 0, 1]),
                         inferred_node=rng.choice([None, None, 0, 1]), ancestors=chain,
                         host_bridge=rng.choice([None, "pci0000:00", "pci0000:40"]),
                         kfd_cpu_agent=rng.choice([None, 0, 1]))

    for _ in range(3000):
        nics = [dev("nic", i) for i in range(rng.randint(0, 6))]
        gpu = dev("gpu", 50)
        assert NicIndex(nics).nearest(gpu) == _scan_nearest(gpu, nics), (gpu, nics)


def test_dra_pairings_find_what_the_scan_found():
    import random

    from numatune.plan.dra import DeviceAttributes, pairings

    rng = random.Random(41)

    def attrs(kind: str, i: int) -> DeviceAttributes:
        node = rng.choice([None, 0, 1, 2])
        return DeviceAttributes(f"0000:{i:02x}:00.0", kind, f"{kind.upper()}{i}", "",
                                rng.choice([None, "pci0", "pci1"]), node,
                                None if node is None else tuple(rng.sample([0, 1, 2], rng.randint(1, 3))))

    def scan(gpus, nics, form):
        """Each GPU in turn a NIC of its own under its root complex, then the rest one on a shared numaNode, each
        NIC serving one GPU; a GPU left over is shown with the first NIC it would share."""
        def share(a, b) -> bool:
            if a.numa_node is None or b.numa_node is None:
                return False
            if form == "list":
                return bool(set(a.numa_nodes or ()) & set(b.numa_nodes or ()))
            return a.numa_node == b.numa_node

        def root(a, b) -> bool:
            return a.pcie_root is not None and a.pcie_root == b.pcie_root

        got: dict = {}
        for test in (root, share):
            for g in gpus:
                if g.bdf not in got:
                    n = next((n for n in nics if test(g, n) and n not in got.values()), None)
                    if n is not None:
                        got[g.bdf] = n
        return [got.get(g.bdf) or next((n for n in nics if root(g, n)), None) or next(
            (n for n in nics if share(g, n)), None) for g in gpus]

    for _ in range(2000):
        devices = [attrs("gpu", i) for i in range(rng.randint(1, 4))]
        devices += [attrs("nic", i) for i in range(rng.randint(0, 5))]
        nics = sorted((a for a in devices if a.kind == "nic"), key=lambda a: a.bdf)
        for form in ("scalar", "list"):
            assert [p.nic for p in pairings(devices, form)] == scan([g for g in devices if g.kind == "gpu"], nics, form)


def test_nearest_nics_and_pairings_grow_linearly():
    from numatune.model.paths import NicIndex
    from numatune.model.topology import PciDevice

    def devices(n: int) -> tuple[list, list]:
        def one(kind: str, i: int) -> PciDevice:
            return PciDevice(bdf=f"0000:{i >> 8:02x}:{i & 255:02x}.0", path="/sys/x", class_code=0, vendor_id=0,
                             device_id=0, kind=kind, numa_node=0, ancestors=("0000:00:01.0",), host_bridge="pci0000:00")
        return [one("gpu", i) for i in range(n)], [one("nic", n + i) for i in range(n)]

    def nearest(pair: tuple[list, list]) -> None:
        index = NicIndex(pair[1])
        for g in pair[0]:
            index.nearest(g)

    assert growth(devices, nearest, 2000) < 8



# -- files of millions of records and cgroup paths thousands of levels deep ----------------------------------
PID = 4242
FULL = (32 << 20) - 64  # under the 32 MiB read bound


def _process_tree(base, files: dict[str, bytes]):
    """A generated two-node machine of 8 CPUs with process PID (LOCAL_RANK=0), `files` (path in the root ->
    bytes) written over."""
    from tests.big_roots import numa_maps, topology_root
    from tests.conftest import write_process

    root = topology_root(base, 8, 2)
    write_process(root, PID, "LOCAL_RANK=0\x00", numa_maps(16))
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _tar_of(root, path) -> str:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        tar.add(root, arcname="root")
    return str(path)


def _cgroup(levels: int) -> bytes:
    return b"0::/" + b"/".join([b"a"] * levels) + b"\n"


@pytest.mark.parametrize(("levels", "archive"), [(990, True), (2000, True), (32_000, True), (32_000, False)])
def test_a_cgroup_path_thousands_of_levels_deep(tmp_path, levels, archive):
    """A process's cgroup of ~990 levels was exit 70 in an archive (the archive's lookup recursed a level a
    directory: RecursionError); 32,000 levels in a directory made a list of every parent path, 1 GB. The lookup is
    a loop, and a path of PATH_MAX bytes or more (which no kernel writes) names no cpuset directory."""
    root = _process_tree(tmp_path, {f"proc/{PID}/cgroup": _cgroup(levels)})
    where = _tar_of(root, tmp_path / "root.tar.gz") if archive else str(root)
    doc = json.loads(answered("--root", where, "audit", str(PID), "--json", codes=(0,)).stdout)
    proc = doc["processes"][0]
    assert proc["cgroup"].count("/") == levels and proc["cpuset_cpus"] is None, proc["cpuset_cpus"]


def test_a_cgroup_cpuset_is_found_up_a_deep_path_in_an_archive(tmp_path):
    """Walked up from 1,000 levels (under PATH_MAX) to the directory that has the file, in an archive's index."""
    deep = "/".join(["a"] * 1000)
    root = _process_tree(tmp_path, {f"proc/{PID}/cgroup": f"0::/{deep}\n".encode(),
                                    "sys/fs/cgroup/a/a/cpuset.cpus.effective": b"0-5\n"})
    doc = json.loads(answered("--root", _tar_of(root, tmp_path / "r.tar.gz"), "audit", str(PID), "--json",
                              codes=(0,)).stdout)
    assert doc["processes"][0]["cpuset_cpus"] == [0, 1, 2, 3, 4, 5]


def test_the_archive_lookup_of_deep_paths_is_a_loop(tmp_path):
    from numatune.system.tarindex import ArchiveRoot, read_archive

    path = _archive(tmp_path / "a.tar.gz", {"sys/a/b/c": b"x"})
    fs = ArchiveRoot(read_archive(path, "a"), "")
    assert fs.read("sys/a/b/c", 1) == b"x" and fs.kind("sys/a/b") == "dir"
    assert fs.kind("sys/" + "/".join(["a"] * 5000) + "/c") is None  # 5,000 levels: no recursion
    assert fs.kind("sys/a/b/c/d") is None and fs.kind("sys/x/b") is None


RECORDS = [  # (file, 3-byte record, command, what the refusal names)
    (f"proc/{PID}/numa_maps", b"a\n\n", "audit", "lines"),
    (f"proc/{PID}/cmdline", b"a\0\0", "audit", "arguments"),
    (f"proc/{PID}/status", b"a:\n", "audit", "lines"),
    (f"proc/{PID}/cgroup", b"0:\n", "audit", "lines"),
    (f"proc/{PID}/task/{PID}/sched", b"a\n\n", "audit", "lines"),
    ("proc/cpuinfo", b"a:\n", "inspect", "lines"),
    ("sys/devices/system/node/node0/meminfo", b"a \n", "inspect", "lines"),
    ("proc/interrupts", b"aa ", "irq", "CPU columns"),  # a header of 11 million columns (13.5 s, 600 MB)
]


@pytest.mark.parametrize(("name", "record", "command", "what"), RECORDS, ids=[r[0].rsplit("/", 1)[1] for r in RECORDS])
def test_a_file_of_millions_of_3_byte_records_is_refused_naming_it(tmp_path, name, record, command, what):
    """32 MiB of 3-byte records is 11 million pieces, each a Python string: 0.85-1.3 GB and up to 32 s. The pieces
    are counted before any is made: exit 3 naming the file."""
    data = record * (FULL // 3)
    if name.endswith("status"):
        data = b"Name:\tpython\nPPid:\t1\n" + data
    root = _process_tree(tmp_path, {name: data})
    args = ["audit", str(PID), "--json"] if command == "audit" else [command, "--json"]
    r = answered("--root", str(root), *args, codes=(3,))
    assert f"malformed /{name}: more than " in r.stderr and f" {what}, more than any real one holds" in r.stderr, (
        r.stderr)


def test_an_environment_of_millions_of_entries_is_read_for_its_keys(tmp_path):
    """The environment is never split (11 million entries were 850 MB and 10 s): each named key is one search."""
    data = b"a=\0" * (FULL // 3 - 8) + b"LOCAL_RANK=3\0"
    root = _process_tree(tmp_path, {f"proc/{PID}/environ": data})
    doc = json.loads(answered("--root", str(root), "audit", str(PID), "--json", codes=(0,)).stdout)
    assert doc["processes"][0]["rank"] == 3


def test_the_record_readers_grow_linearly():
    from numatune.readers.cpus import parse_cpuinfo_model
    from numatune.readers.nodes import parse_node_meminfo
    from numatune.readers.procs import parse_environ, parse_numa_maps, parse_status

    assert growth(lambda n: "a=\0" * n + "LOCAL_RANK=1\0", parse_environ, 200_000) < 8
    assert growth(lambda n: "".join(f"k{i}:\t{i}\n" for i in range(n)), parse_status, 16_000) < 8
    assert growth(lambda n: "".join(f"Node 0 K{i}: {i} kB\n" for i in range(n)), parse_node_meminfo, 4_000) < 8
    assert growth(lambda n: "".join(f"k{i}: {i}\n" for i in range(n)), parse_cpuinfo_model, 20_000) < 8
    assert growth(lambda n: "".join(f"{i:012x} default anon=1 N0=1\n" for i in range(n)), parse_numa_maps, 5_000) < 8


def test_a_snapshot_record_of_a_million_lines_is_read_once(tmp_path):
    """SNAPSHOT.txt's `unreadable:` lines were scanned again for each file a command found missing (800,000 lines:
    `inspect --json` 7.4 s); they are read once into a set. Lines and lookups grown together stay linear."""
    from numatune.system.host import Host

    def make(n: int):
        path = _archive(tmp_path / f"s{n}.tar.gz", {
            "SNAPSHOT.txt": "".join(f"unreadable: /sys/x{i}\n" for i in range(n)).encode()})
        return path, n

    def run(made) -> None:
        path, n = made
        host = Host.open(path)
        assert host._was_denied(f"/sys/x{n - 1}") and not host._was_denied("/sys/y")
        for i in range(n // 20):
            host._was_denied(f"/sys/y{i}")

    assert growth(make, run, 20_000) < 8


def test_an_archive_lookup_grows_with_the_path():
    """A path thousands of levels deep is looked up in time linear in its length (an archive member is at most 32
    levels, so the walk down joins one component to a short member name at a time)."""
    from numatune.system.tarindex import ArchiveRoot, TarIndex

    index = TarIndex("a")
    for name in ("sys", "sys/a"):
        index._add(name, b"5", 0, "", None)
    index._add("sys/a/l", b"2", 0, ".", None)  # a link to its own directory: sys/a/l/l/l/... is sys/a

    def lookup(path: str) -> None:
        assert ArchiveRoot(index, "").kind(path) == "dir"

    assert growth(lambda n: "sys/a/" + "/".join(["l"] * n), lookup, 2_000) < 8
