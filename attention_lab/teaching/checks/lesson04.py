"""Checks for lesson 04 (masks): a causal mask aligned at the lower right, a causal mask for documents packed into
one sequence, and one mask for a left-padded decoder batch. Every answer is a function that returns a bool mask,
True = may attend, tried on several sizes; a 0/1 or float mask with the right entries is named as such (the library
refuses an integer mask and reads a float one as additive)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...core.masks import as_key_mask, causal_mask, padding_mask
from ...i18n import msg
from ._core import call_learner, correct, drop_unit_axes, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import expect_function
from ._mask_answers import as_bool_mask, only_bool


def _mask_of(fn: Callable[..., object], *args: object) -> tuple[object, torch.Tensor]:
    """What the learner's function returns, and it read as a bool mask."""
    result = call_learner(fn, *args)
    if result is None:
        hint(msg("{name} returned None: end it with a return statement that gives back the mask",
                 name=learner_name(fn)))
    return result, as_bool_mask(result, msg("your mask"))


# ---- exercise 1: a causal mask aligned at the lower right ----

def _lower_right(n_queries: int, n_keys: int, shift: int = 0) -> torch.Tensor:
    """Query r (token ``n_keys - n_queries + r`` of the sequence) sees keys up to its own position + ``shift``."""
    offset = n_keys - n_queries
    rows = torch.arange(n_queries)[:, None]  # (i, 1)
    return torch.arange(n_keys)[None, :] <= rows + offset + shift  # (i, j)


_LOWER_RIGHT_SIZES = ((3, 8), (4, 4), (1, 6), (2, 3))


