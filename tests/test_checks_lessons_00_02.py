"""Every exercise check of lessons 00-02 accepts right answers (in their equivalent forms: keepdim, einsum, numpy,
float64, lists) and rejects the common mistakes with the hint meant for them; an error in the learner's code
becomes a hint."""

import math

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab.teaching.checks import lesson00, lesson01, lesson02

# ---- lesson 00 ----

TOKENS = ["the", "cat", "chased", "a", "mouse"]


@pytest.fixture
def weights():
    # column 1 is brightest in row 4, row 1 is brightest in column 2: reading a row or a column differs
    w = torch.tensor([[0.60, 0.10, 0.10, 0.10, 0.10],
                      [0.05, 0.15, 0.70, 0.05, 0.05],
                      [0.10, 0.20, 0.50, 0.10, 0.10],
                      [0.30, 0.10, 0.10, 0.40, 0.10],
                      [0.05, 0.45, 0.05, 0.05, 0.40]])
    assert torch.allclose(w.sum(-1), torch.ones(5))
    return w


def test_weights_shape_accepts_every_way_of_writing_it(capsys):
    for answer in [(7, 12), [7, 12], torch.Size([7, 12]), torch.tensor([7, 12]), (7.0, 12.0), np.array([7, 12])]:
        accepts(capsys, lesson00.weights_shape, answer, n_queries=7, n_keys=12)
    accepts(capsys, lesson00.weights_shape, (5, 5), n_tokens=5)  # the self-attention form


def test_weights_shape_names_each_mistake():
    rejects(lesson00.weights_shape, (12, 7), n_queries=7, n_keys=12, hint="rows and columns are swapped")
    rejects(lesson00.weights_shape, (7, 7), n_queries=7, n_keys=12, hint="not as many of one as of the other")
    rejects(lesson00.weights_shape, (84,), n_queries=7, n_keys=12, hint="the weights form a matrix")
    rejects(lesson00.weights_shape, (7, 12.5), n_queries=7, n_keys=12, hint="whole number")
    rejects(lesson00.weights_shape, "7x12", n_queries=7, n_keys=12, hint="tuple of integers")
    rejects(lesson00.weights_shape, 84, n_queries=7, n_keys=12, hint="that is the number of weights")
    rejects(lesson00.weights_shape, 12, n_queries=7, n_keys=12, hint="tuple of integers")
    rejects(lesson00.weights_shape, (3, 4), n_queries=7, n_keys=12, hint="each query token gets one row")
    rejects(lesson00.weights_shape, ..., n_queries=7, n_keys=12, hint="still empty")


def test_attends_most_to_reads_a_column(capsys, weights):
    for answer in ["mouse", 4, 4.0, torch.tensor(4), np.int64(4)]:
        accepts(capsys, lesson00.attends_most_to, answer, weights, key=1, tokens=TOKENS)
    rejects(lesson00.attends_most_to, "chased", weights, key=1, tokens=TOKENS, hint="its row")  # row 1's argmax
    rejects(lesson00.attends_most_to, "the", weights, key=1, tokens=TOKENS, hint="find the brightest cell")
    rejects(lesson00.attends_most_to, 4.6, weights, key=1, tokens=TOKENS, hint="whole number")  # was int(): 4
    rejects(lesson00.attends_most_to, 9, weights, key=1, tokens=TOKENS, hint="from 0 to 4")
    rejects(lesson00.attends_most_to, "dog", weights, key=1, tokens=TOKENS, hint="not one of the tokens")


def test_the_row_hint_comes_only_when_the_row_gives_a_different_answer(weights):
    # key 2: column 2 is brightest in row 1, and row 2 is brightest at column 2 itself ("chased" -> "chased"):
    # the answer is the key itself, whichever way it was read, and is told so
    message = pytest.raises(AssertionError, lesson00.attends_most_to, "chased", weights, key=2, tokens=TOKENS)
    assert "'chased' itself" in str(message.value)
    same = weights.clone()
    same[1] = torch.tensor([0.05, 0.70, 0.15, 0.05, 0.05])  # now row 1 and column 1 both point at "cat"
    same[4] = torch.tensor([0.05, 0.30, 0.05, 0.05, 0.55])
    with pytest.raises(AssertionError) as error:
        lesson00.attends_most_to("the", same, key=1, tokens=TOKENS)
    assert "its row" not in str(error.value)


