"""One rule for exit codes, per command: 2 for what the user typed that cannot be (a node, GPU, size, time,
count or suffix, click's own usage errors included), 3 for what numatune read, 6 for a process that is not
there, 7 for what this machine cannot do; each as one line on stderr (and maybe a hint line)."""

from __future__ import annotations

import pytest

from tests.conftest import fixture_root

NO_GPU = "vm-two-socket"  # 2 nodes (0, 1), no GPU, no CXL
GPUS = "handmade-launch-2s4gpu-cxl"  # 4 GPUs, a CXL node

CASES = [  # (id, root, arguments, exit code, what the one line names)
    # 2: what the user typed cannot be
    ("launch --node", NO_GPU, ["launch", "--node", "9", "--dry-run", "--", "true"], 2, "--node 9"),
    ("launch --gpu index", GPUS, ["launch", "--gpu", "9", "--dry-run", "--", "true"], 2, "--gpu 9"),
    ("launch --gpu bdf", GPUS, ["launch", "--gpu", "0000:99:00.0", "--dry-run", "--", "true"], 2, "--gpu 0000:99"),
    ("launch --gpu text", GPUS, ["launch", "--gpu", "first", "--dry-run", "--", "true"], 2, "--gpu 'first'"),
    ("launch on a root", NO_GPU, ["launch", "--node", "0", "--", "true"], 2, "live node"),
    ("plan-memory --params -5", NO_GPU, ["plan-memory", "--params", "-5", "--node", "0"], 2, "'--params': '-5'"),
    ("plan-memory --params x", NO_GPU, ["plan-memory", "--params", "x", "--node", "0"], 2, "'--params': 'x'"),
    ("plan-memory --gpu on no GPU", NO_GPU, ["plan-memory", "--params", "7e9", "--gpu", "3"], 2, "--gpu 3"),
    ("plan-memory --gpu index", GPUS, ["plan-memory", "--params", "7e9", "--gpu", "7"], 2, "--gpu 7"),
    ("plan-memory --dram-budget", NO_GPU, ["plan-memory", "--params", "7e9", "--node", "0", "--dram-budget", "5Q"],
     2, "--dram-budget"),
    ("plan-memory --cxl-nodes", GPUS, ["plan-memory", "--params", "7e9", "--node", "0", "--cxl-nodes", "x"], 2,
     "--cxl-nodes"),
    ("plan-memory --node", NO_GPU, ["plan-memory", "--params", "7e9", "--node", "-1"], 2, "--node"),
    ("probe --nodes", NO_GPU, ["probe", "--nodes", "a-b"], 2, "--nodes"),
    ("probe --size", NO_GPU, ["probe", "--size", "lots"], 2, "--size"),
    ("probe --time-budget 0", NO_GPU, ["probe", "--time-budget", "0"], 2, "--time-budget"),
    ("probe on a root", NO_GPU, ["probe"], 2, "live node"),
    ("compare on a root", NO_GPU, ["compare", "--", "true"], 2, "live node"),
    ("inspect -o .pdf", NO_GPU, ["inspect", "-o", "{tmp}/out.pdf"], 2, "'.pdf'"),
    ("inspect -o DIR", NO_GPU, ["inspect", "-o", "{tmp}"], 2, "is a directory"),
    ("inspect --json -o DIR", NO_GPU, ["inspect", "--json", "-o", "{tmp}"], 2, "is a directory"),
    ("fleet -o .pdf", NO_GPU, ["fleet", "{tmp}", "-o", "{tmp}/out.pdf"], 2, "'.pdf'"),
    ("audit --min-size", NO_GPU, ["audit", "1", "--mappings", "--min-size", "lots"], 2, "--min-size"),
    ("irq --exclude-cpus", NO_GPU, ["irq", "plan", "--exclude-cpus", "x"], 2, "--exclude-cpus"),
    ("irq plan --ranks-per-node 0", NO_GPU, ["irq", "plan", "--ranks-per-node", "0"], 2, "--ranks-per-node"),
    ("emit dra --gpus", GPUS, ["emit", "dra", "--gpus", "99"], 2, "--gpus 99"),
    ("emit slurm --reserve-cores", NO_GPU, ["emit", "slurm", "--reserve-cores", "-1"], 2, "--reserve-cores"),
    ("check --fail-on", NO_GPU, ["check", "--fail-on", "bogus"], 2, "--fail-on"),
    ("diff one argument", NO_GPU, ["diff", "{tmp}"], 2, "B"),
    ("completion csh", NO_GPU, ["completion", "csh"], 2, "'csh'"),
    ("snapshot -o -", NO_GPU, ["snapshot"], 2, "'-o'"),
    # 3: what numatune read
    ("check --policy missing", NO_GPU, ["check", "--policy", "{tmp}/none.toml"], 3, "none.toml"),
    ("diff of a non-report", NO_GPU, ["diff", "{tmp}/a.json", "{tmp}/a.json"], 3, "a.json"),
    ("fleet of nothing", NO_GPU, ["fleet", "{tmp}/none"], 3, "none"),
    ("plan-memory --probe not JSON", NO_GPU,
     ["plan-memory", "--params", "1e6", "--node", "0", "--reserve", "0", "--probe", "{tmp}/a.json"], 3, "a.json"),
    # 7: what this machine cannot do
    ("launch gpu-memory with no GPU", NO_GPU, ["launch", "--dry-run", "--mem-policy", "gpu-memory", "--", "true"], 7,
     "needs a GPU"),
    # 6: audit's and snapshot's process that is not there
    ("audit a gone PID", NO_GPU, ["audit", "999999"], 6, "999999"),
    ("snapshot --pid gone", NO_GPU, ["snapshot", "--pid", "999999", "-o", "{tmp}/s.tar.gz"], 6, "999999"),
    ("plan-memory --cxl-budget without CXL", NO_GPU,
     ["plan-memory", "--params", "1e6", "--node", "0", "--reserve", "0", "--dram-budget", "1G", "--cxl-budget", "1G"],
     7, "CXL"),
]


