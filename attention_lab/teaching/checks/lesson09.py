"""Checks for lesson 09 (reading a trained model's attention: where a head looks, which heads the model needs,
rollout). Layers and heads are counted from 0, like the axes of the attention tensor."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from ...analysis import attention_rollout
from ...i18n import Message, msg
from ...models.training import evaluate
from ._calls import recording_calls
from ._core import NONE_HINT, as_tensor, call_learner, close, correct, fallback_hint, guard_errors, hint, learner_name
from ._lesson09_mistakes import rollout_mistakes


def _random_attention(layers: int, b: int, h: int, n: int, seed: int,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    scores = 2 * torch.randn(layers, b, h, n, n, generator=gen, dtype=torch.float64)  # (layers, b, h, i, j)
    return scores.softmax(dim=-1).to(dtype)


def _pointer_cases() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(attention, tokens, n_symbols): two sizes, so no batch size, layer count or length can be hard-coded."""
    cases = []
    # the model's dtype (float32) first, then float64, another depth, width, length and vocabulary
    # the second vocabulary is not the first's minus 1 or n - 1: a written-in 10 wraps to neither key p - 1 nor p + 1
    for layers, b, h, n, n_symbols, seed, dtype in ((2, 50, 2, 8, 10, 1, torch.float32),
                                                    (3, 7, 4, 6, 7, 2, torch.float64)):
        gen = torch.Generator().manual_seed(seed)
        tokens = torch.randint(0, n_symbols, (b, n), generator=gen)  # (b, i)
        tokens[:, -1] = n_symbols + torch.randint(0, n - 1, (b,), generator=gen)  # the pointer ->p
        cases.append((_random_attention(layers, b, h, n, seed, dtype), tokens, n_symbols))
    return cases


