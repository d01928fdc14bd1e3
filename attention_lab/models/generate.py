"""Greedy decoding with a :class:`~attention_lab.models.transformer.TinyTransformer` decoder, with or without a cache.

Without a cache (``cache="none"``), every new token runs the model over the whole sequence so far. With one, the
prompt runs once to fill each layer's cache (the "prefill"), then each new token runs alone, ``model(token,
caches=caches)``, its query attending to what the layers kept. Because of the causal mask the two compute the same
numbers, so they choose the same tokens; :func:`decode` returns the logits of every step so that a test can compare
them. The model reads at most ``max_len`` tokens at once: past that the context slides (the last ``max_len`` tokens
are run again), except that a model with rotary positions keeps decoding with its cache.

==================  =============================================================================================
``cache=``          what each layer keeps
==================  =============================================================================================
``"none"``          nothing: recompute everything for every token
``"preallocated"``  softmax attention: a :class:`~attention_lab.KVCache` sized for prompt + new tokens, filled in
                    place; linear attention: its running state S, z (:class:`~attention_lab.LinearAttentionState`)
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

from .._validation import check_choice, check_positive_int, check_tensor, check_token_ids, fail
from ..generation.grouped import CACHE_KINDS
from .attention_choice import ATTENTION_TABLE

__all__ = ["CACHES", "Decoded", "decode", "next_token_timers"]

CACHES = ("none", *CACHE_KINDS)


@dataclass(frozen=True)
class Decoded:
    """What :func:`decode` produced: the prompt followed by the new tokens, and the logits each was chosen from.

    Shape: tokens ``(b, n + new)``, logits ``(b, new, vocab)``.
    """

    tokens: torch.Tensor
    logits: torch.Tensor


def _check(fn: str, model: nn.Module, prompt: object, max_new_tokens: object, cache: object, window: object
           ) -> torch.Tensor:
    if not isinstance(model, nn.Module) or not hasattr(model, "config"):
        fail(fn, f"model must be a TinyTransformer (attention_lab.models.transformer), got {type(model).__name__}; "
                 f"pass the model itself", TypeError)
    if not model.config.causal:
        fail(fn, "the model must be a decoder, built with causal=True: an encoder's earlier positions see later "
                 "tokens, so nothing it computed can be kept while generating, got causal=False; build the model "
                 "with TransformerConfig(..., causal=True)")
    check_tensor(fn, "prompt", prompt)
    if prompt.dtype != torch.long or prompt.dim() not in (1, 2) or prompt.shape[-1] == 0:
        fail(fn, f"prompt must hold token ids (torch.long) of shape (b, n) or (n,) with n >= 1, got dtype "
                 f"{prompt.dtype} and shape {tuple(prompt.shape)}")
    check_token_ids(fn, "prompt", prompt, model.config.vocab_size)
    check_positive_int(fn, "max_new_tokens", max_new_tokens, minimum=0)
    check_choice(fn, "cache", cache, CACHES)
    name = model.config.attention.name
    if cache != "none" and ATTENTION_TABLE[name].cache is None:
        fail(fn, f"attention={name!r} keeps no cache, got cache={cache!r}; decode it with cache='none' (each token "
                 f"runs the whole sequence again, as generate() does for it)")
    if (cache == "sliding") != (window is not None):
        fail(fn, f"window= is needed with cache='sliding' and only then, got cache={cache!r} and window={window!r}")
    if window is not None:
        check_positive_int(fn, "window", window)
    return prompt if prompt.dim() == 2 else prompt[None]  # (b, n)


@torch.no_grad()
def _decode(fn: str, model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, cache: str, window: int | None
            ) -> Decoded:
    """:func:`decode`, its errors naming ``fn``, the function the user called."""
    tokens = _check(fn, model, prompt, max_new_tokens, cache, window)  # (b, n)
    limit, learned = model.config.max_len, model.config.positions == "learned"
    new, caches, logits = tokens[:, -limit:], None, []  # what the next step runs: the context, then one token
    if cache != "none" and max_new_tokens:
        length = new.shape[1] + max_new_tokens - 1  # the last new token is written, never read back
        caches = model.new_caches(tokens.shape[0], min(length, limit) if learned else length, kind=cache,
                                  window=window)
    for _ in range(max_new_tokens):
        if caches is not None and learned and caches[0].offset + new.shape[1] > limit:
            caches = None  # learned positions used up: from here on the last max_len tokens run again
        step = model(tokens[:, -limit:])[:, -1] if caches is None else model(new, caches=caches)[:, -1]  # (b, vocab)
        logits.append(step)
        new = step.argmax(-1, keepdim=True)  # (b, 1)
        tokens = torch.cat([tokens, new], dim=1)  # (b, n + steps)
    vocab = model.head.out_features
    steps = torch.stack(logits, dim=1) if logits else tokens.new_zeros(len(tokens), 0, vocab, dtype=torch.float32)
    return Decoded(tokens[0], steps[0]) if prompt.dim() == 1 else Decoded(tokens, steps)


def decode(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, *, cache: str = "preallocated",
           window: int | None = None) -> Decoded:
    """Greedy decoding: append ``max_new_tokens`` tokens, each the argmax of the model's next-token logits.

    ``cache`` is one of ``"none"``, ``"preallocated"``, ``"concat"``, ``"sliding"`` (with ``window``); an attention
    that keeps no cache takes ``"none"`` only. The prompt may hold one sequence ``(n,)`` or a batch ``(b, n)``; the
    result has the same number of axes. Past ``max_len`` the context slides (see the module docstring).

    Shape: prompt ``(b, n)`` -> tokens ``(b, n + new)``, logits ``(b, new, vocab)``.
    """
    return _decode("decode", model, prompt, max_new_tokens, cache, window)


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
    _check(fn, model, tokens, 0, "preallocated", None)
    if context > model.config.max_len:
        fail(fn, f"context must be at most the model's max_len={model.config.max_len} (the recompute timer runs it "
                 f"whole), got context={context}")
    timers: dict[str, Callable[[], torch.Tensor]] = {"recompute": torch.no_grad()(lambda: model(tokens))}
    for name, kind in (("pre-allocated cache", "preallocated"), ("concatenated cache", "concat")):
        caches = model.new_caches(batch_size, context, kind=kind)
        with torch.no_grad():
            model(tokens[:, :-1], caches=caches)  # the context, minus the token each call adds

        @torch.no_grad()
        def one_token(caches: list = caches) -> torch.Tensor:
            logits = model(tokens[:, -1:], caches=caches)  # (b, 1, vocab)
            for cache in caches:
                cache.crop(context - 1)
            return logits

        timers[name] = one_token
    return timers
