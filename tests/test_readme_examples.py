"""Every example of the README and docs/*.md that names a fixture runs as written: the command line is
copied out of their code blocks and run by a shell from the project directory with the installed `numatune` (one
edit: `/tmp` becomes a private directory), and the output lines the README shows under it are in what
it prints, in that order ("..." stands for lines left out)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.conftest import PROJECT, tool_path

README = (PROJECT / "README.md").read_text()
#: The README and the pages it sends readers to: every example in them is run (the reference moved to docs/).
DOCS = "\n".join([README, *(p.read_text() for p in sorted((PROJECT / "docs").glob("*.md")))])
BIN = tool_path()  # the environment's `numatune` (beside its python, or run by it)


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command line, the output lines shown under it) for every command in a fenced code block that
    names a fixture; continuation lines (a trailing backslash) are joined as the shell joins them."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S):
        lines = block.split("\n")
        i = 0
        current: list[str] | None = None
        while i < len(lines):
            line = lines[i]
            console = line.startswith("$ ")
            if console or line.startswith(("numatune ", "tar ")):
                cmd = line[2:] if console else line
                while cmd.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
                current = []
                if "fixtures/" in cmd:
                    out.append((cmd, current))
                if not console:
                    current = None  # sh blocks show no output
            elif current is not None and line.strip():
                current.append(line.rstrip())
            i += 1
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # an inline `numatune --root fixtures/...`
    out += [(cmd, []) for cmd in re.findall(r"`(numatune [^`\n]*fixtures/[^`\n]*)`", prose)
            if all((PROJECT / "fixtures" / name).is_file() for name in re.findall(r"fixtures/(\S+)", cmd))]
    return out


EXAMPLES = examples(DOCS)


def test_the_examples_are_found():
    cmds = [c for c, _ in EXAMPLES]
    assert len(cmds) >= 5, cmds
    assert any("nvidia-dgx-gb10.tar.gz inspect" in c for c in cmds)
    assert any(c.startswith("tar -xzf fixtures/") for c in cmds)
    assert all(" \\" not in c for c in cmds)  # continuations joined


def test_the_extractor_reads_inline_examples_too():
    assert examples("- `numatune --root fixtures/vm-cxl.tar.gz plan-memory --params 4B`: a plan\n") == [
        ("numatune --root fixtures/vm-cxl.tar.gz plan-memory --params 4B", [])]
    assert examples("`numatune --root fixtures/NAME.tar.gz inspect` reads it") == []  # a pattern, not a file
    assert any("plan-memory" in c for c, _ in EXAMPLES) and any("audit --ranks" in c for c, _ in EXAMPLES)


def test_the_extractor_reads_console_blocks():
    sample = "```console\n$ numatune --root fixtures/a.tar.gz x \\\n    --y 1\nout 1\n  ...\nout 2\n$ ls\n```\n"
    assert examples(sample) == [("numatune --root fixtures/a.tar.gz x  --y 1", ["out 1", "  ...", "out 2"])]


def _in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines not found, in order, among the printed ones ("..." lines are skipped)."""
    missing, at = [], 0
    for line in shown:
        if line.strip() == "...":
            continue
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            missing.append(line)
    return missing


@pytest.mark.parametrize("cmd, shown", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_example_runs_as_written(cmd, shown, tmp_path):
    if "| jq " in cmd and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "LANG": "C.UTF-8", "TMPDIR": str(tmp_path)}
    run = re.sub(r"(?<![\w.])/tmp(?=/|\s|$)", str(tmp_path), cmd)
    proc = subprocess.run(["bash", "-c", run], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "numatune: error" not in proc.stderr, (cmd, proc.stderr)
    assert proc.returncode in ((0, 1) if " check" in cmd or " diff" in cmd else (0,)), (cmd, proc.stderr)
    # an answer, not an empty table or nothing: what it printed, or the file it wrote
    assert proc.stdout.strip() or re.search(r"(-o|>)\s*\S+\s*(#.*)?$", cmd), (cmd, "printed nothing")
    printed = [line.rstrip() for line in proc.stdout.split("\n")]
    # The README shows numactl where Debian puts it; a plan names this host's (another PATH, /usr/local/bin)
    numactl = shutil.which("numactl", path=env["PATH"])
    if numactl is None and any("/usr/bin/numactl" in line for line in shown):
        pytest.skip("numactl is not installed here, and the example shows the command it runs")
    printed = [line.replace(numactl, "/usr/bin/numactl") if numactl else line for line in printed]
    assert not _in_order(shown, printed), (cmd, _in_order(shown, printed))


def test_the_default_install_reads_yaml_kubelet_configs():
    """The Kubernetes recipe's `check --kubelet-config kubelet.yaml` needs PyYAML: it is a dependency of
    the package itself, not of an extra."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    assert any(re.match(r"pyyaml\b", d, re.I) for d in project["dependencies"])
    assert "numatune[k8s]" not in README.replace("`numatune[k8s]` extra is now empty", "")


JQ_LINES = [line.removeprefix("$ ") for line in DOCS.split("\n") if "| jq " in line and "numatune " in line]
DOCUMENT_ROOT = {"irq": "vm-two-socket", "check": "vm-two-socket"}  # IRQs and failed checks to select


def test_the_jq_examples_are_found():
    assert len(JQ_LINES) >= 5 and any("irq --json" in line for line in JQ_LINES)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
@pytest.mark.parametrize("line", JQ_LINES, ids=[line.split("| jq ")[1][:50] for line in JQ_LINES])
def test_every_jq_example_runs_on_the_installed_jq(line, tmp_path):
    """Each README `numatune ... --json | jq FILTER` on a fixture's document of that command (probe's from
    tests/data: it measures the live node): jq compiles the filter (jq 1.6, Debian 12's, reads `label` as
    a keyword: `{label}` failed) and prints something."""
    left, right = line.split("| jq ", 1)
    words = shlex.split(left)
    command = next(w for w in words[1:] if not w.startswith("-") and not w.endswith((".tar.gz", ".toml")))
    if command == "probe":
        source = f"cat {shlex.quote(str(PROJECT / 'tests' / 'data' / 'probe-gpu-h100.json'))}"
    else:
        rest, skip = [], False
        for w in words[1:]:  # the user's own root and policy give way to a fixture
            if skip:
                skip = False
            elif w in ("--root", "--policy"):
                skip = True
            else:
                rest.append(w)
        root = PROJECT / "fixtures" / f"{DOCUMENT_ROOT.get(command, 'handmade-launch-2s4gpu-cxl')}.tar.gz"
        source = shlex.join(["numatune", "--root", str(root), *rest])
    env = {"PATH": BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "LANG": "C.UTF-8", "NUMATUNE_PCI_IDS": ""}
    proc = subprocess.run(["bash", "-c", f"{source} | jq {right}"], cwd=PROJECT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "error" not in proc.stderr, (line, proc.stderr)
    assert proc.stdout.strip(), (line, proc.stdout)
