"""launch's CPU choice beside torchrun --numa-binding's, on fixture trees.

`reference` below re-derives torch.numa.binding's documented algorithm (PyTorch 2.9+, torch/numa/binding.py
and the AffinityMode docs) from the tree's raw sysfs files, independently of numatune's readers and plan:
- the GPU of local rank r is cuda:r (PCI order here); its node is its PCI function's numa_node, -1 read as 0;
- a node's CPUs: nodeN/cpulist ∩ sched_getaffinity(0);
- socket: every possible node whose lowest allowed CPU has the GPU node's physical_package_id;
- exclusive: the node's physical cores (keyed by the lowest CPU of thread_siblings_list, ascending) split
  evenly over the GPUs whose numa_node is that node, the first GPUs one core more when uneven;
- core-complex: the node's CPUs grouped by the shared_cpu_list of their highest-level Data/Unified cache
  (keyed by its lowest CPU), most allowed CPUs first then by key; GPU #i of the node takes group i mod count.
Where a tree lacks a file torch reads (util-linux dumps keep only nodeN/cpumap; hand-made PCI dirs have no
numa_node) the reference reads what a live kernel would show instead (the cpumap mask; -1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from numatune.live.bind import read_launch_devices, read_launch_topology
from numatune.model.launch import CpuBind, LaunchFacts, LaunchOptions, Numactl
from numatune.model.topology import PciDevice
from numatune.plan.launch import plan_launch
from numatune.readers.caches import llc_groups
from numatune.system.host import Host
from tests.conftest import fixture_root

MODES = ("node", "socket", "exclusive", "core-complex")
NUMACTL = Numactl("/usr/bin/numactl", "2.0.19", True, True)


# -- the reference, from raw files --------------------------------------------------------------------------
def _text(path: Path) -> str | None:
    try:
        return path.read_text().replace("\0", "").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _ints(text: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _mask(text: str) -> set[int]:
    value = int(text.replace(",", ""), 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


class Reference:
    def __init__(self, root: Path, gpu_nodes: list[int], allowed: set[int] | None = None):
        self.sys = root / "sys/devices/system"
        self.gpu_nodes = [max(n, 0) for n in gpu_nodes]  # -1 read as node 0
        online = _text(self.sys / "cpu/online")  # sched_getaffinity of an unrestricted process
        cpus = _ints(online) if online else {int(p.name[3:]) for p in (self.sys / "cpu").glob("cpu[0-9]*")}
        self.allowed = allowed if allowed is not None else cpus

    def node_cpus(self, node: int) -> set[int]:
        d = self.sys / f"node/node{node}"
        text = _text(d / "cpulist")
        cpus = _ints(text) if text is not None else _mask(_text(d / "cpumap") or "0")
        return cpus & self.allowed

    def nodes(self) -> set[int]:
        text = _text(self.sys / "node/possible")
        return _ints(text) if text else {int(p.name[4:]) for p in (self.sys / "node").glob("node[0-9]*")}

    def package(self, cpu: int) -> int:
        return int(_text(self.sys / f"cpu/cpu{cpu}/topology/physical_package_id"))

    def core_key(self, cpu: int) -> int:
        return min(_ints(_text(self.sys / f"cpu/cpu{cpu}/topology/thread_siblings_list")))

    def cache_key(self, cpu: int) -> int:
        best, shared = -1, set()
        base = self.sys / f"cpu/cpu{cpu}/cache"
        for d in sorted(base.iterdir()):  # FileNotFoundError without cache info, as torch raises
            if not (d.name.startswith("index") and d.name[5:].isdigit()):
                continue
            if (d / "type").read_text().strip() not in ("Data", "Unified"):  # open() raises, as torch's does
                continue
            level = int((d / "level").read_text())
            if level > best:
                best, shared = level, _ints((d / "shared_cpu_list").read_text())
        return min(shared)

    def gpu_position(self, gpu: int) -> tuple[int, int]:
        mine = [i for i, n in enumerate(self.gpu_nodes) if n == self.gpu_nodes[gpu]]
        return mine.index(gpu), len(mine)

    def cpus(self, mode: str, gpu: int) -> set[int]:
        node = self.gpu_nodes[gpu]
        if mode == "node":
            return self.node_cpus(node)
        if mode == "socket":
            want = self.package(min(self.node_cpus(node)))
            same = [n for n in self.nodes() if self.package(min(self.node_cpus(n))) == want]
            return set().union(*(self.node_cpus(n) for n in same))
        index, count = self.gpu_position(gpu)
        groups: dict[int, set[int]] = {}
        key = self.core_key if mode == "exclusive" else self.cache_key
        for cpu in self.node_cpus(node):
            groups.setdefault(key(cpu), set()).add(cpu)
        if mode == "exclusive":
            cores = [groups[k] for k in sorted(groups)]
            per, extra = divmod(len(cores), count)
            if per < 1:
                raise RuntimeError(f"{len(cores)} physical cores for {count} GPUs")
            start = index * per + min(index, extra)
            return set().union(*cores[start:start + per + (index < extra)])
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        return ordered[index % len(ordered)][1]


# -- numatune's side ------------------------------------------------------------------------------------------
def gpus_of(root: Path) -> list[tuple[str, int]]:
    """(BDF, raw numa_node) of the tree's NVIDIA/AMD display-class functions, in PCI order (cuda:i)."""
    out = []
    for d in sorted((root / "sys/bus/pci/devices").iterdir()):
        cls, vendor = _text(d / "class") or "", _text(d / "vendor") or ""
        if cls.startswith("0x03") and vendor in ("0x10de", "0x1002", ""):  # hand-made POWER9 dirs: class only
            out.append((d.name.lower(), int(_text(d / "numa_node") or -1)))
    return out


