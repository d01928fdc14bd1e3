"""attention_lab.measure.timing: interleaved timing and the conclusions drawn from its figures.

The conclusions (crossover, fitted slope) are tested on made-up figures: clean, noisy, non-monotone and degenerate,
so no assertion here depends on how fast or busy this machine is.
"""

import math
import random

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


# ---- crossover -------------------------------------------------------------------------------------------------


def test_crossover_faster_everywhere_starts_at_the_smallest_length():
    result = timing.crossover(LENGTHS, [1.2, 1.5, 3.0, 6.0], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (256, True)
    assert "every measured length" in str(result) and "n = 256 (1.20x)" in str(result)


def test_crossover_never_faster():
    result = timing.crossover(LENGTHS, [0.2, 0.4, 0.7, 0.9])
    assert (result.n, result.conclusive) == (None, True) and "not faster" in result.message


def test_crossover_is_where_it_becomes_faster_for_good():
    result = timing.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (1024, True)
    assert "overtakes dense at n = 1024 (1.30x there, 0.50x at n = 512)" in result.message


def test_crossover_with_a_dip_that_stays_above_one_is_still_a_crossover():
    result = timing.crossover(LENGTHS, [0.5, 1.4, 1.1, 2.0])
    assert (result.n, result.conclusive) == (512, True)


def test_crossover_faster_then_slower_is_no_crossover_and_says_so():
    result = timing.crossover(LENGTHS, [1.5, 1.2, 0.8, 0.6], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (None, True)
    assert "faster than dense up to n = 512" in result.message and "slower from n = 1024" in result.message
    assert "not faster" not in result.message  # it was faster at 256 and 512: the message must not deny it


@pytest.mark.parametrize("ratios", [[1.2, 0.8, 1.5, 2.0], [0.8, 1.2, 0.9, 1.5], [1.1, 0.9, 1.1, 0.9]])
def test_crossover_that_flips_twice_is_too_noisy(ratios):
    result = timing.crossover(LENGTHS, ratios)
    assert result.n is None and not result.conclusive
    assert result.message.startswith("too noisy to conclude") and "rerun" in result.message


def test_crossover_ratio_of_exactly_one_is_not_faster():
    assert timing.crossover([1, 2], [1.0, 1.0]).n is None
    assert timing.crossover([1, 2], [1.0, 1.01]).n == 2


def test_crossover_single_length():
    assert timing.crossover([512], [2.0]).n == 512
    assert timing.crossover([512], [0.5]).n is None


def test_crossover_never_contradicts_its_figures():
    """On random figures: a conclusive n is faster there and at every larger n, and slower just before it."""
    rng = random.Random(0)
    for _ in range(2000):
        size = rng.randint(1, 6)
        ratios = [rng.choice([0.5, 0.9, 1.0, 1.1, 2.0]) * rng.uniform(0.9, 1.1) for _ in range(size)]
        lengths = [2 ** (8 + k) for k in range(size)]
        result = timing.crossover(lengths, ratios)
        faster = [r > 1 for r in ratios]
        if not result.conclusive:
            assert sum(a != b for a, b in zip(faster, faster[1:])) > 1
        elif result.n is None:
            assert not faster[-1]
        else:
            k = lengths.index(result.n)
            assert all(faster[k:]) and (k == 0 or not faster[k - 1])
            assert not any(faster[:k])


@pytest.mark.parametrize(("lengths", "ratios", "error", "match"), [
    ([256, 512], [1.0], ValueError, "equal, non-zero length"),
    ([], [], ValueError, "equal, non-zero length"),
    ([512, 256], [1.0, 2.0], ValueError, "lengths must increase"),
    ([256, 256], [1.0, 2.0], ValueError, "lengths must increase"),
    ([0, 256], [1.0, 2.0], ValueError, "lengths must be > 0"),
    ([256, 512], [0.0, 2.0], ValueError, "ratios must be > 0"),
    ([256, 512], [-1.0, 2.0], ValueError, "ratios must be > 0"),
    ([256, 512], [float("nan"), 2.0], ValueError, "must be finite"),
    ([256, 512], [float("inf"), 2.0], ValueError, "must be finite"),
    ([256, 512], [True, 2.0], TypeError, "only numbers"),
    ([256, 512], "12", TypeError, "sequence of numbers"),
    ([256, "512"], [1.0, 2.0], TypeError, "only numbers"),
])
def test_crossover_refuses_bad_input(lengths, ratios, error, match):
    with pytest.raises(error, match=match):
        timing.crossover(lengths, ratios)


# ---- fit_slope -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("power", [1.0, 2.0, 1.5])
def test_fit_slope_of_a_perfect_power_law_is_exact(power):
    result = timing.fit_slope(LENGTHS, [3e-6 * n**power for n in LENGTHS], name="naive")
    assert result.slope == pytest.approx(power, abs=1e-12) and result.r2 == pytest.approx(1.0, abs=1e-12)
    assert result.conclusive and result.fitted_on == (256, 2048)
    assert result.message == f"naive grows as n^{power:.2f} over n = 256 ... 2048 (r^2 = 1.000)"


def test_fit_slope_on_mildly_noisy_figures_is_conclusive_and_close():
    times = [1.0 * (1.05, 0.97, 1.02, 0.99)[k] * n**2 / 1e6 for k, n in enumerate(LENGTHS)]
    result = timing.fit_slope(LENGTHS, times)
    assert result.conclusive and abs(result.slope - 2) < 0.05 and 0.99 < result.r2 < 1


@pytest.mark.parametrize("times", [
    [1.0, 1.0, 4.0, 16.0],  # two lengths at identical times
    [1.0, 4.0, 3.0, 16.0],  # a dip
    [4.0, 3.0, 2.0, 1.0],   # falling
    [2.0, 2.0, 2.0, 2.0],   # flat
])
def test_fit_slope_of_times_that_do_not_grow_is_too_noisy(times):
    result = timing.fit_slope(LENGTHS, times, name="naive")
    assert not result.conclusive
    assert result.message.startswith("too noisy to conclude: naive does not rise at every step of n over "
                                      "n = 256 ... 2048")
    assert math.isfinite(result.slope) and 0 <= result.r2 <= 1


def test_fit_slope_with_a_poor_fit_is_too_noisy():
    result = timing.fit_slope(LENGTHS, [1.0, 1.01, 1.02, 100.0])
    assert not result.conclusive and result.r2 < 0.95
    assert "a line fits time poorly" in result.message and "rerun" in result.message
    assert timing.fit_slope(LENGTHS, [1.0, 1.01, 1.02, 100.0], min_r2=0.5).conclusive


def test_fit_slope_on_two_points_does_not_claim_a_fit_quality():
    result = timing.fit_slope([512, 1024], [1.0, 4.0])
    assert result.conclusive and result.slope == pytest.approx(2.0)
    assert "two points, so no check of the fit" in result.message and "r^2" not in result.message


@pytest.mark.parametrize(("lengths", "times", "kwargs", "error", "match"), [
    ([256, 512], [1.0], {}, ValueError, "equal, non-zero length"),
    ([256], [1.0], {}, ValueError, "at least two lengths"),
    ([512, 256], [1.0, 2.0], {}, ValueError, "lengths must increase"),
    ([0, 256], [1.0, 2.0], {}, ValueError, "lengths must be > 0"),
    ([256, 512], [0.0, 2.0], {}, ValueError, "times must be > 0"),
    ([256, 512], [-1.0, 2.0], {}, ValueError, "times must be > 0"),
    ([256, 512], [float("nan"), 2.0], {}, ValueError, "finite"),
    ([256, 512], [1.0, None], {}, TypeError, "only numbers"),
    ([256, 512], [1.0, 2.0], {"min_r2": 1.5}, ValueError, "min_r2"),
    ([256, 512], [1.0, 2.0], {"min_r2": True}, ValueError, "min_r2"),
])
def test_fit_slope_refuses_bad_input(lengths, times, kwargs, error, match):
    with pytest.raises(error, match=match):
        timing.fit_slope(lengths, times, **kwargs)


# ---- agreement between the round-by-round ratio and the fastest times -----------------------------------------


@pytest.mark.parametrize(("ratio", "best", "expected"), [
    (2.0, 2.0, True), (2.0, 2.4, True), (2.0, 2.6, False), (0.5, 0.45, True),
    (1.05, 0.95, False),  # the two disagree on which variant is faster
    (0.63, 51.63 / 72.40 * 2, False),
])
def test_agree(ratio, best, expected):
    assert timing.agree(ratio, best) is expected


def test_crossover_is_too_noisy_when_the_fastest_times_say_otherwise():
    # round by round the variant is slower at 2048, yet its fastest time beats the baseline's fastest time
    result = timing.crossover(LENGTHS, [0.3, 0.5, 0.7, 0.63], best_ratios=[0.3, 0.5, 0.7, 1.4], name="sparse")
    assert not result.conclusive and result.n is None
    assert "at n = 2048" in result.message and "disagree on whether sparse is faster" in result.message
    agreeing = timing.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], best_ratios=[0.4, 0.6, 1.1, 2.5])
    assert agreeing.conclusive and agreeing.n == 1024
    with pytest.raises(ValueError, match="equal, non-zero length"):
        timing.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], best_ratios=[1.0])


