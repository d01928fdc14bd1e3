"""Every exercise check of lessons 00-02 accepts right answers (in their equivalent forms) and rejects the common
mistakes with the hint meant for them."""

import math

import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab.teaching.checks import lesson00, lesson01, lesson02

# ---- lesson 00 ----

@pytest.fixture
def weights():
    return torch.softmax(torch.randn(5, 5) * 3, dim=-1)


def test_weights_shape(capsys):
    accepts(capsys, lesson00.weights_shape, (7, 7), n_tokens=7)
    accepts(capsys, lesson00.weights_shape, torch.Size([7, 7]), n_tokens=7)
    accepts(capsys, lesson00.weights_shape, [7, 7], n_tokens=7)
    rejects(lesson00.weights_shape, (7,), n_tokens=7, hint="one row per query token, one column per key")
    rejects(lesson00.weights_shape, (7, 4), n_tokens=7, hint="every token is a query")
    rejects(lesson00.weights_shape, 7, n_tokens=7, hint="tuple of integers")


def test_most_attended(capsys):
    tokens = ["a", "b", "c"]
    w = torch.tensor([[0.1, 0.1, 0.8], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])
    accepts(capsys, lesson00.most_attended, "a", w, query=2, tokens=tokens)
    accepts(capsys, lesson00.most_attended, 0, w, query=2, tokens=tokens)
    accepts(capsys, lesson00.most_attended, torch.tensor(0), w, query=2, tokens=tokens)
    rejects(lesson00.most_attended, "a", w, query=1, tokens=tokens, hint="look along row 1")
    w2 = torch.tensor([[0.1, 0.1, 0.8], [0.9, 0.05, 0.05], [0.2, 0.7, 0.1]])
    rejects(lesson00.most_attended, "b", w2, query=0, tokens=tokens, hint="you read column 0")
    rejects(lesson00.most_attended, "zebra", w, query=0, tokens=tokens, hint="not one of the tokens")


def test_row_sums(capsys, weights):
    accepts(capsys, lesson00.row_sums, weights.sum(-1), weights)
    accepts(capsys, lesson00.row_sums, weights.sum(-1).tolist(), weights)
    accepts(capsys, lesson00.row_sums, torch.ones(5), weights)
    accepts(capsys, lesson00.row_sums, weights.sum(-1, keepdim=True), weights)
    rejects(lesson00.row_sums, weights.sum(0), weights, hint="you summed each column")
    rejects(lesson00.row_sums, weights.sum(), weights, hint="one number for the whole matrix")
    rejects(lesson00.row_sums, ..., weights, hint="still empty")


# ---- lesson 01 ----

@pytest.fixture
def qkv():
    return torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 5)


def test_scores_for_query(capsys, qkv):
    q, k, _ = qkv
    accepts(capsys, lesson01.scores_for_query, k @ q[2], q, k, i=2)
    accepts(capsys, lesson01.scores_for_query, torch.stack([q[2] @ k[j] for j in range(4)]).tolist(), q, k, i=2)
    rejects(lesson01.scores_for_query, q @ k[2], q, k, i=2, hint="that is column 2")
    rejects(lesson01.scores_for_query, q @ q[2], q, k, i=2, hint="compared the query with other queries")
    rejects(lesson01.scores_for_query, k @ q[2] / math.sqrt(3), q, k, i=2, hint="plain dot product")
    rejects(lesson01.scores_for_query, q @ k.T, q, k, i=2, hint="one score per key")


def test_softmax_weights(capsys, qkv):
    q, k, _ = qkv
    s = k @ q[1]
    accepts(capsys, lesson01.softmax_weights, torch.softmax(s, 0), q, k, i=1)
    accepts(capsys, lesson01.softmax_weights, s.exp() / s.exp().sum(), q, k, i=1)
    rejects(lesson01.softmax_weights, s, q, k, i=1, hint="raw scores")
    rejects(lesson01.softmax_weights, s.exp(), q, k, i=1, hint="divide by the sum of the exponentials")
    rejects(lesson01.softmax_weights, s / s.sum(), q, k, i=1, hint="exponentiate first")


