"""The long-range tasks: right answers (checked against a plain re-computation), seeded, errors named; and one
benchmark run end to end at a small size."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_lab.measure.long_range import LONG_RANGE_ATTENTIONS, blind_accuracy, run_long_range, time_training_steps
from attention_lab.models.long_range_tasks import AssociativeRecall, ListOps
from attention_lab.models.tasks import IGNORE_INDEX, make_generator


@pytest.mark.parametrize("task", [AssociativeRecall(seq_len=40), ListOps(seq_len=40), AssociativeRecall(),
                                  ListOps(seq_len=300, n_groups=3, group_size=4)], ids=lambda t: t.name)
def test_shapes_ranges_and_solve(task):
    tokens, targets = task.sample(17, generator=make_generator(2))
    assert tokens.shape == targets.shape == (17, task.seq_len) and tokens.dtype == torch.long
    assert 0 <= int(tokens.min()) and int(tokens.max()) < task.vocab_size
    scored = targets[targets != IGNORE_INDEX]
    assert 0 <= int(scored.min()) and int(scored.max()) < task.n_symbols
    torch.testing.assert_close(task.solve(tokens), targets)


def test_recall_answers_by_reading_the_pairs():
    task = AssociativeRecall(seq_len=30, n_symbols=5, n_keys=6, n_pairs=3)
    tokens, targets = task.sample(200, generator=make_generator(0))
    v, k, p = 5, 6, 3
    for row, answer in zip(tokens.tolist(), targets.tolist()):
        pairs = {(t - v - 1 - k) // v: (t - v - 1 - k) % v for t in row if t > v + k}
        assert len(pairs) == p and sum(t == v for t in row) == 30 - 2 * p  # distinct keys, the rest filler
        asked = [t - v - 1 for t in row[-p:]]
        assert sorted(asked) == sorted(pairs) and answer[-p:] == [pairs[a] for a in asked]
        assert answer[:-p] == [IGNORE_INDEX] * (30 - p)
    assert task.token_labels(torch.tensor([0, 5, 6, 12 + 2 * 5 + 4])) == ["0", ".", "k0?", "k2:4"]


def test_listops_answers_by_evaluating_the_tree():
    task = ListOps(seq_len=50, n_symbols=10, n_groups=3, group_size=2)
    tokens, targets = task.sample(200, generator=make_generator(1))
    v, g = 10, 3
    for row, answer in zip(tokens.tolist(), targets.tolist()):
        digits = {group: [] for group in range(g)}
        ops = {}
        for position, t in enumerate(row[:-1]):
            if v < t < v + 1 + g * v:
                digits[(t - v - 1) // v].append((t - v - 1) % v)
            elif t >= v + 1 + g * v:
                ops[(t - v - 1 - g * v) // 2] = ((t - v - 1 - g * v) % 2, position)
        values = {}
        for group, (op, position) in ops.items():
            values[group] = max(digits[group]) if op == 0 else min(digits[group])
            assert answer[position] == values[group]
        outer = row[-1] - (v + 1 + g * v + 2 * g)
        assert answer[-1] == (max(values.values()) if outer == 0 else min(values.values()))
        assert sum(a != IGNORE_INDEX for a in answer) == g + 1
    assert task.token_labels(torch.tensor([10, 3 + 11, 11 + 30 + 3, 11 + 30 + 6])) == [".", "3g0", "MINg1", "MAX"]


@pytest.mark.parametrize("task", [AssociativeRecall(seq_len=64), ListOps(seq_len=64)], ids=lambda t: t.name)
def test_seeded_and_global_rng_untouched(task):
    state = torch.random.get_rng_state()
    a = task.sample(8, generator=make_generator(3))
    b = task.sample(8, generator=make_generator(3))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], task.sample(8, generator=make_generator(4))[0])


def test_bad_options_are_named():
    with pytest.raises(ValueError, match=r"AssociativeRecall\(\): n_pairs must be at most n_keys=4"):
        AssociativeRecall(n_keys=4, n_pairs=5)
    with pytest.raises(ValueError, match=r"AssociativeRecall\(\): seq_len must hold the pairs and the questions"):
        AssociativeRecall(seq_len=7, n_pairs=4)
    with pytest.raises(ValueError, match=r"ListOps\(\): seq_len must hold every operator and digit"):
        ListOps(seq_len=10, n_groups=3, group_size=3)
    with pytest.raises(TypeError, match=r"n_groups must be an int"):
        ListOps(n_groups=2.0)


def test_one_benchmark_run_end_to_end():
    result = run_long_range("recall", "linear", 64, steps=3)
    assert result.task == "recall" and result.attention == "linear" and result.n == 64 and result.steps == 3
    assert 0.0 <= result.accuracy <= 1.0 and result.steps_per_s > 0 and result.peak_bytes > 0
    assert set(LONG_RANGE_ATTENTIONS) >= {"softmax", "sliding", "sliding+global", "linear", "performer", "topk",
                                          "cluster", "linformer", "synthesizer"}
    with pytest.raises(ValueError, match=r"run_long_range\(\): attention must be one of"):
        run_long_range("recall", "flash", 64, steps=1)


def test_training_steps_are_timed_against_softmax():
    timing = time_training_steps("recall", 64, ["linear", "softmax"], rounds=2)
    assert timing.baseline == "softmax" and timing.ratio["softmax"] == 1.0
    assert set(timing.best_s) == {"linear", "softmax"} and all(s > 0 for s in timing.best_s.values())
    assert all(len(rounds) == 2 for rounds in timing.rounds_s.values())
    with pytest.raises(ValueError, match=r"time_training_steps\(\): attention must be one of .*got attention='flash'"):
        time_training_steps("recall", 64, ["softmax", "flash"])
    with pytest.raises(TypeError, match=r"time_training_steps\(\): attentions must be a non-empty list.*\['softmax'\]"):
        time_training_steps("recall", 64, "softmax")
    with pytest.raises(ValueError, match=r"time_training_steps\(\): rounds must be"):
        time_training_steps("recall", 64, ["softmax"], rounds=0)


@pytest.mark.slow
def test_benchmark_script_writes_every_column(tmp_path):
    path = tmp_path / "lr.csv"
    script = Path(__file__).parents[1] / "benchmarks" / "long_range.py"
    done = subprocess.run([sys.executable, str(script), "--quick", "--quick-steps", "2", "--tasks", "recall",
                           "--attentions", "softmax", "linear", "--jobs", "1", "--rounds", "1", "--csv", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["attention"] for r in rows] == ["softmax", "linear"] and {r["n"] for r in rows} == {"256"}
    assert all(float(r["steps_per_s"]) > 0 and float(r["peak_bytes"]) > 0 for r in rows)
    assert float(rows[0]["speed_vs_softmax"]) == 1.0 and float(rows[1]["speed_vs_softmax"]) > 0
    assert all(r["steps"] == "2" and r["train_steps_per_s"] for r in rows)


def test_blind_guess_is_the_best_answer_from_the_question_token_alone():
    # recall: the value does not depend on the key, so one value in four
    recall = AssociativeRecall(seq_len=64, n_symbols=4, n_keys=4, n_pairs=4)
    assert blind_accuracy(recall) == pytest.approx(0.25, abs=0.02)
    # one list of 3 digits 0-2: MAX is most often 2 (19/27), and the outer operator over that single list sees a
    # value that was a MAX or a MIN with equal odds: 2 or 0 each 10/27; the mean over both scored positions
    one_list = ListOps(seq_len=32, n_symbols=3, n_groups=1, group_size=3)
    assert blind_accuracy(one_list, n_sequences=20_000) == pytest.approx((19 / 27 + 10 / 27) / 2, abs=0.015)
    with pytest.raises(ValueError, match=r"blind_accuracy\(\): n_sequences must be"):
        blind_accuracy(one_list, n_sequences=0)
    with pytest.raises(TypeError, match=r"blind_accuracy\(\): task must be one of the package's tasks"):
        blind_accuracy("recall")