def test_speed_states_both_figures_or_refuses(monkeypatch):
    # rounds (a, b): (1, 2), (4, 1), (2, 1): round by round b is 2x a's speed, the fastest times say 1x
    scripted(monkeypatch, [1.0, 1.0, 1.0, 2.0, 4.0, 1.0, 2.0, 1.0])
    noisy = timing.compare({"a": lambda: None, "b": lambda: None}, rounds=3, min_time=1e-9, warmup=0)
    assert noisy.speed("b").startswith("too noisy to conclude: b ran at 2.00x a's speed round by round")
    scripted(monkeypatch, [1.0, 1.0, 2.0, 1.0, 2.2, 1.0, 2.0, 1.1])
    clean = timing.compare({"a": lambda: None, "b": lambda: None}, rounds=3, min_time=1e-9, warmup=0)
    assert clean.speed("b") == "b ran at 2.00x a's speed (median of 3 rounds; the fastest times give 2.00x)"
    assert clean.speed("a", "b").startswith("a ran at 0.50x b's speed")


def test_sweep_best_ratio_is_the_ratio_of_fastest_times(monkeypatch):
    scripted(monkeypatch, [1.0] * 2 + [2.0, 1.0] + [1.0] * 2 + [8.0, 2.0])
    result = timing.sweep(lambda n: {"slow": lambda: None, "fast": lambda: None}, [1, 2], rounds=1, min_time=1e-9)
    assert result.best_ratio("fast") == [2.0, 4.0] and result.best_ratio("slow", "fast") == [0.5, 0.25]
