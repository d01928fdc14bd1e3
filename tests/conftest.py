"""Shared test settings: one thread per process, plots render off screen, and every test starts from the same seed."""

import os

import matplotlib
import pytest
import torch

matplotlib.use("Agg")  # figures in unit tests only; notebooks keep the inline backend (never set MPLBACKEND)


def pytest_configure(config):
    """One thread per process (unless OMP_NUM_THREADS says otherwise): `make test` runs two test processes and the
    notebook kernels they start on two cores, and the tests' tensors are tiny, so a second thread per process only
    waits for a core (80 training steps of lesson 09's model: 1.3 s on one thread, 11.7 s on two, with other work
    on the machine). The kernels that nbval and the browser test start inherit the variable; `make test-numerics`
    shows that what the lessons print does not depend on it."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


# Under pytest-xdist the workers have no terminal; a worker may hand back sections for the end of the run as
# config.workeroutput["terminal_sections"] = [[title, line, ...], ...] (tests/browser/conftest.py does).
_WORKER_SECTIONS: list[list[str]] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_SECTIONS.extend(getattr(node, "workeroutput", {}).get("terminal_sections", []))


def pytest_terminal_summary(terminalreporter):
    for title, *lines in _WORKER_SECTIONS:
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
