"""Answers to lesson 04's exercises (masks): a lower-right causal mask, documents packed into one sequence, a
left-padded decoder batch."""

import numpy as np
import torch

import attention_lab as al
from attention_lab.teaching.checks import lesson04

from . import GENERIC, Attempt

# ---- 04/1: a causal mask aligned at the lower right ----


def lower_right_loops(n_queries, n_keys):
    cached = n_keys - n_queries
    return [[key <= cached + row for key in range(n_keys)] for row in range(n_queries)]


def lower_right_stub(n_queries, n_keys):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


LOWER = lesson04.lower_right_causal

# ---- 04/2: documents packed into one sequence ----


def packed_repeat(lengths):
    document = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    return (document[:, None] == document[None, :]) & al.causal_mask(len(document))


def packed_block_diag(lengths):
    return torch.block_diag(*[al.causal_mask(n) for n in lengths])


def packed_starts(lengths):
    n = sum(lengths)
    starts = torch.tensor([start for i, length in enumerate(lengths) for start in [sum(lengths[:i])] * length])
    keys, queries = torch.arange(n)[None, :], torch.arange(n)[:, None]
    return (keys >= starts[:, None]) & (keys <= queries)


def packed_loops(lengths):
    owner = [d for d, length in enumerate(lengths) for _ in range(length)]
    return [[owner[i] == owner[j] and j <= i for j in range(len(owner))] for i in range(len(owner))]


def packed_numpy(lengths):
    return packed_repeat(lengths).numpy()


def packed_batched(lengths):  # a leading batch axis of 1
    return packed_repeat(lengths)[None]


def packed_boundaries_off_by_one(lengths):  # each document's first token counted with the previous document
    n = sum(lengths)
    boundaries = torch.tensor(lengths).cumsum(0)[:-1] + 1
    document = torch.bucketize(torch.arange(n), boundaries, right=True)
    return (document[:, None] == document[None, :]) & al.causal_mask(n)


def packed_same_length_blocks(lengths):  # every document as long as the first
    n = sum(lengths)
    document = torch.arange(n) // lengths[0]
    return (document[:, None] == document[None, :]) & al.causal_mask(n)


def packed_stub(lengths):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


PACKED = lesson04.packed_documents

# ---- 04/3: a left-padded decoder batch ----


def _left(lengths, n):
    return torch.arange(n)[None, :] >= n - torch.tensor(lengths)[:, None]  # (b, j)


def left_right(lengths, n):
    return al.causal_mask(n) & _left(lengths, n)[:, None, None, :]


def left_with_flip(lengths, n):
    return al.causal_mask(n)[None, None] & al.padding_mask(lengths, n).flip(-1)[:, None, None, :]


def left_combine(lengths, n):
    return al.combine_masks(al.causal_mask(n), al.as_key_mask(_left(lengths, n)))


def left_heads_expanded(lengths, n):
    return left_right(lengths, n).expand(len(lengths), 4, n, n)


def left_queries_too(lengths, n):  # the padded queries blocked as well: they have no real key in their past anyway
    keys = _left(lengths, n)[:, None, None, :]
    return al.causal_mask(n) & keys & keys.transpose(-2, -1)


def left_fixed_five(lengths, n):  # the prompt's example written in
    return left_right([5, 3], 5)


def left_stub(lengths, n):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


LEFT = lesson04.left_padded_decoder

