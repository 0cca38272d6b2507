"""numatune.numbers: the one parser of integers written as text, and the house rule that keeps it the one.

`test_no_bare_int_on_text` reads the source as tests/test_layers.py does: every `int(...)` call under
numatune/ is either on a value that is a number already (arithmetic, an exit code) or listed in ALLOWED
with the reason it cannot meet hostile text; a new `int(text)` anywhere fails the suite until it goes
through numbers.parse_int / maybe_int or gets a reason here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from numatune.errors import ExitCode, ParseError
from numatune.numbers import MAX_DIGITS, maybe_int, parse_int

PACKAGE = Path(__file__).resolve().parents[1] / "numatune"


@pytest.mark.parametrize(("text", "base", "value"), [
    ("42", 10, 42), (" 42\n", 10, 42), ("-1", 10, -1), ("+7", 10, 7), ("0x1f", 16, 31), ("1F", 16, 31),
    ("0x10", 0, 16), ("010", 0, 10), ("0" * MAX_DIGITS + "", 10, 0), ("9" * MAX_DIGITS, 10, 10**MAX_DIGITS - 1),
    ("42\x00", 10, 42),
])
def test_parse_int_reads_what_kernels_write(text, base, value):
    assert parse_int(text, "f", base=base) == value


@pytest.mark.parametrize("text", ["", "-", "0x", "1_000", "١٢", "１２", "12a", "1.5", "0x10", " ", "²"])
def test_parse_int_refuses_what_no_kernel_writes(text):
    with pytest.raises(ParseError, match=r"^malformed /proc/x line 3: expected an integer"):
        parse_int(text, "/proc/x", line=3)
    assert maybe_int(text, "/proc/x") is None


@pytest.mark.parametrize(("text", "base"), [("1" * 5000, 10), ("0x" + "f" * 4000, 0), ("f" * 41, 16),
                                            ("-" + "9" * 41, 10), ("0" * 41, 10)])
def test_a_number_past_the_digit_bound_names_the_file_and_line(text, base):
    """Python's int() raises (exit 70) past 4,300 digits, and a 4,000-hex-digit value parses and fails at
    output; numatune stops at MAX_DIGITS with a one-line exit 3 that says where, even from maybe_int."""
    for parse in (parse_int, maybe_int):
        with pytest.raises(ParseError) as info:
            parse(text, "/proc/interrupts", base=base, line=1)
        assert info.value.exit_code == ExitCode.INPUT
        assert info.value.message.startswith("malformed /proc/interrupts line 1: a number of")
        assert "\n" not in info.value.message and len(info.value.message) < 200


# -- the house rule -------------------------------------------------------------------------------------
_EXIT_CODES = "conversions of an ExitCode (an int already)"
_FLOAT = "arithmetic on numbers numatune computed (a float truncated), never text"
_OWN = "a label numatune wrote itself (\"GPU12\", \"node 3\") or a value of its own documents"
_LIVE_SELF = "this process's own /proc/self files (the live kernel, not a root), in a try or hex (no digit limit)"
_BOUNDED = "a slice or token of bounded length, checked just before (at most 11 characters)"
_CAUGHT = "inside try/except ValueError that turns a bad value into exit 3 (an archive header, a cpulist)"
_PYTHON = "a Python value from a caller of the library API or ctypes (an int, float or c_int), not text"
ALLOWED: dict[tuple[str, str], str] = {
    ("analysis/diff.py", "int(key)"): "key.isascii() and isdigit() and len <= MAX_DIGITS checked on the line above",
    ("analysis/fleet.py", "int(value)"): "a float of GiB, for display",
    ("commands/plan_memory.py", "int(params)"): "cli._options.LargeCount: a finite float, 0 < params < 1e30",
    ("plan/memory.py", "int(params)"): "a float checked 0 < params < 1e30 just before",
    ("cpulist.py", "int(lo_text)"): _CAUGHT + "; cpulist bounds ids at MAX_ID",
    ("cpulist.py", "int(hi_text)"): _CAUGHT + "; cpulist bounds ids at MAX_ID",
    ("cpulist.py", "int(digits, 16)"): "hex (no digit limit) after the width check against MAX_ID",
    ("cpulist.py", "int(used)"): _CAUGHT,
    ("cpulist.py", "int(group)"): _CAUGHT,
    ("measure/bench.py", "int(parts[1])"): _LIVE_SELF,
    ("measure/bench.py", "int(lo, 16)"): _LIVE_SELF,
    ("measure/bench.py", "int(hi, 16)"): _LIVE_SELF,
    ("entry.py", "int(p)"): "ASCII digits, at most 9 (isdigit and len checked just before)",
    ("model/order.py", "int(f, 16)"): "hex fields of at most 8 digits, checked just before",
    ("model/resolve.py", "int(text)"): "ASCII digits, at most MAX_DIGITS, checked just before",
    ("placement/arena.py", "int(shape)"): _PYTHON,
    ("placement/arena.py", "int(d)"): _PYTHON,
    ("placement/binding.py", "int(t)"): _LIVE_SELF + " (task ids, isdigit checked)",
    ("placement/move.py", "int(head)"): _FLOAT,
    ("placement/move.py", "int(tail and (end - start > ps or not head))"): _FLOAT,
    ("placement/move.py", "int(line.split()[1], 16)"): _LIVE_SELF,
    ("placement/pinning.py", "int(err)"): _PYTHON,
    ("placement/targets.py", "int(x)"): _FLOAT,
    ("placement/targets.py", "int(t[1])"): _FLOAT,
    ("plan/dra.py", "int(a.label[3:])"): _OWN,
    ("plan/memory.py", "int(nbytes)"): _PYTHON + "; in try/except ValueError (exit 3)",
    ("plan/memory.py", "int(cls)"): _PYTHON + "; in try/except ValueError (exit 3)",
    ("readers/irqs.py", "int(label)"): "ASCII digits (bytes.isdigit) of at most 10 characters, checked on the line",
    ("readers/irqs.py", "int(seg[11 * c:11 * c + 11])"): _BOUNDED,
    ("readers/irqs.py", "int(tokens[i])"): "inside try/except ValueError: a bad count makes the row irregular",
    ("readers/nvml.py", "int(info.state)"): _PYTHON,
    ("readers/nvml.py", "int(info.status)"): _PYTHON,
    ("readers/nvml.py", "int(info.cliqueId)"): _PYTHON,
    ("readers/nvml.py", "int(info.numCliques)"): _PYTHON,
    ("readers/nvml.py", "int(info.healthMask)"): _PYTHON,
    ("readers/nvml.py", "int(info.healthSummary)"): _PYTHON,
    ("readers/nvml.py", "int(c.type)"): _PYTHON,
    ("readers/nvml.py", "int(c.id)"): _PYTHON,
    ("readers/nvml.py", "int(word)"): _PYTHON,
    ("readers/procs.py", "int(name[i + 1:i + 4], 8)"): _BOUNDED,
    ("readers/procs.py", "int(addr, 16)"): "hex of at most 16 digits (checked just before), in try/except ValueError",
    ("render/envelope.py", "int(index)"): _OWN,
    ("render/inspect_text.py", "int(size)"): _FLOAT,
    ("render/picture.py", "int(c)"): _OWN + " (json.loads stops at 4,300 digits, below int()'s limit)",
    ("render/picture.py", "int(cell)"): _OWN + " (json.loads stops at 4,300 digits, below int()'s limit)",
    ("render/picture.py", "int(k.split()[1])"): _OWN,
    ("render/picture.py", "int(labels[j][3:])"): _OWN,
    ("render/probe_out.py", "int(s)"): _OWN + " (gpu_from_document: numatune's own probe output, for tests)",
    ("render/probe_out.py", "int(k)"): _OWN + " (gpu_from_document: numatune's own probe output, for tests)",
    ("render/prometheus.py", "int(key)"): _OWN + ": keys of numatune's own report (node ids it parsed)",
    ("system/host.py", "int(digits)"): "numbered checks len <= MAX_DIGITS; natural_key's _number only for digits "
                                       "of other scripts in a name (at most 1,024 bytes: the archive's bound)",
    ("system/memsys.py", "int(rc)"): _PYTHON,
    ("system/memsys.py", "int(w)"): _PYTHON,
    ("system/tarindex.py", "int(text, 8)"): _CAUGHT,
    ("system/tarindex.py", "int(body[pos:space])"): _CAUGHT + "; at most 12 characters",
    ("system/tarindex.py", "int(pax['size'])"): _CAUGHT,
}


def _is_number(arg: ast.expr) -> bool:
    """An argument that is a number whatever the input: arithmetic, an exit code, math/time/min/max."""
    if isinstance(arg, ast.BinOp):
        return True
    if isinstance(arg, ast.Attribute) and (isinstance(arg.value, ast.Name) and arg.value.id == "ExitCode"
                                           or arg.attr == "exit_code"):
        return True
    if isinstance(arg, ast.Call):
        name = ast.unparse(arg.func)
        return name in ("math.ceil", "math.floor", "time.time", "min", "max", "round", "len")
    return False


def bare_int_calls(package: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """(path under numatune/, call, line) of every int(...) on something that may be text."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == "numbers.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int"
                    and node.args and not _is_number(node.args[0])):
                out.append((rel, ast.unparse(node), node.lineno))
    return out


def test_no_bare_int_on_text():
    found = bare_int_calls()
    new = [f"numatune/{rel}:{line}: {call}: parse text with numatune.numbers.parse_int / maybe_int (or add a "
           "reason to ALLOWED)" for rel, call, line in found if (rel, call) not in ALLOWED]
    assert new == []


def test_every_allowance_is_still_used():
    """A reason for a call that is gone is dropped, so the list stays a statement of what is there."""
    used = {(rel, call) for rel, call, _ in bare_int_calls()}
    assert sorted(set(ALLOWED) - used) == []


def test_the_rule_can_fail(tmp_path):
    pkg = tmp_path / "numatune"
    (pkg / "readers").mkdir(parents=True)
    (pkg / "readers" / "x.py").write_text("def f(text):\n    return int(text.split()[0], 16), int(3 / 2)\n")
    (pkg / "numbers.py").write_text("def parse_int(t):\n    return int(t)\n")
    assert bare_int_calls(pkg) == [("readers/x.py", "int(text.split()[0], 16)", 2)]
