"""Hostile values, not hostile archives: numbers, documents, names and directories that a stranger's root or
file holds, each answered with exit 0 or 3 within 10 s and 256 MiB, one line, never exit 70 or a traceback
(issue 32, points 2-5 and 7).

Every hostile input here is hand-made in the test from a real fixture (a copy with one file changed): a
5,000-digit number where the kernel writes a few digits (past Python's 4,300-digit int() limit), 1,000
nested brackets in each document a user names, interface and driver names that are not UTF-8, and a
`fleet` directory holding a FIFO and a link to a FIFO outside it. Commands run in a child process under
RLIMIT_AS and a timeout (tests/limits.py), through the real command line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from numatune.errors import InputError
from numatune.system.infile import MAX_DEPTH, load_document, nesting
from tests.conftest import fixture_copy, fixture_root, write_process
from tests.limits import run_limited

SECONDS, MIB = 10, 256
LONG = "1" * 5000


def answered(*args: str, codes: tuple[int, ...] = (0, 3), env: dict[str, str] | None = None):
    r = run_limited(*args, seconds=SECONDS, mib=MIB, env=env)
    assert r.within(SECONDS, MIB), (args[-3:], r.returncode, r.wall, r.peak_mib, r.stderr[-300:])
    assert r.returncode in codes, (args[-3:], r.returncode, r.stderr[-500:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-500:]
    if r.returncode == 3:
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr  # the error line and at most a hint
    return r


# -- numbers ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def numbers_root(tmp_path_factory):
    return fixture_copy("dev-1node-x86", tmp_path_factory.mktemp("numbers"))


def _edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_long_cpu_number_in_the_interrupts_header(tmp_path):
    root = fixture_copy("dev-1node-x86", tmp_path)
    _edit(root / "proc" / "interrupts", "CPU1", f"CPU{LONG}")
    for args in (["irq"], ["irq", "--json"], ["check"]):
        r = answered("--root", str(root), *args, codes=(3,))
        assert "malformed /proc/interrupts line 1: a number of 5000 digits" in r.stderr


def test_a_long_node_in_proc_irq(tmp_path):
    root = fixture_copy("dev-1node-x86", tmp_path)
    for node in (root / "proc" / "irq").glob("*/node"):
        node.write_text(LONG + "\n")
    r = answered("--root", str(root), "irq", "--json")
    assert r.returncode == 0 or "/node" in r.stderr


def test_a_long_count_in_numa_maps_and_a_long_local_rank(tmp_path):
    root = fixture_copy("dev-1node-x86", tmp_path)
    write_process(root, 4242, "PATH=/bin\x00", f"7f0000000000 default anon=1 dirty=1 N0={LONG} kernelpagesize_kB=4\n")
    r = answered("--root", str(root), "audit", "4242", codes=(3,))
    assert "malformed /proc/4242/numa_maps: a number of 5000 digits" in r.stderr
    # a rank from another process's environment, on a root with a GPU (the rank picks it): exit 70 before
    gpu_root = fixture_copy("h100-vm-1gpu", tmp_path / "gpu")
    write_process(gpu_root, 4343, f"LOCAL_RANK={LONG}\x00", "7f0000000000 default anon=1 N0=1 kernelpagesize_kB=4\n")
    for args in (["audit", "4343"], ["audit", "4343", "--json"]):
        r = answered("--root", str(gpu_root), *args, codes=(0, 1))
        assert LONG not in r.stdout + r.stderr
    assert json.loads(r.stdout)["processes"][0]["rank"] is None  # not a rank: as "abc" is


def test_a_long_minor_in_the_nvidia_drivers_information(tmp_path):
    root = fixture_copy("h100-vm-1gpu", tmp_path)
    (info,) = (root / "proc" / "driver" / "nvidia" / "gpus").glob("*/information")
    info.write_text(re.sub(r"Device Minor:\s*\d+", f"Device Minor: \t {LONG}", info.read_text()))
    r = answered("--root", str(root), "inspect", codes=(3,))
    assert re.search(r"malformed /proc/driver/nvidia/gpus/.*/information line \d+: a number of 5000", r.stderr)


def test_a_cxl_size_of_4000_hex_digits(tmp_path):
    """It parsed (int(x, 16) has no digit limit) and failed at output (str() of 4,816 decimal digits)."""
    root = fixture_copy("vm-cxl", tmp_path)
    (size,) = root.glob("sys/devices/platform/ACPI0017:00/root0/port1/decoder1.0/size")
    size.write_text("0x" + "f" * 4000 + "\n")
    for args in (["inspect"], ["inspect", "--json"], ["inspect", "--format", "prometheus"]):
        r = answered("--root", str(root), *args, codes=(3,))
        assert "decoder1.0/size: a number of 4000 digits" in r.stderr


# -- documents ----------------------------------------------------------------------------------------
DEEP = {"json": "[" * 1000, "toml": "a = " + "[" * 1000 + "\n", "yaml": "a: " + "[" * 1000 + "\n",
        "json-object": '{"schema": "numatune.inspect/3", "a": ' + "[" * 1000}
BIG = '{"schema": "numatune.inspect/3", "a": ' + LONG + "}\n"


@pytest.mark.parametrize(("args", "kind"), [
    (["fleet", "{f}"], "json"), (["diff", "{f}", "{f}"], "json-object"), (["irq", "restore", "{f}"], "json"),
    (["irq", "apply", "--dry-run", "--plan", "{f}"], "json"), (["check", "--policy", "{f}"], "toml"),
    (["check", "--kubelet-config", "{f}"], "yaml"), (["check", "--resource-slices", "{f}"], "yaml"),
    (["check", "--resource-slices", "{f}"], "json"), (["plan-memory", "--params", "7e9", "--probe", "{f}"], "json"),
    (["audit", "1", "--probe", "{f}"], "json"),  # issue 41: RecursionError at 100,000 "[" before
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_1000_nested_brackets_in_every_document_reader(tmp_path, args, kind):
    """RecursionError (exit 70) before; now refused before parsing (fleet: by the C decoder's own guard, which
    costs nothing), exit 3 naming the file."""
    doc = tmp_path / f"deep.{kind.split('-')[0]}"
    # fleet leaves nesting to the C decoder, whose guard is Python's recursion limit: 1,000 "[" passed it from
    # 3.12 on (then "not valid JSON": unclosed); 100,000 are past every version's
    doc.write_text("[" * 100_000 if args[0] == "fleet" else DEEP[kind])
    root = fixture_root("dev-1node-x86")
    r = answered("--root", str(root), *[a.format(f=doc) for a in args], codes=(3,))
    assert str(doc) in r.stderr and re.search(r"nests deeper than (64 levels|the JSON decoder goes)", r.stderr)
    if kind.startswith("json"):  # and a 5,000-digit number: Python's ValueError, exit 70 before
        doc.write_text(BIG)
        r = answered("--root", str(root), *[a.format(f=doc) for a in args], codes=(3,))
        assert str(doc) in r.stderr and "more than 4,300 digits" in r.stderr


_DEVICE = '{name: g, attributes: {resource.kubernetes.io/pciBusID: {string: "0000:ee:00.0"}}}'
_ONE_SLICE = "kind: ResourceSlice\nspec:\n  nodeName: NODE\n  driver: d\n  devices:\n  - &a " + _DEVICE + "\n"
_LIST = ("kind: List\nitems:\n- &s {kind: ResourceSlice, metadata: {name: s}, spec: {nodeName: NODE, driver: d, "
         "devices: [" + ", ".join([_DEVICE] * 128) + "]}}\n")


@pytest.mark.parametrize(("text", "words"), [
    (_ONE_SLICE + "  - *a\n" * 1_000, "ResourceSlice ? lists 1,001 devices; the API allows at most 128"),
    (_LIST + "- *s\n" * 80_000, "YAML aliases (*name) expand to more than 16 values for each value written in it"),
    # 590,000 aliases (4 MiB): refused on its values before parsing (issue 41: what the parse builds is bounded)
    (_ONE_SLICE + "  - *a\n" * 590_000, "holds about 1,180,0"),
    # 129 aliases of a full slice, paid for by 8,000 values written (aliases expand to at most 16 values each)
    (_LIST + "- *s\n" * 128 + "fill: [" + ",".join(["1"] * 8_000) + "]\n",
     "list at least 16,512 devices; numatune checks at most 16,384 for one node"),
])
def test_resource_slices_repeated_by_yaml_aliases(tmp_path, text, words):
    """4 MiB of YAML aliases repeating one device (or one full slice) 600,000 times: 27 s, 1.1 GB and 219 MB of
    findings before; now the API's 128 devices a slice and 16,384 a node bound the check, and libyaml's loader
    reads the aliases (PyYAML's Python loader took 13 s on them)."""
    doc = tmp_path / "slices.yaml"
    doc.write_text(text)
    assert doc.stat().st_size <= 4 << 20
    r = answered("--root", str(fixture_root("dev-1node-x86")), "check", "--resource-slices", str(doc),
                 "--node-name", "NODE", codes=(3,))
    assert words in r.stderr and r.wall < 5, (r.wall, r.stderr)


def _laughs(key: str) -> str:
    """671 bytes: ten values, each level ten aliases of the one below, eleven levels: 10^12 values expanded."""
    lines = ["kind: KubeletConfiguration", "l0: &l0 [x,x,x,x,x,x,x,x,x,x]"]
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 12)]
    return "\n".join([*lines, f"{key}: *l11"]) + "\n"