ATTEMPTS = [
    # 04/1
    Attempt("04/1", "tril by the number of cached tokens", LOWER,
            lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i), right=True),
    Attempt("04/1", "compare positions", LOWER,
            lambda i, j: torch.arange(j)[None, :] <= torch.arange(i)[:, None] + j - i, right=True),
    Attempt("04/1", "the complement of triu", LOWER, lambda i, j: ~torch.ones(i, j, dtype=torch.bool).triu(j - i + 1),
            right=True),
    Attempt("04/1", "numpy", LOWER, lambda i, j: np.tril(np.ones((i, j), dtype=bool), j - i), right=True),
    Attempt("04/1", "the last rows of the square mask", LOWER, lambda i, j: al.causal_mask(j)[j - i:], right=True),
    Attempt("04/1", "nested lists", LOWER, lower_right_loops, right=True),
    Attempt("04/1", "upper-left (causal_mask(i, j))", LOWER, lambda i, j: al.causal_mask(i, j),
            hint="upper-left alignment"),
    Attempt("04/1", "polarity flipped", LOWER, lambda i, j: ~torch.ones(i, j, dtype=torch.bool).tril(j - i),
            hint="polarity is flipped"),
    Attempt("04/1", "hides its own key", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i - 1),
            hint="attend to itself"),
    Attempt("04/1", "one key too many", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i + 1),
            hint="one key too many"),
    Attempt("04/1", "rows and columns swapped", LOWER, lambda i, j: torch.ones(j, i, dtype=torch.bool).triu(i - j),
            hint="rows are queries"),
    Attempt("04/1", "the first size written in", LOWER, lambda i, j: torch.ones(3, 8, dtype=torch.bool).tril(5),
            hint=r"shape \(4, 4\)"),
    Attempt("04/1", "everything allowed", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool),
            hint="up to and including its own position"),
    Attempt("04/1", "an additive float mask", LOWER,
            lambda i, j: al.to_additive_mask(torch.ones(i, j, dtype=torch.bool).tril(j - i)), hint="additive float"),
    Attempt("04/1", "a fixed shift of 5", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(5),
            hint="shift must follow the number of cached"),
    Attempt("04/1", "a shift two short", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - 5),
            hint="shift must follow the number of cached"),
    Attempt("04/1", "the shift's sign flipped", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(i - j),
            hint="no query may see any key"),
    Attempt("04/1", "a float 0/1 mask", LOWER, lambda i, j: torch.ones(i, j).tril(j - i), hint="as floats"),
    Attempt("04/1", "an integer 0/1 mask", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.long).tril(j - i),
            hint="0/1 mask"),
    Attempt("04/1", "direction reversed", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).triu(j - i),
            hint="direction is reversed"),
    Attempt("04/1", "a mask with 2s", LOWER, lambda i, j: 2 * torch.ones(i, j).tril(j - i), hint="bool tensor"),
    Attempt("04/1", "its own key only", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i).triu(j - i),
            hint=GENERIC),
    Attempt("04/1", "an index error", LOWER, lambda i, j: torch.ones(i, j, dtype=torch.bool)[i],
            hint=r"raised IndexError .* with the arguments 3, 8;"),
    Attempt("04/1", "no return", LOWER, lambda i, j: None, hint="returned None"),
    Attempt("04/1", "untouched stub", LOWER, lower_right_stub, hint="still raises NotImplementedError"),
    Attempt("04/1", "the mask, not a function", LOWER, al.causal_mask(3, 8), hint="define a function"),
    # 04/2
    Attempt("04/2", "document ids and a causal mask", PACKED, packed_repeat, right=True),
    Attempt("04/2", "block_diag of causal masks", PACKED, packed_block_diag, right=True),
    Attempt("04/2", "each token's document start", PACKED, packed_starts, right=True),
    Attempt("04/2", "nested lists", PACKED, packed_loops, right=True),
    Attempt("04/2", "numpy", PACKED, packed_numpy, right=True),
    Attempt("04/2", "a batch axis of 1", PACKED, packed_batched, right=True),
    Attempt("04/2", "causal over the whole sequence", PACKED, lambda lengths: al.causal_mask(sum(lengths)),
            hint="a causal mask over the whole sequence"),
    Attempt("04/2", "block-diagonal, not causal", PACKED,
            lambda lengths: torch.block_diag(*[torch.ones(n, n) for n in lengths]).bool(),
            hint="must not see the tokens after it"),
    Attempt("04/2", "polarity flipped", PACKED, lambda lengths: ~packed_repeat(lengths), hint="polarity is flipped"),
    Attempt("04/2", "without the diagonal", PACKED,
            lambda lengths: packed_repeat(lengths) & ~torch.eye(sum(lengths), dtype=torch.bool),
            hint="also attend to itself"),
    Attempt("04/2", "direction reversed", PACKED, lambda lengths: packed_repeat(lengths).T,
            hint="direction is reversed"),
    Attempt("04/2", "either rule with |", PACKED,
            lambda lengths: packed_repeat(lengths) | al.causal_mask(sum(lengths)),
            hint="a causal mask over the whole sequence"),  # | gives just that here: the hint is true for it
    Attempt("04/2", "boundaries off by one", PACKED, packed_boundaries_off_by_one, hint="your documents have lengths"),
    Attempt("04/2", "every document as long as the first", PACKED, packed_same_length_blocks,
            hint="your documents have lengths"),
    Attempt("04/2", "a float 0/1 mask", PACKED, lambda lengths: packed_repeat(lengths).float(), hint="as floats"),
    Attempt("04/2", "an additive mask", PACKED, lambda lengths: al.to_additive_mask(packed_repeat(lengths)),
            hint="additive float mask"),
    Attempt("04/2", "an integer 0/1 mask", PACKED, lambda lengths: packed_repeat(lengths).long(), hint="0/1 mask"),
    Attempt("04/2", "the first packing written in", PACKED, lambda lengths: packed_repeat([3, 2, 4]),
            hint=r"shape \(6, 6\)"),
    Attempt("04/2", "one row per document", PACKED, lambda lengths: torch.ones(len(lengths), sum(lengths)).bool(),
            hint=r"has shape \(9, 9\)"),
    Attempt("04/2", "self only", PACKED, lambda lengths: torch.eye(sum(lengths), dtype=torch.bool),
            hint=r"your documents have lengths \[1, 1, 1"),  # true: the diagonal is nine documents of one token
    Attempt("04/2", "a tensor of lengths summed wrongly", PACKED, lambda lengths: torch.ones(lengths, lengths),
            hint="raised TypeError"),
    Attempt("04/2", "no return", PACKED, lambda lengths: None, hint="returned None"),
    Attempt("04/2", "untouched stub", PACKED, packed_stub, hint="still raises NotImplementedError"),
    Attempt("04/2", "not a function", PACKED, packed_repeat([3, 2, 4]), hint="define a function"),
    # 04/3
    Attempt("04/3", "causal & left padding", LEFT, left_right, right=True),
    Attempt("04/3", "padding_mask flipped", LEFT, left_with_flip, right=True),
    Attempt("04/3", "combine_masks", LEFT, left_combine, right=True),
    Attempt("04/3", "copied over 4 heads", LEFT, left_heads_expanded, right=True),
    Attempt("04/3", "numpy", LEFT, lambda lengths, n: left_right(lengths, n).numpy(), right=True),
    Attempt("04/3", "the padded queries blocked too", LEFT, left_queries_too, right=True),
    Attempt("04/3", "padding at the end", LEFT,
            lambda lengths, n: al.causal_mask(n) & al.as_key_mask(al.padding_mask(lengths, n)),
            hint="padding is on the other side"),
    Attempt("04/3", "polarity flipped", LEFT, lambda lengths, n: ~left_right(lengths, n),
            hint="polarity of the whole mask is flipped"),
    Attempt("04/3", "sees only the future", LEFT,
            lambda lengths, n: ~al.causal_mask(n) & _left(lengths, n)[:, None, None, :], hint="causal part is flipped"),
    Attempt("04/3", "causal mask transposed", LEFT,
            lambda lengths, n: al.causal_mask(n).T & _left(lengths, n)[:, None, None, :],
            hint="causal part is flipped"),
    Attempt("04/3", "either rule with |", LEFT,
            lambda lengths, n: al.causal_mask(n) | _left(lengths, n)[:, None, None, :],
            hint="with \\| a key passes if either"),
    Attempt("04/3", "padding only", LEFT,
            lambda lengths, n: _left(lengths, n)[:, None, None, :].expand(len(lengths), 1, n, n),
            hint="padding part only"),
    Attempt("04/3", "causal only", LEFT, lambda lengths, n: al.causal_mask(n).expand(len(lengths), 1, n, n),
            hint="causal part only"),
    Attempt("04/3", "padding inverted", LEFT,
            lambda lengths, n: al.causal_mask(n) & ~_left(lengths, n)[:, None, None, :],
            hint="padding part is inverted"),
    Attempt("04/3", "a 3-D mask", LEFT, lambda lengths, n: left_right(lengths, n)[:, 0], hint="add a head axis"),
    Attempt("04/3", "key axis in the wrong place", LEFT,
            lambda lengths, n: al.causal_mask(n) & _left(lengths, n)[:, None, :, None], hint=GENERIC),
    Attempt("04/3", "the prompt's batch written in", LEFT, left_fixed_five, hint="must broadcast to"),
    Attempt("04/3", "an integer 0/1 mask", LEFT, lambda lengths, n: left_right(lengths, n).long(), hint="0/1 mask"),
    Attempt("04/3", "a float 0/1 mask", LEFT, lambda lengths, n: left_right(lengths, n).float(),
            hint="float mask is additive"),
    Attempt("04/3", "and the diagonal", LEFT,
            lambda lengths, n: left_right(lengths, n) & torch.eye(n, dtype=torch.bool), hint=GENERIC),
    Attempt("04/3", "no return", LEFT, lambda lengths, n: None, hint="returned None"),
    Attempt("04/3", "untouched stub", LEFT, left_stub, hint="still raises NotImplementedError"),
    Attempt("04/3", "the mask, not a function", LEFT, left_right([5, 3], 5), hint="define a function"),
    Attempt("04/3", "lengths as a tensor subtracted from a list", LEFT, lambda lengths, n: n - lengths,
            hint="raised TypeError"),
]
