"""The tables of numatune's text reports: rich's look, drawn in time linear in the cells.

rich.table.Table renders every cell through its own pipeline (a Padding around a Text, measured, wrapped,
justified, cropped, padded: about 100 µs a cell), so a 40,000-mapping `audit --mappings` took 30 s where its
JSON took 0.6 s. `Table` takes the same calls (`add_column`, `add_row`, `title`, `caption`, `show_edge`,
`pad_edge`) and yields the segments rich.table would: each column's width measurement is gathered as rows are
added, rich's own width rules turn the measurements into widths (a one-row stand-in table: no cell is
re-measured), then each cell that fits its column on one line is padded in place, and only a cell that rich
would have to wrap or split (a narrow terminal, a newline, a tab, a text of several styles) is drawn by rich's
renderer. Without colour a row is one string. Cell text is made printable (render.printable) before it is
measured, so a control sequence shown as `\\x1b` keeps its column aligned.

Cells are plain text (a str or a rich Text), never markup; any other renderable is measured and drawn by rich.
"""

from __future__ import annotations

from rich import box as _boxes
from rich._wrap import divide_line
from rich.cells import cell_len
from rich.measure import Measurement
from rich.padding import Padding
from rich.protocol import is_renderable
from rich.segment import Segment
from rich.style import Style
from rich.table import Table as _RichTable
from rich.text import Text

from numatune.render.printable import printable

_COMPLEX = -1  # a cell's width when rich must draw it (a Text)
_RENDERABLE = -2  # ... and measure it (any other renderable)


class _Column:
    __slots__ = ("header", "justify", "overflow", "no_wrap", "maximum")

    def __init__(self, header: str, justify: str, overflow: str, no_wrap: bool) -> None:
        self.header, self.justify, self.overflow, self.no_wrap = header, justify, overflow, no_wrap
        self.maximum = 0  # the widest body cell, as rich measures text (Text.__rich_measure__)


class _Measured:
    """A stand-in cell measuring what a whole column measures, for rich's width rules."""

    __slots__ = ("minimum", "maximum")

    def __init__(self, minimum: int, maximum: int) -> None:
        self.minimum, self.maximum = minimum, maximum

    def __rich_measure__(self, console, options) -> Measurement:  # noqa: ANN001 - rich's protocol
        return Measurement(self.minimum, self.maximum)

    def __rich_console__(self, console, options):  # noqa: ANN001, ANN204 - never drawn
        return iter(())


def _cell(value) -> tuple[object, object, int]:  # noqa: ANN001 - str, Text, None or a renderable
    """(text or Text, style, width): width is the text's cells when it can be padded in place, else _COMPLEX
    (the value is then a Text for rich to draw) or _RENDERABLE (another renderable, for rich to measure too)."""
    if value is None:
        return "", None, 0
    if isinstance(value, str):
        text, style = value, None
    elif isinstance(value, Text):
        text, style = value.plain, value.style or None
        if not text.isprintable():
            value = Text(printable(text), style=value.style, justify=value.justify, overflow=value.overflow,
                         no_wrap=value.no_wrap)  # a control sequence in a styled cell: its spans go
            text = value.plain
        if value.spans or value.justify or value.overflow or value.no_wrap is not None:
            return value, None, _COMPLEX
    elif is_renderable(value):
        return value, None, _RENDERABLE
    else:
        raise TypeError(f"a table cell is text or a renderable, not {type(value).__name__}")
    if text.isprintable():  # no newline, no tab, no control: one line, padded in place
        return text, style, len(text) if text.isascii() else cell_len(text)
    text = printable(text)
    if text.isprintable():
        return text, style, len(text) if text.isascii() else cell_len(text)
    return Text(text, style=style or ""), None, _COMPLEX  # a newline or a tab: rich splits or expands it


def _measure(text: str) -> tuple[int, int]:
    """(minimum, maximum) as rich measures TEXT: its longest word, its longest line."""
    if text.isascii() and text.isprintable():
        words = text.split()
        return (max(map(len, words)) if words else len(text)), len(text)
    lines = text.splitlines()
    most = max(map(cell_len, lines)) if lines else 0
    words = text.split()
    return (max(map(cell_len, words)) if words else most), most


