"""Lesson 09 checks: what tests/answers/lesson09.py does not show on its own. A float32 rollout (the model's dtype)
is right; the library's attention_rollout is not an answer; an answer written as (layer, head) pairs gets a hint
that says how it was read, never one about a set it did not mean; layers and heads are counted from 0; every
check tries more than one input; the untouched student copy meets a one-line hint at every check."""

from __future__ import annotations

import itertools

import nbformat
import pytest
import torch
from _check_helpers import inputs_tried, rejects
from answers.lesson09 import share_gather

from attention_lab.analysis import attention_rollout
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import evaluate, train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.teaching.checks import lesson09 as check


def hint_of(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        fn(*args, **kwargs)
    return str(error.value)


def rollout_float32(attention, residual):  # torch.eye without a dtype: right on the model's float32 attention
    identity = torch.eye(attention.shape[-1])
    flow = identity
    for weights in attention:
        flow = (residual * identity + (1 - residual) * weights.mean(dim=1)) @ flow
    return flow


def test_a_float32_rollout_is_right_and_told_about_float64(capsys):
    """Issue 20: it was rejected with a guess about 'a tensor of the notebook'."""
    check.general_rollout(rollout_float32)
    out = capsys.readouterr().out
    assert out.startswith("Correct") and "float64" in out and "notebook" not in out


def test_the_rollout_check_tries_float32_first_and_float64_too():
    tried = inputs_tried(check.general_rollout, rollout_float32)  # (attention, residual) per case
    dtypes = [attention.dtype for attention, _ in tried]
    assert dtypes[0] == torch.float32 and torch.float64 in dtypes
    assert len({attention.shape[0] for attention, _ in tried}) >= 3  # depths
    assert len({residual for _, residual in tried}) >= 3  # residual shares

    def wrong_on_float64_only(attention, residual):
        return rollout_float32(attention, residual) if attention.dtype == torch.float32 else attention[0, :, 0]

    rejects(check.general_rollout, wrong_on_float64_only, match="")


def test_the_librarys_rollout_is_not_an_answer():
    rejects(check.general_rollout, lambda a, r: attention_rollout(a, residual=r), match="calls the library's")


def test_the_answer_cell_holds_no_comparison_that_raises_before_the_check():
    """Issue 20: 09/3's answer cell ran torch.testing.assert_close against the library before the check spoke."""
    from _student_exercises import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "09_visualizing_attention.ipynb", as_version=4)
    answers = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    for source in answers:
        after = source.split("### END SOLUTION", 1)[1]
        assert not after.strip(), f"lines after the solution region: {after!r}"


TASK = Reversal(seq_len=6, n_symbols=5)
N_SEQUENCES = 300


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=TASK.vocab_size, max_len=TASK.seq_len, d_model=16, num_heads=2,
                                              num_layers=2))
    train(model, TASK, steps=80, lr=0.01, warmup_steps=10, schedule="cosine", batch_size=32, progress=False)
    accuracies = {}
    for bits in itertools.product((1, 0), repeat=4):  # computed here, independently of the check
        keep = torch.tensor(bits, dtype=torch.bool).view(2, 2)
        accuracies[bits] = evaluate(model, TASK, n_sequences=N_SEQUENCES, seed=10_000, head_mask=keep)["token_accuracy"]
    singles = [acc for bits, acc in accuracies.items() if sum(bits) == 1]
    pairs = {bits: acc for bits, acc in accuracies.items() if sum(bits) == 2}
    threshold = (max(singles) + max(pairs.values())) / 2  # no single head reaches it, some pair does
    assert max(singles) < threshold < max(pairs.values()), "the trained model should need two heads"
    smallest = [bits for bits, acc in pairs.items() if acc >= threshold]
    return model, dict(threshold=threshold, n_sequences=N_SEQUENCES), smallest


def test_a_mask_of_zeros_and_ones_is_a_mask(trained, capsys):
    model, kw, smallest = trained
    for bits in smallest:
        assert "the right heads, as a 0/1 mask" in hint_of(check.smallest_head_set,
                                                           torch.tensor(bits).int().view(2, 2).tolist(), model, TASK,
                                                           **kw)  # read as a mask, and asked for as bool
        layer, head = torch.tensor(bits).view(2, 2).nonzero()[0].tolist()
        check.smallest_head_set(torch.tensor(bits, dtype=torch.bool).view(2, 2), model, TASK, **kw)
        assert f"layer {layer} head {head}" in capsys.readouterr().out  # counted from 0, like the mask's indices


def test_pairs_get_a_hint_about_how_they_were_read(trained):
    """Issue 20: a 0/1 list of (layer, head) pairs was read as a mask and got a hint about a set it never meant."""
    model, kw, smallest = trained
    for bits in smallest:
        pairs = torch.tensor(bits, dtype=torch.bool).view(2, 2).nonzero().tolist()  # [[layer, head], [layer, head]]
        message = hint_of(check.smallest_head_set, pairs, model, TASK, **kw)
        assert "(layer, head) pairs" in message, message
        assert "measure every subset" not in message and "not enough" not in message, message
    assert "(layer, head) pairs" in hint_of(check.smallest_head_set, [1, 0], model, TASK, **kw)
    assert "not counted from 0" in hint_of(check.smallest_head_set, [[2, 1], [2, 2]], model, TASK, **kw)


def test_the_pointer_check_tries_two_dtypes_and_two_sizes():
    cases = inputs_tried(check.pointer_attention, share_gather)  # (attention, tokens, n_symbols) per case
    assert {a.dtype for a, _, _ in cases} == {torch.float32, torch.float64}
    assert len({a.shape for a, _, _ in cases}) == 2


def test_hints_name_the_learners_function():
    def share_on_pointed(attention, tokens, n_symbols):
        raise NotImplementedError

    def rollout(attention, residual):
        return attention[5]

    assert "your share_on_pointed still raises NotImplementedError" in hint_of(check.pointer_attention,
                                                                               share_on_pointed)
    assert "your rollout raised IndexError" in hint_of(check.general_rollout, rollout)


def test_fallbacks_describe_the_idea_not_the_code(trained):
    model, kw, _ = trained
    messages = [
        hint_of(check.pointer_attention, lambda a, t, n: a[..., 0, 0].mean(dim=1) * 0.3),
        hint_of(check.general_rollout, lambda a, r: rollout_float32(a.float(), r) * 0.5),
        hint_of(check.smallest_head_set, torch.ones(2, 2, dtype=torch.bool), model, TASK, **kw),
    ]
    for message in messages:
        for code in ("gather", "[..., -1", "@", ".mean(", "torch.", "itertools", "product(", "head_mask="):
            assert code not in message, (code, message)
