"""The only code in numatune that writes to a system: IRQ affinity, all or nothing.

Order of work for `apply` (and `restore`): read every affected IRQ's current affinity files, save
them to a state file (apply) before touching anything, write each new value, read it back, and on
the first failure put back every file already changed, verified byte for byte against what was
read. A kernel-managed IRQ (the write returns EIO) and an IRQ that vanished are skipped, not failures.
On a writable `--root` copy the same code runs without root, which is how the tests prove it.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from numatune.cpulist import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask
from numatune.errors import ApplyError, InputError, PermissionDenied, ReadError
from numatune.model._record import record
from numatune.model.document import Doc
from numatune.numbers import maybe_int
from numatune.render.envelope import SCHEMAS, dumps, envelope, is_document
from numatune.system.host import Host

STATE_DIR = "/var/lib/numatune"
Writer = Callable[[str, str], None]


@record
class Change:
    """Write `text` to /proc/irq/<irq>/<file>; reading back must give the CPUs in `expect`."""

    irq: int
    text: str
    expect: frozenset[int]
    file: str = "smp_affinity_list"
    label: str = ""


@record
class Saved:
    """One IRQ's affinity files exactly as read (None: file absent)."""

    irq: int
    smp_affinity_list: str | None
    smp_affinity: str | None
    label: str = ""


class ApplyResult:
    """What an apply or restore did; filled in as it goes (an accumulator, hence not a record)."""

    __slots__ = ("applied", "unchanged", "skipped", "planned", "state_file", "root")

    def __init__(self, root: str = "/") -> None:
        self.applied: list[int] = []
        self.unchanged: list[int] = []
        self.skipped: list[tuple[int, str]] = []
        self.planned: list[Change] = []  # dry run: what would be written
        self.state_file: str | None = None
        self.root = root  # the root written to (root_of): "/" for the live node

    @property
    def undo(self) -> str | None:
        """The command that puts the saved state back, quoted for a POSIX shell so it runs as pasted."""
        return undo_command(self.state_file) if self.state_file else None


def undo_command(state_file: str) -> str:
    """`numatune irq restore FILE`: no --root needed, the state file names its root."""
    import shlex

    return f"numatune irq restore {shlex.quote(state_file)}"


def irq_path(irq: int, name: str) -> str:
    return f"/proc/irq/{irq}/{name}"


def require_write_access(host: Host) -> None:
    """Writing IRQ affinity on the live node needs root; say so before anything is read or saved."""
    if host.is_live and os.geteuid() != 0:
        raise PermissionDenied(
            "irq apply/restore writes /proc/irq/N/smp_affinity_list and needs root on a live node",
            hint="run it with sudo, or see what it would do with --dry-run",
        )


def default_state_path(host: Host, now: float | None = None) -> Path:
    """/var/lib/numatune/irq-<UTC timestamp>.json, under the root for --root (so a fixture copy keeps its own).

    Never an existing file: a second apply in the same second gets a -2, -3... suffix.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    logical = f"{STATE_DIR}/irq-{stamp}.json"
    n = 2
    while host.kind(logical, follow=False) is not None:
        logical = f"{STATE_DIR}/irq-{stamp}-{n}.json"
        n += 1
    return Path(host.real_path(logical))


def root_of(host: Host) -> str:
    """What a state file records as its root: "/" for the live node, else the root's real path."""
    return "/" if host.is_live else host.root


def _read_raw(host: Host, logical: str) -> str | None:
    try:
        return host.read_text(logical)
    except ReadError:
        return None


def snapshot(host: Host, irqs: Iterable[tuple[int, str]]) -> tuple[list[Saved], list[tuple[int, str]]]:
    """(saved state of IRQs that exist, [(irq, reason)] for those that vanished)."""
    saved: list[Saved] = []
    gone: list[tuple[int, str]] = []
    for irq, label in irqs:
        lst = _read_raw(host, irq_path(irq, "smp_affinity_list"))
        hexmask = _read_raw(host, irq_path(irq, "smp_affinity"))
        if lst is None and hexmask is None:
            gone.append((irq, f"vanished: /proc/irq/{irq} is gone"))
            continue
        saved.append(Saved(irq, lst, hexmask, label))
    return saved, gone


def write_state(path: Path, saved: list[Saved], host: Host, targets: dict[int, str] | None = None) -> None:
    """Write the state file atomically before any IRQ is touched, never over an existing one.

    Under the root (the default place), it is created beneath the root's handle with no link
    followed on the way (a linked var/lib/numatune in a saved root is refused: exit 3); elsewhere
    (--save FILE) through numatune.system.outfile. It records the root, so `irq restore FILE` puts back
    the same root whatever --root says.
    """
    doc = envelope(
        "irq-state",
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        source=host.label,
        root=root_of(host),
        irqs=[
            {
                "irq": s.irq,
                "label": s.label,
                "smp_affinity_list": s.smp_affinity_list,
                "smp_affinity": s.smp_affinity,
                **({"planned": targets[s.irq]} if targets and s.irq in targets else {}),
            }
            for s in saved
        ],
    )
    data = (dumps(doc) + "\n").encode()
    where = os.path.abspath(path)
    top = host.real_path("/").rstrip("/")
    if where.startswith(top + "/") and where.startswith(host.real_path(STATE_DIR) + "/"):
        host.create_file(where[len(top):], data)
        return
    from numatune.system.outfile import write_file

    if os.path.lexists(where):
        raise InputError(f"state file {path} already exists: it may hold an earlier original state",
                         hint="pass another --save FILE (or restore that one first)")
    write_file(where, data, replace=False)


