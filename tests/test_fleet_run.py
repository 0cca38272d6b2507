"""Reading fleet inputs as streams: pieces that split documents, bad documents mid-stream, pdsh capture."""

from __future__ import annotations

import copy
import io
import json

import pytest

from numatune.commands import fleet as fleet_run
from numatune.errors import InputError
from tests.analysis.test_fleet_grouping import DOC


class Trickle(io.StringIO):
    """A stdin that must be read in pieces: reading it whole (read() or read(-1)) fails the test."""

    def read(self, size: int | None = -1) -> str:
        assert size is not None and size > 0, "the whole stream was read at once"
        return super().read(size)


def _other() -> dict:
    d = copy.deepcopy(DOC)
    d["nodes"][1]["kind"] = "cxl"
    return d


@pytest.mark.parametrize("indent", [None, 2])
def test_stream_split_across_pieces(monkeypatch, indent):
    monkeypatch.setattr(fleet_run, "CHUNK", 97)  # every document spans many pieces
    docs = [DOC, DOC, _other(), DOC]
    text = "\n".join(json.dumps(d, indent=indent) for d in docs) + "\n"
    fleet, bad = fleet_run.run_fleet(("-",), stdin=Trickle(text))
    assert bad == []
    assert [g.nodes for g in fleet.groups] == [("stdin#1", "stdin#2", "stdin#4"), ("stdin#3",)]


def test_other_schema_and_broken_json_are_lines_not_stops(monkeypatch):
    monkeypatch.setattr(fleet_run, "CHUNK", 64)
    text = "\n".join([json.dumps(DOC), json.dumps({"schema": "numatune.check/1"}), json.dumps(DOC)])
    fleet, bad = fleet_run.run_fleet(("-",), stdin=Trickle(text + "\n{ not json\n"))
    assert fleet.total == 2 and fleet.groups[0].nodes == ("stdin#1", "stdin#3")
    assert bad[0] == ("stdin #2", "is a numatune.check/1 report; expected numatune.inspect/4 "
                                   "(made by `numatune inspect --json`)")
    assert bad[1][0] == "stdin #4" and bad[1][1].startswith("not valid JSON")


def test_pdsh_stream_with_one_broken_host(monkeypatch):
    monkeypatch.setattr(fleet_run, "CHUNK", 50)
    per_host = {"gpu1": json.dumps(DOC, indent=2).splitlines(), "gpu2": json.dumps(_other(), indent=2).splitlines(),
                "gpu3": ["{", '  "schema": oops', "}"], "gpu4": json.dumps(DOC, indent=2).splitlines()}
    lines = []
    for i in range(max(len(v) for v in per_host.values())):
        lines += [f"{h}: {v[i]}" for h, v in per_host.items() if i < len(v)]
    fleet, bad = fleet_run.run_fleet(("-",), stdin=Trickle("\n".join(lines) + "\n"))
    assert [g.nodes for g in fleet.groups] == [("gpu1", "gpu4"), ("gpu2",)]
    assert len(bad) == 1 and bad[0][0] == "stdin (gpu3)" and bad[0][1].startswith("not valid JSON")


def test_big_file_is_streamed(monkeypatch, tmp_path):
    monkeypatch.setattr(fleet_run, "WHOLE_FILE", 1000)
    monkeypatch.setattr(fleet_run, "CHUNK", 300)
    f = tmp_path / "all.json"
    f.write_text("".join(json.dumps(DOC) + "\n" for _ in range(50)))
    fleet, bad = fleet_run.run_fleet((str(f),))
    assert bad == [] and fleet.total == 50 and fleet.groups[0].nodes[:2] == ("all#1", "all#2")


def test_nothing_readable_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no numatune inspect report"):
        fleet_run.run_fleet(("-",), stdin=Trickle(json.dumps({"schema": "numatune.diff/1"})))
    with pytest.raises(InputError, match="holds no"):
        fleet_run.run_fleet((str(tmp_path),))


def test_a_long_stream_is_held_a_piece_at_a_time(monkeypatch):
    """1,000 reports through stdin: the peak is a piece, one document and a name per node, not the input."""
    import tracemalloc

    monkeypatch.setattr(fleet_run, "CHUNK", 64 << 10)
    one = json.dumps(DOC, indent=2)
    text = "\n".join(one for _ in range(1000)) + "\n"
    stdin = Trickle(text)
    tracemalloc.start()
    try:
        fleet, bad = fleet_run.run_fleet(("-",), stdin=stdin)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert bad == [] and fleet.total == 1000
    assert len(text) > 700_000 and peak < 400_000


def test_a_long_string_cut_between_pieces_is_waited_for(monkeypatch):
    monkeypatch.setattr(fleet_run, "CHUNK", 6000)  # the string starts more than 4 KB before a piece ends
    doc = copy.deepcopy(DOC)
    doc["findings"] = [{"code": "NT005", "severity": "info", "message": "m" * 20000}]
    fleet, bad = fleet_run.run_fleet(("-",), stdin=Trickle(json.dumps(doc) + "\n" + json.dumps(DOC) + "\n"))
    assert bad == [] and fleet.total == 2
    assert fleet.groups[0].findings[0].message == "m" * 20000
