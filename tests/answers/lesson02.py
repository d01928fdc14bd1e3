"""Answers to lesson 02's exercises (scaled dot-product attention), on the lesson's own tensors: ``X``, ``W_q``,
``W_k`` and ``memory`` are rebuilt here the way the lesson makes them, from its seed."""

import math

import numpy as np
import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.teaching.checks import lesson02

from . import GENERIC, Attempt

al.seed_everything(0)  # the lesson's setup cell, then its random draws in order
X = torch.randn(5, 6)  # (i, d_model)
W_q, W_k, W_v = (torch.randn(4, 6) for _ in range(3))  # (d, d_model)
memory = torch.randn(3, 6)  # (j, d_model): another sequence's tokens (drawn later in the lesson; any will do)
Q, K, V = X @ W_q.T, X @ W_k.T, X @ W_v.T  # (i, d): the lesson's Q, K, V


def A(exercise, label, check, answer, *args, right=False, hint=None, **kwargs):
    return Attempt(exercise, label, check, answer, args=args, kwargs=kwargs, right=right, hint=hint)


S1 = lesson02.cross_scores


def cross_attempts(X, memory, W_q, W_k):
    """The tries at exercise 1 on given tensors (the lesson's own, in tests/test_checks_lessons_00_02.py)."""
    IN = (X, memory, W_q, W_k)
    Q, K, Km = X @ W_q.T, X @ W_k.T, memory @ W_k.T  # (i, d), (i, d), (j, d)
    raw = Q @ Km.T  # (i, j)
    return [
        A("02/1", "Q Kᵀ / sqrt(d)", S1, raw / math.sqrt(4), *IN, right=True),
        A("02/1", "one expression", S1, (X @ W_q.T) @ (memory @ W_k.T).T / 2, *IN, right=True),
        A("02/1", "einsum", S1, torch.einsum("id,jd->ij", Q, Km) * 0.5, *IN, right=True),
        A("02/1", "mT and the shape", S1, Q @ Km.mT / math.sqrt(Q.shape[-1]), *IN, right=True),
        A("02/1", "float64", S1, Q.double() @ Km.double().T / 2, *IN, right=True),
        A("02/1", "numpy", S1, (raw / 2).numpy(), *IN, right=True),
        A("02/1", "the library's scores", S1, al.attention_scores(Q, Km), *IN, right=True),
        A("02/1", "Lee's columns, transposed back", S1, ((W_k @ memory.T).T @ (W_q @ X.T)).T / 2, *IN, right=True),
        A("02/1", "self-attention scores", S1, Q @ K.T / 2, *IN, hint="X with itself"),
        A("02/1", "queries from memory", S1, (memory @ W_q.T) @ K.T / 2, *IN, hint="queries from memory"),
        A("02/1", "the transpose", S1, Km @ Q.T / 2, *IN, hint="transpose"),
        A("02/1", "memory with itself", S1, (memory @ W_q.T) @ Km.T / 2, *IN, hint="memory with itself"),
        A("02/1", "projections swapped", S1, (X @ W_k.T) @ (memory @ W_q.T).T / 2, *IN, hint="swapped"),
        A("02/1", "W^q twice", S1, Q @ (memory @ W_q.T).T / 2, *IN, hint="both sides went through W\\^q"),
        A("02/1", "raw tokens", S1, X @ memory.T / 2, *IN, hint="raw tokens"),
        A("02/1", "raw tokens, scaled by d_model", S1, X @ memory.T / math.sqrt(6), *IN, hint="raw tokens"),
        A("02/1", "unscaled", S1, raw, *IN, hint="not scaled"),
        A("02/1", "/ d", S1, raw / 4, *IN, hint="not by d"),
        A("02/1", "* sqrt(d)", S1, raw * 2, *IN, hint="multiplied"),
        A("02/1", "/ sqrt(d_model)", S1, raw / math.sqrt(6), *IN, hint="width of the input"),
        A("02/1", "/ sqrt(number of queries)", S1, raw / math.sqrt(5), *IN, hint="number of queries"),
        A("02/1", "/ sqrt(number of keys)", S1, raw / math.sqrt(3), *IN, hint="number of keys"),
        A("02/1", "softmaxed", S1, torch.softmax(raw / 2, -1), *IN, hint="before the softmax"),
        A("02/1", "one row", S1, raw[0] / 2, *IN, hint="shape \\(5, 3\\)"),
        A("02/1", "off a little", S1, raw / 2 + 0.1, *IN, hint=GENERIC),
        A("02/1", "untouched stub", S1, ..., *IN, hint="still empty"),
    ]


