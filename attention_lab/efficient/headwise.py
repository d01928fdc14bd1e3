"""Multi-head self-attention around a head-wise attention function (逐头注意力): the layer of the efficient family.

:class:`HeadwiseAttention` holds the four projections of :class:`~attention_lab.MultiHeadAttention` (initialised the
same way, drawn in the same order) and runs a function of each head's q, k and v in place of softmax attention:
linear, Performer, top-k, cluster or block-sparse attention (lesson 10), each as a model's block can use it.

Reference: per head, the function's own plain version (:func:`attention_lab.reference.linear_attention`,
:func:`attention_lab.reference.performer_attention`, :func:`attention_lab.reference.topk_attention`, ...): the
layer adds nothing but the projections. How it differs from :class:`~attention_lab.MultiHeadAttention`: no mask and
no i x j weights (the functions apply causality themselves and keep no matrix), and a decoding state instead of a
KV cache where the function has one (linear attention's running S and z,
:class:`~attention_lab.LinearAttentionState`). What that buys: any attention of the family trains and decodes in a
model through the blocks' one call, ``forward(x, *, mask=None, need_weights=False, cache=None)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import rearrange
from torch import nn

from .._validation import check_bool, check_heads_divide, check_sequence_input, fail
from ..core.multihead import MultiHeadAttention
from .linear import LinearAttentionState

__all__ = ["HeadwiseAttention"]


class HeadwiseAttention(nn.Module):
    """Multi-head self-attention whose heads run ``attend(q, k, v)``, a function of the efficient family.

    The four projections of :class:`~attention_lab.MultiHeadAttention` (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``, initialised the same way) around a function of each head's q, k, v; ``causal`` says whether that
    function hides later keys (it does so itself). ``forward(x, *, mask=None, need_weights=False, cache=None)``
    returns ``(output, None)``: no mask, no weights, and a cache only when built with ``new_state`` (a maker of
    :class:`~attention_lab.LinearAttentionState`, whose ``attend`` continues after the positions it has seen).

    Shape: x ``(b, i, e)`` -> output ``(b, i, e)``, weights None.
    """

    def __init__(self, embed_dim: int, num_heads: int, name: str, attend: Callable[..., torch.Tensor], *,
                 causal: bool, new_state: Callable[[], LinearAttentionState] | None = None) -> None:
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = check_heads_divide("HeadwiseAttention", "embed_dim", embed_dim, num_heads)
        if not callable(attend):
            fail("HeadwiseAttention", f"attend must be a function (q, k, v, *, causal) -> output, got "
                                      f"{type(attend).__name__} {attend!r}; pass e.g. attention_lab.linear_attention",
                 TypeError)
        self.name, self.attend, self.new_state = name, attend, new_state
        self.causal = check_bool("HeadwiseAttention", "causal", causal)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))
        MultiHeadAttention.reset_parameters(self)  # the same initialisation, drawn in the same order

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, attention={self.name!r}, causal={self.causal}"

    def new_cache(self, batch_size: int, max_len: int, *, kind: str = "preallocated", window: int | None = None
                  ) -> LinearAttentionState:
        """The empty running state this layer decodes with (its size depends on neither batch_size nor max_len).

        Shape: a state of S ``(b, h, m, d)`` and z ``(b, h, m)`` once it has seen a step.
        """
        if self.new_state is None or kind != "preallocated" or window is not None:
            kept = "a running state" if self.new_state else "no cache"
            fail("HeadwiseAttention.new_cache", f"attention={self.name!r} keeps {kept}, got kind={kind!r}, window="
                 f"{window!r}; without a state generate by recomputation (cache='none'), with one use "
                 f"kind='preallocated' (the default) and no window")
        return self.new_state()

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, need_weights: bool = False,
                cache: LinearAttentionState | None = None) -> tuple[torch.Tensor, None]:
        fn = "HeadwiseAttention.forward"
        check_sequence_input(fn, "x", x, self.q_proj.weight)
        if mask is not None or check_bool(fn, "need_weights", need_weights):
            fail(fn, f"attention={self.name!r} takes no mask and computes no i x j weights; head_mask and "
                     f"return_attention=True need attention='softmax'")
        if cache is not None and not (self.new_state and isinstance(cache, LinearAttentionState)):
            takes = "the state new_cache() makes" if self.new_state else "no cache"
            fail(fn, f"attention={self.name!r} takes {takes}, got a {type(cache).__name__}; run it with cache=None "
                     f"to recompute", TypeError)
        q, k, v = (rearrange(proj(x), "b n (h d) -> b h n d", h=self.num_heads)  # (b, h, n, d)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        heads = self.attend(q, k, v) if cache is None else cache.attend(q, k, v)  # (b, h, i, d)
        return self.out_proj(rearrange(heads, "b h i d -> b i (h d)")), None  # (b, i, e)
