"""Plain inspect tables print exactly what rich prints when nothing needs wrapping, and give way otherwise."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from numatune.commands.inspect import inspect_report
from numatune.render.console import UNLIMITED
from numatune.render.inspect_text import plain_inspect, plain_width, render_inspect
from numatune.system.host import Host
from tests.conftest import fixture_root, tree_fixtures


def _rich_text(parts, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False, emoji=False, markup=False,
                      soft_wrap=False)
    console.print(render_inspect(*parts))
    return out.getvalue()


@pytest.mark.parametrize("name", tree_fixtures())
def test_plain_is_rich_byte_for_byte_or_declines(name):
    parts = inspect_report(Host.open(fixture_root(name)), None)
    for width in (60, 80, 132, 250, UNLIMITED):  # UNLIMITED: what a pipe or file gets
        plain = plain_inspect(*parts, width)
        if plain is not None:
            assert plain == _rich_text(parts, width), width
    if name in ("256ppc-8n8s4t", "128arm-2pa2n8cluster4co"):  # everything fits a terminal: no rich needed
        assert plain_inspect(*parts, 132) is not None
    if name in ("pcp-1152cpu-x86_64", "memorysidecaches", "vm-two-socket"):  # fits a wide pipe
        assert plain_inspect(*parts, 250) is not None


def test_declines_what_needs_wrapping():
    parts = inspect_report(Host.open(fixture_root("256ppc-8n8s4t")), None)
    assert plain_inspect(*parts, 60) is None  # the nodes table is 76 columns wide
    cxl = inspect_report(Host.open(fixture_root("vm-cxl")), None)
    assert plain_inspect(*cxl, 500) is None  # the CXL tree is drawn by rich


class _Out(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_width_follows_rich():
    assert plain_width(_Out(True), {}) is None
    assert plain_width(_Out(False), {"FORCE_COLOR": "1"}) is None
    # Off a terminal nothing is narrowed, whatever COLUMNS says: tables grow, values stay whole.
    assert plain_width(_Out(False), {"COLUMNS": "123"}) == UNLIMITED
    assert plain_width(_Out(False), {}) == UNLIMITED


@pytest.mark.parametrize("width", [1, 5, 12, 40, 80])
def test_text_lines_wrap_as_rich_wraps_them(width):
    import random

    from numatune.render.inspect_text import _wrap

    rng = random.Random(width)
    words = ["a", "node", "/tmp/numatune-fixtures-0/256ppc-8n8s4t-6b1b34db2dcdede0/256ppc-8n8s4t", "(saved",
             "tree)", "x" * 90, "", " ", "   "]
    for _ in range(300):
        line = "".join(rng.choice(words) + rng.choice(["", " ", "  "]) for _ in range(rng.randint(1, 12)))
        out = io.StringIO()
        Console(file=out, width=width, no_color=True, highlight=False, emoji=False, markup=False,
                soft_wrap=False).print(line)
        assert "\n".join(_wrap(line, width)) + "\n" == out.getvalue(), repr(line)


def test_a_long_source_line_is_wrapped_not_handed_to_rich():
    parts = inspect_report(Host.open(fixture_root("256ppc-8n8s4t")), None)
    long_source = parts[0]._replace(source="/tmp/" + "x" * 70 + " (a path with a blank)")
    plain = plain_inspect(long_source, *parts[1:], 80)
    assert plain is not None and plain == _rich_text((long_source, *parts[1:]), 80)
