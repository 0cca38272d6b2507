"""One JSON envelope writer: no renderer spells out the schema/version header itself."""

from __future__ import annotations

from numatune.render.envelope import SCHEMAS, dumps, envelope, is_document
from tests.conftest import PROJECT

# render/fleet_out.py is being rewritten on the `perf` branch; it moves to envelope() there.
NOT_YET = {"numatune/render/envelope.py", "numatune/render/fleet_out.py"}
THE_LIST = "numatune/model/schemas.py"  # where the schema names are declared, once


def test_no_module_writes_the_envelope_by_hand():
    for path in (PROJECT / "numatune").rglob("*.py"):
        rel = str(path.relative_to(PROJECT))
        if rel in NOT_YET:
            continue
        text = path.read_text()
        assert '"numatune_version"' not in text, rel
        assert rel == THE_LIST or not any(f'"{s}"' in text for s in SCHEMAS.values()), rel


def test_envelope_comes_first_and_rows_stay_on_one_line():
    doc = envelope("irq", source="/", irqs=[{"irq": 1, "cpus": [0, 1]}], nested={"a": [1, 2]})
    assert list(doc)[:2] == ["schema", "numatune_version"] and is_document(doc, "irq")
    text = dumps(doc, ("irqs",))
    assert '\n    {"irq": 1, "cpus": [0, 1]}\n' in text
    assert '"a": [\n      1,' in text  # everything else indented as json.dumps(indent=2)
    import json

    assert json.loads(text) == doc == json.loads(dumps(doc))
