"""Answers to lesson 09's exercises (reading attention): the last query's share on the pointed position, the fewest
heads a trained model needs, attention rollout for any depth. Exercise 2 runs on a small reversal model trained
here (two heads are needed: the threshold lies between the best single head and the best pair)."""

import itertools

import numpy as np
import torch

from attention_lab.analysis import attention_rollout
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import evaluate, train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.teaching.checks import lesson09

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


def no_return(*args):
    args[0]


# ---- 09/1: share_on_pointed(attention, tokens, n_symbols) ---------------------------------------------------------

def share_gather(attention, tokens, n_symbols):  # the lesson's solution
    pointed = tokens[:, -1] - n_symbols  # (b,)
    last_row = attention[..., -1, :]  # (layers, b, h, j)
    index = pointed[None, :, None, None].expand(last_row.shape[0], -1, last_row.shape[2], 1)
    return last_row.gather(-1, index)[..., 0].mean(dim=1)


def share_loop(attention, tokens, n_symbols):
    layers, b, h = attention.shape[:3]
    out = torch.zeros(layers, h)  # float32, whatever the attention's dtype
    for s in range(b):
        out += attention[:, s, :, -1, int(tokens[s, -1]) - n_symbols]
    return out / b


def share_indexing(attention, tokens, n_symbols):
    rows = torch.arange(tokens.shape[0])
    return attention[:, rows, :, -1, tokens[:, -1] - n_symbols].mean(dim=0)  # (b, layers, h) -> (layers, h)


def share_onehot_einsum_numpy(attention, tokens, n_symbols):
    onehot = torch.nn.functional.one_hot(tokens[:, -1] - n_symbols, attention.shape[-1]).to(attention.dtype)
    return torch.einsum("lbhj,bj->lh", attention[..., -1, :], onehot).numpy() / tokens.shape[0]


def share_list(attention, tokens, n_symbols):
    return share_gather(attention, tokens, n_symbols).tolist()


def share_last_key(attention, tokens, n_symbols):
    return attention[..., -1, -1].mean(dim=1)


def share_all_queries(attention, tokens, n_symbols):
    pointed = tokens[:, -1] - n_symbols
    rows = torch.arange(tokens.shape[0])
    return attention[:, rows, :, :, pointed].mean(dim=(0, 3))  # (b, layers, h, i) -> (layers, h)


def share_first_pointer(attention, tokens, n_symbols):
    return attention[:, :, :, -1, int(tokens[0, -1]) - n_symbols].mean(dim=1)


def share_summed(attention, tokens, n_symbols):
    return share_gather(attention, tokens, n_symbols) * tokens.shape[0]


def share_transposed(attention, tokens, n_symbols):
    return share_gather(attention, tokens, n_symbols).T


def share_plus_one(attention, tokens, n_symbols):
    return share_gather(attention, tokens + 1, n_symbols)


def share_minus_one(attention, tokens, n_symbols):
    return share_gather(attention, (tokens - 1).clamp(min=n_symbols), n_symbols)


def share_rows_for_columns(attention, tokens, n_symbols):
    rows = torch.arange(tokens.shape[0])
    return attention[:, rows, :, tokens[:, -1] - n_symbols, -1].mean(dim=0)


def share_token_id(attention, tokens, n_symbols):
    return share_gather(attention, tokens + n_symbols, n_symbols)


def share_over_heads(attention, tokens, n_symbols):
    return share_gather(attention, tokens, n_symbols).mean(dim=1)


def share_over_layers(attention, tokens, n_symbols):
    return share_gather(attention, tokens, n_symbols).mean(dim=0)


def share_median(attention, tokens, n_symbols):
    pointed = tokens[:, -1] - n_symbols
    rows = torch.arange(tokens.shape[0])
    return attention[:, rows, :, -1, pointed].median(dim=0).values


def share_hard_coded(attention, tokens, n_symbols):  # the lesson's batch: 500 sequences, 10 symbols
    rows = torch.arange(50)
    return attention[:2, rows, :2, -1, tokens[:50, -1] - 10].mean(dim=0)


def share_whole_mean(attention, tokens, n_symbols):
    return attention.mean(dim=(1, 3, 4))


