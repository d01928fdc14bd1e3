"""Answers to lesson 01's exercises (dot-product similarity), on the lesson's own tensors: ``a``, ``q``, ``k`` and
``v`` are rebuilt here the way the lesson makes them, from its seed."""

import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.teaching.checks import lesson01

from . import GENERIC, Attempt

al.seed_everything(0)  # the lesson's setup cell, then its random draws in order
a = torch.randn(4, 4)  # (n, d_model): row i - 1 is a^i
_W1, _W2, _w = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5)  # the additive score's weights
W_q, W_k, W_v = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)  # (d, d_model)
q, k, v = a @ W_q.T, a @ W_k.T, a @ W_v.T  # (i, d)


def A(exercise, label, check, answer, *args, right=False, hint=None, **kwargs):
    return Attempt(exercise, label, check, answer, args=args, kwargs=kwargs, right=right, hint=hint)


L1 = lesson01.long_key
_e = torch.tensor([0.0, 0.0, 1.0, 0.0])
_perpendicular = _e - (_e @ a[0]) / (a[0] @ a[0]) * a[0]  # at right angles to a^1
ATTEMPTS = [
    A("01/1", "a^3, four times longer", L1, 4 * a[2], a, right=True),
    A("01/1", "a^1 plus a long a^3", L1, a[0] + 3 * a[2], a, right=True),
    A("01/1", "a^1 doubled, nudged", L1, 2 * a[0] + torch.tensor([0.0, 0.0, 0.0, 1.0]), a, right=True),
    A("01/1", "numbers written out", L1, [-5.0, -5.0, 0.0, 0.0], a, right=True),
    A("01/1", "numpy", L1, (4 * a[2]).numpy(), a, right=True),
    A("01/1", "float64", L1, 4 * a[2].double(), a, right=True),
    A("01/1", "a row of shape (1, 4)", L1, 4 * a[2:3], a, right=True),
    A("01/1", "a^1 doubled", L1, 2 * a[0], a, hint="points the way a\\^1 points"),
    A("01/1", "a^1 itself", L1, a[0], a, hint="points the way a\\^1 points"),
    A("01/1", "a^1 halved", L1, 0.5 * a[0], a, hint="points the way a\\^1 points"),
    A("01/1", "a^3 as it is", L1, a[2], a, hint="must be longer"),
    A("01/1", "a^3 twice", L1, 2 * a[2], a, hint="must be longer"),
    A("01/1", "a^1 reversed and long", L1, -10 * a[0], a, hint="points away"),
    A("01/1", "a long a^4", L1, 10 * a[3], a, hint="points away"),
    A("01/1", "a long a^4 (wins for a^2)", L1, 6 * a[3], a, hint="points away.*would win for the query a\\^2"),
    A("01/1", "built for a^2 (Python row 1)", L1, 2 * (a[1] + a[2]), a,
      hint="wins for the query a\\^2 \\(Python row 1\\)"),
    A("01/1", "at right angles", L1, 100 * _perpendicular, a, hint="right angles"),
    A("01/1", "every key longer", L1, 4 * a, a, hint="one key vector of 4 numbers"),
    A("01/1", "three numbers", L1, [1.0, 2.0, 3.0], a, hint="one key vector of 4 numbers"),
    A("01/1", "one number", L1, 10.0, a, hint="one key vector of 4 numbers"),
    A("01/1", "infinite", L1, torch.full((4,), float("inf")), a, hint="inf or NaN"),
    A("01/1", "text", L1, "4 * a[2]", a, hint="should be a tensor"),
    A("01/1", "untouched stub", L1, ..., a, hint="still empty"),
]

S2 = lesson01.fixed_attend


def classmate(q, k, v):
    alpha = q @ k.T
    return torch.exp(alpha) / torch.exp(alpha).sum() @ v


def good(q, k, v):
    return torch.softmax(q @ k.T, dim=-1) @ v


def returns_nothing(q, k, v):
    torch.softmax(q @ k.T, -1) @ v


def unimplemented(q, k, v):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


