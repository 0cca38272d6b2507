"""numatune: see where a training job's threads, pages, GPUs, NICs and IRQs really sit, and fix it.

`numatune.bind()` binds the running process from inside (every thread, the memory policy, the pages it
already touched): see numatune.placement.binding. `numatune.pinned_host_memory()` lists the pinned host ranges the
CUDA runtime reports in this process and their nodes, `numatune.pinned_host_chunks()` the chunks audit counts
from outside with the allocations each serves (numatune.placement.hostpinned). They load on first use, so
`import numatune` stays the version string.
"""

__version__ = "0.1.0"

# The in-process binding API and the pinned-memory list, re-exported lazily (PEP 562) from the placement layer:
# the one exception to "the package face imports nothing" (tests/test_layers.py: FACE_EXPORTS).
_BINDING = ("bind", "bind_worker", "bind_thread", "bind_actor", "last_report", "BindReport", "BindWorker")
_HOSTPINNED = ("pinned_host_memory", "PinnedRange", "pinned_host_chunks", "PinnedChunk", "describe_chunks")


def __getattr__(name: str):  # noqa: ANN202 - lazy: numatune.bind costs nothing until it is used
    if name in _BINDING:
        from numatune.placement import binding

        return getattr(binding, name)
    if name in _HOSTPINNED:
        from numatune.placement import hostpinned

        return getattr(hostpinned, name)
    raise AttributeError(f"module 'numatune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_BINDING, *_HOSTPINNED])
