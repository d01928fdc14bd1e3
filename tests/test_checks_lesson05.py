"""Lesson 05's exercise checks accept every right answer and reject common mistakes with their own hint."""

import pytest
import torch
from einops import rearrange
from torch import nn

import attention_lab as al
from attention_lab.teaching.checks import lesson05 as check


def accepted(capsys, call):
    call()
    assert capsys.readouterr().out.startswith("Correct:")


# ---- exercise 1: split_heads ----

@pytest.mark.parametrize("split", [
    lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=h),
    lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2),
    lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(0, 2, 1, 3).contiguous(),
    lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
])
def test_split_heads_accepts(capsys, split):
    accepted(capsys, lambda: check.split_heads(split))


@pytest.mark.parametrize("split,message", [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), r"reshaping \(b, n, e\) straight to \(b, h, n, d\)"),
    (lambda x, h: rearrange(x, "b n (d h) -> b h n d", h=h), r"contiguous block of d features: group the last "
                                                             r"axis as \(h d\)"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, -1), r"the head axis is third"),
    (lambda x, h: x, r"the result should be \(b, h, n, d\)"),
    (lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=h).flip(2), r"shape is right but the values"),
    (lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=3), r"raised EinopsError when called with "
                                                             r"\(\(1, 4, 8\), 4\)"),  # hard-coded h
])
def test_split_heads_rejects(split, message):
    with pytest.raises(AssertionError, match=r"^Not yet\. Hint: .*" + message):
        check.split_heads(split)


def test_split_heads_stub_and_non_function():
    def stub(x, h):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    with pytest.raises(AssertionError, match="still raises NotImplementedError"):
        check.split_heads(stub)
    with pytest.raises(AssertionError, match=r"pass your function itself"):
        check.split_heads(torch.zeros(2, 3, 5, 4))


# ---- exercise 2: merge_heads ----

@pytest.mark.parametrize("merge", [
    lambda o: rearrange(o, "b h n d -> b n (h d)"),
    lambda o: o.transpose(1, 2).reshape(o.shape[0], o.shape[2], -1),
    lambda o: torch.cat(o.unbind(1), dim=-1),
])
def test_merge_heads_accepts(capsys, merge):
    accepted(capsys, lambda: check.merge_heads(merge))


@pytest.mark.parametrize("merge,message", [
    (lambda o: o.reshape(o.shape[0], o.shape[2], -1), r"reshaping \(b, h, n, d\) straight to \(b, n, e\)"),
    (lambda o: rearrange(o, "b h n d -> b n (d h)"), r"merge as \(h d\)"),
    (lambda o: o.transpose(1, 2), r"the result should be \(b, n, h\*d\)"),
    (lambda o: rearrange(o, "b h n d -> b n (h d)").flip(1), r"undo split_heads exactly"),
])
def test_merge_heads_rejects(merge, message):
    with pytest.raises(AssertionError, match=r"^Not yet\. Hint: .*" + message):
        check.merge_heads(merge)


# ---- exercise 3: parameter_count ----

@pytest.mark.parametrize("answer", [4 * 96 * 96 + 4 * 96, 37248, 37248.0, torch.tensor(37248)])
def test_parameter_count_accepts(capsys, answer):
    accepted(capsys, lambda: check.parameter_count(answer, embed_dim=96, num_heads=12))


@pytest.mark.parametrize("answer,message", [
    (4 * 96 * 96, r"each projection also has a bias"),
    (3 * 96 * 96 + 3 * 96, r"a fourth, the output projection"),
    ((4 * 96 * 96 + 4 * 96) // 12, r"does not depend on the number of heads"),
    ((4 * 96 * 96 + 4 * 96) * 12, r"does not depend on the number of heads"),
    (12345, r"add up every weight matrix and bias"),
    ("many", r"give a number, not a string"),
    ("37248", r"give a number, not a string: '37248' is text"),
    (None, r"give a whole number"),
    (float("inf"), r"give a whole number"),
    (37248.5, r"a parameter count is a whole number"),
])
def test_parameter_count_rejects(answer, message):
    with pytest.raises(AssertionError, match=r"^Not yet\. Hint: .*" + message):
        check.parameter_count(answer, embed_dim=96, num_heads=12)


# ---- exercise 4: causal_output ----

@pytest.fixture
def setup():
    torch_mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    return torch_mha, torch.randn(1, 5, 16)


def test_causal_output_accepts(capsys, setup):
    torch_mha, x = setup
    ours = al.MultiHeadAttention.from_torch(torch_mha)
    for answer in (ours(x, mask=al.causal_mask(5))[0],  # with autograd history: the check detaches
                   ours(x, mask=al.causal_mask(5), need_weights=True)[0],
                   torch_mha(x, x, x, attn_mask=al.to_torch_attn_mask(al.causal_mask(5)))[0]):
        accepted(capsys, lambda answer=answer: check.causal_output(answer, torch_mha, x))


def test_causal_output_rejects(setup):
    torch_mha, x = setup
    ours = al.MultiHeadAttention.from_torch(torch_mha)
    causal = al.causal_mask(5)
    cases = [
        (ours(x)[0], r"without a mask every token also attends to the tokens after it"),
        (ours(x, mask=~causal)[0], r"PyTorch's polarity \(True = blocked\)"),
        (al.MultiHeadAttention(16, 4)(x, mask=causal)[0], r"not a fresh MultiHeadAttention"),
        (ours(x, mask=causal), r"keep only the output"),
        (ours(x, mask=causal)[0][0], r"the output has the input's shape \(b, n, e\) = \(1, 5, 16\)"),
        (None, r"still empty"),
    ]
    for answer, message in cases:
        with pytest.raises(AssertionError, match=r"^Not yet\. Hint: .*" + message):
            check.causal_output(answer, torch_mha, x)