def share_first_column(attention, tokens, n_symbols):
    return attention[..., -1, 0].mean(dim=1)


def share_one_sequence(attention, tokens, n_symbols):
    return attention[:, 0, :, -1, int(tokens[0, -1]) - n_symbols]


# ---- 09/2: keep, a (layers, h) mask --------------------------------------------------------------------------------

TASK = Reversal(seq_len=6, n_symbols=5)
N_SEQUENCES = 300


def _trained():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = TinyTransformer(TransformerConfig(vocab_size=TASK.vocab_size, max_len=TASK.seq_len, d_model=16,
                                                  num_heads=2, num_layers=2))
        train(model, TASK, steps=80, lr=0.01, warmup_steps=10, schedule="cosine", batch_size=32, progress=False)
    accuracies = {}
    for bits in itertools.product((True, False), repeat=4):  # computed here, independently of the check
        keep = torch.tensor(bits).view(2, 2)
        accuracies[bits] = evaluate(model, TASK, n_sequences=N_SEQUENCES, seed=10_000, head_mask=keep)[
            "token_accuracy"]
    singles = max(acc for bits, acc in accuracies.items() if sum(bits) == 1)
    pairs = max(acc for bits, acc in accuracies.items() if sum(bits) == 2)
    return model, accuracies, (singles + pairs) / 2  # no single head reaches the threshold, some pair does


MODEL, ACCURACIES, THRESHOLD = _trained()
GOOD = [bits for bits, acc in ACCURACIES.items() if acc >= THRESHOLD]
SMALLEST = [bits for bits in GOOD if sum(bits) == 2]
BEST = torch.tensor(SMALLEST[0]).view(2, 2)  # (layers, h)
PAIRS = BEST.nonzero()  # (2, 2): the (layer, head) of each kept head
WEAK = torch.tensor(max((b for b in ACCURACIES if sum(b) == 1), key=ACCURACIES.get)).view(2, 2)
TOO_MANY = torch.tensor(next(b for b in GOOD if sum(b) == 3)).view(2, 2)


def _mask(label, answer, *, right=False, hint=None):
    return Attempt("09/2", label, lesson09.smallest_head_set, answer, args=(MODEL, TASK),
                   kwargs={"threshold": THRESHOLD, "n_sequences": N_SEQUENCES}, right=right, hint=hint)


# ---- 09/3: rollout(attention, residual) ----------------------------------------------------------------------------

def rollout_right(attention, residual):  # the lesson's solution
    identity = torch.eye(attention.shape[-1], dtype=attention.dtype)
    flow = identity
    for weights in attention:  # layer 0 first
        flow = (residual * identity + (1 - residual) * weights.mean(dim=1)) @ flow
    return flow


def rollout_float32_eye(attention, residual):  # right on the model's float32 attention, fails on float64
    identity = torch.eye(attention.shape[-1])
    flow = identity
    for weights in attention:
        flow = (residual * identity + (1 - residual) * weights.mean(dim=1)) @ flow
    return flow