class Table:
    """rich.table.Table's calls and look (heavy-headed box, header bold, title italic), in linear time."""

    def __init__(self, title: str | None = None, *, title_justify: str = "center", caption: str | None = None,
                 caption_justify: str = "center", show_edge: bool = True, pad_edge: bool = True,
                 box: _boxes.Box = _boxes.HEAVY_HEAD) -> None:
        self.title, self.title_justify = title, title_justify
        self.caption, self.caption_justify = caption, caption_justify
        self.show_edge, self.pad_edge, self.box = show_edge, pad_edge, box
        self.columns: list[_Column] = []
        self.rows: list[tuple[list[tuple[object, object, int]], object, bool]] = []
        self.renderables: list[tuple[int, object]] = []  # (column, cell) of cells that are neither str nor Text

    def add_column(self, header: str = "", *, justify: str = "left", overflow: str = "ellipsis",
                   no_wrap: bool = False) -> None:
        if self.rows:
            raise ValueError("columns come before rows")
        if justify not in ("left", "right", "center"):
            raise ValueError(f"justify {justify!r}: left, right or center")
        self.columns.append(_Column(header, justify, overflow, no_wrap))

    def add_row(self, *values, style: str | Style | None = None) -> None:  # noqa: ANN002 - str, Text, renderables
        columns = self.columns
        if len(values) > len(columns):
            raise ValueError(f"{len(values)} cells for {len(columns)} columns")
        cells = []
        simple = True  # every cell one line of text, padded in place when it fits
        for i, (column, value) in enumerate(zip(columns, values)):  # noqa: B905 - fewer values: blank cells
            if value.__class__ is str and value.isprintable():  # the common cell, at C speed
                cell = value, None, len(value) if value.isascii() else cell_len(value)
                width = cell[2]
            else:
                cell = _cell(value)
                width = cell[2]
                if width < 0:
                    simple = False
                if width == _COMPLEX:
                    width = _measure(cell[0].plain)[1]
                elif width == _RENDERABLE:
                    self.renderables.append((i, value))
            if width > column.maximum:
                column.maximum = width
            cells.append(cell)
        cells += [("", None, 0)] * (len(columns) - len(cells))
        self.rows.append((cells, style, simple))

    def _minimums(self) -> list[int]:
        """Each column's longest word (rich's minimum width): only rich's narrowing needs them, so they are
        counted when the table is wider than the room it has."""
        out = []
        for i, column in enumerate(self.columns):
            low = 0
            for cells, _style, _simple in self.rows:
                value, _own, width = cells[i]
                if width == _RENDERABLE:  # measured by rich in the stand-in
                    continue
                if width == _COMPLEX:
                    value = value.plain
                elif width == len(value) and " " not in value:  # ASCII, one word
                    if width > low:
                        low = width
                    continue
                low = max(low, _measure(value)[0])
            out.append(min(low, column.maximum))
        return out

    @property
    def row_count(self) -> int:
        return len(self.rows)

    # -- layout: rich's rules on a one-row stand-in --------------------------------------------------
    def _stand_in(self, minimums: list[int] | None = None) -> _RichTable:
        """A rich table of the same columns whose one row measures what each column's text cells measure (the
        minimums left at the maximums when the table fits: rich then takes each column's maximum), then one
        row for each cell that is another renderable, for rich to measure."""
        t = _RichTable(box=self.box, show_edge=self.show_edge, pad_edge=self.pad_edge)
        for c in self.columns:
            t.add_column(printable(c.header), justify=c.justify, overflow=c.overflow, no_wrap=c.no_wrap)
        if self.rows:
            lows = minimums or [c.maximum for c in self.columns]
            t.add_row(*(_Measured(low, c.maximum) for low, c in zip(lows, self.columns, strict=True)))
        for i, value in self.renderables:
            t.add_row(*([""] * i), value)
        return t

    def __rich_measure__(self, console, options) -> Measurement:  # noqa: ANN001 - rich's protocol
        return self._stand_in(self._minimums()).__rich_measure__(console, options)

    def __rich_console__(self, console, options):  # noqa: ANN001, ANN204 - rich's protocol
        if not self.columns:
            yield Segment("\n")
            return
        stand_in = self._stand_in()
        extra = stand_in._extra_width
        room = options.update_width(options.max_width - extra)
        widths = stand_in._calculate_column_widths(console, room)
        if sum(widths) + extra > options.max_width or any(  # narrowed: rich's rules need the longest words
                w < c.maximum + sum(p) for w, c, p in zip(widths, self.columns, self._pads(), strict=True)):
            stand_in = self._stand_in(self._minimums())
            widths = stand_in._calculate_column_widths(console, room)
        render_options = options.update(width=sum(widths) + extra, highlight=False, height=None)
        if self.title:
            yield from _annotation(console, render_options, self.title, "table.title", self.title_justify)
        yield from self._render(console, render_options, widths)
        if self.caption:
            yield from _annotation(console, render_options, self.caption, "table.caption", self.caption_justify)

    def _pads(self) -> list[tuple[int, int]]:
        """(left, right) blanks around each column's cells: one, none at the table's edges without pad_edge."""
        n = len(self.columns)
        return [(0 if not self.pad_edge and i == 0 else 1, 0 if not self.pad_edge and i == n - 1 else 1)
                for i in range(n)]

    def _render(self, console, options, widths: list[int]):  # noqa: ANN001, ANN202 - rich's types
        box = self.box.substitute(options, safe=console.safe_box)
        plain = console.color_system is None  # no style is ever written: a line is one string
        get_style = console.get_style
        edge, n = self.show_edge, len(self.columns)
        pads = self._pads()
        if edge:
            yield Segment(box.get_top(widths))
            yield Segment.line()
        lines = _Rows(console, options, self.columns, widths, pads, plain)

        def sides(left: str, divider: str, right: str) -> tuple[str, str, str]:
            return (left, divider, right) if edge else ("", divider, "")

        header_style = get_style("table.header")
        yield from lines.row([_cell(c.header) for c in self.columns], [header_style] * n, "bottom",
                             *sides(box.head_left, box.head_vertical, box.head_right))
        yield Segment(box.get_row(widths, "head", edge=edge))
        yield Segment.line()
        mid = sides(box.mid_left, box.mid_vertical, box.mid_right)
        foot = sides(box.foot_left, box.foot_vertical, box.foot_right)
        # every cell fits its column: a row of one-line cells is drawn in one pass (one string without colour)
        fast = lines.roomy and all(r >= c.maximum for r, c in zip(lines.room, self.columns, strict=True))
        styles: dict[object, Style] = {}
        last = len(self.rows) - 1
        room = lines.room
        for index, (cells, row_style, simple) in enumerate(self.rows):
            left, divider, right = foot if index == last else mid
            # narrowed columns (a terminal narrower than the table): this row's cells may fit all the same
            fits = simple and (fast or lines.roomy and all(w <= r for (_v, _o, w), r in zip(cells, room, strict=True)))
            if fits and (plain or row_style is None and all(own is None for _v, own, _w in cells)):
                yield Segment(lines.line(cells, left, divider, right))
                yield Segment.line()
                continue
            style = styles.get(row_style)
            if style is None:  # rich: the column's style (none) + the row's
                style = styles[row_style] = Style.null() + get_style(row_style) if row_style else Style.null()
            if fits:
                yield from lines.styled(cells, style, left, divider, right)
            else:
                yield from lines.row(cells, [style] * n, "top", left, divider, right)
        if edge:
            yield Segment(box.get_bottom(widths))
            yield Segment.line()


