"""numatune emit slurm|kubelet|nfd and check --slurm-conf/--gres-conf/--kubelet-config, end to end."""

from __future__ import annotations

import json
import re

import pytest

from numatune.cpulist import parse_cpulist
from tests.conftest import PROJECT, fixture_root, tree_fixtures

yaml = pytest.importorskip("yaml")  # tests extra; numatune itself writes YAML without it

KUBELET_TYPES = json.loads((PROJECT / "tests" / "data" / "kubelet" / "kubeletconfiguration-v1beta1.json").read_text())
DONE_TREES = ["handmade-launch-2s4gpu-cxl", "vm-two-socket", "vm-cxl", "nvidiagpunumanodes",
              "16em64t-4s2c2t-offlines", "memorysidecaches", "32intel64-2p8co2t+8ve"]


def _root(name: str) -> str:
    return str(fixture_root(name))


def _emit_json(cli, name: str, *args: str) -> dict:
    result = cli("--root", _root(name), "emit", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", DONE_TREES)
def test_emit_slurm_node_line_and_one_gpu_line_per_gpu(cli, name):
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    topo = read_topology(Host.open(fixture_root(name)))
    doc = _emit_json(cli, name, "slurm")
    assert doc["schema"] == "numatune.emit/1" and doc["target"] == "slurm"
    node = doc["node"]
    assert re.fullmatch(r"NodeName=\S+ CPUs=\d+ Sockets=\d+ CoresPerSocket=\d+ ThreadsPerCore=\d+ RealMemory=\d+"
                        r"( Gres=gpu:\d+)?", node["line"]), node["line"]
    assert node["cpus"] == len(topo.cpu.online) and node["sockets"] == len(topo.cpu.sockets)
    gpu_lines = [g for g in doc["gres"] if g["name"] == "gpu"]
    assert len(gpu_lines) == len(topo.gpus) == node["gpus"]
    layout = doc["layout"]["sockets"]
    for g in gpu_lines:
        gpu = topo.device(g["bdf"])
        # Cores= is exactly the Slurm socket holding the GPU's node's CPUs
        sockets = [s for s in layout if {c for core in s for c in core["cpus"]} & set(topo.node(gpu.node).cpus)]
        assert len(sockets) == 1
        assert g["cores"] == [core["core"] for core in sockets[0]]
        assert f"Cores={g['cores'][0]}-{g['cores'][-1]}" in g["line"]
    assert doc["text"].count("Name=gpu ") == len(topo.gpus)


def test_emit_slurm_text_is_the_config(cli):
    result = cli("--root", _root("handmade-launch-2s4gpu-cxl"), "emit", "slurm", "--node-name", "gpu01",
                 "--reserve-cores", "1", "--reserve-memory", "4096")
    assert result.exit_code == 0
    lines = [x for x in result.stdout.splitlines() if x and not x.startswith("#")]
    assert lines[0] == "GresTypes=gpu"
    assert lines[1] == ("NodeName=gpu01 CPUs=16 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=257812 "
                        "Gres=gpu:4 CpuSpecList=0-1,8-9 MemSpecLimit=4096")
    assert lines[2:] == [f"NodeName=gpu01 Name=gpu File=/dev/nvidia{i} Cores={'0-3' if i < 2 else '4-7'}"
                         for i in range(4)]
    assert "AutoDetect=nvml" in result.stdout


def test_emit_slurm_amd_gpus_use_render_nodes_or_say_why(cli):
    doc = _emit_json(cli, "topo-mi210-xgmi-pcie", "slurm")
    """topo-mi210-xgmi-pcie is a KFD topology dump only (no PCI device directories, no CPUs): 8 GPU lines
    that say why File= and Cores= are missing rather than guess."""
    assert len(doc["gres"]) == 8 and doc["node"]["gpus"] == 8
    for g in doc["gres"]:
        assert g["file"] is None and "no device file" in g["note"] and g["cores"] == []
    assert doc["layout"]["problem"] == "no online CPU with topology in this root"
    # XGMI links from the KFD io_links (the fabric reader): two hives of four, direct links inside each
    assert [g["links"] for g in doc["gres"][:5:4]] == [[-1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, -1, 1, 1, 1]]
    assert all(line.startswith("# NodeName=") for line in doc["text"].splitlines() if " Name=gpu" in line)
    assert "records no XGMI links" in doc["autodetect"]


def _kubelet(cli, name: str, *args: str) -> tuple[dict, str]:
    result = cli("--root", _root(name), "emit", "kubelet", *args)
    assert result.exit_code == 0, result.stderr
    return yaml.safe_load(result.stdout), result.stdout


TYPE_CHECK = {
    "string": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
    "int32": lambda v: isinstance(v, int) and not isinstance(v, bool), "map[string]string":
        lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
}


@pytest.mark.parametrize("name", ["handmade-launch-2s4gpu-cxl", "vm-two-socket", "vm-cxl", "nvidiagpunumanodes",
                                  "fakememinitiators-1np2c+1npp+gi"])
def test_kubelet_yaml_has_only_real_fields_and_sums_right(cli, name):
    from numatune.analysis.scheduler import _mib
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    doc, _ = _kubelet(cli, name)
    fields = KUBELET_TYPES["KubeletConfiguration"]
    assert set(doc) <= set(fields), set(doc) - set(fields)
    for key, value in doc.items():
        kind = fields[key]
        if kind == "[]MemoryReservation":
            for entry in value:
                assert set(entry) == set(KUBELET_TYPES["MemoryReservation"])
                assert isinstance(entry["numaNode"], int) and set(entry["limits"]) == {"memory"}
        else:
            assert TYPE_CHECK[kind](value), (key, value)
    for key, allowed in KUBELET_TYPES["enums"].items():
        assert doc.get(key, allowed[0]) in allowed
    assert doc["apiVersion"] == KUBELET_TYPES["apiVersion"] and doc["kind"] == "KubeletConfiguration"
    total = sum(_mib(e["limits"]["memory"]) for e in doc.get("reservedMemory", ()))
    if "memoryManagerPolicy" not in doc:  # NUMA ids kubelet cannot represent (nvidiagpunumanodes): no reservedMemory
        assert name == "nvidiagpunumanodes" and total == 0
        return
    assert total == _mib(doc["kubeReserved"]["memory"]) + _mib(doc["systemReserved"]["memory"]) + \
        _mib(doc["evictionHard"]["memory.available"])
    topo = read_topology(Host.open(fixture_root(name)))
    reserved = parse_cpulist(doc["reservedSystemCPUs"])
    node_ids = {n.id for n in topo.nodes}
    assert {e["numaNode"] for e in doc["reservedMemory"]} <= node_ids
    for n in topo.nodes:
        if n.cpus:
            assert reserved & set(n.cpus) and set(n.cpus) - reserved, n.id  # some reserved, some left for pods


def test_kubelet_reserved_cpus_are_the_irq_plan_housekeeping_cores(cli):
    from numatune.plan.irq import housekeeping_cores
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    doc, _ = _kubelet(cli, "handmade-launch-2s4gpu-cxl", "--reserve-cores", "2")
    topo = read_topology(Host.open(fixture_root("handmade-launch-2s4gpu-cxl")))
    want = {c for cores in housekeeping_cores(topo, 2).values() for core in cores for c in core}
    assert parse_cpulist(doc["reservedSystemCPUs"]) == want == {0, 1, 8, 9, 4, 5, 12, 13}
    assert doc["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}


def test_kubelet_many_numa_nodes_raise_the_topology_manager_limit(cli):
    doc, _ = _kubelet(cli, "fakememinitiators-1np2c+1npp+gi")
    assert doc["topologyManagerPolicyOptions"]["max-allowable-numa-nodes"].isdigit()


def test_a_one_cpu_node_is_never_wholly_reserved(cli, tmp_path):
    """Hand-made from dev-1node-x86 with CPU 1 offline: one core in all. Reserving it (the default
    --reserve-cores 1) left pods no CPU and check said NT530 of numatune's own config."""
    from tests.conftest import fixture_copy

    root = fixture_copy("dev-1node-x86", tmp_path / "copy")
    (root / "sys/devices/system/cpu/online").write_text("0\n")
    (root / "sys/devices/system/node/node0/cpulist").write_text("0\n")
    emitted = cli("--root", str(root), "emit", "kubelet")
    assert emitted.exit_code == 0, emitted.stderr
    doc, text = yaml.safe_load(emitted.stdout), emitted.stdout
    assert "reservedSystemCPUs" not in doc and "cpuManagerPolicy" not in doc
    assert "every node with CPUs has too few" in text
    (tmp_path / "kubelet.yaml").write_text(text)
    result = cli("--root", str(root), "check", "--kubelet-config", str(tmp_path / "kubelet.yaml"), "--json")
    sched = [c for c in json.loads(result.stdout)["checks"] if c["group"] == "scheduler"]
    assert [c["status"] for c in sched] == ["passed"], sched
    # asked for in so many words, the impossible reservation is refused, in emit slurm and kubelet alike
    for target in ("slurm", "kubelet"):
        refused = cli("--root", str(root), "emit", target, "--reserve-cores", "1")
        assert refused.exit_code == 2 and refused.stdout == "", target
        assert refused.stderr.strip() == "numatune: error: --reserve-cores 1: node(s) 0 have only 1 core(s); " \
            "reserving 1 would leave no core there for jobs, pods or ranks (none here: a node has a single core)"


@pytest.mark.parametrize("args", [("emit", "slurm"), ("emit", "kubelet"), ("irq", "plan", "--ranks-per-node", "2")])
def test_impossible_reservations_are_refused_with_exit_2(cli, args):
    """vm-two-socket has two cores per node: --reserve-cores 99 (or 2) cannot be honoured; emit used to exit 0
    with a comment and no reservation (kubelet without cpuManagerPolicy: static)."""
    for n, fewest in (("99", 2), ("2", 2)):
        res = cli("--root", _root("vm-two-socket"), *args, "--reserve-cores", n)
        assert res.exit_code == 2 and res.stdout == "", (args, n)
        assert f"--reserve-cores {n}: node(s) 0-1 have only {fewest} core(s)" in res.stderr
        assert res.stderr.rstrip().endswith("(at most 1 here)")
    ok = cli("--root", _root("vm-two-socket"), *args, "--reserve-cores", "1")
    assert ok.exit_code == 0, ok.stderr


@pytest.mark.parametrize("name", tree_fixtures())
def test_emitted_configs_pass_check(cli, tmp_path, name):
    """What numatune writes, numatune accepts: on every fixture machine, CPU-less and NUMA-less trees included."""
    root = _root(name)
    text = cli("--root", root, "emit", "slurm", "--node-name", "gpu01").stdout
    conf = [x for x in text.splitlines() if x.startswith(("NodeName", "GresTypes"))]
    (tmp_path / "slurm.conf").write_text("\n".join(x for x in conf if "Name=gpu " not in x) + "\n")
    (tmp_path / "gres.conf").write_text("\n".join(x for x in conf if "Name=gpu " in x) + "\n")
    cli("--root", root, "emit", "kubelet", "-o", str(tmp_path / "kubelet.yaml"))
    result = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "slurm.conf"), "--gres-conf",
                 str(tmp_path / "gres.conf"), "--kubelet-config", str(tmp_path / "kubelet.yaml"), "--json")
    doc = json.loads(result.stdout)
    sched = [c for c in doc["checks"] if c["group"] == "scheduler"]
    assert [c["status"] for c in sched] == ["passed", "passed", "passed"], sched


