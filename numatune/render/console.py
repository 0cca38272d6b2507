"""The rich console every human-readable report prints through (one place for its settings).

Off a terminal (a pipe, a file) nothing is laid out for a screen that is not there: tables grow to fit
their widest value and text lines are not wrapped, so no value is cut ("0,2,4,…") and no token is split
over two lines ("0000:00:06" / ".0"), whatever COLUMNS says (a narrower layout would have to cut or
fold values). On a terminal rich sizes everything to the terminal (and COLUMNS) as before.
"""

from __future__ import annotations

import os
import sys

# Off a terminal without COLUMNS: wide enough that no table or line of numatune's is ever narrowed.
UNLIMITED = 100_000


def output_width(stream, environ) -> int | None:  # noqa: ANN001 - a text file, os.environ
    """The width to lay out for on STREAM: None on a terminal (or when FORCE_COLOR/TTY_COMPATIBLE make
    rich treat it as one: rich measures it), else UNLIMITED."""
    if "FORCE_COLOR" in environ or "TTY_COMPATIBLE" in environ:
        return None
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return UNLIMITED


def make_console(color: bool = True, *, stderr: bool = False):  # noqa: ANN201 - rich is imported lazily
    """The console, with every printed segment made printable (render.printable): values from a root
    can hold terminal control sequences, and rich writes them as they are."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    plain = not color or "NO_COLOR" in os.environ
    width = output_width(stream, os.environ)
    console = Console(
        file=stream if width is None else TrimmedLines(stream),
        no_color=plain,
        color_system=None if plain else "auto",  # no_color alone keeps bold, dim and italic: no escape at all
        highlight=False,
        emoji=False,
        markup=False,  # device names and sysfs values contain brackets ("[ConnectX-3]", "[root]")
        soft_wrap=False,
        width=width,
    )
    console.push_render_hook(_printable_hook())
    return console


class TrimmedLines:
    """A file or pipe that rich writes to, less the blanks at the end of each line (rich pads titles and
    cells to the table's width; a file keeps no padding). A line is written once it ends."""

    def __init__(self, stream) -> None:  # noqa: ANN001 - a text file
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        if lines:
            self.stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str):  # noqa: ANN204 - encoding, fileno, ... of the stream
        return getattr(self.stream, name)


def _printable_hook():  # noqa: ANN202 - a rich RenderHook, built when rich is loaded
    from rich.console import RenderHook
    from rich.segment import Segment

    from numatune.render.printable import printable

    class Printable:
        """A renderable's segments with their text made printable (rich's own control segments kept)."""

        def __init__(self, inner) -> None:  # noqa: ANN001 - any renderable
            self.inner = inner

        def __rich_console__(self, console, options):  # noqa: ANN001, ANN204 - rich's protocol
            for seg in console.render(self.inner, options):  # isprintable: most segments, at C speed
                yield seg if seg.control or seg.text.isprintable() else Segment(printable(seg.text), seg.style)

    class Hook(RenderHook):
        def process_renderables(self, renderables):  # noqa: ANN001, ANN201 - rich's protocol
            return [Printable(r) for r in renderables]

    return Hook()