@pytest.mark.parametrize("root, args, code, names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_rule_one_line(cli, tmp_path, root, args, code, names):
    (tmp_path / "a.json").write_text("not json\n")
    r = cli("--root", str(fixture_root(root)), *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.exit_code == code, (r.exit_code, r.stderr)
    lines = [line for line in r.stderr.splitlines() if not line.startswith(("hint: ", "numatune: warning"))]
    assert len(lines) == 1 and lines[0].startswith("numatune: error: "), r.stderr
    assert names.replace("{tmp}", str(tmp_path)) in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "('local'" not in r.stderr


def test_plan_memory_gpu_on_a_gpu_less_root_quotes_the_option(cli):
    r = cli("--root", str(fixture_root(NO_GPU)), "plan-memory", "--params", "7e9", "--gpu", "3")
    assert "neither --gpu nor --node" not in r.stderr and "--gpu 3: this root has no GPU" in r.stderr


def test_probe_names_a_node_that_does_not_exist_as_a_usage_error(host_of):
    from numatune.commands.probe import choose_pairs
    from numatune.errors import ExitCode, NumatuneError
    from numatune.model.probe import ProbeOptions
    from numatune.readers.topology import read_topology

    topo = read_topology(host_of(NO_GPU), devices=False, cxl=True, settings=False)
    cpus = frozenset(c for n in topo.nodes for c in n.cpus)
    with pytest.raises(NumatuneError) as missing:
        choose_pairs(topo, ProbeOptions(initiators=(9,)), cpus, None)
    assert missing.value.exit_code == ExitCode.USAGE and "node 9 does not exist" in missing.value.message
    with pytest.raises(NumatuneError) as no_cpus:  # a node that is there, but has none of this process's CPUs
        choose_pairs(topo, ProbeOptions(initiators=(1,)), frozenset(topo.node(0).cpus), None)
    assert no_cpus.value.exit_code == ExitCode.UNSUPPORTED


def test_an_output_without_a_suffix_is_the_default_format(cli, tmp_path):
    r = cli("--root", str(fixture_root(NO_GPU)), "inspect", "-o", str(tmp_path / "report"))
    assert r.exit_code == 0 and (tmp_path / "report").read_text().startswith(str(fixture_root(NO_GPU)))
    r = cli("--root", str(fixture_root(NO_GPU)), "inspect", "-f", "text", "-o", str(tmp_path / "x.pdf"))
    assert r.exit_code == 0  # --format given: the suffix is the user's business
