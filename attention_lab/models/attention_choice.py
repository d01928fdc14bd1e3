"""Which attention a :class:`~attention_lab.models.transformer.TinyTransformer` uses: a name and options -> a module.

``TransformerConfig(..., attention="linear")`` or, with options, ``attention=attention_spec("performer",
num_features=128)``; ``attention_spec("softmax", positions="rope", num_kv_heads=2)`` rotates queries and keys
instead of adding a learned position embedding, and shares each key/value head between two query heads;
``attention_spec("softmax", qk_norm=True, output_gate=True, sink_logits=True, softcap=50.0)`` turns on lesson 14's
changes (:class:`~attention_lab.GroupedQueryAttention`'s options of those names).

One table, :data:`ATTENTION_TABLE`, says for each name how its module is built and what it supports. Every module
answers the blocks' one call, ``forward(x, *, mask=None, need_weights=False, cache=None) -> (output, weights)``,
holds its ``causal`` flag (and applies causality itself) and refuses what it does not support; the model reads the
table to refuse ``head_mask`` (needs a mask), ``return_attention=True`` (weights) and caches before anything runs.

================  ===========================================================  ===============  ==============
name              module (default options)                                     mask / weights   decodes with
================  ===========================================================  ===============  ==============
``softmax``       :class:`~attention_lab.GroupedQueryAttention` (learned, h_kv=h)  both             its KV cache
``block_sparse``  :class:`~attention_lab.HeadwiseAttention`: ``block_sparse_attention``     no               recomputing
``linear``        ... ``linear_attention`` (``feature_map="elu"``)                 no               its S and z
``performer``     ... ``performer_attention`` (``num_features=64, seed=0``)        no               recomputing
``topk``          ... ``topk_attention`` (``top_k=32``)                            no               recomputing
``cluster``       ... ``cluster_attention`` (``num_clusters=8, seed=0``)           no               (encoder only)
``linformer``     :class:`~attention_lab.LinformerSelfAttention` (``rank=64``)     no               (encoder only)
``synthesizer``   :class:`~attention_lab.SynthesizerAttention` (``kind="dense"``)  weights          recomputing
================  ===========================================================  ===============  ==============

Sequences shorter than ``top_k``, ``num_clusters`` or ``rank`` use that many. Adding an attention: CONTRIBUTING
"Adding an attention variant".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch
from torch import nn

from .._validation import (
    check_bool,
    check_choice,
    check_heads_divide,
    check_kv_heads,
    check_number,
    check_positive_int,
    check_seed,
    fail,
)
from ..core.multihead import MultiHeadAttention
from ..efficient.block_sparse import BlockLayout, block_sparse_attention
from ..efficient.cluster import cluster_attention
from ..efficient.headwise import HeadwiseAttention
from ..efficient.linear import LinearAttentionState, _check_feature_map, linear_attention
from ..efficient.linformer import LinformerSelfAttention
from ..efficient.performer import performer_attention
from ..efficient.synthesizer import SYNTHESIZER_KINDS, SynthesizerAttention
from ..efficient.topk import topk_attention
from ..generation.grouped import GroupedQueryAttention

__all__ = ["ATTENTIONS", "ATTENTION_TABLE", "CAUSAL_ATTENTIONS", "POSITIONS", "SOFTMAX_CHANGES", "AttentionEntry",
           "AttentionSpec", "attention_spec", "build_attention", "check_attention", "check_windows"]

POSITIONS = ("learned", "rope")
# lesson 14's changes to softmax attention, each off by default
SOFTMAX_CHANGES = MappingProxyType({"qk_norm": False, "output_gate": False, "sink_logits": False, "softcap": None})


Build = Callable[[Mapping[str, object], int, int, int, bool], nn.Module]  # (options, e, h, max_len, causal)


@dataclass(frozen=True)
class AttentionEntry:
    """One row of :data:`ATTENTION_TABLE`: how the module is built, its options' defaults, and what it supports.

    ``mask``: it takes a bool mask (so ``head_mask``); ``weights``: it returns its i x j weights (so
    ``return_attention=True``); ``cache``: what it keeps while decoding (None: generation recomputes the whole
    sequence); ``not_causal``: why it has no causal form (None: a decoder can use it).

    Shape: no tensors; ``build(options, e, h, max_len, causal)`` returns the module.
    """

    build: Build
    defaults: Mapping[str, object] = field(default_factory=dict)
    mask: bool = False
    weights: bool = False
    cache: str | None = None
    not_causal: str | None = None


def _headwise(name: str, kernel: Callable[[Mapping[str, object], bool], Callable[..., torch.Tensor]],
              state: bool = False) -> Build:
    """The builder of a :class:`HeadwiseAttention` whose heads run ``kernel(options, causal)``."""
    def build(options: Mapping[str, object], e: int, h: int, max_len: int, causal: bool) -> nn.Module:
        new_state = (lambda: LinearAttentionState(feature_map=options["feature_map"])) if state else None
        return HeadwiseAttention(e, h, name, kernel(options, causal), causal=causal, new_state=new_state)
    return build


def _softmax(options: Mapping[str, object], e: int, h: int, max_len: int, causal: bool) -> nn.Module:
    changes = {name: options[name] for name in SOFTMAX_CHANGES}
    plain = not any(value not in (False, None) for value in changes.values())
    if plain and options["positions"] == "learned" and options["num_kv_heads"] is None:  # MultiHeadAttention's draws
        return GroupedQueryAttention.from_multihead(MultiHeadAttention(e, h), causal=causal)
    return GroupedQueryAttention(e, h, options["num_kv_heads"] or h, bias=True, rope=options["positions"] == "rope",
                                 causal=causal, **changes)


def _block_sparse(options: Mapping[str, object], causal: bool) -> Callable[..., torch.Tensor]:
    layout = options["layout"]
    if causal:
        layout = layout & BlockLayout.causal(layout.block_size)
    return lambda q, k, v: block_sparse_attention(q, k, v, layout)


ATTENTION_TABLE: Mapping[str, AttentionEntry] = MappingProxyType({
    "softmax": AttentionEntry(_softmax, {"positions": "learned", "num_kv_heads": None, **SOFTMAX_CHANGES},
                              mask=True, weights=True,
                              cache="keys and values"),
    "block_sparse": AttentionEntry(_headwise("block_sparse", _block_sparse),
                                   {"layout": BlockLayout.sliding_window(64, neighbours=1)}),
    "linear": AttentionEntry(_headwise("linear", lambda o, causal: lambda q, k, v: linear_attention(
        q, k, v, causal=causal, feature_map=o["feature_map"]), state=True), {"feature_map": "elu"},
        cache="running state S, z"),
    "performer": AttentionEntry(_headwise("performer", lambda o, causal: lambda q, k, v: performer_attention(
        q, k, v, num_features=o["num_features"], causal=causal, seed=o["seed"])), {"num_features": 64, "seed": 0}),
    "topk": AttentionEntry(_headwise("topk", lambda o, causal: lambda q, k, v: topk_attention(
        q, k, v, top_k=min(o["top_k"], k.shape[-2]), causal=causal)), {"top_k": 32}),
    "cluster": AttentionEntry(_headwise("cluster", lambda o, causal: lambda q, k, v: cluster_attention(
        q, k, v, num_clusters=min(o["num_clusters"], k.shape[-2]), seed=o["seed"])), {"num_clusters": 8, "seed": 0},
        not_causal="its groups mix earlier and later keys"),
    "linformer": AttentionEntry(
        lambda o, e, h, max_len, causal: LinformerSelfAttention(e, h, max_len, min(o["rank"], max_len)),
        {"rank": 64}, not_causal="E and F mix every position"),
    "synthesizer": AttentionEntry(
        lambda o, e, h, max_len, causal: SynthesizerAttention(e, max_len, kind=o["kind"], num_heads=h, causal=causal),
        {"kind": "dense"}, weights=True),
})
ATTENTIONS = tuple(ATTENTION_TABLE)
CAUSAL_ATTENTIONS = tuple(name for name, entry in ATTENTION_TABLE.items() if entry.not_causal is None)


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
    check_choice(fn, "name", name, ATTENTIONS)
    defaults = ATTENTION_TABLE[name].defaults
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        fail(fn, f"options must be among those attention {name!r} takes, {sorted(defaults) or 'none'}, got {unknown}; "
                 f"leave the others out", TypeError)
    for key in ("num_features", "top_k", "num_clusters", "rank", "seed"):
        if key in options:
            check_positive_int(fn, key, options[key]) if key != "seed" else check_seed(fn, options[key])
    if "positions" in options:
        check_choice(fn, "positions", options["positions"], POSITIONS,
                     hint="'learned' adds a learned embedding per position, 'rope' rotates queries and keys")
    for key in ("qk_norm", "output_gate", "sink_logits"):
        if key in options:
            check_bool(fn, key, options[key])
    if options.get("softcap") is not None:
        check_number(fn, "softcap", options["softcap"], low=0, low_open=True, hint="e.g. softcap=50.0 (Gemma 2)")
    if options.get("num_kv_heads") is not None:
        check_positive_int(fn, "num_kv_heads", options["num_kv_heads"])
    if "layout" in options and not isinstance(options["layout"], BlockLayout):
        fail(fn, f"layout must be a BlockLayout, got {type(options['layout']).__name__}; build one with e.g. "
                 f"BlockLayout.sliding_window(64, neighbours=1)", TypeError)
    if "feature_map" in options:
        _check_feature_map(fn, options["feature_map"])
    if "kind" in options:
        check_choice(fn, "kind", options["kind"], SYNTHESIZER_KINDS)
    return AttentionSpec(name, MappingProxyType({**defaults, **options}))


def check_attention(fn: str, attention: object, embed_dim: int, num_heads: int, causal: bool) -> AttentionSpec:
    """The :class:`AttentionSpec` of ``attention`` (a name or a spec), checked against the model it goes into: an
    attention with no causal form in a causal model, key/value heads that do not divide the query heads, and rotary
    positions on an odd head dimension are refused.

    Shape: no tensors; ``embed_dim`` = e, ``num_heads`` = h.
    """
    spec = _as_spec(fn, attention)
    reason = ATTENTION_TABLE[spec.name].not_causal
    if causal and reason:
        fail(fn, f"attention={spec.name!r} has no causal form ({reason}); use it with causal=False")
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
        if attention not in ATTENTION_TABLE:
            fail(fn, f"attention must be one of {', '.join(repr(a) for a in ATTENTIONS)} or an attention_spec(...), "
                     f"got {attention!r}; pass one of these names, e.g. attention='softmax'")
        return attention_spec(attention)
    fail(fn, f"attention must be a name or an attention_spec(...), got {type(attention).__name__}; pass e.g. "
             f"attention='softmax'", TypeError)


def check_windows(fn: str, windows: object, num_layers: int, attention: str) -> tuple[int | None, ...]:
    """A model's ``windows``: one per layer, an int (a local layer's window) or None (a global layer), for softmax
    attention only (:mod:`attention_lab.generation.interleaved`). Shape: no tensors; the windows as a tuple."""
    if not isinstance(windows, (tuple, list)) or len(windows) != num_layers:
        fail(fn, f"windows must be a tuple of one window per layer ({num_layers}), an int or None each, got "
                 f"{windows!r}; e.g. windows=interleaved_windows({num_layers}, window=16, local_per_global=1)",
             TypeError)
    if attention != "softmax":
        fail(fn, f"windows applies to attention='softmax' only, got attention={attention!r}; leave windows out")
    for window in windows:
        if window is not None:
            check_positive_int(fn, "windows[...]", window)
    return tuple(windows)


def build_attention(attention: str | AttentionSpec, embed_dim: int, num_heads: int, *, max_len: int,
                    causal: bool = False, fn: str = "build_attention", window: int | None = None) -> nn.Module:
    """The self-attention module for ``attention`` (a name or :func:`attention_spec`) in a model of ``max_len``:
    its row of :data:`ATTENTION_TABLE`, built; ``window`` (softmax only) makes it a local layer of that window.

    Shape: the module maps x ``(b, i, e)`` (with ``mask=``, ``need_weights=``, ``cache=``) to ``(output (b, i, e),
    weights)``.
    """
    spec = check_attention(fn, attention, embed_dim, num_heads, causal)
    module = ATTENTION_TABLE[spec.name].build(spec.options, embed_dim, num_heads, max_len, causal)
    if window is not None:
        module.window = check_windows(fn, (window,), 1, spec.name)[0]  # read by GroupedQueryAttention.forward
    return module