def test_output_for_query(capsys, qkv):
    q, k, v = qkv
    w = torch.softmax(k @ q[0], 0)
    accepts(capsys, lesson01.output_for_query, w @ v, q, k, v, i=0)
    accepts(capsys, lesson01.output_for_query, sum(w[j] * v[j] for j in range(4)), q, k, v, i=0)
    rejects(lesson01.output_for_query, (k @ q[0]) @ v, q, k, v, i=0, hint="normalised weights")
    rejects(lesson01.output_for_query, v.mean(0), q, k, v, i=0, hint="plain average")
    q3, k3 = torch.randn(4, 5), torch.randn(4, 5)  # keys as wide as the values: mixing keys fits the shape
    w3 = torch.softmax(k3 @ q3[0], 0)
    rejects(lesson01.output_for_query, w3 @ k3, q3, k3, v, i=0, hint="mixed the keys")


def test_cosine_similarity_matrix(capsys):
    a = torch.randn(4, 4)
    unit = torch.nn.functional.normalize(a, dim=-1)
    accepts(capsys, lesson01.cosine_similarity_matrix, unit @ unit.T, a)
    accepts(capsys, lesson01.cosine_similarity_matrix, torch.cosine_similarity(a[:, None], a[None], dim=-1), a)
    rejects(lesson01.cosine_similarity_matrix, a @ a.T, a, hint="that is the dot product")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1, keepdim=True), a, hint="not only one")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1), a, hint="not only one")


# ---- lesson 02 ----

@pytest.fixture
def qkv2():
    return torch.randn(5, 4), torch.randn(6, 4), torch.randn(6, 3)


def test_scaled_scores(capsys, qkv2):
    q, k, _ = qkv2
    accepts(capsys, lesson02.scaled_scores, q @ k.T / 2.0, q, k)
    accepts(capsys, lesson02.scaled_scores, torch.einsum("id,jd->ij", q, k) * 0.5, q, k)
    rejects(lesson02.scaled_scores, q @ k.T, q, k, hint="not scaled")
    rejects(lesson02.scaled_scores, q @ k.T / 4.0, q, k, hint="not by d")
    square_q, square_k = torch.randn(5, 4), torch.randn(5, 4)
    rejects(lesson02.scaled_scores, square_k @ square_q.T / 2, square_q, square_k, hint="the transpose")


def test_stable_softmax(capsys):
    def good(x):
        e = torch.exp(x - x.max(-1, keepdim=True).values)
        return e / e.sum(-1, keepdim=True)

    accepts(capsys, lesson02.stable_softmax, good)
    accepts(capsys, lesson02.stable_softmax, lambda x: torch.softmax(x, dim=-1))
    rejects(lesson02.stable_softmax, lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True),
            hint="overflows to inf")
    rejects(lesson02.stable_softmax, lambda x: torch.softmax(x, dim=0), hint="normalise over the last axis")
    rejects(lesson02.stable_softmax, lambda x: torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(-1, keepdim=True),
            hint="each row's own maximum, not the maximum of the whole tensor")
    rejects(lesson02.stable_softmax, lambda x: torch.softmax(x.clamp(-50, 50), -1), hint="finite but wrong")
    rejects(lesson02.stable_softmax, torch.ones(3), hint="pass your function itself")


def test_attention_output(capsys, qkv2):
    q, k, v = qkv2
    s = q @ k.T / 2.0
    accepts(capsys, lesson02.attention_output, torch.softmax(s, -1) @ v, q, k, v)
    accepts(capsys, lesson02.attention_output, torch.nn.functional.scaled_dot_product_attention(q, k, v), q, k, v)
    rejects(lesson02.attention_output, torch.softmax(s, -2) @ v, q, k, v, hint="dim=-2 normalises over queries")
    rejects(lesson02.attention_output, torch.softmax(q @ k.T, -1) @ v, q, k, v, hint="missing the 1/sqrt")
    rejects(lesson02.attention_output, s @ v, q, k, v, hint="apply softmax")
    rejects(lesson02.attention_output, torch.softmax(q @ k.T / 4, -1) @ v, q, k, v, hint="not by d")


def test_stable_softmax_leaves_the_global_generator_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson02.stable_softmax(lambda x: torch.softmax(x, -1))
    assert torch.equal(torch.rand(3), expected)


def test_predicted_variance(capsys):
    accepts(capsys, lesson02.predicted_variance, 64, d=64)
    accepts(capsys, lesson02.predicted_variance, 64.0, d=64)
    rejects(lesson02.predicted_variance, 8, d=64, hint="standard deviation")
    rejects(lesson02.predicted_variance, 1, d=64, hint="after dividing")
    rejects(lesson02.predicted_variance, 32, d=64, hint="variances add")
