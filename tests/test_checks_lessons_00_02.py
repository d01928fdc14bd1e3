"""Every exercise check of lessons 00-02 accepts right answers (in their equivalent forms: keepdim, einsum, numpy,
float64, lists) and rejects the common mistakes with the hint meant for them; an error in the learner's code
becomes a hint."""

import math

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects
from answers import lessons, run

import attention_lab as al
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

def _lesson_a():
    torch.manual_seed(0)
    return torch.randn(4, 4)  # lesson 01's a: its first random draw after seed 0


def test_long_key_accepts_any_key_that_wins_by_length(capsys):
    a = _lesson_a()
    for answer in [4 * a[2], a[0] + 3 * a[2], (4 * a[2]).tolist(), (4 * a[2]).numpy(), 4 * a[2:3],
                   2 * a[0] + torch.tensor([0.0, 0.0, 0.0, 1.0])]:
        accepts(capsys, lesson01.long_key, answer, a)


def test_long_key_names_each_mistake():
    a = _lesson_a()
    rejects(lesson01.long_key, 2 * a[0], a, hint=r"points the way a\^1 points")  # wins, but cosine ties at 1
    rejects(lesson01.long_key, a[2], a, hint="must be longer")
    rejects(lesson01.long_key, -10 * a[0], a, hint="points away")
    rejects(lesson01.long_key, 2 * (a[1] + a[2]), a, hint=r"wins for the query a\^2")  # a^1 read as row 1
    e = torch.tensor([0.0, 0.0, 1.0, 0.0])
    rejects(lesson01.long_key, 100 * (e - (e @ a[0]) / (a[0] @ a[0]) * a[0]), a, hint="right angles")
    rejects(lesson01.long_key, 4 * a, a, hint="one key vector of 4 numbers")
    rejects(lesson01.long_key, ..., a, hint="still empty")


def test_long_key_judges_the_key_against_the_vectors_it_is_given(capsys):
    a = _lesson_a()
    accepts(capsys, lesson01.long_key, 4 * a[2], a)
    stronger = a.clone()
    stronger[3] = 2 * a[0] + torch.tensor([0.0, 0.0, 0.0, 1.0])  # a key that scores 5.26 against a^1
    rejects(lesson01.long_key, 4 * a[2], stronger, hint=r"not above a\^4's 5.26")  # 3.49 no longer wins


def _classmate_attend(q, k, v):
    alpha = q @ k.T
    return torch.exp(alpha) / torch.exp(alpha).sum() @ v


@pytest.mark.parametrize("attend", [
    lambda q, k, v: torch.softmax(q @ k.T, dim=-1) @ v,
    lambda q, k, v: torch.softmax(torch.einsum("id,jd->ij", q, k), -1) @ v,
    lambda q, k, v: (lambda e: e / e.sum(-1, keepdim=True))((q @ k.T).exp()) @ v,
    lambda q, k, v: (torch.softmax(q.float() @ k.float().T, -1) @ v.float()).numpy(),
])
def test_fixed_attend_accepts(capsys, attend):
    accepts(capsys, lesson01.fixed_attend, attend)


@pytest.mark.parametrize("attend,message", [
    (_classmate_attend, "still computes what the classmate's function computes"),
    (lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(0) @ v, "down each column"),
    (lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(-1) @ v, "lost their axis"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ k, "mixed the keys"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1).T @ v, "transpose of the weights"),
    (lambda q, k, v: (q @ k.T) @ v, "not with the raw scores"),
    (lambda q, k, v: (q @ k.T) / (q @ k.T).sum(-1, keepdim=True) @ v, "first takes exp"),
    (lambda q, k, v: torch.softmax(q @ k.T / 3**0.5, -1) @ v, "plain dot product"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1), "those are the weights alpha'"),
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ v.reshape(4, -1), r"raised RuntimeError"),  # 4 keys only
    (lambda q, k, v: torch.softmax(q @ k.T, -1) @ v * 1.1, "compare your code"),
    (torch.zeros(3), "should be a function"),
])
def test_fixed_attend_rejects(attend, message):
    rejects(lesson01.fixed_attend, attend, hint=message)