ATTEMPTS += [
    A("01/2", "softmax", S2, good, right=True),
    A("01/2", "einsum", S2, lambda q, k, v: torch.softmax(torch.einsum("id,jd->ij", q, k), -1) @ v, right=True),
    A("01/2", "exp keepdim", S2, lambda q, k, v: (lambda e: e / e.sum(-1, keepdim=True))((q @ k.T).exp()) @ v,
      right=True),
    A("01/2", "mT and dim=1", S2, lambda q, k, v: torch.softmax(q @ k.mT, dim=1) @ v, right=True),
    A("01/2", "loop over queries", S2,
      lambda q, k, v: torch.stack([sum(torch.softmax(k @ q[i], 0)[j] * v[j] for j in range(k.shape[0]))
                                   for i in range(q.shape[0])]), right=True),
    A("01/2", "max-shifted", S2,
      lambda q, k, v: (lambda e: e / e.sum(-1, keepdim=True))((q @ k.T - (q @ k.T).amax(-1, keepdim=True)).exp()) @ v,
      right=True),
    A("01/2", "float32 numpy", S2, lambda q, k, v: (torch.softmax(q.float() @ k.float().T, -1) @ v.float()).numpy(),
      right=True),
    A("01/2", "classmate unchanged", S2, classmate, hint="classmate"),
    A("01/2", "column sums", S2, lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(0) @ v, hint="column"),
    A("01/2", "softmax dim=0", S2, lambda q, k, v: torch.softmax(q @ k.T, dim=0) @ v, hint="column"),
    A("01/2", "lost axis", S2, lambda q, k, v: (q @ k.T).exp() / (q @ k.T).exp().sum(-1) @ v, hint="lost their axis"),
    A("01/2", "mixes keys", S2, lambda q, k, v: torch.softmax(q @ k.T, -1) @ k, hint="mixed the keys"),
    A("01/2", "raw scores", S2, lambda q, k, v: (q @ k.T) @ v, hint="raw scores"),
    A("01/2", "scaled", S2, lambda q, k, v: torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1) @ v,
      hint="plain dot product"),
    A("01/2", "weights only", S2, lambda q, k, v: torch.softmax(q @ k.T, -1), hint="shape|weights"),
    A("01/2", "no return", S2, returns_nothing, hint="returned None"),
    A("01/2", "stub", S2, unimplemented, hint="NotImplementedError"),
    A("01/2", "transposed weights", S2, lambda q, k, v: torch.softmax(q @ k.T, -1).T @ v, hint="transpose|row"),
    A("01/2", "no exp", S2, lambda q, k, v: (q @ k.T) / (q @ k.T).sum(-1, keepdim=True) @ v, hint="exp"),
    A("01/2", "operator precedence", S2, lambda q, k, v: (q @ k.T).exp() / ((q @ k.T).exp().sum(-1, keepdim=True) @ v),
      hint="raised RuntimeError"),
    A("01/2", "library", S2, lambda q, k, v: al.scaled_dot_product_attention(q, k, v, scale=1.0)[0],
      hint="ready-made attention"),
    A("01/2", "PyTorch", S2, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0),
      hint="ready-made attention"),
    A("01/2", "q @ k", S2, lambda q, k, v: torch.softmax(q @ k, -1) @ v, hint="raised RuntimeError|transpose"),
    A("01/2", "the lesson's k", S2, lambda q_, k_, v_: torch.softmax(q_ @ k.T, -1) @ v_, hint="notebook"),
    A("01/2", "a result, not a function", S2, good(q, k, v), hint="should be a function"),
]

S3 = lesson01.cosine_similarity_matrix
unit = a / a.norm(dim=-1, keepdim=True)
cols = a / a.norm(dim=0, keepdim=True)
ATTEMPTS += [
    A("01/3", "unit rows", S3, unit @ unit.T, a, right=True),
    A("01/3", "F.normalize", S3, F.normalize(a, dim=-1) @ F.normalize(a, dim=-1).T, a, right=True),
    A("01/3", "cosine_similarity broadcast", S3, torch.cosine_similarity(a[:, None], a[None], dim=-1), a, right=True),
    A("01/3", "outer of norms", S3, a @ a.T / (a.norm(dim=-1, keepdim=True) @ a.norm(dim=-1, keepdim=True).T), a,
      right=True),
    A("01/3", "divide rows then columns", S3, a @ a.T / a.norm(dim=-1, keepdim=True) / a.norm(dim=-1), a, right=True),
    A("01/3", "numpy", S3, (unit @ unit.T).numpy(), a, right=True),
    A("01/3", "float64", S3, unit.double() @ unit.double().T, a, right=True),
    A("01/3", "loop", S3, torch.stack([torch.stack([(a[i] @ a[j]) / (a[i].norm() * a[j].norm()) for j in range(4)])
                                       for i in range(4)]), a, right=True),
    A("01/3", "dot product", S3, a @ a.T, a, hint="that is the dot product"),
    A("01/3", "one length (rows)", S3, a @ a.T / a.norm(dim=-1, keepdim=True), a, hint="not only one"),
    A("01/3", "one length (columns)", S3, a @ a.T / a.norm(dim=-1), a, hint="not only one"),
    A("01/3", "whole-matrix norm", S3, a @ a.T / a.norm() ** 2, a, hint="whole matrix"),
    A("01/3", "columns twice", S3, a @ a.T / a.norm(dim=-1) / a.norm(dim=-1), a,
      hint="one length must divide the rows"),
    A("01/3", "product of norms elementwise", S3, a @ a.T / (a.norm(dim=-1) * a.norm(dim=-1)), a,
      hint="one length must divide the rows"),
    A("01/3", "wrong axis", S3, cols @ cols.T, a, hint="wrong axis"),
    A("01/3", "features", S3, unit.T @ unit, a, hint="features with features"),
    A("01/3", "pairwise diagonal only", S3, torch.cosine_similarity(a, a, dim=-1), a, hint="every pair|pair"),
    A("01/3", "queries and keys", S3, F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).T, a, hint=GENERIC),
    A("01/3", "squared norms", S3, a @ a.T / (a.norm(dim=-1, keepdim=True) ** 2), a, hint="not only one|length"),
    A("01/3", "distance", S3, torch.cdist(a, a), a, hint=GENERIC),
    A("01/3", "stub", S3, ..., a, hint="still empty"),
    A("01/3", "one row", S3, unit[0] @ unit.T, a, hint="every pair|one similarity per pair"),
]
