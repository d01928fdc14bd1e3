"""Where the lessons run: the device, the random seed, and a summary of the environment."""

from __future__ import annotations

import os
import platform
import random
import sys

import torch

from ._validation import check_seed

__all__ = ["device", "seed_everything", "environment", "machine_label"]


def device() -> torch.device:
    """The best device here: CUDA, then Apple's MPS, then the CPU. Every lesson also runs on the CPU alone."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's (when installed) and PyTorch's generators (CPU and every GPU) with ``seed``."""
    check_seed("seed_everything", seed)
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    try:
        import numpy as np
    except ImportError:  # numpy is optional for the library
        return
    np.random.seed(seed % 2**32)  # noqa: NPY002 (learners call the legacy global API; seed it too)


def environment() -> dict[str, str]:
    """Versions, device and thread count, as text: what a bug report or a timing needs next to it."""
    return {
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "device": str(device()),
        "cpu threads (torch)": str(torch.get_num_threads()),
    }


def machine_label(note: str = "") -> str:
    """What a benchmark's CSV says about the machine: the CPU's model name (from /proc/cpuinfo where the system has
    it, else what ``platform`` reports) and its logical core count, plus an optional note such as "busy".

    Shape: a string, e.g. ``"AMD EPYC, 2 logical cores (quiet)"``.
    """
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} logical cores" + (f" ({note})" if note else "")