@pytest.mark.parametrize("ready_made", [
    lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0),
    lambda q, k, v: al.scaled_dot_product_attention(q, k, v, scale=1.0)[0],
])
def test_fixed_attend_refuses_a_ready_made_attention(ready_made):
    rejects(lesson01.fixed_attend, ready_made, hint="scaled_dot_product_attention, a ready-made attention")


def test_fixed_attend_tries_more_keys_fewer_keys_and_one_key():
    """An attend that only works for the lesson's 4 x 4 case fails on the check's other shapes."""
    first_four_keys = lambda q, k, v: torch.softmax(q @ k.T, -1)[:, :4] @ v[:4]
    rejects(lesson01.fixed_attend, first_four_keys, hint="with 2 queries and 6 keys")

    def squeezes(q, k, v):  # a single key makes the weights a column of ones; squeezing it breaks the shape
        return (torch.softmax(q @ k.T, -1).squeeze() @ v).reshape(q.shape[0], -1)

    rejects(lesson01.fixed_attend, squeezes, hint=r"3 queries, 1 keys|raised")


def test_hints_name_the_learners_function_by_its_own_name():
    def my_attend(q, k, v):
        return q @ k  # (i, d) @ (j, d) fails

    rejects(lesson01.fixed_attend, my_attend, hint="your my_attend raised RuntimeError")

    def my_softmax(x):
        raise NotImplementedError

    rejects(lesson02.stable_softmax, my_softmax, hint="your my_softmax still raises NotImplementedError")


def test_cosine_similarity_matrix(capsys):
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(4))
    unit = torch.nn.functional.normalize(a, dim=-1)
    for answer in [unit @ unit.T, torch.cosine_similarity(a[:, None], a[None], dim=-1), (unit @ unit.T).numpy(),
                   (unit.double() @ unit.double().T), torch.einsum("id,jd->ij", unit, unit),
                   a @ a.T / a.norm(dim=-1, keepdim=True) / a.norm(dim=-1)]:
        accepts(capsys, lesson01.cosine_similarity_matrix, answer, a)
    rejects(lesson01.cosine_similarity_matrix, a @ a.T, a, hint="that is the dot product")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1, keepdim=True), a, hint="not only one")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm(dim=-1), a, hint="not only one")
    rejects(lesson01.cosine_similarity_matrix, a @ a.T / a.norm() ** 2, a, hint="whole matrix")
    rejects(lesson01.cosine_similarity_matrix, torch.cosine_similarity(a, a), a, hint="with itself only")


def test_lesson01_wrong_axis_norms_get_their_hints():
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(5))  # n == d_model: shapes cannot tell
    unit = x / x.norm(dim=-1, keepdim=True)
    columns = x / x.norm(dim=0, keepdim=True)
    rejects(lesson01.cosine_similarity_matrix, columns @ columns.T, x, hint="normalised over the wrong axis")
    rejects(lesson01.cosine_similarity_matrix, unit.T @ unit, x, hint="compares features with features")
    rejects(lesson01.cosine_similarity_matrix, x @ x.T / x.norm(dim=-1) / x.norm(dim=-1), x,
            hint="one length must divide the rows")


def test_a_function_that_reads_a_notebook_tensor_is_told_about_the_float64_inputs():
    k_of_the_notebook = torch.randn(4, 3)  # float32, like the lesson's k
    uses_global = lambda q, k, v: torch.softmax(q @ k_of_the_notebook.T, -1) @ v
    rejects(lesson01.fixed_attend, uses_global, hint="some of them are float64: .*one of the notebook.s")


# ---- lesson 02 ----

@pytest.fixture
def cross_inputs():
    gen = torch.Generator().manual_seed(5)
    X, memory = torch.randn(5, 6, generator=gen), torch.randn(3, 6, generator=gen)  # i = 5, j = 3, d_model = 6
    W_q, W_k = torch.randn(4, 6, generator=gen), torch.randn(4, 6, generator=gen)  # d = 4
    return X, memory, W_q, W_k


