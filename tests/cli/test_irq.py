"""numatune irq / irq plan / irq apply / irq restore through the CLI, on hand-made and fixture roots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import fixture_copy, fixture_root, tree_fixtures  # noqa: E402
from tests.irq_roots import NIC, build_root, tree_digest  # noqa: E402


@pytest.fixture
def root(tmp_path) -> Path:
    return build_root(tmp_path, irqbalance=True)


def test_show_table(cli, root):
    r = cli("--root", str(root), "irq", env={"COLUMNS": "220"})
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "mlx5_comp0@pci:0000:81:00.0" in out and "eth1,mlx5_0" in out
    assert "9.0k: n0 100%" in out  # where it fired
    for code in ("NT201", "NT202", "NT205", "NT206"):
        assert code in out
    assert "hunter2" not in out + r.stderr


def test_show_json(cli, root):
    r = cli("--root", str(root), "irq", "--json", "--exclude-cpus", "0-1")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.irq/1"
    nic = next(d for d in doc["devices"] if d["key"] == NIC)
    assert nic["numa_node"] == 1 and nic["netdevs"] == ["eth1"]
    comp0 = nic["irqs"][1]
    assert comp0["irq"] == 41 and comp0["per_cpu"] == {"0": 9000} and comp0["per_node"] == {"0": 9000}
    assert comp0["smp_affinity_list"] == "0-3" and comp0["effective_affinity_list"] == "0"
    assert comp0["local"] is False and comp0["remote_share"] == 1.0 and comp0["managed"] is None
    assert doc["irqbalance"] == {"running": True, "banned_cpus": "6-7"}
    codes = {f["code"] for f in doc["findings"]}
    assert {"NT201", "NT202", "NT203", "NT205"} <= codes
    assert "hunter2" not in r.stdout


def test_show_prometheus_or_clear_unsupported(cli, root):
    r = cli("--root", str(root), "irq", "--format", "prometheus")
    try:
        import numatune.render.prometheus as prom  # noqa: F401
        has = hasattr(prom, "irq_metrics")
    except ImportError:
        has = False
    if has:
        from prometheus_client.parser import text_string_to_metric_families

        assert r.exit_code == 0, r.stderr
        names = {f.name for f in text_string_to_metric_families(r.stdout)}
        assert "numatune_irq_remote_share" in names
    else:
        assert r.exit_code == 7 and "prometheus" in r.stderr


@pytest.mark.parametrize("name", tree_fixtures())
def test_show_json_on_every_fixture(cli, name):
    r = cli("--root", str(fixture_root(name)), "irq", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "numatune.irq/1"


def test_plan_table_json_and_emit(cli, root, tmp_path):
    r = cli("--root", str(root), "irq", "plan", "--exclude-cpus", "6-7")
    assert r.exit_code == 0
    assert "IRQBALANCE_BANNED_CPULIST=6-7" in r.stdout and "[scheduler]" in r.stdout
    script = tmp_path / "irq.sh"
    r = cli("--root", str(root), "irq", "plan", "--json", "--emit", str(script))
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.irq-plan/1"
    e = {x["irq"]: x for x in doc["entries"]}
    assert e[41]["target"] == "4" and e[41]["action"] == "set" and e[51]["action"] == "skip"
    assert doc["persistent"]["irqbalance"][-1].startswith("IRQBALANCE_ARGS=")
    assert "move 41 4" in script.read_text()


def test_bad_cpu_list_is_a_usage_error(cli, root):
    r = cli("--root", str(root), "irq", "plan", "--exclude-cpus", "3-1")
    assert r.exit_code == 2 and "not a CPU list" in r.stderr


def test_apply_and_restore(cli, root, tmp_path):
    before = tree_digest(root)
    r = cli("--root", str(root), "irq", "apply", "--dry-run")
    assert r.exit_code == 0 and "would write 7 files" in r.stdout and tree_digest(root) == before
    state = tmp_path / "saved.json"
    r = cli("--root", str(root), "irq", "apply", "--save", str(state), "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.irq-apply/1" and len(doc["applied"]) == 7
    assert {s["irq"] for s in doc["skipped"]} == {51, 52, 70}
    assert (root / "proc/irq/41/smp_affinity_list").read_text() == "4\n"
    kept = {e["irq"] for e in json.loads(cli("--root", str(root), "irq", "plan", "--json").stdout)["entries"]
            if e["action"] == "keep"}  # after the apply: the 7 moved ones and those already there
    assert set(doc["applied"]) <= kept and set(doc["unchanged"]) == kept - set(doc["applied"])
    again = json.loads(cli("--root", str(root), "irq", "apply", "--save", str(tmp_path / "again.json"),
                           "--json").stdout)
    assert again["applied"] == [] and set(again["unchanged"]) == kept  # "already in place", as irq plan counts
    assert not (tmp_path / "again.json").exists()  # nothing to write: no state saved
    r = cli("--root", str(root), "irq", "restore", str(state))
    assert r.exit_code == 0 and "7 changed" in r.stdout
    assert tree_digest(root) == before


def test_apply_from_plan_file_and_default_state(cli, root, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(cli("--root", str(root), "irq", "plan", "--json", "--exclude-cpus", "4").stdout)
    r = cli("--root", str(root), "irq", "apply", "--plan", str(plan))
    assert r.exit_code == 0, r.stderr
    assert (root / "proc/irq/41/smp_affinity_list").read_text() == "5\n"  # core (4,5) minus 4, then (6,7)
    saved = list((root / "var/lib/numatune").glob("irq-*.json"))
    assert len(saved) == 1 and "numatune irq restore" in r.stdout


def test_apply_failure_exit_5_and_nothing_changed(cli, root, monkeypatch):
    from numatune.system.host import Host

    before = tree_digest(root)
    real = Host.write_text
    calls = {"n": 0}

    def flaky(self, logical, text):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(28, "No space left on device")
        real(self, logical, text)

    monkeypatch.setattr(Host, "write_text", flaky)
    r = cli("--root", str(root), "irq", "apply")
    assert r.exit_code == 5
    assert "rolled back the 3 IRQs" in r.stderr and "Traceback" not in r.stderr
    assert tree_digest(root) == before


def test_bad_plan_and_state_files(cli, root, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("[]")
    assert cli("--root", str(root), "irq", "apply", "--plan", str(junk)).exit_code == 3
    assert cli("--root", str(root), "irq", "restore", str(junk)).exit_code == 3
    assert cli("--root", str(root), "irq", "restore", str(tmp_path / "none.json")).exit_code == 3


def test_live_apply_without_root_is_refused(cli, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    r = cli("irq", "apply")
    assert r.exit_code == 4 and "needs root" in r.stderr


def test_archive_root_cannot_be_written(cli, root, tmp_path):
    archive = tmp_path / "snap.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname="root")
    r = cli("--root", str(archive), "irq", "apply")
    assert r.exit_code == 3 and "snapshot archive" in r.stderr
    assert cli("--root", str(archive), "irq", "--json").exit_code == 0


def test_copy_of_captured_tree_roundtrip(cli, tmp_path):
    tree = fixture_copy("dev-1node-x86", tmp_path / "tree")
    before = tree_digest(tree)
    state = tmp_path / "s.json"
    assert cli("--root", str(tree), "irq", "apply", "--save", str(state)).exit_code == 0
    assert tree_digest(tree) != before
    assert cli("--root", str(tree), "irq", "restore", str(state)).exit_code == 0
    assert tree_digest(tree) == before


def _pasted(line: str, cwd: Path) -> subprocess.CompletedProcess:
    """`line` as a user pastes it into a POSIX shell: `numatune` found on PATH, no NUMATUNE_ROOT."""
    env = {k: v for k, v in os.environ.items() if k != "NUMATUNE_ROOT"}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", NUMATUNE_PCI_IDS="",
               NO_COLOR="1")
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False)


def test_the_printed_undo_restores_the_copy_when_pasted(cli, tmp_path):
    """The undo line `irq apply --root COPY` prints, run in a shell from another directory, restores COPY:
    a path with a space, a quote and a `$` survives the shell, and a narrow terminal does not wrap it."""
    copy = fixture_copy("dev-1node-x86", tmp_path / "it's a $HOME copy" / "tree")
    before = tree_digest(copy)
    r = cli("--root", str(copy), "irq", "apply", env={"COLUMNS": "40"})
    assert r.exit_code == 0 and tree_digest(copy) != before, r.stdout
    [line] = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("numatune irq restore ")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Safety first (tests may run as root): the same line as a dry run must name COPY, not the live node.
    dry = _pasted(line + " --dry-run --json", elsewhere)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["root"] == os.path.realpath(copy)
    done = _pasted(line, elsewhere)
    assert done.returncode == 0, done.stderr
    assert tree_digest(copy) == before


def test_the_json_undo_is_the_printed_one(cli, root):
    doc = json.loads(cli("--root", str(root), "irq", "apply", "--json").stdout)
    assert doc["root"] == os.path.realpath(root)
    assert doc["undo"] == f"numatune irq restore {doc['state_file']}"
    assert cli("--root", str(root), "irq", "restore", doc["state_file"], "--json").exit_code == 0


def test_restore_refuses_a_root_other_than_the_recorded_one(cli, tmp_path, monkeypatch):
    copy = fixture_copy("dev-1node-x86", tmp_path / "copy")
    other = fixture_copy("dev-1node-x86", tmp_path / "other")
    state = tmp_path / "s.json"
    assert cli("--root", str(copy), "irq", "apply", "--save", str(state)).exit_code == 0
    applied, pristine = tree_digest(copy), tree_digest(other)
    for args, late, env in ((["--root", str(other)], [], None), (["--root", "/"], [], None),
                            ([], [], {"NUMATUNE_ROOT": str(other)}), ([], ["--root", str(other)], None)):
        r = cli(*args, "irq", "restore", str(state), "--dry-run", *late, env=env)  # a dry run: a bug must not touch /
        assert r.exit_code == 3 and f"holds the IRQ state of {os.path.realpath(copy)}" in r.stderr, (args, r.stderr)
        r = cli(*args, "irq", "restore", str(state), *late, env=env) if args[-1:] != ["/"] else r
        assert r.exit_code == 3
    assert tree_digest(copy) == applied and tree_digest(other) == pristine
    assert cli("--root", str(copy), "irq", "restore", str(state)).exit_code == 0  # naming it is fine too


@pytest.mark.parametrize("verb", [["restore"], ["apply", "--dry-run", "--plan"]])
def test_an_archive_given_as_a_state_file_or_plan_says_what_it_is(cli, verb):
    """`irq restore snapshot.tar.gz` printed a codec's byte offset; now the file is named as what it is."""
    r = cli("irq", *verb, str(fixture_root("vm-cxl", archive=True)))
    assert r.exit_code == 3 and "is a gzip file, not a" in r.stderr and "codec" not in r.stderr, r.stderr
