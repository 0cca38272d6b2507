"""The YAML numatune writes for kubelet reads back as the same data under a real YAML parser (PyYAML),
whatever the strings hold: YAML words, numbers, quotes, backslashes and control characters."""

from __future__ import annotations

import pytest

from numatune.plan.kubelet import to_yaml

yaml = pytest.importorskip("yaml")

TRICKY = ["true", "8", "0-3,8", "-1", ".5", "", "~", 'say "hi"', "back\\slash", "line\nbreak", "tab\there",
          "esc\x1b[31m", "nul\x00", "del\x7f", "csi\x9b", "crlf\r\n", "plain-name_1.0/x", "é ü", "a: b", "# hash"]


@pytest.mark.parametrize("text", TRICKY)
def test_a_string_reads_back_as_itself(text):
    doc = {"kind": "KubeletConfiguration", "value": text, text or "k": [text, {"x": text}]}
    assert yaml.safe_load(to_yaml(doc)) == doc


def test_no_raw_control_character_reaches_the_file():
    out = to_yaml({"a": "".join(map(chr, range(0x20))) + "\x7f\x9b"})
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) < 0xA0 for c in out)
    assert out.count("\n") == 1