def test_cross_scores(capsys, cross_inputs):
    X, memory, W_q, W_k = cross_inputs
    Q, K = X @ W_q.T, memory @ W_k.T
    for answer in [Q @ K.T / 2.0, torch.einsum("id,jd->ij", Q, K) * 0.5, (Q.double() @ K.double().T) / 2,
                   (Q @ K.T / 2.0).numpy(), Q @ K.mT / math.sqrt(Q.shape[-1]), al.attention_scores(Q, K)]:
        accepts(capsys, lesson02.cross_scores, answer, *cross_inputs)
    rejects(lesson02.cross_scores, Q @ K.T, *cross_inputs, hint="not scaled")
    rejects(lesson02.cross_scores, Q @ (X @ W_k.T).T / 2, *cross_inputs, hint="X with itself")
    rejects(lesson02.cross_scores, K @ Q.T / 2, *cross_inputs, hint="the transpose")
    rejects(lesson02.cross_scores, (X @ W_k.T) @ (memory @ W_q.T).T / 2, *cross_inputs, hint="swapped")
    rejects(lesson02.cross_scores, Q @ K.T / math.sqrt(6), *cross_inputs, hint="width of the input tokens")
    rejects(lesson02.cross_scores, Q @ K.T / math.sqrt(3), *cross_inputs, hint="number of keys")


def test_cross_scores_tells_the_mistakes_apart_when_the_shapes_cannot(capsys, cross_inputs):
    """With as many keys as queries (and d = the number of tokens), a transpose or self-attention has the right
    shape: the values still name the mistake."""
    X, _, W_q, W_k = cross_inputs
    memory = torch.randn(5, 6, generator=torch.Generator().manual_seed(6))
    Q, K = X @ W_q.T, memory @ W_k.T
    rejects(lesson02.cross_scores, K @ Q.T / 2, X, memory, W_q, W_k, hint="the transpose")
    rejects(lesson02.cross_scores, Q @ (X @ W_k.T).T / 2, X, memory, W_q, W_k, hint="X with itself")
    accepts(capsys, lesson02.cross_scores, Q @ K.T / 2, X, memory, W_q, W_k)


def _good_softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize("softmax", [
    _good_softmax,
    lambda x: (lambda e: e / e.sum(-1, keepdim=True))((x - x.amax(-1, keepdim=True)).exp()),
    lambda x: _good_softmax(x.double()),
    lambda x: _good_softmax(x).numpy(),
])
def test_stable_softmax_accepts(capsys, softmax):
    accepts(capsys, lesson02.stable_softmax, softmax)


@pytest.mark.parametrize("softmax,names", [
    (lambda x: torch.softmax(x, dim=-1), "PyTorch's softmax"),
    (lambda x: torch.nn.functional.softmax(x, dim=-1), "PyTorch's softmax"),
    (lambda x: x.softmax(-1), "PyTorch's softmax"),
    (lambda x: torch.nn.Softmax(dim=-1)(x), "PyTorch's softmax"),
    (lambda x: torch.special.softmax(x, -1), "PyTorch's special_softmax"),
    (lambda x: torch.log_softmax(x, -1).exp(), "PyTorch's log_softmax"),
    (lambda x: al.masked_softmax(x), "the library's masked_softmax"),
    (lambda x: torch.softmax(x, dim=0), "PyTorch's softmax"),  # wrong as well: the forbidden call comes first
])
def test_stable_softmax_refuses_a_ready_made_softmax(softmax, names):
    rejects(lesson02.stable_softmax, softmax, hint=f"calls {names}; the exercise is to write softmax yourself")


def test_a_softmax_through_logsumexp_is_right_and_told_what_logsumexp_did(capsys):
    lesson02.stable_softmax(lambda x: torch.exp(x - torch.logsumexp(x, -1, keepdim=True)))
    assert capsys.readouterr().out.startswith("Correct") is True
    lesson02.stable_softmax(lambda x: (x - x.logsumexp(-1, keepdim=True)).exp())
    assert "logsumexp subtracts the row's maximum for you" in capsys.readouterr().out