WRONG_GRES = """# hand-made wrong gres.conf for handmade-launch-2s4gpu-cxl: Linux CPU ids pasted as Cores=,
# and GPU 2 (node 1) given socket 0's cores
NodeName=gpu01 Name=gpu File=/dev/nvidia0 Cores=0-3
NodeName=gpu01 Name=gpu File=/dev/nvidia1 Cores=0-3,8-11
NodeName=gpu01 Name=gpu File=/dev/nvidia2 Cores=0-3
NodeName=gpu01 Name=gpu File=/dev/nvidia3 Cores=4-7
"""
WRONG_SLURM = "NodeName=gpu01 CPUs=16 Sockets=2 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=300000 Gres=gpu:8\n"
WRONG_KUBELET = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
topologyManagerPolicy: restricted
memoryManagerPolicy: Static
reservedSystemCPUs: "0-3,8-11"
kubeReserved: {memory: 1Gi}
systemReserved: {memory: 1Gi}
reservedMemory:
- numaNode: 0
  limits: {memory: 1Gi}
"""


def test_check_flags_wrong_slurm_gres_and_kubelet_files(cli, tmp_path):
    for name, text in (("slurm.conf", WRONG_SLURM), ("gres.conf", WRONG_GRES), ("kubelet.yaml", WRONG_KUBELET)):
        (tmp_path / name).write_text(text)
    result = cli("--root", _root("handmade-launch-2s4gpu-cxl"), "check", "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--gres-conf", str(tmp_path / "gres.conf"), "--kubelet-config", str(tmp_path / "kubelet.yaml"),
                 "--json")
    assert result.exit_code == 1
    found = {(f["code"], f["subject"].rsplit("/", 1)[-1]) for f in json.loads(result.stdout)["findings"]
             if f["code"] >= "NT520"}
    assert found == {
        ("NT520", "slurm.conf:1"), ("NT521", "slurm.conf:1"), ("NT524", "slurm.conf:1"),
        ("NT523", "gres.conf:4"), ("NT522", "gres.conf:5"),
        ("NT530", "node 0"), ("NT531", "kubelet.yaml"),
    }
    text = json.loads(result.stdout)["findings"]
    fix = next(f["fix"] for f in text if f["code"] == "NT522")
    assert "File=/dev/nvidia2 Cores=4-7" in fix


def test_check_bad_scheduler_files_are_one_line_errors(cli, tmp_path):
    root = _root("vm-two-socket")
    missing = cli("--root", root, "check", "--gres-conf", str(tmp_path / "nope.conf"))
    assert missing.exit_code == 3 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "k.yaml").write_text("kind: [unclosed\n")
    bad = cli("--root", root, "check", "--kubelet-config", str(tmp_path / "k.yaml"))
    assert bad.exit_code == 3 and "not valid YAML" in bad.stderr
    (tmp_path / "s.conf").write_text("NodeName=a Sockets=1\nNodeName=b Sockets=1\n")
    nope = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "s.conf"), "--node-name", "zz")
    assert nope.exit_code == 3 and "no NodeName line for 'zz'" in nope.stderr


def test_emit_nfd_labels(cli, tmp_path):
    from numatune.plan.nfd import MAX_FILE_BYTES, valid_label

    out = tmp_path / "numatune"
    result = cli("--root", _root("handmade-launch-2s4gpu-cxl"), "emit", "nfd", "-o", str(out))
    assert result.exit_code == 0 and not list(tmp_path.glob(".*"))
    text = out.read_text()
    assert len(text.encode()) < MAX_FILE_BYTES
    labels = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))
    assert all(valid_label(k, v) and k.startswith("feature.node.kubernetes.io/") for k, v in labels.items())
    short = {k.removeprefix("feature.node.kubernetes.io/numatune-"): v for k, v in labels.items()}
    assert short["numa.nodes"] == "4" and short["numa.cpu-nodes"] == "2" and short["gpu.count"] == "4"
    assert short["gpu.node0"] == short["gpu.node1"] == "2" and short["gpu.balanced"] == "true"
    assert short["gpu-nic.path"] == "SYS" and short["gpu-nic.local"] == "false"  # one NIC, on node 1
    assert short["cxl.nodes"] == "2" and int(short["cxl.capacity-mib"]) > 0
    doc = _emit_json(cli, "handmade-launch-2s4gpu-cxl", "nfd")
    assert doc["labels"] == labels


def test_label_syntax():
    from numatune.plan.nfd import valid_label

    assert valid_label("feature.node.kubernetes.io/numatune-gpu.count", "8")
    assert not valid_label("feature.node.kubernetes.io/numatune-cxl.nodes", "2,3")
    assert not valid_label("x/" + "a" * 64, "1") and not valid_label("x/a", "-b")


@pytest.mark.parametrize("target", ["slurm", "kubelet", "nfd"])
def test_emit_reads_the_same_from_a_snapshot(cli, tmp_path, target):
    """Everything emit reads goes through Host, so a snapshot of the tree gives the same configuration."""
    root = _root("handmade-launch-2s4gpu-cxl")
    archive = tmp_path / "snap.tar.gz"
    assert cli("--root", root, "snapshot", "-o", str(archive)).exit_code == 0
    a = _emit_json(cli, "handmade-launch-2s4gpu-cxl", target)
    b = json.loads(cli("--root", str(archive), "emit", target, "--json").stdout)
    from tests.parity import comparable

    assert comparable(a) == comparable(b)


def test_emit_slurm_nic_gres(cli):
    """32em64t-2n8c+dax+nvme+mic+dimms: one Mellanox NIC with uverbs0 on node 1 (CPUs 8-15, one thread each)."""
    result = cli("--root", _root("32em64t-2n8c+dax+nvme+mic+dimms"), "emit", "slurm", "--nic-gres", "--node-name", "n1")
    lines = [x for x in result.stdout.splitlines() if x and not x.startswith("#")]
    assert lines[0] == "GresTypes=nic"
    assert lines[1].startswith("NodeName=n1 CPUs=16 Sockets=2 CoresPerSocket=8 ThreadsPerCore=1 ") and \
        lines[1].endswith(" Gres=nic:1")
    assert lines[2:] == ["NodeName=n1 Name=nic File=/dev/infiniband/uverbs0 Cores=8-15"]


def test_emit_slurm_one_socket_leaves_cores_out(cli):
    """vm-accel-nvidia-p100: one socket, the GPU's numa_node -1; every core is local, so no Cores= (gres.conf(5))."""
    doc = _emit_json(cli, "vm-accel-nvidia-p100", "slurm")
    [gpu] = doc["gres"]
    assert gpu["cores"] == [] and "one socket" in gpu["note"] and "Cores=" not in gpu["line"]
    assert doc["node"]["sockets"] == 1 and "would give the same" in doc["autodetect"]


