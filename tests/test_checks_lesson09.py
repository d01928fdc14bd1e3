"""Lesson 09 checks accept every correct form of an answer, name each common mistake in its own hint, turn an error
inside the learner's code into a hint, and count layers and heads from 0."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab.analysis import attention_rollout
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import evaluate, train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.teaching.checks import lesson09 as check

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- exercise 1: the last query's weight on the pointed position -------------------------------------------------

def share_loop(attention, tokens, n_symbols):
    layers, b, h = attention.shape[:3]
    out = torch.zeros(layers, h, dtype=attention.dtype)
    for s in range(b):
        out += attention[:, s, :, -1, int(tokens[s, -1]) - n_symbols]
    return out / b


def share_gather(attention, tokens, n_symbols):
    pointed = tokens[:, -1] - n_symbols  # (b,)
    last = attention[..., -1, :]  # (layers, b, h, j)
    index = pointed[None, :, None, None].expand(last.shape[0], -1, last.shape[2], 1)
    return last.gather(-1, index).squeeze(-1).mean(dim=1)


def share_indexing(attention, tokens, n_symbols):
    rows = torch.arange(tokens.shape[0])
    return attention[:, rows, :, -1, tokens[:, -1] - n_symbols].mean(dim=0)  # (b, layers, h) -> (layers, h)


def share_onehot_numpy(attention, tokens, n_symbols):
    onehot = torch.nn.functional.one_hot(tokens[:, -1] - n_symbols, attention.shape[-1]).double()  # (b, j)
    return torch.einsum("lbhj,bj->lh", attention[..., -1, :], onehot).numpy() / tokens.shape[0]


@pytest.mark.parametrize("fn", [share_loop, share_gather, share_indexing, share_onehot_numpy,
                                lambda a, t, n: share_gather(a.float(), t, n)])
def test_pointer_attention_accepts_every_correct_form(fn, capsys):
    accepts(capsys, check.pointer_attention, fn)


def test_pointer_attention_names_each_mistake():
    def last_key(a, t, n):
        return a[..., -1, -1].mean(dim=1)

    def all_queries(a, t, n):
        return torch.stack([share_gather(a[..., i:i + 1, :], t, n) for i in range(a.shape[-2])]).mean(dim=0)

    def first_pointer(a, t, n):
        return a[:, :, :, -1, int(t[0, -1]) - n].mean(dim=1)

    rejects(check.pointer_attention, last_key, match="pointer token itself")
    rejects(check.pointer_attention, all_queries, match="only the last query")
    rejects(check.pointer_attention, first_pointer, match="its own pointer")
    rejects(check.pointer_attention, lambda a, t, n: share_gather(a, t, n) * t.shape[0], match="don't sum")
    rejects(check.pointer_attention, lambda a, t, n: share_gather(a, t, n).T, match="rows are layers")
    rejects(check.pointer_attention, lambda a, t, n: share_gather(a, t + 1, n), match="not key p \\+ 1")
    rejects(check.pointer_attention, lambda a, t, n: share_gather(a, (t - 1).clamp(min=n), n), match="not key p - 1")

    def swapped(a, t, n):
        rows = torch.arange(t.shape[0])
        return a[:, rows, :, t[:, -1] - n, -1].mean(dim=0)

    rejects(check.pointer_attention, swapped, match="rows are queries and columns keys")
    rejects(check.pointer_attention, lambda a, t, n: a.mean(dim=(1, 3, 4)), match="last query's row")
    rejects(check.pointer_attention, lambda a, t, n: a[..., -1, 0].mean(dim=1)[0], match="one share per layer")


def test_pointer_attention_refuses_hard_coded_sizes():
    """The lesson's batch is (2, 500, 2, 8, 8); the check also tries 3 layers, 4 heads, length 6."""
    def hard_coded(a, t, n):
        rows = torch.arange(50)
        return a[:2, rows, :2, -1, t[:50, -1] - 10].mean(dim=0)

    rejects(check.pointer_attention, hard_coded, match="")


