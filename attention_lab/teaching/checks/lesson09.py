"""Checks for lesson 09 (reading a trained model's attention: mirror scores, head ablation, rollout)."""

from __future__ import annotations

import torch

from ...models.training import evaluate
from ...models.transformer import attention_rollout
from ._core import as_tensor, check_tensor_answer, correct, hint


def _attention(attention: object) -> torch.Tensor:
    if not isinstance(attention, torch.Tensor) or attention.dim() != 5:
        raise TypeError("expected the model's attention of shape (layers, b, h, i, j), from "
                        "model(tokens, return_attention=True)")
    return attention.detach().to("cpu").double()


def mirror_scores(answer: object, attention: torch.Tensor) -> None:
    """Exercise 1: per layer and head, the mean weight a query puts on its mirrored key ``j = n - 1 - i``."""
    attention = _attention(attention)
    n = attention.shape[-1]
    rows = torch.arange(n)
    expected = attention[..., rows, n - 1 - rows].mean(dim=(1, 3))  # (layers, h)
    mistakes = [
        (attention[..., rows, rows].mean(dim=(1, 3)), "that is the diagonal (each token looking at itself); the "
                                                      "mirror of query i is key n - 1 - i"),
        (attention[..., rows, n - 1 - rows].sum(dim=(1, 3)), "average over the batch and the queries, don't sum: a "
                                                             "score of 1 should mean 'all weight on the mirror'"),
        (attention[..., rows, n - 1 - rows].mean(dim=(1, 3)).T, "rows are layers and columns heads: (layers, h)"),
        (attention.mean(dim=(1, 3))[..., 0], "pick one key per query (the mirrored one), not a fixed column"),
    ]
    check_tensor_answer(answer, expected, what="your mirror scores", mistakes=mistakes, atol=1e-4, rtol=1e-4,
                        shape_hint=f"one score per layer and head: shape (layers, h) = {tuple(expected.shape)}",
                        success="a score near 1 means that head draws the anti-diagonal: it reads the mirror")


def _ablation(model: torch.nn.Module, task: object, n_sequences: int, seed: int, keep_only: bool) -> torch.Tensor:
    result = torch.zeros(model.num_layers, model.num_heads, dtype=torch.float64)
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            mask = torch.full((model.num_layers, model.num_heads), not keep_only, dtype=torch.bool)
            mask[layer, head] = keep_only  # keep_only: the one head alone; otherwise every head but that one
            result[layer, head] = evaluate(model, task, n_sequences=n_sequences, seed=seed,
                                           head_mask=mask)["token_accuracy"]
    return result


def ablation(answer: object, model: torch.nn.Module, task: object, *, n_sequences: int = 1000,
             seed: int = 10_000) -> None:
    """Exercise 2: token accuracy with each head switched off in turn, shape ``(layers, h)``."""
    expected = _ablation(model, task, n_sequences, seed, keep_only=False)
    mistakes = [(_ablation(model, task, n_sequences, seed, keep_only=True),
                 "head_mask is True for the heads to KEEP: switch off one head (one False), not all but one")]
    check_tensor_answer(answer, expected, what="your ablation accuracies", mistakes=mistakes, atol=1e-6, rtol=0,
                        shape_hint=f"one accuracy per layer and head: shape (layers, h) = {tuple(expected.shape)}",
                        success="each entry is the accuracy without that one head")


def most_needed_head(answer: object, accuracies: object) -> None:
    """Exercise 2b: ``(layer, head)`` (0-based indices) of the head whose removal costs the most accuracy."""
    accuracies = as_tensor(accuracies, "the ablation accuracies").double()
    got = as_tensor(answer, "your (layer, head)").flatten()
    if got.numel() != 2:
        hint("answer with two indices, (layer, head), counted from 0 like the tensor's indices")
    layer, head = (int(v) for v in got.tolist())
    worst = accuracies.min()
    if not (0 <= layer < accuracies.shape[0] and 0 <= head < accuracies.shape[1]):
        hint(f"indices count from 0: layer in 0..{accuracies.shape[0] - 1}, head in 0..{accuracies.shape[1] - 1}")
    if accuracies[layer, head] == worst:
        correct(f"without layer {layer + 1}, head {head + 1} the accuracy falls to {float(worst):.3f}")
        return
    if accuracies[layer, head] == accuracies.max():
        hint("that head's removal hurts least; the head the model needs most is the one whose removal leaves the "
             "LOWEST accuracy")
    hint("look for the smallest entry of the ablation table (torch.argmin, then divmod by the number of heads)")


def rollout(answer: object, attention: torch.Tensor) -> None:
    """Exercise 3: attention rollout with residual 0.5, shape ``(b, i, j)``."""
    attention = _attention(attention)
    expected = attention_rollout(attention, residual=0.5)
    n = attention.shape[-1]
    eye = torch.eye(n, dtype=torch.float64)
    mixed = [0.5 * eye + 0.5 * layer.mean(dim=1) for layer in attention]  # (b, i, j) per layer
    reversed_order = mixed[0]
    for layer in mixed[1:]:
        reversed_order = reversed_order @ layer
    raw = attention[0].mean(dim=1)
    for layer in attention[1:]:
        raw = layer.mean(dim=1) @ raw
    first_head = 0.5 * eye + 0.5 * attention[0, :, 0]
    for layer in attention[1:]:
        first_head = (0.5 * eye + 0.5 * layer[:, 0]) @ first_head
    mistakes = [
        (reversed_order, "multiply in the order the layers act: later layers on the left, R = A'_2 A'_1"),
        (raw, "add the residual path first: A' = 0.5 * I + 0.5 * A, because each block also passes x straight on"),
        (first_head, "average the heads of each layer (mean over the head axis) before you mix in the residual"),
    ]
    check_tensor_answer(answer, expected, what="your rollout", mistakes=mistakes, atol=1e-4, rtol=1e-4,
                        shape_hint=f"one (i, j) matrix per sequence: shape (b, i, j) = {tuple(expected.shape)}",
                        success="R = A'_L ... A'_1 with A' = (I + mean of heads) / 2; each row sums to 1")