@pytest.mark.parametrize(("args", "text"), [
    (["check", "--kubelet-config", "{f}"], _laughs("cpuManagerPolicy")),
    (["check", "--kubelet-config", "{f}"], _laughs("topologyManagerPolicy")),
    (["check", "--kubelet-config", "{f}"], "kind: KubeletConfiguration\ncpuManagerPolicy: &a [static, *a]\n"),
    (["check", "--resource-slices", "{f}", "--node-name", "NODE"], _laughs("spec")),
], ids=["cpuManagerPolicy", "topologyManagerPolicy", "holds-itself", "resource-slices"])
def test_yaml_aliases_that_expand_past_the_file_are_refused(tmp_path, args, text):
    """A value made of nested aliases (10^12 values in 671 bytes) was printed and compared: 60 s and 3.5 GB,
    then killed. A document whose aliases give more than 16 values for each value written in it, or hold
    themselves, is exit 3."""
    doc = tmp_path / "kubelet.yaml"
    doc.write_text(text)
    r = answered("--root", str(fixture_root("dev-1node-x86")), *[a.format(f=doc) for a in args], codes=(3,))
    assert f"{doc}: its YAML aliases (*name) expand to more than 16 values for each value written" in r.stderr
    assert r.wall < 5


def test_honest_anchors_are_read():
    from numatune.system.infile import load_document

    text = "base: &b {cpu: 1, memory: 2Gi}\n" + "".join(f"n{i}: *b\n" for i in range(100))
    doc = load_document(text, "f", "yaml")
    assert doc["n99"] == {"cpu": 1, "memory": "2Gi"}