def test_attention_received(capsys, weights):
    totals = weights.sum(dim=0)
    for answer in [totals, totals.tolist(), weights.sum(0, keepdim=True), totals.double(), totals.numpy(),
                   torch.einsum("ij->j", weights), sum(weights[i] for i in range(5))]:
        accepts(capsys, lesson00.attention_received, answer, weights)
    rejects(lesson00.attention_received, weights.sum(-1), weights, hint="each query hands out")
    rejects(lesson00.attention_received, weights.sum(-1, keepdim=True), weights, hint="each query hands out")
    rejects(lesson00.attention_received, weights.mean(0), weights, hint="average")
    rejects(lesson00.attention_received, weights.sum(), weights, hint="one number for the whole matrix")
    rejects(lesson00.attention_received, totals[:3], weights, hint="one entry per column")
    rejects(lesson00.attention_received, ..., weights, hint="still empty")
    rejects(lesson00.attention_received, totals + 0.1, weights, hint="right shape but not the right values in")


# ---- lesson 01 ----

@pytest.fixture
def qk():
    gen = torch.Generator().manual_seed(3)
    return torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)


def test_scores_for_query(capsys, qk):
    q, k = qk
    right = k @ q[2]
    for answer in [right, right.tolist(), torch.stack([q[2] @ k[j] for j in range(4)]), q[2:3] @ k.T,
                   torch.einsum("d,jd->j", q[2], k), right.double(), right.numpy()]:
        accepts(capsys, lesson01.scores_for_query, answer, q, k, i=2)
    rejects(lesson01.scores_for_query, k @ q[3], q, k, i=2, hint="off by one")
    rejects(lesson01.scores_for_query, k @ q[1], q, k, i=2, hint="off by one")
    rejects(lesson01.scores_for_query, q @ k[2], q, k, i=2, hint="that is column 2")
    rejects(lesson01.scores_for_query, q @ q[2], q, k, i=2, hint="compared the query with other queries")
    rejects(lesson01.scores_for_query, right / math.sqrt(3), q, k, i=2, hint="plain dot product")
    rejects(lesson01.scores_for_query, q @ k.T, q, k, i=2, hint="one score per key")


def test_weight_matrix(capsys, qk):
    q, k = qk
    s = q @ k.T
    for answer in [torch.softmax(s, -1), s.exp() / s.exp().sum(-1, keepdim=True), torch.softmax(s.double(), 1),
                   torch.softmax(torch.einsum("id,jd->ij", q, k), -1).numpy()]:
        accepts(capsys, lesson01.weight_matrix, answer, q, k)
    rejects(lesson01.weight_matrix, torch.softmax(s, 0), q, k, hint="softmax runs over the wrong axis")
    rejects(lesson01.weight_matrix, torch.softmax(s, -1).T, q, k, hint="the transpose")
    rejects(lesson01.weight_matrix, s, q, k, hint="raw scores")
    rejects(lesson01.weight_matrix, s.exp(), q, k, hint="divide by the sum of the exponentials")
    rejects(lesson01.weight_matrix, s.exp() / s.exp().sum(), q, k, hint="on its own")
    rejects(lesson01.weight_matrix, torch.softmax(s / math.sqrt(3), -1), q, k, hint="plain dot product")
    rejects(lesson01.weight_matrix, torch.softmax(s, -1)[0], q, k, hint="a row per query")


def _classmate_attend(q, k, v):
    alpha = q @ k.T
    return torch.exp(alpha) / torch.exp(alpha).sum() @ v


@pytest.mark.parametrize("attend", [
    lambda q, k, v: torch.softmax(q @ k.T, dim=-1) @ v,
    lambda q, k, v: torch.softmax(torch.einsum("id,jd->ij", q, k), -1) @ v,
    lambda q, k, v: (lambda e: e / e.sum(-1, keepdim=True))((q @ k.T).exp()) @ v,
    lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0),
    lambda q, k, v: (torch.softmax(q.float() @ k.float().T, -1) @ v.float()).numpy(),
])
def test_fixed_attend_accepts(capsys, attend):
    accepts(capsys, lesson01.fixed_attend, attend)


@pytest.mark.parametrize("attend,message", [
    (_classmate_attend, "still computes what the classmate's function computes"),
    (lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(0) @ v, "down each column"),
    (lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(-1) @ v, "lost their axis"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ k, "mixed the keys"),
    (lambda q, k, v: (q @ k.T) @ v, "not with the raw scores"),
    (lambda q, k, v: torch.softmax(q @ k.T / 3**0.5, -1) @ v, "plain dot product"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1), r"has shape \(4, 3\)"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ v.reshape(4, -1), r"raised RuntimeError"),  # 4 keys only
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ v * 1.1, "compare your code"),
    (torch.zeros(3), "should be a function"),
])
def test_fixed_attend_rejects(attend, message):
    rejects(lesson01.fixed_attend, attend, hint=message)


