"""Multi-head attention (多头注意力), equal to ``torch.nn.MultiheadAttention`` and loadable from it.

Lee's notation: each token's query q^i is projected into one query per head, q^{i,0}, q^{i,1}, ...,
q^{i,h-1} (likewise k^{j,m}, v^{j,m}; heads are counted from 0); head m attends with its own q^{i,m} . k^{j,m}
and produces b^{i,m}; the heads' outputs are concatenated and mixed by the output projection W^o. In code the h
heads are one wide projection of size e = h*d whose columns are split into h groups of d:
``'b n (h d) -> b h n d'``.
Heads cost no extra parameters or FLOPs compared with one big head of size e; they only change which dot
products are taken.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import (
    check_bool,
    check_heads_divide,
    check_positive_ints,
    check_sequence_input,
    fail,
)
from ._mask_checks import check_mask
from .functional import scaled_dot_product_attention

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with separate q, k, v and output projections, batch first.

    ``forward(query, key=None, value=None, *, mask=None, need_weights=False)`` returns
    ``(output, weights)``: ``key`` defaults to ``query`` (self-attention) and ``value`` to ``key``;
    ``mask`` is bool with True = "may attend", broadcastable to ``(b, h, i, j)`` (e.g. ``(i, j)`` causal,
    ``(b, 1, 1, j)`` key padding). A query with no allowed key, or with no key at all (j = 0), gets 0 from
    the attention (so its output is the output projection's bias), on both paths.

    With ``need_weights=False`` the heads run through ``F.scaled_dot_product_attention`` (fast, no
    ``(i, j)`` matrix kept) and ``weights`` is ``None``; with ``need_weights=True`` they run through the
    library's own :func:`attention_lab.scaled_dot_product_attention` and ``weights`` are per head (not
    averaged over heads, unlike PyTorch's default). Both paths give the same output, the plain math of
    :func:`attention_lab.reference.attention` per head (tested, values and gradients, in fp64); the first
    is PyTorch's fused kernel, which keeps no ``(i, j)`` weights in memory.

    Attributes: ``embed_dim`` (e), ``num_heads`` (h), ``head_dim`` (d = e / h), ``q_proj``, ``k_proj``,
    ``v_proj``, ``out_proj`` (each ``nn.Linear(e, e, bias=bias)``). :meth:`from_torch` and
    :meth:`to_torch` convert from and to ``nn.MultiheadAttention`` (whose q, k, v weights are packed in one
    ``in_proj_weight`` of shape ``(3e, e)``).

    Shape: query ``(b, i, e)``, key and value ``(b, j, e)``, mask broadcastable to ``(b, h, i, j)``
        -> output ``(b, i, e)``, weights ``(b, h, i, j)`` or ``None``.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, bias: bool = True) -> None:
        super().__init__()
        fn = "MultiHeadAttention"
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        check_bool(fn, "bias", bias)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise like ``nn.MultiheadAttention``: Xavier-uniform q, k, v weights, zero biases."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
        self.out_proj.reset_parameters()
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    @property
    def bias(self) -> bool:
        """Whether the four projections carry a bias."""
        return self.q_proj.bias is not None

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"bias={self.bias}")

    def _check_inputs(self, query: object, key: object, value: object) -> None:
        fn = "MultiHeadAttention.forward"
        for name, x in (("query", query), ("key", key), ("value", value)):
            check_sequence_input(fn, name, x, self.q_proj.weight)
        if key.shape[1] != value.shape[1]:
            fail(fn, f"key and value must have the same number of positions j, got key "
                     f"{tuple(key.shape)} (j={key.shape[1]}) and value {tuple(value.shape)} "
                     f"(j={value.shape[1]}); every key needs exactly one value")
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            fail(fn, f"query, key and value must have the same batch size b, got {query.shape[0]}, "
                     f"{key.shape[0]} and {value.shape[0]}")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` with every head; see the class docstring.

        Shape: query ``(b, i, e)``, key and value ``(b, j, e)``, mask broadcastable to ``(b, h, i, j)``
            -> output ``(b, i, e)``, weights ``(b, h, i, j)`` or ``None``.
        """
        check_bool("MultiHeadAttention.forward", "need_weights", need_weights)
        if key is None:
            key = query
        if value is None:
            value = key
        self._check_inputs(query, key, value)
        h = self.num_heads
        if mask is not None:
            target = (query.shape[0], h, query.shape[1], key.shape[1])
            check_mask("MultiHeadAttention.forward", mask, target, allow_float=False, like=query)
        q = rearrange(self.q_proj(query), "b i (h d) -> b h i d", h=h)  # (b, h, i, d)
        k = rearrange(self.k_proj(key), "b j (h d) -> b h j d", h=h)  # (b, h, j, d)
        v = rearrange(self.v_proj(value), "b j (h d) -> b h j d", h=h)  # (b, h, j, d)
        weights = None
        if need_weights:
            heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (b, h, i, d), (b, h, i, j)
        else:
            sdpa_mask = mask
            if mask is not None and mask.dim() < 2:  # SDPA wants at least (i, j); a (j,) mask is (1, j)
                sdpa_mask = mask.reshape(1, -1)  # (1, j)
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask)  # (b, h, i, d)
            if mask is not None:
                # torch 2.13 already gives 0 for a query with no allowed key; older versions gave NaN.
                has_key = mask.any(dim=-1, keepdim=True)  # (..., i, 1)
                heads = torch.where(has_key, heads, torch.zeros((), dtype=heads.dtype, device=heads.device))
        merged = rearrange(heads, "b h i d -> b i (h d)")  # (b, i, e)
        return self.out_proj(merged), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """A ``MultiHeadAttention`` with the same weights, dtype, device and train/eval mode as ``module``.

        Works for ``batch_first`` True or False (the weights do not depend on it; this module's inputs are
        always batch first) and with or without bias. The packed ``in_proj_weight`` ``(3e, e)`` is split
        into the q, k and v weights, in that order. Dropout is not carried over (this module has none), so
        outputs agree with ``module`` in eval mode. Modules with ``kdim``/``vdim`` other than ``embed_dim``,
        with ``add_bias_kv`` or with ``add_zero_attn`` are refused with a ``ValueError``.

        Shape: in_proj_weight ``(3e, e)`` -> q_proj, k_proj, v_proj weights ``(e, e)`` each.
        """
        fn = "MultiHeadAttention.from_torch"
        if not isinstance(module, nn.MultiheadAttention):
            fail(fn, f"expected a torch.nn.MultiheadAttention, got {type(module).__name__}; pass the module itself",
                 TypeError)
        if not module._qkv_same_embed_dim:
            fail(fn, f"expected kdim == vdim == embed_dim, got embed_dim={module.embed_dim}, "
                     f"kdim={module.kdim}, vdim={module.vdim}; this module projects keys and values from "
                     f"embed_dim features, so build the PyTorch module without kdim/vdim")
        if module.bias_k is not None or module.bias_v is not None:
            fail(fn, "expected add_bias_kv=False, got a module with bias_k/bias_v (add_bias_kv=True); "
                     "this module has no extra learned key and value, so build the PyTorch module with "
                     "add_bias_kv=False")
        if module.add_zero_attn:
            fail(fn, "expected add_zero_attn=False, got add_zero_attn=True; this module adds no zero key "
                     "and value, so build the PyTorch module with add_zero_attn=False")
        e = module.embed_dim
        packed_weight, packed_bias = module.in_proj_weight, module.in_proj_bias
        has_bias = packed_bias is not None
        ours = cls(e, module.num_heads, bias=has_bias)
        ours = ours.to(device=packed_weight.device, dtype=packed_weight.dtype)
        with torch.no_grad():
            for index, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
                rows = slice(index * e, (index + 1) * e)
                proj.weight.copy_(packed_weight[rows])  # (e, e)
                if has_bias:
                    proj.bias.copy_(packed_bias[rows])  # (e,)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                ours.out_proj.bias.copy_(module.out_proj.bias)
        ours.train(module.training)
        return ours

    def to_torch(self, *, batch_first: bool = True) -> nn.MultiheadAttention:
        """An ``nn.MultiheadAttention`` with the same weights, dtype, device and train/eval mode.

        Its outputs equal this module's. PyTorch's ``attn_mask``/``key_padding_mask`` use the opposite
        polarity (True = may NOT attend), so give it ``~mask``. Its ``dropout`` is 0.

        Shape: q_proj, k_proj, v_proj weights ``(e, e)`` each -> in_proj_weight ``(3e, e)``.
        """
        check_bool("MultiHeadAttention.to_torch", "batch_first", batch_first)
        weight = self.q_proj.weight
        module = nn.MultiheadAttention(self.embed_dim, self.num_heads, bias=self.bias,
                                       batch_first=batch_first, device=weight.device, dtype=weight.dtype)
        projections = (self.q_proj, self.k_proj, self.v_proj)
        with torch.no_grad():
            module.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))  # (3e, e)
            module.out_proj.weight.copy_(self.out_proj.weight)
            if self.bias:
                module.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))  # (3e,)
                module.out_proj.bias.copy_(self.out_proj.bias)
        module.train(self.training)
        return module
