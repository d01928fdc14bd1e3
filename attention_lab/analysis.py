"""Reading a trained model's attention (lesson 09): attention rollout through every layer.

A model's attention weights say where each layer looked; what position i of the output draws on, through all the
layers, needs the layers combined. :func:`attention_rollout` does that from the weights a model returns
(``model(tokens, return_attention=True)``): it reads weights, and needs no model.
"""

from __future__ import annotations

import torch

from ._validation import check_number, check_tensor, fail

__all__ = ["attention_rollout"]


def attention_rollout(attention: torch.Tensor, *, residual: float = 0.5) -> torch.Tensor:
    """How much each output position draws on each input token, following attention through every layer.

    Attention rollout (Abnar and Zuidema, 2020): average each layer's heads, mix in the residual connection as
    ``A' = residual * I + (1 - residual) * A`` (rows renormalised), and multiply the layers in order,
    ``R = A'_L ... A'_2 A'_1``. Row i of R sums to 1: a share of "where position i's information came from".
    It ignores the values' sizes, the feed-forward layers and the LayerNorms, and it weights every head
    equally, so it is a picture of the routing, not a proof of what the model uses (head ablation tests that).

    Shape: attention ``(layers, b, h, i, j)`` with ``i == j`` (self-attention) -> rollout ``(b, i, j)``.
    """
    fn = "attention_rollout"
    check_tensor(fn, "attention", attention, floating=True)
    if attention.dim() != 5 or attention.shape[-1] != attention.shape[-2]:
        fail(fn, f"attention must have shape (layers, b, h, i, j) with i == j (self-attention), got shape "
                 f"{tuple(attention.shape)}; take it from model(tokens, return_attention=True)")
    check_number(fn, "residual", residual, low=0, high=1, hint="it is the share of the residual path")
    if attention.shape[0] == 0:
        fail(fn, f"attention must hold at least one layer, got shape {tuple(attention.shape)} (0 layers); pass the "
                 f"weights of every layer, from model(tokens, return_attention=True)")
    sums = attention.sum(dim=-1)  # (layers, b, h, i): 1 for a row of weights, 0 for a row with no allowed key
    rows_ok = torch.isclose(sums, torch.ones_like(sums), atol=1e-3) | (sums == 0)
    if bool((attention < 0).any()) or not bool(rows_ok.all()):
        fail(fn, f"attention must hold softmax weights (each row >= 0, summing to 1), got values from "
                 f"{float(attention.min()):.3g} to {float(attention.max()):.3g} and row sums from "
                 f"{float(sums.min()):.3g} to {float(sums.max()):.3g}; pass the weights, not the scores "
                 f"(softmax(scores, dim=-1))")
    n = attention.shape[-1]
    eye = torch.eye(n, dtype=attention.dtype, device=attention.device)
    mixed = residual * eye + (1 - residual) * attention.mean(dim=2)  # (layers, b, i, j)
    mixed = mixed / mixed.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(mixed.dtype).tiny)
    rollout = mixed[0]  # (b, i, j)
    for layer in mixed[1:]:
        rollout = layer @ rollout  # (b, i, j)
    return rollout
