"""A tiny Transformer whose blocks hold one attention module each, from one config.

``TinyTransformer(TransformerConfig(vocab_size=..., max_len=..., d_model=32, num_heads=2, num_layers=2))``: token
and learned position embeddings, ``num_layers`` blocks of (multi-head self-attention, feed-forward), each wrapped in
a residual connection with LayerNorm (层归一化) placed

* ``norm="pre"``: before each sublayer, ``x + f(LN(x))`` (GPT-2 and most models since; a final LayerNorm follows),
* ``norm="post"``: after the residual sum, ``LN(x + f(x))`` (the original Transformer, and the advice "put LayerNorm
  right after the attention layer" of the article the lessons follow),
* ``norm="none"``: no normalisation at all (for comparison).

``causal=True`` lets position i attend only to positions j <= i (a decoder); the default lets every position see
the whole sequence (an encoder), which is what the toy tasks in :mod:`attention_lab.models.tasks` need.
``attention=`` picks the blocks' attention from :mod:`attention_lab.models.attention_choice`: softmax by default
(:class:`~attention_lab.GroupedQueryAttention`; ``attention_spec("softmax", positions="rope", num_kv_heads=2)``
rotates queries and keys instead of a learned position embedding and shares key/value heads), the efficient family
by name. A decoder runs new tokens after the ones its caches hold with ``model(tokens, caches=caches)`` and
generates greedily with :meth:`TinyTransformer.generate` (:mod:`attention_lab.models.generate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .._validation import check_bool, check_choice, check_positive_ints, check_tensor, check_token_ids, fail
from ..core.multihead import MultiHeadAttention
from ..generation.grouped import CACHE_KINDS, GroupedQueryAttention
from .attention_choice import ATTENTION_TABLE, AttentionSpec, build_attention, check_attention, check_windows
from .generate import _decode

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
    other attentions). ``windows``: None, or one per layer, an int for a local layer (its window and its cache's size),
    None for a global one (:func:`~attention_lab.interleaved_windows`). Change one field with ``dataclasses.replace``.

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
    windows: tuple[int | None, ...] | None = None

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
        if self.windows is not None:
            object.__setattr__(self, "windows", check_windows(fn, self.windows, self.num_layers, spec.name))
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

    ``attention`` is any module of :data:`~attention_lab.models.attention_choice.ATTENTION_TABLE` (the default: the
    softmax one, an encoder's); the block hands it ``mask``, ``need_weights`` and ``cache`` as they come.

    Shape: x ``(b, i, e)``, mask broadcastable to ``(b, h, i, j)`` -> x ``(b, i, e)``, weights ``(b, h, i, j)``
        or ``None``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm: str, attention: nn.Module | None = None
                 ) -> None:
        super().__init__()
        self.norm = norm
        self.attn = (GroupedQueryAttention.from_multihead(MultiHeadAttention(d_model, num_heads), causal=False)
                     if attention is None else attention)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = _norm(norm, d_model)
        self.norm2 = _norm(norm, d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False, *,
                cache: object = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.norm == "pre":
            attended, weights = self.attn(self.norm1(x), mask=mask, need_weights=need_weights, cache=cache)
            x = x + attended
            return x + self.ff(self.norm2(x)), weights
        attended, weights = self.attn(x, mask=mask, need_weights=need_weights, cache=cache)
        x = self.norm1(x + attended)  # identity when norm == "none"
        return self.norm2(x + self.ff(x)), weights


class TinyTransformer(nn.Module):
    """A small Transformer encoder (or decoder with ``causal=True``) that writes one prediction per position.

    Built from a :class:`TransformerConfig`, kept as ``config``. ``forward(tokens, return_attention=False, *,
    head_mask=None, caches=None)`` returns the logits, and with ``return_attention=True`` also every layer's per-head
    attention weights. ``head_mask`` (``(layers, h)``, bool, True = keep) switches heads off: a switched-off head
    attends to nothing, so it contributes zero before the output projection (ablation). ``caches``
    (:meth:`new_caches`) continue after the positions they hold. ``generate(prompt, max_new_tokens, *,
    use_cache=True)`` decodes greedily (``causal=True`` models only).

    Attributes: ``config``, ``num_layers`` and ``num_heads`` (the config's), ``token_embedding``,
    ``position_embedding`` (None with rotary positions), ``layers`` (a ``ModuleList`` of :class:`TransformerBlock`,
    each holding its attention as ``attn``), ``final_norm`` (LayerNorm for ``norm="pre"``, identity otherwise),
    ``head``.

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
                                             causal=config.causal, fn="TinyTransformer", window=window))
            for window in config.windows or (None,) * config.num_layers)
        self.final_norm = nn.LayerNorm(e) if config.norm == "pre" else nn.Identity()
        self.head = nn.Linear(e, config.vocab_size)

    def extra_repr(self) -> str:
        c = self.config
        extra = "" if c.attention.name == "softmax" else f", attention={c.attention.name!r}"
        extra += "" if c.positions == "learned" else f", positions={c.positions!r}"
        extra += "" if c.num_kv_heads == c.num_heads else f", num_kv_heads={c.num_kv_heads}"
        return f"norm={c.norm!r}, causal={c.causal}" + extra

    def _check_tokens(self, fn: str, tokens: object, offset: int) -> torch.Tensor:
        check_token_ids(fn, "tokens", check_tensor(fn, "tokens", tokens), self.config.vocab_size)
        if tokens.dim() != 2:
            fail(fn, f"tokens must have shape (b, i), got shape {tuple(tokens.shape)}; for one sequence use "
                     f"tokens.unsqueeze(0)")
        max_len, n = self.config.max_len, tokens.shape[1]
        if not 1 <= n <= max_len:
            fail(fn, f"tokens must have 1 to max_len={max_len} positions, got {n}; build the model with a larger "
                     f"max_len or shorten the sequences")
        if self.position_embedding is not None and offset + n > max_len:
            fail(fn, f"after {offset} cached positions, {n} tokens would reach position {offset + n - 1}, past the "
                     f"learned positions 0..{max_len - 1}; start new caches from the last tokens (generate() slides "
                     f"its context so), or build the model with a larger max_len or positions='rope'")
        return tokens

    def _check_keeps_cache(self, fn: str) -> None:
        name = self.config.attention.name
        if not self.config.causal or ATTENTION_TABLE[name].cache is None:
            fail(fn, f"the model must keep a cache (a decoder with attention='softmax' or 'linear'), got "
                     f"{'an encoder (causal=False)' if not self.config.causal else f'attention={name!r}'}; run the "
                     f"whole sequence, or build a decoder with attention='softmax' or 'linear'")

    def _check_caches(self, fn: str, caches: object, head_mask: object, return_attention: bool) -> int:
        """The position the cached tokens start at (0 without caches), after checking what a cached forward needs."""
        if caches is None:
            return 0
        self._check_keeps_cache(fn)
        if not isinstance(caches, (list, tuple)) or len(caches) != self.num_layers:
            fail(fn, f"caches must be a list of one cache per layer ({self.num_layers}), got "
                     f"{len(caches) if isinstance(caches, (list, tuple)) else type(caches).__name__}; make them with "
                     f"model.new_caches(batch_size, max_len)", TypeError)
        offsets = {getattr(cache, "offset", None) for cache in caches}
        if len(offsets) != 1 or not isinstance(min(offsets, key=str), int):
            fail(fn, f"each layer's cache must hold the same positions, got offsets {sorted(map(str, offsets))}; make "
                     f"them together with model.new_caches(batch_size, max_len)")
        if head_mask is not None or return_attention:
            fail(fn, "a cached forward takes no head_mask and returns no attention weights; drop caches= for those")
        return offsets.pop()

    def _head_masks(self, fn: str, head_mask: torch.Tensor | None, device: torch.device) -> list:
        """Each layer's mask: None, or the heads it keeps, ``(1, h, 1, 1)`` (the attention adds causality)."""
        if head_mask is None:
            return [None] * self.num_layers
        name = self.config.attention.name
        if not ATTENTION_TABLE[name].mask:
            fail(fn, f"attention={name!r} takes no mask, so no head_mask; head_mask needs attention='softmax'")
        check_tensor(fn, "head_mask", head_mask)
        if head_mask.dtype != torch.bool or tuple(head_mask.shape) != (self.num_layers, self.num_heads):
            fail(fn, f"head_mask must be a bool tensor of shape (layers, h) = ({self.num_layers}, {self.num_heads}) "
                     f"with True = keep the head, got dtype {head_mask.dtype} and shape {tuple(head_mask.shape)}")
        return list(head_mask.to(device)[:, None, :, None, None])  # (1, h, 1, 1) per layer

    def forward(self, tokens: torch.Tensor, return_attention: bool = False, *,
                head_mask: torch.Tensor | None = None, caches: list | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits for every position (and, if asked, the attention weights of every layer and head).

        With ``caches`` (one per layer, from :meth:`new_caches`) the tokens come right after the positions already
        cached: their positions continue from the caches' ``offset`` and each layer appends to its cache. A call
        that fails at any layer leaves every cache as it was.

        Shape: tokens ``(b, i)``, head_mask ``(layers, h)`` bool -> logits ``(b, i, vocab_size)``, attention
            ``(layers, b, h, i, j)``.
        """
        fn = "TinyTransformer.forward"
        check_bool(fn, "return_attention", return_attention)
        offset = self._check_caches(fn, caches, head_mask, return_attention)
        tokens = self._check_tokens(fn, tokens, offset)
        name = self.config.attention.name
        if return_attention and not ATTENTION_TABLE[name].weights:
            fail(fn, f"attention={name!r} computes no i x j weights to return; return_attention=True needs "
                     f"attention='softmax'")
        masks = self._head_masks(fn, head_mask, tokens.device)
        n = tokens.shape[1]
        x = self.token_embedding(tokens)  # (b, i, e)
        if self.position_embedding is not None:  # with positions="rope" the attention layers rotate q and k instead
            x = x + self.position_embedding(torch.arange(offset, offset + n, device=tokens.device))  # (b, i, e)
        saved = [] if caches is None else [cache.snapshot() for cache in caches]
        caches, attention = caches or [None] * self.num_layers, []
        try:
            for layer, mask, cache in zip(self.layers, masks, caches):
                x, weights = layer(x, mask, return_attention, cache=cache)
                attention.append(weights)
        except Exception:
            for cache, state in zip(caches, saved):  # all or nothing: every cache as it was before the call
                cache.restore(state)
            raise
        logits = self.head(self.final_norm(x))  # (b, i, vocab)
        if return_attention:
            return logits, torch.stack(attention)  # (layers, b, h, i, j)
        return logits

    def new_caches(self, batch_size: int, max_len: int, *, kind: str = "preallocated", window: int | None = None
                   ) -> list:
        """One empty cache per layer for ``forward(tokens, caches=...)``, made by its attention's ``new_cache``:
        softmax keeps keys and values (``kind`` ``"preallocated"`` for ``max_len`` positions, ``"concat"``, or
        ``"sliding"`` for the last ``window``), linear attention its running state S, z. With learned positions,
        ``max_len`` is at most the model's.

        Shape: -> a list with one cache per layer.
        """
        fn = "TinyTransformer.new_caches"
        check_positive_ints(fn, batch_size=batch_size, max_len=max_len)
        check_choice(fn, "kind", kind, CACHE_KINDS)
        self._check_keeps_cache(fn)
        if self.position_embedding is not None and max_len > self.config.max_len:
            fail(fn, f"max_len must be at most the model's max_len={self.config.max_len} (its learned positions end "
                     f"there), got max_len={max_len}; pass max_len={self.config.max_len} or less, or build the model "
                     f"with a larger max_len")
        return [layer.attn.new_cache(batch_size, max_len, kind=kind, window=window) for layer in self.layers]

    def generate(self, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding: the prompt followed by ``max_new_tokens`` tokens, each the most likely next one.

        Every decoder generates. With ``use_cache=True`` each new token runs alone after what the layers keep:
        softmax attention its keys and values (a pre-allocated :class:`~attention_lab.KVCache`), linear attention
        its running state S, z (constant in size); the others keep nothing and run the whole sequence again, as
        ``use_cache=False`` does for all. Past ``max_len`` the context slides: the model reads the last ``max_len``
        tokens (a rotary-position model with a cache keeps every cached one). See
        :func:`attention_lab.models.generate.decode` for the other caches and the logits of every step.

        Shape: prompt ``(b, n)`` (or ``(n,)``) token ids -> ``(b, n + max_new_tokens)`` (or ``(n + max_new_tokens,)``).
        """
        fn = "TinyTransformer.generate"
        check_bool(fn, "use_cache", use_cache)
        keeps = self.config.causal and ATTENTION_TABLE[self.config.attention.name].cache is not None
        return _decode(fn, self, prompt, max_new_tokens, "preallocated" if use_cache and keeps else "none", None).tokens