def test_cosine_similarity_matrix(capsys):
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(4))
    unit = torch.nn.functional.normalize(a, dim=-1)
    for answer in [unit @ unit.T, torch.cosine_similarity(a[:, None], a[None], dim=-1), (unit @ unit.T).numpy(),
                   (unit.double() @ unit.double().T), torch.einsum("id,jd->ij", unit, unit)]:
        accepts(capsys, lesson01.cosine_similarity_matrix, answer, a)
    rejects(lesson01.cosine_similarity_matrix, a @ a.T, a, hint="that is the dot product")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1, keepdim=True), a, hint="not only one")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1), a, hint="not only one")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm() ** 2, a, hint="whole matrix")


# ---- lesson 02 ----

@pytest.fixture
def qk2():
    gen = torch.Generator().manual_seed(5)
    return torch.randn(5, 4, generator=gen), torch.randn(6, 4, generator=gen)


def test_scaled_scores(capsys, qk2):
    q, k = qk2
    for answer in [q @ k.T / 2.0, torch.einsum("id,jd->ij", q, k) * 0.5, (q.double() @ k.double().T) / 2,
                   (q @ k.T / 2.0).numpy(), q @ k.mT / math.sqrt(q.shape[-1])]:
        accepts(capsys, lesson02.scaled_scores, answer, q, k, d_model=6)
    rejects(lesson02.scaled_scores, q @ k.T, q, k, d_model=6, hint="not scaled")
    rejects(lesson02.scaled_scores, q @ k.T / 4.0, q, k, d_model=6, hint="not by d")
    rejects(lesson02.scaled_scores, q @ k.T / math.sqrt(6), q, k, d_model=6, hint="width of the input tokens")
    rejects(lesson02.scaled_scores, q @ k.T / math.sqrt(5), q, k, d_model=6, hint="number of tokens")
    square_q, square_k = torch.randn(5, 4), torch.randn(5, 4)
    rejects(lesson02.scaled_scores, square_k @ square_q.T / 2, square_q, square_k, hint="the transpose")


def _good_softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize("softmax", [
    _good_softmax,
    lambda x: torch.softmax(x, dim=-1),
    lambda x: torch.exp(x - torch.logsumexp(x, -1, keepdim=True)),
    lambda x: torch.softmax(x.double(), -1),
    lambda x: torch.softmax(x, -1).numpy(),
    lambda x: (lambda e: e / e.sum(-1, keepdim=True))((x - x.amax(-1, keepdim=True)).exp()),
])
def test_stable_softmax_accepts(capsys, softmax):
    accepts(capsys, lesson02.stable_softmax, softmax)


@pytest.mark.parametrize("softmax,message", [
    (lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), "overflows to inf"),
    (lambda x: torch.softmax(x, dim=0), "normalised over another axis"),
    (lambda x: torch.softmax(x, dim=1), "normalised over another axis"),  # right on 2-D, wrong on 3-D
    (lambda x: torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(-1, keepdim=True), "not the maximum of the whole"),
    (lambda x: torch.softmax(x.clamp(-50, 50), -1), "finite but wrong"),
    (lambda x: torch.exp(x - x.max(-1)) / 1, "comes back as a pair"),  # .max(dim) without .values
    (lambda x: (x - x.max(-1).values).exp() / (x - x.max(-1).values).exp().sum(-1, keepdim=True),
     "lost its axis"),  # missing keepdim: an error on (4, 6), wrong values on (5, 5)
    (lambda x: x.exp() / x.exp().sum(-1), "lost its axis"),
    (lambda x: torch.softmax(x, -1)[..., :2], "the input's shape"),
    (lambda x: torch.softmax(x.reshape(4, 6), -1), r"raised RuntimeError"),  # a hard-coded shape
    (lambda x: torch.softmax(x, -1) * 0.9, "differs from softmax"),
    (torch.ones(3), "pass your function itself"),
])
def test_stable_softmax_rejects(softmax, message):
    rejects(lesson02.stable_softmax, softmax, hint=message)


def test_stable_softmax_missing_keepdim_on_a_square_input_gets_the_keepdim_hint():
    def lost_axis_square_only(x):  # right where the shapes cannot line up wrongly, wrong on square inputs
        if x.dim() == 2 and x.shape[0] == x.shape[1]:
            e = (x - x.amax(-1)).exp()
            return e / e.sum(-1, keepdim=True)
        return torch.softmax(x, -1)

    rejects(lesson02.stable_softmax, lost_axis_square_only, hint="lost its axis")