@pytest.mark.parametrize(("name", "text"), [("nvml.json", "[" * 1000), ("nvml.json", '{"format": ' + LONG + "}")])
def test_records_a_snapshot_keeps_are_documents_too(tmp_path, name, text):
    """The NVML and numactl records a snapshot saves beside sys/ and proc/ are read through the same bounds."""
    root = fixture_copy("h100-vm-1gpu", tmp_path)
    (root / "numatune").mkdir(exist_ok=True)
    (root / "numatune" / name).write_text(text)
    r = answered("--root", str(root), "check", codes=(3,))
    assert f"malformed /numatune/{name}" in r.stderr or f"/numatune/{name} nests deeper" in r.stderr


@pytest.mark.parametrize(("text", "fmt"), [(f"a = {LONG}\n", "toml"), (f"a: {LONG}\n", "yaml"), (BIG, "json")])
def test_a_5000_digit_number_in_any_document_is_one_line(text, fmt):
    from numatune.errors import InputError

    with pytest.raises(InputError, match=r"^f\.x is not a document numatune reads: it holds a number of more than"):
        load_document(text, "f.x", fmt)


@pytest.mark.parametrize(("text", "fmt", "depth"), [
    ('{"a": [1, {"b": "[[[[\\"]]"}]}', "json", 3), ("[" * 1000, "json", MAX_DEPTH + 1), ("[]" * 100_000, "json", 1),
    ('a = "[[[" # [[[[\nb = [[1]]\n[t]\n', "toml", 2), ("a: '[[['  # [[\nb:\n  - - c\n", "yaml", 4),
    ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200)), "yaml", MAX_DEPTH + 1), ("", "json", 0),
])
def test_nesting_counts_structure_not_strings(text, fmt, depth):
    assert nesting(text, fmt) == depth


