"""device(), seed_everything(), environment(), and that `import attention_lab` stays light."""

import random
import subprocess
import sys

import pytest
import torch

import attention_lab as al


def test_device_is_cpu_without_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert al.device() == torch.device("cpu")


def test_device_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert al.device().type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert al.device().type == "mps"


def test_seed_everything_repeats_python_and_torch():
    al.seed_everything(123)
    first = (random.random(), torch.rand(3))
    al.seed_everything(123)
    second = (random.random(), torch.rand(3))
    assert first[0] == second[0] and torch.equal(first[1], second[1])
    al.seed_everything(124)
    assert not torch.equal(torch.rand(3), first[1])


@pytest.mark.parametrize("seed,error", [(-1, ValueError), (1.5, TypeError), ("0", TypeError)])
def test_seed_everything_bad_input(seed, error):
    with pytest.raises(error, match=r"seed_everything\(\): seed must be"):
        al.seed_everything(seed)


def test_environment_reports_versions():
    env = al.environment()
    assert env["torch"] == torch.__version__
    assert env["device"] in {"cpu", "cuda", "mps"}
    assert int(env["cpu threads (torch)"]) >= 1


@pytest.mark.slow
def test_import_does_not_load_matplotlib():
    code = "import sys, attention_lab; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_machine_label_names_the_cpu_and_its_cores_and_keeps_a_note():
    import os

    from attention_lab.runtime import machine_label

    plain, noted = machine_label(), machine_label("busy")
    assert plain.endswith(f", {os.cpu_count()} logical cores") and plain.split(",")[0].strip()
    assert noted == plain + " (busy)"
