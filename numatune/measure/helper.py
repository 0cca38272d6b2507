"""The compiled pointer-chase helper: built on first use into a cache directory and loaded with ctypes.

Without a C compiler (or when the build fails) `load()` returns None with the reason, and probe says
latency (and the read-only loop) is unavailable; it never substitutes an interpreted estimate.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chase.c")
CFLAGS = ("-O2", "-fPIC", "-shared", "-fno-strict-aliasing")

_cache: dict[str, tuple[object | None, str]] = {}


def cache_dir() -> str:
    """$NUMATUNE_CACHE_DIR, else $XDG_CACHE_HOME/numatune, else ~/.cache/numatune."""
    explicit = os.environ.get("NUMATUNE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "numatune")


def find_compiler() -> str | None:
    """$CC when set (empty: none), else cc, gcc or clang on PATH."""
    from numatune.live.bind import which

    if "CC" in os.environ:
        cc = os.environ["CC"].strip()
        if not cc:
            return None
        return cc if "/" in cc and os.access(cc, os.X_OK) else which(cc)
    for name in ("cc", "gcc", "clang"):
        path = which(name)
        if path:
            return path
    return None


def _library_path(cc: str) -> str:
    with open(SOURCE, "rb") as fh:
        digest = hashlib.sha256(fh.read() + " ".join((cc, *CFLAGS)).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"chase-{os.uname().machine}-{digest}.so")


def build() -> tuple[str | None, str]:
    """(path of the shared library, "") or (None, why not). Reuses a cached build of the same source."""
    cc = find_compiler()
    if cc is None:
        return None, "no C compiler (cc, gcc or clang; or $CC) to build the pointer-chase helper"
    target = _library_path(cc)
    if os.path.exists(target):
        return target, ""
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".chase-", suffix=".so", dir=os.path.dirname(target))
        os.close(fd)
    except OSError as exc:
        return None, f"cannot write the helper to {os.path.dirname(target)}: {exc.strerror or exc}"
    try:
        done = subprocess.run([cc, *CFLAGS, "-o", tmp, SOURCE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        os.unlink(tmp)
        return None, f"{cc} failed to run: {exc}"
    if done.returncode != 0:
        os.unlink(tmp)
        first = (done.stderr.strip().splitlines() or ["no output"])[0]
        return None, f"{cc} could not build the helper: {first}"
    os.replace(tmp, target)
    return target, ""


def load() -> tuple[object | None, str]:
    """(ctypes library with typed nt_* functions, "") or (None, why not); built at most once per process."""
    key = cache_dir() + "|" + os.environ.get("CC", "\0")
    if key in _cache:
        return _cache[key]
    path, why = build()
    result: tuple[object | None, str] = (None, why)
    if path:
        import ctypes

        try:
            lib = ctypes.CDLL(path)
            lib.nt_version.restype = ctypes.c_int
            lib.nt_chase_init.restype = ctypes.c_size_t
            lib.nt_chase_init.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                          ctypes.c_uint64)
            lib.nt_chase.restype = ctypes.c_double
            lib.nt_chase.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p))
            lib.nt_read.restype = ctypes.c_double
            lib.nt_read.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64,
                                    ctypes.POINTER(ctypes.c_uint64))
            result = (lib, "")
        except (OSError, AttributeError) as exc:
            result = (None, f"cannot load the helper {path}: {exc}")
    _cache[key] = result
    return result
