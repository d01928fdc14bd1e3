"""Checks for lesson 04 (masks): causal masks by hand, converting PyTorch's key_padding_mask, padding masks
from lengths, and combining masks."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...core.masks import as_key_mask, causal_mask, padding_mask
from ._core import as_tensor, correct, hint


def _as_bool(answer: object, what: str) -> torch.Tensor:
    got = as_tensor(answer, what)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()):
            hint("that is an additive float mask (0 / -inf); this exercise wants a bool mask, True = may attend")
        if not bool(((got == 0) | (got == 1)).all()):
            hint("a mask holds True (may attend) and False (may not); make it a bool tensor")
        got = got != 0
    return got


def causal_by_hand(answer: object, n: int) -> None:
    """Exercise 1: an ``(n, n)`` causal mask built with ``triu`` (True = may attend)."""
    got = _as_bool(answer, "your mask")
    expected = causal_mask(n)
    if got.shape != expected.shape:
        hint(f"one row per query and one column per key: shape ({n}, {n})")
    if torch.equal(got, expected):
        correct("query i sees keys 0..i: the complement of the strictly upper triangle")
        return
    if torch.equal(got, ~expected):
        hint("the polarity is flipped: True must mean 'may attend', so the future (above the diagonal) is False")
    if torch.equal(got, expected & ~torch.eye(n, dtype=torch.bool)):
        hint("each query may also attend to itself: keep the diagonal (triu with diagonal=1 marks only the "
             "strict future)")
    if torch.equal(got, expected.T):
        hint("that lets each query see the future and not the past: row i is query i, column j is key j")
    hint("row i is query i: it may see keys 0..i (the past and itself), never a key after it; triu picks out "
         "the part of a matrix above a diagonal you choose")


def key_mask_from_torch(answer: object, key_padding_mask: torch.Tensor) -> None:
    """Exercise 2: ``nn.MultiheadAttention``'s ``key_padding_mask`` (True = ignore) as our ``(b, 1, 1, j)`` key
    mask, by hand."""
    got = _as_bool(answer, "your key mask")
    keep = ~key_padding_mask
    expected = keep[:, None, None, :]  # (b, 1, 1, j)
    b, j = key_padding_mask.shape
    if torch.equal(got, expected):
        correct("inverted (True = may attend) and shaped (b, 1, 1, j) to broadcast over heads and queries")
        return
    if got.shape == expected.shape and torch.equal(got, ~expected):
        hint("nn.MultiheadAttention marks the keys to ignore with True; ours marks the keys to keep: invert it")
    if got.shape == (b, j):
        hint("the values are right; add a head axis and a query axis so it broadcasts to (b, h, i, j): "
             "(b, 1, 1, j)")
    if got.shape == (b, 1, j, 1):
        hint("padding removes keys, the last axis (j); the query axis should be 1: (b, 1, 1, j)")
    hint(f"invert the mask, then index it with [:, None, None, :] to get shape ({b}, 1, 1, {j})")


def padding_from_lengths(answer: object, lengths: Sequence[int], max_len: int) -> None:
    """Exercise 3: the ``(b, max_len)`` padding mask of sequences with ``lengths`` real tokens, by hand."""
    got = _as_bool(answer, "your padding mask")
    expected = padding_mask(list(lengths), max_len)
    if got.shape != expected.shape:
        hint(f"one row per sequence and one column per position: shape ({len(lengths)}, {max_len})")
    if torch.equal(got, expected):
        correct("position p of sequence b is real exactly when p < lengths[b]")
        return
    if torch.equal(got, ~expected):
        hint("the polarity is flipped: real tokens are True (may be attended to), padding is False")
    positions = torch.arange(max_len)
    if torch.equal(got, positions[None, :] <= torch.tensor(list(lengths))[:, None]):
        hint("one True too many per row: a sequence of length L has positions 0 .. L-1, so use p < L")
    hint("position p of sequence b is a real token exactly when p < lengths[b]; broadcasting the positions "
         "against the lengths gives every row at once")


def causal_and_padding(answer: object, lengths: Sequence[int], n: int) -> None:
    """Exercise 4: one mask for a padded decoder batch: causal AND real keys, broadcastable to
    ``(b, h, i, j)``."""
    got = _as_bool(answer, "your mask")
    causal = causal_mask(n)
    keys = as_key_mask(padding_mask(list(lengths), n))  # (b, 1, 1, j)
    expected = causal & keys  # (b, 1, i, j)
    if got.dim() == 3:
        hint("a 3-D mask (b, i, j) would line up its batch axis with the heads axis of (b, h, i, j): add a "
             "head axis, (b, 1, i, j)")
    try:
        shape = torch.broadcast_shapes(got.shape, expected.shape)  # a head axis of any size is fine
    except RuntimeError:
        shape = None
    if shape is None or len(shape) != 4 or shape[0] != expected.shape[0] or shape[2:] != expected.shape[2:]:
        hint(f"the mask must broadcast to (b, h, i, j); shape (b, 1, i, j) = {tuple(expected.shape)} works, yours "
             f"is {tuple(got.shape)}")
    got = got.expand(shape)
    causal, keys, expected = (m.expand(shape) for m in (causal, keys, expected))
    if torch.equal(got, expected):
        correct("a key is allowed only if it is in the past AND it is a real token: the two masks combined "
                "with &")
        return
    if torch.equal(got, causal | keys):
        hint("with | a key passes if either mask allows it; it must pass both: combine with &")
    if torch.equal(got, keys):
        hint("that is the padding part only: the decoder must not see the future either")
    if torch.equal(got, causal):
        hint("that is the causal part only: padded keys must be blocked too")
    if torch.equal(got, causal & ~keys):
        hint("the padding part is inverted: a key that is a real token must be True (may attend)")
    queries = keys.transpose(-2, -1)  # (b, 1, i, 1): real query positions
    if torch.equal(got, expected & queries):
        hint("padding removes keys, not queries: a padded query's row keeps its past real keys (its output is "
             "simply ignored later), so block only the keys (the last axis)")
    hint("a key is allowed when both rules allow it: it is not in the query's future, and it is a real token "
         "of that sequence")
