"""Greedy decoding with a :class:`~attention_lab.models.transformer.TinyTransformer` decoder, with or without a cache.

Without a cache (``cache="none"``), every new token runs the model over the whole sequence so far. With one, the
prompt runs once to fill each layer's cache (the "prefill"), then each new token runs alone, its query attending to
the cached keys and values. Because of the causal mask the two compute the same numbers, so they choose the same
tokens; :func:`decode` returns the logits of every step so that a test can compare them.

==================  =============================================================================================
``cache=``          what each layer keeps
==================  =============================================================================================
``"none"``          nothing: recompute everything for every token
``"preallocated"``  :class:`~attention_lab.KVCache` sized for prompt + new tokens, filled in place
``"concat"``        :class:`~attention_lab.ConcatKVCache`, grown by ``torch.cat`` (copies the cache at every step)
``"sliding"``       :class:`~attention_lab.SlidingWindowKVCache` of the last ``window`` positions: constant memory,
                    and each token sees only the last ``window`` tokens (sliding-window attention)
==================  =============================================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .._validation import check_choice, check_positive_int, check_tensor, fail
from ..generation.kv_cache import ConcatKVCache, KVCache, SlidingWindowKVCache

__all__ = ["CACHES", "Decoded", "decode", "forward_with_cache", "make_caches", "next_token_timers"]

CACHES = ("none", "preallocated", "concat", "sliding")


@dataclass(frozen=True)
class Decoded:
    """What :func:`decode` produced: the prompt followed by the new tokens, and the logits each was chosen from.

    Shape: tokens ``(b, n + new)``, logits ``(b, new, vocab)``.
    """

    tokens: torch.Tensor
    logits: torch.Tensor


def _kv_layout(model: nn.Module) -> list[tuple[int, int]]:
    """(num_kv_heads, head_dim) of each layer's attention."""
    name = model.config.attention.name
    if name != "softmax":
        fail("make_caches", f"a KV cache holds the keys and values of softmax attention; this model was built with "
                            f"attention={name!r}, whose layers keep no such cache; decode it with cache='none' "
                            f"(generate(..., use_cache=False)) or build it with attention='softmax'")
    return [(model.config.num_kv_heads, layer.attn.head_dim) for layer in model.layers]


def make_caches(model: nn.Module, cache: str, batch_size: int, max_len: int, *, window: int | None = None
                ) -> list:
    """One empty cache per layer of ``model``, of the kind ``cache`` names (see the module docstring).

    Shape: -> a list with one cache per layer.
    """
    fn = "make_caches"
    check_choice(fn, "cache", cache, CACHES[1:])
    if cache == "sliding":
        if window is None:
            fail(fn, "cache='sliding' needs window=, the number of positions it keeps (e.g. window=64)")
        check_positive_int(fn, "window", window)
    elif window is not None:
        fail(fn, f"window applies only to cache='sliding', got window={window!r} with cache={cache!r}")
    weight = model.token_embedding.weight
    options = dict(dtype=weight.dtype, device=weight.device)
    caches = []
    for num_kv_heads, head_dim in _kv_layout(model):
        if cache == "preallocated":
            caches.append(KVCache(batch_size, num_kv_heads, max_len, head_dim, **options))
        elif cache == "concat":
            caches.append(ConcatKVCache(batch_size, num_kv_heads, head_dim, **options))
        else:
            caches.append(SlidingWindowKVCache(batch_size, num_kv_heads, window, head_dim, **options))
    return caches


def forward_with_cache(model: nn.Module, tokens: torch.Tensor, caches: list) -> torch.Tensor:
    """The model on ``tokens``, which come right after the positions already in ``caches`` (appended to them).

    Shape: tokens ``(b, t)`` -> logits ``(b, t, vocab)``.
    """
    offset = caches[0].offset
    x = model.token_embedding(tokens)  # (b, t, e)
    if model.position_embedding is not None:
        positions = torch.arange(offset, offset + tokens.shape[1], device=tokens.device)  # (t,)
        x = x + model.position_embedding(positions)  # (b, t, e)
    for layer, cache in zip(model.layers, caches, strict=True):
        x, _ = layer(x, cache=cache)
    return model.head(model.final_norm(x))  # (b, t, vocab)


