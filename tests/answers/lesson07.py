"""Answers to lesson 07's exercises (blockwise and block-sparse attention): merging two blocks' summaries, the
lazy blockwise step (an input that exposes its bug, then the fixed step) and a layout that connects every pair."""

import math

import numpy as np
import torch

from attention_lab import BlockLayout
from attention_lab.teaching.checks import lesson07

from . import GENERIC, Attempt

EAGER_IS_RIGHT = False  # the lesson asks for the lazy rule to be kept: an eager step is a different design


# ---- 07/1: merge(m_a, l_a, o_a, m_b, l_b, o_b) ----------------------------------------------------------------

def merge_shares(m_a, l_a, o_a, m_b, l_b, o_b):
    top = torch.maximum(m_a, m_b)
    share_a, share_b = l_a * torch.exp(m_a - top), l_b * torch.exp(m_b - top)
    return (share_a * o_a + share_b * o_b) / (share_a + share_b)


def merge_logsumexp(m_a, l_a, o_a, m_b, l_b, o_b):
    lse_a, lse_b = m_a + torch.log(l_a), m_b + torch.log(l_b)
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse) * o_a + torch.exp(lse_b - lse) * o_b


def merge_softmax_of_two(m_a, l_a, o_a, m_b, l_b, o_b):
    weights = torch.softmax(torch.cat([m_a + l_a.log(), m_b + l_b.log()], dim=-1), dim=-1)  # (i, 2)
    return weights[:, :1] * o_a + weights[:, 1:] * o_b


def merge_float32(m_a, l_a, o_a, m_b, l_b, o_b):
    return merge_shares(*(t.float() for t in (m_a, l_a, o_a, m_b, l_b, o_b)))


def merge_numpy(m_a, l_a, o_a, m_b, l_b, o_b):
    m_a, l_a, o_a, m_b, l_b, o_b = (t.numpy() for t in (m_a, l_a, o_a, m_b, l_b, o_b))
    top = np.maximum(m_a, m_b)
    share_a, share_b = l_a * np.exp(m_a - top), l_b * np.exp(m_b - top)
    return torch.from_numpy((share_a * o_a + share_b * o_b) / (share_a + share_b))


def merge_shift_by_min(m_a, l_a, o_a, m_b, l_b, o_b):  # any common shift is exact while the gap stays small
    low = torch.minimum(m_a, m_b)
    share_a, share_b = l_a * torch.exp(m_a - low), l_b * torch.exp(m_b - low)
    return (share_a * o_a + share_b * o_b) / (share_a + share_b)


def merge_in_place(m_a, l_a, o_a, m_b, l_b, o_b):
    top = torch.maximum(m_a, m_b)
    l_a.mul_(torch.exp(m_a - top))
    l_b.mul_(torch.exp(m_b - top))
    return (l_a * o_a + l_b * o_b) / (l_a + l_b)


def merge_average(m_a, l_a, o_a, m_b, l_b, o_b):
    return (o_a + o_b) / 2


def merge_unshifted_sums(m_a, l_a, o_a, m_b, l_b, o_b):
    return (l_a * o_a + l_b * o_b) / (l_a + l_b)


def merge_exp_of_max(m_a, l_a, o_a, m_b, l_b, o_b):
    share_a, share_b = l_a * torch.exp(m_a), l_b * torch.exp(m_b)
    return (share_a * o_a + share_b * o_b) / (share_a + share_b)


def merge_not_divided(m_a, l_a, o_a, m_b, l_b, o_b):
    top = torch.maximum(m_a, m_b)
    return l_a * torch.exp(m_a - top) * o_a + l_b * torch.exp(m_b - top) * o_b


def merge_inverse_factor(m_a, l_a, o_a, m_b, l_b, o_b):
    top = torch.maximum(m_a, m_b)
    share_a, share_b = l_a * torch.exp(top - m_a), l_b * torch.exp(top - m_b)
    return (share_a * o_a + share_b * o_b) / (share_a + share_b)


def merge_max_only(m_a, l_a, o_a, m_b, l_b, o_b):  # the block with the larger maximum wins the whole row
    return torch.where(m_a >= m_b, o_a, o_b)


def merge_forgets_l(m_a, l_a, o_a, m_b, l_b, o_b):  # weights by exp(m - top) only, as if each block had one key
    top = torch.maximum(m_a, m_b)
    share_a, share_b = torch.exp(m_a - top), torch.exp(m_b - top)
    return (share_a * o_a + share_b * o_b) / (share_a + share_b)


