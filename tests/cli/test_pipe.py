"""Text redirected to a file (`inspect > f`, `irq > f`, `irq plan > f`): every value whole, pasteable blocks valid.

The runner's stdout is not a terminal, as a redirect is; COLUMNS=80 is what rich would otherwise lay out
for. The values to find whole come from the --json of the same command, not from the text.
"""

from __future__ import annotations

import configparser
import json
import shlex

import pytest

from numatune.cpulist import format_cpulist
from tests.conftest import fixture_root, tool_path, tree_fixtures

NARROW = {"COLUMNS": "80"}


def _lines_holding(text: str, value: str) -> bool:
    return any(value in line for line in text.split("\n"))


@pytest.mark.parametrize("name", tree_fixtures())
def test_inspect_to_a_file_keeps_every_value_whole(cli, name):
    root = str(fixture_root(name))
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    text = cli("--root", root, "inspect", env=NARROW).stdout
    assert "…" not in text
    values = [format_cpulist(n["cpus"]) for n in doc["nodes"] if n["cpus"]]
    for d in doc["devices"]:
        values.append(d["bdf"])
        values += d["netdevs"] + d["rdma"]
        name_ = (d.get("nvidia") or {}).get("model") or " ".join(
            x for x in (d["vendor_name"], d["device_name"]) if x)
        if name_:
            values.append(name_)
        if d["local_cpus"]:
            values.append(format_cpulist(d["local_cpus"]))
    values += doc["path_matrix"]["names"] if doc["path_matrix"] else []
    for v in values:
        assert _lines_holding(text, v), (name, v)
    lines = text.split("\n")
    assert max(len(line) for line in lines) <= 200, (name, max(lines, key=len))  # was one line of 266-488
    assert all(line == line.rstrip() for line in lines), name  # no title padded to the table's width
    # findings as check's blocks: the head line (code, severity, subject), then the message and the fix
    from numatune.model.order import device_names
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    label = device_names(read_topology(Host.open(root)).devices)
    for f in doc["findings"]:
        subject = label.get(f["subject"].lower(), f["subject"])  # a GPU or NIC as every view names it
        head = f"{f['code']} {f['severity']:<7} {subject}".rstrip()
        at = lines.index(head, lines.index("Findings"))
        body = " ".join(line.strip() for line in lines[at + 1:at + 8])
        assert body.startswith(" ".join(f["message"].split())), (name, f["code"])
        if f["fix"]:
            assert "fix: " + " ".join(f["fix"].split()) in body, (name, f["code"])


@pytest.mark.parametrize("name", ["vm-two-socket", "handmade-launch-2s4gpu-cxl", "topo-mi210-xgmi-pcie"])
def test_inspect_o_file_is_the_same_text_as_a_redirect(cli, tmp_path, name):
    """`inspect -o f.txt` and `inspect > f` are one writer (100-column notes and findings, no padding)."""
    root = str(fixture_root(name))
    cli("--root", root, "inspect", "-o", str(tmp_path / "f.txt"))
    written = (tmp_path / "f.txt").read_text()
    assert "…" not in written and all(line == line.rstrip() for line in written.split("\n"))
    assert "Findings\n" in written or "No findings." in written
    assert not any(line.startswith("┃ code") for line in written.split("\n"))  # no findings table


def test_check_and_inspect_write_a_finding_the_same_way():
    from numatune.model.findings import Finding, Severity
    from numatune.render.finding_text import finding_block

    f = Finding("NT002", Severity.WARNING, "word " * 60, "fix " * 40, "0000:18:00.0")
    block = finding_block(f)
    assert block[0] == "NT002 warning 0000:18:00.0"
    assert all(len(line) <= 100 for line in block) and len(block) > 4
    assert any(line.startswith("      fix: ") for line in block)
    assert finding_block(f, "FAIL  ", "topology.x")[0] == "FAIL  NT002 warning 0000:18:00.0  [topology.x]"
    long = Finding("NT001", Severity.INFO, "a " + "x" * 150, "", "")
    assert finding_block(long)[2] == "      " + "x" * 150  # a word longer than a line is kept whole


@pytest.mark.parametrize("name", tree_fixtures())
def test_irq_to_a_file_keeps_every_value_whole(cli, name):
    root = str(fixture_root(name))
    doc = json.loads(cli("--root", root, "irq", "--json").stdout)
    text = cli("--root", root, "irq", env=NARROW).stdout
    assert "…" not in text
    for d in doc["devices"]:
        assert _lines_holding(text, d["label"]), (name, d["label"])
        for q in d["irqs"]:
            for action in q["actions"]:
                assert _lines_holding(text, action), (name, action)


