"""What the common wrong answers of lesson 09's rollout exercise compute, each with the hint that names its
mistake (the check in :mod:`lesson09` compares a wrong answer with each)."""

from __future__ import annotations

import torch

from ...i18n import Message, msg


def rollout_mistakes(attention: torch.Tensor, residual: float) -> list[tuple[torch.Tensor, Message]]:
    """What the common wrong rollouts give for ``attention``, each with the hint that names its mistake.

    Shape: attention (layers, b, h, i, j) -> a list of (b, i, j) results (and their hints)."""
    attention = attention.double()
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)

    def product(layers: list[torch.Tensor], later_on_left: bool = True) -> torch.Tensor:
        result = layers[0]
        for layer in layers[1:]:
            result = layer @ result if later_on_left else result @ layer
        return result

    mixed = [residual * eye + (1 - residual) * a.mean(dim=1) for a in attention]  # (b, i, j) per layer
    mistakes = [
        (product(mixed, later_on_left=False), msg("multiply in the order the layers act: later layers on the left, "
                                                  "R = A'_{{L-1}} ... A'_1 A'_0")),
        (product([a.mean(dim=1) for a in attention]), msg("add the residual path first: each block also passes its "
                                                          "input straight on, so mix the identity into every layer")),
        (product([residual * eye + (1 - residual) * a[:, 0] for a in attention]),
         msg("average the heads of each layer (the mean over the head axis) before you mix in the residual")),
        (product([residual * eye + (1 - residual) * a.sum(dim=1) for a in attention]),
         msg("average the heads, don't add them: each mixed layer's rows must still sum to 1")),
        (product([(1 - residual) * eye + residual * a.mean(dim=1) for a in attention]),
         msg("the residual share multiplies the identity: A' = r * I + (1 - r) * mean of heads")),
        (product([eye + a.mean(dim=1) for a in attention]),
         msg("mix the identity in, don't just add it: A' = r * I + (1 - r) * mean of heads keeps each row summing "
             "to 1")),
        (product([residual * eye + (1 - residual) * a.mean(dim=0) for a in attention]),
         msg("average over the heads (the second axis of each layer's (b, h, i, j) attention), not over the batch")),
        (product([m.transpose(-2, -1) for m in mixed], later_on_left=False).transpose(-2, -1),
         msg("multiply in the order the layers act: later layers on the left, R = A'_{{L-1}} ... A'_1 A'_0")),
        (product([m.transpose(-2, -1) for m in mixed]),
         msg("rows are queries: use each layer's weights as they are (row i: where query i looks), not transposed")),
    ]
    if residual != 0.5:
        mistakes.append((product([0.5 * eye + 0.5 * a.mean(dim=1) for a in attention]),
                         msg("use the residual share you are given, not a fixed one half")))
    if len(mixed) > 2:
        mistakes.append((product(mixed[:2]), msg("use every layer, however many there are, not only the first two")))
    if len(mixed) > 1:
        mistakes.append((mixed[-1], msg("multiply every layer's mixed matrix, not only the last")))
        mistakes.append((mixed[0], msg("multiply every layer's mixed matrix, not only the first")))
        mistakes.append((torch.stack([product(mixed[: k + 1]) for k in range(len(mixed))]),
                         msg("return the rollout through all the layers, one (i, j) matrix per sequence, not one "
                             "matrix after each layer")))
    return mistakes