def merge_as_acc(m_a, l_a, o_a, m_b, l_b, o_b):  # treats o as the unnormalised acc of section 2
    top = torch.maximum(m_a, m_b)
    share_a, share_b = l_a * torch.exp(m_a - top), l_b * torch.exp(m_b - top)
    return (o_a * torch.exp(m_a - top) + o_b * torch.exp(m_b - top)) / (share_a + share_b)


def merge_squeezed(m_a, l_a, o_a, m_b, l_b, o_b):
    return merge_shares(m_a, l_a, o_a, m_b, l_b, o_b)[:, 0]


def merge_fixed_size(m_a, l_a, o_a, m_b, l_b, o_b):  # written for the first case's 6 rows only
    out = merge_shares(m_a, l_a, o_a, m_b, l_b, o_b)
    return out if out.shape[0] == 6 else torch.zeros(6, out.shape[1], dtype=out.dtype)


def merge_stub(m_a, l_a, o_a, m_b, l_b, o_b):
    raise NotImplementedError("write the body of merge, then run the check cell below")


def merge_no_return(m_a, l_a, o_a, m_b, l_b, o_b):
    torch.maximum(m_a, m_b)


# ---- 07/2a: inputs that expose the lazy step -------------------------------------------------------------------

def jump(height=5.0, values=None):
    q = torch.ones(1, 4, dtype=torch.float64)
    k = torch.cat([torch.zeros(2, 4), torch.full((2, 4), height)]).double()  # block 2 scores 2 * height higher
    v = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64) if values is None else values
    return q, k, v


_g = torch.Generator().manual_seed(0)
CALM = (torch.randn(4, 8, generator=_g), torch.randn(40, 8, generator=_g), torch.randn(40, 3, generator=_g))
BATCHED = [torch.randn(2, 3, 5, 8, generator=_g), torch.randn(2, 3, 12, 8, generator=_g),
           torch.randn(2, 3, 12, 2, generator=_g)]
BATCHED[1][..., 6:, :] *= 30
FALLING = (torch.ones(1, 4), torch.cat([torch.full((2, 4), 5.0), torch.zeros(2, 4)]), torch.arange(4.0)[:, None])
q_j, k_j, v_j = jump()


# ---- 07/2b: the fixed step --------------------------------------------------------------------------------------

def lazy_fixed(m, l, acc, s, v_block):  # noqa: E741
    top = s.amax(dim=-1, keepdim=True)
    shift = torch.where(top > m + 4, top, m)
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def lazy_fixed_one_factor(m, l, acc, s, v_block):  # noqa: E741 (the given step with acc rescaled too)
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + 4, block_max, m)
    p = torch.exp(s - m_new)
    factor = torch.exp(m - m_new)
    return m_new, l * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


