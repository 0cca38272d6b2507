"""The one reader of the files a user names as input: a policy, an `irq` plan or state file, the
scheduler configurations `check` reads, `plan-memory --probe` results.

A regular file only, read whole up to a bound: a FIFO, a device such as /dev/zero or a directory is
one line and exit 3 (InputError), never a hang or gigabytes of memory, and it is never opened (the
kind is looked at first). A leaf module: stdlib only.
"""

from __future__ import annotations

import os
import stat

from numatune.errors import InputError

MAX_INPUT_BYTES = 64 << 20  # a state file of 100,000 IRQs is ~20 MB; a policy or config a few KB


def read_input(path: str | os.PathLike[str], what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the file `what` (e.g. "state file") at `path`; InputError for anything else."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise InputError(f"{what} {name} is not a regular file")
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} {name} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the look
            raise InputError(f"{what} {name} is not a regular file")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:
                raise InputError(f"{what} {name} is larger than {limit >> 20} MiB, which no {what} is")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