def read_state(path: str | os.PathLike[str]) -> list[Saved]:
    """Load a state file written by `irq apply`; one clear error for anything else."""
    return state_of(path)[1]


def state_of(path: str | os.PathLike[str]) -> tuple[str | None, list[Saved]]:
    """(the root the state file records, or None for files from before roots were recorded; its IRQs). Every
    field is read through model.document and each affinity parsed now, not mid-restore: anything wrong is
    InputError naming the file and the field, before anything is written."""
    doc = _document(path, "irq-state", "irqs", "state file", "a numatune IRQ state file")
    root = doc.str("root")
    if root is not None and not root.startswith("/"):
        doc.fail(f"{root[:80]!r} is not an absolute path", "root")
    out = []
    for entry in doc.records("irqs"):
        saved = Saved(_irq_number(entry), entry.str("smp_affinity_list"), entry.str("smp_affinity"),
                      entry.text("label"))
        # what restore will write: each form a string the parser takes (checked now, not mid-restore)
        _cpus(entry, "smp_affinity_list", parse_cpulist)
        _cpus(entry, "smp_affinity", parse_cpumask)
        out.append(saved)
    return root, out


def _cpus(entry: Doc, key: str, parse: Callable[[str], frozenset[int]]) -> frozenset[int] | None:
    """The CPUs of ENTRY's KEY (a CPU list or mask as the kernel writes it), None when absent; InputError naming
    the field when it is not one (`0-4000000000` is refused by the parser's bounds, not expanded)."""
    text = entry.str(key)
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        entry.fail(f"{text[:40]!r} is not a CPU {'mask' if key == 'smp_affinity' else 'list'} ({exc})", key)
    raise AssertionError  # unreachable: fail() raises


def _irq_number(entry: Doc) -> int:
    """An IRQ number as numatune writes it in a plan or state file: a JSON integer (a digit string taken too),
    never a bool or a float; InputError naming the field otherwise."""
    value = entry.scalar("irq")
    if isinstance(value, str) and (number := maybe_int(value, entry.where("irq"))) is not None \
            and 0 <= number < 1 << 32:
        return number
    return entry.int("irq", 0, (1 << 32) - 1, required=True)


def _document(path: str | os.PathLike[str], kind: str, key: str, what: str, written_by: str) -> Doc:
    """A numatune JSON document of this kind with a list `key`, read from a file (model.document's view, naming
    the file); one clear error otherwise."""
    from numatune.system.infile import load_document, read_text

    text = read_text(path, what)
    doc = load_document(text, f"{what} {path}")
    if not is_document(doc, kind) or not isinstance(doc.get(key), list):
        raise InputError(f"{path} is not {written_by} (schema {SCHEMAS[kind]})")
    return Doc(doc, os.fspath(path))


def _cpus_of(text: str, file: str) -> frozenset[int]:
    return parse_cpumask(text) if file == "smp_affinity" else parse_cpulist(text)


def _read_cpus(host: Host, irq: int, file: str) -> frozenset[int] | None:
    raw = _read_raw(host, irq_path(irq, file))
    if raw is None:
        return None
    try:
        return _cpus_of(raw, file)
    except ValueError:
        return None


def run_changes(
    host: Host,
    changes: list[Change],
    *,
    state_path: Path | None = None,
    writer: Writer | None = None,
    dry_run: bool = False,
) -> ApplyResult:
    """Apply `changes` all or nothing. `writer` replaces Host.write_text (tests inject faults with it)."""
    write = writer or host.write_text
    result = ApplyResult(root_of(host))
    saved, gone = snapshot(host, [(c.irq, c.label) for c in changes])
    result.skipped += gone
    by_irq = {s.irq: s for s in saved}
    todo = [c for c in changes if c.irq in by_irq]
    if dry_run:
        result.planned = todo
        return result
    if state_path is not None:
        write_state(state_path, saved, host, {c.irq: c.text.strip() for c in todo})
        result.state_file = os.path.abspath(state_path)
    touched: list[Change] = []
    try:
        _write_all(host, todo, by_irq, write, touched, result)
    except KeyboardInterrupt:  # Ctrl-C between or during the writes: every IRQ as it was, then exit 130
        _put_back(host, touched, by_irq, write, quiet=True)
        raise
    return result