def test_nesting_is_linear():
    """A 1,000-deep document and one of 2M brackets are measured at C speed, never re-scanned per level."""
    import time

    start = time.perf_counter()
    for text in ("[" * 1_000_000, "[1," * 200_000 + "]" * 200_000, '"\\' * 500_000, "[]" * 1_000_000):
        nesting(text, "json")
    assert time.perf_counter() - start < 5


def test_load_document_reads_what_it_bounds():
    assert load_document('{"a": [1, 2]}', "x") == {"a": [1, 2]}
    assert load_document("a = [1, [2]]\n", "x", "toml") == {"a": [1, [2]]}
    assert load_document("a:\n  - 1\n---\nb: 2\n", "x", "yaml") == [{"a": [1]}, {"b": 2}]


# -- text ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bytes_root(tmp_path_factory):
    """An interface and a driver named by bytes that are not UTF-8, the first an 8-bit CSI (0x9b)."""
    root = fixture_copy("dev-1node-x86", tmp_path_factory.mktemp("bytes"))
    net = root / "sys" / "class" / "net"
    os.rename(net / "eth0", os.fsdecode(bytes(net / "eth0")[:-1] + b"\x9b\xff0"))
    links = [os.path.join(d, "driver") for d, _, files in os.walk(root / "sys" / "devices") if "driver" in files]
    assert links  # dangling links (the drivers are not in the capture): os.walk lists them, pathlib's glob not
    for driver in links:
        target = os.readlink(driver)
        os.unlink(driver)
        os.symlink(os.fsdecode(os.fsencode(target) + b"\x9b\xfe"), driver)
    return root


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = dict(os.environ, NUMATUNE_PCI_IDS="", NO_COLOR="1", **(env or {}))
    full.pop("NUMATUNE_ROOT", None)
    return subprocess.run([sys.executable, "-m", "numatune", *args], capture_output=True, env=full, timeout=60)


def _clean(data: bytes, encoding: str = "utf-8") -> str:
    """Strictly decodable, with no C0 (but tab and newline), DEL, C1 or lone surrogate left."""
    text = data.decode(encoding)  # strict: a raw 0x9b or 0xff byte fails here
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text), text
    return text


FORMATS = [["inspect"], ["inspect", "--json"], ["inspect", "--format", "svg"], ["inspect", "--format", "html"],
           ["inspect", "--format", "prometheus"], ["check"], ["check", "--format", "junit"], ["irq"], ["irq", "--json"],
           ["emit", "slurm"], ["irq", "--format", "prometheus"]]