class _Rows:
    """Draws the rows of a table whose column widths are known."""

    def __init__(self, console, options, columns: list[_Column], widths: list[int],  # noqa: ANN001
                 pads: list[tuple[int, int]], plain: bool) -> None:
        self.console, self.options, self.columns, self.widths, self.pads = console, options, columns, widths, pads
        self.plain = plain
        self.room = [w - left - right for w, (left, right) in zip(widths, pads, strict=True)]
        self.roomy = min(self.room) > 0  # rich draws no line in a cell of no room
        self.blanks = [(" " * left, " " * right) for left, right in pads]
        self.justify = [c.justify for c in columns]
        self.added: dict[tuple[Style, object], Style] = {}

    def line(self, cells, left: str, divider: str, right: str) -> str:  # noqa: ANN001
        """A row of one-line cells that fit their columns, without colour: one string."""
        out = []
        for (value, _own, width), (lpad, rpad), room, justify in zip(cells, self.blanks, self.room, self.justify,
                                                                     strict=True):
            if justify == "left":
                out.append(f"{lpad}{value}{' ' * (room - width)}{rpad}")
            else:
                out.append(f"{lpad}{_justified(room, justify, value, width)}{rpad}")
        return left + divider.join(out) + right

    def styled(self, cells, style: Style, left: str, divider: str, right: str):  # noqa: ANN001, ANN201
        """A row of one-line cells that fit their columns, in colour."""
        pieces: list[tuple[str, Style | None]] = [(left, None)]
        for i, ((value, own, width), (lpad, rpad), room, justify) in enumerate(
                zip(cells, self.blanks, self.room, self.justify, strict=True)):
            if i:
                pieces.append((divider, None))
            pieces += ((lpad, style), (_justified(room, justify, value, width), self._content(style, own)),
                       (rpad, style))
        pieces.append((right, None))
        yield from _merged(pieces, False)
        yield Segment.line()

    def row(self, cells, styles: list[Style], vertical: str, left: str, divider: str, right: str):  # noqa: ANN001, ANN201
        """Any row, as rich.table draws it: each cell's lines (drawn here, or by rich for a cell only rich can
        lay out), blank lines of the cell's style below the shorter ones (above, in the header)."""
        drawn = [self._cell(i, cell, styles[i]) for i, cell in enumerate(cells)]
        tallest = max(len(lines) for lines in drawn)
        height = max(1, tallest)  # a row is one line at least, unstyled where no cell had room for any
        for line_no in range(height):
            pieces: list[tuple[str, Style | None]] = [(left, None)]
            for i, lines in enumerate(drawn):
                if i:
                    pieces.append((divider, None))
                short = height - len(lines)
                at = line_no - short if vertical == "bottom" else line_no
                if 0 <= at < len(lines):
                    pieces += lines[at]
                else:  # rich's blank: the cell's style, none in a row where no cell had a line
                    pieces.append((" " * self.widths[i], styles[i] if tallest else None))
            pieces.append((right, None))
            yield from _merged(pieces, self.plain)
            yield Segment.line()

    def _cell(self, i: int, cell, style: Style) -> list[list[tuple[str, Style | None]]]:  # noqa: ANN001
        """The lines of one cell, each its column's width, as (text, style) pieces: padded in place, wrapped
        here (a line of ASCII), or drawn by rich."""
        value, own, width = cell
        room = self.room[i]
        if room < 1:  # rich renders nothing in no room
            return []
        if width >= 0 and (width <= room or value.isascii()):
            column = self.columns[i]
            texts = ([_justified(room, column.justify, value, width)] if width <= room else
                     _wrapped(value, room, column.justify, column.overflow, column.no_wrap))
            lpad, rpad = self.blanks[i]
            content = self._content(style, own)
            return [[(lpad, style), (text, content), (rpad, style)] for text in texts]
        column = self.columns[i]
        if width >= 0:
            value = Text(value, style=own or "")
        left, right = self.pads[i]
        options = self.options.update(width=self.widths[i], justify=column.justify, no_wrap=column.no_wrap,
                                      overflow=column.overflow, height=None, highlight=False)
        return [[(seg.text, seg.style) for seg in line]
                for line in self.console.render_lines(Padding(value, (0, right, 0, left)), options, style=style)]

    def _content(self, style: Style, own: object) -> Style:
        """The style of a cell's text: the row's, plus the cell's own."""
        if not own:
            return style
        key = (style, own)
        content = self.added.get(key)
        if content is None:
            content = self.added[key] = style + self.console.get_style(own)
        return content


