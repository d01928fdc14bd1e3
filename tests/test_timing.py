"""attention_lab.measure.timing: interleaved rounds, the fastest of the rounds, ratios within a round, fixed threads.

The clock is replaced by scripted times where a figure is asserted, so no assertion here depends on how fast or busy
this machine is.
"""

import time

import pytest
import torch

from attention_lab.measure import timing

LENGTHS = [256, 512, 1024, 2048]


# ---- compare / sweep -------------------------------------------------------------------------------------------


def test_compare_runs_the_variants_in_interleaved_rounds():
    calls = []
    result = timing.compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=3,
                            min_time=1e-9, warmup=1)
    # warm-up and one calibration call per variant, then a, b, a, b, a, b (one call each: min_time is tiny)
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert result.rounds == 3 and result.baseline == "a"
    assert set(result.rounds_s) == {"a", "b"} and all(len(ts) == 3 for ts in result.rounds_s.values())
    assert result.threads == torch.get_num_threads()


def scripted(monkeypatch, seconds):
    """Make compare() read these times, in this order, instead of the clock (calibration calls first)."""
    values = iter(seconds)
    monkeypatch.setattr(timing, "_time_once", lambda fn, number: next(values))


def test_compare_keeps_the_fastest_round_and_takes_ratios_within_rounds(monkeypatch):
    # calibration: a, b; then rounds (a, b): (1, 2), (4, 1), (2, 1)
    scripted(monkeypatch, [1.0, 1.0, 1.0, 2.0, 4.0, 1.0, 2.0, 1.0])
    result = timing.compare({"a": lambda: None, "b": lambda: None}, rounds=3, min_time=1e-9, warmup=0)
    assert result.best_s == {"a": 1.0, "b": 1.0}
    # per-round a/b: 0.5, 4, 2 -> median 2; the ratio of the fastest times would say 1
    assert result.ratio == {"a": 1.0, "b": 2.0}
    assert result.ratio_between("b", "a") == 2.0
    assert result.ratio_between("a", "b") == 0.5  # b/a per round: 2, 0.25, 0.5
    assert "2.00x a's speed" in str(result)


def test_compare_takes_the_baseline_it_is_given(monkeypatch):
    scripted(monkeypatch, [1.0, 1.0, 3.0, 1.0])
    result = timing.compare({"a": lambda: None, "b": lambda: None}, baseline="b", rounds=1, min_time=1e-9, warmup=0)
    assert result.baseline == "b" and result.ratio == {"a": pytest.approx(1 / 3), "b": 1.0}


def test_compare_repeats_short_calls_until_min_time(monkeypatch):
    numbers = []

    def fake(fn, number):
        numbers.append(number)
        return 0.001

    monkeypatch.setattr(timing, "_time_once", fake)
    timing.compare({"a": lambda: None}, rounds=2, min_time=0.01, warmup=0)
    assert numbers == [1, 10, 10]  # calibration, then 10 calls per timing to reach 10 ms


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"variants": {}}, TypeError, "non-empty dict"),
    ({"variants": [lambda: None]}, TypeError, "non-empty dict"),
    ({"variants": {"a": 3}}, TypeError, "wrap the call in a lambda"),
    ({"variants": {"a": lambda: None}, "baseline": "b"}, ValueError, "baseline must be one of"),
    ({"variants": {"a": lambda: None}, "rounds": 0}, ValueError, "rounds must be >= 1"),
    ({"variants": {"a": lambda: None}, "rounds": 2.0}, TypeError, "rounds must be an int"),
    ({"variants": {"a": lambda: None}, "min_time": 0}, ValueError, "min_time"),
    ({"variants": {"a": lambda: None}, "min_time": True}, TypeError, "min_time"),
    ({"variants": {"a": lambda: None}, "warmup": -1}, ValueError, "warmup"),
])
def test_compare_refuses_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        timing.compare(**kwargs)


def test_ratio_between_names_the_variants_it_knows():
    result = timing.compare({"a": lambda: None}, rounds=1, min_time=1e-9)
    with pytest.raises(ValueError, match=r"expected one of \['a'\], got 'b'"):
        result.ratio_between("b", "a")


def test_sweep_collects_one_comparison_per_length(monkeypatch):
    built = []

    def make(n):
        built.append(n)
        return {"slow": lambda: None, "fast": lambda: None}

    scripted(monkeypatch, [1.0] * 2 + [2.0, 1.0] + [1.0] * 2 + [8.0, 2.0])  # n = 1: ratio 2; n = 2: ratio 4
    result = timing.sweep(make, [1, 2], rounds=1, min_time=1e-9)
    assert built == [1, 2] and result.lengths == [1, 2] and result.baseline == "slow"
    assert result.best_s == {"slow": [2.0, 8.0], "fast": [1.0, 2.0]}
    assert result.ratio["fast"] == [2.0, 4.0] and result.ratio_between("slow", "fast") == [0.5, 0.25]