def test_reserved_cpus_skip_isolated_cores(tmp_path, cli):
    """isolcpus are for the workload: the reservation takes the next core of the node instead."""
    from tests.conftest import fixture_copy

    root = fixture_copy("handmade-launch-2s4gpu-cxl", tmp_path)
    (root / "sys/devices/system/cpu/isolated").write_text("0,8\n")  # hand-edited copy: core (0,8) isolated
    result = cli("--root", str(root), "emit", "kubelet")
    assert parse_cpulist(yaml.safe_load(result.stdout)["reservedSystemCPUs"]) == {1, 9, 4, 12}
    slurm = _emit_json(cli, "handmade-launch-2s4gpu-cxl", "slurm", "--reserve-cores", "1")
    assert slurm["node"]["cpu_spec_list"] == [0, 1, 8, 9]
    isolated = json.loads(cli("--root", str(root), "emit", "slurm", "--reserve-cores", "1", "--json").stdout)
    assert isolated["node"]["cpu_spec_list"] == [2, 3, 8, 9]  # core (1,9) is Slurm core 1: CPUs 2-3


def test_check_static_cpu_manager_needs_a_reservation(cli, tmp_path):
    conf = tmp_path / "k.json"
    conf.write_text('{"kind": "KubeletConfiguration", "cpuManagerPolicy": "static", '
                    '"topologyManagerPolicy": "restricted"}')
    result = cli("--root", _root("vm-two-socket"), "check", "--kubelet-config", str(conf), "--json")
    assert [f["code"] for f in json.loads(result.stdout)["findings"] if f["code"] >= "NT520"] == ["NT534"]
    conf.write_text('{"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted", '
                    '"kubeReserved": {"cpu": "1"}}')
    result = cli("--root", _root("vm-two-socket"), "check", "--kubelet-config", str(conf), "--json")
    assert [f["code"] for f in json.loads(result.stdout)["findings"] if f["code"] >= "NT520"] == []


