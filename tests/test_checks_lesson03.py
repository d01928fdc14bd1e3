"""Every exercise check of lesson 03 accepts right answers and rejects the common mistakes with their hints."""

import pytest
import torch
from _check_helpers import accepts, rejects

import attention_lab as al
from attention_lab.teaching.checks import lesson03


@pytest.fixture
def layer_and_x():
    layer = al.SelfAttention(4)
    return layer, torch.randn(2, 5, 4)


def test_keys_from_fused(capsys, layer_and_x):
    layer, x = layer_and_x
    w, b = layer.qkv.weight.detach(), layer.qkv.bias.detach()
    accepts(capsys, lesson03.keys_from_fused, x @ w[4:8].T + b[4:8], layer, x)
    accepts(capsys, lesson03.keys_from_fused, layer.project(x)[1].detach(), layer, x)
    accepts(capsys, lesson03.keys_from_fused, layer.qkv(x).chunk(3, dim=-1)[1].tolist(), layer, x)
    rejects(lesson03.keys_from_fused, x @ w[:4].T + b[:4], layer, x, hint="those are the queries")
    rejects(lesson03.keys_from_fused, x @ w[8:].T + b[8:], layer, x, hint="those are the values")
    rejects(lesson03.keys_from_fused, x @ w[4:8].T, layer, x, hint="adds its bias")
    rejects(lesson03.keys_from_fused, x @ w[4:8] + b[4:8], layer, x, hint="transpose the weight")
    rejects(lesson03.keys_from_fused, layer.qkv(x).detach(), layer, x, hint="middle third")
    rejects(lesson03.keys_from_fused, x, layer, x, hint="right shape but not the right values")
    rejects(lesson03.keys_from_fused, ..., layer, x, hint="still empty")


def test_permuted_output(capsys, layer_and_x):
    layer, x = layer_and_x
    perm = torch.tensor([2, 0, 3, 4, 1])
    with torch.no_grad():
        out, _ = layer(x)
        accepts(capsys, lesson03.permuted_output, out[:, perm], layer, x, perm)
        accepts(capsys, lesson03.permuted_output, layer(x[:, perm])[0], layer, x, perm)
    rejects(lesson03.permuted_output, out, layer, x, perm, hint="same permutation to the output rows")
    rejects(lesson03.permuted_output, out[:, torch.argsort(perm)], layer, x, perm, hint="inverse shuffle")


def test_graph_mask(capsys):
    edges = [(0, 1), (1, 2), (3, 4)]
    good = torch.eye(5, dtype=torch.bool)
    for a, b in edges:
        good[a, b] = good[b, a] = True
    accepts(capsys, lesson03.graph_mask, good, edges, 5)
    accepts(capsys, lesson03.graph_mask, good.int().tolist(), edges, 5)
    rejects(lesson03.graph_mask, ~good, edges, 5, hint="polarity is flipped")
    rejects(lesson03.graph_mask, good & ~torch.eye(5, dtype=torch.bool), edges, 5, hint="see itself")
    directed = torch.eye(5, dtype=torch.bool)
    for a, b in edges:
        directed[a, b] = True
    rejects(lesson03.graph_mask, directed, edges, 5, hint="undirected")
    rejects(lesson03.graph_mask, good[:4], edges, 5, hint="shape \\(5, 5\\)")
    rejects(lesson03.graph_mask, good.float() * 2, edges, 5, hint="dtype=torch.bool")


def test_window_for_kernel(capsys):
    accepts(capsys, lesson03.window_for_kernel, 4, kernel=7)
    accepts(capsys, lesson03.window_for_kernel, torch.tensor(3), kernel=5)
    rejects(lesson03.window_for_kernel, 7, kernel=7, hint="would cover 13 keys")
    rejects(lesson03.window_for_kernel, 3, kernel=7, hint="without the query itself")
    rejects(lesson03.window_for_kernel, 5, kernel=7, hint="2 \\* window - 1 == kernel")
    rejects(lesson03.window_for_kernel, "four", kernel=7, hint="one whole number")
