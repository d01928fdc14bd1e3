"""attention_lab.measure.memory: byte arithmetic, the exact CPU peak meter (and its CUDA twin), the memory report."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from attention_lab.measure.cost import attention_memory_bytes
from attention_lab.measure.memory import format_bytes, measure_peak_memory
from attention_lab.measure.memory_report import available_memory_bytes, memory_report

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here: the CUDA branch runs only on a machine with a GPU")
FLOAT32 = 4


def naive_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (b, h, i, j), kept alive as a local
    weights = scores.softmax(dim=-1)  # (b, h, i, j), lives together with scores
    return weights @ v  # (b, h, i, d)


def naive_attention_one_expression(q, k, v):
    return (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1) @ v  # (b, h, i, d)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(260 * 2**20) == "260.00 MiB"
    assert format_bytes(3 * 2**30) == "3.00 GiB"


# ---- measure_peak_memory on the CPU: exact ----


def assert_no_measurement_left_open():
    """No profiler runs now, and one more measurement is exact and leaves none running: a meter that a failed or
    nested measurement left open would restart the profiler when the next measurement ends."""
    assert not torch.autograd.profiler._is_profiler_enabled
    assert measure_peak_memory(torch.empty, 10).peak_bytes == 40
    assert not torch.autograd.profiler._is_profiler_enabled


def test_one_tensor():
    r = measure_peak_memory(torch.empty, 1000, device="cpu")
    assert r.peak_bytes == r.retained_bytes == 1000 * FLOAT32
    assert r.result.shape == (1000,)
    assert r.device == torch.device("cpu")


def test_two_live_tensors():
    def two():
        a = torch.empty(1000)
        b = torch.empty(300, dtype=torch.float64)
        return a, b

    r = measure_peak_memory(two, device="cpu")
    assert r.peak_bytes == r.retained_bytes == 1000 * 4 + 300 * 8


def test_a_temporary_freed_inside_counts_at_its_peak_only():
    def with_temporary():
        a = torch.empty(1000)  # 4000 B
        b = torch.empty(500)  # 2000 B: 6000 B live
        del a  # 2000 B live
        c = torch.empty(2000)  # 8000 B more: 10000 B live, the peak
        del c
        return b

    r = measure_peak_memory(with_temporary, device="cpu")
    assert r.peak_bytes == 10_000
    assert r.retained_bytes == 2000


def test_nothing_allocated_gives_zero():
    r = measure_peak_memory(lambda: 3, device="cpu")
    assert (r.peak_bytes, r.retained_bytes, r.result) == (0, 0, 3)


@pytest.mark.parametrize(("n", "heads", "d"), [(1, 1, 4), (7, 3, 5), (64, 2, 8), (129, 4, 16), (257, 1, 4)])
def test_naive_attention_peak_is_exact(n, heads, d):
    q, k, v = torch.randn(3, 2, heads, n, d).unbind(0)  # (b, h, i, d) each
    m = attention_memory_bytes(n, head_dim=d, num_heads=heads, batch=2)
    r = measure_peak_memory(naive_attention, q, k, v)
    assert r.peak_bytes == m.scores + m.weights + m.output  # two n x n matrices alive together + the output
    assert r.retained_bytes == m.output
    torch.testing.assert_close(r.result, F.scaled_dot_product_attention(q, k, v))


def test_naive_attention_at_2048_tokens_8_heads_holds_two_matrices_and_the_output():
    q, k, v = torch.randn(3, 1, 8, 2048, 64).unbind(0)  # (b, h, i, d) each
    assert measure_peak_memory(naive_attention, q, k, v).peak_bytes == 260 * 2**20
    # One expression frees the scores before the output exists: one matrix less... plus a few bytes of scalars.
    one = measure_peak_memory(naive_attention_one_expression, q, k, v).peak_bytes
    assert 256 * 2**20 <= one < 256 * 2**20 + 1024
    assert format_bytes(one) == "256.00 MiB"


def test_memory_freed_during_fn_that_was_allocated_in_an_earlier_measurement_is_counted():
    kept = [measure_peak_memory(torch.empty, 1000).result]  # 4000 B, allocated under the profiler

    def free_then_allocate():
        kept.clear()  # frees the 4000 B
        return torch.empty(250)  # 1000 B

    r = measure_peak_memory(free_then_allocate, device="cpu")
    assert r.retained_bytes == 1000 - 4000
    assert r.peak_bytes == 0  # never above the starting level


def test_repeated_use_gives_the_same_answer():
    q, k, v = torch.randn(3, 1, 2, 50, 8).unbind(0)
    peaks = [measure_peak_memory(naive_attention, q, k, v).peak_bytes for _ in range(3)]
    assert peaks[0] == peaks[1] == peaks[2] > 0


def test_nested_measurements_are_both_exact():
    def outer():
        a = torch.empty(1000)  # 4000 B
        inner = measure_peak_memory(lambda: torch.empty(500))  # 2000 B, kept in inner.result
        b = torch.empty(250)  # 1000 B: 7000 B live, the outer peak
        del a, b
        return inner

    r = measure_peak_memory(outer, device="cpu")
    assert r.result.peak_bytes == r.result.retained_bytes == 2000
    assert r.peak_bytes == 7000
    assert r.retained_bytes == 2000
    assert_no_measurement_left_open()


def test_peak_inside_a_nested_measurement_counts_for_the_outer_one():
    def outer():
        inner = measure_peak_memory(lambda: torch.empty(10_000).sum())  # 40000 B peak, nothing kept but a scalar
        return inner.peak_bytes

    r = measure_peak_memory(outer, device="cpu")
    assert r.result == 40_000 + 4
    assert r.peak_bytes == 40_000 + 4


def test_an_exception_in_fn_propagates_and_stops_the_profiler():
    def boom():
        _ = torch.empty(100)
        raise RuntimeError("boom from fn")

    with pytest.raises(RuntimeError, match="boom from fn"):
        measure_peak_memory(boom, device="cpu")
    assert_no_measurement_left_open()


def test_an_exception_in_a_nested_fn_leaves_the_outer_measurement_running():
    def outer():
        with pytest.raises(ValueError, match="inner"):
            measure_peak_memory(lambda: (torch.empty(100), int("inner")))
        return torch.empty(50)

    r = measure_peak_memory(outer, device="cpu")
    assert r.peak_bytes == 400 and r.retained_bytes == 200


def test_a_running_user_profiler_is_a_clear_error_and_is_left_running():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with pytest.raises(RuntimeError, match=r"measure_peak_memory\(\): expected no other torch profiler"):
            measure_peak_memory(torch.empty, 10, device="cpu")
        torch.ones(3).sum()
    assert any(e.name == "aten::sum" for e in prof.events())  # the learner's profile still recorded
    assert_no_measurement_left_open()


def test_profiler_chatter_is_filtered_but_other_stderr_passes(capfd):
    def talk():
        os.write(2, b"a line fn wrote to stderr\n")
        return torch.empty(4)

    measure_peak_memory(talk, device="cpu")
    err = capfd.readouterr().err
    assert "a line fn wrote to stderr" in err
    assert "profiler_start" not in err and "SyncActivityProfilerHandler" not in err


def test_device_is_inferred_from_tensor_arguments():
    x = torch.ones(3)
    assert measure_peak_memory(torch.mul, x, 2).device == torch.device("cpu")
    assert measure_peak_memory(lambda t: t * 2, t=x).device == torch.device("cpu")


@pytest.mark.parametrize(("fn", "kwargs", "error", "match"), [
    (torch.empty(3), {}, TypeError, r"measure_peak_memory\(\): fn must be callable"),
    (None, {}, TypeError, "fn must be callable"),
    (lambda: 0, {"device": "meta"}, ValueError, "expected a 'cpu' or 'cuda' device, got meta"),
    (lambda: 0, {"device": 3.5}, TypeError, "device must be a torch.device"),
])
def test_measure_rejects_bad_input(fn, kwargs, error, match):
    with pytest.raises(error, match=match):
        measure_peak_memory(fn, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error a CPU-only machine gives")
def test_asking_for_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match=r"^measure_peak_memory\(\): device must be a device this machine has \(cpu\), "
                                         r"got 'cuda'; pass one of 'cpu'"):
        measure_peak_memory(lambda: 0, device="cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        memory_report("cuda")


# ---- CUDA ----


@needs_cuda
def test_cuda_peak_of_naive_attention():
    q, k, v = torch.randn(3, 2, 4, 256, 32, device="cuda").unbind(0)
    m = attention_memory_bytes(256, head_dim=32, num_heads=4, batch=2)
    r = measure_peak_memory(naive_attention, q, k, v)
    assert r.device.type == "cuda"
    # the caching allocator rounds block sizes up (to 512 B); n x n matrices here are exact multiples
    assert m.naive_peak <= r.peak_bytes < m.naive_peak + 64 * 1024
    assert r.retained_bytes == m.output


@needs_cuda
def test_cuda_nested_and_exception():
    def outer():
        a = torch.empty(2**20, device="cuda")  # 4 MiB
        inner = measure_peak_memory(lambda: torch.empty(2**19, device="cuda"))  # 2 MiB
        del a
        return inner

    r = measure_peak_memory(outer, device="cuda")
    assert r.result.peak_bytes == 2 * 2**20
    assert r.peak_bytes == 6 * 2**20

    def boom():
        _ = torch.empty(100, device="cuda")
        raise RuntimeError("boom on cuda")

    with pytest.raises(RuntimeError, match="boom on cuda"):
        measure_peak_memory(boom, device="cuda")
    assert measure_peak_memory(torch.empty, 2**18, device="cuda").peak_bytes == 2**20


@needs_cuda
def test_cuda_memory_report_and_free_memory():
    text = memory_report("cuda")
    assert "allocated by tensors" in text and "reserved by the caching allocator" in text
    assert available_memory_bytes("cuda") > 0


# ---- the report and free memory ----


def test_cpu_memory_report_says_what_it_can():
    text = memory_report("cpu")
    assert text.startswith("device: cpu")
    assert "system memory available / total" in text
    assert "measure_peak_memory" in text


def test_available_memory_is_plausible():
    free = available_memory_bytes("cpu")
    assert 0 < free < 2**50
    with pytest.raises(ValueError, match="expected a 'cpu' or 'cuda' device"):
        available_memory_bytes("meta")
