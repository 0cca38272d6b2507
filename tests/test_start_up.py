"""The report paths start without `re`, `enum`, `collections` and `typing` (about a quarter of `check`'s
instructions on the 256-CPU tree; `typing` alone 4-5 ms of a small tree's 50): the str-method helpers that
replace the regular expressions must match exactly as they did."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from numatune.readers.pci import _is_host_bridge, is_bdf
from numatune.readers.settings import bracketed_choice
from numatune.system.host import natural_key, numbered

NAMES = ["cpu0", "cpu12", "cpu", "cpux", "xcpu1", "cpu1a", "cpu٣", "node10", "memory_tier4", "hugepages-2048kB",
         "hugepages-kB", "hugepages-1x2kB", "access0", "index12", "thread_siblings_list", "online", "", "10", "_",
         "a_1", "a1b22c", "0000:18:00.0", "10000:00:04.0", "000:18:00.0", "123456789:18:00.0", "0000:18:00.8",
         "0000:1g:00.0", "0000:18:00:0", "00000000:ff:1f.7", ":0000:18:00.0", "pci0000:00", "pci10000:00",
         "pci000:00", "pci0000:0g", "pci0000:00:", "proc/1/fd/2", "a/proc/1/fd/2", "aproc/1/fd/2", "proc/x/fd/2",
         "proc/1/fd/", "root/proc/12/fd/3", "uevent", "ab٣", "x-y-12", "cpu" + "1" * 41]


def _split_key(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@pytest.mark.parametrize("name", NAMES)
def test_helpers_match_the_regular_expressions_they_replace(name):
    for other in NAMES:  # natural_key orders names as the list re.split gives does
        assert (natural_key(name) < natural_key(other)) == (_split_key(name) < _split_key(other)), other
        assert (natural_key(name) == natural_key(other)) == (_split_key(name) == _split_key(other)), other
    for prefix, suffix in (("cpu", ""), ("node", ""), ("memory_tier", ""), ("hugepages-", "kB"), ("index", "")):
        m = re.match(rf"{prefix}([0-9]{{1,40}}){suffix}$", name)  # ASCII digits only, at most numbers.MAX_DIGITS
        assert numbered(name, prefix, suffix) == (int(m.group(1)) if m else None)
    assert is_bdf(name) == bool(re.match(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", name))
    assert _is_host_bridge(name) == bool(re.match(r"^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$", name))


@pytest.mark.parametrize("text", ["always [madvise] never", "[] [x]", "a [] b", "[always] madvise", "plain ",
                                  "x [a[b] c", "x [unterminated", "][", "[]"])
def test_bracketed_choice_is_the_first_non_empty_bracket(text):
    m = re.search(r"\[([^\]]+)\]", text)
    assert bracketed_choice(text) == (m.group(1) if m else text.strip())


def test_check_and_inspect_text_and_json_start_without_re_enum_collections_or_typing(tmp_path):
    from tests.conftest import PROJECT, fixture_root, imports_of

    root = str(fixture_root("256ppc-8n8s4t"))
    code = imports_of("import sys\n"
                      "from numatune.entry import run\n"
                      "sys.stdout = open('/dev/null', 'w')\n"
                      "try: run()\n"
                      "except SystemExit: pass\n", ("re", "enum", "collections", "functools", "typing"), to="stderr")
    for args in (["check"], ["inspect"], ["check", "--json"], ["inspect", "--json"]):
        out = subprocess.run([sys.executable, "-c", code, "--root", root, *args], capture_output=True, text=True,
                             cwd=PROJECT, check=False)
        assert out.stderr.strip().endswith("[]"), (args, out.stderr[-300:])
    # device names from pci.ids (found with bytes.find and bytes.count, not a regular expression): a pci.ids
    # naming every device of the tree, made here (a machine may have none)
    small = fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")
    ids, lines = tmp_path / "pci.ids", {}
    for dev in (small / "sys" / "bus" / "pci" / "devices").iterdir():
        vendor, device = ((dev / f).read_text().strip()[2:] for f in ("vendor", "device"))
        lines.setdefault(f"{vendor}  Vendor {vendor}", []).append(f"\t{device}  Device {device}")
    ids.write_text("# pci.ids\n" + "".join(f"{v}\n" + "\n".join(sorted(set(d))) + "\n" for v, d in lines.items()))
    for args in (["check"], ["inspect", "--json"]):
        out = subprocess.run([sys.executable, "-c", code, "--root", str(small), *args], capture_output=True,
                             text=True, cwd=PROJECT, check=False, env={**os.environ, "NUMATUNE_PCI_IDS": str(ids)})
        assert out.stderr.strip().endswith("[]"), (args, out.stderr[-300:])
    named = subprocess.run([sys.executable, "-m", "numatune", "--root", str(small), "inspect", "--json"],
                           capture_output=True, text=True, cwd=PROJECT, check=True,
                           env={**os.environ, "NUMATUNE_PCI_IDS": str(ids)}).stdout
    assert '"vendor_name": "Vendor ' in named  # the names were looked up


@pytest.mark.parametrize("line", ["", "   ", "a", "  a  b ", "abc def  ghi", " x", "x\t y\x1cz ", "aa a aa"])
def test_inspect_wrap_words_match_the_regular_expression(line):
    from numatune.render.inspect_text import _words

    assert _words(line) == [(m.start(), m.group()) for m in re.finditer(r"\s*\S+\s*", line)]


def test_only_the_process_own_fast_command_line_turns_the_cyclic_collector_off():
    import gc

    from numatune.entry import run
    from tests.conftest import PROJECT, fixture_root

    root = str(fixture_root("256ppc-8n8s4t"))
    with pytest.raises(SystemExit):
        run(["--root", root, "check", "--json"])
    assert gc.isenabled()  # a caller passing argv (tests, a library user) keeps its collector
    code = ("import gc, sys\nfrom numatune.entry import run\nsys.stdout = open('/dev/null', 'w')\n"
            "try: run()\nexcept SystemExit: pass\nsys.stderr.write(str(gc.isenabled()))")
    out = subprocess.run([sys.executable, "-c", code, "--root", root, "check"], capture_output=True, text=True,
                         cwd=PROJECT, check=False)
    assert out.stderr.strip().endswith("False"), out.stderr[-300:]


def test_host_entries_lists_without_sorting_and_tolerates_a_missing_directory(tmp_path):
    from numatune.system.host import Host

    (tmp_path / "sys" / "d").mkdir(parents=True)
    for name in ("cpu10", "cpu9", "online"):
        (tmp_path / "sys" / "d" / name).write_text("")
    host = Host.open(str(tmp_path))
    assert sorted(host.entries("/sys/d")) == ["cpu10", "cpu9", "online"]
    assert host.listdir("/sys/d") == ["cpu9", "cpu10", "online"] and host.entries("/sys/missing") == []


@pytest.mark.parametrize("doc", [
    {}, [], {"a": []}, {"a": {}}, "x", 1, None,
    {"schema": "s", "n": [1, 2.5, -0.0, 1e300, float("nan"), float("inf"), float("-inf")], "t": (True, False, None)},
    {"é": "ünïcode \u2028 \x00 \"q\" \\\\", "nested": [{"a": [[], [{}]]}, "x"], 1: "int key", 2.5: "f", None: 0,
     False: 1},
])
def test_json_writer_is_json_dumps_indent_2(doc):
    import json

    from numatune.model.findings import Severity
    from numatune.render.envelope import dumps

    assert dumps(doc) == json.dumps(doc, indent=2)
    assert dumps({"severity": Severity.WARNING, "doc": doc}) == json.dumps({"severity": "warning", "doc": doc},
                                                                              indent=2)


def test_json_reports_on_every_fixture_are_what_json_dumps_writes():
    import json

    from numatune.commands import inspect as reports
    from numatune.commands.check import check_report
    from numatune.system.host import Host
    from tests.conftest import fixture_root, tree_fixtures

    for name in tree_fixtures():
        root = str(fixture_root(name))
        for text in (reports.inspect_json(Host.open(root), None), check_report(Host.open(root), root, fmt="json")[0]):
            assert text.rstrip("\n") == json.dumps(json.loads(text), indent=2), name


def test_severity_and_exit_code_behave_as_the_enums_they_replace():
    import copy
    import pickle

    from numatune.errors import ExitCode
    from numatune.model.findings import Severity

    assert [s.value for s in Severity] == ["info", "warning", "error"] and len(Severity) == 3
    assert Severity("warning") is Severity.WARNING is Severity["WARNING"] and Severity.WARNING == "warning"
    assert Severity.ERROR.name == "ERROR" and Severity.ERROR.rank == 2 and str(Severity.INFO) == "Severity.INFO"
    assert pickle.loads(pickle.dumps(Severity.ERROR)) is Severity.ERROR is copy.deepcopy(Severity.ERROR)
    with pytest.raises(ValueError, match="'fatal' is not a valid Severity"):
        Severity("fatal")
    with pytest.raises(KeyError):
        Severity["rank"]
    codes = list(ExitCode)
    assert codes[:3] == [0, 1, 2] and ExitCode.INTERNAL == 70 and len(ExitCode) == len(codes) == len(set(codes))


DAX_PATHS = ["/sys/devices/platform/ACPI0017:00/root0/nvdimm-bridge0/ndbus0/region0/dax0.0/dax0.0",
             "/sys/devices/platform/e820_pmem/ndbus1/region1/dax1.0/dax1.0", "/sys/devices/ndbus1/region1",
             "/sys/devices/platform/ACPI0017:00/root0/decoder0.0/region2/dax_region2/dax2.0",
             "/sys/devices/root0/decoder0/region2/x", "/sys/devices/root0/decoder0.1.2/region2/x",
             "/sys/devices/platform/hmem.0/dax3.0", "/x/root1/nvdimm-bridge2/ndbus3/region4/y",
             "/xroot1/ndbus3/region4/",
             "/root٣/nvdimm-bridge2/ndbus3/region4/y", "/a/ndbus/region1/b", "", "/"]


@pytest.mark.parametrize("real", DAX_PATHS)
def test_dax_region_matching_is_the_regular_expressions_it_replaces(real):
    from numatune.readers.cxl import dax_region_at

    parts = real.split("/")
    for kinds, pattern, groups in (  # ASCII digits: numbers are never read from others (numatune.numbers)
            (("root", "nvdimm-bridge", "ndbus"), r"/(root[0-9]+)/nvdimm-bridge[0-9]+/ndbus[0-9]+/(region[0-9]+)/",
             (0, 3)),
            (("ndbus",), r"/ndbus[0-9]+/(region[0-9]+)/", (1,)),
            (("decoder.",), r"/decoder[0-9]+\.[0-9]+/(region[0-9]+)/", (1,))):
        m, at = re.search(pattern, real), dax_region_at(parts, *kinds)
        assert (at is None) == (m is None), (real, pattern)
        if m:
            assert tuple(parts[at + g] for g in groups) == m.groups()


def test_numatune_bind_imports_neither_click_nor_rich():
    """`import numatune; numatune.bind` (issue 36), and a call of it, load no CLI or rendering library: a
    framework's worker pays for the planning and the syscalls only."""
    from tests.conftest import PROJECT, imports_of

    heavy = ("click", "rich", "yaml", "psutil", "pyudev", "cpuinfo", "numpy", "torch")
    code = imports_of("import sys\n"
                      "import numatune\n"
                      "assert 'numatune.placement' not in sys.modules\n"  # the face is lazy
                      "numatune.bind\n"
                      "report = numatune.bind(node=0, dry_run=True)\n"
                      "report.to_dict()\n", heavy, to="stderr")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=False,
                         env={**os.environ, "PYTHONPATH": str(PROJECT)})
    assert out.returncode == 0 and out.stderr.strip().endswith("[]"), out.stderr[-600:]
