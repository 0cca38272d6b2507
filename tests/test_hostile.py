"""Archives and trees from strangers, tried as an attacker would: refused with exit 3 (one line) within
10 s and 256 MiB, or read with the hostile part missing and noted; nothing written anywhere.

Every hostile archive here is hand-made in the test (none is a capture of a machine): each is the
smallest member list that shows one attack, after the public descriptions of CPython's 2025 tarfile
CVEs (CVE-2025-4517, CVE-2025-4138, CVE-2025-4330) where it is one of those. The damaged archives are
real fixtures with bytes flipped or cut. Commands run in a child process under RLIMIT_AS and a timeout
(tests/limits.py), with TMPDIR pointed at an empty directory that must stay empty.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import stat
import tarfile
import time
import zlib

import pytest

import numatune.system.rootdir as rootdir
from numatune.errors import ArchiveRefused, NotASysfsTree, PermissionDenied
from numatune.system import tarindex
from numatune.system.host import DENIED, ESCAPES, TOO_LARGE, Host
from tests.conftest import fixture_archive, fixture_copy, fixture_names
from tests.limits import best_seconds, growth, run_limited

SECONDS, MIB = 10, 256


def _sym(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def _hard(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info


def _dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _archive(path, members, *, gz: bool = False) -> str:
    """A tar with a sys/ directory (so it is a root) and then `members` in order."""
    with tarfile.open(path, "w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(_dir("sys"))
        for m in members:
            info, data = m if isinstance(m, tuple) else (m, None)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return str(path)


@pytest.fixture
def sandbox(tmp_path):
    """An empty tmp/ for TMPDIR and an outside/ that an escape would write into; both must stay empty."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


def _refused(sandbox, root: str, *args: str, match: str = "") -> None:
    """`numatune --root ROOT ARGS` (inspect --json by default): exit 3, one line naming ROOT, within the
    limits, and nothing written in TMPDIR or outside/."""
    env = dict(os.environ, TMPDIR=str(sandbox / "tmp"))
    before = sorted(p.name for p in sandbox.iterdir())
    done = run_limited("--root", root, *(args or ("inspect", "--json")), seconds=SECONDS, mib=MIB, env=env)
    assert done.returncode == 3, (done.returncode, done.stderr[-400:])
    assert done.within(SECONDS, MIB), (done.wall, done.peak_mib)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("numatune: error: ") and root in lines[0] or root in done.stderr, done.stderr
    assert match in done.stderr, done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in sandbox.iterdir()) == before
    assert os.listdir(sandbox / "tmp") == [] and os.listdir(sandbox / "outside") == []


# -- CPython's 2025 tarfile CVEs ---------------------------------------------------------------------------
def _realpath_overflow(length: int, outside: str, steps: str = "abcdefghijklmnop") -> list:
    """CVE-2025-4517's pattern: directories of `length`-character names reached through one-letter links,
    until the resolved path passes PATH_MAX, then a link that climbs out and a file written through it."""
    comp = "d" * length
    members: list = []
    path = "sys"
    for step in steps:
        members.append(_dir(f"{path}/{comp}"))
        members.append(_sym(f"{path}/{step}", comp))
        path = f"{path}/{comp}"
    linkpath = "sys/" + "/".join(steps)
    members.append(_sym(f"{linkpath}/{'l' * 254}", "../" * len(steps)))
    members.append(_sym("sys/escape", f"{'l' * 254}/" + "../" * 8 + outside.lstrip("/")))
    members.append(_file("sys/escape/evil", b"written outside"))
    return members