@guard_errors
def lower_right_causal(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise 1: ``fn(n_queries, n_keys)`` is the causal mask of ``n_queries`` new tokens after
    ``n_keys - n_queries`` cached ones (aligned at the lower right; True = may attend), for several sizes."""
    fn = expect_function(fn, "causal_lower_right(n_queries, n_keys)")
    for n_queries, n_keys in _LOWER_RIGHT_SIZES:
        result, got = _mask_of(fn, n_queries, n_keys)
        cached = n_keys - n_queries
        expected = _lower_right(n_queries, n_keys)
        if got.shape == (n_keys, n_queries) and n_keys != n_queries:
            hint(msg("rows are queries and columns keys: the mask has one row per new token and one column per key"))
        if got.shape != expected.shape:
            hint(msg("for {n_queries} new tokens and {n_keys} keys the mask has shape ({n_queries}, {n_keys}), one "
                     "row per query; yours has {shape}", n_queries=n_queries, n_keys=n_keys,
                     shape=tuple(got.shape)))
        if torch.equal(got, expected):
            only_bool(result)
            continue
        shifted = msg("the right staircase, shifted by the wrong amount for {n_queries} new tokens after {cached} "
                      "cached ones: new token r is token {cached} + r here, and the shift must follow the number "
                      "of cached tokens for every size, not a fixed number", n_queries=n_queries, cached=cached)
        staircase = torch.ones(n_queries, n_keys, dtype=torch.bool)  # (i, j)
        mistakes = [
            (~expected, msg("the polarity is flipped: True must mean 'may attend', so the keys after a query are "
                            "False")),
            (causal_mask(n_queries, n_keys) if cached else None,
             msg("that is the upper-left alignment (is_causal in SDPA): the first new token then sees only key 0, "
                 "but it comes after the cached tokens and may see all of them")),
            (_lower_right(n_queries, n_keys, shift=-1), msg("each new token may also attend to itself: its own key "
                                                            "is the last one it may see")),
            (_lower_right(n_queries, n_keys, shift=1), msg("off by one: each new token sees one key too many, the "
                                                           "key just after its own position")),
            (staircase.triu(cached), msg("the direction is reversed: your mask lets each new token see its own key "
                                         "and the keys after it; it may see its own key and the keys before it")),
        ]
        for wrong, message in mistakes:
            if wrong is not None and torch.equal(got, wrong):
                hint(message)
        if any(torch.equal(got, staircase.tril(j - i)) for i, j in _LOWER_RIGHT_SIZES if j - i != cached):
            hint(shifted)
        if bool(got.all()):
            hint(msg("every query may see every key here, but new token r (token {cached} + r of the sequence) may "
                     "see keys only up to and including its own position", cached=cached))
        if not bool(got.any()):
            hint(msg("in your mask no query may see any key, but new token r (token {cached} + r of the sequence) "
                     "may see every key up to and including its own position", cached=cached))
        if any(torch.equal(got, staircase.tril(s)) for s in range(1 - n_queries, n_keys - 1)):
            hint(shifted)
        fallback_hint(msg("new token r (counting from 0) is token {cached} + r of the whole sequence; it may see "
                          "every key up to and including its own position, none after it", cached=cached))
    correct(msg("the newest token sees every key, and each earlier new token one key fewer: causal, aligned at the "
                "lower right"))


# ---- exercise 2: documents packed into one sequence ----

def _packed(lengths: Sequence[int], *, causal: bool = True, across: bool = False, diagonal: bool = True
            ) -> torch.Tensor:
    """Causal attention within each document of a packed sequence (or a mistake: not causal, across documents, or
    without the diagonal)."""
    document = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(list(lengths)))  # (n,)
    n = len(document)
    allowed = torch.ones(n, n, dtype=torch.bool) if across else document[:, None] == document[None, :]  # (i, j)
    if causal:
        allowed = allowed & causal_mask(n)
    if not diagonal:
        allowed = allowed & ~torch.eye(n, dtype=torch.bool)
    return allowed


def _documents_in(mask: torch.Tensor) -> list[int] | None:
    """The document lengths of a mask that is causal within documents (its row i starts at the first token of i's
    document), or None when the mask is not of that kind."""
    starts = mask.int().argmax(dim=-1)  # (i,): the first key each query may see
    if not bool(mask.any(dim=-1).all()) or not bool((starts[1:] >= starts[:-1]).all()):
        return None
    boundaries = sorted(set(starts.tolist())) + [mask.shape[0]]
    lengths = [b - a for a, b in zip(boundaries, boundaries[1:])]
    return lengths if boundaries[0] == 0 and torch.equal(mask, _packed(lengths)) else None


_PACKINGS = ((3, 2, 4), (1, 5), (4,), (2, 2, 2), (1, 1, 3, 1))


@guard_errors
def packed_documents(answer: object) -> None:
    """Exercise 2: ``packed_causal_mask(lengths)`` -> the (n, n) bool mask, n = sum(lengths), of documents packed
    into one sequence: a token may attend to the earlier tokens of its own document and to itself."""
    fn = expect_function(answer, "packed_causal_mask(lengths)")
    for lengths in _PACKINGS:
        n = sum(lengths)
        result, got = _mask_of(fn, list(lengths))
        got = drop_unit_axes(got, (n, n))  # a (1, n, n) mask broadcasts the same way
        if got.shape != (n, n):
            hint(msg("for documents of lengths {lengths} the sequence has {n} tokens: the mask has shape ({n}, {n}), "
                     "yours has {shape}", lengths=list(lengths), n=n, shape=tuple(got.shape)))
        expected = _packed(lengths)
        if torch.equal(got, expected):
            only_bool(result)
            continue
        mistakes = [
            (~expected, msg("the polarity is flipped: True must mean 'may attend'")),
            (_packed(lengths, across=True), msg("that is a causal mask over the whole sequence: a token then also "
                                                "sees the documents packed before its own, and a document boundary "
                                                "must stop attention")),
            (_packed(lengths, causal=False), msg("each document sees only itself, good; but within a document a "
                                                 "token must not see the tokens after it")),
            (_packed(lengths, diagonal=False), msg("each token may also attend to itself (the diagonal)")),
            (_packed(lengths).transpose(0, 1), msg("the direction is reversed: a token may see the earlier tokens of "
                                                   "its document, not the later ones")),
        ]
        for wrong, message in mistakes:
            if torch.equal(got, wrong):
                hint(message)
        yours = _documents_in(got)
        if yours is not None:
            hint(msg("causal within documents, but your documents have lengths {yours} where the packing is "
                     "{lengths}: document d starts right after the tokens of the documents before it", yours=yours,
                     lengths=list(lengths)))
        fallback_hint(msg("for documents of lengths {lengths}: a key is allowed when it belongs to the query's own "
                          "document and does not come after the query", lengths=list(lengths)))
    correct(msg("attention stays inside each document and never looks ahead, whatever the packing: no token sees "
                "another document, as if each ran alone"))


# ---- exercise 3: a left-padded decoder batch ----

def _left_padding(lengths: Sequence[int], n: int) -> torch.Tensor:
    return torch.arange(n)[None, :] >= n - torch.tensor(list(lengths))[:, None]  # (b, j): real tokens at the end


def _decoder_mask(answer: object, lengths: Sequence[int], n: int) -> None:
    """One size of the decoder-mask check: causal AND real keys, the real tokens at the end of each row."""
    got = as_bool_mask(answer, msg("your mask"))
    causal, keys = causal_mask(n), as_key_mask(_left_padding(lengths, n))  # (i, j), (b, 1, 1, j)
    wrong_side = as_key_mask(padding_mask(list(lengths), n))  # the padding at the end
    expected = causal & keys  # (b, 1, i, j)
    where = msg("for lengths {lengths} padded to {n}", lengths=list(lengths), n=n)
    if got.dim() == 3 and got.shape[0] != 1:
        hint(msg("a 3-D mask (b, i, j) would line up its batch axis with the heads axis of (b, h, i, j): add a "
                 "head axis of size 1 after the batch axis"))
    try:
        shape = torch.broadcast_shapes(got.shape, expected.shape)  # a head axis of any size is fine
    except RuntimeError:
        shape = None
    if shape is None or len(shape) != 4 or shape[0] != expected.shape[0] or shape[2:] != expected.shape[2:]:
        hint(msg("{where} the mask must broadcast to (b, h, i, j); shape (b, 1, i, j) = {expected} works, yours is "
                 "{shape}", where=where, expected=tuple(expected.shape), shape=tuple(got.shape)))
    got = got.expand(shape)
    causal, keys, expected, wrong_side = (m.expand(shape) for m in (causal, keys, expected, wrong_side))
    if torch.equal(got, expected):
        only_bool(answer)
        return
    mistakes = [
        (~expected, msg("the polarity of the whole mask is flipped: True must mean 'may attend'")),
        (~causal & keys, msg("the causal part is flipped: it lets each query see only the future; a query may see "
                             "itself and the keys before it")),
        (causal.transpose(-2, -1) & keys, msg("the causal part is flipped: it lets each query see the future and "
                                              "not the past")),
        (causal | keys, msg("with | a key passes if either mask allows it; it must pass both")),
        (keys, msg("that is the padding part only: the decoder must not see the future either")),
        (causal, msg("that is the causal part only: padded keys must be blocked too")),
        (causal & ~keys, msg("the padding part is inverted: a key that is a real token must be True (may attend)")),
        (causal & wrong_side, msg("the padding is on the other side here: look at which positions of each sequence "
                                  "hold its real tokens")),
    ]
    for wrong, message in mistakes:
        if torch.equal(got, wrong):
            hint(message)
    fallback_hint(msg("{where}: a key is allowed when both rules allow it: it is not in the query's future, and it is "
                      "a real token of that sequence", where=where))


_LEFT_PADDED = (((5, 3), 5), ((2, 4, 1), 4), ((3,), 3), ((1, 6, 4), 6))


@guard_errors
def left_padded_decoder(answer: object) -> None:
    """Exercise 3: ``left_padded_decoder_mask(lengths, n)`` -> one mask for a LEFT-padded decoder batch (real tokens
    at the end of each row of n positions): causal AND real keys, broadcastable to ``(b, h, i, j)``."""
    fn = expect_function(answer, "left_padded_decoder_mask(lengths, n)")
    for lengths, n in _LEFT_PADDED:
        result, _ = _mask_of(fn, list(lengths), n)
        _decoder_mask(result, lengths, n)
    correct(msg("causal AND real keys, with the padding in front: the padded queries at the start have no key at "
                "all, and the library gives them zeros"))