def test_stable_softmax_leaves_the_global_generator_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson02.stable_softmax(lambda x: torch.softmax(x, -1))
    assert torch.equal(torch.rand(3), expected)


def _classmate_attention(Q, K, V):
    d = Q.shape[0]
    weights = torch.softmax(Q @ K.T / math.sqrt(d), dim=0)
    return weights @ V


@pytest.mark.parametrize("attention", [
    lambda Q, K, V: torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1) @ V,
    lambda Q, K, V: torch.softmax(Q @ K.mT / Q.shape[-1] ** 0.5, -1) @ V,
    lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(Q, K, V),
    lambda Q, K, V: torch.softmax(torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(K.shape[-1]), -1) @ V,
    lambda Q, K, V: (torch.softmax(Q.float() @ K.float().mT / math.sqrt(Q.shape[-1]), -1) @ V.float()).numpy(),
])
def test_fixed_attention_accepts(capsys, attention):
    accepts(capsys, lesson02.fixed_attention, attention)


def _scaled(Q, K, V, scale, dim=-1):
    return torch.softmax(Q @ K.transpose(-2, -1) * scale, dim=dim) @ V


@pytest.mark.parametrize("attention,message", [
    (_classmate_attention, "more than one bug"),
    (lambda Q, K, V: torch.softmax(Q @ K.T / math.sqrt(Q.shape[-1]), -1) @ V, "swap only the last two axes"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]), dim=-2), "runs over the queries"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-2])), "not a count of tokens"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[0])), "not a count of tokens"),
    (lambda Q, K, V: _scaled(Q, K, V, 1.0), "missing the 1/sqrt"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / Q.shape[-1]), "not by d"),
    (lambda Q, K, V: torch.softmax(Q @ K.mT / math.sqrt(Q.shape[-1]), -1), "multiply them by V"),
    (lambda Q, K, V: _scaled(Q, K, V, 0.3), "check each step"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]))[..., :1, :], "one row per query"),
    (lambda Q, K, V: _scaled(Q.reshape(5, 4), K, V, 0.5), "raised RuntimeError"),
])
def test_fixed_attention_rejects(attention, message):
    rejects(lesson02.fixed_attention, attention, hint=message)


def test_predicted_variance(capsys):
    for answer in [1024, 1024.0, 64 * 4 * 4, torch.tensor(1024.0), np.float64(1024)]:
        accepts(capsys, lesson02.predicted_variance, answer, d=64, variance=4)
    accepts(capsys, lesson02.predicted_variance, 64, d=64)  # entries of variance 1
    rejects(lesson02.predicted_variance, 32, d=64, variance=4, hint="standard deviation")
    rejects(lesson02.predicted_variance, 256, d=64, variance=4, hint="s\\^2 times s\\^2")
    rejects(lesson02.predicted_variance, 64, d=64, variance=4, hint="every entry has variance 1")
    rejects(lesson02.predicted_variance, 16, d=64, variance=4, hint="variance of one product")
    rejects(lesson02.predicted_variance, 1, d=64, variance=4, hint="variance of one product")
    rejects(lesson02.predicted_variance, 100, d=64, variance=4, hint="find the variance of one product")
    rejects(lesson02.predicted_variance, "1024", d=64, variance=4, hint="not text")
    rejects(lesson02.predicted_variance, None, d=64, variance=4, hint="give a number")


# ---- slips found by trying answers a learner would write ----

def test_attends_most_to_names_a_weight_given_instead_of_a_token(weights):
    rejects(lesson00.attends_most_to, weights[:, 1].max(), weights, key=1, tokens=TOKENS, hint="a weight from")
    rejects(lesson00.attends_most_to, 0.45, weights, key=1, tokens=TOKENS, hint="a weight from the matrix")
    rejects(lesson00.attends_most_to, 0.55, weights, key=1, tokens=TOKENS, hint="whole number")  # not a weight


def test_attention_received_success_states_the_totals_of_this_matrix(capsys, weights):
    lesson00.attention_received(weights.sum(0), weights)
    out = capsys.readouterr().out
    totals = weights.sum(0)
    assert f"{float(totals.min()):.2f} to {float(totals.max()):.2f}" in out and "unevenly" in out
    doubly_stochastic = torch.full((4, 4), 0.25)  # every key receives exactly 1: "unevenly" would be false
    lesson00.attention_received(doubly_stochastic.sum(0), doubly_stochastic)
    out = capsys.readouterr().out
    assert out.startswith("Correct") and "unevenly" not in out


