"""render.table: the same bytes as rich.table for the same calls, in time linear in the rows."""

from __future__ import annotations

import io
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, Group
from rich.table import Table as RichTable
from rich.text import Text

from numatune.render.table import Table

STYLES = [None, "", "red", "bold red", "dim", "yellow", "green"]


def _console(width: int, colour: str | None) -> tuple[Console, io.StringIO]:
    """numatune's console settings (render.console), colour or not, WIDTH columns."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=colour is None, color_system=colour, highlight=False,
                      emoji=False, markup=False, soft_wrap=False, force_terminal=colour is not None)
    return console, buf


def _both(spec: dict, width: int, colour: str | None) -> tuple[str, str]:
    """(rich.table's output, render.table's output) of the table SPEC describes."""
    out = []
    for make in (RichTable, Table):
        kwargs = {k: spec[k] for k in ("title", "caption", "show_edge", "pad_edge") if k in spec}
        kwargs.update(title_justify=spec.get("title_justify", "left"), caption_justify="left")
        if spec.get("box") is not None:
            kwargs["box"] = spec["box"]
        t = make(**kwargs)
        for header, justify, overflow, no_wrap in spec["columns"]:
            t.add_column(header, justify=justify, overflow=overflow, no_wrap=no_wrap)
        for cells, style in spec["rows"]:
            t.add_row(*(Text(c[0], style=c[1]) if isinstance(c, tuple) else c for c in cells), style=style)
        console, buf = _console(width, colour)
        console.print(Group(t, "after"))
        out.append(buf.getvalue())
    return out[0], out[1]


def _spec(rows: int = 5) -> dict:
    return {
        "title": "PID 4242: placement per mapping (numa_maps)",
        "columns": [("start", "left", "ellipsis", False), ("resident", "right", "ellipsis", False),
                    ("kind", "left", "fold", False), ("off-policy", "right", "ellipsis", False)],
        "rows": [([f"{0x7f00 + i:x}", f"{i * 3.5:.1f} MiB", f"file /usr/lib/libx{i}.so" * (1 + i % 3),
                   ("0" if i % 2 else f"{i} pages", "bold red" if i % 2 == 0 else "")],
                  "dim" if i == rows - 1 else None) for i in range(rows)],
    }


@pytest.mark.parametrize("colour", [None, "standard", "truecolor"])
@pytest.mark.parametrize("width", [200, 60, 30, 12])
def test_same_bytes_as_rich(colour, width):
    """Fitting (200), wrapped and folded (60, 30), and squeezed to the last resort (12)."""
    spec = _spec()
    rich_out, ours = _both(spec, width, colour)
    assert ours == rich_out


@pytest.mark.parametrize("colour", [None, "256"])
def test_same_bytes_for_the_irq_look_and_odd_cells(colour):
    """No edge, no edge padding (irq's tables); a multi-line header (audit's memory table); a tab, a wide
    character, a text of two styles, blanks at the end of a right-aligned cell, an empty table, a centred column."""
    two = Text("ok")
    two.append(" (late binding NT406)", style="yellow")
    spec = {
        "show_edge": False, "pad_edge": False,
        "columns": [("device", "left", "fold", False), ("node 0 (home)\ndram", "right", "fold", False),
                    ("mid", "center", "ellipsis", False), ("local", "left", "fold", True)],
        "rows": [(["enp65s0", "1 ", "x", ("no", "red")], None), (["", "a\tb", "中文", two], "bold"),
                 (["nvme0", "", "", ""], None)],
    }
    for width in (120, 20):
        rich_out, ours = _both(spec, width, colour)
        assert ours == rich_out, width
    empty = {"title": "threads", "columns": [("TID", "left", "ellipsis", False)], "rows": []}
    assert _both(empty, 80, colour)[1] == _both(empty, 80, colour)[0]


def test_ascii_only_terminals_get_rich_ascii_box():
    spec = _spec(3)
    outs = []
    for make in (RichTable, Table):
        t = make(title="t")
        for header, justify, overflow, no_wrap in spec["columns"]:
            t.add_column(header, justify=justify, overflow=overflow, no_wrap=no_wrap)
        for cells, style in spec["rows"]:
            t.add_row(*(Text(c[0], style=c[1]) if isinstance(c, tuple) else c for c in cells), style=style)
        buf = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
        Console(file=buf, width=100, no_color=True, color_system=None, markup=False, emoji=False).print(t)
        buf.flush()
        outs.append(buf.buffer.getvalue())
    assert outs[1] == outs[0] and b"+" in outs[0]


CELL = st.text(alphabet=st.sampled_from("ab  -.:/0123é中\t"), max_size=14)


@settings(max_examples=150, deadline=None)
@given(columns=st.lists(st.tuples(st.text(alphabet="abc \n", max_size=6), st.sampled_from(["left", "right", "center"]),
                                  st.sampled_from(["fold", "ellipsis", "crop"]), st.booleans()),
                        min_size=1, max_size=5),
       rows=st.lists(st.tuples(st.lists(st.one_of(CELL, st.tuples(CELL, st.sampled_from(STYLES))), max_size=5),
                               st.sampled_from(STYLES)), max_size=6),
       width=st.integers(8, 90), edge=st.booleans(), pad=st.booleans(), colour=st.sampled_from([None, "256"]))
def test_same_bytes_as_rich_for_any_table(columns, rows, width, edge, pad, colour):
    rows = [(cells[:len(columns)], style) for cells, style in rows]
    spec = {"title": "a title", "show_edge": edge, "pad_edge": pad, "columns": columns, "rows": rows}
    rich_out, ours = _both(spec, width, colour)
    assert ours == rich_out


def test_control_characters_are_shown_and_keep_the_columns_aligned():
    t = Table()
    t.add_column("name")
    t.add_column("n", justify="right")
    t.add_row("a\x1b]0;owned\x07b", "1")
    t.add_row("plain", "22")
    console, buf = _console(200, None)
    console.print(t)
    lines = buf.getvalue().splitlines()
    assert "\x1b" not in buf.getvalue() and "a\\x1b]0;owned\\x07b" in lines[3]
    assert len({len(line) for line in lines}) == 1  # every line as wide as the table


@pytest.mark.parametrize("colour", [None, "256"])
def test_other_renderables_are_measured_and_drawn_by_rich(colour):
    from rich.padding import Padding
    from rich.panel import Panel

    outs = []
    for make in (RichTable, Table):
        t = make(title="mixed")
        t.add_column("a")
        t.add_column("b", justify="right")
        t.add_row("plain", Panel("in a panel"))
        t.add_row(Padding("padded", (1, 2)), "x", style="bold")
        console, buf = _console(60, colour)
        console.print(t)
        outs.append(buf.getvalue())
    assert outs[1] == outs[0]


def test_cells_are_text_and_rows_fit_their_columns():
    t = Table()
    t.add_column("a")
    with pytest.raises(TypeError):
        t.add_row(3)
    with pytest.raises(ValueError):
        t.add_row("x", "y")
    t.add_row("x")
    with pytest.raises(ValueError):
        t.add_column("late")


def _draw_seconds(rows: int, width: int, colour: str | None) -> float:
    t = Table(title="big")
    for h in ("start", "resident", "kind", "policy", "node 0", "node 1", "off-policy"):
        t.add_column(h, justify="right" if h in ("resident", "node 0", "node 1") else "left")
    for i in range(rows):
        t.add_row(f"{i:x}", "4 KiB", f"file /usr/lib/python3/dist-packages/torch/lib/libtorch_{i}.so", "default",
                  "4 KiB", "0 KiB", Text("0", style="red" if i % 3 else ""))
    console, _buf = _console(width, colour)
    start = time.process_time()
    console.print(t)
    return time.process_time() - start


@pytest.mark.parametrize("width, colour", [(100_000, None), (100_000, "256"), (60, None)])
def test_drawing_grows_linearly(width, colour):
    """Four times the rows, about four times the CPU time (under 8x on a loaded machine), whether the rows fit,
    carry colour, or wrap on a narrow terminal; rich.table took about 100 µs a cell."""
    small, large = min(_draw_seconds(2500, width, colour) for _ in range(2)), min(
        _draw_seconds(10_000, width, colour) for _ in range(2))
    assert large / small < 8, (small, large)
    assert large < 10, large


# -- the reports themselves: the same bytes as with rich.table, on real fixtures ---------------------------
REPORTS = [
    ("h100-vm-1gpu", ("audit", "1248")),  # a real CUDA process: memory table with a two-line header, threads
    ("h100-vm-1gpu", ("audit", "1248", "--mappings", "--min-size", "0")),
    ("vm-two-socket", ("irq",)),  # no edge, folded columns
    ("vm-two-socket", ("irq", "plan", "--ranks-per-node", "1")),
    ("handmade-launch-2s4gpu-cxl", ("inspect",)),  # GPUs, a path matrix, CXL
    ("256ppc-8n8s4t", ("inspect",)),
    ("topo-mi210-xgmi-pcie", ("inspect",)),
]
SCREENS = [  # a pipe; a plain 80-column terminal; a 132-column colour terminal
    {},
    {"TTY_COMPATIBLE": "1", "COLUMNS": "80"},
    {"FORCE_COLOR": "1", "NO_COLOR": None, "COLUMNS": "132"},
]


@pytest.mark.parametrize("tree, args", REPORTS)
def test_reports_print_what_rich_table_printed(cli, monkeypatch, tree, args):
    import numatune.render.audit_text as audit_text
    import numatune.render.irq_text as irq_text
    import numatune.render.table as table
    from tests.conftest import fixture_root

    for env in SCREENS:
        ours = cli("--root", str(fixture_root(tree)), *args, env=env)
        with monkeypatch.context() as m:
            for module in (audit_text, irq_text, table):
                m.setattr(module, "Table", RichTable)
            theirs = cli("--root", str(fixture_root(tree)), *args, env=env)
        assert ours.exit_code == theirs.exit_code and ours.exit_code in (0, 1), ours.stderr
        assert ours.stdout == theirs.stdout, env
        assert ("\x1b[" in ours.stdout) == ("FORCE_COLOR" in env)