def test_pointer_attention_turns_errors_into_hints():
    rejects(check.pointer_attention, lambda a, t, n: share_gather(a, t + n, n), match="id is n_symbols \\+ p")
    rejects(check.pointer_attention, lambda a, t, n: a @ t, match="raised RuntimeError")
    rejects(check.pointer_attention, lambda a, t: a, match="raised TypeError")
    rejects(check.pointer_attention, lambda a, t, n: None, match="is None")
    rejects(check.pointer_attention, torch.zeros(2, 2), match="function itself")


# --- exercise 2: the fewest heads that keep the accuracy -----------------------------------------------------------

TASK = Reversal(seq_len=6, n_symbols=5)
N_SEQUENCES = 300


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=TASK.vocab_size, max_len=TASK.seq_len, d_model=16, num_heads=2,
                                              num_layers=2))
    train(model, TASK, steps=80, lr=0.01, warmup_steps=10, schedule="cosine", batch_size=32, progress=False)
    accuracies = {}
    for layer_bits in itertools.product((1, 0), repeat=4):  # computed here, independently of the check
        keep = torch.tensor(layer_bits, dtype=torch.bool).view(2, 2)
        accuracies[layer_bits] = evaluate(model, TASK, n_sequences=N_SEQUENCES, head_mask=keep)["token_accuracy"]
    singles = [acc for bits, acc in accuracies.items() if sum(bits) == 1]
    pairs = {bits: acc for bits, acc in accuracies.items() if sum(bits) == 2}
    threshold = (max(singles) + max(pairs.values())) / 2  # no single head reaches it, some pair does
    assert max(singles) < threshold < max(pairs.values()), "the trained model should need two heads"
    return model, accuracies, threshold


def smallest(accuracies, threshold):
    good = [bits for bits, acc in accuracies.items() if acc >= threshold]
    fewest = min(sum(bits) for bits in good)
    return [bits for bits in good if sum(bits) == fewest]


def test_smallest_head_set_accepts_any_smallest_set_in_any_form(trained, capsys):
    model, accuracies, threshold = trained
    kw = dict(threshold=threshold, n_sequences=N_SEQUENCES)
    for bits in smallest(accuracies, threshold):
        mask = torch.tensor(bits, dtype=torch.bool).view(2, 2)
        accepts(capsys, check.smallest_head_set, mask, model, TASK, **kw)
        accepts(capsys, check.smallest_head_set, mask.int().tolist(), model, TASK, **kw)
        accepts(capsys, check.smallest_head_set, np.array(bits).reshape(2, 2), model, TASK, **kw)
    check.smallest_head_set(mask, model, TASK, **kw)
    message = capsys.readouterr().out
    layer, head = mask.nonzero()[0].tolist()
    assert f"layer {layer} head {head}" in message  # counted from 0, like the mask's indices


def test_smallest_head_set_names_each_mistake(trained):
    model, accuracies, threshold = trained
    kw = dict(threshold=threshold, n_sequences=N_SEQUENCES)
    bits = smallest(accuracies, threshold)[0]
    mask = torch.tensor(bits, dtype=torch.bool).view(2, 2)
    rejects(check.smallest_head_set, ~mask, model, TASK, **kw, match="True marks the heads you KEEP")
    weak = max((b for b in accuracies if sum(b) == 1), key=lambda b: accuracies[b])
    rejects(check.smallest_head_set, torch.tensor(weak).view(2, 2), model, TASK, **kw, match="below .*not enough")
    rejects(check.smallest_head_set, torch.ones(2, 2, dtype=torch.bool), model, TASK, **kw,
            match="a smaller set does too")
    rejects(check.smallest_head_set, mask.flatten(), model, TASK, **kw, match="one entry per layer and head")
    rejects(check.smallest_head_set, mask.float() * 0.5, model, TASK, **kw, match="True \\(or 1\\) for a kept head")
    rejects(check.smallest_head_set, [(1, 0), (1, 2)], model, TASK, **kw, match="True \\(or 1\\) for a kept head")
    rejects(check.smallest_head_set, None, model, TASK, **kw, match="is None")


# --- exercise 3: rollout for any depth and residual share --------------------------------------------------------

