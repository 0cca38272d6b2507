"""The README's recipes ("numatune or your launcher's flag") run: each `numatune launch` line, started the
way its launcher starts ranks (a stand-in that sets the launcher's own rank variables for every local rank),
gives every rank its GPU, its own cores and its own NIC on the hand-made rail-aligned 8 GPU + 8 NIC tree."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import PROJECT
from tests.handmade_rail import build_rail

SECTION = (PROJECT / "README.md").read_text().split("#### numatune or your launcher's flag", 1)[1]
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
