"""Checks for lesson 07 (blockwise and block-sparse attention): merging two blocks' summaries (exercise 1), the bug in
a lazy blockwise step (exercise 2: an input that exposes it, then the fix that keeps the lazy rule), and a layout that
connects every pair within a budget at two lengths (exercise 3).

For exercise 2 the checks keep their own copy of the lesson's loop, of its buggy step and of the common wrong fixes
(:mod:`._lesson07_loop`), to tell the learner's step apart from each.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ...efficient.block_sparse import BlockLayout
from ...i18n import msg
from ...reference import attention as plain_attention
from ._core import NONE_HINT, as_tensor, call_learner, close, correct, fallback_hint, guard_errors, hint
from ._lesson07_loop import (
    LAZY_MARGIN,
    UPDATE_MISTAKES,
    blockwise_loop,
    lazy_shifts,
    lazy_update,
    shift_moves,
    update_cases,
)

__all__ = ["connected_layout", "exposing_input", "fixed_update", "merge_blocks"]  # the checks; the rest: machinery


def _summary(scores: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One key block's m (row maximum), l (sum of exp(score - m)) and o (its own softmax output).

    Shape: scores ``(i, jb)``, v ``(jb, dv)`` -> m, l ``(i, 1)``, o ``(i, dv)``.
    """
    m = scores.amax(dim=-1, keepdim=True)  # (i, 1)
    e = torch.exp(scores - m)  # (i, jb)
    return m, e.sum(dim=-1, keepdim=True), (e @ v) / e.sum(dim=-1, keepdim=True)


def _merge_case(seed: int, n_rows: int, n_a: int, n_b: int, dv: int, b_offset: float):
    """Two blocks' summaries and the attention over both blocks' keys, in float64.

    Shape: the summaries m, l ``(i, 1)`` and o ``(i, dv)``; expected ``(i, dv)``.
    """
    generator = torch.Generator().manual_seed(seed)
    scores_a = torch.randn(n_rows, n_a, generator=generator, dtype=torch.float64) * 3  # (i, ja)
    scores_b = torch.randn(n_rows, n_b, generator=generator, dtype=torch.float64) * 3 + b_offset  # (i, jb)
    v_a = torch.randn(n_a, dv, generator=generator, dtype=torch.float64)
    v_b = torch.randn(n_b, dv, generator=generator, dtype=torch.float64)
    expected = torch.softmax(torch.cat([scores_a, scores_b], dim=-1), dim=-1) @ torch.cat([v_a, v_b])  # (i, dv)
    return (*_summary(scores_a, v_a), *_summary(scores_b, v_b)), expected


def _merge_mistakes(m_a, l_a, o_a, m_b, l_b, o_b):
    """What the common wrong merges give, each with its hint. Shape: each result ``(i, dv)``."""
    top = torch.maximum(m_a, m_b)  # (i, 1)
    e_a, e_b = torch.exp(m_a - top), torch.exp(m_b - top)  # (i, 1) each
    share_a, share_b = l_a * e_a, l_b * e_b
    return [
        ((o_a + o_b) / 2, msg("the two blocks do not count equally: a block whose scores are larger holds more of "
                              "the weight")),
        ((l_a * o_a + l_b * o_b) / (l_a + l_b),
         msg("l_a and l_b were computed with different shifts m_a and m_b, so they cannot be added as they are: "
             "bring both to one common shift first")),
        (share_a * o_a + share_b * o_b,
         msg("the weights of the two blocks should sum to 1: divide by the total of both blocks' shares of the "
             "denominator")),
        ((l_a * o_a / e_a + l_b * o_b / e_b) / (l_a / e_a + l_b / e_b),
         msg("the factor that brings a block's sum to a larger shift is at most 1: measured against a larger "
             "shift, the block's terms shrink")),
        (torch.where(m_a >= m_b, o_a, o_b),
         msg("the block with the larger maximum does not take the whole row: both blocks' keys share the weight, "
             "as in a softmax over every key")),
        ((e_a * o_a + e_b * o_b) / (e_a + e_b),
         msg("each block's weight also depends on l, how much the block's keys add up to, not only on its "
             "maximum: a block of many keys near its maximum weighs more")),
        ((o_a * e_a + o_b * e_b) / (share_a + share_b),
         msg("o_a and o_b are already divided by their own l (unlike acc in section 2): multiply each by its "
             "block's share before adding")),
    ]