@pytest.mark.parametrize("softmax,message", [
    (lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), "overflows to inf"),
    (lambda x: _good_softmax(x.transpose(0, -1)).transpose(0, -1), "normalised over another axis"),
    (lambda x: (lambda e: e / e.sum(1, keepdim=True))((x - x.amax(1, keepdim=True)).exp()),
     "normalised over another axis"),  # a hard-coded dim=1: right on 2-D, wrong on 3-D
    (lambda x: torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(-1, keepdim=True), "not the maximum of the whole"),
    (lambda x: _good_softmax(x.clamp(-50, 50)), "finite but wrong"),
    (lambda x: torch.exp(x - x.max(-1)) / 1, "comes back as a pair"),  # .max(dim) without .values
    (lambda x: (x - x.max(-1).values).exp() / (x - x.max(-1).values).exp().sum(-1, keepdim=True),
     "lost its axis"),  # missing keepdim: an error on (4, 6), wrong values on (5, 5)
    (lambda x: x.exp() / x.exp().sum(-1), "lost its axis"),
    (lambda x: (x - x.amax(-1, keepdim=True)).exp(), "do not sum to 1"),
    (lambda x: (lambda e: e / e.sum())((x - x.amax(-1, keepdim=True)).exp()), "on its own"),
    (lambda x: x - torch.logsumexp(x, -1, keepdim=True), "log-softmax"),
    (lambda x: _good_softmax(x)[..., :2], "the input's shape"),
    (lambda x: _good_softmax(x.reshape(4, 6)), r"raised RuntimeError"),  # a hard-coded shape
    (lambda x: _good_softmax(x) * 0.9, "differs from softmax"),
    (torch.ones(3), "pass your function itself"),
])
def test_stable_softmax_rejects(softmax, message):
    rejects(lesson02.stable_softmax, softmax, hint=message)


def test_a_softmax_that_changes_its_input_is_told_so():
    def in_place(x):
        x -= x.amax(dim=-1, keepdim=True)  # the caller's scores change
        x.exp_()
        return x / x.sum(-1, keepdim=True)

    rejects(lesson02.stable_softmax, in_place, hint="changed the scores it was given")


def test_stable_softmax_tries_float64_scores_too(capsys):
    def float32_only(x):  # right for float32 scores, wrong for float64 ones
        if x.dtype == torch.float64:
            return _good_softmax(x) + 1e-3
        return _good_softmax(x)

    rejects(lesson02.stable_softmax, float32_only, hint=r"shape \(3, 4\) your result differs")


def test_stable_softmax_missing_keepdim_on_a_square_input_gets_the_keepdim_hint():
    def lost_axis_square_only(x):  # right where the shapes cannot line up wrongly, wrong on square inputs
        if x.dim() == 2 and x.shape[0] == x.shape[1]:
            e = (x - x.amax(-1)).exp()
            return e / e.sum(-1, keepdim=True)
        return _good_softmax(x)

    rejects(lesson02.stable_softmax, lost_axis_square_only, hint="lost its axis")


def test_stable_softmax_leaves_the_global_generator_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson02.stable_softmax(_good_softmax)
    assert torch.equal(torch.rand(3), expected)


def test_stable_softmax_is_tried_on_one_row_and_on_a_batch_of_heads(capsys):
    unsqueezed = lambda x: (lambda e: e / e.sum(-1)[..., None])((x - x.amax(-1)[..., None]).exp())
    accepts(capsys, lesson02.stable_softmax, unsqueezed)
    needs_two_axes = lambda x: _good_softmax(x.transpose(-2, -1).transpose(-2, -1))  # transpose needs 2 axes
    rejects(lesson02.stable_softmax, needs_two_axes, hint=r"raised IndexError .* inputs of shape \[\(7,\)\]")


def test_lesson02_softmax_slips_get_their_own_hints():
    rejects(lesson02.stable_softmax, lambda x: None, hint="returned None")
    shift_min = lambda x: (lambda e: e / e.sum(-1, keepdim=True))((x - x.amin(-1, keepdim=True)).exp())
    rejects(lesson02.stable_softmax, shift_min, hint="scores near 1000 still overflows")
    clamped = lambda x: (lambda e: e / e.sum(-1, keepdim=True))(x.clamp(max=80).exp())
    with pytest.raises(AssertionError) as error:  # not the whole-tensor-maximum hint: it never subtracted one
        lesson02.stable_softmax(clamped)
    assert "maximum of the whole tensor" not in str(error.value) and "underflows to 0" in str(error.value)


