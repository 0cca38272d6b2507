"""bind_worker() under every binder a rank can have (issue 46): the rank's own CPU mask is the outer limit of its
workers, whoever set it. Real processes: a rank program started under taskset, numactl --physcpubind, numatune
launch, torchrun --numa-binding, in a child cgroup's cpuset, or narrowing itself with os.sched_setaffinity, runs
forked workers (torch's DataLoader in the taskset and launch cases, a fork Pool elsewhere: torch's import is the
cost) and a spawn Pool, all with numatune.bind_worker(); every thread of every worker must stay within the rank's
CPUs. Slurm --cpu-bind and mpirun --bind-to give a rank its mask the same way (the mask is all the code reads),
so these stand for them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numatune.plan.inherited import VARIABLE
from tests.conftest import PROJECT, child_cpuset, tool_path

CPUS = sorted(os.sched_getaffinity(0))
NEEDS_TWO = pytest.mark.skipif(len(CPUS) < 2, reason="needs two allowed CPUs: a rank on one of them is a narrowing")
LAST = CPUS[-1]

# The rank program: argv[1] the CPU it narrows itself to ("-": it does not), argv[2] the output file prefix,
# argv[3] "dataloader" (torch's DataLoader, forked workers, where torch is installed) or "pool" (a forked Pool).
RANK = """
    import json, multiprocessing as mp, os, sys
    import numatune

    def masks():
        return {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}

    def task(_):
        return {"pid": os.getpid(), "kind": "pool", "masks": masks()}

    if __name__ == "__main__":
        if sys.argv[1] != "-":
            os.sched_setaffinity(0, {int(sys.argv[1])})
        rows = []
        tud = None
        if sys.argv[3] == "dataloader":
            try:
                import torch.utils.data as tud
            except ImportError:
                pass
        if tud is None:
            with mp.get_context("fork").Pool(2, initializer=numatune.bind_worker()) as pool:
                rows += [dict(r, kind="fork pool") for r in pool.map(task, range(4))]
        if tud is not None:
            class Masks(tud.Dataset):
                def __len__(self):
                    return 4
                def __getitem__(self, i):
                    return json.dumps({"pid": os.getpid(), "kind": "dataloader", "masks": masks()})
            loader = tud.DataLoader(Masks(), num_workers=2, batch_size=None, worker_init_fn=numatune.bind_worker(),
                                    multiprocessing_context="fork")
            rows += [json.loads(r) for r in loader]
        with mp.get_context("spawn").Pool(2, initializer=numatune.bind_worker()) as pool:
            rows += pool.map(task, range(4))
        rank = os.environ.get("LOCAL_RANK", "0")
        doc = {"rank": os.getpid(), "mask": sorted(os.sched_getaffinity(0)), "rows": rows}
        with open(sys.argv[2] + rank, "w") as f:
            json.dump(doc, f)
"""


def run_rank(tmp_path: Path, prefix: list[str], narrow: int | None = None, env: dict[str, str] | None = None,
             ranks: int = 1, python: tuple[str, ...] = (), preexec=None, forked: str = "pool",  # noqa: ANN001
             ) -> list[dict]:
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(RANK))
    full = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE, "OMP_NUM_THREADS")}
    full["PYTHONPATH"] = os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])
    full.update(env or {})
    out = tmp_path / "out"
    cmd = [*prefix, *(python or (sys.executable,)), str(script), "-" if narrow is None else str(narrow), str(out),
           forked]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=full, timeout=300, check=False,
                          preexec_fn=preexec)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((tmp_path / f"out{r}").read_text()) for r in range(ranks)]


def assert_within(doc: dict, cpus: list[int]) -> None:
    assert doc["mask"] == cpus, doc["mask"]
    kinds = {r["kind"] for r in doc["rows"]}
    assert "pool" in kinds and kinds & {"dataloader", "fork pool"} and len({r["pid"] for r in doc["rows"]}) >= 2
    for row in doc["rows"]:
        assert row["pid"] != doc["rank"]
        for tid, mask in row["masks"].items():
            assert set(mask) <= set(cpus), (row["kind"], row["pid"], tid, mask, cpus)


@NEEDS_TWO
def test_taskset_keeps_the_workers_on_the_ranks_cpu(tmp_path):
    (doc,) = run_rank(tmp_path, ["taskset", "-c", str(LAST)], forked="dataloader")
    assert_within(doc, [LAST])


@NEEDS_TWO
@pytest.mark.skipif(shutil.which("numactl") is None, reason="numactl is not installed")
def test_numactl_physcpubind_keeps_the_workers_on_the_ranks_cpu(tmp_path):
    (doc,) = run_rank(tmp_path, ["numactl", f"--physcpubind={CPUS[0]}"])
    assert_within(doc, [CPUS[0]])


@NEEDS_TWO
def test_a_rank_that_narrowed_itself_keeps_its_workers_there(tmp_path):
    (doc,) = run_rank(tmp_path, [], narrow=LAST)
    assert_within(doc, [LAST])


@NEEDS_TWO
def test_a_rank_launch_bound_then_narrowed_keeps_its_workers_in_the_narrower_mask(tmp_path):
    """launch gives the rank node 0's CPUs (its record says so); the rank narrows itself to one of them: the record
    still holds (the mask is within it) but the workers keep the narrower mask, not launch's CPUs."""
    node0 = sorted(set(CPUS) & set(_node0()))
    if len(node0) < 2:
        pytest.skip("node 0 has fewer than two allowed CPUs: launch --node 0 would not be wider than one")
    (doc,) = run_rank(tmp_path, [sys.executable, "-m", "numatune", "launch", "--node", "0", "--mem-policy", "none",
                                 "--"], narrow=node0[-1], forked="dataloader")
    assert_within(doc, [node0[-1]])