@pytest.mark.parametrize("args", FORMATS, ids=" ".join)
def test_names_that_are_not_utf8_through_every_format(bytes_root, args, tmp_path):
    r = _run("--root", str(bytes_root), *args)
    assert r.returncode in (0, 1), r.stderr
    out = _clean(r.stdout)
    _clean(r.stderr)
    if args == ["inspect"]:
        assert "eth\\x9b\\xff0" in out  # shown, byte for byte
    if args == ["inspect", "--format", "prometheus"]:
        # and their backslashes escaped as a label value's are
        assert 'name="eth\\\\x9b\\\\xff0"' in out and 'driver="virtio-pci\\\\x9b\\\\xfe"' in out
    if args[-1] in ("svg", "junit"):
        ET.fromstring(out.split("\n", 1)[1] if out.startswith("<?xml") else out)
    if args[-1] == "--json":
        json.loads(out)
    # the same through -o FILE, and to a standard output that takes only ASCII (exit 70 before)
    if args[0] != "irq":  # irq prints only
        dest = tmp_path / "report"
        assert _run("--root", str(bytes_root), *args, "-o", str(dest)).returncode in (0, 1)
        _clean(dest.read_bytes())
    r = _run("--root", str(bytes_root), *args, env={"LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert r.returncode in (0, 1), r.stderr
    _clean(r.stdout, "ascii")


def test_an_error_line_with_such_a_name_is_printable(bytes_root, tmp_path):
    missing = os.fsdecode(bytes(tmp_path / "policy") + b"\x9b\xff.toml")
    r = _run("--root", str(bytes_root), "check", "--policy", missing, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert r.returncode == 3 and "policy\\x9b\\xff.toml" in _clean(r.stderr)


# -- fleet DIR ----------------------------------------------------------------------------------------
def test_fleet_dir_skips_a_fifo_and_a_link_that_leaves_it(tmp_path):
    """Both would block for ever if opened (the link leads to a FIFO outside DIR): the command returns at
    once, reads the one real report and notes the other two; nothing outside DIR is opened or echoed."""
    reports = tmp_path / "reports"
    reports.mkdir()
    good = subprocess.run([sys.executable, "-m", "numatune", "--root", str(fixture_root("dev-1node-x86")), "inspect",
                           "--json"], capture_output=True, text=True, check=True, env=dict(os.environ,
                                                                                          NUMATUNE_PCI_IDS="")).stdout
    (reports / "a.json").write_text(good)
    os.mkfifo(reports / "b.json")
    os.mkfifo(tmp_path / "outside.json")
    (reports / "c.json").symlink_to(tmp_path / "outside.json")
    (tmp_path / "secret.json").write_text('{"schema": "numatune.inspect/3", "SECRET": 1}\n')
    (reports / "d.json").symlink_to("../secret.json")
    r = answered("fleet", str(reports), codes=(0, 1))
    assert "b.json" in r.stderr + r.stdout and "c.json" in r.stderr + r.stdout
    assert "leaves" in r.stderr + r.stdout and "SECRET" not in r.stderr + r.stdout
    # a FIFO named as the file itself is refused before it is opened
    r = answered("fleet", str(reports / "b.json"), codes=(3,))
    assert "not a regular file" in r.stderr
    r = answered("diff", str(reports / "b.json"), str(reports / "a.json"), codes=(3,))
    assert "not a regular file" in r.stderr


def test_a_fifo_named_as_pci_ids_is_never_opened(tmp_path):
    """NUMATUNE_PCI_IDS names the device-name database: a FIFO there blocked every report for ever."""
    os.mkfifo(tmp_path / "pci.ids")
    r = answered("--root", str(fixture_root("dev-1node-x86")), "inspect", codes=(0,),
                 env=dict(os.environ, NUMATUNE_PCI_IDS=str(tmp_path / "pci.ids")))
    assert "0000:00:03.0" in r.stdout


def test_comments_buy_yaml_aliases_nothing(tmp_path):
    """The alias budget was 16 values a byte of the file: 4 MiB of comments let 20,000 aliases of a full slice
    through, 2.56 million devices walked before the node's bound (13 s). It counts what is written (nodes and
    entries, never comments nor a string's length): exit 3 at once."""
    doc = tmp_path / "slices.yaml"
    text = _LIST + "- *s\n" * 20_000
    pad = (4 << 20) - len(text) - 4096
    doc.write_text(text + ("#" + "c" * 1022 + "\n") * (pad // 1024) + 'x: "' + "s" * 2048 + '"\n')
    r = answered("--root", str(fixture_root("dev-1node-x86")), "check", "--resource-slices", str(doc),
                 "--node-name", "NODE", codes=(3,))
    assert "YAML aliases (*name) expand to more than 16 values for each value written in it" in r.stderr, r.stderr
    assert r.wall < 5, r.wall


def test_a_file_of_more_devices_than_any_cluster_lists_is_refused_before_reading_them(tmp_path):
    """Aliases within their budget (each value written in the file pays for 16) still repeat a slice: 10,240 slices
    of 256 aliased devices, paid for by 170,000 written values, were 2.6 million devices typed and walked. The
    devices are counted from the lists' lengths first: more than 131,072 in one file is one line."""
    from numatune.readers.schedconf import load_resource_slices

    doc = tmp_path / "slices.yaml"
    doc.write_text("kind: List\nfill: [" + ",".join(["1"] * 170_000) + "]\n"
                   "devices: &l [" + ", ".join(["{}"] * 256) + "]\n"
                   "items:\n- &s {kind: ResourceSlice, spec: {nodeName: N, driver: d, devices: *l}}\n"
                   + "- *s\n" * 10_239)
    with pytest.raises(InputError, match=r"list 2,621,440 devices; numatune reads at most 131,072 in one file"):
        load_resource_slices(doc)


# -- sizes read from an environment ---------------------------------------------------------------------
def test_a_local_world_size_past_what_a_node_runs_is_refused():
    """LOCAL_WORLD_SIZE=10^30 with --cpu-bind core-complex listed every rank (never answered); a local world size
    above pid_max's ceiling is exit 3 naming the variable, and one below it is counted, not listed."""
    root = str(fixture_root("intel-xeon-L5640-2node"))
    args = ("--root", root, "launch", "--node", "0", "--cpu-bind", "core-complex", "--dry-run", "--", "true")
    r = answered(*args, codes=(3,), env=dict(os.environ, LOCAL_RANK="0", LOCAL_WORLD_SIZE=str(10 ** 30)))
    assert "LOCAL_WORLD_SIZE=1000000000000000000000000000000 (torchrun): a local world size of" in r.stderr
    assert "more processes than a Linux node can run (pid_max is at most 4,194,304)" in r.stderr
    r = answered(*args, codes=(7,), env=dict(os.environ, LOCAL_RANK="0", LOCAL_WORLD_SIZE=str(1 << 22)))
    assert "has 6 core(s) for 4194304 ranks" in r.stderr, r.stderr


def test_a_visible_devices_list_of_millions_of_entries_names_no_gpu(tmp_path):
    """CUDA_VISIBLE_DEVICES in a process's environment (32 MiB of commas: 16 million pieces, 900 MB) is split into
    at most 4,096 entries: more names no GPU, said in the audit's notes."""
    root = fixture_copy("handmade-dgx-h100-ids", tmp_path)
    write_process(root, 4242, "LOCAL_RANK=0\0CUDA_VISIBLE_DEVICES=" + "," * (30 << 20) + "0\0")
    doc = json.loads(answered("--root", str(root), "audit", "4242", "--json", codes=(0,)).stdout)
    proc = doc["processes"][0]
    assert proc["gpu"] is None and any("CUDA_VISIBLE_DEVICES lists more than 4,096 entries" in n
                                       for n in proc["notes"]), proc["notes"]