def test_numa_as_socket_round_trip(cli, tmp_path):
    """memorysidecaches (SNC2): the --numa-as-socket node line (4 sockets) passes check when slurm.conf sets
    SlurmdParameters=numa_node_as_socket, and is flagged without it (slurmd would then see 2 sockets)."""
    root = _root("memorysidecaches")
    doc = json.loads(cli("--root", root, "emit", "slurm", "--numa-as-socket", "--node-name", "n", "--json").stdout)
    assert doc["node"]["sockets"] == 4 and "SlurmdParameters=numa_node_as_socket" in doc["text"]
    (tmp_path / "slurm.conf").write_text("SlurmdParameters=numa_node_as_socket\n" + doc["node"]["line"] + "\n")
    ok = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "slurm.conf"), "--json")
    assert [f for f in json.loads(ok.stdout)["findings"] if f["code"] >= "NT520"] == []
    (tmp_path / "slurm.conf").write_text(doc["node"]["line"] + "\n")
    bad = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "slurm.conf"), "--json")
    assert {f["code"] for f in json.loads(bad.stdout)["findings"] if f["code"] >= "NT520"} == {"NT520"}


def test_emit_slurm_stand_in_gpu_is_labelled_and_bound_to_its_node(cli):
    """vm-two-socket has no GPU; its NVMe (0000:42:00.0, node 1) stands in: Cores= are node 1's, labelled."""
    root = _root("vm-two-socket")
    doc = json.loads(cli("--root", root, "emit", "slurm", "--json", "--node-name", "n1",
                         "--stand-in-gpu", "0000:42:00.0=/tmp/standin0").stdout)
    (g,) = doc["gres"]
    assert g["stand_in"] is True and g["file"] == "/tmp/standin0" and g["bdf"] == "0000:42:00.0"
    node1 = {c["core"] for c in doc["layout"]["sockets"][1]}
    assert set(g["cores"]) == node1 == {2, 3}
    text = cli("--root", root, "emit", "slurm", "--node-name", "n1", "--stand-in-gpu",
               "0000:42:00.0=/tmp/standin0").stdout
    gpu_line = next(x for x in text.splitlines() if " Name=gpu " in x and not x.startswith("#"))
    assert "File=/tmp/standin0" in gpu_line and "Cores=2-3" in gpu_line
    before = text.splitlines()[text.splitlines().index(gpu_line) - 1]
    assert before.startswith("#") and "stand-in" in before
    assert "# no GPU on this node (the gpu lines above are stand-ins)" in text
    bad = cli("--root", root, "emit", "slurm", "--stand-in-gpu", "0000:42:00.0=relative")
    assert bad.exit_code != 0 and "BDF=/absolute/device/file" in bad.output


