"""Every exercise check of lesson 04 accepts right answers (bool, numpy, any broadcastable head axis) and rejects
the common mistakes with their own hints, a 0/1 or float mask with the right entries included (the library refuses
an integer mask and reads a float one as additive); an error in the learner's function becomes a hint."""

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects

import attention_lab as al
from attention_lab.teaching.checks import lesson04

# ---- exercise 1: causal mask aligned at the lower right ----


@pytest.mark.parametrize("fn", [
    lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i),
    lambda i, j: torch.arange(j)[None, :] <= torch.arange(i)[:, None] + (j - i),
    lambda i, j: ~torch.ones(i, j, dtype=torch.bool).triu(j - i + 1),
    lambda i, j: np.tril(np.ones((i, j), dtype=bool), j - i),
    lambda i, j: al.causal_mask(j)[j - i:],  # the last i rows of the square mask
])
def test_lower_right_causal_accepts(capsys, fn):
    accepts(capsys, lesson04.lower_right_causal, fn)


@pytest.mark.parametrize("fn,message", [
    (lambda i, j: al.causal_mask(i, j), "upper-left alignment"),
    (lambda i, j: ~torch.ones(i, j, dtype=torch.bool).tril(j - i), "polarity is flipped"),
    (lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i - 1), "attend to itself"),
    (lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i + 1), "one key too many"),
    (lambda i, j: torch.ones(j, i, dtype=torch.bool).triu(i - j), "rows are queries"),
    (lambda i, j: torch.ones(3, 8, dtype=torch.bool).tril(5), r"shape \(4, 4\)"),  # one size hard-coded
    (lambda i, j: torch.ones(i, j, dtype=torch.bool), "up to and including its own position"),
    (lambda i, j: al.to_additive_mask(torch.ones(i, j, dtype=torch.bool).tril(j - i)), "additive float mask"),
    (lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(5), "shift must follow the number of cached"),  # fixed
    (lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i).reshape(3, 8), r"raised RuntimeError"),  # (3, 8)
    (lambda i, j: torch.ones(i, j).tril(j - i), "as floats: a float mask is additive"),  # right entries, float
    (lambda i, j: torch.ones(i, j, dtype=torch.long).tril(j - i), "0/1 mask"),  # right entries, integer
    (lambda i, j: torch.ones(i, j, dtype=torch.bool).triu(j - i), "direction is reversed"),
    (al.causal_mask(3, 8), "should be a function"),
])
def test_lower_right_causal_rejects(fn, message):
    rejects(lesson04.lower_right_causal, fn, hint=message)


def test_lower_right_causal_stub_gets_its_own_hint():
    def stub(i, j):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    rejects(lesson04.lower_right_causal, stub, hint="still raises NotImplementedError")


# ---- exercise 2: nn.MultiheadAttention's key_padding_mask as our key mask ----

KPM = torch.tensor([[False, False, True], [False, True, True]])


def test_key_mask_from_torch_accepts(capsys):
    for answer in [(~KPM)[:, None, None, :], al.as_key_mask(al.from_torch_padding_mask(KPM)),
                   (~KPM).unsqueeze(1).unsqueeze(1),
                   np.logical_not(KPM.numpy())[:, None, None, :], (KPM == 0).view(2, 1, 1, 3)]:
        accepts(capsys, lesson04.key_mask_from_torch, answer, KPM)


def test_key_mask_from_torch_rejects():
    rejects(lesson04.key_mask_from_torch, KPM[:, None, None, :], KPM, hint="polarity must be turned around")
    # not inverted and not reshaped: the polarity hint, never "the values are right"
    rejects(lesson04.key_mask_from_torch, KPM, KPM, hint="polarity must be turned around")
    rejects(lesson04.key_mask_from_torch, ~KPM, KPM, hint="the polarity is right; now the mask needs axes")
    rejects(lesson04.key_mask_from_torch, (~KPM)[:, None, :, None], KPM, hint="query axis should have size 1")
    rejects(lesson04.key_mask_from_torch, (~KPM)[None], KPM, hint="size-1 axes for the heads and the queries")
    rejects(lesson04.key_mask_from_torch, (~KPM).long()[:, None, None, :], KPM, hint="0/1 mask")
    rejects(lesson04.key_mask_from_torch, (~KPM).float()[:, None, None, :], KPM, hint="float mask is additive")
    # not inverted, copied over the queries: still the polarity hint
    rejects(lesson04.key_mask_from_torch, KPM[:, None, None, :].expand(2, 1, 3, 3), KPM,
            hint="polarity must be turned around")


def test_key_mask_from_torch_fallback_keeps_the_code_to_itself():
    with pytest.raises(AssertionError) as error:
        lesson04.key_mask_from_torch((~KPM)[None], KPM)
    for code in ("[:, None, None, :]", "~", "unsqueeze", "invert"):
        assert code not in str(error.value)


# ---- exercise 3: padding mask from lengths ----