def rollout_loop(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    result = eye.expand(attention.shape[1], -1, -1)
    for layer in attention:
        result = (residual * eye + (1 - residual) * layer.mean(dim=1)) @ result
    return result


def rollout_einsum_numpy(attention, residual):
    mixed = residual * np.eye(attention.shape[-1]) + (1 - residual) * attention.mean(dim=2).numpy()
    result = mixed[0]
    for layer in mixed[1:]:
        result = np.einsum("bik,bkj->bij", layer, result)
    return result


@pytest.mark.parametrize("fn", [rollout_loop, rollout_einsum_numpy, lambda a, r: attention_rollout(a, residual=r),
                                lambda a, r: rollout_loop(a.float(), r)])
def test_general_rollout_accepts_every_correct_form(fn, capsys):
    accepts(capsys, check.general_rollout, fn)


def test_general_rollout_names_each_mistake():
    def mixed(a, r):
        eye = torch.eye(a.shape[-1], dtype=a.dtype)
        return [r * eye + (1 - r) * layer.mean(dim=1) for layer in a]

    def left_to_right(a, r):
        out = mixed(a, r)[0]
        for layer in mixed(a, r)[1:]:
            out = out @ layer
        return out

    def two_layers(a, r):
        m = mixed(a, r)
        return m[1] @ m[0] if len(m) > 1 else m[0]

    rejects(check.general_rollout, left_to_right, match="later layers on the left")
    rejects(check.general_rollout, lambda a, r: rollout_loop(a, 0.0), match="add the residual path first")
    rejects(check.general_rollout, lambda a, r: rollout_loop(a[:, :, :1], r), match="average the heads of each")
    rejects(check.general_rollout, lambda a, r: rollout_loop(a, 0.5), match="not a fixed one half")
    rejects(check.general_rollout, lambda a, r: rollout_loop(a, 1 - r) if r != 0.5 else rollout_loop(a, r),
            match="residual share multiplies the identity")
    rejects(check.general_rollout, two_layers, match="every layer")
    rejects(check.general_rollout, lambda a, r: mixed(a, r)[-1], match="not only the last")
    rejects(check.general_rollout, lambda a, r: rollout_loop(a, r)[0], match="one \\(i, j\\) matrix per sequence")

    def summed_heads(a, r):
        eye = torch.eye(a.shape[-1], dtype=a.dtype)
        out = eye
        for layer in a:
            out = (r * eye + (1 - r) * layer.sum(dim=1)) @ out
        return out

    rejects(check.general_rollout, summed_heads, match="don't add them")


def test_general_rollout_turns_errors_into_hints():
    rejects(check.general_rollout, lambda a: a, match="raised TypeError")
    rejects(check.general_rollout, lambda a, r: a[5].mean(dim=1), match="raised IndexError")
    rejects(check.general_rollout, lambda a, r: a[-1] @ a[0], match="one \\(i, j\\) matrix per sequence")
    rejects(check.general_rollout, lambda a, r: "R", match="should be a tensor")
    rejects(check.general_rollout, rollout_loop(torch.ones(1, 1, 1, 2, 2) / 2, 0.5), match="function itself")


# --- every check (that each is guarded: tests/test_checks_guarded.py) -----------------------------------------------

def test_the_stub_of_every_function_exercise_gets_a_hint_not_a_traceback():
    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for exercise in (check.pointer_attention, check.general_rollout):
        rejects(exercise, stub, match="NotImplementedError")


def test_fallbacks_describe_the_idea_not_the_code(trained):
    model, accuracies, threshold = trained
    messages = [
        hint_of(check.pointer_attention, lambda a, t, n: a[..., 0, 0].mean(dim=1)),
        hint_of(check.general_rollout, lambda a, r: rollout_loop(a, r) * 0.5),
        hint_of(check.smallest_head_set, torch.ones(2, 2, dtype=torch.bool), model, TASK, threshold=threshold,
                n_sequences=N_SEQUENCES),
    ]
    for message in messages:
        for code in ("gather", "[..., -1", "@", ".mean(", "torch.", "itertools", "product(", "head_mask="):
            assert code not in message, (code, message)


def hint_of(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        fn(*args, **kwargs)
    return str(error.value)