# Six rows where block b scores higher; one row, more value features and block a far ahead; two alike blocks.
_MERGE_CASES = (dict(seed=7, n_rows=6, n_a=5, n_b=4, dv=3, b_offset=2.0),
                dict(seed=8, n_rows=1, n_a=3, n_b=7, dv=5, b_offset=-6.0),
                dict(seed=9, n_rows=4, n_a=2, n_b=2, dv=2, b_offset=0.0))


@guard_errors
def merge_blocks(answer: object) -> None:
    """Exercise 1: ``merge(m_a, l_a, o_a, m_b, l_b, o_b)`` -> the output of attention over both key blocks.

    Each block's summary: ``m`` its row maximum of scores, ``l`` the sum of exp(score - m), ``o`` its own softmax
    output (normalised within the block). Tried on several sizes, with either block ahead, and with scores near 1e4.
    Shapes: m, l ``(i, 1)``, o ``(i, dv)``.
    """
    if answer is None or not callable(answer):
        hint(msg("define a function merge(m_a, l_a, o_a, m_b, l_b, o_b) and pass the function itself"))
    merge: Callable[..., object] = answer  # type: ignore[assignment]
    for index, case in enumerate(_MERGE_CASES):
        summaries, expected = _merge_case(**case)
        got = call_learner(merge, *(t.clone() for t in summaries))
        if got is None:
            hint(NONE_HINT)
        got = as_tensor(got, msg("what merge returns"))
        if got.shape != expected.shape:
            hint(msg("merge should return one output row per query and one column per value feature: shape "
                     "{expected} for m of shape {m_shape} and o of shape {o_shape}; yours has {shape}",
                     expected=tuple(expected.shape), m_shape=tuple(summaries[0].shape),
                     o_shape=tuple(summaries[2].shape), shape=tuple(got.shape)))
        # float32 tolerances: a correct merge computed in float32 (or via logsumexp) must pass too
        if close(got, expected, atol=1e-5, rtol=1e-5):
            continue
        for wrong, message in _merge_mistakes(*summaries):
            if close(got, wrong, atol=1e-5, rtol=1e-5):
                hint(message)
        if index > 0 and close(got, _merge_case(**_MERGE_CASES[0])[1], atol=1e-5, rtol=1e-5):
            hint(msg("merge returns the first case's output for other inputs: compute it from its arguments"))
        fallback_hint(msg("the output over both blocks is a weighted sum of o_a and o_b: each block's weight is "
                          "its share of the softmax denominator over all keys, once both sums are written with the "
                          "same shift"))
    summaries, expected = _merge_case(**_MERGE_CASES[0])
    m_a, l_a, o_a, m_b, l_b, o_b = summaries
    big = call_learner(merge, m_a + 1e4, l_a.clone(), o_a.clone(), m_b + 1e4, l_b.clone(), o_b.clone())  # same weights
    big = as_tensor(big, msg("what merge returns")) if big is not None else None
    # scores near 1e4 hold fewer significant digits in float32: the default, looser tolerance of close()
    if big is None or not (bool(torch.isfinite(big).all()) and close(big, expected)):
        hint(msg("right for small scores, but with scores near 1e4 exp() overflows: only ever exponentiate the "
                 "difference between a block's maximum and the larger maximum (a number <= 0)"))
    correct(msg("both blocks now share one shift, and the merge equals the softmax over all keys of both blocks, "
                "for every size tried and for scores near 1e4"))


