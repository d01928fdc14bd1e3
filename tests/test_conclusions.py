"""attention_lab.measure.conclusions: the crossover, the fitted slope with its interval and the agreement of two
statistics, each computed from made-up figures (clean, noisy, flat, non-monotone and degenerate), so no assertion here
depends on how fast or busy this machine is; each says what this run cannot tell instead of concluding from figures
that cannot decide."""

import math
import random

import pytest

from attention_lab import i18n
from attention_lab.measure import conclusions, labels

LENGTHS = [256, 512, 1024, 2048]


# ---- crossover -------------------------------------------------------------------------------------------------


def test_crossover_faster_everywhere_starts_at_the_smallest_length():
    result = conclusions.crossover(LENGTHS, [1.2, 1.5, 3.0, 6.0], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (256, True)
    assert "every measured length" in str(result) and "n=256: 1.20x" in str(result)
    assert "the largest gap, 6.00x, at n = 2048" in str(result)  # not read as a maximum at the last length


def test_crossover_never_faster():
    result = conclusions.crossover(LENGTHS, [0.2, 0.4, 0.7, 0.9])
    assert (result.n, result.conclusive) == (None, True) and "not faster" in result.message


def test_crossover_is_where_it_becomes_faster_for_good():
    result = conclusions.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (1024, True)
    assert "overtakes dense at n = 1024 (1.30x there, 0.50x at n = 512)" in result.message


def test_crossover_with_a_dip_that_stays_above_one_is_still_a_crossover():
    result = conclusions.crossover(LENGTHS, [0.5, 1.4, 1.1, 2.0])
    assert (result.n, result.conclusive) == (512, True)


def test_crossover_faster_then_slower_is_no_crossover_and_says_so():
    result = conclusions.crossover(LENGTHS, [1.5, 1.2, 0.8, 0.6], name="sparse", baseline="dense")
    assert (result.n, result.conclusive) == (None, True)
    assert "faster than dense up to n = 512" in result.message and "slower from n = 1024" in result.message
    assert "not faster" not in result.message  # it was faster at 256 and 512: the message must not deny it


@pytest.mark.parametrize("ratios", [[1.2, 0.8, 1.5, 2.0], [0.8, 1.2, 0.9, 1.5], [1.1, 0.9, 1.1, 0.9]])
def test_crossover_that_flips_twice_cannot_tell(ratios):
    result = conclusions.crossover(LENGTHS, ratios)
    assert result.n is None and not result.conclusive
    assert result.message.startswith("this run cannot tell where the variant overtakes the baseline: it is faster")
    assert "rerun" not in result.message


def test_crossover_ratio_of_exactly_one_is_not_faster():
    assert conclusions.crossover([1, 2], [1.0, 1.0]).n is None
    assert conclusions.crossover([1, 2], [1.0, 1.01]).n == 2


def test_crossover_single_length():
    assert conclusions.crossover([512], [2.0]).n == 512
    assert conclusions.crossover([512], [0.5]).n is None


def test_crossover_never_contradicts_its_figures():
    """On random figures: a conclusive n is faster there and at every larger n, and slower just before it."""
    rng = random.Random(0)
    for _ in range(2000):
        size = rng.randint(1, 6)
        ratios = [rng.choice([0.5, 0.9, 1.0, 1.1, 2.0]) * rng.uniform(0.9, 1.1) for _ in range(size)]
        lengths = [2 ** (8 + k) for k in range(size)]
        result = conclusions.crossover(lengths, ratios)
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
    ([256, 512], [1.0], ValueError, "per length, got"),
    ([], [], ValueError, "per length, got"),
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
        conclusions.crossover(lengths, ratios)


# ---- fit_slope -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("power", [1.0, 2.0, 1.5])
def test_fit_slope_of_a_perfect_power_law_is_exact(power):
    result = conclusions.fit_slope(LENGTHS, [3e-6 * n**power for n in LENGTHS], name="naive")
    assert result.slope == pytest.approx(power, abs=1e-12)
    assert result.low == pytest.approx(power, abs=1e-6) and result.high == pytest.approx(power, abs=1e-6)
    assert result.conclusive and result.fitted_on == (256, 2048)
    assert result.message == (f"naive grows as n^{power:.2f} over n = 256 ... 2048 (interval at 95%: "
                              f"{power:.2f} to {power:.2f})")


def test_fit_slope_on_mildly_noisy_figures_is_conclusive_and_close():
    times = [1.0 * (1.05, 0.97, 1.02, 0.99)[k] * n**2 / 1e6 for k, n in enumerate(LENGTHS)]
    result = conclusions.fit_slope(LENGTHS, times)
    assert result.conclusive and abs(result.slope - 2) < 0.05 and result.low < 2 < result.high
    assert result.high - result.low < 0.5


def test_fit_slope_interval_is_the_t_interval_of_the_residuals():
    # log2-spaced lengths, residuals +-r about slope 1: s^2 = sum(r^2) / (k - 2), se = s / sqrt(sxx), t(2) = 4.303
    r = 0.05
    times = [n * math.exp(e) for n, e in zip(LENGTHS, (r, -r, -r, r))]
    result = conclusions.fit_slope(LENGTHS, times)
    sxx = sum((math.log(n) - math.log(512 * 2**0.5)) ** 2 for n in LENGTHS)
    half = 4.303 * math.sqrt(4 * r * r / 2 / sxx)
    assert result.slope == pytest.approx(1.0)
    assert (result.low, result.high) == pytest.approx((1 - half, 1 + half))


@pytest.mark.parametrize("times", [
    [2.0, 2.0, 2.0, 2.0],    # exactly flat
    [2.0, 2.1, 1.9, 2.05],   # flat with a little scatter: a cache's time per token
])
def test_fit_slope_of_a_flat_series_says_flat(times):
    result = conclusions.fit_slope(LENGTHS, times, name="the cache's time per token")
    assert result.conclusive and result.low <= 0 <= result.high and -0.5 < result.low and result.high < 0.5
    assert result.message.startswith("the cache's time per token is flat over n = 256 ... 2048: slope ")
    assert "holds 0" in result.message


def test_more_lengths_let_a_flat_series_with_one_slow_point_say_flat():
    # lesson 11's committed cache times, 2.5 ms then about 1.9: four lengths cannot tell flat from n^0.5, nine can
    four = conclusions.fit_slope([64, 128, 256, 512], [2.5, 1.8, 1.85, 2.0])
    nine = conclusions.fit_slope([64, 96, 128, 192, 256, 384, 512, 768, 1024],
                                 [2.5, 1.8, 1.85, 2.0, 1.9, 2.05, 1.95, 1.9, 2.0])
    assert not four.conclusive and nine.conclusive and "is flat" in nine.message


def test_fit_slope_that_cannot_tell_flat_from_growing_says_so_without_rerun():
    result = conclusions.fit_slope(LENGTHS, [1.0, 4.0, 0.8, 3.0], name="naive")
    assert not result.conclusive and result.low < 0 < 0.5 < result.high
    assert result.message.startswith("this run cannot tell whether naive grows over n = 256 ... 2048: slope ")
    assert "rerun" not in result.message and "too noisy" not in result.message
    assert conclusions.fit_slope(LENGTHS, [1.0, 4.0, 0.8, 3.0], flat_below=5).conclusive  # a looser claim holds


def test_fit_slope_of_falling_times_says_falling():
    result = conclusions.fit_slope(LENGTHS, [8.0, 4.0, 2.0, 1.0])
    assert result.conclusive and result.high < 0 and "time falls as n^-1.00" in result.message


def test_fit_slope_on_two_points_gives_no_interval():
    result = conclusions.fit_slope([512, 1024], [1.0, 4.0])
    assert result.conclusive and result.slope == pytest.approx(2.0)
    assert result.message == "time goes as n^2.00 over n = 512 ... 1024 (two points, so no interval)"
    assert (result.low, result.high) == (-math.inf, math.inf)


@pytest.mark.parametrize(("lengths", "times", "kwargs", "error", "match"), [
    ([256, 512], [1.0], {}, ValueError, "per length, got"),
    ([256], [1.0], {}, ValueError, "at least two lengths"),
    ([512, 256], [1.0, 2.0], {}, ValueError, "lengths must increase"),
    ([0, 256], [1.0, 2.0], {}, ValueError, "lengths must be > 0"),
    ([256, 512], [0.0, 2.0], {}, ValueError, "times must be > 0"),
    ([256, 512], [-1.0, 2.0], {}, ValueError, "times must be > 0"),
    ([256, 512], [float("nan"), 2.0], {}, ValueError, "finite"),
    ([256, 512], [1.0, None], {}, TypeError, "only numbers"),
    ([256, 512], [1.0, 2.0], {"flat_below": 0}, ValueError, "flat_below"),
    ([256, 512], [1.0, 2.0], {"flat_below": True}, ValueError, "flat_below"),
])
def test_fit_slope_refuses_bad_input(lengths, times, kwargs, error, match):
    with pytest.raises(error, match=match):
        conclusions.fit_slope(lengths, times, **kwargs)


# ---- agreement between the round-by-round ratio and the fastest times -----------------------------------------


@pytest.mark.parametrize(("ratio", "best", "expected"), [
    (2.0, 2.0, True), (2.0, 2.4, True), (2.0, 2.6, False), (0.5, 0.45, True),
    (1.05, 0.95, False),  # the two disagree on which variant is faster
    (0.63, 51.63 / 72.40 * 2, False),
])
def test_agree(ratio, best, expected):
    assert conclusions.agree(ratio, best) is expected


def test_crossover_cannot_tell_when_the_fastest_times_say_otherwise():
    # round by round the variant is slower at 2048, yet its fastest time beats the baseline's fastest time
    result = conclusions.crossover(LENGTHS, [0.3, 0.5, 0.7, 0.63], best_ratios=[0.3, 0.5, 0.7, 1.4], name="sparse")
    assert not result.conclusive and result.n is None
    assert "at n = 2048 the round-by-round ratio and the fastest times disagree on which is faster" in result.message
    agreeing = conclusions.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], best_ratios=[0.4, 0.6, 1.1, 2.5])
    assert agreeing.conclusive and agreeing.n == 1024
    with pytest.raises(ValueError, match="per length, got"):
        conclusions.crossover(LENGTHS, [0.3, 0.5, 1.3, 3.2], best_ratios=[1.0])


