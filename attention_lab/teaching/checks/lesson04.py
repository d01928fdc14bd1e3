"""Checks for lesson 04 (masks): a causal mask aligned at the lower right, converting PyTorch's
key_padding_mask, padding masks from lengths, and one mask for a left-padded decoder batch. Every answer is a bool mask,
True = may attend: a 0/1 or float mask with the right entries is named as such (the library reads a float mask as
additive and refuses an integer one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...core.masks import as_key_mask, causal_mask, padding_mask
from ._core import as_tensor, call_learner, correct, guard_errors, hint


def _as_bool(answer: object, what: str) -> torch.Tensor:
    got = as_tensor(answer, what)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()):
            hint("that is an additive float mask (0 / -inf); this exercise wants a bool mask, True = may attend")
        if not bool(((got == 0) | (got == 1)).all()):
            hint("a mask holds True (may attend) and False (may not); make it a bool tensor")
        got = got != 0  # right or wrong values are named first; _only_bool then asks for the dtype
    return got


def _only_bool(answer: object) -> None:
    """A mask with the right entries but not bool gets a hint: a float one would be read as additive, a 0/1 one
    is the older tutorials' convention."""
    got = as_tensor(answer, "your mask")
    if got.is_floating_point():
        hint("the right entries, but as floats: a float mask is additive (0 keeps, -inf removes), so its 1s and 0s "
             "would hide nothing; this exercise asks for a bool mask, True = may attend")
    if got.dtype != torch.bool:
        hint("the right entries, as a 0/1 mask (the older tutorials' convention, which the library refuses); this "
             "exercise asks for a bool mask, True = may attend")


def _lower_right(n_queries: int, n_keys: int, shift: int = 0) -> torch.Tensor:
    """Query r (token ``n_keys - n_queries + r`` of the sequence) sees keys up to its own position + ``shift``."""
    offset = n_keys - n_queries
    rows = torch.arange(n_queries)[:, None]  # (i, 1)
    return torch.arange(n_keys)[None, :] <= rows + offset + shift  # (i, j)