def test_lesson01_softmaxed_scores_lost_axis_and_wrong_axis_norms_get_their_hints(qk):
    q, k = qk
    s = q @ k.T
    rejects(lesson01.scores_for_query, torch.softmax(k @ q[2], -1), q, k, i=2, hint="raw scores alpha")
    rejects(lesson01.weight_matrix, s.exp() / s.exp().sum(-1), q, k, hint="lost their axis")
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(5))  # n == d_model: shapes cannot tell
    unit = x / x.norm(dim=-1, keepdim=True)
    columns = x / x.norm(dim=0, keepdim=True)
    rejects(lesson01.cosine_similarity_matrix, columns @ columns.T, x, hint="normalised over the wrong axis")
    rejects(lesson01.cosine_similarity_matrix, unit.T @ unit, x, hint="compares features with features")
    rejects(lesson01.cosine_similarity_matrix, x @ x.T / x.norm(dim=-1) / x.norm(dim=-1), x,
            hint="one length must divide the rows")


@pytest.mark.parametrize("check", [lesson01.fixed_attend, lesson02.fixed_attention])
def test_a_function_without_return_gets_the_return_hint(check):
    rejects(check, lambda q, k, v: None, hint="returned None")


def test_lesson02_slips_get_their_own_hints(qk2):
    Q, K = qk2
    d = Q.shape[-1]
    rejects(lesson02.scaled_scores, Q @ K.T * math.sqrt(d), Q, K, d_model=6, hint="multiplied by sqrt")
    rejects(lesson02.scaled_scores, torch.softmax(Q @ K.T / math.sqrt(d), -1), Q, K, d_model=6,
            hint="before the softmax")
    rejects(lesson02.stable_softmax, lambda x: None, hint="returned None")
    shift_min = lambda x: (lambda e: e / e.sum(-1, keepdim=True))((x - x.amin(-1, keepdim=True)).exp())
    rejects(lesson02.stable_softmax, shift_min, hint="scores near 1000 still overflows")
    clamped = lambda x: (lambda e: e / e.sum(-1, keepdim=True))(x.clamp(max=80).exp())
    with pytest.raises(AssertionError) as error:  # not the whole-tensor-maximum hint: it never subtracted one
        lesson02.stable_softmax(clamped)
    assert "maximum of the whole tensor" not in str(error.value) and "underflows to 0" in str(error.value)
    rejects(lesson02.fixed_attention, lambda Q, K, V: _scaled(Q, K, V, 1 / 2), hint=r"1/sqrt\(4\).*fixed number")
    rejects(lesson02.fixed_attention, lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[1])),
            hint="not a count of tokens, heads")
    rejects(lesson02.fixed_attention, lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(V.shape[-1])),
            hint="not a count of tokens, heads or value features")


# ---- found by the sweep of right and wrong answers through every check ----

def test_stable_softmax_is_tried_on_one_row_and_on_a_batch_of_heads(capsys):
    accepts(capsys, lesson02.stable_softmax, lambda x: (x - x.logsumexp(-1, keepdim=True)).exp())
    unsqueezed = lambda x: (lambda e: e / e.sum(-1)[..., None])((x - x.amax(-1)[..., None]).exp())
    accepts(capsys, lesson02.stable_softmax, unsqueezed)
    needs_two_axes = lambda x: torch.softmax(x.transpose(-2, -1), dim=-2).transpose(-2, -1)  # right from 2-D up
    rejects(lesson02.stable_softmax, needs_two_axes, hint=r"raised IndexError .* inputs of shape \[\(7,\)\]")


def test_a_function_that_reads_a_notebook_tensor_is_told_about_the_float64_inputs():
    k_of_the_notebook = torch.randn(4, 3)  # float32, like the lesson's k
    uses_global = lambda q, k, v: torch.softmax(q @ k_of_the_notebook.T, -1) @ v
    rejects(lesson01.fixed_attend, uses_global, hint="some of them are float64: .*one of the notebook.s")


def test_the_token_itself_gets_its_own_hint_not_one_that_holds_only_for_this_data():
    # column 2's largest weight is in row 1 ("b"); naming the key itself, "c", gets its own hint
    weights = torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.3, 0.6], [0.5, 0.1, 0.4]])
    rejects(lesson00.attends_most_to, "c", weights, key=2, tokens=list("abc"), hint="that is 'c' itself")


def test_an_answer_of_none_is_explained_as_a_missing_return(weights):
    with pytest.raises(AssertionError, match="^Not yet: your answer is None: a function that ends without a `return`"):
        lesson00.attention_received(None, weights)
