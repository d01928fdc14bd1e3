"""Checks for lesson 03 (the self-attention layer): the fused projection, order, graphs as masks, receptive fields."""

from __future__ import annotations

import torch

from ...core.masks import sliding_window_mask
from ._core import as_tensor, check_tensor_answer, correct, hint


def keys_from_fused(answer: object, layer: torch.nn.Module, x: torch.Tensor) -> None:
    """Exercise 1: the keys k^j = W^k a^j + b^k of every token, read out of the fused ``layer.qkv``."""
    e = layer.embed_dim
    w, b = layer.qkv.weight.detach(), layer.qkv.bias
    bias = b.detach() if b is not None else torch.zeros(3 * e, dtype=w.dtype)
    blocks = [w[s * e:(s + 1) * e] for s in range(3)]  # W^q, W^k, W^v, each (e, e)
    biases = [bias[s * e:(s + 1) * e] for s in range(3)]
    x = x.detach()
    expected = x @ blocks[1].T + biases[1]  # (b, n, e)
    check_tensor_answer(
        answer,
        expected,
        what="your keys",
        mistakes=[
            (x @ blocks[0].T + biases[0], "those are the queries: the rows of qkv.weight come in the order "
                                          "W^q, W^k, W^v, so the keys use the second block of e rows"),
            (x @ blocks[2].T + biases[2], "those are the values: the keys use the second block of e rows"),
            (x @ blocks[1].T, "almost: nn.Linear also adds its bias, the matching slice of qkv.bias"),
            (x @ blocks[1] + biases[1], "nn.Linear computes x @ W.T + b: transpose the weight block"),
            (layer.qkv(x).detach(), "that is the whole fused output (q, k and v side by side): keep the middle "
                                    "third of the features"),
        ],
        shape_hint=f"one key per token: the same shape as x, {tuple(x.shape)}",
        atol=1e-5,
        rtol=1e-5,
        success="k = x @ W^k.T + b^k, the middle third of the fused projection",
    )


def permuted_output(answer: object, layer: torch.nn.Module, x: torch.Tensor, perm: torch.Tensor) -> None:
    """Exercise 2: the output for the shuffled tokens ``x[:, perm]``, predicted from the unshuffled output."""
    with torch.no_grad():
        out, _ = layer(x)
    inverse = torch.argsort(perm)
    check_tensor_answer(
        answer,
        out[:, perm],
        what="your prediction",
        mistakes=[
            (out, "shuffling the inputs shuffles the outputs: apply the same permutation to the output rows"),
            (out[:, inverse], "that is the inverse shuffle: token perm[t] lands at position t, so index the "
                              "output with perm itself"),
        ],
        atol=1e-5,
        rtol=1e-5,
        success="self-attention is permutation-equivariant: shuffled inputs give the same outputs, shuffled",
    )


def graph_mask(answer: object, edges: list[tuple[int, int]], n_nodes: int) -> None:
    """Exercise 3: the attention mask of an undirected graph: node i may attend to j if they share an edge,
    or if i == j."""
    got = as_tensor(answer, "your mask")
    expected = torch.eye(n_nodes, dtype=torch.bool)
    directed = expected.clone()
    for a, b in edges:
        expected[a, b] = expected[b, a] = True
        directed[a, b] = True
    if got.shape != expected.shape:
        hint(f"one row per node (query) and one column per node (key): shape ({n_nodes}, {n_nodes})")
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()):
            hint("that is an additive float mask (0 / -inf); this exercise wants a bool mask, True = may attend")
        if not bool(((got == 0) | (got == 1)).all()):
            hint("a mask holds True (may attend) and False (may not); build it with dtype=torch.bool")
        got = got != 0
    if torch.equal(got, expected):
        correct("the adjacency matrix (plus self-loops) is the mask: each node mixes only its neighbours")
        return
    if torch.equal(got, ~expected):
        hint("the polarity is flipped: in this library True means 'may attend', so edges must be True")
    if torch.equal(got, expected & ~torch.eye(n_nodes, dtype=torch.bool)):
        hint("a node should also see itself (the diagonal), or a node without edges would have no key at all")
    if torch.equal(got, directed) or torch.equal(got, directed.T):
        hint("the graph is undirected: an edge (a, b) lets a see b and b see a")
    hint("node i may attend to node j when an edge joins them (in either direction) or when i == j; check "
         "each entry of your mask against that rule")


def window_for_kernel(answer: object, kernel: int) -> None:
    """Exercise 4: the ``window`` for which ``sliding_window_mask(n, window)`` is the receptive field of a
    ``Conv1d`` with an odd ``kernel`` (padding ``kernel // 2``)."""
    try:
        window = int(answer)
        whole = float(answer) == window  # int() truncates: 4.7 must not pass as 4
    except (TypeError, ValueError):
        hint("answer with one whole number, the window")
    if not whole:
        hint("answer with one whole number, the window: a window counts positions")
    if window == (kernel + 1) // 2:
        n = kernel + 4
        conv = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            conv[i, max(0, i - kernel // 2):i + kernel // 2 + 1] = True
        if torch.equal(sliding_window_mask(n, window), conv):
            correct(f"window {window}: |i - j| < {window} covers {kernel} keys, like a kernel of size {kernel}")
            return
    if window == kernel:
        hint(f"window counts the reach on one side, the query included (|i - j| < window); a window of "
             f"{kernel} would cover {2 * kernel - 1} keys")
    if window == kernel // 2:
        hint(f"that is the reach without the query itself: |i - j| < window must allow |i - j| = {kernel // 2}")
    hint("the kernel covers the query plus kernel // 2 positions on each side; find the window with "
         "2 * window - 1 == kernel")
