"""numatune/pieces.py: text split into pieces bounded in number, with what str.split and splitlines give."""

from __future__ import annotations

import random

import pytest

from numatune.errors import ParseError
from numatune.pieces import keyed, lines, split


def test_split_and_lines_give_what_str_gives():
    rng = random.Random(47)
    for _ in range(3000):
        text = "".join(rng.choice("ab \n\0:") for _ in range(rng.randint(0, 12)))
        for sep in ("\n", "\0", ":", None):
            assert split(text, sep, "f") == text.split(sep), (text, sep)
        assert lines(text, "f") == text.splitlines(), text


def test_more_pieces_than_the_bound_is_one_error_naming_the_file():
    assert split("a,b,c", ",", "f", 3) == ["a", "b", "c"]
    for sep in (",", None):
        with pytest.raises(ParseError, match=r"malformed /proc/1/x: more than 3 fields, more than any real one holds"):
            split("a,b,c,d".replace(",", sep or " "), sep, "/proc/1/x", 3, "fields")
    with pytest.raises(ParseError, match="more than 2 lines"):
        lines("a\nb\nc\n", "f", 2)


def _environ(text: str, keys, last: bool) -> dict[str, str]:
    """What splitting every entry gives: the reference `keyed` must equal."""
    out: dict[str, str] = {}
    for entry in text.split("\0"):
        key, sep, value = entry.partition("=")
        if sep and key in keys and (last or key not in out):
            out[key] = value
    return out


def test_keyed_reads_what_splitting_every_entry_reads():
    rng = random.Random(47)
    keys = ("A", "B", "AB")
    entries = ["A=1", "B=2", "AB=x", "A=3", "C", "=A", "XA=9", "A==", "", "B=", "CA=1", "A"]
    for _ in range(5000):
        text = "\0".join(rng.choice(entries) for _ in range(rng.randint(0, 6))) + rng.choice(["", "\0"])
        for last in (True, False):
            got, want = keyed(text, "\0", keys, last=last), _environ(text, keys, last)
            assert got == want and list(got) == list(want), (text, last)