def test_kubelet_leaves_numa_managers_off_when_node_ids_exceed_63(cli, tmp_path):
    # POWER9 AC922: GPU memory nodes 250-255; kubelet's NUMA bitmask holds ids 0-63 only.
    doc, text = _kubelet(cli, "nvidiagpunumanodes")
    assert "topologyManagerPolicy" not in doc and "memoryManagerPolicy" not in doc and "reservedMemory" not in doc
    assert "250-255 above 63" in text
    conf = tmp_path / "k.json"
    conf.write_text(json.dumps({**doc, "topologyManagerPolicy": "restricted"}))
    result = cli("--root", _root("nvidiagpunumanodes"), "check", "--kubelet-config", str(conf), "--json")
    assert [f["code"] for f in json.loads(result.stdout)["findings"] if f["code"] >= "NT520"] == ["NT535"]


@pytest.mark.parametrize("name", ["topo-mi210-xgmi-pcie", "procfs-4cpu-kvm", "pcp-8cpu-x86_64"])
def test_kubelet_without_cpu_topology_writes_no_static_cpu_manager(cli, name):
    doc, text = _kubelet(cli, name)
    assert "cpuManagerPolicy" not in doc and "reservedSystemCPUs" not in doc
    assert "cpuManagerPolicy not written" in text


