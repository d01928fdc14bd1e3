"""Checks for lesson 09 (reading a trained model's attention: where a head looks, which heads the model needs,
rollout). Layers and heads are counted from 0, like the axes of the attention tensor."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from ...analysis import attention_rollout
from ...models.training import evaluate
from ._core import as_tensor, call_learner, close, correct, guard_errors, hint


def _random_attention(layers: int, b: int, h: int, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    scores = 2 * torch.randn(layers, b, h, n, n, generator=gen, dtype=torch.float64)  # (layers, b, h, i, j)
    return scores.softmax(dim=-1)


def _pointer_cases() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(attention, tokens, n_symbols): two sizes, so no batch size, layer count or length can be hard-coded."""
    cases = []
    for layers, b, h, n, n_symbols, seed in ((2, 50, 2, 8, 10, 1), (3, 7, 4, 6, 5, 2)):
        gen = torch.Generator().manual_seed(seed)
        tokens = torch.randint(0, n_symbols, (b, n), generator=gen)  # (b, i)
        tokens[:, -1] = n_symbols + torch.randint(0, n - 1, (b,), generator=gen)  # the pointer ->p
        cases.append((_random_attention(layers, b, h, n, seed), tokens, n_symbols))
    return cases


def _pick(weights: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """weights[l, b, h, ..., positions[b]]: one entry of the last axis per sequence. Shape: (l, b, h, ..., k)."""
    index = positions.view(1, -1, *([1] * (weights.dim() - 2)))  # (1, b, 1, ..., 1)
    return weights.gather(-1, index.expand(*weights.shape[:-1], 1))[..., 0]  # (l, b, h, ...)


def _on_pointed(attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return _pick(attention[..., -1, :], positions).mean(dim=1)  # last query's row (l, b, h, j) -> (l, h)


def _pointer_mistakes(attention: torch.Tensor, tokens: torch.Tensor, n_symbols: int) -> list[tuple[torch.Tensor, str]]:
    pointed = tokens[:, -1] - n_symbols  # (b,)
    n = attention.shape[-1]
    right = _on_pointed(attention, pointed)
    return [
        (_on_pointed(attention, torch.full_like(pointed, n - 1)),
         "that is the weight on the pointer token itself (the last key); the pointer names another position"),
        (_pick(attention, pointed).mean(dim=(1, 3)),  # every query's weight on key p
         "only the last query reads the pointer: take the last row of each head's matrix, not every row"),
        (_on_pointed(attention, pointed[:1].expand_as(pointed)),
         "each sequence has its own pointer: read each sequence's position from its own last token"),
        (right * attention.shape[1], "average over the sequences, don't sum: a share of 1 should mean 'all of the "
                                     "last query's weight'"),
        (right.T, "rows are layers and columns heads: shape (layers, h)"),
        (_on_pointed(attention, (pointed + 1).clamp(max=n - 1)),
         "positions count from 0: the pointer ->p names key p, not key p + 1"),
        (_on_pointed(attention, (pointed - 1).clamp(min=0)),
         "positions count from 0: the pointer ->p names key p, not key p - 1"),
        (_pick(attention[..., :, -1], pointed).mean(dim=1),  # query p's weight on the last key
         "rows are queries and columns keys: the last query is the last row, and the pointed key a column of it"),
    ]


def _call_pointer(fn: object, attention: torch.Tensor, tokens: torch.Tensor, n_symbols: int) -> torch.Tensor:
    try:
        result = fn(attention.clone(), tokens.clone(), n_symbols)
    except (IndexError, RuntimeError) as error:
        if "out of" in str(error) or "bounds" in str(error):
            hint("an index is out of range: the pointer token's id is n_symbols + p, so the position it names is "
                 "that id minus n_symbols")
        raise
    return as_tensor(result, "your shares")


@guard_errors
def pointer_attention(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise 1: ``fn(attention, tokens, n_symbols)`` gives, per layer and head, the mean weight the last query
    puts on the position its sequence's pointer names. Shape: (layers, b, h, i, j), (b, i) -> (layers, h)."""
    if not callable(fn):
        hint("pass your function itself, e.g. check.pointer_attention(share_on_pointed), not its result")
    for attention, tokens, n_symbols in _pointer_cases():
        got = call_learner(_call_pointer, fn, attention, tokens, n_symbols, what="your function")
        expected = _on_pointed(attention, tokens[:, -1] - n_symbols)
        if close(got, expected, atol=1e-5, rtol=1e-5):
            continue
        for wrong, message in _pointer_mistakes(attention, tokens, n_symbols):
            if close(got, wrong, atol=1e-5, rtol=1e-5):
                hint(message)
        if got.shape != expected.shape:
            hint(f"one share per layer and head: for attention of shape {tuple(attention.shape)} that is "
                 f"(layers, h) = {tuple(expected.shape)}; yours has shape {tuple(got.shape)}")
        hint("for each sequence: the last query's row, the column its pointer names; then the mean over the "
             "sequences")
    correct("a share near 1 means that head's last query jumps to wherever the pointer says")


def _subset_accuracies(model: torch.nn.Module, task: object, n_sequences: int, seed: int
                       ) -> dict[tuple[bool, ...], float]:
    accuracies = {}
    for keep in itertools.product((True, False), repeat=model.num_layers * model.num_heads):
        mask = torch.tensor(keep).view(model.num_layers, model.num_heads)  # (layers, h), True = keep
        accuracies[keep] = evaluate(model, task, n_sequences=n_sequences, seed=seed, head_mask=mask)["token_accuracy"]
    return accuracies


def _as_mask(answer: object, shape: tuple[int, int]) -> torch.Tensor:
    got = as_tensor(answer, "your set of heads")
    if got.dtype != torch.bool:
        if got.is_floating_point() or got.is_complex() or not bool(((got == 0) | (got == 1)).all()):
            hint("answer with a mask of the heads you keep: True (or 1) for a kept head, False (or 0) for one "
                 "switched off")
        got = got.bool()
    if tuple(got.shape) != shape:
        hint(f"one entry per layer and head: a (layers, h) = {shape} mask with True for each head you keep; yours "
             f"has shape {tuple(got.shape)}")
    return got


def _names(mask: torch.Tensor) -> str:
    kept = [f"layer {layer} head {head}" for layer, head in mask.nonzero().tolist()]
    return " and ".join(kept) if kept else "no head"


@guard_errors
def smallest_head_set(answer: object, model: torch.nn.Module, task: object, *, threshold: float = 0.99,
                      n_sequences: int = 1000, seed: int = 10_000) -> None:
    """Exercise 2: a (layers, h) bool mask, True = keep, of the fewest heads that keep the token accuracy at or
    above ``threshold`` (any such set of the smallest size is right)."""
    shape = (model.num_layers, model.num_heads)
    got = _as_mask(answer, shape)
    accuracies = _subset_accuracies(model, task, n_sequences, seed)
    good = {keep: acc for keep, acc in accuracies.items() if acc >= threshold}
    fewest = min(sum(keep) for keep in good)
    key = tuple(got.flatten().tolist())
    if key in good and sum(key) == fewest:
        alone = max(acc for keep, acc in accuracies.items() if sum(keep) == 1)
        correct(f"keeping only {_names(got)} gives accuracy {accuracies[key]:.3f}; no smaller set reaches "
                f"{threshold:g} (the best single head alone: {alone:.3f})")
        return
    flipped = tuple(not k for k in key)
    if flipped in good and sum(flipped) == fewest:
        hint("in a head_mask True marks the heads you KEEP; your mask marks the ones you switched off")
    if key not in good:
        hint(f"with only {_names(got)} the accuracy is {accuracies[key]:.3f}, below {threshold:g}: that set is "
             f"not enough")
    hint(f"these {sum(key)} heads reach {threshold:g}, but a smaller set does too: measure every subset of the "
         f"heads, not only one head at a time")


def _rollout_mistakes(attention: torch.Tensor, residual: float) -> list[tuple[torch.Tensor, str]]:
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype)

    def product(layers: list[torch.Tensor], later_on_left: bool = True) -> torch.Tensor:
        result = layers[0]
        for layer in layers[1:]:
            result = layer @ result if later_on_left else result @ layer
        return result

    mixed = [residual * eye + (1 - residual) * a.mean(dim=1) for a in attention]  # (b, i, j) per layer
    mistakes = [
        (product(mixed, later_on_left=False), "multiply in the order the layers act: later layers on the left, "
                                              "R = A'_{L-1} ... A'_1 A'_0"),
        (product([a.mean(dim=1) for a in attention]), "add the residual path first: each block also passes its "
                                                      "input straight on, so mix the identity into every layer"),
        (product([residual * eye + (1 - residual) * a[:, 0] for a in attention]),
         "average the heads of each layer (the mean over the head axis) before you mix in the residual"),
        (product([residual * eye + (1 - residual) * a.sum(dim=1) for a in attention]),
         "average the heads, don't add them: each mixed layer's rows must still sum to 1"),
        (product([(1 - residual) * eye + residual * a.mean(dim=1) for a in attention]),
         "the residual share multiplies the identity: A' = r * I + (1 - r) * mean of heads"),
    ]
    if residual != 0.5:
        mistakes.append((product([0.5 * eye + 0.5 * a.mean(dim=1) for a in attention]),
                         "use the residual share you are given, not a fixed one half"))
    if len(mixed) > 2:
        mistakes.append((product(mixed[:2]), "use every layer, however many there are, not only the first two"))
    if len(mixed) > 1:
        mistakes.append((mixed[-1], "multiply every layer's mixed matrix, not only the last"))
    return mistakes


@guard_errors
def general_rollout(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise 3: ``fn(attention, residual)`` is attention rollout for any number of layers and any residual
    share. Shape: (layers, b, h, i, j) -> (b, i, j)."""
    if not callable(fn):
        hint("pass your function itself, e.g. check.general_rollout(rollout), not the result of calling it")
    for layers, b, h, n, residual, seed in ((2, 3, 2, 5, 0.5, 1), (3, 2, 4, 6, 0.2, 2), (1, 1, 3, 4, 0.7, 3)):
        attention = _random_attention(layers, b, h, n, seed)
        got = call_learner(fn, attention.clone(), residual, what="your rollout")
        got = as_tensor(got, "your rollout")
        expected = attention_rollout(attention, residual=residual)
        if close(got, expected, atol=1e-5, rtol=1e-5):
            continue
        for wrong, message in _rollout_mistakes(attention, residual):
            if close(got, wrong, atol=1e-5, rtol=1e-5):
                hint(message)
        if got.shape != expected.shape:
            hint(f"one (i, j) matrix per sequence: for attention of shape {tuple(attention.shape)} that is (b, i, j) "
                 f"= {tuple(expected.shape)}; yours has shape {tuple(got.shape)}")
        hint(f"for {layers} layer(s) with residual share {residual:g} your rollout differs; build each layer's mixed "
             f"matrix from the mean of its heads, then multiply them in the order the layers act")
    correct("R = A'_{L-1} ... A'_0 with A' = r I + (1 - r) mean of heads, for any depth; each row sums to 1")