@pytest.mark.parametrize("length", [100, 150, 200, 230, 247, 254])
def test_cve_2025_4517_realpath_overflow_is_refused(sandbox, length):
    """As published (16 levels): the directory names pass the 1024-byte bound; with as many levels as fit
    under it, the file written through the climbing link is what is refused (it lies below a link)."""
    archive = _archive(sandbox / "evil.tar", _realpath_overflow(length, str(sandbox / "outside")))
    _refused(sandbox, archive, match="longer than 1024 bytes")
    fits = "abcdefghijklmnop"[:max(1, 1000 // (length + 1) - 1)]
    archive = _archive(sandbox / "evil2.tar", _realpath_overflow(length, str(sandbox / "outside"), fits))
    _refused(sandbox, archive, match="lies below")


@pytest.mark.parametrize("depth", [40, 120, 400])
def test_realpath_overflow_through_the_destination_length_is_refused(sandbox, depth):
    """The same climb where the archive itself sits under a long path (the destination length varies)."""
    deep = sandbox / "tmp" / ("p" * 200) / ("q" * min(depth, 250))
    deep.mkdir(parents=True)
    archive = _archive(deep / "evil.tar.gz", _realpath_overflow(247, str(sandbox / "outside"), "abc"), gz=True)
    before = set(os.listdir(deep))
    with pytest.raises(ArchiveRefused, match="lies below"):
        Host.open(archive)
    assert set(os.listdir(deep)) == before and os.listdir(sandbox / "outside") == []


LINK_TRICKS = {
    # CVE-2025-4138: a link placed through a link, then a file through both.
    "link through link": [_sym("sys/a", "b"), _dir("sys/b"), _sym("sys/a/x", "../../../outside"),
                          _file("sys/a/x/evil")],
    # CVE-2025-4330: a hard link to a link, the link then replaced by one pointing out.
    "hardlink to a link": [_sym("sys/s", "ok"), _file("sys/ok"), _hard("sys/h", "sys/s"),
                           _sym("sys/s", "/etc/passwd")],
    # ... and to a file that is then replaced by a link.
    "hardlink to a replaced file": [_file("sys/f", b"x"), _hard("sys/h", "sys/f"), _sym("sys/f", "/etc/passwd")],
    "hardlink out": [_hard("sys/h", "../../etc/passwd")],
    "hardlink to nothing": [_hard("sys/h", "sys/absent")],
    "file through a link": [_sym("sys/out", "../.."), _file("sys/out/FILE")],
    "dot-dot name": [_file("sys/../../FILE")],
    "device node": [],  # filled below
    "fifo": [],
}
_dev = tarfile.TarInfo("sys/null")
_dev.type, _dev.devmajor, _dev.devminor = tarfile.CHRTYPE, 1, 3
LINK_TRICKS["device node"] = [_dev]
_fifo = tarfile.TarInfo("sys/fifo")
_fifo.type = tarfile.FIFOTYPE
LINK_TRICKS["fifo"] = [_fifo]


@pytest.mark.parametrize("name", list(LINK_TRICKS))
def test_link_tricks_are_refused(sandbox, name):
    archive = _archive(sandbox / "evil.tar", LINK_TRICKS[name])
    with pytest.raises(ArchiveRefused, match="refusing snapshot"):
        Host.open(archive)
    _refused(sandbox, archive)


DANGLING = {
    "absolute link": ([_sym("sys/passwd", "/etc/passwd")], "/sys/passwd"),
    "link out by ..": ([_sym("sys/up", "../../.."), _sym("sys/cpu", "up/etc")], "/sys/cpu/passwd"),
    "symlink chain": ([_dir("sys/a"), _sym("sys/a/b", ".."), _sym("sys/c", "a/b/../../..")], "/sys/c/etc/passwd"),
    "loop": ([_sym("sys/x", "y"), _sym("sys/y", "x")], "/sys/x"),
}


@pytest.mark.parametrize("name", list(DANGLING))
def test_links_that_leave_the_archive_dangle_and_are_noted(sandbox, name):
    """Links are text resolved in the archive's own namespace: one that is absolute or climbs above the
    top reads as missing and is listed (the host's /etc/passwd is never reached)."""
    members, path = DANGLING[name]
    host = Host.open(_archive(sandbox / "links.tar", members))
    assert host.read_optional(path) is None and host.exists(path) is False
    assert (path, ESCAPES) in host.notes or name == "loop"
    assert os.listdir(sandbox / "tmp") == []


def test_a_process_device_link_keeps_its_text(sandbox):
    """proc/PID/fd/N -> /dev/nvidia0 is link text audit reads; reading through it dangles."""
    host = Host.open(_archive(sandbox / "fd.tar", [_sym("proc/12/fd/3", "/dev/nvidia0")]))
    assert host.read_link("/proc/12/fd/3") == "/dev/nvidia0"
    assert host.read_optional("/proc/12/fd/3") is None


# -- bounds checked before the data they guard ----------------------------------------------------------
def _header(name: str, typeflag: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = typeflag, 0
    buf = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT))
    buf[124:136] = b"%011o\0" % size if size < 8**11 else b"\x80" + size.to_bytes(11, "big")  # GNU base-256
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf)
    return bytes(buf)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE])
@pytest.mark.parametrize("gz", [False, True])
def test_a_1_gib_extended_header_is_refused_on_its_header(sandbox, kind, gz):
    """A GNU long-name / long-link or pax header declaring 1 GiB, followed by 64 KiB of its 'data'."""
    raw = _header("././@LongLink", kind, 1 << 30) + b"n" * (64 << 10)
    path = sandbox / ("bomb.tar.gz" if gz else "bomb.tar")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    _refused(sandbox, str(path), match="extended header declares 1073741824 bytes")


def test_a_100_gb_member_is_refused_on_its_header(sandbox):
    path = sandbox / "big.tar"
    path.write_bytes(_header("sys/big", tarfile.REGTYPE, 100 << 30) + bytes(1024))
    _refused(sandbox, str(path), match="declares 107374182400 bytes")


def test_names_depth_and_total_bytes_are_bounded(sandbox):
    deep = _archive(sandbox / "deep.tar", [_file("sys/" + "d/" * 40 + "f")])
    with pytest.raises(ArchiveRefused, match="deeper than 32 levels"):
        Host.open(deep)
    long = _archive(sandbox / "long.tar", [_file("sys/" + "n" * 2000)])
    with pytest.raises(ArchiveRefused, match="longer than 1024 bytes"):
        Host.open(long)
    # 3 files of 30 MiB (each under the per-file bound) pass the 64 MiB total: refused on the third header.
    heavy = sandbox / "heavy.tar.gz"
    with gzip.open(heavy, "wb", compresslevel=1) as gz:
        gz.write(_header("sys/", tarfile.DIRTYPE, 0))
        for i in range(3):
            gz.write(_header(f"sys/f{i}", tarfile.REGTYPE, 30 << 20))
            gz.write(bytes(30 << 20))
        gz.write(bytes(1024))
    _refused(sandbox, str(heavy), match=f"more than {64 << 20} bytes of files")


