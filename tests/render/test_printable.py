"""Terminal control sequences from a root never reach the terminal (render.printable).

The hostile root here is hand-made on purpose: a copy of the `dev-1node-x86` fixture whose CPU model,
a network interface's name and an IRQ action name hold terminal control sequences (set the window
title, clear the screen, an 8-bit CSI), as a stranger's archive could."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest

from numatune.render.printable import printable
from tests.conftest import fixture_copy

ESC_TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CSI8 = "\x9b31m"
HOSTILE = f"EVIL{ESC_TITLE}{CLEAR}{CSI8}"
RAW_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


@pytest.mark.parametrize(("text", "shown"), [
    ("plain ascii, tabs\tand\nnewlines", "plain ascii, tabs\tand\nnewlines"),
    ("Intel® Xeon® — 中文", "Intel® Xeon® — 中文"),
    (HOSTILE, "EVIL\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"),
    ("cr\rdel\x7fnul\x00", "cr\\x0ddel\\x7fnul\\x00"),
    # bytes that were not UTF-8 (os.listdir's surrogateescape): each shown as the byte, 0x9b (CSI) included
    (b"eth\x9b\xff0".decode("utf-8", "surrogateescape"), "eth\\x9b\\xff0"),
    ("lone \ud800 and \udc10", "lone \\ud800 and \\udc10"), ("Hangul 한국 stays", "Hangul 한국 stays"),
    ("", ""),
])
def test_printable_shows_control_characters_and_keeps_text(text, shown):
    assert printable(text) == shown


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory):
    root = fixture_copy("dev-1node-x86", tmp_path_factory.mktemp("hostile"))
    cpuinfo = root / "proc" / "cpuinfo"
    cpuinfo.write_text(re.sub(r"model name\t: .*", f"model name\t: {HOSTILE}", cpuinfo.read_text()))
    net = root / "sys" / "class" / "net"
    os.rename(net / "eth0", net / f"eth{CLEAR}0")
    interrupts = root / "proc" / "interrupts"
    interrupts.write_text(interrupts.read_text().replace("virtio0-config", f"virtio0-config{ESC_TITLE}"))
    return root


TEXT_REPORTS = [["inspect"], ["check"], ["irq"], ["irq", "plan"], ["emit", "slurm"], ["emit", "kubelet"],
                ["emit", "nfd"], ["inspect", "--format", "prometheus"], ["irq", "--format", "prometheus"],
                ["launch", "--dry-run", "--node", "0", "--", "true"]]


@pytest.mark.parametrize("args", TEXT_REPORTS, ids=" ".join)
def test_no_report_writes_a_control_character_from_the_root(cli, hostile_root, args):
    r = cli("--root", str(hostile_root), *args)
    assert r.exit_code in (0, 1), r.stderr
    for stream in (r.stdout, r.stderr):
        assert not RAW_CONTROLS.search(stream), RAW_CONTROLS.search(stream)
    if args == ["inspect"]:
        # shown, not hidden (rich itself drops BEL, backspace, VT, FF and CR from what it lays out)
        assert "EVIL\\x1b]0;pwned" in r.stdout and "\\x1b[2J\\x9b31m" in r.stdout


@pytest.mark.parametrize("args", [["inspect", "--format", "svg"], ["inspect", "--format", "html"],
                                  ["check", "--format", "junit"]], ids=" ".join)
def test_xml_reports_stay_well_formed(cli, hostile_root, tmp_path, args):
    r = cli("--root", str(hostile_root), *args)
    assert r.exit_code in (0, 1), r.stderr
    assert not RAW_CONTROLS.search(r.stdout)
    if args[-1] != "html":
        ET.fromstring(r.stdout.split("\n", 1)[1] if r.stdout.startswith("<?xml") else r.stdout)
    out = tmp_path / f"report.{args[-1] if args[-1] != 'junit' else 'xml'}"
    assert cli("--root", str(hostile_root), *args, "-o", str(out)).exit_code in (0, 1)
    assert not RAW_CONTROLS.search(out.read_text())


def test_on_a_terminal_only_richs_own_colour_codes_are_escape_sequences(cli, hostile_root):
    """FORCE_COLOR: rich lays out and colours as for a terminal; the root's sequences are shown, not sent."""
    r = cli("--root", str(hostile_root), "inspect", env={"FORCE_COLOR": "1", "NO_COLOR": None, "TERM": "xterm"})
    assert r.exit_code == 0, r.stderr
    assert "\x1b[" in r.stdout  # coloured
    assert not re.search(r"\x1b(?!\[[0-9;]*m)", r.stdout)  # every ESC starts an SGR colour code
    assert not re.search(r"[\x07\x9b]", r.stdout) and "EVIL\\x1b]0;pwned" in r.stdout


def test_the_json_report_keeps_the_true_value_escaped_by_json(cli, hostile_root):
    import json

    r = cli("--root", str(hostile_root), "inspect", "--json")
    assert not RAW_CONTROLS.search(r.stdout)
    assert json.loads(r.stdout)["cpu"]["model"] == HOSTILE


def test_a_name_with_a_newline_cannot_forge_a_line(cli, tmp_path):
    """A directory name no kernel writes ("eth\\nPASS: ...") is left out of a saved root, with a note: it
    would otherwise print as a line of its own under the device."""
    root = fixture_copy("dev-1node-x86", tmp_path)
    net = root / "sys" / "class" / "net"
    os.rename(net / "eth0", net / "eth\nPASS: all good")
    r = cli("--root", str(root), "inspect")
    assert r.exit_code == 0, r.stderr
    assert "PASS: all good" not in r.stdout.splitlines() and "\nPASS" not in r.stdout
    assert "'eth\\nPASS: all good': a name with control characters" in r.stderr