# --- exercise 2: the lazy blockwise step -------------------------------------------------------------------------

@guard_errors
def exposing_input(q: object, k: object, v: object, block_size: object) -> None:
    """Exercise 2a: inputs on which the lesson's ``blockwise_loop(q, k, v, block_size, lazy_update)`` is wrong.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``; ``block_size`` a whole number >= 1.
    """
    q, k, v = (as_tensor(x, name).double() for x, name in ((q, msg("your q")), (k, msg("your k")),
                                                           (v, msg("your v"))))
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size < 1:
        hint(msg("block_size should be a whole number of keys, at least 1; got {block_size!r}",
                 block_size=block_size))
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        hint(msg("q, k and v hold one vector per row: at least two dimensions each, (tokens, features)"))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        hint(msg("q and k need the same feature size, k and v the same number of keys; got q {q}, k {k}, v {v}",
                 q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape)))
    if not all(bool(torch.isfinite(x).all()) for x in (q, k, v)):
        hint(msg("use finite numbers: inf or NaN break every attention, the right one too"))
    expected = plain_attention(q, k, v)[0]
    if not bool(torch.isfinite(expected).all()):
        hint(msg("the scores are so large that even plain attention overflows here: the bug hides behind that"))
    got = blockwise_loop(q, k, v, int(block_size), lazy_update)
    gap = (got - expected).abs().max().item() if bool(torch.isfinite(got).all()) else math.inf
    if gap > 1e-6:
        correct(msg("on these inputs the lazy loop is off by up to {gap:.3g}: the bug shows when a later block's "
                    "scores jump far above the first block's", gap=gap))
        return
    if k.shape[-2] <= int(block_size):
        hint(msg("all your keys fit in one block, so the loop runs its step once, and one step cannot go wrong"))
    if not shift_moves(q, k, int(block_size)):
        hint(msg("in every row, no later key block beats the shift by more than {margin:g}, so the lazy step never "
                 "moves its shift and the output is right: give some query much higher scores in a later key "
                 "block", margin=LAZY_MARGIN))
    hint(msg("the shift moves, yet the output is right: the keys before the block that moves it have values of zero "
             "(or nearly), so the sums the bug leaves unscaled add nothing; give those keys other values"))


@guard_errors
def fixed_update(answer: object) -> None:
    """Exercise 2b: the lesson's lazy step with its bug fixed, ``update(m, l, acc, s, v_block) -> (m, l, acc)``,
    keeping its rule: the shift moves only when a block's maximum beats it by more than the margin.

    Tried on 2-D and batched inputs, lengths that are not a multiple of the block, scores that jump between blocks
    and scores near 1e4, all in float64 against plain attention.
    """
    if answer is None or not callable(answer):
        hint(msg("define a function update(m, l, acc, s, v_block) and pass the function itself"))
    cases = update_cases()
    for index, (q, k, v, block) in enumerate(cases):
        expected = plain_attention(q, k, v)[0]
        got = blockwise_loop(q, k, v, block, answer)
        if close(got, expected, atol=1e-7, rtol=1e-7):
            continue
        if not bool(torch.isfinite(got).all()):
            first = (msg("on the first block m is -inf, so a factor must go to 0 there, not to inf; ")
                     if index < 3 else "")
            hint(msg("{first}some rows came out inf or NaN: only ever exponentiate a difference that is <= 0 (a "
                     "score minus the current shift, or an old shift minus the new one)", first=first))
        for mistake, message in UPDATE_MISTAKES:
            if close(got, blockwise_loop(q, k, v, block, mistake), atol=1e-7, rtol=1e-7):
                hint(message)
        fallback_hint(msg("compare your step with the merge of two blocks: after it, m, l and acc must all "
                          "describe the keys seen so far with one common shift"))
    for q, k, v, block in cases:
        shifts: list[torch.Tensor] = []
        blockwise_loop(q, k, v, block, answer, shifts)
        lazy, eager = lazy_shifts(q, k, block)
        if any(not torch.equal(mine, rule) for mine, rule in zip(shifts, lazy)):
            if all(torch.equal(mine, top) for mine, top in zip(shifts, eager)):
                hint(msg("right values, but your step moves the shift every time a block raises the maximum: the "
                         "exercise keeps the lazy rule (move only when a block's maximum beats the shift by more "
                         "than {margin:g}); fix the bug and keep the rule", margin=LAZY_MARGIN))
            hint(msg("right values, but your m is not the lazy rule's shift: keep the rule of the given step (move "
                     "only when a block's maximum beats the shift by more than {margin:g})", margin=LAZY_MARGIN))
    correct(msg("the lazy step now brings every running sum to the shift when it moves; the loop equals plain "
                "attention, also when scores jump between blocks and near 1e4"))