@NEEDS_TWO
def test_launch_cores_1_keeps_the_workers_on_the_ranks_core(tmp_path):
    (doc,) = run_rank(tmp_path, [sys.executable, "-m", "numatune", "launch", "--cpu-bind", "cores:1", "--"])
    assert len(doc["mask"]) < len(CPUS) or len(_node0()) == 1
    assert_within(doc, doc["mask"])


@NEEDS_TWO
def test_a_child_cgroups_cpuset_keeps_the_rank_and_its_workers_inside(tmp_path):
    """A container's cpuset, made for real: a child cgroup holding the last CPU only; launch (no GPU, no --node)
    binds the rank inside it and bind_worker() keeps the workers there."""
    with child_cpuset(str(LAST)) as enter:
        (doc,) = run_rank(tmp_path, [sys.executable, "-m", "numatune", "launch", "--mem-policy", "none", "--"],
                          preexec=enter)
    assert_within(doc, [LAST])


def _node0() -> list[int]:
    from numatune.cpulist import parse_cpulist

    return sorted(parse_cpulist(Path("/sys/devices/system/node/node0/cpulist").read_text().strip()))


# torch.numa.binding finds the GPUs through torch's public device API (torch.cuda / torch.accelerator); this
# machine has none, so the agent process is given two that sit at PCI functions this machine has (whose
# numa_node is the kernel's), by patching those public names only before torchrun's own main() runs.
TORCHRUN = """
    import sys, types, torch, glob, os
    fns = sorted(p.rsplit("/", 1)[1] for p in glob.glob("/sys/bus/pci/devices/*") if p.endswith(".0"))[:2]
    def props(i):
        dom, bus, dev = fns[i].split(":")[0], fns[i].split(":")[1], fns[i].split(":")[2].split(".")[0]
        return types.SimpleNamespace(pci_domain_id=int(dom, 16), pci_bus_id=int(bus, 16), pci_device_id=int(dev, 16))
    torch.cuda.device_count = lambda: len(fns)
    torch.cuda.get_device_properties = props
    torch.cuda.is_available = lambda: True
    acc = getattr(torch, "accelerator", None)
    if acc is not None:
        acc.device_count = lambda: len(fns)
        acc.is_available = lambda: True
        acc.current_accelerator = lambda *a, **k: torch.device("cuda")
    from torch.distributed.run import main
    sys.exit(main())
"""


@NEEDS_TWO
def test_torchrun_numa_binding_exclusive_keeps_each_ranks_workers_on_its_cores(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    from torch.distributed import run as tdrun

    if "--numa-binding" not in textwrap.dedent(tdrun.get_args_parser().format_help()):
        pytest.skip("this torch's torchrun has no --numa-binding (torch 2.9+)")
    if shutil.which("numactl") is None:
        pytest.skip("torchrun --numa-binding execs its ranks through numactl, which is not installed")
    if len(list(Path("/sys/bus/pci/devices").glob("*.0"))) < 2:
        pytest.skip("needs two PCI functions to stand for the two GPUs")
    agent = tmp_path / "torchrun_agent.py"
    agent.write_text(textwrap.dedent(TORCHRUN))
    docs = run_rank(tmp_path, [sys.executable, str(agent), "--nproc-per-node", "2", "--numa-binding", "exclusive",
                               "--no-python"], ranks=2, env={"PATH": tool_path() + os.pathsep + os.environ["PATH"]})
    masks = [d["mask"] for d in docs]
    if masks[0] == masks[1]:
        pytest.skip(f"torchrun --numa-binding exclusive gave both ranks CPUs {masks[0]}: no narrowing to check here")
    assert not set(masks[0]) & set(masks[1])
    for doc in docs:
        assert_within(doc, doc["mask"])
