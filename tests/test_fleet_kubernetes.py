"""Kubernetes as far as it can be checked offline: the shipped DaemonSet (examples/kubernetes/).

- the manifest validates against the Kubernetes API types (kubernetes-validate --strict: the API's published
  schemas, unknown fields rejected), which needs no cluster;
- the container's script, run as it is with the volumes swapped for test directories and NUMATUNE_ROOT a fixture
  tree, writes the node_exporter textfiles and the node-feature-discovery feature file numatune prints for that
  tree, each replaced by rename (no temporary file is left).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from numatune.cli import main
from tests.conftest import fixture_root

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples" / "kubernetes" / "numatune-daemonset.yaml"
VALIDATE = shutil.which("kubernetes-validate") or (
    str(Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "kubernetes-validate"))


def _daemonset() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def test_manifest_validates_against_the_api_types(tmp_path):
    if not Path(VALIDATE).exists():
        pytest.skip("kubernetes-validate not installed (pip install '.[test]' installs it)")
    res = subprocess.run([VALIDATE, "--strict", str(MANIFEST)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "passed" in res.stdout, res.stdout + res.stderr
    # and it can fail: a misspelt field is rejected
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFEST.read_text().replace("readOnlyRootFilesystem", "readOnlyRootFileSystem"))
    res = subprocess.run([VALIDATE, "--strict", str(bad)], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "readOnlyRootFileSystem" in res.stdout + res.stderr


def test_the_volumes_are_the_paths_the_script_uses():
    spec = _daemonset()["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert host == {"sys": "/sys", "proc": "/proc", "textfile": "/var/lib/prometheus/node-exporter",
                    "features": "/etc/kubernetes/node-feature-discovery/features.d"}
    assert mounts["sys"]["mountPath"] == "/host/sys" and mounts["sys"]["readOnly"]
    assert mounts["proc"]["mountPath"] == "/host/proc" and mounts["proc"]["readOnly"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NUMATUNE_ROOT"] == "/host"
    script = container["args"][0]
    for m in ("textfile", "features"):
        assert mounts[m]["mountPath"] + "/" in script


def test_the_container_script_writes_textfiles_and_features(tmp_path):
    (container,) = _daemonset()["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace("/textfile/", f"{tmp_path}/textfile/").replace(
        "/features.d/", f"{tmp_path}/features.d/")
    (tmp_path / "textfile").mkdir()
    (tmp_path / "features.d").mkdir()
    root = fixture_root("vm-two-socket")
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "NUMATUNE_ROOT": str(root),
           "NUMATUNE_INTERVAL": "3600", "NUMATUNE_PCI_IDS": ""}
    want = {tmp_path / "textfile" / "numatune_inspect.prom", tmp_path / "textfile" / "numatune_irq.prom",
            tmp_path / "features.d" / "numatune"}
    proc = subprocess.Popen(["/bin/sh", "-c", script], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 180
        while not all(p.exists() for p in want) and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.5)
        assert proc.poll() is None, f"the script exited {proc.returncode}: {proc.stderr.read()}"  # it loops
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
    files = {p for d in ("textfile", "features.d") for p in (tmp_path / d).iterdir()}
    assert files == want  # no .tmp left
    runner = CliRunner()

    def numatune(*args: str) -> str:
        res = runner.invoke(main, ["--root", str(root), *args], env={"NUMATUNE_PCI_IDS": ""})
        assert res.exit_code == 0, res.output
        return res.stdout

    assert (tmp_path / "features.d" / "numatune").read_text() == numatune("emit", "nfd")
    assert (tmp_path / "textfile" / "numatune_irq.prom").read_text() == numatune("irq", "--format", "prometheus")
    assert "numatune_numa_nodes 2" in (tmp_path / "textfile" / "numatune_inspect.prom").read_text()
