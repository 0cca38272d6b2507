"""The recipes of docs/launchers.md ("numatune or your launcher's flag") run: each `numatune launch` line, started the
way its launcher starts ranks (a stand-in that sets the launcher's own rank variables for every local rank),
gives every rank its GPU, its own cores and its own NIC on the hand-made rail-aligned 8 GPU + 8 NIC tree."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import PROJECT, engine_missing, tool_path
from tests.handmade_rail import build_rail

SECTION = (PROJECT / "docs" / "launchers.md").read_text().split("### numatune or your launcher's flag", 1)[1]
BLOCK = next(b for b in re.findall(r"^```console\n(.*?)^```", SECTION, re.M | re.S) if "--no-python numatune" in b)
RECIPES = [line[2:] for line in BLOCK.splitlines() if line.startswith("$ ") and "numatune launch" in line]

# What each launcher puts in a rank's environment (the stand-in for the launcher itself)
RANK_ENV = {
    "torchrun": lambda r, n: {"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n)},
    "srun": lambda r, n: {"SLURM_LOCALID": str(r), "SLURM_NTASKS_PER_NODE": str(n)},
    "deepspeed": lambda r, n: {"LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n)},
    "mpirun": lambda r, n: {"OMPI_COMM_WORLD_LOCAL_RANK": str(r), "OMPI_COMM_WORLD_LOCAL_SIZE": str(n)},
}


@pytest.fixture(scope="module")
def rail(tmp_path_factory):
    return build_rail(tmp_path_factory.mktemp("rail"))


def split(recipe: str) -> tuple[dict[str, str], str | None, list[str], list[str]]:
    """(env assignments, launcher or None, launch options, the command after --)."""
    words = shlex.split(recipe)
    env = {}
    while re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    at = words.index("numatune")
    assert words[at + 1] == "launch"
    launcher = words[0] if at else None
    rest = words[at + 2:]
    cut = rest.index("--")
    return env, launcher, rest[:cut], rest[cut + 1:]


def test_the_recipes_are_there():
    launchers = {split(r)[1] for r in RECIPES}
    assert launchers == {"torchrun", "srun", "deepspeed", "mpirun", None}
    assert any("--numa-binding=exclusive" in line for line in BLOCK.splitlines())  # torchrun's own, beside


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_gives_every_rank_its_gpu_cores_and_nic(recipe, rail):
    env, launcher, options, command = split(recipe)
    ranks = 8 if launcher else 1
    plans = []
    for r in range(ranks):
        rank_env = {"PYTHONPATH": str(PROJECT), "PATH": "/usr/bin:/bin", **env,
                    **(RANK_ENV[launcher](r, ranks) if launcher else {})}
        res = subprocess.run([sys.executable, "-m", "numatune", "--root", str(rail), "launch", *options, "--json",
                              "--", *command], env=rank_env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        plans.append(json.loads(res.stdout))
    if launcher is None:  # vLLM: one server process bound to the socket of its first visible GPU
        (p,) = plans
        assert p["gpu"]["bdf"] == "0000:93:00.0" and p["node"] == 1 and p["cpu_bind"]["mode"] == "socket"
        assert p["argv"][-5:] == command[-5:]
        return
    gpus = [p["gpu"]["bdf"] for p in plans]
    assert len(set(gpus)) == 8 and gpus == sorted(gpus)
    cpus = [set(p["cpu_bind"]["cpus"]) for p in plans]
    assert all(c and not (c & d) for i, c in enumerate(cpus) for d in cpus[i + 1:])  # exclusive
    assert [p["nic"]["rdma"] for p in plans] == [f"mlx5_{r}" for r in range(8)]
    assert all(p["env"]["UCX_NET_DEVICES"] == f"mlx5_{r}:1" for r, p in enumerate(plans))
    assert all(p["torchrun"]["mode"] == "exclusive" for p in plans)


# The stand-in for the GPU machine, not for the launcher: the real torchrun starts 8 ranks of the README's line,
# and `numatune` on their PATH plans each rank for the rail tree (NUMATUNE_ROOT) and writes the plan where the
# test reads it; launch on a root plans only, so `--json` is added after the subcommand's name.
PLAN_ONLY = """#!/bin/sh
sub=$1; shift
exec "{python}" -m numatune "$sub" --json "$@" > "{out}/rank-$LOCAL_RANK.json"
"""


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r.startswith("torchrun ")])
def test_gpu_torchrun_recipe_runs_under_real_torchrun_on_the_rail_tree(recipe, rail, tmp_path):
    """The README's GPU torchrun line as written, by a shell and the real torchrun (its own LOCAL_RANK,
    LOCAL_WORLD_SIZE and the rest, not variables set by the test): 8 ranks, 8 GPUs, each rank its own cores and
    its rail's NIC. What stands in is the machine: the rail tree's plan, not a bound process."""
    if importlib.util.find_spec("torch") is None or shutil.which("torchrun", path=BIN) is None:
        engine_missing(f"no torch for {sys.executable} (the CPU build of torch; scripts/test.sh installs it)")
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "numatune").write_text(PLAN_ONLY.format(python=sys.executable, out=tmp_path))
    (stand_in / "numatune").chmod(0o755)
    env = {**os.environ, "PATH": os.pathsep.join((str(stand_in), BIN, os.environ.get("PATH", "/usr/bin:/bin"))),
           "NUMATUNE_ROOT": str(rail), "PYTHONPATH": str(PROJECT), "NO_COLOR": "1"}
    env.pop("LOCAL_RANK", None)
    res = subprocess.run(["bash", "-c", recipe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    plans = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(8)]
    assert [(p["rank"]["local_rank"], p["rank"]["local_size"]) for p in plans] == [(r, 8) for r in range(8)]
    assert all(p["rank"]["rank_source"] == f"LOCAL_RANK={r} (torchrun)" for r, p in enumerate(plans))
    gpus = [p["gpu"]["bdf"] for p in plans]
    assert len(set(gpus)) == 8 and gpus == sorted(gpus)
    cpus = [set(p["cpu_bind"]["cpus"]) for p in plans]
    assert all(c and not (c & d) for i, c in enumerate(cpus) for d in cpus[i + 1:])
    if "--nic auto" in recipe:
        assert [p["nic"]["rdma"] for p in plans] == [f"mlx5_{r}" for r in range(8)]
    assert all(p["argv"][-2:] == ["python", "train.py"] for p in plans)


# -- the CPU-node recipes, run as written with a real torchrun ----------------------------------------------------
CPU_TEXT = SECTION.split("On a node without GPUs", 1)[1]
CPU_BLOCK = re.findall(r"^```console\n(.*?)^```", CPU_TEXT, re.M | re.S)[0]
CPU_RECIPES = [line[2:] for line in CPU_BLOCK.splitlines() if line.startswith("$ ")]
BIN = tool_path()  # the environment's `numatune` and `torchrun` (beside its python, or run by it)
TRAIN = PROJECT / "tests" / "data" / "recipes" / "train.py"  # reports its PID, rank and CPUs, then waits


def test_the_cpu_recipes_are_there():
    assert [r.split()[0] for r in CPU_RECIPES] == ["torchrun", "numatune", "torchrun", "srun"]
    assert CPU_RECIPES[1].startswith("numatune launch --emit wrap.sh ") and "./wrap.sh" in CPU_RECIPES[2]


def _node0_cores() -> list[set[int]]:
    """Physical cores (sets of sibling CPUs) of node 0 that this process may use."""
    from pathlib import Path

    allowed = os.sched_getaffinity(0)
    cores: dict[str, set[int]] = {}
    for cpu in sorted(allowed):
        node = Path(f"/sys/devices/system/cpu/cpu{cpu}/node0")
        if not node.exists() and Path("/sys/devices/system/node/node1").exists():
            continue
        sib = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        cores.setdefault(sib, set()).add(cpu)
    return list(cores.values())


@pytest.mark.parametrize("recipe", [r for r in CPU_RECIPES if r.startswith("torchrun ")])
def test_cpu_recipe_runs_with_real_torchrun_and_audit_sees_each_rank_on_its_core(recipe, tmp_path):
    """The README's line as written, by a shell, in a directory holding train.py: torchrun (the CPU build of torch)
    starts 2 ranks, numatune binds each to its own core of node 0, and `numatune audit` of the ranks' PIDs says
    so (and what each rank reads of itself agrees)."""
    if importlib.util.find_spec("torch") is None or shutil.which("torchrun", path=BIN) is None:
        engine_missing(f"no torch for {sys.executable} (the CPU build of torch; scripts/test.sh installs it)")
    if len(_node0_cores()) < 2:
        pytest.skip(f"node 0 has fewer than 2 usable physical cores here ({_node0_cores()}): 2 ranks cannot split it")
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), "NO_COLOR": "1"}
    env.pop("NUMATUNE_ROOT", None)
    shutil.copy(TRAIN, tmp_path / "train.py")
    if "./wrap.sh" in recipe:  # the wrapper the README's `--emit` line writes, written by that line
        emit = subprocess.run(["bash", "-c", CPU_RECIPES[1]], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert emit.returncode == 0 and (tmp_path / "wrap.sh").exists(), emit.stderr
    proc = subprocess.Popen(["bash", "-c", recipe], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not all((tmp_path / f"ready-{r}").exists() for r in (0, 1)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ranks did not start within 180 s"
            time.sleep(0.2)
        ranks = {r: json.loads((tmp_path / f"ready-{r}").read_text()) for r in (0, 1)}
        audit = subprocess.run(["numatune", "audit", "--json", *(str(ranks[r]["pid"]) for r in (0, 1))], env=env,
                               capture_output=True, text=True, timeout=120)
        assert audit.returncode == 0, audit.stderr
        seen = {p["pid"]: p for p in json.loads(audit.stdout)["processes"]}
    finally:
        (tmp_path / "stop").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    cores = _node0_cores()
    got = []
    for r, report in ranks.items():
        a = seen[report["pid"]]
        assert a["rank"] == r and a["comm"].startswith("python")
        assert sorted(a["cpus_allowed"]) == report["affinity"]  # audit reads what the rank itself sees
        assert set(a["cpus_allowed"]) in cores, (r, a["cpus_allowed"], cores)  # one whole core of node 0
        assert a["home_nodes"] == [0] and report["omp"] == str(len(a["cpus_allowed"]))
        assert f"numatune: rank {r} → node 0: cpus " in err
        got.append(frozenset(a["cpus_allowed"]))
    assert got[0] != got[1]  # each rank its own core
