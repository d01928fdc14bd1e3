"""attention_lab.measure.bench: FLOP counts, the timing helper, the sweep, its CSV and its command.

No assertion here depends on how fast this machine is: timings are only checked to be positive and consistent.
"""

from __future__ import annotations

import csv
import functools

import pytest
import torch
import torch.nn.functional as F

from attention_lab.measure import bench
from attention_lab.measure.bench import (
    BenchRow,
    Timing,
    attention_flops,
    attention_variants,
    format_table,
    loglog_slope,
    matmul_peak_gflops,
    read_csv,
    run_sweep,
    time_function,
    write_csv,
)
from attention_lab.measure.memory import attention_memory_bytes


def test_attention_flops_by_hand():
    assert attention_flops(512, head_dim=64) == 2 * (2 * 512 * 512 * 64)  # Q K^T and weights @ V
    assert attention_flops(3, 5, head_dim=7, num_heads=2, batch=4) == 4 * 4 * 2 * 3 * 5 * 7


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_queries": 0, "head_dim": 4}, "n_queries must be >= 1"),
    ({"n_queries": 4, "n_keys": -1, "head_dim": 4}, "n_keys must be >= 1"),
    ({"n_queries": 4, "head_dim": 4, "num_heads": 0}, "num_heads must be >= 1"),
])
def test_attention_flops_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=r"attention_flops\(\): " + match):
        attention_flops(**kwargs)


def test_loglog_slope_recovers_the_exponent():
    xs = [128, 256, 512, 1024]
    assert loglog_slope(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)
    assert loglog_slope(xs, [0.5 * x for x in xs]) == pytest.approx(1.0)


@pytest.mark.parametrize(("xs", "ys", "match"), [
    ([1], [1], "equal length >= 2"),
    ([1, 2], [1], "equal length >= 2"),
    ([0, 2], [1, 2], "positive"),
    ([4, 4], [1, 2], "two different x"),
])
def test_loglog_slope_rejects_bad_input(xs, ys, match):
    with pytest.raises(ValueError, match=match):
        loglog_slope(xs, ys)


def test_time_function_warms_up_and_states_threads():
    calls = []
    timing = time_function(lambda x: calls.append(x) or x * 2, 3, min_run_time=0.01, warmup=2)
    assert isinstance(timing, Timing)
    assert calls[:2] == [3, 3] and len(calls) >= 2 + timing.runs
    assert timing.median_s > 0 and timing.iqr_s >= 0
    assert timing.threads == torch.get_num_threads()
    assert "threads" in str(timing)
    assert time_function(torch.add, torch.ones(4), 1, min_run_time=0.01, num_threads=1).threads == 1


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((torch.ones(2),), {}, TypeError, r"time_function\(\): fn must be callable"),
    ((torch.sum, torch.ones(2)), {"min_run_time": 0}, ValueError, "min_run_time must be a finite number of seconds"),
    ((torch.sum, torch.ones(2)), {"warmup": -1}, ValueError, "warmup must be >= 0"),
    ((torch.sum, torch.ones(2)), {"num_threads": 0}, ValueError, "num_threads must be >= 1"),
])
def test_time_function_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        time_function(*args, **kwargs)


def test_matmul_peak_is_positive():
    assert matmul_peak_gflops(64, min_run_time=0.01) > 0
    assert matmul_peak_gflops(32, min_run_time=0, repeats=1) > 0


def test_matmul_peak_uses_the_fastest_run(monkeypatch):
    """The reference is the best single call, so one slow (disturbed) run does not lower it."""
    seconds = iter([0.5, 0.001, 0.25, 0.002, 0.5, 0.5])

    class FakeTimer:
        def __init__(self, *args, **kwargs):
            pass

        def timeit(self, number):
            assert number == 1
            return type("Measurement", (), {"mean": next(seconds)})()

    monkeypatch.setattr("attention_lab.measure.bench.benchmark.Timer", FakeTimer)
    assert matmul_peak_gflops(10, min_run_time=0, repeats=5) == pytest.approx(2 * 10**3 / 0.001 / 1e9)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"size": 0}, "size must be >= 1"),
    ({"repeats": 0}, "repeats must be >= 1"),
    ({"min_run_time": -1}, "min_run_time must be a finite number of seconds >= 0"),
])
def test_matmul_peak_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        matmul_peak_gflops(**kwargs)