def test_a_tie_between_slower_and_faster_lengths_still_gives_the_crossover():
    # lesson 10 at load 5: block-sparse 0.64x at 512, at 768 1.02x by the rounds but 0.98x by the fastest times
    lengths = [256, 512, 768, 1024, 2048]
    result = conclusions.crossover(lengths, [0.3, 0.64, 1.02, 1.54, 3.1], best_ratios=[0.3, 0.6, 0.98, 1.5, 3.0],
                                   name="sparse", baseline="dense")
    assert result.conclusive and result.n == 1024
    assert result.message.startswith("sparse overtakes dense at n = 1024 (1.54x there) and stays faster up to n = "
                                     "2048; about equal at n = 768, where the round-by-round ratio and the fastest")
    at_the_start = conclusions.crossover(lengths, [1.01, 1.2, 1.5, 2, 3], best_ratios=[0.99, 1.2, 1.5, 2, 3])
    assert at_the_start.conclusive and at_the_start.n == 512
    for ratios, best in (([0.5, 0.9, 1.2, 0.95, 2.0], [0.5, 0.9, 1.2, 1.05, 2.0]),  # a tie after a faster length
                         ([0.5, 1.2, 1.5, 2.0, 1.01], [0.5, 1.2, 1.5, 2.0, 0.99])):  # a tie at the end
        assert not conclusions.crossover(lengths, ratios, best_ratios=best).conclusive


