"""Which CUDA runtime pins a buffer (placement/pinning.cuda_register), with stand-ins for torch and cuda-python."""

from __future__ import annotations

import sys
import types

import pytest

from numatune.errors import Unsupported
from numatune.placement.pinning import cuda_register


def _cuda_python(monkeypatch, device_count):  # noqa: ANN001
    runtime = types.SimpleNamespace(cudaGetDeviceCount=lambda: device_count,
                                    cudaHostRegister=lambda addr, n, flags: (0,))
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = runtime
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)


def test_cuda_python_without_a_device_is_a_clear_no(monkeypatch):
    """torch's CUDA wheels install cuda-python: on a machine without GPU or driver it imports, and registering
    failed with "cudaErrorInsufficientDriver" (an error, not the "no CUDA here" answer) until the runtime was asked."""
    _cuda_python(monkeypatch, (35, None))  # cudaErrorInsufficientDriver, as cuda-python returns it there
    with pytest.raises(Unsupported, match=r"cannot pin: CUDA is not available.*cuda-python finds no CUDA device"):
        cuda_register()
    _cuda_python(monkeypatch, (0, 0))
    with pytest.raises(Unsupported, match="finds no CUDA device"):
        cuda_register()


def test_cuda_python_with_a_device_registers(monkeypatch):
    _cuda_python(monkeypatch, (0, 1))
    name, register = cuda_register()
    assert name == "cuda-python cudaHostRegister"
    register(4096, 4096)  # no error
