"""Whether a CUDA runtime can be used for probe --gpu (cuda-python or torch built with CUDA)."""

from __future__ import annotations


def cuda_runtime() -> tuple[str | None, str]:
    """(name of a usable runtime, "") or (None, why not), without initialising a GPU context."""
    import importlib.util

    reasons = []
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch

            if torch.cuda.is_available():
                return "torch", ""
            reasons.append(f"torch {torch.__version__} sees no CUDA device")
        except Exception as exc:  # noqa: BLE001 - a broken torch install is a reason, not a crash
            reasons.append(f"torch failed to import ({type(exc).__name__})")
    else:
        reasons.append("torch is not installed")
    if importlib.util.find_spec("cuda") is None:
        reasons.append("cuda-python is not installed")
    else:
        reasons.append("cuda-python is installed but only torch is used for copies")
    return None, "no CUDA runtime importable: " + "; ".join(reasons)
