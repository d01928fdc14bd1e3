"""The toy tasks: right answers, seeded and independent of the global RNG, clear errors."""

import pytest
import torch

from attention_lab.models.tasks import IGNORE_INDEX, PointerLookup, Reversal, Sorting, make_generator

ALL = [Reversal(seq_len=7, n_symbols=5), Sorting(seq_len=6, n_symbols=9), PointerLookup(seq_len=9, n_symbols=4)]


@pytest.mark.parametrize("task", ALL, ids=lambda t: t.name)
def test_shapes_dtypes_and_ranges(task):
    tokens, targets = task.sample(33, generator=make_generator(1))
    assert tokens.shape == targets.shape == (33, task.seq_len)
    assert tokens.dtype == targets.dtype == torch.long
    assert 0 <= int(tokens.min()) and int(tokens.max()) < task.vocab_size
    scored = targets[targets != IGNORE_INDEX]
    assert 0 <= int(scored.min()) and int(scored.max()) < task.n_symbols
    torch.testing.assert_close(task.solve(tokens), targets)


def test_reversal_reads_backwards():
    tokens, targets = Reversal(seq_len=5, n_symbols=10).sample(200, generator=make_generator(0))
    for row_in, row_out in zip(tokens.tolist(), targets.tolist()):
        assert row_out == row_in[::-1]


def test_sorting_is_a_sorted_permutation():
    tokens, targets = Sorting(seq_len=8, n_symbols=3).sample(200, generator=make_generator(0))  # many repeats
    for row_in, row_out in zip(tokens.tolist(), targets.tolist()):
        assert row_out == sorted(row_in)


def test_pointer_lookup_answers_with_the_pointed_symbol_at_the_last_position_only():
    task = PointerLookup(seq_len=6, n_symbols=10)
    tokens, targets = task.sample(500, generator=make_generator(0))
    pointers = tokens[:, -1] - task.n_symbols
    assert set(pointers.tolist()) == set(range(task.seq_len - 1))  # every position, the first one included
    assert (tokens[:, :-1] < task.n_symbols).all()
    assert (targets[:, :-1] == IGNORE_INDEX).all()
    for row, pointer, answer in zip(tokens.tolist(), pointers.tolist(), targets[:, -1].tolist()):
        assert answer == row[pointer]
    assert task.vocab_size == 10 + 5
    assert task.token_labels(torch.tensor([3, 0, 12])) == ["3", "0", "->2"]


@pytest.mark.parametrize("task", ALL, ids=lambda t: t.name)
def test_a_seed_fixes_the_batches_and_the_global_rng_is_untouched(task):
    state = torch.random.get_rng_state()
    a = task.sample(16, generator=make_generator(3))
    b = task.sample(16, generator=make_generator(3))
    c = task.sample(16, generator=make_generator(4))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    g = make_generator(3)
    first, second = task.sample(16, generator=g), task.sample(16, generator=g)
    assert torch.equal(first[0], a[0]) and not torch.equal(second[0], first[0])  # one stream, fresh batches


def test_bad_inputs_get_clear_errors():
    with pytest.raises(ValueError, match=r"Reversal\(\): seq_len must be >= 2, got seq_len=1"):
        Reversal(seq_len=1)
    with pytest.raises(ValueError, match=r"Sorting\(\): n_symbols must be >= 2"):
        Sorting(n_symbols=1)
    with pytest.raises(TypeError, match=r"seq_len must be an int, got float"):
        PointerLookup(seq_len=8.0)
    with pytest.raises(ValueError, match=r"Reversal.sample\(\): batch_size must be >= 1, got batch_size=0"):
        Reversal().sample(0, generator=make_generator(0))
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator, got int; make one with"):
        Reversal().sample(4, generator=0)
    with pytest.raises(ValueError, match=r"make_generator\(\): seed must be >= 0"):
        make_generator(-1)