def test_crossover_everywhere_names_the_peak_when_it_is_not_at_the_last_length():
    # lesson 03's sweep peaked at 256 and fell after: "up to n = 512 (7.67x)" read as a maximum
    result = conclusions.crossover([32, 64, 128, 256, 512], [2.05, 4.0, 8.1, 11.2, 7.67])
    assert "the largest gap, 11.20x, at n = 256" in str(result) and "n=512: 7.67x" in str(result)


@pytest.mark.parametrize(("values", "kind"), [
    ([1.44, 4.06, 6.31, 6.36], "less than linear"),  # lesson 07's block-sparse peaks: one step of 2.8x, 4.4x in all
    ([1, 2, 4, 8], "about linear"),
    ([1, 3, 9, 27], "between linear and quadratic"),
    ([1, 4, 16, 64], "about quadratic"),
    ([1, 8, 64, 512], "faster than quadratic"),
])
def test_growth_is_named_from_the_whole_range_not_from_one_step(values, kind):
    result = conclusions.growth([1024, 2048, 4096, 8192], values, name="peak memory")
    assert result.kind == kind and kind in str(result)
    assert result.factor == pytest.approx(values[-1] / values[0])
    assert f"grows {values[-1] / values[0]:.1f}x while n grows 8x" in str(result)