def lazy_fixed_max_keepdim_false(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.max(dim=-1).values.unsqueeze(-1)
    m_new = torch.maximum(m, block_max) if False else torch.where(block_max > m + 4, block_max, m)
    p = torch.exp(s - m_new)
    factor = torch.exp(m - m_new)
    return m_new, factor * l + torch.sum(p, -1, keepdim=True), factor * acc + torch.matmul(p, v_block)


def lazy_fixed_einsum(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max - m > 4, block_max, m)
    p = torch.exp(s - m_new)
    factor = torch.exp(m - m_new)
    return m_new, l * factor + p.sum(-1, keepdim=True), acc * factor + torch.einsum("...ij,...jd->...id", p, v_block)


def eager(m, l, acc, s, v_block):  # noqa: E741
    shift = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def reference_step(m, l, acc, s, v_block):  # noqa: E741 (the printed loop's step, pasted)
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
    p = torch.exp(s - safe)
    correction = torch.exp(m - safe)
    return m_new, l * correction + p.sum(dim=-1, keepdim=True), acc * correction + p @ v_block


def given_lazy(m, l, acc, s, v_block):  # noqa: E741 (the lesson's step, unchanged)
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + 4, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def inverse_factor(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    grow = torch.where(torch.isfinite(m), torch.exp(shift - m), torch.zeros_like(m))
    terms = torch.exp(s - shift)
    return shift, l * grow + terms.sum(dim=-1, keepdim=True), acc * grow + terms @ v_block


def only_acc(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    terms = torch.exp(s - shift)
    return shift, l + terms.sum(dim=-1, keepdim=True), acc * torch.exp(m - shift) + terms @ v_block


def divides_by_growth(m, l, acc, s, v_block):  # noqa: E741 (l / exp(new - old) = l * exp(old - new): right)
    shift = torch.where(s.amax(dim=-1, keepdim=True) > m + 4, s.amax(dim=-1, keepdim=True), m)
    grow = torch.exp(shift - m)
    terms = torch.exp(s - shift)
    return shift, l / grow + terms.sum(dim=-1, keepdim=True), acc / grow + terms @ v_block


def raw_exp(m, l, acc, s, v_block):  # noqa: E741
    p = torch.exp(s)
    return m, l + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def no_rescale(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    terms = torch.exp(s - shift)
    return shift, l + terms.sum(dim=-1, keepdim=True), acc + terms @ v_block


def shift_never_kept(m, l, acc, s, v_block):  # noqa: E741 (moves the shift but returns the old one)
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return m, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def forgets_new_block(m, l, acc, s, v_block):  # noqa: E741 (rescales, but adds only l's new terms)
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale


def lazy_below(m, l, acc, s, v_block):  # noqa: E741 (moves the shift the wrong way: when the block is lower)
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max < m - 4, block_max, torch.where(torch.isfinite(m), m, block_max))
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def squeezed_l(m, l, acc, s, v_block):  # noqa: E741
    out = lazy_fixed(m, l, acc, s, v_block)
    return out[0], out[1][..., 0], out[2]


def lazy_margin_two(m, l, acc, s, v_block):  # noqa: E741 (right values, but another rule for the shift)
    top = s.amax(dim=-1, keepdim=True)
    shift = torch.where(top > m + 2, top, m)
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def two_results(m, l, acc, s, v_block):  # noqa: E741
    return m, l


def squeezed_m(m, l, acc, s, v_block):  # noqa: E741
    out = lazy_fixed(m, l, acc, s, v_block)
    return out[0][..., 0], out[1], out[2]


def update_stub(m, l, acc, s, v_block):  # noqa: E741
    raise NotImplementedError("write the body of fixed_update, then run the check cell below")


def update_no_return(m, l, acc, s, v_block):  # noqa: E741
    s.amax(dim=-1, keepdim=True)


# ---- 07/3: a layout that connects every pair -------------------------------------------------------------------

LAYOUT = {"lengths": (4096, 8192), "block_size": 64, "max_layers": 3, "max_share": 0.05}

ATTEMPTS = [
    Attempt("07/1", "shares on the common maximum", lesson07.merge_blocks, merge_shares, right=True),
    Attempt("07/1", "log-sum-exp", lesson07.merge_blocks, merge_logsumexp, right=True),
    Attempt("07/1", "softmax of the two log-sum-exps", lesson07.merge_blocks, merge_softmax_of_two, right=True),
    Attempt("07/1", "computed in float32", lesson07.merge_blocks, merge_float32, right=True),
    Attempt("07/1", "numpy", lesson07.merge_blocks, merge_numpy, right=True),
    Attempt("07/1", "shift by the smaller maximum", lesson07.merge_blocks, merge_shift_by_min, right=True),
    Attempt("07/1", "changes l_a and l_b in place", lesson07.merge_blocks, merge_in_place, right=True),
    Attempt("07/1", "plain average", lesson07.merge_blocks, merge_average, hint="do not count equally"),
    Attempt("07/1", "sums with different shifts", lesson07.merge_blocks, merge_unshifted_sums,
            hint="different shifts"),
    Attempt("07/1", "exp of each maximum", lesson07.merge_blocks, merge_exp_of_max, hint="overflow"),
    Attempt("07/1", "not divided by the total", lesson07.merge_blocks, merge_not_divided, hint="divide|sum to 1|total"),
    Attempt("07/1", "factor above 1", lesson07.merge_blocks, merge_inverse_factor, hint="at most 1|larger shift"),
    Attempt("07/1", "the larger block wins", lesson07.merge_blocks, merge_max_only, hint="both blocks|every key"),
    Attempt("07/1", "l left out", lesson07.merge_blocks, merge_forgets_l, hint="depends on l"),
    Attempt("07/1", "o taken for acc", lesson07.merge_blocks, merge_as_acc, hint="already divided|normalised"),
    Attempt("07/1", "one axis squeezed", lesson07.merge_blocks, merge_squeezed, hint="shape"),
    Attempt("07/1", "fixed for six rows", lesson07.merge_blocks, merge_fixed_size, hint="other sizes|rows|shape"),
    Attempt("07/1", "block a only", lesson07.merge_blocks, lambda m_a, l_a, o_a, m_b, l_b, o_b: o_a, hint=GENERIC),
    Attempt("07/1", "untouched stub", lesson07.merge_blocks, merge_stub, hint="NotImplementedError"),
    Attempt("07/1", "no return", lesson07.merge_blocks, merge_no_return, hint="None|return"),
    Attempt("07/1", "an error inside", lesson07.merge_blocks, lambda *args: 1 / 0, hint="ZeroDivisionError"),
    Attempt("07/1", "the result, not the function", lesson07.merge_blocks, torch.zeros(6, 3),
            hint="function itself"),
    Attempt("07/2a", "a jump between two blocks", lesson07.exposing_input, q_j, args=(k_j, v_j, 2), right=True),
    Attempt("07/2a", "lists, float32 and numpy", lesson07.exposing_input, q_j.float().tolist(),
            args=(k_j.float(), v_j.numpy(), 2), right=True),
    Attempt("07/2a", "batched, later keys 30x", lesson07.exposing_input, BATCHED[0], args=(*BATCHED[1:], 6),
            right=True),
    Attempt("07/2a", "equal values", lesson07.exposing_input, q_j, args=(k_j, torch.ones(4, 1), 2), right=True),
    Attempt("07/2a", "values all zero", lesson07.exposing_input, q_j, args=(k_j, torch.zeros(4, 1), 2),
            hint="values of zero"),
    Attempt("07/2a", "random inputs", lesson07.exposing_input, CALM[0], args=(CALM[1], CALM[2], 16),
            hint="never moves its shift"),
    Attempt("07/2a", "one block holds every key", lesson07.exposing_input, CALM[0], args=(CALM[1], CALM[2], 64),
            hint="fit in one block"),
    Attempt("07/2a", "a jump too small", lesson07.exposing_input, *(lambda q, k, v: (q, (k, v, 2)))(*jump(1.5)),
            hint="never moves its shift|more than 4"),
    Attempt("07/2a", "the high scores come first", lesson07.exposing_input, FALLING[0], args=(*FALLING[1:], 2),
            hint="never moves its shift|later"),
    Attempt("07/2a", "block size 2.5", lesson07.exposing_input, q_j, args=(k_j, v_j, 2.5), hint="whole number"),
    Attempt("07/2a", "block size 0", lesson07.exposing_input, q_j, args=(k_j, v_j, 0), hint="whole number"),
    Attempt("07/2a", "inf in the keys", lesson07.exposing_input, q_j, args=(k_j * math.inf, v_j, 2),
            hint="finite"),
    Attempt("07/2a", "q and k of different widths", lesson07.exposing_input, torch.ones(1, 3),
            args=(torch.ones(4, 4), torch.ones(4, 1), 2), hint="same feature size"),
    Attempt("07/2a", "1-D q", lesson07.exposing_input, torch.ones(4), args=(torch.ones(4, 4), torch.ones(4, 1), 2),
            hint="two dimensions"),
    Attempt("07/2a", "too few values", lesson07.exposing_input, q_j, args=(k_j, torch.ones(3, 1), 2),
            hint="same number of keys"),
    Attempt("07/2a", "None", lesson07.exposing_input, None, args=(k_j, v_j, 2), hint="None"),
    Attempt("07/2a", "untouched stub", lesson07.exposing_input, ..., args=(..., ..., ...), hint="still empty"),
    Attempt("07/2b", "lazy, acc rescaled too", lesson07.fixed_update, lazy_fixed, right=True),
    Attempt("07/2b", "the given step with one factor", lesson07.fixed_update, lazy_fixed_one_factor, right=True),
    Attempt("07/2b", "max(...).values, matmul", lesson07.fixed_update, lazy_fixed_max_keepdim_false, right=True),
    Attempt("07/2b", "einsum", lesson07.fixed_update, lazy_fixed_einsum, right=True),
    Attempt("07/2b", "the given step unchanged", lesson07.fixed_update, given_lazy,
            hint="still gives the given step's result"),
    Attempt("07/2b", "a factor above 1", lesson07.fixed_update, inverse_factor, hint="at most 1"),
    Attempt("07/2b", "acc rescaled, l not", lesson07.fixed_update, only_acc, hint="l was summed under the old"),
    Attempt("07/2b", "divides by exp(m_new - m)", lesson07.fixed_update, divides_by_growth, right=True),
    Attempt("07/2b", "exp of the raw scores", lesson07.fixed_update, raw_exp, hint="inf or NaN"),
    Attempt("07/2b", "no rescaling at all", lesson07.fixed_update, no_rescale, hint="neither l nor acc|rescale"),
    Attempt("07/2b", "returns the old shift", lesson07.fixed_update, shift_never_kept,
            hint="returns? the old|new shift"),
    Attempt("07/2b", "forgets the block's values", lesson07.fixed_update, forgets_new_block,
            hint="this block|new block"),
    Attempt("07/2b", "moves the shift down", lesson07.fixed_update, lazy_below, hint="lazy rule|larger|only when|<= 0"),
    Attempt("07/2b", "a margin of 2", lesson07.fixed_update, lazy_margin_two, hint="not the lazy rule's shift"),
    Attempt("07/2b", "two results", lesson07.fixed_update, two_results, hint="three tensors"),
    Attempt("07/2b", "m without its last axis", lesson07.fixed_update, squeezed_m,
            hint=r"shapes it was given: m and l \(7, 1\)"),
    Attempt("07/2b", "l without its last axis", lesson07.fixed_update, squeezed_l,
            hint=r"shapes it was given: m and l \(7, 1\)"),
    Attempt("07/2b", "an error inside", lesson07.fixed_update, lambda *args: 1 / 0, hint="ZeroDivisionError"),
    Attempt("07/2b", "untouched stub", lesson07.fixed_update, update_stub, hint="NotImplementedError"),
    Attempt("07/2b", "no return", lesson07.fixed_update, update_no_return, hint="None|return"),
    Attempt("07/2b", "a number, not a function", lesson07.fixed_update, 3, hint="function"),
    *([Attempt("07/2b", "eager", lesson07.fixed_update, eager, right=True),
       Attempt("07/2b", "the printed loop's step", lesson07.fixed_update, reference_step, right=True)]
      if EAGER_IS_RIGHT else
      [Attempt("07/2b", "eager", lesson07.fixed_update, eager, hint="lazy rule"),
       Attempt("07/2b", "the printed loop's step", lesson07.fixed_update, reference_step, hint="lazy rule")]),
    Attempt("07/3", "local and one global block", lesson07.connected_layout,
            BlockLayout.local(64) | BlockLayout.global_blocks(64, [0]), kwargs=LAYOUT, right=True),
    Attempt("07/3", "one global block alone", lesson07.connected_layout, BlockLayout.global_blocks(64, [0]),
            kwargs=LAYOUT, right=True),
    Attempt("07/3", "a global block in the middle", lesson07.connected_layout,
            BlockLayout.global_blocks(64, [31]) | BlockLayout.local(64), kwargs=LAYOUT, right=True),
    Attempt("07/3", "sliding window and a global block", lesson07.connected_layout,
            BlockLayout.sliding_window(64, neighbours=1) | BlockLayout.global_blocks(64, [0]), kwargs=LAYOUT,
            hint="over the budget"),
    Attempt("07/3", "a sliding window", lesson07.connected_layout, BlockLayout.sliding_window(64, neighbours=1),
            kwargs=LAYOUT, hint="only after 63 layers"),
    Attempt("07/3", "a wide sliding window", lesson07.connected_layout, BlockLayout.sliding_window(64, neighbours=8),
            kwargs=LAYOUT, hint="after 8 layers|over the budget"),
    Attempt("07/3", "local", lesson07.connected_layout, BlockLayout.local(64), kwargs=LAYOUT,
            hint="never hear from"),
    Attempt("07/3", "strided", lesson07.connected_layout, BlockLayout.strided(64, stride=3), kwargs=LAYOUT,
            hint="never hear from"),
    Attempt("07/3", "three global blocks", lesson07.connected_layout,
            BlockLayout.global_blocks(64, [0, 21, 42]), kwargs=LAYOUT, hint="over the budget"),
    Attempt("07/3", "causal window and a global block", lesson07.connected_layout,
            BlockLayout.sliding_window(64, neighbours=1, causal=True) | BlockLayout.global_blocks(64, [0]),
            kwargs=LAYOUT, hint="causal part"),
    Attempt("07/3", "blocks of 32", lesson07.connected_layout,
            BlockLayout.local(32) | BlockLayout.global_blocks(32, [0]), kwargs=LAYOUT, hint="hold 64 positions"),
    Attempt("07/3", "a mask instead of a layout", lesson07.connected_layout,
            (BlockLayout.local(64) | BlockLayout.global_blocks(64, [0])).to_dense(4096), kwargs=LAYOUT,
            hint="every length"),
    Attempt("07/3", "intersection instead of union", lesson07.connected_layout,
            BlockLayout.local(64) & BlockLayout.global_blocks(64, [0]), kwargs=LAYOUT, hint="never hear from"),
    Attempt("07/3", "untouched stub", lesson07.connected_layout, ..., kwargs=LAYOUT, hint="still empty"),
]