def test_nfd_writes_no_unknown_as_a_fact(cli):
    text = cli("--root", _root("topo-mi210-xgmi-pcie"), "emit", "nfd").stdout
    labels = [x for x in text.splitlines() if not x.startswith("#")]
    assert not any("cpu." in x or "numa." in x for x in labels)  # the tree has KFD files only: no CPU facts
    assert "gpu.count=8" in text and "# note: no CPU topology" in text
    for name in tree_fixtures():
        out = cli("--root", _root(name), "emit", "nfd").stdout
        assert "cpu.sockets=0" not in out and "numa.nodes=0" not in out, name


def test_nt520_fix_keeps_every_key_of_the_users_line(cli, tmp_path):
    """A slurm.conf written by `emit slurm --reserve-cores 1`, with the site's own keys added and the socket count
    made wrong: the NodeName line NT520 suggests keeps CpuSpecList, MemSpecLimit, Features, Weight and State in
    the user's order and spelling, and corrects only what was wrong (pasting it used to drop the reservation)."""
    root = _root("handmade-launch-2s4gpu-cxl")
    doc = _emit_json(cli, "handmade-launch-2s4gpu-cxl", "slurm", "--node-name", "gpu01", "--reserve-cores", "1")
    line = doc["node"]["line"]
    assert "CpuSpecList=" in line and "MemSpecLimit=" in line
    wrong = line.replace("Sockets=2", "Sockets=4") + " Features=a100,ib Weight=10 State=UNKNOWN"
    (tmp_path / "slurm.conf").write_text("NodeName=DEFAULT Feature=x\n" + wrong + "\n")
    result = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "slurm.conf"), "--node-name", "gpu01",
                 "--json")
    (nt520,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "NT520"]
    fixed = re.fullmatch(r"use `(.*)` \(your line .*\)", nt520["fix"])[1]
    assert fixed == line + " Features=a100,ib Weight=10 State=UNKNOWN"  # Sockets=2 again, every other key as written
    assert fixed.index("CpuSpecList=") < fixed.index("MemSpecLimit=") < fixed.index("Features=")
    # the corrected line passes check
    (tmp_path / "slurm.conf").write_text(fixed + "\n")
    ok = cli("--root", root, "check", "--slurm-conf", str(tmp_path / "slurm.conf"), "--json")
    assert [f["code"] for f in json.loads(ok.stdout)["findings"] if f["code"].startswith("NT52")] == []


