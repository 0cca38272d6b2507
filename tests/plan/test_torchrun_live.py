"""launch's torchrun view against torch.numa.binding itself, on this machine's kernel (needs torch 2.9+;
skipped without it), and the torchrun recipe run by the real torchrun.

torch.numa.binding asks torch's device API for the GPUs and their PCI addresses, then the kernel for those
addresses' numa_node; this machine has no GPU, so the test patches only torch's public device API
(torch.cuda, torch.accelerator: what any CUDA build answers) to show two GPUs at two PCI functions this machine
has, and gives numatune the same two as plan input: every other input, the CPUs, siblings, caches, numa_node
and sched_getaffinity, is the live kernel's for both. No private name of torch is patched; the private entry
point compared against is feature-detected (its keyword was gpu_index up to torch 2.13, device_index since
2.14), and the test is skipped, saying so, when this torch has neither.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numatune.live.bind import gather_facts, read_launch_topology
from numatune.model.launch import CpuBind, LaunchOptions
from numatune.model.topology import PciDevice
from numatune.plan.launch import plan_launch
from numatune.system.host import Host
from tests.conftest import PROJECT, tool_path

binding = pytest.importorskip("torch.numa.binding")

GPUS = 2


def _pci_functions(count: int) -> list[tuple[str, int]]:
    """(address, numa_node as torch.numa.binding reads it: -1 is node 0) of `count` PCI functions of this machine."""
    found = []
    for path in sorted(Path("/sys/bus/pci/devices").glob("*.0"))[:count]:
        try:
            node = int((path / "numa_node").read_text().strip())
        except (OSError, ValueError):
            continue
        found.append((path.name, max(node, 0)))
    return found


def _torch_entry():
    """torch's function that gives a GPU's CPUs, and the keyword naming the GPU; None when this torch has neither
    form (the comparison then has nothing to call)."""
    import inspect

    fn = getattr(binding, "_get_validated_logical_cpus_to_bind_to", None)
    if fn is None:
        return None
    names = inspect.signature(fn).parameters
    key = next((k for k in ("device_index", "gpu_index") if k in names), None)
    return (fn, key) if key is not None and "numa_options" in names else None


def _public_gpus(monkeypatch, functions: list[tuple[str, int]]) -> None:
    """torch's public device API answering for GPUs at `functions` (what a CUDA build reports for its GPUs)."""
    import types

    import torch

    def props(index: int) -> types.SimpleNamespace:
        dom, bus, rest = functions[index][0].split(":")
        return types.SimpleNamespace(pci_domain_id=int(dom, 16), pci_bus_id=int(bus, 16),
                                     pci_device_id=int(rest.split(".")[0], 16))

    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(functions))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        monkeypatch.setattr(accelerator, "device_count", lambda: len(functions), raising=False)
        monkeypatch.setattr(accelerator, "is_available", lambda: True, raising=False)
        monkeypatch.setattr(accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda"), raising=False)


@pytest.mark.parametrize("mode", ["node", "socket", "exclusive", "core-complex"])
def test_torchrun_view_equals_torch_numa_binding_on_this_kernel(mode, monkeypatch):
    if shutil.which("numactl") is None:
        pytest.skip("torch.numa.binding requires numactl")
    entry = _torch_entry()
    if entry is None:
        pytest.skip("this torch's torch.numa.binding has no _get_validated_logical_cpus_to_bind_to(device_index= or "
                    "gpu_index=, numa_options=): nothing to compare launch's view with")
    functions = _pci_functions(GPUS)
    if len(functions) < GPUS:
        pytest.skip(f"needs {GPUS} PCI functions with a numa_node to stand for the GPUs")
    _public_gpus(monkeypatch, functions)
    fn, key = entry
    host = Host.open("/")
    topo = read_launch_topology(host, node_kinds=False)
    devices = [PciDevice(bdf, "", 0x030200, 0x10DE, 0x2330, "gpu", node) for bdf, node in functions]
    for rank in range(GPUS):
        env = {"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(GPUS)}
        facts = gather_facts(host, env, probe=False, topo=topo)
        p = plan_launch(topo, devices, facts, LaunchOptions(cpu_bind=CpuBind(mode)), ("true",))
        options = binding.NumaOptions(affinity_mode=binding.AffinityMode(mode))
        try:
            theirs = fn(**{key: rank}, numa_options=options)
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
