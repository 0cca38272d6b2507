"""What every command shares (cli/_app.py): the progress line on stderr, plain with --no-color."""

from __future__ import annotations

from numatune.cli._app import App


def test_progress_line_plain_has_no_escape_byte(capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    # as on a terminal: click strips escape codes only off one
    monkeypatch.setattr("click.utils.should_strip_ansi", lambda stream=None, color=None: False)
    plain = App(color=False)
    plain.progress("numatune: probing node 0 (1/4) ...")
    plain.progress("numatune: probing 1 (2/4)")
    plain.progress(None)
    err = capsys.readouterr().err
    assert "\x1b" not in err
    # each rewrite blanks what the longer line before it left, with spaces; the clear leaves the cursor at 0
    assert err.split("\r")[2] == "numatune: probing 1 (2/4)".ljust(len("numatune: probing node 0 (1/4) ..."))
    assert err.endswith(" " * len("numatune: probing 1 (2/4)") + "\r")
    coloured = App(color=True)
    coloured.progress("x")
    coloured.progress(None)
    assert capsys.readouterr().err == "\rx\x1b[K\r\x1b[K"
    monkeypatch.setenv("NO_COLOR", "1")
    assert App(color=True).plain
