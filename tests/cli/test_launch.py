"""numatune launch end to end: dry-run and JSON on fixture roots, real exec on this machine, the sh wrapper."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from numatune.cpulist import format_cpulist
from numatune.readers.nvml import nvml_bdf
from tests.conftest import PROJECT, fixture_root

HM = str(fixture_root("handmade-launch-2s4gpu-cxl"))
LAUNCHER_ENVS = {
    "torchrun": {"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"},
    "slurm": {"SLURM_LOCALID": "3", "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "1"},
    "openmpi": {"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
    "mpich": {"MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4"},
    "pmi": {"PMI_LOCAL_RANK": "3", "PMI_LOCAL_SIZE": "4"},
    "pmix": {"PMIX_LOCAL_RANK": "3", "PMIX_LOCAL_SIZE": "4"},
}
CLEAN: dict = {k: None for k in ("LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")}

# What the child reports about itself: affinity, allowed memory nodes, its heap's policy, argv, OMP_NUM_THREADS.
PROBE = r"""
import json, os, sys
status = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
maps = open('/proc/self/numa_maps').read().splitlines()
policy = maps[0].split(' ', 1)[1].split(' file=')[0].split(' anon=')[0] if maps else ''
print(json.dumps({'cpus': sorted(os.sched_getaffinity(0)), 'mems': status['Mems_allowed_list'].strip(),
                  'policy': policy, 'argv': sys.argv[1:], 'omp': os.environ.get('OMP_NUM_THREADS'),
                  'binding': os.environ.get('NUMATUNE_BINDING'), 'pid': os.getpid()}))