def test_sweep_refuses_empty_lengths_changing_names_and_a_non_function():
    with pytest.raises(ValueError, match="at least one sequence length"):
        timing.sweep(lambda n: {"a": lambda: None}, [])
    with pytest.raises(ValueError, match="same names at every length"):
        timing.sweep(lambda n: {f"a{n}": lambda: None}, [1, 2], rounds=1, min_time=1e-9)
    with pytest.raises(TypeError, match="make_variants must be a function"):
        timing.sweep({"a": lambda: None}, [1])


def test_fixed_threads_sets_and_restores_the_thread_count():
    before = torch.get_num_threads()
    with timing.fixed_threads(1) as used:
        assert used == 1 and torch.get_num_threads() == 1
        assert timing.thread_report().startswith("timed with 1 torch thread(s)")
    assert torch.get_num_threads() == before
    with timing.fixed_threads(10_000) as used:  # never more threads than logical cores
        assert used == torch.get_num_threads() <= 10_000
    with pytest.raises(ValueError, match="threads must be >= 1"), timing.fixed_threads(0):
        pass
    assert torch.get_num_threads() == before


def test_speed_gives_the_median_ratio_with_the_spread_of_its_rounds(monkeypatch):
    # rounds (a, b): (1, 2), (4, 1), (2, 1): b's speed over a's per round 0.5, 4, 2: the rounds disagree
    scripted(monkeypatch, [1.0, 1.0, 1.0, 2.0, 4.0, 1.0, 2.0, 1.0])
    unsure = timing.compare({"a": lambda: None, "b": lambda: None}, rounds=3, min_time=1e-9, warmup=0).speed("b")
    assert not unsure.conclusive and (unsure.low, unsure.median, unsure.high) == (0.5, 2.0, 4.0)
    assert str(unsure) == ("this run cannot tell whether b is faster than a: the middle half of its 3 rounds ranged "
                           "from 0.50x to 4.00x a's speed (median 2.00x)")
    scripted(monkeypatch, [1.0, 1.0, 2.0, 1.0, 2.2, 1.0, 2.0, 1.1])
    clean = timing.compare({"a": lambda: None, "b": lambda: None}, rounds=3, min_time=1e-9, warmup=0)
    assert str(clean.speed("b")) == ("b ran at 2.00x a's speed (median of 3 rounds; the middle half between 1.82x "
                                     "and 2.20x)")
    assert str(clean.speed("a", "b")).startswith("a ran at 0.50x b's speed")
    assert clean.round_ratios("b") == pytest.approx([2.0, 2.2, 2.0 / 1.1])


def test_ratio_looks_at_the_middle_half_of_the_rounds():
    # a busy machine: two rounds of nine hit by other work, one each way (the benchmark's batch-16 cache update)
    busy = timing.ratio([0.3, 12.0, 12.5, 13.0, 15.7, 14.0, 12.4, 13.5, 60.0], name="p", baseline="c")
    assert busy.conclusive and (busy.low, busy.median, busy.high) == (12.4, 13.0, 14.0)
    same = timing.ratio([0.9, 1.05, 0.97, 1.1, 0.3, 1.02, 2.5], name="p", baseline="c")
    assert same.conclusive and str(same).startswith("p and c ran at about the same speed (1.02x, median of 7 rounds")
    unsure = timing.ratio([0.7, 0.9, 1.4, 1.6, 1.2])
    assert not unsure.conclusive and (unsure.low, unsure.high) == (0.9, 1.4)


@pytest.mark.parametrize(("per_round", "error", "match"), [
    ([], ValueError, "at least one ratio"), ([1.0, 0.0], ValueError, "must be > 0"), ("2x", TypeError, "sequence"),
])
def test_ratio_refuses_bad_input(per_round, error, match):
    with pytest.raises(error, match=match):
        timing.ratio(per_round)


def test_one_thread_on_the_cpu_is_timed_by_its_cpu_time():
    # a call that sleeps takes wall time but no CPU time: with one thread the timer reads the thread's CPU time
    with timing.fixed_threads(1):
        asleep = timing.compare({"sleep": lambda: time.sleep(0.02)}, rounds=1, min_time=1e-9, warmup=0)
        assert "by the CPU time of the thread" in timing.thread_report()
    assert asleep.best_s["sleep"] < 0.01 or torch.cuda.is_available()


def test_sweep_best_ratio_is_the_ratio_of_fastest_times(monkeypatch):
    scripted(monkeypatch, [1.0] * 2 + [2.0, 1.0] + [1.0] * 2 + [8.0, 2.0])
    result = timing.sweep(lambda n: {"slow": lambda: None, "fast": lambda: None}, [1, 2], rounds=1, min_time=1e-9)
    assert result.best_ratio("fast") == [2.0, 4.0] and result.best_ratio("slow", "fast") == [0.5, 0.25]
