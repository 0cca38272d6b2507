"""The process entry point (the `numatune` console script and `python -m numatune`).

Scripts and fleets run the machine-readable reports most (`srun numatune inspect --json` on every
node, `audit PID --json` from a job's epilogue), so exactly these command lines run without
importing click, which is most of numatune's start-up:

    numatune [--root R] [--no-color] [--debug] inspect --json
    numatune [--root R] [--no-color] [--debug] irq --json
    numatune [--root R] [--no-color] [--debug] audit PID [PID...] --json
    numatune [--root R] [--no-color] [--debug] inspect
    numatune [--root R] [--no-color] [--debug] check [--json]
    numatune [--no-color] [--debug] diff A B [--json]

(`--format json`, `-f json` and `--format=json` too; `check` and `diff` also in their default text
format, which is plain text built without click or rich; `inspect`'s tables need rich only on a
terminal or when a cell must wrap). Any other command line goes to the click CLI,
which parses, validates and explains as usual. Both paths build the report with the same library
calls (`numatune.commands.inspect`) and report errors through the same `describe_failure`; a test checks
that they print the same bytes and exit with the same codes.
"""

from __future__ import annotations

import gc
import os
import sys

from numatune.model._record import record

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

JSON_FLAGS = (("--json",), ("--format", "json"), ("-f", "json"), ("--format=json",))


@record
class FastCall:
    command: str  # inspect | irq | audit | check | diff
    root: str
    debug: bool
    pids: tuple[int, ...] = ()
    args: tuple[str, ...] = ()  # diff: A and B
    fmt: str = "json"  # json | text
    color: bool = True  # --no-color
    origin: str | None = None  # "NUMATUNE_ROOT" when the root came from there (its errors say so)


def match_fast_path(args: Sequence[str], environ: Mapping[str, str]) -> FastCall | None:
    """The fast call this command line asks for, or None to let click handle it."""
    found = {"root": environ.get("NUMATUNE_ROOT") or "/", "debug": False, "color": True}
    before = _take_global_options(args, found)
    if before is None or not before:
        return None
    after = _take_global_options(before[1:], found, anywhere=True)  # as click: global options after the command too
    if after is None:
        return None
    root, debug, color = found["root"], found["debug"], found["color"]
    origin = "NUMATUNE_ROOT" if environ.get("NUMATUNE_ROOT") and not found.get("given") else None
    command, rest = before[0], tuple(after)
    if command == "inspect" and rest == ():
        return FastCall(command, root, debug, fmt="text", color=color, origin=origin)
    if command in ("inspect", "irq"):
        return FastCall(command, root, debug, color=color, origin=origin) if rest in JSON_FLAGS else None
    if command == "check" and (rest == () or rest in JSON_FLAGS):
        return FastCall(command, root, debug, fmt="json" if rest else "text", color=color, origin=origin)
    if command == "diff" and len(rest) >= 2 and not any(a.startswith("-") for a in rest[:2]) and (
            len(rest) == 2 or rest[2:] in JSON_FLAGS):
        return FastCall(command, root, debug, args=rest[:2], fmt="json" if rest[2:] else "text", color=color,
                        origin=origin)
    if command == "audit":
        from numatune.numbers import PID_MAX  # above it (a usage error, exit 2) click says so

        for flag in JSON_FLAGS:
            n = len(flag)
            for at in range(len(rest) - n + 1):
                if rest[at:at + n] == flag:
                    pids = rest[:at] + rest[at + n:]
                    if pids and all(p.isascii() and p.isdigit() and len(p) <= 9 and 0 < int(p) < PID_MAX
                                    for p in pids):
                        return FastCall(command, root, debug, tuple(map(int, pids)), color=color, origin=origin)
                    return None
    return None


