"""Every exercise check of lesson 04 accepts right answers and rejects the common mistakes with their hints."""

import torch
from _check_helpers import accepts, rejects

import attention_lab as al
from attention_lab.teaching.checks import lesson04


def test_causal_by_hand(capsys):
    n = 5
    future = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
    accepts(capsys, lesson04.causal_by_hand, ~future, n)
    accepts(capsys, lesson04.causal_by_hand, torch.ones(n, n).tril(), n)  # the 0/1 twin
    rejects(lesson04.causal_by_hand, future, n, hint="polarity is flipped")
    rejects(lesson04.causal_by_hand, torch.ones(n, n, dtype=torch.bool).tril(-1), n, hint="attend to itself")
    rejects(lesson04.causal_by_hand, (~future).T, n, hint="see the future and not the past")
    rejects(lesson04.causal_by_hand, ~future[:4], n, hint="shape \\(5, 5\\)")
    rejects(lesson04.causal_by_hand, al.to_additive_mask(~future), n, hint="additive float mask")
    rejects(lesson04.causal_by_hand, torch.ones(n, n, dtype=torch.bool), n, hint="triu")


def test_key_mask_from_torch(capsys):
    kpm = torch.tensor([[False, False, True], [False, True, True]])
    accepts(capsys, lesson04.key_mask_from_torch, (~kpm)[:, None, None, :], kpm)
    accepts(capsys, lesson04.key_mask_from_torch, al.as_key_mask(al.from_torch_padding_mask(kpm)), kpm)
    rejects(lesson04.key_mask_from_torch, kpm[:, None, None, :], kpm, hint="invert it")
    rejects(lesson04.key_mask_from_torch, ~kpm, kpm, hint="add a head axis and a query axis")
    rejects(lesson04.key_mask_from_torch, (~kpm)[:, None, :, None], kpm, hint="the query axis should be 1")
    rejects(lesson04.key_mask_from_torch, (~kpm)[None], kpm, hint="\\[:, None, None, :\\]")


def test_padding_from_lengths(capsys):
    lengths, max_len = [3, 1, 0], 4
    good = torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]
    accepts(capsys, lesson04.padding_from_lengths, good, lengths, max_len)
    accepts(capsys, lesson04.padding_from_lengths, good.long(), lengths, max_len)
    rejects(lesson04.padding_from_lengths, ~good, lengths, max_len, hint="polarity is flipped")
    rejects(lesson04.padding_from_lengths, torch.arange(max_len)[None, :] <= torch.tensor(lengths)[:, None],
            lengths, max_len, hint="one True too many")
    rejects(lesson04.padding_from_lengths, good[:, :3], lengths, max_len, hint="shape \\(3, 4\\)")


def test_causal_and_padding(capsys):
    lengths, n = [4, 2], 4
    causal, keys = al.causal_mask(n), al.as_key_mask(al.padding_mask(lengths, n))
    accepts(capsys, lesson04.causal_and_padding, causal & keys, lengths, n)
    accepts(capsys, lesson04.causal_and_padding, al.combine_masks(causal, keys), lengths, n)
    accepts(capsys, lesson04.causal_and_padding, (causal & keys).expand(2, 3, 4, 4), lengths, n)  # with heads
    rejects(lesson04.causal_and_padding, causal | keys, lengths, n, hint="combine with &")
    rejects(lesson04.causal_and_padding, keys, lengths, n, hint="padding part only")
    rejects(lesson04.causal_and_padding, causal, lengths, n, hint="causal part only")
    rejects(lesson04.causal_and_padding, (causal & keys)[:, 0], lengths, n, hint="add a head axis")
    rejects(lesson04.causal_and_padding, (causal & keys)[:, :, :3], lengths, n, hint="must broadcast to")
