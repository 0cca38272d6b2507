"""launch's torchrun view against torch.numa.binding itself, on this machine's kernel (needs torch 2.9+;
skipped without it), and the torchrun recipe run by the real torchrun.

torch.numa.binding asks CUDA for the GPUs and their PCI numa_node; this machine has no GPU, so the test
gives both sides the same GPUs on node 0 (torch's two GPU look-ups patched, numatune's as plan input):
every other input, the CPUs, siblings, caches and sched_getaffinity, is the live kernel's for both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from numatune.live.bind import gather_facts, read_launch_topology
from numatune.model.launch import CpuBind, LaunchOptions
from numatune.model.topology import PciDevice
from numatune.plan.launch import plan_launch
from numatune.system.host import Host
from tests.conftest import PROJECT, tool_path

binding = pytest.importorskip("torch.numa.binding")

GPUS = 2


@pytest.mark.parametrize("mode", ["node", "socket", "exclusive", "core-complex"])
def test_torchrun_view_equals_torch_numa_binding_on_this_kernel(mode, monkeypatch):
    if shutil.which("numactl") is None:
        pytest.skip("torch.numa.binding requires numactl")
    monkeypatch.setattr(binding, "_get_gpu_count", lambda: GPUS)
    monkeypatch.setattr(binding, "_get_numa_node_index_for_gpu_index", lambda *, gpu_index: 0)
    host = Host.open("/")
    topo = read_launch_topology(host, node_kinds=False)
    devices = [PciDevice(f"0000:{0x10 + i:02x}:00.0", "", 0x030200, 0x10DE, 0x2330, "gpu", 0) for i in range(GPUS)]
    for rank in range(GPUS):
        env = {"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(GPUS)}
        facts = gather_facts(host, env, probe=False, topo=topo)
        p = plan_launch(topo, devices, facts, LaunchOptions(cpu_bind=CpuBind(mode)), ("true",))
        options = binding.NumaOptions(affinity_mode=binding.AffinityMode(mode))
        try:
            theirs = binding._get_validated_logical_cpus_to_bind_to(gpu_index=rank, numa_options=options)
        except (RuntimeError, ValueError):
            assert p.torch.error is not None, p.torch
            continue
        assert set(p.torch.cpus) == set(theirs), (rank, p.reasons)


def test_torchrun_recipe_with_the_real_torchrun(tmp_path):
    torchrun = shutil.which("torchrun", path=tool_path())
    if torchrun is None:
        pytest.skip("no torchrun")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two allowed CPUs")
    probe = ("import json, os, sys; open(sys.argv[1] + os.environ['LOCAL_RANK'], 'w').write(json.dumps("
             "{'cpus': sorted(os.sched_getaffinity(0)), 'omp': os.environ.get('OMP_NUM_THREADS')}))")
    out = str(tmp_path / "rank")
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    numatune = shutil.which("numatune", path=tool_path())  # as the README recipe: the command
    # (`python -m numatune` would not do: torchrun's parser takes the -m and what follows as its own options)
    res = subprocess.run([torchrun, "--nproc-per-node", "2", "--no-python", numatune,
                          "launch", "--numa-node", "0", "--cpu-bind", "exclusive", "--mem-policy", "none", "--",
                          sys.executable, "-c", probe, out], env=env, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    at = res.args.index("--numa-node")  # why the recipe says --numa-node: torchrun takes --node for its own
    plain = subprocess.run([*res.args[:at], "--node", *res.args[at + 1:]], env=env, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert plain.returncode != 0 and "ambiguous option: --node could match --node-rank" in plain.stderr
    ranks = [json.loads((tmp_path / f"rank{r}").read_text()) for r in range(2)]
    assert ranks[0]["cpus"] and ranks[1]["cpus"] and not set(ranks[0]["cpus"]) & set(ranks[1]["cpus"])
    assert set(ranks[0]["cpus"]) | set(ranks[1]["cpus"]) <= set(allowed)
    assert all(r["omp"] == str(len(r["cpus"])) for r in ranks)