def synthetic_gpus(nodes: list[int]) -> list[PciDevice]:
    """GPUs as pure plan input for trees captured without PCI (one per entry, on that node)."""
    return [PciDevice(f"0000:{0x10 + i:02x}:00.0", "", 0x030200, 0x10DE, 0x2330, "gpu", n)
            for i, n in enumerate(nodes)]


def launch(name: str, mode: str, rank: int, size: int, devices=None, *, kind: str = "performance", reserve: int = 0,
           **fkw):
    host = Host.open(fixture_root(name))
    topo = read_launch_topology(host, node_kinds=False)
    devices = read_launch_devices(host, topo) if devices is None else devices
    groups = llc_groups(host, [c.id for c in topo.cpus if c.online])
    facts = LaunchFacts(env={"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(size)}, numactl=NUMACTL,
                        kernel="6.10.0", cache_groups=groups, **fkw)
    opts = LaunchOptions(cpu_bind=CpuBind(mode), cpu_kind=kind, reserve_cores=reserve)
    return plan_launch(topo, devices, facts, opts, ("python", "train.py"))


# -- trees with GPUs in PCI sysfs -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["handmade-launch-2s4gpu-cxl", "handmade-dgx-h100-ids", "h100-vm-1gpu",
                                  "vm-accel-nvidia-p100", "nvidiagpunumanodes"])
@pytest.mark.parametrize("mode", MODES)
def test_torchruns_choice_is_torch_numa_bindings_on_every_gpu_tree(name, mode):
    root = fixture_root(name)
    gpus = gpus_of(root)
    assert gpus, name
    ref = Reference(root, [n for _, n in gpus])
    for rank in range(len(gpus)):
        try:
            want = ref.cpus(mode, rank)
        except FileNotFoundError:  # no cache information: torch raises, and so does numatune's core-complex
            with pytest.raises(Exception, match="cache information"):
                launch(name, mode, rank, len(gpus))
            continue
        except ValueError:  # socket asks every node, CPU-less ones too, for its lowest CPU: min() of nothing
            p = launch(name, mode, rank, len(gpus))
            assert p.torch.error.startswith(f"torchrun --numa-binding={mode} would fail: it asks every node")
            assert p.cpus and any(r.endswith("numatune binds as above") for r in p.reasons)
            continue
        except RuntimeError:  # more GPUs than cores on the node it reads
            p = launch(name, mode, rank, len(gpus))
            assert p.torch.error.startswith(f"torchrun --numa-binding={mode} would fail: node 0 has 4 physical")
            continue
        p = launch(name, mode, rank, len(gpus))
        assert p.torch is not None and p.torch.error is None, p.torch
        assert set(p.torch.cpus) == want, (rank, p.torch)
        assert p.torch.node == max(gpus[rank][1], 0)
        assert p.torch.same == (set(p.cpus) == want)
        numa_known = gpus[rank][1] >= 0 or len([n for n in root.glob("sys/devices/system/node/node*")]) == 1
        if numa_known:  # torchrun's inputs are right: numatune gives the same CPUs
            assert set(p.cpus) == want, (rank, p.reasons)
        else:
            assert p.torch.same or any("numa_node -1" in b for b in p.torch.because)