def test_every_variant_computes_attention():
    q, k, v = torch.randn(3, 2, 3, 37, 8).unbind(0)  # (b, h, i, d); 37: not a multiple of any block size
    variants = attention_variants()
    assert "naive (attention_lab)" in variants and "F.scaled_dot_product_attention" in variants
    expected = F.scaled_dot_product_attention(q, k, v)
    for name, fn in variants.items():
        torch.testing.assert_close(fn(q, k, v), expected, atol=1e-5, rtol=1.3e-6, msg=name)


def test_the_sweep_compares_naive_blockwise_and_pytorch():
    from attention_lab.efficient.blockwise import blockwise_attention

    variants = attention_variants()
    assert list(variants) == ["naive (attention_lab)", "blockwise (attention_lab)", "F.scaled_dot_product_attention"]
    assert variants["blockwise (attention_lab)"] is blockwise_attention


@functools.cache  # three tests read the same small sweep (they never change it): it is run once
def _tiny_sweep() -> tuple[BenchRow, ...]:
    return tuple(run_sweep([16, 32], heads=2, head_dim=4, min_run_time=0.01, matmul_gflops=1.0, progress=False))


def test_run_sweep_rows_are_consistent():
    rows = _tiny_sweep()
    assert [(r.variant, r.n) for r in rows] == [(name, n) for n in (16, 32) for name in attention_variants()]
    for r in rows:
        flops = attention_flops(r.n, head_dim=4, num_heads=2)
        assert r.gflops == pytest.approx(flops / (r.median_ms / 1e3) / 1e9)
        assert r.share_of_matmul_peak == pytest.approx(r.gflops / 1.0)
        assert r.threads == torch.get_num_threads()
    naive = {r.n: r.peak_bytes for r in rows if r.variant == "naive (attention_lab)"}
    sdpa = {r.n: r.peak_bytes for r in rows if r.variant == "F.scaled_dot_product_attention"}
    for n in (16, 32):  # the naive forward holds at least two n x n matrices and the output
        assert naive[n] >= attention_memory_bytes(n, head_dim=4, num_heads=2).naive_peak
    assert sdpa[32] < naive[32]


def test_run_sweep_rejects_bad_lengths():
    with pytest.raises(ValueError, match=r"run_sweep\(\): every length must be >= 1"):
        run_sweep([16, 0], progress=False, matmul_gflops=1.0)


def test_format_table_has_one_line_per_row():
    rows = _tiny_sweep()
    table = format_table(rows).splitlines()
    assert table[0].split() == ["variant", "n", "time", "ms", "GFLOP/s", "of", "peak", "peak", "MiB"]
    assert len(table) == 2 + len(rows)


def test_command_writes_a_csv_that_read_csv_reads_back(tmp_path, capsys):
    csv_path = tmp_path / "cost.csv"
    code = bench.main(["--lengths", "16", "32", "--heads", "1", "--head-dim", "4", "--min-run-time", "0.01",
                       "--no-progress", "--csv", str(csv_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "threads" in out and "matmul peak" in out and "log-log slope" in out
    with open(csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(attention_variants())
    assert {"variant", "n", "median_ms", "gflops", "share_of_matmul_peak", "peak_bytes"} <= set(rows[0])
    typed = read_csv(str(csv_path))
    assert [(r.variant, r.n) for r in typed] == [(row["variant"], int(row["n"])) for row in rows]
    assert all(isinstance(r.peak_bytes, int) and isinstance(r.median_ms, float) for r in typed)


def test_read_csv_round_trip_and_bad_file(tmp_path):
    rows = _tiny_sweep()
    path = tmp_path / "cost.csv"
    write_csv(rows, str(path))
    assert read_csv(str(path)) == list(rows)
    path.write_text("variant,n\nnaive,16\n")
    with pytest.raises(ValueError, match=r"read_csv\(\): expected a CSV with the columns .*got \['variant', 'n'\]"):
        read_csv(str(path))


def test_command_rejects_unknown_options():
    with pytest.raises(SystemExit):
        bench.main(["--no-such-option"])