def _pick(weights: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """weights[l, b, h, ..., positions[b]]: one entry of the last axis per sequence. Shape: (l, b, h, ..., k)."""
    index = positions.view(1, -1, *([1] * (weights.dim() - 2)))  # (1, b, 1, ..., 1)
    return weights.gather(-1, index.expand(*weights.shape[:-1], 1))[..., 0]  # (l, b, h, ...)


def _on_pointed(attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return _pick(attention[..., -1, :], positions).mean(dim=1)  # last query's row (l, b, h, j) -> (l, h)


def _pointer_mistakes(attention: torch.Tensor, tokens: torch.Tensor, n_symbols: int, example_symbols: int
                      ) -> list[tuple[torch.Tensor, Message]]:
    pointed = tokens[:, -1] - n_symbols  # (b,)
    n = attention.shape[-1]
    right = _on_pointed(attention, pointed)
    written_in = (tokens[:, -1] - example_symbols) % n  # the example's vocabulary, a negative index wrapping around
    return [
        (_on_pointed(attention, written_in),
         msg("that reads the pointer with the example's vocabulary of {example} symbols; the position is the "
             "pointer's id minus the n_symbols your function is given", example=example_symbols)),
        (_on_pointed(attention, torch.full_like(pointed, n - 1)),
         msg("that is the weight on the pointer token itself (the last key); the pointer names another position")),
        (_pick(attention, pointed).mean(dim=(1, 3)),  # every query's weight on key p
         msg("only the last query reads the pointer: take the last row of each head's matrix, not every row")),
        (_on_pointed(attention, pointed[:1].expand_as(pointed)),
         msg("each sequence has its own pointer: read each sequence's position from its own last token")),
        (right * attention.shape[1], msg("average over the sequences, don't sum: a share of 1 should mean 'all of "
                                         "the last query's weight'")),
        (right.T, msg("rows are layers and columns heads: shape (layers, h)")),
        (_on_pointed(attention, (pointed + 1).clamp(max=n - 1)),
         msg("positions count from 0: the pointer ->p names key p, not key p + 1")),
        (_on_pointed(attention, (pointed - 1).clamp(min=0)),
         msg("positions count from 0: the pointer ->p names key p, not key p - 1")),
        (_pick(attention[..., :, -1], pointed).mean(dim=1),  # query p's weight on the last key
         msg("rows are queries and columns keys: the last query is the last row, and the pointed key a column of "
             "it")),
        (_on_pointed(attention, pointed).mean(dim=1), msg("one share per layer and head: average over the "
                                                          "sequences only, not over the heads")),
        (_on_pointed(attention, pointed).mean(dim=0), msg("one share per layer and head: average over the "
                                                          "sequences only, not over the layers")),
        (_pick(attention[..., -1, :], pointed).median(dim=1).values,
         msg("average the sequences' weights with the mean, not the median")),
    ]


def _call_pointer(fn: object, attention: torch.Tensor, tokens: torch.Tensor, n_symbols: int) -> torch.Tensor:
    try:
        result = fn(attention.clone(), tokens.clone(), n_symbols)
    except (IndexError, RuntimeError) as error:
        if "out of" in str(error) or "bounds" in str(error):
            hint(msg("an index is out of range: the pointer token's id is n_symbols + p, so the position it names "
                     "is that id minus n_symbols"))
        raise
    if result is None:
        hint(NONE_HINT)
    return as_tensor(result, msg("the shares of {name}", name=learner_name(fn)))


@guard_errors
def pointer_attention(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise 1: ``fn(attention, tokens, n_symbols)`` gives, per layer and head, the mean weight the last query
    puts on the position its sequence's pointer names. Shape: (layers, b, h, i, j), (b, i) -> (layers, h)."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.pointer_attention(share_on_pointed), not its result"))
    name = learner_name(fn)
    cases = _pointer_cases()
    for attention, tokens, n_symbols in cases:
        got = call_learner(_call_pointer, fn, attention, tokens, n_symbols, what=name)
        expected = _on_pointed(attention, tokens[:, -1] - n_symbols)
        if close(got, expected, atol=1e-5, rtol=1e-5):
            continue
        for wrong, message in _pointer_mistakes(attention, tokens, n_symbols, cases[0][2]):
            if close(got, wrong, atol=1e-5, rtol=1e-5):
                hint(message)
        if got.shape != expected.shape:
            hint(msg("one share per layer and head: for attention of shape {shape} that is (layers, h) = "
                     "{expected}; {name} returned shape {got}", shape=tuple(attention.shape),
                     expected=tuple(expected.shape), name=name, got=tuple(got.shape)))
        fallback_hint(msg("for each sequence: the last query's row, the column its pointer names; then the mean over "
                          "the sequences"))
    correct(msg("a share near 1 means that head's last query jumps to wherever the pointer says"))


def _subset_accuracies(model: torch.nn.Module, task: object, n_sequences: int, seed: int
                       ) -> dict[tuple[bool, ...], float]:
    accuracies = {}
    for keep in itertools.product((True, False), repeat=model.num_layers * model.num_heads):
        mask = torch.tensor(keep).view(model.num_layers, model.num_heads)  # (layers, h), True = keep
        accuracies[keep] = evaluate(model, task, n_sequences=n_sequences, seed=seed, head_mask=mask)["token_accuracy"]
    return accuracies


def _pairs(got: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor | None:
    """The mask that an answer written as (layer, head) pairs means (counted from 0), or None if it is not such a
    list. Shape: (k, 2) or (2,) -> (layers, h)."""
    pairs = got.reshape(-1, 2) if got.dim() == 1 and got.numel() == 2 else got
    if got.is_floating_point() or got.dtype == torch.bool or pairs.dim() != 2 or pairs.shape[-1] != 2:
        return None
    layers, heads = pairs[:, 0], pairs[:, 1]
    if len(pairs) == 0 or bool((layers < 0).any() | (layers >= shape[0]).any() | (heads < 0).any()
                               | (heads >= shape[1]).any()):
        return None
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[layers, heads] = True
    return mask


def _names(mask: torch.Tensor) -> str:
    kept = [str(msg("layer {layer} head {head}", layer=layer, head=head)) for layer, head in mask.nonzero().tolist()]
    return str(msg(" and ")).join(kept) if kept else str(msg("no head"))


@guard_errors
def smallest_head_set(answer: object, model: torch.nn.Module, task: object, *, threshold: float = 0.99,
                      n_sequences: int = 1000, seed: int = 10_000) -> None:
    """Exercise 2: a (layers, h) bool mask, True = keep, of the fewest heads that keep the token accuracy at or
    above ``threshold`` (any such set of the smallest size is right). A mask of 0s and 1s is read as a mask, so that
    its mistake is named, and a right one is asked for as bool; an answer written as (layer, head) pairs gets a hint
    that says how it was read."""
    shape = (model.num_layers, model.num_heads)
    got = as_tensor(answer, msg("your set of heads"))
    pairs = _pairs(got, shape)
    as_mask = got.dtype == torch.bool or (not got.is_floating_point() and not got.is_complex()
                                          and tuple(got.shape) == shape and bool(((got == 0) | (got == 1)).all()))
    if not as_mask:
        if pairs is not None:
            hint(msg("your answer reads as a list of (layer, head) pairs ({names}); the check wants a (layers, h) = "
                     "{shape} bool mask instead: True at each head you keep, False elsewhere",
                     names=_names(pairs), shape=shape))
        if not got.is_floating_point() and not got.is_complex() and got.dim() == 2 and got.shape[-1] == 2:
            hint(msg("your answer looks like (layer, head) pairs, but not counted from 0 (layers 0 to {layer}, heads "
                     "0 to {head}); the check wants a (layers, h) = {shape} bool mask: True at each head you keep",
                     layer=shape[0] - 1, head=shape[1] - 1, shape=shape))
        if got.dim() >= 1 and tuple(got.shape) != shape:
            hint(msg("one entry per layer and head: a (layers, h) = {shape} mask with True for each head you keep; "
                     "yours has shape {got}", shape=shape, got=tuple(got.shape)))
        hint(msg("answer with a bool mask of the heads you keep: True for a kept head, False for one switched "
                 "off, one entry per layer and head"))
    if tuple(got.shape) != shape:
        hint(msg("one entry per layer and head: a (layers, h) = {shape} mask with True for each head you keep; "
                 "yours has shape {got}", shape=shape, got=tuple(got.shape)))
    mask = got.bool()
    accuracies = _subset_accuracies(model, task, n_sequences, seed)
    good = {keep: acc for keep, acc in accuracies.items() if acc >= threshold}
    fewest = min(sum(keep) for keep in good)
    key = tuple(mask.flatten().tolist())
    if key in good and sum(key) == fewest:
        if got.dtype != torch.bool:  # the exercise asks for a bool mask, and head_mask takes no other
            hint(msg("the right heads, as a 0/1 mask: head_mask takes a bool tensor (True = keep the head) and "
                     "refuses any other, as the library does every 0/1 mask; make it a bool mask"))
        alone = max(acc for keep, acc in accuracies.items() if sum(keep) == 1)
        correct(msg("keeping only {names} gives accuracy {accuracy:.3f}; no smaller set reaches {threshold:g} (the "
                    "best single head alone: {alone:.3f})", names=_names(mask), accuracy=accuracies[key],
                    threshold=threshold, alone=alone))
        return
    if got.dtype != torch.bool and pairs is not None:
        pair_key = tuple(pairs.flatten().tolist())
        if pair_key in good and sum(pair_key) == fewest:
            hint(msg("read as a mask (1 = keep), your answer keeps {names}, which is not a right answer; read as "
                     "(layer, head) pairs it would be right: answer with the bool mask of those heads instead",
                     names=_names(mask)))
    if key not in good:
        below = msg("with only {names} the accuracy is {accuracy:.3f}, below {threshold:g}", names=_names(mask),
                    accuracy=accuracies[key], threshold=threshold)
        right = {reading for reading in good if sum(reading) == fewest}
        if mask.shape[0] == mask.shape[1] and tuple(mask.T.flatten().tolist()) in right:
            hint(msg("{below}; your mask's transpose would be right: rows are layers and columns heads", below=below))
        if tuple(not k for k in key) in right:  # a set meant to keep, or the switched-off heads: both read so
            hint(msg("{below}; if your mask marks the heads you switch off, turn it around: in a head_mask True "
                     "marks the heads you KEEP", below=below))
        hint(msg("{below}: that set is not enough", below=below))
    fallback_hint(msg("these {count} heads reach {threshold:g}, but a smaller set does too: measure every subset of "
                      "the heads, not only one head at a time", count=sum(key), threshold=threshold))


# (layers, b, h, n, residual, seed, dtype): the model's float32 first, then other depths and shares, float64 last
_ROLLOUT_CASES = ((2, 3, 2, 5, 0.5, 1, torch.float32), (3, 2, 4, 6, 0.2, 2, torch.float32),
                  (1, 1, 3, 4, 0.7, 3, torch.float32), (4, 2, 3, 5, 0.35, 4, torch.float64))


def _is_dtype_error(error: BaseException) -> bool:
    text = str(error)
    return "dtype" in text or ("Double" in text and "Float" in text) or "scalar type" in text


@guard_errors
def general_rollout(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise 3: ``fn(attention, residual)`` is attention rollout for any number of layers and any residual
    share, without calling the library's ``attention_rollout``. Shape: (layers, b, h, i, j) -> (b, i, j).

    Tried on float32 attention (the model's) and float64: a function right on every float32 case that fails on
    float64 only because it makes a float32 tensor of its own is right, and the ``Correct`` line says so."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.general_rollout(rollout), not the result of calling it"))
    name = learner_name(fn)
    float32_only = False
    for layers, b, h, n, residual, seed, dtype in _ROLLOUT_CASES:
        attention = _random_attention(layers, b, h, n, seed, dtype)
        if dtype == torch.float64:
            try:
                fn(attention.clone(), residual)
            except Exception as error:
                if _is_dtype_error(error):
                    float32_only = True
                    continue
        with recording_calls() as calls:
            got = call_learner(fn, attention.clone(), residual, what=name)
        if "attention_rollout" in calls.library:
            hint(msg("{name} calls the library's attention_rollout, the function it is checked against; the exercise "
                     "is to write rollout yourself from each layer's mean of heads and the identity", name=name))
        if got is None:
            hint(NONE_HINT)
        got = as_tensor(got, msg("what {name} returns", name=name))
        expected = attention_rollout(attention.double(), residual=residual)
        if close(got, expected, atol=1e-5, rtol=1e-5):
            continue
        for wrong, message in rollout_mistakes(attention, residual):
            if close(got, wrong, atol=1e-5, rtol=1e-5):
                hint(message)
        if got.shape != expected.shape:
            hint(msg("one (i, j) matrix per sequence: for attention of shape {shape} that is (b, i, j) = {expected}; "
                     "{name} returned shape {got}", shape=tuple(attention.shape), expected=tuple(expected.shape),
                     name=name, got=tuple(got.shape)))
        fallback_hint(msg("for {layers} layer(s) with residual share {residual:g} {name} differs; build each layer's "
                          "mixed matrix from the mean of its heads, then multiply them in the order the layers act",
                          layers=layers, residual=residual, name=name))
    success = msg("R = A'_{{L-1}} ... A'_0 with A' = r I + (1 - r) mean of heads, for any depth; each row sums to 1")
    if float32_only:
        success = msg("{success} (on float32 attention, the model's; on float64 attention {name} raises a dtype "
                      "error: give the tensors it makes the attention's dtype and it works for both)",
                      success=success, name=name)
    correct(success)