def _classmate_attention(Q, K, V):
    d = Q.shape[0]
    weights = torch.softmax(Q @ K.T / math.sqrt(d), dim=0)
    return weights @ V


@pytest.mark.parametrize("attention", [
    lambda Q, K, V: torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1) @ V,
    lambda Q, K, V: torch.softmax(Q @ K.mT / Q.shape[-1] ** 0.5, -1) @ V,
    lambda Q, K, V: torch.softmax(torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(K.shape[-1]), -1) @ V,
    lambda Q, K, V: (torch.softmax(Q.float() @ K.float().mT / math.sqrt(Q.shape[-1]), -1) @ V.float()).numpy(),
    lambda Q, K, V: al.masked_softmax(Q @ K.mT / math.sqrt(Q.shape[-1])) @ V,  # the library's softmax is allowed
])
def test_fixed_attention_accepts(capsys, attention):
    accepts(capsys, lesson02.fixed_attention, attention)


def _scaled(Q, K, V, scale, dim=-1):
    return torch.softmax(Q @ K.transpose(-2, -1) * scale, dim=dim) @ V


@pytest.mark.parametrize("attention,message", [
    (_classmate_attention, "more than one bug"),
    (lambda Q, K, V: torch.softmax(Q @ K.T / math.sqrt(Q.shape[-1]), -1) @ V, "swap only the last two axes"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]), dim=-2), "runs over the queries"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]), dim=1), "runs over another axis"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-2])), "not a count of tokens"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[0])), "not a count of tokens"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[1])), "not a count of tokens, heads"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(V.shape[-1])), "not a count of tokens, heads or value features"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / 2), r"1/sqrt\(4\).*fixed number"),
    (lambda Q, K, V: _scaled(Q, K, V, 1.0), "missing the 1/sqrt"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / Q.shape[-1]), "not by d"),
    (lambda Q, K, V: torch.softmax(Q @ K.mT / math.sqrt(Q.shape[-1]), -1), "multiply them by V"),
    (lambda Q, K, V: _scaled(Q, K, K, 1 / math.sqrt(Q.shape[-1])), "mixed the keys"),
    (lambda Q, K, V: _scaled(Q, K, V, 0.3), "check each step"),
    (lambda Q, K, V: _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]))[..., :1, :], "one row per query"),
    (lambda Q, K, V: _scaled(Q.reshape(5, 4), K, V, 0.5), "raised RuntimeError"),
    (lambda Q, K, V: torch.softmax(Q @ K.transpose(0, 1) / math.sqrt(Q.shape[-1]), -1) @ V,
     "works on single \\(i, d\\) matrices but raised RuntimeError on a batch"),
    (lambda Q, K, V: torch.softmax(Q @ K.transpose(2, 3) / math.sqrt(Q.shape[-1]), -1) @ V,
     "works on a batch of heads but raised IndexError on a single \\(i, d\\) matrix"),
    (lambda Q, K, V: None, "returned None"),
])
def test_fixed_attention_rejects(attention, message):
    rejects(lesson02.fixed_attention, attention, hint=message)


@pytest.mark.parametrize("ready_made", [
    lambda Q, K, V: torch.nn.functional.scaled_dot_product_attention(Q, K, V),
    lambda Q, K, V: al.scaled_dot_product_attention(Q, K, V)[0],
    lambda Q, K, V: al.reference.attention(Q, K, V)[0],
])
def test_fixed_attention_refuses_a_ready_made_attention(ready_made):
    rejects(lesson02.fixed_attention, ready_made, hint="a ready-made attention")