def _million_members(path, count: int) -> None:
    """A real archive of `count` empty files (sys/f0000000 ...), gzip-compressed as it is made."""
    template = bytearray(_header("sys/f0000000", tarfile.REGTYPE, 0))
    template[148:156] = b" " * 8
    base = sum(template) - sum(b"0000000")
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        out.write(comp.compress(_header("sys/", tarfile.DIRTYPE, 0)))
        batch = []
        for i in range(count):
            digits = b"%07d" % i
            head = bytes(template[:5]) + digits + bytes(template[12:148])
            batch.append(head + b"%06o\0 " % (base + sum(digits)) + bytes(template[156:]))
            if len(batch) == 10000:
                out.write(comp.compress(b"".join(batch)))
                batch.clear()
        out.write(comp.compress(b"".join(batch) + bytes(1024)))
        out.write(comp.flush())


def test_a_real_million_member_archive_is_refused_fast(sandbox):
    """10**6 members (not a lowered bound): refused at member 100,001, in time and memory."""
    path = sandbox / "million.tar.gz"
    start = time.monotonic()
    _million_members(path, 10**6)
    assert time.monotonic() - start < 120
    with tarfile.open(path) as tar:  # it is a real archive: the first members read as tarfile reads them
        first = [tar.next() for _ in range(3)]
    assert [m.name for m in first] == ["sys", "sys/f0000000", "sys/f0000001"]
    _refused(sandbox, str(path), match="more than 100000 members")


def _pax_member(records: dict[str, str], name: str, data: bytes = b"") -> bytes:
    """A pax extended header with `records`, then a plain member `name` holding `data`."""
    body = b""
    for key, value in records.items():
        record = f" {key}={value}\n".encode("utf-8", "surrogateescape")
        length = len(record) + 1
        length += len(str(length)) - 1
        body += str(length).encode() + record
    pad = (-len(body)) % 512
    head = _header("././@PaxHeader", tarfile.XHDTYPE, len(body)) + body + bytes(pad)
    return head + _header(name, tarfile.REGTYPE, len(data)) + data + bytes((-len(data)) % 512)


def test_a_negative_pax_size_is_refused(sandbox):
    """40,000 `size=-1000` members walked the parser back and let 90 MB of files past the 64 MiB bound."""
    raw = _header("sys/", tarfile.DIRTYPE, 0) + _pax_member({"size": "-1000"}, "sys/neg") + bytes(1024)
    path = sandbox / "neg.tar"
    path.write_bytes(raw)
    _refused(sandbox, str(path), match="a negative member size")


def test_a_nul_in_a_link_target_is_refused(sandbox):
    """No file system holds one; `snapshot -o DIR` of such a root was exit 70 (embedded null byte)."""
    raw = _header("sys/", tarfile.DIRTYPE, 0) + _pax_member({"linkpath": "../../devices/x\0y"}, "sys/class")
    path = sandbox / "nul.tar"
    path.write_bytes(raw + bytes(1024))
    _refused(sandbox, str(path), match="NUL byte")


@pytest.mark.parametrize("after", [b"GARBAGE", _header("sys/late", tarfile.REGTYPE, 1) + b"x" + bytes(511)])
def test_data_after_the_end_of_the_archive_is_refused(sandbox, after):
    """Trailing garbage, or members after a lone zero block, were accepted and silently left unread."""
    raw = _header("sys/", tarfile.DIRTYPE, 0) + bytes(512) + after + bytes(1024)
    for name, data in (("trail.tar", raw), ("trail.tar.gz", gzip.compress(raw))):
        (sandbox / name).write_bytes(data)
        _refused(sandbox, str(sandbox / name), match="data after the end of the archive")


