"""A tiny Transformer built from the library's own :class:`~attention_lab.MultiHeadAttention`.

Token and learned position embeddings, ``num_layers`` blocks of (multi-head self-attention, feed-forward), each
wrapped in a residual connection with LayerNorm (层归一化) placed

* ``norm="pre"``: before each sublayer, ``x + f(LN(x))`` (GPT-2 and most models since; a final LayerNorm follows),
* ``norm="post"``: after the residual sum, ``LN(x + f(x))`` (the original Transformer, and the advice "put LayerNorm
  right after the attention layer" of the article the lessons follow),
* ``norm="none"``: no normalisation at all (for comparison).

``causal=True`` lets position i attend only to positions j <= i (a decoder); the default lets every position see
the whole sequence (an encoder), which is what the toy tasks in :mod:`attention_lab.models.tasks` need.
``attention=`` picks the blocks' attention (softmax by default; the efficient family by name, see
:mod:`attention_lab.models.attention_choice`).

``positions="rope"`` replaces the learned position embedding by rotary positions inside attention, and
``num_kv_heads`` shares key/value heads between groups of query heads (:class:`~attention_lab.GroupedQueryAttention`);
a decoder generates greedily with :meth:`TinyTransformer.generate`, with or without a KV cache
(:mod:`attention_lab.models.generate`).
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import (
    check_bool,
    check_choice,
    check_heads_divide,
    check_positive_int,
    check_tensor,
    fail,
)
from ..core.masks import causal_mask
from ..core.multihead import MultiHeadAttention
from ..generation.grouped import GroupedQueryAttention, grouped_self_attention
from .attention_choice import AttentionSpec, _as_spec, build_attention
from .generate import decode

__all__ = ["NORMS", "POSITIONS", "TinyTransformer", "TransformerBlock"]

NORMS = ("pre", "post", "none")
POSITIONS = ("learned", "rope")


def _norm(kind: str, d_model: int) -> nn.Module:
    return nn.Identity() if kind == "none" else nn.LayerNorm(d_model)


class TransformerBlock(nn.Module):
    """One layer: self-attention then a feed-forward network, each with a residual and LayerNorm per ``norm``.

    ``attention`` replaces the default ``MultiHeadAttention(d_model, num_heads)``; with a ``cache`` (a KV cache of
    :mod:`attention_lab.generation`) the block attends causally after the cached positions.

    Shape: x ``(b, i, e)``, mask broadcastable to ``(b, h, i, j)`` -> x ``(b, i, e)``, weights ``(b, h, i, j)``
        or ``None``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm: str, attention: nn.Module | None = None
                 ) -> None:
        super().__init__()
        self.norm = norm
        self.attn = MultiHeadAttention(d_model, num_heads) if attention is None else attention
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = _norm(norm, d_model)
        self.norm2 = _norm(norm, d_model)

    def _attend(self, x: torch.Tensor, mask: torch.Tensor | None, need_weights: bool, cache: object
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if cache is None and not isinstance(self.attn, GroupedQueryAttention):
            return self.attn(x, mask=mask, need_weights=need_weights)  # MultiHeadAttention or the efficient family
        # the mask carries causality without a cache; a cache means decoding, always causal
        return grouped_self_attention(self.attn, x, cache=cache, causal=cache is not None, mask=mask,
                                      need_weights=need_weights)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False, *,
                cache: object = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.norm == "pre":
            attended, weights = self._attend(self.norm1(x), mask, need_weights, cache)
            x = x + attended
            return x + self.ff(self.norm2(x)), weights
        attended, weights = self._attend(x, mask, need_weights, cache)
        x = self.norm1(x + attended)  # identity when norm == "none"
        return self.norm2(x + self.ff(x)), weights


class TinyTransformer(nn.Module):
    """A small Transformer encoder (or decoder with ``causal=True``) that writes one prediction per position.

    ``forward(tokens, return_attention=False, *, head_mask=None)`` returns the logits, and with
    ``return_attention=True`` also every layer's per-head attention weights. ``head_mask`` (``(layers, h)``, bool,
    True = keep) switches heads off: a switched-off head attends to nothing, so it contributes zero before the
    output projection (ablation).

    ``attention`` is ``"softmax"`` (the default), the name of another attention in
    :data:`~attention_lab.models.attention_choice.ATTENTIONS`, or an ``attention_spec(name, **options)``.

    Attributes: ``token_embedding``, ``position_embedding``, ``layers`` (a ``ModuleList`` of
    :class:`TransformerBlock`), ``final_norm`` (LayerNorm for ``norm="pre"``, identity otherwise), ``head``.

    ``positions="rope"`` drops ``position_embedding`` (it is None) and rotates queries and keys instead;
    ``num_kv_heads`` (a divisor of ``num_heads``) gives the layers that many key/value heads. Either builds the
    layers from :class:`~attention_lab.GroupedQueryAttention` (no biases); the defaults build today's model, with
    the same parameters drawn in the same order. ``generate(prompt, max_new_tokens, *, use_cache=True)`` decodes
    greedily (``causal=True`` models only).

    Shape: tokens ``(b, i)`` (integers, ``i <= max_len``) -> logits ``(b, i, vocab_size)``; attention
        ``(layers, b, h, i, j)``.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, *, max_len: int,
                 norm: str = "pre", causal: bool = False, d_ff: int | None = None, positions: str = "learned",
                 num_kv_heads: int | None = None, attention: str | AttentionSpec = "softmax") -> None:
        super().__init__()
        fn = "TinyTransformer"
        check_positive_int(fn, "vocab_size", vocab_size)
        check_positive_int(fn, "d_model", d_model)
        check_positive_int(fn, "num_heads", num_heads)
        check_positive_int(fn, "num_layers", num_layers)
        check_positive_int(fn, "max_len", max_len)
        check_choice(fn, "norm", norm, NORMS,
                     hint="'pre' puts LayerNorm before each sublayer, 'post' after the residual sum")
        check_bool(fn, "causal", causal)
        d_ff = 4 * d_model if d_ff is None else check_positive_int(fn, "d_ff", d_ff)
        check_heads_divide(fn, "d_model", d_model, num_heads)
        check_choice(fn, "positions", positions, POSITIONS,
                     hint="'learned' adds a learned embedding per position, 'rope' rotates queries and keys")
        if num_kv_heads is not None:
            check_positive_int(fn, "num_kv_heads", num_kv_heads)
            if num_heads % num_kv_heads:
                fail(fn, f"num_heads must be a multiple of num_kv_heads, got num_heads={num_heads} and "
                         f"num_kv_heads={num_kv_heads}; choose num_kv_heads from the divisors of {num_heads}: "
                         f"{[k for k in range(1, num_heads + 1) if num_heads % k == 0]}")
        if positions == "rope" and (d_model // num_heads) % 2:
            fail(fn, f"positions='rope' rotates pairs of features, so d_model / num_heads must be even, got "
                     f"d_model={d_model} and num_heads={num_heads} (head_dim {d_model // num_heads})")
        self.vocab_size, self.d_model, self.num_heads, self.num_layers = vocab_size, d_model, num_heads, num_layers
        self.max_len, self.norm, self.causal = max_len, norm, causal
        self.positions = positions
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model) if positions == "learned" else None
        spec = _as_spec(fn, attention)
        if spec.name != "softmax" and (positions != "learned" or num_kv_heads is not None):
            fail(fn, f"attention={spec.name!r} works with learned positions and one key/value head per query head, "
                     f"got positions={positions!r} and num_kv_heads={num_kv_heads}; use attention='softmax' for "
                     f"rope or grouped heads")
        self.attention = attention

        def make_attention() -> nn.Module | None:
            if spec.name != "softmax":
                return build_attention(spec, d_model, num_heads, max_len=max_len, causal=causal, fn=fn)
            if positions == "learned" and num_kv_heads is None:
                return None  # the block's default MultiHeadAttention
            return GroupedQueryAttention(d_model, num_heads, self.num_kv_heads, bias=True, rope=positions == "rope")

        self.layers = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff, norm, make_attention())
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size)

    def extra_repr(self) -> str:
        extra = "" if self.positions == "learned" else f", positions={self.positions!r}"
        extra += "" if self.num_kv_heads == self.num_heads else f", num_kv_heads={self.num_kv_heads}"
        return f"norm={self.norm!r}, causal={self.causal}" + extra

    def _check_tokens(self, tokens: object) -> torch.Tensor:
        fn = "TinyTransformer.forward"
        check_tensor(fn, "tokens", tokens)
        if tokens.dtype != torch.long:
            fail(fn, f"tokens must be integer ids (torch.long), got dtype {tokens.dtype}; convert with "
                     f"tokens.long()", TypeError)
        if tokens.dim() != 2:
            fail(fn, f"tokens must have shape (b, i), got shape {tuple(tokens.shape)}; for one sequence use "
                     f"tokens.unsqueeze(0)")
        if not 1 <= tokens.shape[1] <= self.max_len:
            fail(fn, f"tokens must have 1 to max_len={self.max_len} positions, got {tokens.shape[1]}; build the "
                     f"model with a larger max_len or shorten the sequences")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            fail(fn, f"token ids must lie in [0, vocab_size={self.vocab_size}), got ids from {int(tokens.min())} "
                     f"to {int(tokens.max())}")
        return tokens

    def _mask(self, n: int, head_mask: torch.Tensor | None, layer: int, device: torch.device
              ) -> torch.Tensor | None:
        mask = causal_mask(n, device=device) if self.causal else None  # (i, j)
        if head_mask is None:
            return mask
        keep = head_mask[layer].to(device)[None, :, None, None]  # (1, h, 1, 1)
        return keep if mask is None else keep & mask  # (1, h, i, j)

    def forward(self, tokens: torch.Tensor, return_attention: bool = False, *,
                head_mask: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits for every position (and, if asked, the attention weights of every layer and head).

        Shape: tokens ``(b, i)``, head_mask ``(layers, h)`` bool -> logits ``(b, i, vocab_size)``, attention
            ``(layers, b, h, i, j)``.
        """
        tokens = self._check_tokens(tokens)
        if head_mask is not None:
            check_tensor("TinyTransformer.forward", "head_mask", head_mask)
            if head_mask.dtype != torch.bool or tuple(head_mask.shape) != (self.num_layers, self.num_heads):
                fail("TinyTransformer.forward", f"head_mask must be a bool tensor of shape (layers, h) = "
                     f"({self.num_layers}, {self.num_heads}) with True = keep the head, got dtype "
                     f"{head_mask.dtype} and shape {tuple(head_mask.shape)}")
        n = tokens.shape[1]
        x = self.token_embedding(tokens)  # (b, i, e)
        if self.position_embedding is not None:  # with positions="rope" the attention layers rotate q and k instead
            x = x + self.position_embedding(torch.arange(n, device=tokens.device))  # (b, i, e)
        attention = []
        for index, layer in enumerate(self.layers):
            x, weights = layer(x, self._mask(n, head_mask, index, tokens.device), need_weights=return_attention)
            attention.append(weights)
        logits = self.head(self.final_norm(x))  # (b, i, vocab)
        if return_attention:
            return logits, torch.stack(attention)  # (layers, b, h, i, j)
        return logits

    def generate(self, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding: the prompt followed by ``max_new_tokens`` tokens, each the most likely next one.

        ``use_cache=True`` keeps every layer's keys and values in a pre-allocated
        :class:`~attention_lab.KVCache` and runs each new token alone; ``use_cache=False`` runs the whole sequence
        again for every token. Both give the same tokens. Only for models built with ``causal=True``. See
        :func:`attention_lab.models.generate.decode` for the other caches and the logits of every step.

        Shape: prompt ``(b, n)`` (or ``(n,)``) token ids -> ``(b, n + max_new_tokens)`` (or ``(n + max_new_tokens,)``).
        """
        if not isinstance(use_cache, bool):
            fail("TinyTransformer.generate", f"use_cache must be True or False, got {type(use_cache).__name__} "
                                             f"{use_cache!r}", TypeError)
        return decode(self, prompt, max_new_tokens, cache="preallocated" if use_cache else "none").tokens
