"""Last-level cache size from sysfs cache directories (a small hand-made tree, labelled as such)."""

from __future__ import annotations

from numatune.measure.bench import thp_of
from numatune.readers.caches import last_level_cache, parse_size
from numatune.system.host import Host


def _cache(root, cpu, index, level, kind, size, shared):  # noqa: ANN001
    d = root / f"sys/devices/system/cpu/cpu{cpu}/cache/index{index}"
    d.mkdir(parents=True)
    for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (d / name).write_text(f"{value}\n")


def test_llc_sums_distinct_instances(tmp_path):
    # hand-made: two L3 slices (one per CCX, as on AMD Zen), each shared by two CPUs; L1i is ignored
    for cpu in range(4):
        _cache(tmp_path, cpu, 0, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 1, 2, "Unified", "512K", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "Unified", "16384K", "0-1" if cpu < 2 else "2-3")
    (tmp_path / "sys/devices/system/node").mkdir(parents=True)
    host = Host.open(tmp_path)
    assert last_level_cache(host, [0, 1, 2, 3]) == 2 * 16 << 20
    assert last_level_cache(host, [0]) == 16 << 20
    assert last_level_cache(host, [7]) is None  # no cache directory for that CPU


def test_parse_size():
    assert parse_size("49152K") == 48 << 20
    assert parse_size("32M") == 32 << 20
    assert parse_size("4096") == 4096
    assert parse_size("lots") is None and parse_size(None) is None


def test_thp_share_of_the_mapping_holding_an_address():
    smaps = (
        "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 \n"
        "Size:               4096 kB\nRss:                4096 kB\nAnonHugePages:      2048 kB\n"
        "7f0000400000-7f0000600000 rw-p 00000000 00:00 0 \n"
        "Size:               2048 kB\nRss:                2048 kB\nAnonHugePages:         0 kB\n"
    )
    assert thp_of(smaps, 0x7F0000200000) == 0.5
    assert thp_of(smaps, 0x7F0000400000) == 0.0
    assert thp_of(smaps, 0x7F0000700000) is None
    assert thp_of(None, 0) is None
