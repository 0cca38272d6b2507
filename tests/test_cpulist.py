import pytest
from hypothesis import given
from hypothesis import strategies as st

from numatune.cpulist import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8", {0, 1, 2, 3, 8}),
        ("", set()),
        ("\n", set()),
        ("0-1\n\x00", {0, 1}),
        ("5", {5}),
        ("0-7:2/4", {0, 1, 4, 5}),
        ("250-255", set(range(250, 256))),
    ],
)
def test_parse_cpulist(text, expected):
    assert parse_cpulist(text) == expected


@pytest.mark.parametrize("bad", ["a-b", "3-1", "-1", "0-7:0/4"])
def test_parse_cpulist_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_cpulist(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", {0, 1}),
        ("0000,00000000,0000003f", set(range(6))),
        ("00000001,00000001", {0, 32}),
        ("ff,ffffc000,000fffff,fc000000", set(range(26, 52)) | set(range(78, 104))),
        ("00000000\x00", set()),
    ],
)
def test_parse_cpumask(text, expected):
    assert parse_cpumask(text) == expected


def test_format_cpulist_compacts_ranges():
    assert format_cpulist([8, 0, 1, 2, 3, 10]) == "0-3,8,10"
    assert format_cpulist([]) == ""


def test_format_cpumask_words():
    assert format_cpumask({0, 32}) == "00000001,00000001"
    assert format_cpumask(set(), 64) == "00000000,00000000"


@given(st.frozensets(st.integers(min_value=0, max_value=2048)))
def test_list_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == cpus


@given(st.frozensets(st.integers(min_value=0, max_value=2048)))
def test_mask_round_trip(cpus):
    assert parse_cpumask(format_cpumask(cpus)) == cpus


def test_ids_no_kernel_writes_are_refused_before_any_memory_is_spent():
    """A hostile root's `0-4000000000` filled 17 GB; a 100,000-digit mask took minutes (quadratic)."""
    from numatune.cpulist import MAX_ID, parse_cpumask

    with pytest.raises(ValueError, match="beyond 65535"):
        parse_cpulist("0-4000000000")
    with pytest.raises(ValueError, match="beyond 65535"):
        parse_cpulist(f"{MAX_ID}")
    assert max(parse_cpulist(f"0-{MAX_ID - 1}")) == MAX_ID - 1
    with pytest.raises(ValueError, match="bits wide"):
        parse_cpumask("f" * 100_000)
    assert len(parse_cpumask("f" * (MAX_ID // 4))) == MAX_ID  # the widest a kernel could write
    assert parse_cpumask("0" * 100_000 + "5") == frozenset({0, 2})  # leading zeros are not width


def test_a_damaged_root_cpulist_is_one_line(cli, tmp_path):
    from tests.conftest import fixture_copy

    root = fixture_copy("dev-1node-x86", tmp_path)
    (root / "sys/devices/system/node/node0/cpulist").write_text("0-4000000000\n")
    r = cli("--root", str(root), "inspect")
    assert r.exit_code == 3 and r.stderr.startswith("numatune: error: ") and "Traceback" not in r.stderr