def test_fix_line_replaces_boards_and_a_wrong_gpu_count_in_place():
    from numatune.analysis.scheduler import check_slurm_node
    from numatune.plan.slurm import NodeLine, SlurmLayout

    expected = NodeLine("n1", 16, 2, 4, 2, 64000, 4)
    layout = SlurmLayout("package", ((),), 4, 2, 16)
    own = [("nodename", "n[1-4]"), ("Boards", "2"), ("SocketsPerBoard", "2"), ("CoresPerSocket", "4"),
           ("Gres", "gpu:h100:8,nic:2"), ("CpuSpecList", "0-1"), ("Weight", "5")]
    node = {k.lower(): v for k, v in own}
    found = {f.code: f for f in check_slurm_node(3, node, expected, layout, 64000, "slurm.conf", own)}
    assert set(found) == {"NT520", "NT524"}
    line = "nodename=n[1-4] Sockets=2 CoresPerSocket=4 Gres=gpu:h100:4,nic:2 CpuSpecList=0-1 Weight=5"
    assert found["NT520"].fix.startswith(f"use `{line}`") and found["NT524"].fix == found["NT520"].fix


def test_emit_slurm_on_hwlocs_ia64_tree_writes_its_sockets_and_cores(cli):
    """128ia64: every per-CPU online file is empty (hwloc and slurmd -C read 128 CPUs online, 64 packages of 2
    cores); numatune read 0 CPUs online and wrote a NodeName without Sockets or cores."""
    node = _emit_json(cli, "128ia64-17n4s2c", "slurm", "--node-name", "ia64")["node"]
    assert node["line"].startswith("NodeName=ia64 CPUs=128 Sockets=64 CoresPerSocket=2 ThreadsPerCore=1 ")


def test_output_to_dash_is_standard_output_and_says_so(cli):
    """-o - writes the configuration to standard output; the note named a file '-' that was never made."""
    result = cli("--root", str(fixture_root("vm-two-socket")), "emit", "dra", "-o", "-")
    assert result.exit_code == 0 and result.stdout.startswith("# DRA standard device attributes")
    assert "numatune: wrote standard output" in result.stderr


