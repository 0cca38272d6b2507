"""Replay equals live: every command on this machine and on its fresh snapshot gives the same report,
but for the fields tests/parity.py names (where the report came from, values that change by the second)."""

from __future__ import annotations

import json
import os

import pytest

from numatune.cli import COMMANDS
from numatune.commands.snapshot import DRY_RUN, PID_DRY_RUN
from tests.cli.test_audit import ALLOC, start, stop
from tests.parity import comparable, differences

PCI_IDS = next((p for p in ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids") if os.path.isfile(p)), "")
# The snapshot's own lines, less the launch lines for a GPU or weights (this machine may lack both: they fail
# live and replayed alike), plus audit's mappings and a policy file's verdicts.
COMMAND_LINES = (
    *(line for line in (*DRY_RUN, *PID_DRY_RUN)
      if line[0] != "launch" or ("--node" in line and "--mem-policy" not in line)),
    ("audit", "{pid}", "--json", "--mappings", "--min-size", "0"),
    ("check", "--policy", "examples/gpu-node.toml", "--json"),  # NT330 judges numactl's recorded version
)


@pytest.fixture(scope="module")
def live_and_snapshot(tmp_path_factory):
    """(live reports, replayed reports) for COMMAND_LINES, around one process to audit."""
    from click.testing import CliRunner

    from numatune.cli import main

    env = {"NUMATUNE_PCI_IDS": PCI_IDS, "NO_COLOR": "1", "NUMATUNE_ROOT": None}
    runner = CliRunner()
    archive = tmp_path_factory.mktemp("parity") / "node.tar.gz"
    child = start(ALLOC)
    try:
        pid = str(child.pid)
        lines = {line: [a.format(pid=pid) for a in line] for line in COMMAND_LINES}
        snap = runner.invoke(main, ["snapshot", "-o", str(archive), "--pid", pid], env=env, catch_exceptions=False)
        assert snap.exit_code == 0, snap.stderr
        live = {line: runner.invoke(main, args, env=env, catch_exceptions=False) for line, args in lines.items()}
    finally:
        stop(child)
    saved = {line: runner.invoke(main, ["--root", str(archive), *args], env=env, catch_exceptions=False)
             for line, args in lines.items()}
    return live, saved, int(pid)


@pytest.mark.parametrize("line", COMMAND_LINES, ids=lambda line: " ".join(line))
def test_replay_equals_live(live_and_snapshot, line):
    live, saved, _pid = live_and_snapshot
    a, b = live[line], saved[line]
    assert (a.exit_code, b.exit_code) in ((0, 0), (1, 1)), (a.stderr, b.stderr)  # check exits 1 on findings
    live_doc, saved_doc = json.loads(a.stdout), json.loads(b.stdout)
    assert saved_doc["source"].endswith("node.tar.gz") and saved_doc.get("live", False) is False
    assert not (diff := differences(comparable(saved_doc), comparable(live_doc))), diff


def test_the_audited_process_is_really_in_the_snapshot(live_and_snapshot):
    """The replayed audit is not an empty one: the process, its cpuset and its memory are there."""
    live, saved, pid = live_and_snapshot
    line = ("audit", "{pid}", "--json")
    live_proc = json.loads(live[line].stdout)["processes"][0]
    proc = json.loads(saved[line].stdout)["processes"][0]
    assert proc["pid"] == pid and proc["command"] == live_proc["command"]
    assert proc["cpuset_cpus"] == live_proc["cpuset_cpus"]  # read from /sys/fs/cgroup/<its cgroup>/cpuset.*
    assert sum(proc["memory_by_node"].values()) >= 16 << 20


def test_policy_verdicts_and_irqbalance_replay_as_live(live_and_snapshot):
    """Nothing is "skipped" on replay that ran live (NT330 used to be), and irqbalance's state is known."""
    live, saved, _pid = live_and_snapshot
    line = ("check", "--policy", "examples/gpu-node.toml", "--json")
    verdicts = [{c["name"]: c["status"] for c in json.loads(r[line].stdout)["checks"]} for r in (live, saved)]
    assert verdicts[0] == verdicts[1] and verdicts[0]["policy.tools.numactl_min_version"] != "skipped"
    running = [json.loads(r[("irq", "--json")].stdout)["irqbalance"]["running"] for r in (live, saved)]
    assert running[0] == running[1] and running[1] is not None


def test_every_command_that_reads_a_node_is_in_the_dry_run():
    """The snapshot is made from DRY_RUN alone, so a command missing there would replay short."""
    ran = {line[0] for line in (*DRY_RUN, *PID_DRY_RUN)}
    reads_other_reports = {"snapshot", "diff", "fleet"}  # they read roots through inspect's reader
    live_only = {"probe", "compare"}  # measurements: they refuse --root, so nothing is replayed
    reads_nothing = {"completion"}  # prints the shell's script
    assert set(COMMANDS) - reads_other_reports - live_only - reads_nothing <= ran


def test_the_fields_that_may_differ_are_listed_only_in_tests_parity():
    """No test drops a volatile or live-only field by hand (`doc.pop("memory_free_kib")`): tests/parity.py
    is the one list, used through `comparable`."""
    import ast

    from tests.conftest import PROJECT
    from tests.parity import IGNORED, MOVING

    fields = {p.rsplit(".", 1)[-1] for p in (*IGNORED, *MOVING)}
    for path in (PROJECT / "tests").rglob("*.py"):
        if path.name == "parity.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in fields):
                raise AssertionError(f"{path.relative_to(PROJECT)}:{node.lineno} drops {node.args[0].value!r} "
                                     "by hand: name it in tests/parity.py")


def test_the_snapshot_command_lines_are_written_once():
    """DRY_RUN and PID_DRY_RUN are the one list of a snapshot's command lines: no other module of the package,
    the tests or the VM checks holds a collection of two or more of those lines (they import them)."""
    import ast

    from tests.conftest import PROJECT

    lines = {*DRY_RUN, *PID_DRY_RUN}
    home = PROJECT / "numatune" / "commands" / "snapshot.py"
    for path in [*(PROJECT / "numatune").rglob("*.py"), *(PROJECT / "tests").rglob("*.py")]:
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                copies = [e for e in node.elts if isinstance(e, ast.Tuple)
                          and all(isinstance(x, ast.Constant) for x in e.elts)
                          and tuple(x.value for x in e.elts) in lines]
                assert len(copies) < 2, f"{path.relative_to(PROJECT)}:{node.lineno}: a copy of the snapshot's lines"


# -- an NVIDIA node: NVML asked live against the record its snapshot saved ---------------------------------------
DGX_BUSES = ("1b", "43", "52", "61", "9d", "c3", "d1", "df")  # handmade-dgx-h100-ids' eight H100s


def _nvswitch_record() -> dict:
    """An NVML record in the recorder's format for the hand-made DGX H100 tree: 18 active NVLinks per GPU to
    NVSwitch ports (remote device type 2), as `nvidia-smi topo -m` shows NV18 on a DGX H100."""
    from numatune.readers.nvml import FORMAT

    links = [{"link": n, "state": "active", "remote_pci": {"bus_id": "00000000:05:00.0"}, "remote_device_type": 2}
             for n in range(18)]
    gpus = [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA H100 80GB HBM3", "pci": {"bus_id": f"00000000:{b}:00.0"},
             "nvlinks": links, "fabric": {"state": 3, "status": 0}, "compute_processes": []}
            for i, b in enumerate(DGX_BUSES)]
    return {"format": FORMAT, "driver_version": "580.159.04", "gpus": gpus, "pairs": []}


@pytest.mark.parametrize("tree", ["h100-job-2026-11-28", "handmade-dgx-h100-ids"])
def test_replay_equals_live_on_an_nvidia_node_through_an_nvml_stand_in(tree, tmp_path, monkeypatch):
    """issue 40: on every NVIDIA node `inspect --json` of a snapshot differed from live in path_matrix.nvlink
    ("saved" against "nvml"). The node is a tree read as if live, NVML a stand-in answering its record (the real
    H100 job capture; a DGX with NVSwitch, whose links name their source too); the snapshot stores what live
    NVML answered (snapshot_bytes), and its replay is compared with live through tests/parity.py."""
    from numatune.commands.inspect import inspect_json
    from numatune.readers import nvml
    from numatune.system.host import Host
    from tests.conftest import fixture_copy

    root = fixture_copy(tree, tmp_path / "node")
    saved_record = root / "numatune" / "nvml.json"
    record = json.loads(saved_record.read_text()) if saved_record.exists() else _nvswitch_record()
    monkeypatch.setattr(nvml, "_LIVE", record)  # the stand-in: what NVML answers on this node
    monkeypatch.setattr(nvml, "_LIVE_NOTE", "NVML (live)")

    class LiveNode(Host):
        __slots__ = ()

        @property
        def is_live(self) -> bool:
            return True

    live_host = Host.open(root)
    live_host.__class__ = LiveNode
    live = json.loads(inspect_json(live_host, None))
    saved_record.parent.mkdir(exist_ok=True)
    saved_record.write_bytes(nvml.snapshot_bytes(live_host))  # what `snapshot` stores of the live node
    saved = json.loads(inspect_json(Host.open(root), None))
    assert (live["path_matrix"]["nvlink"]["state"], saved["path_matrix"]["nvlink"]["state"]) == ("nvml", "saved")
    if tree == "handmade-dgx-h100-ids":
        # 8 GPUs on the NVSwitch fabric: one group (inspect/4), not 28 pairs
        live_sw, saved_sw = live["path_matrix"]["nvswitch"], saved["path_matrix"]["nvswitch"]
        assert len(live_sw) == 8 and {x["source"] for x in live_sw} == {"nvml"}
        assert {x["source"] for x in saved_sw} == {"nvml record /numatune/nvml.json"}
    if tree == "handmade-dgx-h100-ids":  # a hand-made tree, not a snapshot: read "live", py-cpuinfo and
        # irqbalance answer for this machine; the GPU fabric is what is compared
        live, saved = ({k: d[k] for k in ("path_matrix", "gpu_fabric")} for d in (live, saved))
    assert not (diff := differences(comparable(saved), comparable(live))), diff
    saved_record.unlink()  # a snapshot that lost the record is still told apart
    lost = json.loads(inspect_json(Host.open(root), None))
    assert "path_matrix.nvlink.state: not visible != nvml" in differences(comparable(lost), comparable(live))