def _justified(room: int, justify: str, value: str, width: int) -> str:
    """VALUE, one line of WIDTH cells that fits ROOM, filled to it as rich justifies it."""
    if justify == "left":
        return value + " " * (room - width)
    if value.endswith(" "):  # rich strips the blanks at the end before it aligns right or centres
        value = value.rstrip(" ")
        width = cell_len(value)
    fill = room - width
    if justify == "right":
        return " " * fill + value
    return " " * (fill // 2) + value + " " * (fill - fill // 2)


def _merged(pieces: list[tuple[str, Style | None]], plain: bool):  # noqa: ANN202
    """Segments of a line's (text, style) pieces: empty ones dropped, neighbours that carry no style (all of
    them, without colour) joined into one; a styled piece stays one segment, as rich writes it."""
    run: list[str] = []
    for text, style in pieces:
        if not text:
            continue
        if plain or not style:
            run.append(text)
            continue
        if run:
            yield Segment("".join(run))
            run = []
        yield Segment(text, style)
    if run:
        yield Segment("".join(run))


def _wrapped(text: str, width: int, justify: str, overflow: str, no_wrap: bool) -> list[str]:
    """A line of printable ASCII wider than WIDTH as rich.text.Text.wrap lays it out: broken after words (a
    word wider than the column folded, cropped or cut with "…"), blanks past the width dropped, each line
    justified to exactly WIDTH."""
    if no_wrap:
        pieces = [text]
    else:
        breaks = divide_line(text, width, fold=overflow == "fold")
        pieces = []
        for a, b in zip([0, *breaks], [*breaks, len(text)], strict=True):
            piece = text[a:b]
            if len(piece) > width:  # rstrip_end: blanks past the width go
                piece = piece[:len(piece) - min(len(piece) - len(piece.rstrip()), len(piece) - width)]
            pieces.append(piece)
    out = []
    for piece in pieces:
        if justify == "left":
            piece = _cut(piece, width, overflow).ljust(width)
        else:
            piece = _cut(piece.rstrip(), width, overflow)
            fill = width - len(piece)
            piece = " " * fill + piece if justify == "right" else " " * (fill // 2) + piece + " " * (fill - fill // 2)
        out.append(piece)
    return out


def _cut(text: str, width: int, overflow: str) -> str:
    """rich's Text.truncate on ASCII: longer than WIDTH, cropped (fold, crop) or cut with "…" (ellipsis)."""
    if len(text) <= width:
        return text
    return text[:max(0, width - 1)] + "…" if overflow == "ellipsis" else text[:width]


def _annotation(console, options, text, style: str, justify: str):  # noqa: ANN001, ANN202
    """A title or caption, as rich.table renders it (rich's renderer: one call, wrapped to the table's width)."""
    if isinstance(text, str):
        text = Text(printable(text), style=style)
    return console.render(text, options=options.update(justify=justify))