@pytest.mark.parametrize("name", tree_fixtures())
def test_irq_plan_to_a_file_prints_pasteable_blocks(cli, name):
    root = str(fixture_root(name))
    doc = json.loads(cli("--root", root, "irq", "plan", "--json").stdout)
    text = cli("--root", root, "irq", "plan", env=NARROW).stdout
    assert "…" not in text
    lines = text.split("\n")
    balance = [x for x in lines if x.startswith(("IRQBALANCE_ARGS=", "IRQBALANCE_BANNED_CPULIST="))]
    for line in balance:
        key, _, value = line.partition("=")
        words = shlex.split(value)  # a shell assignment: one quoted word, or one bare word
        assert len(words) == 1, line
        if key == "IRQBALANCE_ARGS":
            assert all(w.startswith("--banirq=") and w[9:].isdigit() for w in words[0].split()), line
    if "Persistent form, tuned profile fragment:" in text:
        fragment = text.split("Persistent form, tuned profile fragment:\n", 1)[1]
        ini = configparser.ConfigParser()
        ini.read_string(fragment)  # raises on a stray line that is neither a section, key nor comment
        sections = [s for s in ini.sections() if s.startswith("numatune_irq")]
        assert sections and all(ini[s]["type"] == "irq" for s in sections)
        assert fragment.rstrip("\n") == doc["persistent"]["tuned"].rstrip("\n")  # line for line
    assert balance == doc["persistent"]["irqbalance"]


def test_shell_redirects_to_files_keep_blocks_and_values_whole(tmp_path):
    """The commands as a user types them: `numatune irq plan > plan.txt` (and inspect, irq) run by a shell
    with stdout a real file and COLUMNS=80 in the environment; IRQBALANCE_ARGS stays one line and the
    tuned fragment parses as ini, line for line as --json gives it."""
    import os
    import shutil
    import subprocess

    exe = shutil.which("numatune", path=tool_path())
    # device names from a pci.ids of the fixture's devices (the long names a table used to cut), not the machine's
    ids = tmp_path / "pci.ids"
    ids.write_text("# pci.ids: the lines of this fixture's devices\n8086  Intel Corporation\n"
                   "\t1520  I350 Ethernet Controller Virtual Function\n\t1521  I350 Gigabit Network Connection\n"
                   "14e4  Broadcom Inc. and subsidiaries\n\t1639  NetXtreme II BCM5709 Gigabit Ethernet\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "80", "LANG": "C.UTF-8",
           "NUMATUNE_PCI_IDS": str(ids)}
    irq_root, wide_root = str(fixture_root("vm-two-socket")), str(fixture_root("intel-xeon-L5640-2node"))
    for name, cmd in (("plan.txt", f"{exe} --root {irq_root} irq plan"), ("irq.txt", f"{exe} --root {irq_root} irq"),
                      ("inspect.txt", f"{exe} --root {wide_root} inspect")):
        subprocess.run(["bash", "-c", f"{cmd} > {tmp_path / name}"], env=env, check=True, timeout=120,
                       stderr=subprocess.DEVNULL)
        assert "…" not in (tmp_path / name).read_text(), name
    text = (tmp_path / "plan.txt").read_text()
    args = [x for x in text.split("\n") if x.startswith("IRQBALANCE_ARGS=")]
    assert args == ['IRQBALANCE_ARGS="--banirq=42 --banirq=43 --banirq=44 --banirq=45"']
    fragment = text.split("Persistent form, tuned profile fragment:\n", 1)[1]
    configparser.ConfigParser().read_string(fragment)
    plan = subprocess.run([exe, "--root", irq_root, "irq", "plan", "--json"], env=env, capture_output=True,
                          text=True, check=True, timeout=120)
    assert fragment.rstrip("\n") == json.loads(plan.stdout)["persistent"]["tuned"].rstrip("\n")
    inspect = (tmp_path / "inspect.txt").read_text()
    assert "Corporation" in inspect and not any(line.rstrip().endswith("Corporati") for line in inspect.split("\n"))
    assert "Broadcom Inc. and subsidiaries NetXtreme II BCM5709 Gigabit Ethernet" in inspect