def test_fixed_attention_is_tried_on_2_3_and_4_axes():
    def three_axes_fail(Q, K, V):  # right for (i, d) and (b, h, i, d), not for (b, i, d)
        if Q.dim() == 3:
            return _scaled(Q, K, V, 1.0)
        return _scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]))

    rejects(lesson02.fixed_attention, three_axes_fail, hint="missing the 1/sqrt")


def test_predicted_variance(capsys):
    for answer in [1024, 1024.0, 64 * 4 * 4, torch.tensor(1024.0), np.float64(1024)]:
        accepts(capsys, lesson02.predicted_variance, answer, d=64, variance=4)
    accepts(capsys, lesson02.predicted_variance, 64, d=64)  # entries of variance 1
    rejects(lesson02.predicted_variance, 32, d=64, variance=4, hint="standard deviation")
    rejects(lesson02.predicted_variance, 256, d=64, variance=4, hint="s\\^2 times s\\^2")
    rejects(lesson02.predicted_variance, 512, d=64, variance=4, hint="not their sum")
    rejects(lesson02.predicted_variance, 64, d=64, variance=4, hint="every entry has variance 1")
    rejects(lesson02.predicted_variance, 16, d=64, variance=4, hint="variance of one product")
    rejects(lesson02.predicted_variance, 1, d=64, variance=4, hint="after the 1/sqrt\\(d\\) scale")
    rejects(lesson02.predicted_variance, 64 * 64 * 16, d=64, variance=4, hint="not d\\^2 times")
    rejects(lesson02.predicted_variance, 100, d=64, variance=4, hint="find the variance of one product")
    rejects(lesson02.predicted_variance, "1024", d=64, variance=4, hint="not text")
    rejects(lesson02.predicted_variance, None, d=64, variance=4, hint="give a number")


def test_predicted_variance_accepts_a_measurement_and_says_it_is_one(capsys):
    gen = torch.Generator().manual_seed(0)
    q, k = 2 * torch.randn(20_000, 64, generator=gen), 2 * torch.randn(20_000, 64, generator=gen)
    measured = (q * k).sum(-1).var()
    lesson02.predicted_variance(measured, d=64, variance=4)
    assert "within 5% of the exact" in capsys.readouterr().out
    rejects(lesson02.predicted_variance, 1024 * 1.08, d=64, variance=4, hint="find the variance of one product")


def test_the_wrong_variances_differ_from_each_other_on_the_lessons_numbers():
    """d = 64 and variance 4: every formula a hint names gives its own number (the standard deviation, 32, and
    4 * sqrt(64) are one number, and one hint holds for both)."""
    d, s2 = 64, 4
    wrong = {"sqrt": math.sqrt(d * s2 * s2), "d s2": d * s2, "2 d s2": 2 * d * s2, "d": d, "s2^2": s2 * s2,
             "1": 1, "s2": s2, "2 s2": 2 * s2, "d^2 s2^2": d * d * s2 * s2}
    assert len(set(wrong.values()) | {d * s2 * s2}) == len(wrong) + 1


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


def test_the_token_itself_gets_its_own_hint_not_one_that_holds_only_for_this_data():
    # column 2's largest weight is in row 1 ("b"); naming the key itself, "c", gets its own hint
    weights = torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.3, 0.6], [0.5, 0.1, 0.4]])
    rejects(lesson00.attends_most_to, "c", weights, key=2, tokens=list("abc"), hint="that is 'c' itself")


def test_an_answer_of_none_is_explained_as_a_missing_return(weights):
    with pytest.raises(AssertionError, match="^Not yet: your answer is None: a function that ends without a `return`"):
        lesson00.attention_received(None, weights)


# ---- the corpus of tests/answers/, counted ----

@pytest.mark.parametrize("lesson", ["lesson00", "lesson01", "lesson02"])
def test_at_most_one_wrong_answer_in_ten_gets_only_the_general_hint(lesson, capsys):
    """docs/teaching.md says so: each common mistake of these lessons has a hint of its own."""
    wrong = [attempt for attempt in lessons()[lesson] if not attempt.right]
    generic = [a.label for a in wrong if run(a, lambda: capsys.readouterr().out).kind == "generic"]
    assert len(wrong) >= 40 and len(generic) <= len(wrong) / 10, generic