ATTEMPTS = cross_attempts(X, memory, W_q, W_k)

S2 = lesson02.stable_softmax


def good_softmax(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def normalised(e, dim=-1):
    return e / e.sum(dim=dim, keepdim=True)


def inplace_softmax(x):
    x -= x.amax(dim=-1, keepdim=True)
    x.exp_()
    return x / x.sum(-1, keepdim=True)


def numpy_softmax(x):
    n = x.numpy()
    e = np.exp(n - n.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def max_without_keepdim(x):
    e = (x - x.max(-1).values).exp()
    return e / e.sum(-1, keepdim=True)


ATTEMPTS += [
    A("02/2", "amax keepdim", S2, good_softmax, right=True),
    A("02/2", "max values", S2, lambda x: normalised((x - x.max(-1, keepdim=True).values).exp()), right=True),
    A("02/2", "unsqueeze", S2, lambda x: (lambda e: e / e.sum(-1)[..., None])((x - x.amax(-1)[..., None]).exp()),
      right=True),
    A("02/2", "logsumexp", S2, lambda x: torch.exp(x - torch.logsumexp(x, -1, keepdim=True)), right=True),
    A("02/2", "detached max", S2, lambda x: normalised((x - x.amax(-1, keepdim=True).detach()).exp()), right=True),
    A("02/2", "float64 inside", S2, lambda x: good_softmax(x.double()).to(x.dtype), right=True),
    A("02/2", "numpy", S2, numpy_softmax, right=True),
    A("02/2", "torch.softmax", S2, lambda x: torch.softmax(x, dim=-1), hint="calls PyTorch's softmax"),
    A("02/2", "F.softmax", S2, lambda x: F.softmax(x, dim=-1), hint="calls PyTorch's softmax"),
    A("02/2", "Tensor.softmax", S2, lambda x: x.softmax(-1), hint="calls PyTorch's softmax"),
    A("02/2", "nn.Softmax", S2, lambda x: torch.nn.Softmax(dim=-1)(x), hint="calls PyTorch's softmax"),
    A("02/2", "log_softmax.exp", S2, lambda x: F.log_softmax(x, -1).exp(), hint="calls PyTorch's log_softmax"),
    A("02/2", "library masked_softmax", S2, lambda x: al.masked_softmax(x), hint="calls the library's masked_softmax"),
    A("02/2", "naive", S2, lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), hint="overflows to inf"),
    A("02/2", "dim=0", S2, lambda x: normalised((x - x.amax(0, keepdim=True)).exp(), dim=0), hint="another axis"),
    A("02/2", "dim=1 hard-coded", S2, lambda x: normalised((x - x.amax(1, keepdim=True)).exp(), dim=1),
      hint="another axis"),
    A("02/2", "global max", S2, lambda x: normalised(torch.exp(x - x.max())), hint="maximum of the whole"),
    A("02/2", "clamped", S2, lambda x: normalised(x.clamp(-50, 50).exp()), hint="finite but wrong"),
    A("02/2", "clamped above only", S2, lambda x: normalised(x.clamp(max=80).exp()), hint="underflows to 0"),
    A("02/2", "max without .values", S2, lambda x: torch.exp(x - x.max(-1)) / 1, hint="comes back as a pair"),
    A("02/2", "max without keepdim", S2, max_without_keepdim, hint="lost its axis"),
    A("02/2", "sum without keepdim", S2, lambda x: (lambda e: e / e.sum(-1))((x - x.amax(-1, keepdim=True)).exp()),
      hint="lost its axis"),
    A("02/2", "no normalisation", S2, lambda x: (x - x.amax(-1, keepdim=True)).exp(), hint="do not sum to 1"),
    A("02/2", "whole-tensor sum", S2, lambda x: (lambda e: e / e.sum())((x - x.amax(-1, keepdim=True)).exp()),
      hint="on its own"),
    A("02/2", "naive, whole-tensor sum", S2, lambda x: x.exp() / x.exp().sum(), hint="on its own"),
    A("02/2", "log-softmax", S2, lambda x: x - torch.logsumexp(x, -1, keepdim=True), hint="log-softmax"),
    A("02/2", "min shift", S2, lambda x: normalised((x - x.amin(-1, keepdim=True)).exp()), hint="still overflows"),
    A("02/2", "in place", S2, inplace_softmax, hint="changed the scores it was given"),
    A("02/2", "divide by the row's largest", S2, lambda x: (lambda e: e / e.amax(-1, keepdim=True))(x.exp()),
      hint="do not sum to 1"),
    A("02/2", "a hard-coded shape", S2, lambda x: good_softmax(x.reshape(4, 6)), hint="raised RuntimeError"),
    A("02/2", "scaled on the way", S2, lambda x: good_softmax(x) * 0.9, hint=GENERIC),
    A("02/2", "no return", S2, lambda x: None, hint="returned None"),
    A("02/2", "a tensor", S2, torch.ones(3), hint="function itself"),
    A("02/2", "a slice", S2, lambda x: good_softmax(x)[..., :2], hint="input's shape"),
]

S3 = lesson02.fixed_attention


def classmate(Q, K, V):
    d = Q.shape[0]
    weights = torch.softmax(Q @ K.T / math.sqrt(d), dim=0)
    return weights @ V


def with_keys_as(Q, K_transposed, V):
    return torch.softmax(Q @ K_transposed / math.sqrt(Q.shape[-1]), -1) @ V


def scaled(Q, K, V, scale, dim=-1):
    return torch.softmax(Q @ K.transpose(-2, -1) * scale, dim=dim) @ V


ATTEMPTS += [
    A("02/3", "transpose(-2, -1)", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1])), right=True),
    A("02/3", "mT", S3, lambda Q, K, V: torch.softmax(Q @ K.mT / Q.shape[-1] ** 0.5, -1) @ V, right=True),
    A("02/3", "einsum", S3, lambda Q, K, V: torch.softmax(torch.einsum("...id,...jd->...ij", Q, K)
                                                          / math.sqrt(K.shape[-1]), -1) @ V, right=True),
    A("02/3", "swapaxes", S3, lambda Q, K, V: torch.softmax(Q @ K.swapaxes(-1, -2) / math.sqrt(Q.size(-1)), -1) @ V,
      right=True),
    A("02/3", "float32 numpy", S3, lambda Q, K, V: (torch.softmax(Q.float() @ K.float().mT / math.sqrt(Q.shape[-1]), -1)
                                                    @ V.float()).numpy(), right=True),
    A("02/3", "F.sdpa", S3, lambda Q, K, V: F.scaled_dot_product_attention(Q, K, V), hint="by hand|PyTorch"),
    A("02/3", "library", S3, lambda Q, K, V: al.scaled_dot_product_attention(Q, K, V)[0], hint="by hand|library"),
    A("02/3", "classmate", S3, classmate, hint="more than one bug"),
    A("02/3", "K.T on a batch", S3, lambda Q, K, V: torch.softmax(Q @ K.T / math.sqrt(Q.shape[-1]), -1) @ V,
      hint="swap only the last two"),
    A("02/3", "softmax over queries", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]), dim=-2),
      hint="over the queries"),
    A("02/3", "softmax dim=1", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(Q.shape[-1]), dim=1),
      hint="another axis|last axis"),
    A("02/3", "scale by n", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(Q.shape[-2])), hint="not a count"),
    A("02/3", "classmate's d only", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(Q.shape[0])), hint="not a count"),
    A("02/3", "unscaled", S3, lambda Q, K, V: scaled(Q, K, V, 1.0), hint="missing the 1/sqrt"),
    A("02/3", "/ d", S3, lambda Q, K, V: scaled(Q, K, V, 1 / Q.shape[-1]), hint="not by d"),
    A("02/3", "fixed 1/2", S3, lambda Q, K, V: scaled(Q, K, V, 0.5), hint="fixed number"),
    A("02/3", "weights only", S3, lambda Q, K, V: torch.softmax(Q @ K.mT / math.sqrt(Q.shape[-1]), -1),
      hint="multiply them by V"),
    A("02/3", "dv scale", S3, lambda Q, K, V: scaled(Q, K, V, 1 / math.sqrt(V.shape[-1])), hint="value features"),
    A("02/3", "transpose(0, 1)", S3, lambda Q, K, V: with_keys_as(Q, K.transpose(0, 1), V),
      hint="works on single \\(i, d\\) matrices but raised RuntimeError on a batch"),
    A("02/3", "transpose(2, 3)", S3, lambda Q, K, V: with_keys_as(Q, K.transpose(2, 3), V),
      hint="works on a batch of heads but raised IndexError on a single"),
    A("02/3", "permute 4-D", S3, lambda Q, K, V: with_keys_as(Q, K.permute(0, 1, 3, 2), V),
      hint="works on a batch of heads but raised RuntimeError on a single"),
    A("02/3", "mixes keys", S3, lambda Q, K, V: scaled(Q, K, K, 1 / math.sqrt(Q.shape[-1])), hint="keys|values"),
    A("02/3", "weights transposed", S3,
      lambda Q, K, V: torch.softmax(Q @ K.mT / math.sqrt(Q.shape[-1]), -1).mT @ V, hint="raised RuntimeError"),
    A("02/3", "no return", S3, lambda Q, K, V: None, hint="returned None"),
    A("02/3", "stub", S3, lambda Q, K, V: (_ for _ in ()).throw(NotImplementedError()), hint="NotImplementedError"),
]

