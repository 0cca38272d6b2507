"""numatune: see where a training job's threads, pages, GPUs, NICs and IRQs really sit, and fix it."""

__version__ = "0.1.0"
