"""A tiny Transformer built from the library's own :class:`~attention_lab.MultiHeadAttention`, from one config.

``TinyTransformer(TransformerConfig(vocab_size=..., max_len=..., d_model=32, num_heads=2, num_layers=2))``: token
and learned position embeddings, ``num_layers`` blocks of (multi-head self-attention, feed-forward), each wrapped in
a residual connection with LayerNorm (层归一化) placed

* ``norm="pre"``: before each sublayer, ``x + f(LN(x))`` (GPT-2 and most models since; a final LayerNorm follows),
* ``norm="post"``: after the residual sum, ``LN(x + f(x))`` (the original Transformer, and the advice "put LayerNorm
  right after the attention layer" of the article the lessons follow),
* ``norm="none"``: no normalisation at all (for comparison).

``causal=True`` lets position i attend only to positions j <= i (a decoder); the default lets every position see
the whole sequence (an encoder), which is what the toy tasks in :mod:`attention_lab.models.tasks` need.
``attention=`` picks the blocks' attention and all that belongs to it (:mod:`attention_lab.models.attention_choice`):
softmax by default, the efficient family by name, and for softmax where positions come from and how many key/value
heads its cache keeps: ``attention_spec("softmax", positions="rope", num_kv_heads=2)`` drops the learned position
embedding for rotary positions and shares key/value heads between query heads
(:class:`~attention_lab.GroupedQueryAttention`). A decoder generates greedily with :meth:`TinyTransformer.generate`,
with or without a KV cache (:mod:`attention_lab.models.generate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .._validation import check_bool, check_choice, check_positive_ints, check_tensor, fail
from ..core.masks import causal_mask
from ..core.multihead import MultiHeadAttention
from ..generation.grouped import GroupedQueryAttention, grouped_self_attention
from .attention_choice import AttentionSpec, build_attention, check_attention
from .generate import decode

__all__ = ["NORMS", "TinyTransformer", "TransformerBlock", "TransformerConfig"]

NORMS = ("pre", "post", "none")


@dataclass(frozen=True, kw_only=True)
class TransformerConfig:
    """What a :class:`TinyTransformer` is made of, in one place (as nanoGPT's ``GPTConfig``), checked when it is built.

    Sizes: ``vocab_size``, ``max_len`` (the most positions a sequence may have), ``d_model`` (e), ``num_heads`` (h,
    a divisor of d_model), ``num_layers``, ``d_ff`` (the feed-forward width; None means 4 * d_model). The blocks:
    ``norm`` (``"pre"``, ``"post"`` or ``"none"``) and ``causal``. The attention: ``attention``, a name of
    :data:`~attention_lab.models.attention_choice.ATTENTIONS` or an ``attention_spec(name, **options)``; stored as
    the spec with its defaults filled in (``config.attention.options``), and ``d_ff`` as the width it stands for.
    ``positions`` and ``num_kv_heads`` read softmax attention's options (``"learned"`` and ``num_heads`` for the
    other attentions). Change one field with ``dataclasses.replace(config, norm="post")``.

    Shape: no tensors; the model it builds maps tokens ``(b, i)`` with i <= max_len to ``(b, i, vocab_size)``.
    """

    vocab_size: int
    max_len: int
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int | None = None
    norm: str = "pre"
    causal: bool = False
    attention: str | AttentionSpec = "softmax"

    def __post_init__(self) -> None:
        fn = "TransformerConfig"
        check_positive_ints(fn, vocab_size=self.vocab_size, max_len=self.max_len, d_model=self.d_model,
                            num_heads=self.num_heads, num_layers=self.num_layers)
        check_choice(fn, "norm", self.norm, NORMS,
                     hint="'pre' puts LayerNorm before each sublayer, 'post' after the residual sum")
        check_bool(fn, "causal", self.causal)
        if self.d_ff is not None:
            check_positive_ints(fn, d_ff=self.d_ff)
        spec = check_attention(fn, self.attention, self.d_model, self.num_heads, self.causal)
        object.__setattr__(self, "attention", spec)  # frozen: the resolved values, set once here
        object.__setattr__(self, "d_ff", 4 * self.d_model if self.d_ff is None else self.d_ff)

    @property
    def positions(self) -> str:
        """``"learned"`` (an embedding added to the tokens) or ``"rope"`` (queries and keys rotated)."""
        return self.attention.options.get("positions", "learned")

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads per layer: what the KV cache keeps."""
        return self.attention.options.get("num_kv_heads") or self.num_heads


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

    Built from a :class:`TransformerConfig`, kept as ``config``. ``forward(tokens, return_attention=False, *,
    head_mask=None)`` returns the logits, and with ``return_attention=True`` also every layer's per-head attention
    weights. ``head_mask`` (``(layers, h)``, bool, True = keep) switches heads off: a switched-off head attends to
    nothing, so it contributes zero before the output projection (ablation). ``generate(prompt, max_new_tokens, *,
    use_cache=True)`` decodes greedily (``causal=True`` models only).

    Attributes: ``config``, ``num_layers`` and ``num_heads`` (the config's), ``token_embedding``,
    ``position_embedding`` (None with rotary positions), ``layers`` (a ``ModuleList`` of :class:`TransformerBlock`),
    ``final_norm`` (LayerNorm for ``norm="pre"``, identity otherwise), ``head``. With the default attention the
    blocks hold :class:`~attention_lab.MultiHeadAttention`; with rotary positions or fewer key/value heads,
    :class:`~attention_lab.GroupedQueryAttention` with biases.

    Shape: tokens ``(b, i)`` (integers, ``i <= max_len``) -> logits ``(b, i, vocab_size)``; attention
        ``(layers, b, h, i, j)``.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            fail("TinyTransformer", f"expected a TransformerConfig, got {type(config).__name__}; build the model with "
                                    f"TinyTransformer(TransformerConfig(vocab_size=..., max_len=..., d_model=..., "
                                    f"num_heads=..., num_layers=...))", TypeError)
        self.config = config
        self.num_layers, self.num_heads = config.num_layers, config.num_heads
        e = config.d_model
        self.token_embedding = nn.Embedding(config.vocab_size, e)
        self.position_embedding = nn.Embedding(config.max_len, e) if config.positions == "learned" else None
        self.layers = nn.ModuleList(
            TransformerBlock(e, config.num_heads, config.d_ff, config.norm,
                             build_attention(config.attention, e, config.num_heads, max_len=config.max_len,
                                             causal=config.causal, fn="TinyTransformer"))
            for _ in range(config.num_layers))
        self.final_norm = nn.LayerNorm(e) if config.norm == "pre" else nn.Identity()
        self.head = nn.Linear(e, config.vocab_size)

    def extra_repr(self) -> str:
        c = self.config
        extra = "" if c.attention.name == "softmax" else f", attention={c.attention.name!r}"
        extra += "" if c.positions == "learned" else f", positions={c.positions!r}"
        extra += "" if c.num_kv_heads == c.num_heads else f", num_kv_heads={c.num_kv_heads}"
        return f"norm={c.norm!r}, causal={c.causal}" + extra

    def _check_tokens(self, tokens: object) -> torch.Tensor:
        fn = "TinyTransformer.forward"
        check_tensor(fn, "tokens", tokens)
        if tokens.dtype != torch.long:
            fail(fn, f"tokens must be integer ids (torch.long), got dtype {tokens.dtype}; convert with "
                     f"tokens.long()", TypeError)
        if tokens.dim() != 2:
            fail(fn, f"tokens must have shape (b, i), got shape {tuple(tokens.shape)}; for one sequence use "
                     f"tokens.unsqueeze(0)")
        if not 1 <= tokens.shape[1] <= self.config.max_len:
            fail(fn, f"tokens must have 1 to max_len={self.config.max_len} positions, got {tokens.shape[1]}; build "
                     f"the model with a larger max_len or shorten the sequences")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size):
            fail(fn, f"token ids must lie in [0, vocab_size={self.config.vocab_size}), got ids from "
                     f"{int(tokens.min())} to {int(tokens.max())}")
        return tokens

    def _mask(self, n: int, head_mask: torch.Tensor | None, layer: int, device: torch.device
              ) -> torch.Tensor | None:
        mask = causal_mask(n, device=device) if self.config.causal else None  # (i, j)
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
        check_bool("TinyTransformer.generate", "use_cache", use_cache)
        return decode(self, prompt, max_new_tokens, cache="preallocated" if use_cache else "none").tokens