"""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOCAL_RANK", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NUMATUNE_BINDING")}
    env["PYTHONPATH"] = str(PROJECT)
    env.update(extra or {})
    return env


def _numatune(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()):
    argv = [*prefix, sys.executable, "-m", "numatune", *args]
    return subprocess.run(argv, env=_env(env), capture_output=True, text=True, timeout=60)


def _node0_cpus() -> list[int]:
    with open("/sys/devices/system/node/node0/cpulist") as fh:
        text = fh.read().strip()
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return sorted(set(out) & os.sched_getaffinity(0))


# -- dry-run and JSON on fixture roots ---------------------------------------------------------------------------
@pytest.mark.parametrize("launcher", sorted(LAUNCHER_ENVS))
def test_dry_run_for_every_launcher(cli, launcher):
    res = cli("--root", HM, "launch", "--dry-run", "--cpu-bind", "exclusive", "--", "python", "train.py",
              env={**CLEAN, **LAUNCHER_ENVS[launcher]})
    assert res.exit_code == 0, res.stderr
    assert "rank: 3 from" in res.stdout and "4 local rank(s)" in res.stdout
    assert "gpu: 0000:af:00.0" in res.stdout and "node: 1 (numa_node of 0000:af:00.0)" in res.stdout
    assert re.search(r"numactl --physcpubind=6-7,14-15 --membind=1 -- python train.py$", res.stdout, re.M)
    assert "OMP_NUM_THREADS=2" in res.stdout  # one thread per physical core of its share (2 cores, 4 CPUs)


@pytest.mark.parametrize(
    ("cvd", "rank", "bdf"),
    [("1,0", "0", "0000:3b:00.0"), ("GPU-5e1c0a27-3b2d-4c1e-9f00-000000008602", "0", "0000:86:00.0"),
     ("GPU-5e1c0a07,GPU-5e1c0a37", "1", "0000:af:00.0")],
)
def test_json_plan_with_cuda_visible_devices(cli, cvd, rank, bdf):
    res = cli("--root", HM, "launch", "--json", "--mem-policy", "cxl-spill", "--", "python", "train.py",
              env={**CLEAN, "LOCAL_RANK": rank, "CUDA_VISIBLE_DEVICES": cvd})
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "numatune.launch/2"
    assert doc["gpu"]["bdf"] == bdf and doc["gpu"]["uuid"].startswith("GPU-5e1c0a")
    node = 0 if bdf < "0000:80" else 1
    assert doc["node"] == node and doc["memory"]["nodes"] == [node, node + 2]
    assert doc["memory"]["policy"] == "cxl-spill" and doc["method"] in ("numactl", "direct")
    assert doc["command"] == ["python", "train.py"] and doc["argv"][-2:] == ["python", "train.py"]
    # node binding: its share of the node's physical cores (SMT2 tree) among the ranks bound there
    count = int(re.search(r"sharing: (\d+) rank", " ".join(doc["reasons"]))[1])
    assert doc["env"]["OMP_NUM_THREADS"] == str(len(doc["cpu_bind"]["cpus"]) // 2 // count)


def test_binding_errors_exit_7_and_best_effort_runs_unbound(cli):
    res = cli("--root", str(fixture_root("32intel64-2p8co2t+8ve")), "launch", "--dry-run", "--mem-policy",
              "cxl-spill", "--", "true", env=CLEAN)
    assert res.exit_code == 7 and "no CXL memory node" in res.stderr
    res = cli("--root", str(fixture_root("32intel64-2p8co2t+8ve")), "launch", "--json", "--best-effort",
              "--mem-policy", "cxl-spill", "--", "true", env=CLEAN)
    doc = json.loads(res.stdout)
    assert res.exit_code == 0 and doc["unbound"] and doc["argv"] == ["true"] and "unbound" in doc["warnings"][-1]


def test_usage_and_input_errors(cli):
    """Bad options exit 2 as anywhere else (irq --exclude-cpus, audit); bad input (the environment) 3."""
    assert cli("--root", HM, "launch", "--dry-run", env=CLEAN).exit_code == 2  # no command
    res = cli("--root", HM, "launch", "--", "true", env=CLEAN)
    assert res.exit_code == 2 and "live node" in res.stderr
    res = cli("--root", HM, "launch", "--dry-run", "--cpu-bind", "cores:0", "--", "true", env=CLEAN)
    assert res.exit_code == 2 and res.stderr.startswith("numatune: error: --cpu-bind 'cores:0'")
    res = cli("--root", HM, "launch", "--dry-run", "--weights", "0=4", "--", "true", env=CLEAN)
    assert res.exit_code == 2 and "NODE:WEIGHT" in res.stderr
    res = cli("--root", HM, "launch", "--dry-run", "--mem-nodes", "x", "--", "true", env=CLEAN)
    assert res.exit_code == 2 and "--mem-nodes 'x'" in res.stderr
    assert cli("--root", HM, "irq", "--exclude-cpus", "x").exit_code == 2
    res = cli("--root", HM, "launch", "--dry-run", "--", "true", env={**CLEAN, "LOCAL_RANK": "abc"})
    assert res.exit_code == 3 and "LOCAL_RANK='abc'" in res.stderr


def test_isolcpus_from_the_root_are_excluded(cli, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(HM, root, symlinks=True)
    (root / "sys/devices/system/cpu/isolated").write_text("2-3,10-11\n")
    res = cli("--root", str(root), "launch", "--json", "--", "true", env={**CLEAN, "LOCAL_RANK": "0"})
    doc = json.loads(res.stdout)
    assert doc["cpu_bind"]["cpus"] == [0, 1, 8, 9]
    res = cli("--root", str(root), "launch", "--json", "--allow-isolated", "--", "true",
              env={**CLEAN, "LOCAL_RANK": "0"})
    assert json.loads(res.stdout)["cpu_bind"]["cpus"] == [0, 1, 2, 3, 8, 9, 10, 11]


# -- real exec on this machine ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("via", ["numactl", "direct", "taskset"])
def test_exec_binds_the_child(via):
    if via != "direct" and shutil.which(via) is None:
        pytest.skip(f"{via} is not installed here")
    extra = ("--mem-policy", "none") if via == "taskset" else ()
    res = _numatune("launch", "--node", "0", "--via", via, *extra, "--", sys.executable, "-c", PROBE, "a b")
    assert res.returncode == 0, res.stderr
    child = json.loads(res.stdout)
    cpus = _node0_cpus()
    assert child["cpus"] == cpus and child["omp"] == str(len(cpus)) and child["argv"] == ["a b"]
    if via == "taskset":
        assert child["policy"] == "default"
    else:
        assert child["mems"] == "0" and child["policy"] == "bind:0"
    # what was bound, for numatune.bind_worker() in the command (the exec'd command keeps launch's PID)
    memory = "mem=none mems=-" if via == "taskset" else "mem=bind mems=0"
    assert child["binding"] == f"1 by=launch pid={child['pid']} node=0 cpus={format_cpulist(cpus)} {memory}"
    assert f"via {via}" in res.stderr and res.stderr.count("\n") == 1


def test_exec_respects_a_narrower_affinity_and_quiet():
    cpus = _node0_cpus()
    if len(cpus) < 2 or shutil.which("taskset") is None:
        pytest.skip("needs two CPUs on node 0 and taskset")
    res = _numatune("launch", "-q", "--node", "0", "--via", "direct", "--", sys.executable, "-c", PROBE,
                    prefix=("taskset", "-c", str(cpus[-1])), env={"OMP_NUM_THREADS": "7"})
    child = json.loads(res.stdout)
    assert child["cpus"] == [cpus[-1]] and child["omp"] == "7" and res.stderr == ""


def test_direct_weighted_interleave_when_the_kernel_has_it():
    release = os.uname().release
    if tuple(int(x) for x in re.findall(r"\d+", release)[:2]) < (6, 9):
        pytest.skip(f"kernel {release} has no weighted interleave")
    res = _numatune("launch", "--node", "0", "--mem-policy", "weighted", "--mem-nodes", "0", "--",
                    sys.executable, "-c", PROBE)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["policy"] == "weighted interleave:0"


def test_plain_launch_runs_bound_and_says_why():
    """`numatune launch -- CMD` with no option: bound as the plan for this machine says (on a machine without GPUs
    the rank's node among the nodes with CPUs, and the reason on stderr before the summary)."""
    plan = _numatune("launch", "--json", "--", sys.executable, "-c", PROBE)
    if plan.returncode != 0:
        pytest.skip(f"no plan on this machine: {plan.stderr.strip()}")
    doc = json.loads(plan.stdout)
    res = _numatune("launch", "--", sys.executable, "-c", PROBE)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cpus"] == doc["cpu_bind"]["cpus"]
    lines = res.stderr.splitlines()
    assert lines == [f"numatune: {n}" for n in doc["notes"]] + [lines[-1]] and lines[-1].startswith("numatune: rank 0")
    if doc["gpu"] is None:  # no GPU here: the reason is said
        assert doc["spread"]["node"] == doc["node"] and "no GPU on this machine" in res.stderr


def test_exit_status_and_signals_pass_through(tmp_path):
    assert _numatune("launch", "-q", "--node", "0", "--", "sh", "-c", "exit 42").returncode == 42
    assert _numatune("launch", "-q", "--node", "0", "--", "sh", "-c", "kill -TERM $$").returncode == -15
    res = _numatune("launch", "-q", "--node", "0", "--", "no-such-command-xyz")
    assert res.returncode == 127 and "command not found" in res.stderr
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")  # mode 0644: exists, cannot be executed
    res = _numatune("launch", "-q", "--node", "0", "--", str(script))
    assert res.returncode == 126 and "Permission denied" in res.stderr, res.stderr


# -- the wrapper -----------------------------------------------------------------------------------------------------
NASTY = ["two words", "it's", 'say "hi"', "$HOME and `id` and $(id)", "line1\nline2", "", "-x", "back\\slash"]


def test_emitted_wrapper_passes_every_argument_through_sh(tmp_path):
    wrap = tmp_path / "wrap.sh"
    res = _numatune("launch", "--emit", str(wrap), "--node", "0", "--cpu-bind", "node", "--",
                    sys.executable, "-c", PROBE, *NASTY[:3])
    assert res.returncode == 0, res.stderr
    text = wrap.read_text()
    assert text.startswith("#!/bin/sh\n") and os.access(wrap, os.X_OK) and '"$@"' in text
    done = subprocess.run(["sh", str(wrap), *NASTY[3:]], env=_env({"LOCAL_RANK": "0"}), capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    assert child["argv"] == NASTY and child["cpus"] == _node0_cpus()


def test_wrapper_as_torchrun_no_python_would_call_it(tmp_path):
    wrap = tmp_path / "wrap.sh"
    assert _numatune("launch", "--emit", str(wrap), "--cpu-bind", "exclusive", "--node", "0").returncode == 0
    env = _env({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    done = subprocess.run([str(wrap), sys.executable, "-c", PROBE, "x"], env=env, capture_output=True, text=True,
                          timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["argv"] == ["x"] and "exclusive" in done.stderr


def test_emitted_wrapper_forwards_every_option():
    """The wrapper's options are read off launch's click options: set each to a non-default value and
    they all come back, so a new option cannot silently drop out of emitted wrappers."""
    import click

    from numatune.cli.launch import NOT_FORWARDED, forwarded_args, launch_cmd

    given = ["--rank", "1", "--local-size", "2", "--gpu", "0", "--node", "1", "--cpu-bind", "cores:2",
             "--reserve-cores", "1", "--allow-isolated", "--mem-policy", "interleave", "--mem-nodes", "0,1",
             "--weights", "0:1", "--via", "taskset", "--best-effort", "--quiet", "--cpu-kind", "efficiency",
             "--nic", "mlx5_3", "--nic-transport", "tcp", "--", "true"]
    kw = launch_cmd.make_context("launch", list(given)).params
    options = [p for p in launch_cmd.params if isinstance(p, click.Option) and p.name not in NOT_FORWARDED
               and p.expose_value]  # not the global options after the command (cli.accept_global_options)
    assert all(kw[p.name] != p.default for p in options), "give every option a non-default value here"
    again = launch_cmd.make_context("launch", [*forwarded_args(kw), "--", "true"]).params
    assert {p.name: again[p.name] for p in options} == {p.name: kw[p.name] for p in options}


def test_a_saved_root_with_only_proc_version_still_has_a_kernel_version(cli):
    """nvidiagpunumanodes saved /proc/version (4.14) but no osrelease: launch said "kernel version unknown"
    and planned preferred-many, which needs 5.15; inspect read the version all along (one reader now)."""
    r = cli("--root", str(fixture_root("nvidiagpunumanodes")), "launch", "--dry-run", "--mem-policy",
            "preferred-many", "--", "true", env={"LOCAL_RANK": "0"})
    assert r.exit_code != 0 and "needs Linux 5.15+; this kernel is 4.14.0" in r.stderr


def test_cxl_spill_with_mem_nodes_says_what_it_binds(cli):
    """The reason said "node 0 and CXL node 2 ... never to another socket" while numactl got --membind=1,3."""
    r = cli("--root", HM, "launch", "--dry-run", "--mem-policy", "cxl-spill", "--mem-nodes", "1,3", "--", "true",
            env={"LOCAL_RANK": "0"})
    assert "bind to nodes 1,3 (--mem-nodes)" in r.stdout + r.stderr
    assert "never to another socket" not in r.stdout + r.stderr
    assert "may land off the socket" in r.stdout + r.stderr


def test_a_request_beyond_the_nodes_cores_is_exit_2_like_emit_and_irq_plan(cli):
    """vm-two-socket: 2 cores per node. cores:99 and --reserve-cores 99 cannot be on this machine: exit 2 with the
    reason, as emit and irq plan refuse --reserve-cores 99; --best-effort still runs unbound."""
    root = str(fixture_root("vm-two-socket"))
    for args, reason in ((("--cpu-bind", "cores:99"), "cores:99 for rank #1 of 1 on node 0 needs 99 cores; 2 usable"),
                         (("--reserve-cores", "99"), "--reserve-cores 99 leaves no core on node 0 (2 online cores)")):
        res = cli("--root", root, "launch", "--node", "0", *args, "--dry-run", "--", "true", env=CLEAN)
        assert res.exit_code == 2 and res.stderr.strip() == f"numatune: error: {reason}", res.stderr
        best = cli("--root", root, "launch", "--node", "0", *args, "--best-effort", "--dry-run", "--", "true",
                   env=CLEAN)
        assert best.exit_code == 0 and "running unbound (--best-effort)" in best.stdout + best.stderr


def test_mem_nodes_that_do_not_exist_are_exit_2_like_node(cli):
    root = str(fixture_root("vm-two-socket"))
    res = cli("--root", root, "launch", "--node", "0", "--mem-nodes", "9", "--dry-run", "--", "true", env=CLEAN)
    assert res.exit_code == 2 and "--mem-nodes: node 9 does not exist (nodes: 0,1)" in res.stderr, res.stderr


@pytest.mark.parametrize("name", ["handmade-gb200-numa", "handmade-gh200-numa"])
def test_launch_finds_a_grace_gpu_by_the_uuid_nvml_reports(cli, name):
    """The superchip trees' NVML records carried other UUIDs than /proc/driver/nvidia's: `launch --gpu` with the
    UUID `nvidia-smi -L` prints (NVML's) matched 0 GPUs. Every GPU's NVML UUID now finds that GPU."""
    root = fixture_root(name)
    nvml = json.loads((root / "numatune" / "nvml.json").read_text())
    for g in nvml["gpus"]:
        res = cli("--root", str(root), "launch", "--json", "--gpu", g["uuid"], "--", "python", "train.py", env=CLEAN)
        assert res.exit_code == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["gpu"]["uuid"] == g["uuid"] and doc["gpu"]["bdf"] == nvml_bdf(g["pci"]["bus_id"])


# -- launch tells the truth about rank count and placement (issue 47) -------------------------------------
DGX = str(fixture_root("handmade-dgx-h100-ids"))  # 8 H100: GPU0-3 on node 0 (56 cores), GPU4-7 on node 1


def test_local_size_is_obeyed_with_gpu(cli):
    """`--gpu 2 --local-size 1` counted every GPU of the node as a rank: OMP_NUM_THREADS=14 of 56 cores and a
    warning about 4 overlapping ranks that do not exist."""
    r = cli("--root", DGX, "launch", "--gpu", "2", "--local-size", "1", "--json", "--", "true")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["env"]["OMP_NUM_THREADS"] == "56"
    assert not any("overlap" in w for w in plan["warnings"]), plan["warnings"]
    two = json.loads(cli("--root", DGX, "launch", "--gpu", "2", "--local-size", "2", "--json", "--", "true").stdout)
    assert two["env"]["OMP_NUM_THREADS"] == "28"  # two ranks on node 0: half the cores each


def test_an_explicit_node_away_from_the_gpu_is_a_warning(cli):
    """`--node 0 --gpu 5` (GPU5 on node 1) bound the rank to node 0 without a word: the plan now warns (the
    binding asked for is still made: --node is an explicit choice, e.g. to leave node 1 to another job)."""
    r = cli("--root", DGX, "launch", "--node", "0", "--gpu", "5", "--json", "--", "true")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["node"] == 0
    assert any(w.startswith("--node 0: 0000:c3:00.0 (the rank's GPU) is on node 1") for w in plan["warnings"]), plan
    same = json.loads(cli("--root", DGX, "launch", "--node", "1", "--gpu", "5", "--json", "--", "true").stdout)
    assert not any(w.startswith("--node") for w in same["warnings"])


def test_rank_not_below_local_size_is_exit_2(cli):
    r = cli("--root", DGX, "launch", "--rank", "5", "--local-size", "2", "--dry-run", "--", "true")
    assert r.exit_code == 2 and "--rank 5 is not below --local-size 2" in r.stderr
