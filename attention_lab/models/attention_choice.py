"""Which attention a :class:`~attention_lab.models.transformer.TinyTransformer` uses: a name and options -> a module.

``TransformerConfig(..., attention="linear")`` or, with options, ``attention=attention_spec("performer",
num_features=128)``. Softmax attention's options say where positions come from and what its KV cache holds:
``attention_spec("softmax", positions="rope", num_kv_heads=2)`` rotates queries and keys instead of adding a
learned position embedding, and shares each key/value head between two query heads. Every module built here takes
``(x, *, mask=None, need_weights=False)`` and returns ``(output, weights)``, like
:class:`~attention_lab.MultiHeadAttention`, except softmax attention with rotary positions or fewer key/value heads:
that is a :class:`~attention_lab.GroupedQueryAttention`, which the block runs through
:func:`~attention_lab.grouped_self_attention`.

================  ===============================================  ===================================  ======
name              module                                           options (defaults)                   causal
================  ===============================================  ===================================  ======
``softmax``       :class:`~attention_lab.MultiHeadAttention`, or   ``positions="learned"`` (or          yes
                  :class:`~attention_lab.GroupedQueryAttention`    ``"rope"``), ``num_kv_heads=None``
                  with rope or fewer key/value heads               (one per query head)
``block_sparse``  heads run :func:`~attention_lab.block_sparse_attention`  ``layout`` (sliding window,  yes
                                                                   block 64, one block each side)
``linear``        heads run :func:`~attention_lab.linear_attention`  ``feature_map="elu"``               yes
``performer``     heads run :func:`~attention_lab.performer_attention`  ``num_features=64, seed=0``      yes
``topk``          heads run :func:`~attention_lab.topk_attention`   ``top_k=32``                         yes
``cluster``       heads run :func:`~attention_lab.cluster_attention`  ``num_clusters=8, seed=0``         no
``linformer``     :class:`~attention_lab.LinformerSelfAttention`   ``rank=64``                          no
``synthesizer``   :class:`~attention_lab.SynthesizerAttention`     ``kind="dense"``                     yes
================  ===============================================  ===================================  ======

Sequences shorter than ``top_k``, ``num_clusters`` or ``rank`` use that many. A causal model passes its causal mask
to each block; the modules here apply causality themselves and accept that mask only, so ``head_mask`` and
``return_attention=True`` need ``attention="softmax"``. Adding an attention: CONTRIBUTING "Adding an attention
variant".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch
from einops import rearrange
from torch import nn

from .._validation import check_choice, check_heads_divide, check_kv_heads, check_positive_int, fail
from ..core.masks import causal_mask
from ..core.multihead import MultiHeadAttention
from ..efficient.block_sparse import BlockLayout, block_sparse_attention
from ..efficient.cluster import cluster_attention
from ..efficient.linear import linear_attention
from ..efficient.linformer import LinformerSelfAttention
from ..efficient.performer import performer_attention
from ..efficient.synthesizer import SynthesizerAttention
from ..efficient.topk import topk_attention
from ..generation.grouped import GroupedQueryAttention

__all__ = ["ATTENTIONS", "CAUSAL_ATTENTIONS", "POSITIONS", "AttentionSpec", "attention_spec", "build_attention",
           "check_attention"]

POSITIONS = ("learned", "rope")
_DEFAULTS: dict[str, dict[str, object]] = {
    "softmax": {"positions": "learned", "num_kv_heads": None},
    "block_sparse": {"layout": BlockLayout.sliding_window(64, neighbours=1)},
    "linear": {"feature_map": "elu"},
    "performer": {"num_features": 64, "seed": 0},
    "topk": {"top_k": 32},
    "cluster": {"num_clusters": 8, "seed": 0},
    "linformer": {"rank": 64},
    "synthesizer": {"kind": "dense"},
}
ATTENTIONS = tuple(_DEFAULTS)
_NOT_CAUSAL = {"cluster": "its groups mix earlier and later keys", "linformer": "E and F mix every position"}
CAUSAL_ATTENTIONS = tuple(name for name in ATTENTIONS if name not in _NOT_CAUSAL)  # those a decoder can use


@dataclass(frozen=True)
class AttentionSpec:
    """An attention by name with its options (the defaults filled in). Build one with :func:`attention_spec`."""

    name: str
    options: Mapping[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def attention_spec(name: str, **options: object) -> AttentionSpec:
    """``attention_spec("performer", num_features=128)``: a name from :data:`ATTENTIONS` and its options.

    Shape: no tensors; the spec is given to ``TransformerConfig(..., attention=spec)``.
    """
    fn = "attention_spec"
    if name not in _DEFAULTS:
        fail(fn, f"name must be one of {', '.join(repr(a) for a in ATTENTIONS)}, got {name!r}")
    unknown = sorted(set(options) - set(_DEFAULTS[name]))
    if unknown:
        fail(fn, f"attention {name!r} takes the options {sorted(_DEFAULTS[name]) or 'none'}, got {unknown}", TypeError)
    for key in ("num_features", "top_k", "num_clusters", "rank", "seed"):
        if key in options:
            check_positive_int(fn, key, options[key], minimum=0 if key == "seed" else 1)
    if "positions" in options:
        check_choice(fn, "positions", options["positions"], POSITIONS,
                     hint="'learned' adds a learned embedding per position, 'rope' rotates queries and keys")
    if options.get("num_kv_heads") is not None:
        check_positive_int(fn, "num_kv_heads", options["num_kv_heads"])
    return AttentionSpec(name, MappingProxyType({**_DEFAULTS[name], **options}))


def check_attention(fn: str, attention: object, embed_dim: int, num_heads: int, causal: bool) -> AttentionSpec:
    """The :class:`AttentionSpec` of ``attention`` (a name or a spec), checked against the model it goes into: an
    attention with no causal form in a causal model, key/value heads that do not divide the query heads, and rotary
    positions on an odd head dimension are refused.

    Shape: no tensors; ``embed_dim`` = e, ``num_heads`` = h.
    """
    spec = _as_spec(fn, attention)
    if causal and spec.name in _NOT_CAUSAL:
        fail(fn, f"attention={spec.name!r} has no causal form ({_NOT_CAUSAL[spec.name]}); use it with causal=False")
    head_dim = check_heads_divide(fn, "d_model", embed_dim, num_heads)
    if spec.name == "softmax":
        if spec.options["num_kv_heads"] is not None:
            check_kv_heads(fn, num_heads, spec.options["num_kv_heads"])
        if spec.options["positions"] == "rope" and head_dim % 2:
            fail(fn, f"positions='rope' rotates pairs of features, so d_model / num_heads must be even, got "
                     f"d_model={embed_dim} and num_heads={num_heads} (head_dim {head_dim})")
    return spec


def _as_spec(fn: str, attention: object) -> AttentionSpec:
    if isinstance(attention, AttentionSpec):
        return attention
    if isinstance(attention, str):
        if attention not in _DEFAULTS:
            fail(fn, f"attention must be one of {', '.join(repr(a) for a in ATTENTIONS)} or an attention_spec(...), "
                     f"got {attention!r}")
        return attention_spec(attention)
    fail(fn, f"attention must be a name or an attention_spec(...), got {type(attention).__name__}", TypeError)


class _Heads(MultiHeadAttention):
    """Multi-head self-attention whose heads run ``attend(q, k, v)`` instead of softmax attention."""

    def __init__(self, embed_dim: int, num_heads: int, attend: Callable[..., torch.Tensor], name: str) -> None:
        super().__init__(embed_dim, num_heads)
        self.attend, self.attention_name = attend, name

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, attention={self.attention_name!r}"

    def forward(self, x: torch.Tensor, *, need_weights: bool = False) -> tuple[torch.Tensor, None]:
        self._check_inputs(x, x, x)
        q, k, v = (rearrange(proj(x), "b n (h d) -> b h n d", h=self.num_heads)  # (b, h, n, d)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        heads = self.attend(q, k, v)  # (b, h, i, d)
        return self.out_proj(rearrange(heads, "b h i d -> b i (h d)")), None  # (b, i, e)


class _ModelAttention(nn.Module):
    """Holds one attention module for a block; accepts the model's causal mask (applied by the module itself)."""

    def __init__(self, module: nn.Module, name: str, causal: bool) -> None:
        super().__init__()
        self.module, self.name, self.causal = module, name, causal

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, need_weights: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        fn = f"{self.name} attention"
        if mask is not None:
            n = x.shape[1]
            structural = self.causal and tuple(mask.shape) == (n, n) and torch.equal(mask, causal_mask(n,
                                                                                                     device=x.device))
            if not structural:
                fail(fn, "takes no mask other than the causal one the model applies itself; head_mask and other "
                         "masks need attention='softmax'")
        if need_weights:
            fail(fn, "computes no i x j weights to return; return_attention=True needs attention='softmax'")
        return self.module(x)