def test_growth_refuses_bad_input():
    with pytest.raises(ValueError, match=r"growth\(\): values must be > 0"):
        conclusions.growth([1, 2], [0, 1])
    with pytest.raises(ValueError, match=r"growth\(\): a growth needs at least two lengths"):
        conclusions.growth([1], [1])


def test_with_committed_leads_with_the_benchmark_then_says_how_busy_this_run_was():
    live_ok = conclusions.fit_slope([256, 512, 1024], [1.0, 4.0, 16.0], name="dense")
    live_unsure = conclusions.fit_slope([256, 512, 1024, 2048], [1.0, 4.0, 0.8, 3.0], name="dense")
    committed = conclusions.fit_slope([1024, 2048, 4096], [1.0, 4.0, 16.0], name="dense")
    assert str(conclusions.with_committed(live_ok, committed, machine="M")) == live_ok.message
    text = str(conclusions.with_committed(live_unsure, committed, load=3.25,
                                          machine="AMD EPYC, 2 threads, load average up to 0.9"))
    first, second = text.split("\n")
    assert first == ("the committed benchmark (AMD EPYC, 2 threads, load average up to 0.9): dense grows as n^2.00 "
                     "over n = 1024 ... 4096 (interval at 95%: 2.00 to 2.00)")
    assert second.startswith("this run's machine was busy (load average 3.2 on ") and live_unsure.message in second
    missing = str(conclusions.with_committed(live_unsure, None, machine="", missing="run python benchmarks/x.py"))
    assert missing.startswith("this run's machine was busy (load average ")
    assert missing.endswith("no committed figures to compare with: run python benchmarks/x.py")


def test_a_listed_name_is_printed_in_the_learners_language_and_any_other_as_given():
    try:
        english = conclusions.crossover([32, 64], [2.0, 3.0], name="one attention call", baseline="the RNN loop")
        assert english.message.startswith("one attention call is faster than the RNN loop at every measured length")
        i18n.set_language("zh-CN")
        chinese = conclusions.crossover([32, 64], [2.0, 3.0], name="one attention call", baseline="the RNN loop")
        shown = {name: str(labels.LABELS[name]) for name in ("one attention call", "the RNN loop")}
        assert all(shown.values()) and shown["the RNN loop"] != "the RNN loop"
        assert f"{shown['one attention call']}都快于 {shown['the RNN loop']}（" in chinese.message  # Latin: a space
        code = conclusions.fit_slope([1, 2, 4], [1.0, 2.0, 4.0], name="F.scaled_dot_product_attention")
        assert "F.scaled_dot_product_attention 按 n^1.00 增长" in code.message  # code keeps its name and its space
        assert labels.label("F.scaled_dot_product_attention") == "F.scaled_dot_product_attention"
    finally:
        i18n.set_language("en")
