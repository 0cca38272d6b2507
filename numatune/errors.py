"""Every exit code and error type of numatune, in one place (documented in man/numatune.1, EXIT STATUS).

A leaf module: stdlib only, so that any layer may raise these without pulling in click or rich.
"""

from __future__ import annotations

import errno as _errno

#: A write to a stream that fails for what it is connected to (/dev/full, a full disk or quota, a file size
#: limit, a terminal gone): the environment's doing, never a bug. (A broken pipe ends quietly, exit 0.)
STREAM_ERRNOS = frozenset({_errno.ENOSPC, _errno.EDQUOT, _errno.EFBIG, _errno.EIO})


class _Codes(type):
    """`for code in ExitCode` in declaration order, as over the IntEnum this replaced (`enum` pulls in
    functools and collections: ~10% of a `check`'s start-up)."""

    def __iter__(cls):  # noqa: ANN204
        return iter(v for k, v in cls.__dict__.items() if k.isupper())

    def __len__(cls) -> int:
        return sum(1 for _ in cls)


class ExitCode(metaclass=_Codes):
    """numatune's exit statuses (plain ints)."""

    OK = 0
    FINDINGS = 1  # `check` found problems at or above --fail-on; `diff` found differences
    USAGE = 2  # bad options or arguments (click's own code)
    INPUT = 3  # not a sysfs tree; a file unreadable or malformed
    PERMISSION = 4  # needs root, or another user's process
    PARTIAL = 5  # `irq apply`: some changes were refused and rolled back
    NO_PROCESS = 6  # `audit`: a PID does not exist or exited while being read
    UNSUPPORTED = 7  # the kernel, hardware or tool cannot do what was asked
    INTERNAL = 70  # a bug: one line, and --debug shows the traceback
    NOT_EXECUTABLE = 126  # `launch`: the command exists but cannot be executed (as shells do)
    NOT_FOUND = 127  # `launch`: the command is not found (as shells do)
    INTERRUPTED = 130


class NumatuneError(Exception):
    """An error the user can act on: one line, an optional hint, a distinct exit code."""

    exit_code: ExitCode = ExitCode.INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(NumatuneError):
    """A bad option value or combination, found after click parsed the command line: exit 2, as click's own."""

    exit_code = ExitCode.USAGE


class InputError(NumatuneError):
    exit_code = ExitCode.INPUT


class NotASysfsTree(InputError):
    pass


class ArchiveRefused(InputError):
    """A snapshot archive that would write outside its directory or past numatune's bounds."""


class ReadError(InputError):
    """A file that should be there could not be read."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path


class ParseError(InputError):
    """A file whose contents are not in the format the kernel writes."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed {path}: {reason}")
        self.path = path


class PermissionDenied(NumatuneError):
    exit_code = ExitCode.PERMISSION


class ProcessGone(NumatuneError):
    exit_code = ExitCode.NO_PROCESS


class Unsupported(NumatuneError):
    exit_code = ExitCode.UNSUPPORTED


class BindingError(Unsupported):
    """`launch`: a binding that cannot be honoured (no GPU, no usable CPU, unsupported policy).

    `--best-effort` turns it into a warning and an unbound run; audit, into a note (the resolver's errors).
    """


class ImpossibleRequest(BindingError):
    """`launch`: what the user asked cannot be on this machine (`--cpu-bind cores:N` or `--reserve-cores N` beyond
    the node's cores, a `--node` or `--gpu` the root does not have): exit 2 with the reason, as emit and irq plan
    refuse an impossible `--reserve-cores`; `--best-effort` still runs unbound, as for any binding it cannot
    honour, and `numatune.bind` reports it as one."""

    exit_code = ExitCode.USAGE


class PmuUnavailable(Unsupported):
    """Hardware counters cannot be opened; audit shows the message as a note and goes on without them."""


class CommandNotRunnable(NumatuneError):
    """`launch`: the command cannot be exec'd because it is not found (127, as shells do)."""

    exit_code = ExitCode.NOT_FOUND


class CommandNotExecutable(CommandNotRunnable):
    """`launch`: the command exists but exec failed (not executable, bad format): 126, as shells do."""

    exit_code = ExitCode.NOT_EXECUTABLE


class ApplyError(NumatuneError):
    exit_code = ExitCode.PARTIAL


def is_stream_failure(exc: BaseException) -> bool:
    """An OSError from writing standard output or error (no file name: a named file's is system.outfile's)."""
    return isinstance(exc, OSError) and exc.filename is None and exc.errno in STREAM_ERRNOS


#: numatune's dependencies (pyproject.toml [project] dependencies, held equal by tests/test_packaging.py): the module
#: each is imported as -> the distribution pip installs it from.
DEPENDENCIES = {"click": "click", "rich": "rich", "psutil": "psutil", "cpuinfo": "py-cpuinfo", "pyudev": "pyudev",
                "yaml": "pyyaml", "tomli": "tomli"}


MISSING_HINT = ("install numatune into this Python with its dependencies (pip install . in the checkout), or run "
                "the numatune of the environment it was installed into")


def _missing_dependency(exc: BaseException) -> str | None:
    """The message for a dependency this Python lacks (numatune run by a python it was not installed into)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    if top not in DEPENDENCIES:
        return None
    import sys

    return (f"the Python package {DEPENDENCIES[top]} (module {top}), one of numatune's dependencies, is not "
            f"installed for {sys.executable}")


def _environment(exc: BaseException) -> tuple[str, int] | None:
    """(message, code) of a failure that is the environment's doing, not numatune's (an OSError of the system, a
    dependency this Python lacks): None for any other."""
    missing = _missing_dependency(exc)
    if missing is not None:
        return missing, int(ExitCode.UNSUPPORTED)
    if is_stream_failure(exc):  # every named output is written by system.outfile, which names it
        return f"cannot write standard output: {exc.strerror}", int(ExitCode.INPUT)
    if isinstance(exc, OSError) and exc.errno in STREAM_ERRNOS:  # a full disk under a file, an EIO reading one
        return f"{exc.filename}: {exc.strerror}", int(ExitCode.INPUT)
    if isinstance(exc, PermissionError):  # a file or directory this user may not use
        where = f" ({exc.filename})" if exc.filename else ""
        return f"permission denied{where}: {exc.strerror}", int(ExitCode.PERMISSION)
    return None


def describe_failure(exc: BaseException) -> tuple[str, str | None, int]:
    """(one-line message, hint, exit code) for an exception that escaped a command.

    The single place that decides what a user sees: both the click CLI and the click-free entry
    point print exactly this (`numatune: error: <message>`, then `hint: <hint>`).
    """
    if isinstance(exc, NumatuneError):
        return exc.message, exc.hint, int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", None, int(ExitCode.INTERRUPTED)
    environment = _environment(exc)
    if environment is not None:
        hint = MISSING_HINT if isinstance(exc, ModuleNotFoundError) else None
        return environment[0], hint, environment[1]
    return (
        f"internal error: {type(exc).__name__}: {exc}",
        "this is a bug in numatune; rerun with --debug for the traceback and report it",
        int(ExitCode.INTERNAL),
    )
