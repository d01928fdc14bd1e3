"""Shared test settings: plots render off screen, and every test starts from the same seed."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")  # figures in unit tests only; notebooks keep the inline backend (never set MPLBACKEND)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread (a second one only adds synchronisation); restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