# --- exercise 3: a layout that connects every pair --------------------------------------------------------------

def _layers_to_connect(block_mask: torch.Tensor) -> int | None:
    """Smallest p such that every block hears from every block in p layers (None: some pair never does).

    Shape: ``block_mask`` bool ``(query blocks, key blocks)``, square.
    """
    step = block_mask.to(torch.float64)
    reach = step.clone()
    for p in range(1, block_mask.shape[0] + 1):
        if bool((reach > 0).all()):
            return p
        grown = ((reach @ step) > 0).to(torch.float64)
        if torch.equal(grown, reach):
            return None
        reach = grown
    return None


@guard_errors
def connected_layout(answer: object, *, lengths: tuple[int, ...] = (4096, 8192), block_size: int = 64,
                     max_layers: int = 3, max_share: float = 0.05) -> None:
    """Exercise 3: a layout with blocks of ``block_size`` that, at every length in ``lengths``, connects every pair
    of positions within ``max_layers`` layers and computes at most ``max_share`` of the (query, key) pairs."""
    if answer is None:
        hint(NONE_HINT)
    if not isinstance(answer, BlockLayout):
        hint(msg("the answer should be an attention_lab.BlockLayout, got {type}; a layout works for every length, "
                 "a mask for one", type=type(answer).__name__))
    if answer.block_size != block_size:
        hint(msg("the blocks should hold {block_size} positions each, yours hold {yours}", block_size=block_size,
                 yours=answer.block_size))
    reports = []
    for n in lengths:
        share = 1 - answer.sparsity(n)
        blocks = answer.block_mask(n)
        dense = answer.to_dense(n)
        whole = blocks.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)[:n, :n]
        if not bool(torch.equal(dense, whole)):
            hint(msg("a causal part keeps only the lower triangle of each diagonal block, so a query there does not "
                     "see every key of its block; this exercise wants both directions: leave the causal part out"))
        layers = _layers_to_connect(blocks)
        if layers is None:
            hint(msg("at n = {n} some blocks never hear from some others, in any number of layers: your layout "
                     "splits the sequence into groups that no kept block joins", n=n))
        if layers > max_layers:
            hint(msg("at n = {n} every pair is connected only after {layers} layers, more than {max_layers}: a "
                     "window grows each position's reach by a block or so per layer; what gives every block a "
                     "path of two hops?", n=n, layers=layers, max_layers=max_layers))
        if share > max_share:
            hint(msg("at n = {n} every pair is connected after {layers} layers, but your layout computes "
                     "{share:.2%} of the (query, key) pairs, over the budget of {budget:.0%}: find the part of it "
                     "that keeps the most blocks, and ask whether the short paths need it", n=n, layers=layers,
                     share=share, budget=max_share))
        reports.append(msg("n = {n}: {share:.2%} of the pairs, connected after {layers} layers", n=n, share=share,
                           layers=layers))
    separator = str(msg("; "))  # between the lengths' reports: a full-width semicolon in Chinese
    correct(msg("{reports}", reports=separator.join(str(r) for r in reports)))