def _write_all(host: Host, todo: list[Change], by_irq: dict[int, Saved], write: Writer, touched: list[Change],
               result: ApplyResult) -> None:
    """Write and verify each change in turn; `touched` gets each change before it is written (an interrupt's
    rollback puts back all of them: a file still as saved is left alone)."""
    changed: list[Change] = []
    for change in todo:
        before = by_irq[change.irq]
        if getattr(before, change.file) is None and before.smp_affinity is not None:
            # A kernel (or tree) without smp_affinity_list: write the hex mask instead.
            text = format_cpumask(change.expect) + "\n"
            change = Change(change.irq, text, change.expect, "smp_affinity", change.label)
        current = getattr(before, change.file)
        if current is not None and _same(current, change):
            result.unchanged.append(change.irq)
            continue
        logical = irq_path(change.irq, change.file)
        touched.append(change)
        try:
            write(logical, change.text)
        except OSError as exc:
            if exc.errno == errno.EIO:
                result.skipped.append((change.irq, "kernel-managed (write refused with EIO)"))
                _put_back(host, [change], by_irq, write, quiet=True)
                continue
            if exc.errno == errno.ENOENT or not host.exists(f"/proc/irq/{change.irq}"):
                result.skipped.append((change.irq, "vanished between read and write"))
                continue
            _fail(host, changed + [change], by_irq, write, change,
                  f"writing {logical}: {exc.strerror or exc}", result.state_file)
        got = _read_cpus(host, change.irq, change.file)
        if got is None and not host.exists(f"/proc/irq/{change.irq}"):
            result.skipped.append((change.irq, "vanished right after the write"))
            continue
        if got != change.expect:
            _fail(host, changed + [change], by_irq, write, change,
                  f"{logical} reads back {format_cpulist(got or ())!r}, expected {format_cpulist(change.expect)!r}",
                  result.state_file)
        changed.append(change)
        result.applied.append(change.irq)


def _same(current: str, change: Change) -> bool:
    try:
        return _cpus_of(current, change.file) == change.expect
    except ValueError:
        return False


def _fail(host: Host, changed: list[Change], by_irq: dict[int, Saved], write: Writer, failed: Change,
          why: str, state_file: str | None) -> None:
    problems = _put_back(host, changed, by_irq, write)
    done = len(changed) - 1
    if problems:
        raise ApplyError(
            f"IRQ affinity write failed at IRQ {failed.irq} ({why}); rollback incomplete: " + "; ".join(problems),
            hint=f"run `{undo_command(state_file)}`" if state_file else "check /proc/irq by hand",
        )
    raise ApplyError(
        f"IRQ affinity write failed at IRQ {failed.irq} ({why}); rolled back the {done} IRQs already changed: "
        "every affinity is as before",
        hint=f"state saved in {state_file}" if state_file else None,
    )


def _put_back(host: Host, changed: list[Change], by_irq: dict[int, Saved], write: Writer,
              quiet: bool = False) -> list[str]:
    """Rewrite the saved text of every changed file, newest first; return what could not be restored."""
    problems: list[str] = []
    for change in reversed(changed):
        saved = getattr(by_irq[change.irq], change.file)
        logical = irq_path(change.irq, change.file)
        if saved is None:
            continue
        now = _read_raw(host, logical)
        if now == saved:
            continue
        if now is None and not host.exists(f"/proc/irq/{change.irq}"):
            continue  # gone: nothing left to restore
        try:
            write(logical, saved)
        except OSError as exc:
            if not quiet:
                problems.append(f"IRQ {change.irq}: {exc.strerror or exc}")
            continue
        back = _read_raw(host, logical)
        mismatch = back != saved and _read_cpus(host, change.irq, change.file) != _cpus_of(saved, change.file)
        if mismatch and not quiet:
            problems.append(f"IRQ {change.irq}: reads {back!r} after restoring {saved!r}")
    return problems


def read_plan(path: str | os.PathLike[str]) -> list[Change]:
    """The writes of a plan file written by `irq plan --json`; one clear error naming the field otherwise."""
    out = []
    doc = _document(path, "irq-plan", "entries", "plan file", "a plan written by `numatune irq plan --json`")
    for e in doc.records("entries"):
        irq, action = _irq_number(e), e.text("action")
        if action == "set" and e.scalar("target"):
            target = _cpus(e, "target", parse_cpulist)
            out.append(Change(irq, format_cpulist(target) + "\n", target, "smp_affinity_list", e.text("label")))
    return out


def restore_changes(saved: list[Saved]) -> list[Change]:
    """The writes that put a state file back: the list form when saved, else the hex mask."""
    out = []
    for s in saved:
        if s.smp_affinity_list is not None and s.smp_affinity_list.strip():
            out.append(Change(s.irq, s.smp_affinity_list, parse_cpulist(s.smp_affinity_list), "smp_affinity_list",
                              s.label))
        elif s.smp_affinity is not None and s.smp_affinity.strip():
            out.append(Change(s.irq, s.smp_affinity, parse_cpumask(s.smp_affinity), "smp_affinity", s.label))
    return out


def plan_changes(entries: Iterable) -> list[Change]:  # noqa: ANN001 - PlannedIrq, kept import-light
    """The writes for a plan's `set` entries."""
    return [
        Change(e.irq, format_cpulist(e.target) + "\n", frozenset(e.target), "smp_affinity_list", e.label)
        for e in entries
        if e.action == "set" and e.target
    ]