def _check(fn: str, model: nn.Module, prompt: object, max_new_tokens: object, cache: object) -> torch.Tensor:
    if not model.config.causal:
        fail(fn, "the model must be a decoder, built with causal=True: an encoder's earlier positions see later "
                 "tokens, so nothing it computed can be kept while generating")
    check_tensor(fn, "prompt", prompt)
    if prompt.dtype != torch.long or prompt.dim() not in (1, 2) or prompt.shape[-1] == 0:
        fail(fn, f"prompt must hold token ids (torch.long) of shape (b, n) or (n,) with n >= 1, got dtype "
                 f"{prompt.dtype} and shape {tuple(prompt.shape)}")
    check_positive_int(fn, "max_new_tokens", max_new_tokens, minimum=0)
    check_choice(fn, "cache", cache, CACHES)
    read = prompt.shape[-1] + max(max_new_tokens - 1, 0)  # the last new token is written, never read back
    if (model.config.positions == "learned" or cache == "none") and read > model.config.max_len:
        fail(fn, f"the model would read the prompt ({prompt.shape[-1]} tokens) and {max_new_tokens - 1} new ones, "
                 f"{read} positions, more than its max_len={model.config.max_len}; build the model with a larger "
                 f"max_len or generate fewer tokens")
    return prompt if prompt.dim() == 2 else prompt[None]  # (b, n)


@torch.no_grad()
def decode(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, *, cache: str = "preallocated",
           window: int | None = None) -> Decoded:
    """Greedy decoding: append ``max_new_tokens`` tokens, each the argmax of the model's next-token logits.

    ``cache`` is one of ``"none"``, ``"preallocated"``, ``"concat"``, ``"sliding"`` (with ``window``). The prompt
    may hold one sequence ``(n,)`` or a batch ``(b, n)``; the result has the same number of axes. A model with
    ``positions="rope"`` decoding with a cache may run past ``max_len``: it has no table of positions to outgrow.

    Shape: prompt ``(b, n)`` -> tokens ``(b, n + new)``, logits ``(b, new, vocab)``.
    """
    fn = "decode"
    tokens = _check(fn, model, prompt, max_new_tokens, cache)  # (b, n)
    one_sequence = prompt.dim() == 1
    chosen, logits = [], []
    if cache == "none":
        for _ in range(max_new_tokens):
            step = model(torch.cat([tokens, *chosen], dim=1))[:, -1]  # the whole sequence again, (b, vocab)
            logits.append(step)
            chosen.append(step.argmax(-1, keepdim=True))  # (b, 1)
    elif max_new_tokens:
        caches = make_caches(model, cache, tokens.shape[0], tokens.shape[1] + max_new_tokens - 1, window=window)
        step = forward_with_cache(model, tokens, caches)[:, -1]  # the prompt once, (b, vocab)
        for index in range(max_new_tokens):
            logits.append(step)
            chosen.append(step.argmax(-1, keepdim=True))  # (b, 1)
            if index + 1 < max_new_tokens:
                step = forward_with_cache(model, chosen[-1], caches)[:, -1]  # one new token, (b, vocab)
    out = torch.cat([tokens, *chosen], dim=1)  # (b, n + new)
    vocab = model.head.out_features
    steps = torch.stack(logits, dim=1) if logits else out.new_zeros(out.shape[0], 0, vocab, dtype=torch.float32)
    if one_sequence:
        return Decoded(out[0], steps[0])
    return Decoded(out, steps)


def next_token_timers(model: nn.Module, context: int, *, batch_size: int = 1, seed: int = 0
                      ) -> dict[str, Callable[[], torch.Tensor]]:
    """Zero-argument callables that each compute the next token's logits after ``context`` random tokens.

    ``"recompute"`` runs the model over all ``context`` tokens (what decoding without a cache does for every token);
    ``"pre-allocated cache"`` and ``"concatenated cache"`` run one token after a cache already holding
    ``context - 1`` positions and then crop the cache back, so each call does the same work. For
    :func:`attention_lab.measure.timing.compare`: tokens per second at this context = 1 / time per call.

    Shape: -> a dict of name -> callable returning logits ``(b, 1 or context, vocab)``.
    """
    fn = "next_token_timers"
    check_positive_int(fn, "context", context, minimum=2)
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (batch_size, context), generator=generator)  # (b, context)
    tokens = tokens.to(model.token_embedding.weight.device)
    _check(fn, model, tokens, 0, "none")  # the recompute timer runs the model on all of them
    timers: dict[str, Callable[[], torch.Tensor]] = {}

    @torch.no_grad()
    def recompute() -> torch.Tensor:
        return model(tokens)

    timers["recompute"] = recompute
    for name, kind in (("pre-allocated cache", "preallocated"), ("concatenated cache", "concat")):
        caches = make_caches(model, kind, batch_size, context)
        with torch.no_grad():
            forward_with_cache(model, tokens[:, :-1], caches)  # the context, minus the token each call adds

        @torch.no_grad()
        def one_token(caches: list = caches) -> torch.Tensor:
            logits = forward_with_cache(model, tokens[:, -1:], caches)  # (b, 1, vocab)
            for cache in caches:
                cache.crop(context - 1)
            return logits

        timers[name] = one_token
    return timers