def test_padding_from_lengths(capsys):
    lengths, max_len = [3, 1, 0], 4
    good = torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]
    for answer in [good, good.numpy(), al.padding_mask(lengths, max_len), [[p < n for p in range(4)] for n in lengths]]:
        accepts(capsys, lesson04.padding_from_lengths, answer, lengths, max_len)
    rejects(lesson04.padding_from_lengths, good.long(), lengths, max_len, hint="0/1 mask")
    rejects(lesson04.padding_from_lengths, good.float(), lengths, max_len, hint="float mask is additive")
    rejects(lesson04.padding_from_lengths, ~good, lengths, max_len, hint="polarity is flipped")
    rejects(lesson04.padding_from_lengths, torch.arange(max_len)[None, :] <= torch.tensor(lengths)[:, None],
            lengths, max_len, hint="one True too many")
    rejects(lesson04.padding_from_lengths, good[:, :3], lengths, max_len, hint=r"shape \(3, 4\)")
    rejects(lesson04.padding_from_lengths, good * 2, lengths, max_len, hint="make it a bool tensor")


# ---- exercise 4: a left-padded decoder batch ----

LENGTHS, N = [5, 3, 2], 5


def _left_masks():
    causal = al.causal_mask(N)  # (i, j)
    real = torch.arange(N)[None, :] >= N - torch.tensor(LENGTHS)[:, None]  # (b, j): real tokens at the end
    return causal, al.as_key_mask(real)  # (b, 1, 1, j)


def test_left_padded_decoder_accepts(capsys):
    causal, keys = _left_masks()
    for answer in [causal & keys, al.combine_masks(causal, keys), (causal & keys).expand(3, 4, N, N),
                   (causal & keys).numpy(),
                   causal[None, None] & al.padding_mask(LENGTHS, N).flip(-1)[:, None, None, :]]:
        accepts(capsys, lesson04.left_padded_decoder, answer, LENGTHS, N)


def test_left_padded_decoder_names_each_mistake():
    causal, keys = _left_masks()
    rejects(lesson04.left_padded_decoder, (causal & keys).long(), LENGTHS, N, hint="0/1 mask")
    rejects(lesson04.left_padded_decoder, (causal & keys).float(), LENGTHS, N, hint="float mask is additive")
    right_padded = al.as_key_mask(al.padding_mask(LENGTHS, N))
    cases = [
        (causal & right_padded, "padding is on the other side"),
        (~(causal & keys), "polarity of the whole mask is flipped"),
        (~causal & keys, "causal part is flipped"),
        (causal.T & keys, "causal part is flipped"),
        (causal | keys, "with \\| a key passes if either"),
        (keys.expand(3, 1, N, N), "padding part only"),
        (causal.expand(3, 1, N, N), "causal part only"),
        (causal & ~keys, "padding part is inverted"),
        ((causal & keys)[:, 0], "add a head axis"),
        ((causal & keys)[:, :, :3], "must broadcast to"),
        ((causal & keys) & torch.eye(N, dtype=torch.bool), "both rules allow it"),
    ]
    for answer, message in cases:
        rejects(lesson04.left_padded_decoder, answer, LENGTHS, N, hint=message)


def test_left_padded_decoder_accepts_masking_the_padded_queries_too(capsys):
    # with the padding in front, a padded query has only padded keys in its past: blocking its row changes nothing
    causal, keys = _left_masks()
    accepts(capsys, lesson04.left_padded_decoder, causal & keys & keys.transpose(-2, -1), LENGTHS, N)


# ---- slips found by trying answers a learner would write ----

def test_lower_right_causal_fixed_shift_and_missing_return_get_their_own_hints():
    rejects(lesson04.lower_right_causal, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(5),
            hint="shift must follow the number of cached tokens")  # right for 3 x 8, all True for 4 x 4
    rejects(lesson04.lower_right_causal, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - 5),
            hint="shift must follow the number of cached tokens")  # two short for 3 x 8
    rejects(lesson04.lower_right_causal, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(i - j),
            hint="no query may see any key")  # the shift with its sign flipped
    rejects(lesson04.lower_right_causal, lambda i, j: None, hint="returned None")


def test_an_error_names_the_arguments_that_are_not_tensors():
    too_far = lambda i, j: torch.ones(i, j, dtype=torch.bool)[i]  # indexes one row past the end
    rejects(lesson04.lower_right_causal, too_far, hint=r"raised IndexError .* with the arguments 3, 8;")


def test_key_mask_copied_over_the_queries_is_not_told_its_polarity_is_wrong():
    copied = (~KPM)[:, None, None, :].expand(2, 1, 4, 3)  # right values, a query axis of 4
    with pytest.raises(AssertionError) as error:
        lesson04.key_mask_from_torch(copied, KPM)
    assert "values are right" in str(error.value) and "True must mean" not in str(error.value)


def test_padding_from_lengths_left_padding_gets_its_own_hint():
    left = torch.arange(5)[None, :] >= 5 - torch.tensor([4, 2, 0])[:, None]
    rejects(lesson04.padding_from_lengths, left, [4, 2, 0], 5, hint="padding is added at the end")