S4 = lesson02.predicted_variance
ATTEMPTS += [
    A("02/4", "1024", S4, 1024, d=64, variance=4, right=True),
    A("02/4", "expression", S4, 64 * 4 * 4, d=64, variance=4, right=True),
    A("02/4", "float", S4, 1024.0, d=64, variance=4, right=True),
    A("02/4", "tensor", S4, torch.tensor(1024.0), d=64, variance=4, right=True),
    A("02/4", "numpy", S4, np.float64(1024), d=64, variance=4, right=True),
    A("02/4", "power", S4, 64 * 4**2, d=64, variance=4, right=True),
    A("02/4", "measured", S4, (2 * torch.randn(20_000, 64, generator=torch.Generator().manual_seed(1))
                               * 2 * torch.randn(20_000, 64, generator=torch.Generator().manual_seed(2))).sum(-1).var(),
      d=64, variance=4, right=True),
    A("02/4", "standard deviation", S4, 32, d=64, variance=4, hint="standard deviation"),
    A("02/4", "d s^2", S4, 256, d=64, variance=4, hint="s\\^2 times s\\^2"),
    A("02/4", "d", S4, 64, d=64, variance=4, hint="variance 1"),
    A("02/4", "one product", S4, 16, d=64, variance=4, hint="one product"),
    A("02/4", "one", S4, 1, d=64, variance=4, hint="after the 1/sqrt\\(d\\) scale"),
    A("02/4", "sum of variances", S4, 512, d=64, variance=4, hint="add the variances|multiply|product of"),
    A("02/4", "d squared", S4, 64**2 * 16, d=64, variance=4, hint="d\\^2|add up d|d times"),
    A("02/4", "one entry", S4, 4, d=64, variance=4, hint="one entry"),
    A("02/4", "text", S4, "1024", d=64, variance=4, hint="not text"),
    A("02/4", "None", S4, None, d=64, variance=4, hint="None|give a number"),
    A("02/4", "stub", S4, ..., d=64, variance=4, hint="still empty"),
    A("02/4", "guess", S4, 100, d=64, variance=4, hint=GENERIC),
]