def build_attention(attention: str | AttentionSpec, embed_dim: int, num_heads: int, *, max_len: int,
                    causal: bool = False, fn: str = "build_attention") -> nn.Module:
    """The self-attention module for ``attention`` (a name or :func:`attention_spec`) in a model of ``max_len``.

    ``"softmax"`` gives a plain :class:`~attention_lab.MultiHeadAttention`, or, with rotary positions or fewer
    key/value heads, a :class:`~attention_lab.GroupedQueryAttention` with biases.

    Shape: the module maps x ``(b, i, e)`` (with ``mask=``, ``need_weights=``) to ``(output (b, i, e), weights)``.
    """
    spec = check_attention(fn, attention, embed_dim, num_heads, causal)
    name, options = spec.name, dict(spec.options)
    if name == "softmax":
        if options["positions"] == "learned" and options["num_kv_heads"] is None:
            return MultiHeadAttention(embed_dim, num_heads)
        return GroupedQueryAttention(embed_dim, num_heads, options["num_kv_heads"] or num_heads, bias=True,
                                     rope=options["positions"] == "rope")
    if name == "linformer":
        module = LinformerSelfAttention(embed_dim, num_heads, max_len, min(options["rank"], max_len))
    elif name == "synthesizer":
        module = SynthesizerAttention(embed_dim, max_len, kind=options["kind"], num_heads=num_heads, causal=causal)
    else:
        module = _Heads(embed_dim, num_heads, _attend(name, options, causal), name)
    return _ModelAttention(module, name, causal)


def _attend(name: str, options: dict, causal: bool) -> Callable[..., torch.Tensor]:
    if name == "block_sparse":
        layout = options["layout"]
        if not isinstance(layout, BlockLayout):
            fail("attention_spec", f"layout must be a BlockLayout, got {type(layout).__name__}", TypeError)
        if causal:
            layout = layout & BlockLayout.causal(layout.block_size)
        return lambda q, k, v: block_sparse_attention(q, k, v, layout)
    if name == "linear":
        return lambda q, k, v: linear_attention(q, k, v, causal=causal, feature_map=options["feature_map"])
    if name == "performer":
        return lambda q, k, v: performer_attention(q, k, v, num_features=options["num_features"], causal=causal,
                                                   seed=options["seed"])
    if name == "topk":
        return lambda q, k, v: topk_attention(q, k, v, top_k=min(options["top_k"], k.shape[-2]), causal=causal)
    return lambda q, k, v: cluster_attention(q, k, v, num_clusters=min(options["num_clusters"], k.shape[-2]),
                                             seed=options["seed"])