def test_a_gnu_header_names_its_member_without_its_times(sandbox):
    """GNU headers keep access and change times where POSIX keeps the name prefix."""
    with tarfile.open(sandbox / "gnu.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        info = _dir("sys")
        tar.addfile(info)
        fifo = tarfile.TarInfo("sys/odd")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
    raw = bytearray((sandbox / "gnu.tar").read_bytes())
    raw[512 + 345:512 + 357] = b"15301345154\0"  # atime, as `tar --format=gnu -G` writes it
    raw[512 + 148:512 + 156] = b" " * 8
    raw[512 + 148:512 + 156] = b"%06o\0 " % sum(raw[512:1024])
    (sandbox / "gnu.tar").write_bytes(bytes(raw))
    _refused(sandbox, str(sandbox / "gnu.tar"), match="'sys/odd' is a device node or FIFO")


# -- damaged archives ------------------------------------------------------------------------------------
def _damaged(sandbox, how: str) -> str:
    data = bytearray(fixture_archive("dev-1node-x86").read_bytes())
    if how == "crc":
        data[-8] ^= 0xFF  # the gzip trailer's CRC32
    elif how == "length":
        data[-1] ^= 0x01  # the trailer's ISIZE
    elif how == "body":
        data[len(data) // 2] ^= 0x55  # deflate data: a bad code or a CRC mismatch
    elif how == "truncated":
        del data[len(data) * 2 // 3:]
    elif how == "truncated tar":
        data = bytearray(gzip.compress(gzip.decompress(bytes(data))[:20000]))
    path = sandbox / f"{how.replace(' ', '-')}.tar.gz"
    path.write_bytes(bytes(data))
    return str(path)


@pytest.mark.parametrize("how", ["crc", "length", "body", "truncated", "truncated tar"])
def test_a_damaged_or_truncated_archive_is_exit_3_naming_it(sandbox, how):
    archive = _damaged(sandbox, how)
    _refused(sandbox, archive, match="refusing snapshot")
    _refused(sandbox, archive, "check", match="refusing snapshot")  # no NT009 blamed on firmware


# -- directory roots --------------------------------------------------------------------------------------
@pytest.fixture(params=["openat2", "walk"])
def beneath(request, monkeypatch):
    """Each directory-root test twice: with openat2 (where the kernel has it) and with the by-hand walk."""
    if request.param == "walk":
        monkeypatch.setattr(rootdir, "_OPENAT2", [None])
    else:
        probe = rootdir._openat2(os.open("/", os.O_RDONLY))
        if probe is None:
            pytest.skip("this kernel (or sandbox) has no openat2")
    return request.param


def test_a_root_holding_only_a_link_is_refused(sandbox, beneath):
    root = sandbox / "node"
    root.mkdir()
    os.symlink("/", root / "rootfs")
    _refused(sandbox, str(root), match="holds only a link")
    os.unlink(root / "rootfs")
    os.symlink("/sys", root / "sys")
    _refused(sandbox, str(root), match="its sys is a link")
    link = sandbox / "link-root"
    os.symlink("/", link)
    _refused(sandbox, str(link), match="is a link")


def test_a_link_to_an_archive_is_read_a_link_to_a_directory_is_not(tmp_path):
    from numatune.errors import InputError
    from tests.conftest import fixture_root

    archive = tmp_path / "latest.tar.gz"
    os.symlink(fixture_archive("32em64t-2n8c+dax+nvme+mic+dimms"), archive)
    host = Host.open(str(archive))
    assert host.is_archive and host.label == str(archive)
    assert host.read_optional("/sys/devices/system/node/online") == "0-1"
    tree = tmp_path / "latest"
    os.symlink(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms"), tree)
    with pytest.raises(InputError, match="saved directory root is never read through a link"):
        Host.open(str(tree))


def test_a_root_link_makes_irq_apply_write_nothing_live(sandbox, beneath):
    root = sandbox / "node"
    root.mkdir()
    os.symlink("/", root / "rootfs")
    _refused(sandbox, str(root), "irq", "apply", "--json", match="holds only a link")


MEMINFO = "/sys/devices/system/node/node0/meminfo"


def test_a_tree_link_out_of_the_root_reads_as_missing_with_a_note(tmp_path, cli, beneath):
    root = str(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    secret = tmp_path / "secret"  # stands for /etc/shadow: outside the root, readable
    secret.write_text("Node 0 MemTotal:       12345 kB\n")
    os.unlink(root + MEMINFO)
    os.symlink(str(secret), root + MEMINFO)
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    assert doc["nodes"][0]["memory_total_kib"] != 12345
    assert {"subject": MEMINFO, "reason": ESCAPES} in doc["skipped"]
    assert f"skipped {MEMINFO}: {ESCAPES}" in cli("--root", root, "inspect").stderr


def test_a_tree_directory_link_out_of_the_root_reads_as_missing(tmp_path, beneath):
    root = str(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    node0 = root + "/sys/devices/system/node/node0"
    outside = tmp_path / "outside"
    shutil.copytree(node0, outside, symlinks=True)
    shutil.rmtree(node0)
    os.symlink(str(outside), node0)  # absolute: leaves the root
    host = Host.open(root)
    assert host.read_optional(MEMINFO) is None and host.listdir("/sys/devices/system/node/node0") == []
    assert ("/sys/devices/system/node/node0", ESCAPES) in host.notes
    os.unlink(node0)
    os.symlink("../../../../../outside", node0)  # relative, still out
    assert Host.open(root).read_optional(MEMINFO) is None


def test_links_inside_the_root_still_work(tmp_path, beneath):
    root = str(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    os.rename(root + MEMINFO, root + "/sys/meminfo-moved")
    os.symlink("../../../../meminfo-moved", root + MEMINFO)
    host = Host.open(root)
    assert "MemTotal" in host.read_optional(MEMINFO) and host.notes == []
    assert host.resolve(MEMINFO) == "/sys/meminfo-moved"


def test_a_directory_swapped_for_a_link_after_the_walk_is_not_followed(tmp_path, monkeypatch):
    """Without openat2 the path is resolved by hand, then opened: a directory replaced by a link in
    between (a race an attacker sharing the tree could win) fails the open, the outside file unread."""
    monkeypatch.setattr(rootdir, "_OPENAT2", [None])
    root = fixture_copy("dev-1node-x86", tmp_path / "tree")
    outside = tmp_path / "outside" / "system"
    (outside / "cpu").mkdir(parents=True)
    (outside / "cpu" / "kernel_max").write_text("SECRET\n")
    host = Host.open(root)
    real_walk = rootdir.RootDir._walk

    def walk_then_swap(self, rel, follow):  # noqa: ANN001, ANN202
        out = real_walk(self, rel, follow)
        if rel.startswith("sys/devices/system/") and (root / "sys/devices/system").is_dir():
            os.rename(root / "sys/devices/system", root / "sys/devices/system.orig")
            os.symlink(outside, root / "sys/devices/system")
        return out

    monkeypatch.setattr(rootdir.RootDir, "_walk", walk_then_swap)
    text = host.read_optional("/sys/devices/system/cpu/kernel_max")
    assert text is None or "SECRET" not in text
    assert (root / "sys/devices/system").is_symlink()  # the swap did happen


def test_a_device_node_or_fifo_in_a_tree_is_never_opened(tmp_path, beneath):
    root = str(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    os.unlink(root + MEMINFO)
    os.mkfifo(root + MEMINFO)  # opening a FIFO for reading would block: it is never opened
    host = Host.open(root)
    assert host.read_optional(MEMINFO) is None and host.notes and host.notes[0][0] == MEMINFO


def test_irq_apply_never_opens_a_fifo_or_writes_a_hard_link_out_of_the_tree(tmp_path, cli, beneath):
    """A FIFO opened for writing by a reader elsewhere would take the data; a hard link in the tree may
    be a file outside it (the link count is all that shows it): neither is written, and the apply rolls
    back (exit 5) with the outside file untouched."""
    root = fixture_copy("dev-1node-x86", tmp_path / "tree")
    plan = json.loads(cli("--root", str(root), "irq", "apply", "--dry-run", "--json").stdout)["would_write"]
    assert len(plan) >= 2
    first, last = (root / w["file"].lstrip("/") for w in (plan[0], plan[-1]))
    outside = tmp_path / "outside.txt"
    outside.write_text(last.read_text())
    kept = outside.read_text()
    last.unlink()
    os.link(outside, last)
    before = first.read_bytes()
    r = cli("--root", str(root), "irq", "apply", "--save", str(tmp_path / "s.json"))
    assert r.exit_code == 5 and "hard links" in r.stderr, r.stderr
    assert outside.read_text() == kept and first.read_bytes() == before  # rolled back
    last.unlink()
    os.mkfifo(last)
    r = cli("--root", str(root), "irq", "apply", "--save", str(tmp_path / "s2.json"))
    assert r.exit_code in (0, 5) and "Traceback" not in r.stderr, r.stderr  # read as unreadable, never written
    assert stat.S_ISFIFO(os.lstat(last).st_mode)


def test_a_huge_sparse_file_is_refused_without_reading_it(sandbox, beneath):
    """A 2 GiB sparse /proc/interrupts (and cpuinfo): the read stops at 32 MiB + one chunk, exit 3."""
    root = str(fixture_copy("dev-1node-x86", sandbox / "tmp" / "tree"))
    for name in ("/proc/interrupts", "/proc/cpuinfo"):
        with open(root + name, "r+b") as fh:
            fh.truncate(2 << 30)
    for command in ("irq", "inspect"):
        env = dict(os.environ)
        done = run_limited("--root", root, command, "--json", seconds=SECONDS, mib=MIB, env=env)
        assert done.returncode == 3 and done.within(SECONDS, MIB), (done.returncode, done.wall, done.peak_mib)
        assert TOO_LARGE in done.stderr and done.stderr.count("\n") <= 2, done.stderr


def test_a_symlinked_state_directory_is_refused_and_nothing_is_written(sandbox, beneath):
    root = fixture_copy("dev-1node-x86", sandbox / "tmp" / "tree")
    (root / "var" / "lib").mkdir(parents=True, exist_ok=True)
    os.symlink(str(sandbox / "outside"), root / "var" / "lib" / "numatune")
    irqs = {p: p.read_bytes() for p in (root / "proc" / "irq").rglob("smp_affinity*")}
    done = run_limited("--root", str(root), "irq", "apply", "--json", seconds=SECONDS, mib=MIB)
    assert done.returncode == 3 and done.within(SECONDS, MIB), done.stderr
    assert "refusing to write" in done.stderr and "nothing was changed" in done.stderr
    assert os.listdir(sandbox / "outside") == []
    assert {p: p.read_bytes() for p in irqs} == irqs


def test_irq_apply_into_an_archive_is_exit_3(sandbox):
    _refused(sandbox, str(fixture_archive("dev-1node-x86")), "irq", "apply", match="snapshot archive")


# -- every fixture through numatune's own reader ----------------------------------------------------------
@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_archive_reads_as_tarfile_lists_it(name):
    """Each fixtures/NAME.tar.gz through tarindex: the same members, kinds, bytes and link texts as
    tarfile reads, and the tree found at the archive's top directory."""
    path = fixture_archive(name)
    index = tarindex.read_archive(str(path), name)
    kinds = {tarfile.REGTYPE: tarindex.REGULAR, tarfile.DIRTYPE: tarindex.DIRECTORY, tarfile.SYMTYPE: tarindex.SYMLINK}
    with tarfile.open(path) as tar:
        top = None  # NAME/ for a packed fixture; a user's snapshot keeps the name it was written with
        for member in tar:
            top = top or member.name
            key = member.name.strip("/")
            assert index.kinds[key] == kinds[member.type], key
            if member.isfile():
                assert index.data[key] == tar.extractfile(member).read(), key
            elif member.issym():
                assert index.links[key] == member.linkname, key
    assert tarindex.tree_top(index) == top


def test_reading_an_archive_writes_nothing(sandbox):
    env = dict(os.environ, TMPDIR=str(sandbox / "tmp"), HOME=str(sandbox / "tmp"))
    done = run_limited("--root", str(fixture_archive("256ppc-8n8s4t")), "check", "--json", env=env)
    assert done.returncode in (0, 1) and done.within(SECONDS, MIB)
    assert os.listdir(sandbox / "tmp") == []


# -- unreadable files -----------------------------------------------------------------------------
def test_unreadable_file_is_noted_and_each_caller_chooses(tmp_path, monkeypatch):
    """root reads everything, so EACCES is simulated at the one raw read the Host makes."""
    host = Host.open(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    real = Host._read_raw

    def denying(self, logical):  # noqa: ANN001, ANN202
        if logical == MEMINFO:
            raise PermissionError(13, "Permission denied")
        return real(self, logical)

    monkeypatch.setattr(Host, "_read_raw", denying)
    assert host.read_optional("/sys/devices/system/node/node0/nothing") is None and host.notes == []
    assert host.read_optional(MEMINFO, denied="quiet") is None and host.notes == []
    assert host.read_optional(MEMINFO) is None and host.notes == [(MEMINFO, DENIED)]
    with pytest.raises(PermissionDenied, match="permission denied reading .*meminfo") as err:
        host.read_optional(MEMINFO, denied="raise")
    assert err.value.hint == "run as root"


def test_unreadable_file_reaches_the_reports(tmp_path, monkeypatch, cli):
    root = str(fixture_copy("dev-1node-x86", tmp_path / "tree"))
    real = Host._read_raw

    def denying(self, logical):  # noqa: ANN001, ANN202
        if logical == MEMINFO:
            raise PermissionError(13, "Permission denied")
        return real(self, logical)

    monkeypatch.setattr(Host, "_read_raw", denying)
    item = {"subject": MEMINFO, "reason": DENIED}
    assert item in json.loads(cli("--root", root, "inspect", "--json").stdout)["skipped"]
    assert item in json.loads(cli("--root", root, "irq", "--json").stdout)["skipped"]
    assert item in json.loads(cli("--root", root, "check", "--json").stdout)["skipped"]
    assert f"skipped {MEMINFO}: {DENIED}" in cli("--root", root, "inspect").stderr


def test_unlistable_directory_is_noted(monkeypatch):
    host = Host("/", "/")
    real_listdir = os.listdir

    def denying(path):  # noqa: ANN001, ANN202
        if path == "/sys/kernel/debug/irq/irqs":
            raise PermissionError(13, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", denying)
    assert host.listdir("/sys/kernel/debug/irq/irqs") == []
    assert host.notes == [("/sys/kernel/debug/irq/irqs", DENIED)]
    assert host.listdir("/sys/no/such/dir") == [] and len(host.notes) == 1


def test_not_an_archive(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"x" * 4096)
    with pytest.raises(NotASysfsTree, match="neither a directory nor a tar archive"):
        Host.open(junk)


# -- work bounds: small inputs that cost minutes or gigabytes (issue 32) -------------------------------
def _gz_archive(path, members, *, fmt=tarfile.GNU_FORMAT) -> str:
    """A gzip archive with a sys/ node (so it is a root) and a proc/, then `members` in order."""
    node = _file("sys/devices/system/node/node0/cpulist", b"0-3\n")
    with tarfile.open(path, "w:gz", format=fmt, compresslevel=1) as tar:
        for m in (_dir("sys"), node, _dir("proc"), *members):
            info, data = m if isinstance(m, tuple) else (m, None)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return str(path)


def _answered(root: str, *args: str) -> str:
    """`numatune --root ROOT ARGS` (inspect by default) ends with exit 0 within 10 s and 256 MiB: its stdout."""
    done = run_limited("--root", root, *(args or ("inspect",)), seconds=SECONDS, mib=MIB)
    assert done.returncode == 0, (done.returncode, done.stderr[-400:])
    assert done.within(SECONDS, MIB), (done.wall, done.peak_mib)
    return done.stdout


def test_the_parent_directories_a_member_implies_count_as_members(sandbox):
    """4,000 members 28 levels deep (a 40 KB archive) make 112,000 names: 99,000 of them were 7.2 s, 1.6 GB."""
    path = _gz_archive(sandbox / "deep.tar.gz", [_file(f"sys/x{i}/" + "d/" * 27 + "f", b"") for i in range(4000)])
    _refused(sandbox, path, match="more than 100000 members (counting the directories their names imply)")


def test_the_bytes_of_names_and_link_texts_are_bounded(sandbox):
    """9,000 links with 1,000-byte texts (each under the 1,024-byte bound): 9 MB of names, past 8 MiB."""
    links = [_sym(f"sys/l{i}", "t" * 1000) for i in range(9000)]
    _refused(sandbox, _gz_archive(sandbox / "names.tar.gz", links, fmt=tarfile.PAX_FORMAT),
             match=f"more than {tarindex.MAX_NAME_TOTAL} bytes of names and link texts")


def test_a_member_reached_by_many_links_is_decoded_once(sandbox):
    """1,000 /proc/N/comm hard links and 1,000 symbolic links to one 32 MiB member: each read decoded the
    32 MiB again (1,000 hard links: 61 s)."""
    big = _file("proc/1/comm", b"a" * (32 << 20))
    hard = [_hard(f"proc/{i}/comm", "proc/1/comm") for i in range(2, 1002)]
    soft = [_sym(f"proc/{i}/comm", "../1/comm") for i in range(1002, 2002)]
    _answered(_gz_archive(sandbox / "fan.tar.gz", [big, *hard, *soft]))


def test_a_tree_file_reached_by_many_hard_links_is_read_once(tmp_path):
    """The same in a directory root: 1,000 /proc/N/comm hard links to one 32 MiB file (over 60 s)."""
    root = tmp_path / "root"
    (root / "sys/devices/system/node/node0").mkdir(parents=True)
    (root / "sys/devices/system/node/node0/cpulist").write_text("0-3\n")
    (root / "proc/1").mkdir(parents=True)
    (root / "proc/1/comm").write_bytes(b"a" * (32 << 20))
    for i in range(2, 1002):
        (root / f"proc/{i}").mkdir()
        os.link(root / "proc/1/comm", root / f"proc/{i}/comm")
    _answered(str(root))


def test_links_through_one_chain_are_resolved_once(sandbox):
    """5,000 /proc/N/comm links through a chain of 39 links with 1 KB texts: each lookup walked the chain
    again (99,900 such links: over 100 s). A chain of 41 links dangles, as the kernel's ELOOP."""
    pad = "/".join(["."] * 500)
    chain = [_file("proc/1/comm", b"init\n"), _sym("proc/c0", pad + "/1/comm")]
    chain += [_sym(f"proc/c{h}", f"{pad}/c{h - 1}") for h in range(1, 41)]
    links = [_sym(f"proc/{i}/comm", "../c38") for i in range(2, 5002)]
    path = _gz_archive(sandbox / "chain.tar.gz", [*chain, *links], fmt=tarfile.PAX_FORMAT)
    _answered(path)
    host = Host.open(path)
    assert host.read_text("/proc/4000/comm") == "init\n"
    assert host.read_optional("/proc/c39") == "init"  # 40 links
    assert host.read_optional("/proc/c40") is None and host.notes[-1] == ("/proc/c40", ESCAPES)  # 41


def test_links_into_a_chain_of_thousands_are_answered_as_from_a_fresh_start(sandbox):
    """20,000 links into a chain of 2,000 links, entered at every point: each link is settled once (more than 40
    links from it: it dangles wherever met), whatever order they are read in, and the 20,000 notes of links
    that leave the root are kept in linear time (a list looked up note by note was 30 s)."""
    chain = [_file("proc/1/comm", b"init\n"), _sym("proc/c0", "1/comm")]
    chain += [_sym(f"proc/c{h}", f"./c{h - 1}") for h in range(1, 2000)]
    links = [_sym(f"proc/{i}/comm", f"../c{(i * 7919) % 2000}") for i in range(2, 20002)]
    path = _gz_archive(sandbox / "chain.tar.gz", [*chain, *links], fmt=tarfile.PAX_FORMAT)
    _answered(path)
    host = Host.open(path)
    got = {i: host.read_optional(f"/proc/{i}/comm") for i in range(2, 20002)}
    assert {i for i, text in got.items() if text} == {i for i in got if (i * 7919) % 2000 < 39}  # 40 links at most
    assert set(got.values()) == {"init", None} and len(host.notes) == 20000 - len([t for t in got.values() if t])
    assert host.read_optional("/proc/c39") == "init" and host.read_optional("/proc/c40") is None


def test_a_loop_through_links_dangles_and_is_resolved_once(sandbox):
    host = Host.open(_archive(sandbox / "loop.tar", [_sym("sys/a", "b/x"), _sym("sys/b", "a/y"), _dir("sys/d"),
                                                     _sym("sys/d/up", "../d/up/z")]))
    for _ in range(2):
        assert host.read_optional("/sys/a") is None and host.read_optional("/sys/d/up") is None
    assert ("/sys/a", ESCAPES) in host.notes and ("/sys/d/up", ESCAPES) in host.notes


def test_a_cpulist_bounds_the_ids_its_parts_produce(sandbox):
    """A 535-byte archive whose node list repeats 0-65535 20,000 times: 36 s (each part re-inserted 65,536
    ids). A node list names nodes below 1,024 (MAX_NUMNODES), so its parts here are 0-1023: refused on the
    second part, naming the file."""
    text = ",".join(["0-1023"] * 20000).encode()
    path = _gz_archive(sandbox / "cpulist.tar.gz", [_file("sys/devices/system/node/online", text)])
    done = run_limited("--root", path, "inspect", seconds=SECONDS, mib=MIB)
    assert done.returncode == 3 and done.within(SECONDS, MIB), (done.returncode, done.wall, done.stderr[-300:])
    assert "/sys/devices/system/node/online" in done.stderr and "more than 1024 ids in all" in done.stderr


def _interrupts_root(tmp_path, rows: str):
    root = fixture_copy("vm-two-socket", tmp_path / "root")
    (root / "proc/interrupts").write_text("           CPU0       CPU1       CPU2       CPU3\n" + rows)
    return str(root)


def test_blanks_inside_an_interrupts_row_cost_one_scan(tmp_path):
    """A 100 KB row with 100,000 blanks between two action names: 36 s (`.*?` then `\\s*$`)."""
    row = "  42:  1  0  0  0  PCI-MSI 1-edge  enp65s0-rx-0" + " " * 100_000 + "x\n"
    _answered(_interrupts_root(tmp_path, row), "irq", "--json")


def test_an_interrupts_file_of_a_million_rows_is_refused_naming_it(tmp_path):
    """1M rows naming a NIC (17 MB, under the 32 MiB bound): `irq --json` ran past 60 s and 820 MB."""
    root = _interrupts_root(tmp_path, "".join(f"{i}:x enp65s0\n" for i in range(100, 1_000_100)))
    done = run_limited("--root", root, "irq", "--json", seconds=SECONDS, mib=MIB)
    assert done.returncode == 3 and done.within(SECONDS, MIB), (done.returncode, done.wall, done.peak_mib)
    assert done.stderr.startswith("numatune: error: malformed /proc/interrupts: more than 32768 numbered rows")


def test_the_natural_sort_key_is_bounded(sandbox):
    """19,000 /proc entries of 400-character names alternating numbers and letters: the key was a list of
    160 parts a name (99,900 names of 1,000 characters: 11 s, 1.1 GB)."""
    prefix = "".join(f"{n}ab" for n in range(300, 378))
    names = [_dir(f"proc/{prefix}{i:08d}") for i in range(19000)]
    path = _gz_archive(sandbox / "names.tar.gz", names, fmt=tarfile.PAX_FORMAT)
    done = run_limited("--root", path, "inspect", seconds=SECONDS, mib=MIB)
    assert done.returncode == 0 and done.within(SECONDS, MIB), (done.returncode, done.wall, done.stderr[-300:])
    assert done.peak_mib < 128, done.peak_mib  # one string a key: 42 MiB here (list keys: 192 MiB)


# -- scaling: twice and four times the input, about twice and four times the time --------------------------
def test_the_interrupts_parser_is_linear():
    from numatune.readers.irqs import parse_interrupts

    def blanks(n: int) -> bytes:
        return b"CPU0\n 42: 1 PCI-MSI 1-edge eth0-TxRx-0" + b" " * n + b"x\n"

    def rows(n: int) -> bytes:
        return b"CPU0 CPU1\n" + b"".join(b"%d: 1 2 PCI-MSI %d-edge eth0-TxRx-%d\n" % (i, i, i) for i in range(n))

    assert growth(blanks, parse_interrupts, 100_000) < 8
    assert growth(rows, parse_interrupts, 4000) < 8


def test_the_cpulist_parser_is_linear():
    from numatune.cpulist import parse_cpulist

    def parts(n: int) -> str:
        return ",".join(f"{i}" if i % 3 else f"{i}-{i + 1}:1/2" for i in range(0, 2 * n, 2))

    assert growth(parts, parse_cpulist, 4000) < 8
    assert growth(lambda n: ",".join(["0-65535"] * n), lambda t: pytest.raises(ValueError, parse_cpulist, t),
                  5000) < 8


def test_the_numa_maps_parser_is_linear():
    from numatune.readers.procs import parse_numa_maps

    def lines(n: int) -> str:
        return "".join(f"{i:x} bind:0-65535,{i} anon={i} dirty=1 N0={i} N1=2 kernelpagesize_kB=4\n" for i in range(n))

    assert growth(lines, lambda t: parse_numa_maps(t, per_mapping=True), 2000) < 8
    eight_thousand = lines(8000)  # each line's policy was parsed as 65,536 ids: 60 s
    assert best_seconds(lambda: parse_numa_maps(eight_thousand, per_mapping=True), 1) < 5


def test_the_archive_index_is_linear(tmp_path):
    """Members, and links read through one chain: reading the index and every link grows as the archive."""
    def make(n: int) -> str:
        chain = [_file("proc/1/comm", b"x"), _sym("proc/c0", "1/comm")]
        chain += [_sym(f"proc/c{h}", f"c{h - 1}") for h in range(1, 30)]
        links = [_sym(f"proc/{i}/comm", "../c29") for i in range(2, n)]
        return _gz_archive(tmp_path / f"a{n}.tar.gz", [*chain, *links, *(_file(f"sys/f{i}") for i in range(n))])

    def read(path: str) -> None:
        host = Host.open(path)
        for name in host.listdir("/proc"):
            host.read_optional(f"/proc/{name}/comm")

    assert growth(make, read, 1500) < 8