def _take_global_options(args: Sequence[str], found: dict, *, anywhere: bool = False) -> list[str] | None:
    """`args` without the global options (--root R, --root=R, --no-color, --debug) they start with (or, with
    `anywhere`, hold anywhere: after the command), which go into `found`; None where click must decide
    (`--root` without its value, a `--`). The value of -f/--format is never taken for a global option."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--root":
            if i + 1 >= len(args):
                return None
            found["root"], found["given"], i = args[i + 1], True, i + 2
        elif arg.startswith("--root="):
            found["root"], found["given"], i = arg[len("--root="):], True, i + 1
        elif arg == "--no-color":
            found["color"], i = False, i + 1
        elif arg == "--debug":
            found["debug"], i = True, i + 1
        elif not anywhere:
            return [*args[i:]]
        elif arg == "--":
            return None
        else:
            kept += args[i:i + 2] if arg in ("-f", "--format") else [arg]
            i += 2 if arg in ("-f", "--format") else 1
    return kept


def run(argv: Sequence[str] | None = None) -> None:
    """The process's entry. A Ctrl-C before a command's own error boundary (while click or a command module
    is imported) is the same one line and exit 130, not a traceback."""
    try:
        _run(argv)
    except KeyboardInterrupt as exc:
        from numatune.render.printable import say_failure

        sys.exit(say_failure(exc))


def _run(argv: Sequence[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the process's own streams: a caller passing argv keeps its own
        from numatune.render.printable import never_fail_to_encode

        never_fail_to_encode()
    call = match_fast_path(args, os.environ)
    if call is not None and argv is None:
        # The process is one fast report over a bounded tree: its thousands of records are acyclic
        # tuples, so the cyclic collector's passes (~3% of `check`) find nothing; reference counts free
        # memory. Only for the process's own command line: a caller passing argv keeps its collector.
        gc.disable()
    if call is None:
        from numatune.cli import main

        main.main(args=args, prog_name="numatune")
        return
    sys.exit(_run_fast(call))


def _run_fast(call: FastCall) -> int:
    """The fast report and its error boundary, as NumatuneGroup.invoke's (what was printed is flushed inside it)."""
    from numatune.errors import ExitCode, describe_failure

    try:
        code = _report(call)
        sys.stdout.flush()
        return code
    except BrokenPipeError as exc:
        from numatune.system.outfile import drop_stdout

        drop_stdout(exc)
        sys.stderr.close()
        return 0
    except (Exception, KeyboardInterrupt) as exc:
        if call.debug and describe_failure(exc)[2] == ExitCode.INTERNAL:
            raise
        from numatune.render.printable import say_failure
        from numatune.system.outfile import drop_stdout

        drop_stdout(exc)
        return say_failure(exc)


def _report(call: FastCall) -> int:
    from numatune.errors import ExitCode
    from numatune.render.printable import echo

    if call.command == "diff":
        from numatune.commands.diff import diff_report

        text, differ = diff_report(*call.args, fmt=call.fmt)
        echo(text)
        return int(ExitCode.FINDINGS) if differ else 0
    from numatune.commands import inspect as reports
    from numatune.system.host import Host

    host = Host.open(call.root, origin=call.origin)
    if call.command == "check":
        from numatune.commands.check import check_report

        text, failed, skipped = check_report(host, call.root, fmt=call.fmt)
        echo(text)
        if call.fmt == "text":
            echo("".join(f"numatune: skipped {what}: {why}\n" for what, why in skipped), err=True)
        return int(ExitCode.FINDINGS) if failed else 0
    if call.command == "inspect" and call.fmt == "text":
        from numatune.readers.pci import pci_ids_from_env
        from numatune.render.inspect_text import print_inspect

        topo, matrix, findings = reports.inspect_report(host, pci_ids_from_env())
        print_inspect(topo, matrix, findings, call.color)
        echo("".join(f"numatune: skipped {s.subject}: {s.reason}\n" for s in topo.skipped), err=True)
        return 0
    if call.command == "inspect":
        from numatune.readers.pci import pci_ids_from_env

        text = reports.inspect_json(host, pci_ids_from_env())
    elif call.command == "irq":
        text = reports.irq_json(host)
    else:
        from numatune.commands.audit import audit_json

        text = audit_json(host, call.pids)
    echo(text + "\n")
    return 0
