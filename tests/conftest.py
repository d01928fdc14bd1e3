"""Shared test settings: plots render off screen, and every test starts from the same seed."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")  # figures in unit tests only; notebooks keep the inline backend (never set MPLBACKEND)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


# Tolerances from PyTorch's own attention tests (see CONTRIBUTING.md).
TOL = {
    torch.float64: dict(atol=1e-7, rtol=1e-7),
    torch.float32: dict(atol=1e-5, rtol=1.3e-6),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-3, rtol=1.6e-2),
}