@guard_errors
def lower_right_causal(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise 1: ``fn(n_queries, n_keys)`` is the causal mask of ``n_queries`` new tokens after
    ``n_keys - n_queries`` cached ones (aligned at the lower right; True = may attend), for several sizes."""
    sizes = ((3, 8), (4, 4), (1, 6), (2, 3))
    for n_queries, n_keys in sizes:
        result = call_learner(fn, n_queries, n_keys, what="your mask function")
        if result is None:
            hint("your mask function returned None: end it with a return statement that gives back the mask")
        got = _as_bool(result, "your mask")
        expected = _lower_right(n_queries, n_keys)
        if got.shape == (n_keys, n_queries) and n_keys != n_queries:
            hint("rows are queries and columns keys: the mask has one row per new token and one column per key")
        if got.shape != expected.shape:
            hint(f"for {n_queries} new tokens and {n_keys} keys the mask has shape ({n_queries}, {n_keys}), one "
                 f"row per query; yours has {tuple(got.shape)}")
        if torch.equal(got, expected):
            _only_bool(result)
            continue
        if torch.equal(got, ~expected):
            hint("the polarity is flipped: True must mean 'may attend', so the keys after a query are False")
        if n_queries != n_keys and torch.equal(got, causal_mask(n_queries, n_keys)):
            hint("that is the upper-left alignment (is_causal in SDPA): the first new token then sees only key 0, "
                 "but it comes after the cached tokens and may see all of them")
        if torch.equal(got, _lower_right(n_queries, n_keys, shift=-1)):
            hint("each new token may also attend to itself: its own key is the last one it may see")
        if torch.equal(got, _lower_right(n_queries, n_keys, shift=1)):
            hint("off by one: each new token sees one key too many, the key just after its own position")
        staircase = torch.ones(n_queries, n_keys, dtype=torch.bool)  # (i, j)
        if any(torch.equal(got, staircase.tril(j - i)) for i, j in sizes if j - i != n_keys - n_queries):
            hint(f"the right staircase, shifted by the wrong amount for {n_queries} new tokens after "
                 f"{n_keys - n_queries} cached ones: new token r is token {n_keys - n_queries} + r here, and the "
                 f"shift must follow the number of cached tokens for every size, not a fixed number")
        if torch.equal(got, staircase.triu(n_keys - n_queries)):
            hint("the direction is reversed: your mask lets each new token see its own key and the keys after it; "
                 "it may see its own key and the keys before it")
        if bool(got.all()):
            hint(f"every query may see every key here, but new token r (token {n_keys - n_queries} + r of the "
                 f"sequence) may see keys only up to and including its own position")
        if not bool(got.any()):
            hint(f"in your mask no query may see any key, but new token r (token {n_keys - n_queries} + r of the "
                 f"sequence) may see every key up to and including its own position")
        if any(torch.equal(got, staircase.tril(s)) for s in range(1 - n_queries, n_keys - 1)):
            hint(f"the right staircase, shifted by the wrong amount for {n_queries} new tokens after "
                 f"{n_keys - n_queries} cached ones: new token r is token {n_keys - n_queries} + r here, and the "
                 f"shift must follow the number of cached tokens for every size, not a fixed number")
        hint(f"new token r (counting from 0) is token {n_keys - n_queries} + r of the whole sequence; it may see "
             f"every key up to and including its own position, none after it")
    correct("the newest token sees every key, and each earlier new token one key fewer: causal, aligned at the "
            "lower right")


@guard_errors
def key_mask_from_torch(answer: object, key_padding_mask: torch.Tensor) -> None:
    """Exercise 2: ``nn.MultiheadAttention``'s ``key_padding_mask`` (True = ignore) as our ``(b, 1, 1, j)`` key
    mask, by hand."""
    got = _as_bool(answer, "your key mask")
    kpm = as_tensor(key_padding_mask, "key_padding_mask").bool()
    keep = ~kpm  # (b, j)
    expected = keep[:, None, None, :]  # (b, 1, 1, j)
    if torch.equal(got, expected):
        _only_bool(answer)
        correct("inverted (True = may attend) and shaped (b, 1, 1, j) to broadcast over heads and queries")
        return
    same_entries = got.numel() == kpm.numel()
    if same_entries and torch.equal(got.reshape(kpm.shape), kpm):
        hint("nn.MultiheadAttention marks the keys to ignore with True; ours marks the keys that may be attended "
             "to: the polarity must be turned around")
    b, j = kpm.shape
    if got.shape == (b, j) and torch.equal(got, keep):
        hint("the polarity is right; now the mask needs axes of size 1 for the heads and the queries so that it "
             "broadcasts to (b, h, i, j)")
    if got.shape == (b, 1, j, 1):
        hint("padding removes keys, the last axis (j); the query axis should have size 1")
    copied = got.dim() == 4 and got.shape[0] == b and got.shape[1] == 1 and got.shape[3] == j
    if copied and torch.equal(got, kpm[:, None, None, :].expand(got.shape)):
        hint("nn.MultiheadAttention marks the keys to ignore with True; ours marks the keys that may be attended "
             "to: the polarity must be turned around")
    if copied and torch.equal(got, expected.expand(got.shape)):
        hint("the values are right, copied over the queries; the exercise asks for the key mask itself, with a "
             "query axis of size 1 that broadcasts")
    hint("True must mean 'may attend', and the mask needs size-1 axes for the heads and the queries so that it "
         "broadcasts to (b, h, i, j)")


@guard_errors
def padding_from_lengths(answer: object, lengths: Sequence[int], max_len: int) -> None:
    """Exercise 3: the ``(b, max_len)`` padding mask of sequences with ``lengths`` real tokens, by hand."""
    got = _as_bool(answer, "your padding mask")
    expected = padding_mask(list(lengths), max_len)
    if got.shape != expected.shape:
        hint(f"one row per sequence and one column per position: shape ({len(lengths)}, {max_len})")
    if torch.equal(got, expected):
        _only_bool(answer)
        correct("position p of sequence b is real exactly when p < lengths[b]")
        return
    if torch.equal(got, ~expected):
        hint("the polarity is flipped: real tokens are True (may be attended to), padding is False")
    positions = torch.arange(max_len)
    if torch.equal(got, positions[None, :] <= torch.tensor(list(lengths))[:, None]):
        hint("one True too many per row: a sequence of length L has its real tokens at positions 0 .. L-1, and "
             "position L is already padding")
    if torch.equal(got, _left_padding(lengths, max_len)):
        hint("here the padding is added at the end: the real tokens of each sequence come first")
    hint("a position holds a real token when it comes before its sequence's length; compare every position with "
         "every sequence's length at once, by broadcasting")


def _left_padding(lengths: Sequence[int], n: int) -> torch.Tensor:
    return torch.arange(n)[None, :] >= n - torch.tensor(list(lengths))[:, None]  # (b, j): real tokens at the end


def _decoder_mask(answer: object, causal: torch.Tensor, keys: torch.Tensor, *, wrong_side: torch.Tensor) -> None:
    """The decoder-mask check: ``keys`` is the (b, 1, 1, j) key mask, ``wrong_side`` the key mask with the padding
    on the other side."""
    got = _as_bool(answer, "your mask")
    expected = causal & keys  # (b, 1, i, j)
    if got.dim() == 3:
        hint("a 3-D mask (b, i, j) would line up its batch axis with the heads axis of (b, h, i, j): add a "
             "head axis of size 1 after the batch axis")
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
        _only_bool(answer)
        return
    mistakes = [
        (~expected, "the polarity of the whole mask is flipped: True must mean 'may attend'"),
        (~causal & keys, "the causal part is flipped: it lets each query see only the future; a query may see "
                         "itself and the keys before it"),
        (causal.transpose(-2, -1) & keys, "the causal part is flipped: it lets each query see the future and not "
                                          "the past"),
        (causal | keys, "with | a key passes if either mask allows it; it must pass both"),
        (keys, "that is the padding part only: the decoder must not see the future either"),
        (causal, "that is the causal part only: padded keys must be blocked too"),
        (causal & ~keys, "the padding part is inverted: a key that is a real token must be True (may attend)"),
        (causal & wrong_side.expand(shape), "the padding is on the other side here: look at which positions of each "
                                            "sequence hold its real tokens"),
    ]
    for wrong, message in mistakes:
        if torch.equal(got, wrong):
            hint(message)
    hint("a key is allowed when both rules allow it: it is not in the query's future, and it is a real token of "
         "that sequence")


@guard_errors
def left_padded_decoder(answer: object, lengths: Sequence[int], n: int) -> None:
    """Exercise 4: one mask for a LEFT-padded decoder batch (real tokens at the end of each row): causal AND
    real keys, broadcastable to ``(b, h, i, j)``."""
    keys = as_key_mask(_left_padding(lengths, n))  # (b, 1, 1, j)
    _decoder_mask(answer, causal_mask(n), keys, wrong_side=as_key_mask(padding_mask(list(lengths), n)))
    correct("causal AND real keys, with the padding in front: the padded queries at the start have no key at "
            "all, and the library gives them zeros")