def rollout_expand(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    result = eye.expand(attention.shape[1], -1, -1)
    for layer in attention:
        result = (residual * eye + (1 - residual) * layer.mean(dim=1)) @ result
    return result


def rollout_einsum_numpy(attention, residual):
    mixed = residual * np.eye(attention.shape[-1]) + (1 - residual) * attention.double().mean(dim=2).numpy()
    result = mixed[0]
    for layer in mixed[1:]:
        result = np.einsum("bik,bkj->bij", layer, result)
    return result


def rollout_reversed_loop(attention, residual):
    mixed = [residual * torch.eye(attention.shape[-1], dtype=attention.dtype) + (1 - residual) * a.mean(dim=1)
             for a in attention]
    result = mixed[-1]
    for layer in reversed(mixed[:-1]):
        result = result @ layer
    return result


def rollout_float64(attention, residual):
    return rollout_right(attention.double(), residual)


def _mixed(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    return [residual * eye + (1 - residual) * layer.mean(dim=1) for layer in attention]


def rollout_left_to_right(attention, residual):
    m = _mixed(attention, residual)
    out = m[0]
    for layer in m[1:]:
        out = out @ layer
    return out


def rollout_two_layers(attention, residual):
    m = _mixed(attention, residual)
    return m[1] @ m[0] if len(m) > 1 else m[0]


def rollout_summed_heads(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    out = eye
    for layer in attention:
        out = (residual * eye + (1 - residual) * layer.sum(dim=1)) @ out
    return out


def rollout_identity_added(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    out = eye
    for layer in attention:
        out = (eye + layer.mean(dim=1)) @ out
    return out


def rollout_batch_mean(attention, residual):
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)
    out = eye
    for layer in attention:
        out = (residual * eye + (1 - residual) * layer.mean(dim=0)) @ out
    return out


def rollout_transposed(attention, residual):
    m = [layer.transpose(-2, -1) for layer in _mixed(attention, residual)]
    out = m[0]
    for layer in m[1:]:
        out = layer @ out
    return out


def rollout_every_step(attention, residual):
    m = _mixed(attention, residual)
    steps, out = [], None
    for layer in m:
        out = layer if out is None else layer @ out
        steps.append(out)
    return torch.stack(steps)


def rollout_library(attention, residual):
    return attention_rollout(attention, residual=residual)


def rollout_first_only(attention, residual):
    return _mixed(attention, residual)[0]


def rollout_half(attention, residual):
    return rollout_right(attention, 0.5)


def rollout_no_residual(attention, residual):
    return rollout_right(attention, 0.0)


def rollout_shares_swapped(attention, residual):
    return rollout_right(attention, 1 - residual)


def rollout_one_head(attention, residual):
    return rollout_right(attention[:, :, :1], residual)


def rollout_last_only(attention, residual):
    return _mixed(attention, residual)[-1]


def rollout_first_sequence(attention, residual):
    return rollout_right(attention, residual)[0]


def rollout_scaled(attention, residual):
    return 0.5 * rollout_right(attention, residual)


def rollout_out_of_range(attention, residual):
    return attention[5].mean(dim=1)


def rollout_text(attention, residual):
    return "R"


def _pointer(label, fn, *, right=False, hint=None):
    return Attempt("09/1", label, lesson09.pointer_attention, fn, right=right, hint=hint)


def _rollout(label, fn, *, right=False, hint=None):
    return Attempt("09/3", label, lesson09.general_rollout, fn, right=right, hint=hint)


ATTEMPTS = [
    _pointer("the lesson's solution", share_gather, right=True),
    _pointer("a loop with a float32 total", share_loop, right=True),
    _pointer("advanced indexing", share_indexing, right=True),
    _pointer("one-hot, einsum, numpy", share_onehot_einsum_numpy, right=True),
    _pointer("a list", share_list, right=True),
    _pointer("the pointer token itself", share_last_key, hint="pointer token itself"),
    _pointer("every query", share_all_queries, hint="only the last query"),
    _pointer("the first sequence's pointer", share_first_pointer, hint="its own pointer"),
    _pointer("summed", share_summed, hint="don't sum"),
    _pointer("transposed", share_transposed, hint="rows are layers"),
    _pointer("p + 1", share_plus_one, hint="not key p \\+ 1"),
    _pointer("p - 1", share_minus_one, hint="not key p - 1"),
    _pointer("rows for columns", share_rows_for_columns, hint="rows are queries and columns keys"),
    _pointer("the token id as a position", share_token_id, hint="id is n_symbols \\+ p"),
    _pointer("mean over heads too", share_over_heads, hint="not over the heads"),
    _pointer("mean over layers too", share_over_layers, hint="not over the layers"),
    _pointer("median", share_median, hint="not the median"),
    _pointer("the lesson's sizes written in", share_hard_coded, hint="raised IndexError"),
    _pointer("mean of everything", share_whole_mean, hint=GENERIC),
    _pointer("the first column", share_first_column, hint=GENERIC),
    _pointer("one sequence", share_one_sequence, hint=GENERIC),
    _pointer("a product of the inputs", lambda a, t, n: a @ t, hint="raised RuntimeError"),
    _pointer("two arguments", lambda a, t: a, hint="raised TypeError"),
    _pointer("no return", no_return, hint="is None"),
    _pointer("the stub", stub, hint="NotImplementedError"),
    _pointer("a tensor, not the function", torch.zeros(2, 2), hint="function itself"),
    _mask("a bool mask", BEST, right=True),
    _mask("a 0/1 list", BEST.int().tolist(), hint="the right heads, as a 0/1 mask"),
    _mask("a numpy bool array", BEST.numpy(), right=True),
    _mask("a 0/1 numpy array", BEST.numpy().astype(int), hint="the right heads, as a 0/1 mask"),
    _mask("nested lists of bools", BEST.tolist(), right=True),
    *(_mask(f"the other smallest set {i}", torch.tensor(bits).view(2, 2), right=True)
      for i, bits in enumerate(SMALLEST[1:])),
    _mask("the heads switched off", ~BEST, hint="True marks the heads you KEEP"),
    _mask("the best single head", WEAK, hint="below .*not enough"),
    _mask("every head", torch.ones(2, 2, dtype=torch.bool), hint="a smaller set does too"),
    _mask("three heads", TOO_MANY, hint="a smaller set does too"),
    _mask("no head", torch.zeros(2, 2, dtype=torch.bool), hint="with only no head"),
    _mask("flattened", BEST.flatten(), hint="one entry per layer and head"),
    _mask("(layer, head) pairs", PAIRS.tolist(), hint="read as \\(layer, head\\) pairs it would be right|reads as a "
                                                      "list of \\(layer, head\\) pairs"),
    _mask("one (layer, head) pair", PAIRS[0].tolist(), hint="reads as a list of \\(layer, head\\) pairs"),
    _mask("pairs counted from 1", (PAIRS + 1).tolist(), hint="not counted from 0"),
    _mask("weights, not a mask", BEST.float() * 0.5, hint="True for a kept head"),
    _mask("an accuracy", 0.99, hint="True for a kept head"),
    _mask("text", "layer 1 head 0", hint="should be a tensor"),
    _mask("None", None, hint="is None"),
    _mask("the untouched stub", ..., hint="still empty"),
    _rollout("the lesson's solution", rollout_right, right=True),
    _rollout("torch.eye without a dtype", rollout_float32_eye, right=True),
    _rollout("an expanded identity", rollout_expand, right=True),
    _rollout("einsum and numpy", rollout_einsum_numpy, right=True),
    _rollout("from the last layer down", rollout_reversed_loop, right=True),
    _rollout("in float64", rollout_float64, right=True),
    _rollout("left to right", rollout_left_to_right, hint="later layers on the left"),
    _rollout("no residual", rollout_no_residual, hint="add the residual path first"),
    _rollout("one head", rollout_one_head, hint="average the heads of each"),
    _rollout("one half", rollout_half, hint="not a fixed one half"),
    _rollout("shares swapped", rollout_shares_swapped, hint="residual share multiplies the identity"),
    _rollout("two layers", rollout_two_layers, hint="every layer"),
    _rollout("the last layer", rollout_last_only, hint="not only the last"),
    _rollout("the first layer", rollout_first_only, hint="not only the first"),
    _rollout("summed heads", rollout_summed_heads, hint="don't add them"),
    _rollout("identity added", rollout_identity_added, hint="don't just add it"),
    _rollout("mean over the batch", rollout_batch_mean, hint="not over the batch"),
    _rollout("transposed layers", rollout_transposed, hint="not transposed"),
    _rollout("one matrix per layer", rollout_every_step, hint="not one matrix after each layer"),
    _rollout("the library's attention_rollout", rollout_library, hint="calls the library's attention_rollout"),
    _rollout("one sequence", rollout_first_sequence, hint="one \\(i, j\\) matrix per sequence"),
    _rollout("scaled", rollout_scaled, hint=GENERIC),
    _rollout("an index out of range", rollout_out_of_range, hint="raised IndexError"),
    _rollout("text", rollout_text, hint="should be a tensor"),
    _rollout("one argument", lambda attention: attention, hint="raised TypeError"),
    _rollout("no return", no_return, hint="is None"),
    _rollout("the stub", stub, hint="NotImplementedError"),
    _rollout("a result, not the function", rollout_right(torch.ones(1, 1, 1, 2, 2) / 2, 0.5),
             hint="function itself"),
]
