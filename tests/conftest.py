"""Shared test settings: plots render off screen, and every test starts from the same seed."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")  # figures in unit tests only; notebooks keep the inline backend (never set MPLBACKEND)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