def _check_kubelet(cli, tmp_path, name: str, doc: dict) -> list[dict]:
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump(doc))
    result = cli("--root", _root(name), "check", "--kubelet-config", str(tmp_path / "kubelet.yaml"), "--json")
    return [c for c in json.loads(result.stdout)["checks"] if c["group"] == "scheduler"]


def test_kubelet_on_a_34_node_gb200_never_enables_the_topology_manager(cli, tmp_path):
    doc, text = _kubelet(cli, "handmade-gb200-numa")
    assert "topologyManagerPolicy" not in doc and "memoryManagerPolicy" not in doc and "reservedMemory" not in doc
    assert doc["cpuManagerPolicy"] == "static" and doc["reservedSystemCPUs"] == "0,72"
    assert "2^34" in text and "numatune emit dra" in text and "restrict-to-cpu-numa-nodes" in text
    assert [c["status"] for c in _check_kubelet(cli, tmp_path, "handmade-gb200-numa", doc)] == ["passed"]
    hangs = dict(doc, topologyManagerPolicy="restricted",
                 topologyManagerPolicyOptions={"max-allowable-numa-nodes": "34"})
    found = [f for c in _check_kubelet(cli, tmp_path, "handmade-gb200-numa", hangs) for f in c["findings"]]
    assert [f["code"] for f in found] == ["NT536"] and "2^34" in found[0]["message"]
    fixed = dict(hangs, topologyManagerPolicyOptions={"restrict-to-cpu-numa-nodes": "true"})
    assert [c["status"] for c in _check_kubelet(cli, tmp_path, "handmade-gb200-numa", fixed)] == ["passed"]


def test_kubelet_on_gh200_aligns_devices_but_never_pins_pods_to_hbm(cli):
    doc, text = _kubelet(cli, "handmade-gh200-numa")
    assert doc["topologyManagerPolicy"] == "restricted"  # 9 nodes: 512 masks
    assert doc["topologyManagerPolicyOptions"] == {"max-allowable-numa-nodes": "9"}
    assert "memoryManagerPolicy" not in doc and "GPU memory node(s) 1" in text
    cdmm, _ = _kubelet(cli, "handmade-gb200-cdmm")  # 2 nodes, no HBM node: both managers
    assert cdmm["topologyManagerPolicy"] == "restricted" and cdmm["memoryManagerPolicy"] == "Static"


def test_slurm_on_grace_counts_host_memory_and_cpu_nodes_only(cli, tmp_path):
    out = cli("--root", _root("handmade-gb200-numa"), "emit", "slurm", "--node-name", "gb01").stdout
    node = next(x for x in out.splitlines() if x.startswith("NodeName=gb01 CPUs"))
    assert "Sockets=2 CoresPerSocket=72 ThreadsPerCore=1" in node
    # the Grace nodes' 489935 + 489795 MiB of the published numactl -H, not the 4 x 188416 MiB of HBM
    assert "RealMemory=979730 " in node
    gres = [x for x in out.splitlines() if x.startswith("NodeName=gb01 Name=gpu")]
    assert [x.rsplit("Cores=", 1)[1] for x in gres] == ["0-71", "0-71", "72-143", "72-143"]
    assert "leaves out GPU memory nodes 2,10,18,26" in out
    # every GB200 NVLink ends on an NVLink Switch: Slurm's AutoDetect counts 0 links, so no Links= and a note
    assert all("Links=" not in x for x in gres) and "GPUs share an NVSwitch fabric" in out
    # slurmd -C's own figure (MemTotal, HBM included) is not a drained node: NT521 stays quiet
    (tmp_path / "slurm.conf").write_text(node.replace("RealMemory=979730", f"RealMemory={979730 + 4 * 188416}")
                                         + "\n")
    result = cli("--root", _root("handmade-gb200-numa"), "check", "--slurm-conf", str(tmp_path / "slurm.conf"),
                 "--json")
    codes = [f["code"] for c in json.loads(result.stdout)["checks"] if c["group"] == "scheduler"
             for f in c["findings"]]
    assert "NT521" not in codes