def test_numa_node_minus_one_on_a_multi_node_machine_is_named():
    # POWER9 + V100: three GPUs sit on node 8 (from local_cpus); torch reads numa_node -1 as node 0
    p = launch("nvidiagpunumanodes", "node", 3, 6)
    assert p.node == 8 and p.torch.node == 0 and not p.torch.same
    assert p.torch.because[0].startswith("the GPU reports numa_node -1, which torch reads as node 0 "
                                         "(numatune uses node 8: inferred from local_cpulist")
    assert any(r.startswith("torchrun --numa-binding=node would bind to CPUs 0-15 (node 0): the GPU reports "
                            "numa_node -1") for r in p.reasons)


# -- the many-L3 EPYC tree and GB10 (GPUs given as plan input: those captures have no PCI) --------------------
@pytest.mark.parametrize("mode", MODES)
def test_epyc_two_gpus_per_node_every_mode_equals_torch(mode):
    nodes = [i // 2 for i in range(16)]
    ref = Reference(fixture_root("x86_64-epyc_7451"), nodes)
    for rank in range(16):
        p = launch("x86_64-epyc_7451", mode, rank, 16, synthetic_gpus(nodes))
        want = ref.cpus(mode, rank)
        assert set(p.cpus) == want and p.torch.same, (rank, p.reasons)
        if mode == "core-complex":  # one whole CCX (3 cores + SMT siblings) per rank, the two of a node apart
            assert len(want) == 6 and len({c % 48 // 3 for c in want}) == 1


def test_epyc_core_complex_three_ranks_on_two_ccx_split_instead_of_sharing():
    nodes = [0, 0, 0]
    ref = Reference(fixture_root("x86_64-epyc_7451"), nodes)
    plans = [launch("x86_64-epyc_7451", "core-complex", r, 3, synthetic_gpus(nodes)) for r in range(3)]
    assert [set(p.torch.cpus) for p in plans] == [ref.cpus("core-complex", r) for r in range(3)]
    assert ref.cpus("core-complex", 0) == ref.cpus("core-complex", 2) == {0, 1, 2, 48, 49, 50}
    mine = [set(p.cpus) for p in plans]
    assert not (mine[0] & mine[2]) and mine[0] | mine[2] == {0, 1, 2, 48, 49, 50}
    assert mine[1] == {3, 4, 5, 51, 52, 53} and plans[1].torch.same
    assert any("2 L3 group(s)" in b for b in plans[2].torch.because)


def test_gb10_core_complex_two_l3_clusters():
    nodes = [0, 0]
    ref = Reference(fixture_root("nvidia-dgx-gb10"), nodes)
    assert [ref.cpus("core-complex", r) for r in range(2)] == [set(range(10)), set(range(10, 20))]
    for r in range(2):
        anykind = launch("nvidia-dgx-gb10", "core-complex", r, 2, synthetic_gpus(nodes), kind="any")
        assert set(anykind.cpus) == ref.cpus("core-complex", r) and anykind.torch.same
        perf = launch("nvidia-dgx-gb10", "core-complex", r, 2, synthetic_gpus(nodes))
        assert set(perf.cpus) < ref.cpus("core-complex", r) and len(perf.cpus) == 5  # the X925 half
        assert any("ignores CPU kinds" in b for b in perf.torch.because)


def test_gb10_core_complex_ranks_sharing_a_cluster_split_its_performance_cores():
    """Six ranks on two L3 clusters: three share each cluster's five X925 cores (2, 2, 1), never a mix of
    kinds cut before the kind choice (which gave one rank 3 cores and another 2 of the wrong shares)."""
    nodes = [0] * 6
    plans = [launch("nvidia-dgx-gb10", "core-complex", r, 6, synthetic_gpus(nodes)) for r in range(6)]
    mine = [set(p.cpus) for p in plans]
    assert all(not (a & b) for i, a in enumerate(mine) for b in mine[i + 1:])
    perf = launch("nvidia-dgx-gb10", "core-complex", 0, 2, synthetic_gpus([0, 0]))
    perf_other = launch("nvidia-dgx-gb10", "core-complex", 1, 2, synthetic_gpus([0, 0]))
    assert mine[0] | mine[2] | mine[4] == set(perf.cpus) and mine[1] | mine[3] | mine[5] == set(perf_other.cpus)
    assert sorted(len(m) for m in mine) == [1, 1, 2, 2, 2, 2]


# -- where torchrun's inputs are wrong, the dry run says why ----------------------------------------------------
def test_cgroup_cpuset_beyond_the_affinity_mask_is_named():
    allowed = frozenset(range(16)) - {2, 3, 10, 11}
    p = launch("handmade-launch-2s4gpu-cxl", "node", 0, 4, allowed_cpus=allowed, affinity_cpus=frozenset(range(16)),
               allowed_source="sched_getaffinity ∩ /sys/fs/cgroup/job/cpuset.cpus.effective")
    assert set(p.torch.cpus) == {0, 1, 2, 3, 8, 9, 10, 11} and set(p.cpus) == {0, 1, 8, 9}
    assert any("sched_getaffinity only" in b and "2-3,10-11" in b and "cpuset.cpus.effective" in b
               for b in p.torch.because)


def test_isolated_cpus_are_named():
    p = launch("handmade-launch-2s4gpu-cxl", "node", 0, 4, isolated=frozenset({3, 11}))
    assert 3 in p.torch.cpus and 3 not in p.cpus
    assert any("isolated CPUs 3,11" in b for b in p.torch.because)


def test_non_linear_cpu_numbering_exclusive_keeps_each_share_on_one_socket():
    # E5472 pair: CPU numbers alternate between the sockets (even: package 0, odd: package 1)
    nodes = [0, 0, 0, 0]
    ref = Reference(fixture_root("8em64t-2s2ca2c-buggynuma"), nodes)
    for rank in range(4):
        p = launch("8em64t-2s2ca2c-buggynuma", "exclusive", rank, 4, synthetic_gpus(nodes))
        assert set(p.torch.cpus) == ref.cpus("exclusive", rank) == {2 * rank, 2 * rank + 1}
        assert len({c % 2 for c in p.cpus}) == 1  # one socket, one shared L2
        assert any(b.startswith("it splits the node's cores in CPU-number order") and
                   "non-linear" in b and "2 socket(s)" in b for b in p.torch.because)
        assert any(r.startswith("core order: node 0 numbers its CPUs non-linearly") for r in p.reasons)


def test_torchs_split_follows_the_visible_devices_order(cli):
    """CUDA_VISIBLE_DEVICES=7,6,5,4: torch's cuda:0 is GPU7, the first of node 1's four in its order, so it
    takes the first quarter of the node; the view sorted the GPUs again and said "the same CPUs"."""
    r = cli("--root", str(fixture_root("handmade-dgx-h100-ids")), "launch", "--dry-run", "--cpu-bind", "exclusive",
            "--", "true", env={"CUDA_VISIBLE_DEVICES": "7,6,5,4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"})
    line = next(x for x in r.stdout.splitlines() if "torchrun --numa-binding=exclusive" in x)
    assert "would bind to CPUs 56-69,168-181 (node 1)" in line
    assert "this rank's share is #1 of 4 there, #4 here" in line


# -- the comparison's reasons are computed from the actual difference -------------------------------------------
def test_gb10_uneven_exclusive_split_names_the_cpus_and_the_split_rules_not_isolcpus():
    """GB10, 3 ranks, exclusive over both kinds: torchrun gives the 2 left-over cores to its first ranks, numatune
    leaves them free (mixed kinds: every rank as many). Nothing is isolated or disallowed; the reasons said so."""
    nodes = [0, 0, 0]
    plans = [launch("nvidia-dgx-gb10", "exclusive", r, 3, synthetic_gpus(nodes), kind="any") for r in range(3)]
    ref = Reference(fixture_root("nvidia-dgx-gb10"), nodes)
    assert [set(p.torch.cpus) for p in plans] == [ref.cpus("exclusive", r) for r in range(3)]
    for p in plans:
        assert not p.torch.same
        text = " ".join(p.torch.because)
        assert "isolated" not in text and "allowed" not in text and "usable CPUs of the node differ" not in text
        assert p.torch.because[-1] == ("torchrun splits all 20 cores of node 0 it may run on among 3 GPU(s) (6 each, "
                                       "the first 2 one more); numatune splits its 20 usable cores among 3 rank(s) "
                                       "(6, 6, 6 core(s); 2 left unused, mixed CPU kinds: every rank as many)")
    assert plans[0].torch.because[0] == "CPU 6: numatune gives to rank #2 of 3 on node 0"
    assert plans[1].torch.because[:2] == ("CPUs 12-13: numatune gives to rank #3 of 3 on node 0",
                                          "CPU 6: torchrun gives to its rank #1 of 3 on node 0")
    assert plans[2].torch.because[0].startswith("CPUs 18-19: numatune leaves unused: its 20 usable cores of mixed "
                                                "CPU kinds do not split evenly among 3 ranks")


def test_reserved_cores_are_named_cpu_by_cpu():
    p = launch("handmade-launch-2s4gpu-cxl", "node", 0, 4, reserve=1)
    assert 0 in p.torch.cpus and 0 not in p.cpus
    assert "CPUs 0,8: numatune reserves (--reserve-cores 1), torchrun reserves none" in p.torch.because


EPYC_NODE0_CCX = ({0, 1, 2, 48, 49, 50}, {3, 4, 5, 51, 52, 53})  # x86_64-epyc_7451 node 0: two L3 groups


def test_core_complex_orders_l3_groups_most_allowed_cpus_first_under_a_cgroup_limit():
    """A cgroup (and so the affinity mask) takes core 0 of the first CCX: both torchrun and numatune put the
    CCX with most allowed CPUs first, so rank 0 gets the whole second CCX and rank 1 the rest of the first
    (by group key alone rank 0 would get the cut one)."""
    allowed = frozenset(range(96)) - {0, 48}
    nodes = [0, 0]
    ref = Reference(fixture_root("x86_64-epyc_7451"), nodes, allowed=set(allowed))
    plans = [launch("x86_64-epyc_7451", "core-complex", r, 2, synthetic_gpus(nodes), allowed_cpus=allowed,
                    affinity_cpus=allowed, allowed_source="cgroup cpuset") for r in range(2)]
    assert [set(p.cpus) for p in plans] == [EPYC_NODE0_CCX[1], EPYC_NODE0_CCX[0] - {0, 48}]
    assert [set(p.torch.cpus) for p in plans] == [ref.cpus("core-complex", r) for r in range(2)]
    assert all(p.torch.same for p in plans)


def test_core_complex_with_isolcpus_orders_by_usable_cpus_and_says_torchrun_does_not():
    """isolcpus takes core 0 of the first CCX: numatune orders the groups by usable CPUs (the second CCX first),
    torchrun, which reads no isolcpus, by its full groups (the first CCX first): the reasons name the CPUs."""
    nodes = [0, 0]
    plans = [launch("x86_64-epyc_7451", "core-complex", r, 2, synthetic_gpus(nodes), isolated=frozenset({0, 48}))
             for r in range(2)]
    assert [set(p.cpus) for p in plans] == [EPYC_NODE0_CCX[1], EPYC_NODE0_CCX[0] - {0, 48}]
    assert [set(p.torch.cpus) for p in plans] == list(EPYC_NODE0_CCX)
    first = plans[0].torch.because
    assert "it would also use the isolated CPUs 0,48 (isolcpus), which numatune leaves out" in first
    assert "CPUs 1-2,49-50: numatune gives to rank #2 of 2 on node 0" in first
    assert "CPUs 3-5,51-53: torchrun gives to its rank #2 of 2 on node 0" in first
