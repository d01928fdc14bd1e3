"""Throw the classes of bad input of issue 35 at the package's public callables and classify every call.

    python tools/bad_input_audit.py            # counts per class, then every call that fell short
    python tools/bad_input_audit.py --all      # every call, with its message

Each case is a call that must fail (or, for an empty batch, queries or keys, must succeed with an empty or zero
output, as PyTorch's SDPA does). A call is classified as

- ``ok``: the library's own error (ValueError or TypeError) whose message starts with the name of the function the
  user called and holds what was expected, what was got and a fix (the text after a ``;``);
- ``lacks <part>``: the library's error, but without the name first, ``expected`` (must/expected), ``got`` or a fix;
- ``raw``: an exception of another type (from torch, einops or Python);
- ``silent``: no error where one is due (or, for an empty input, a result that is not empty/zero);
- ``state``: a failed call that changed an object it was given (a module's weights, a cache, an input tensor).

The cases are written here by hand, per callable, from the classes the issue lists; ``tests/test_bad_inputs.py`` draws
them with Hypothesis. Needs no GPU; device strings are judged against the devices this machine has.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import warnings
from collections import Counter
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import attention_lab as al
from attention_lab import analysis
from attention_lab.measure import conclusions, cost, memory
from attention_lab.models import (
    attention_choice,
    conv_attention,
    digits,
    generate,
    tasks,
    text_corpus,
    training,
    transformer,
    vision,
)

CASES: list[tuple[str, str, Callable[[], object], list[object], str]] = []
"""(function name the message must start with, label, the call, objects it must leave unchanged, "error"/"empty")."""


def case(fn: str, label: str, call: Callable[[], object], *watch: object, expect: str = "error") -> None:
    CASES.append((fn, label, call, list(watch), expect))


def t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def absent_device() -> str:
    """A device string torch knows but this machine does not have."""
    return "cuda" if not torch.cuda.is_available() else "mps"


# --- attention functions of (q, k, v)
def qkv_cases(fn: str, call: Callable[..., object], *, empty: bool = True) -> None:
    q, k, v = t(2, 5, 4), t(2, 6, 4), t(2, 6, 4)
    case(fn, "q a list", lambda: call(q.tolist(), k, v))
    case(fn, "q a numpy array", lambda: call(q.numpy(), k, v))
    case(fn, "q None", lambda: call(None, k, v))
    case(fn, "q int", lambda: call(q.long(), k.long(), v.long()))
    case(fn, "q complex", lambda: call(q.to(torch.complex64), k.to(torch.complex64), v.to(torch.complex64)))
    case(fn, "q rank 1", lambda: call(t(4), t(4), t(4)))
    case(fn, "d differ", lambda: call(q, t(2, 6, 3), v))
    case(fn, "j differ", lambda: call(q, k, t(2, 7, 4)))
    case(fn, "dtypes differ", lambda: call(q.double(), k, v))
    if empty:
        for label, shapes in (("batch 0", ((0, 5, 4), (0, 6, 4))), ("no queries", ((2, 0, 4), (2, 6, 4))),
                              ("no keys", ((2, 5, 4), (2, 0, 4)))):
            (qs, ks) = shapes
            case(fn, label, lambda qs=qs, ks=ks: call(t(*qs), t(*ks), t(*ks)), expect="empty")


qkv_cases("scaled_dot_product_attention", lambda q, k, v: al.scaled_dot_product_attention(q, k, v))
qkv_cases("blockwise_attention", lambda q, k, v: al.blockwise_attention(q, k, v, block_size=2))
qkv_cases("linear_attention", lambda q, k, v: al.linear_attention(q, k, v))
qkv_cases("linear_attention_recurrent", lambda q, k, v: al.linear_attention_recurrent(q, k, v), empty=False)
qkv_cases("performer_attention", lambda q, k, v: al.performer_attention(q, k, v, num_features=8))
qkv_cases("topk_attention", lambda q, k, v: al.topk_attention(q, k, v, top_k=2))
qkv_cases("cluster_attention", lambda q, k, v: al.cluster_attention(q, k, v, num_clusters=2))
qkv_cases("kernel_attention", lambda q, k, v: al.kernel_attention(q.exp(), k.exp(), v)
          if isinstance(q, torch.Tensor) and q.is_floating_point() else al.kernel_attention(q, k, v))
q0, k0, v0 = t(1, 2, 8, 4), t(1, 2, 8, 4), t(1, 2, 8, 4)
case("blockwise_attention", "block_size 0", lambda: al.blockwise_attention(q0, k0, v0, block_size=0))
case("blockwise_attention", "causal 'y'", lambda: al.blockwise_attention(q0, k0, v0, causal="y"))
case("topk_attention", "top_k 0", lambda: al.topk_attention(q0, k0, v0, top_k=0))
case("topk_attention", "top_k past j", lambda: al.topk_attention(q0, k0, v0, top_k=9))
case("topk_attention", "causal 'y'", lambda: al.topk_attention(q0, k0, v0, top_k=2, causal="y"))
case("topk_indices", "q a list", lambda: al.topk_indices(q0.tolist(), k0, top_k=2))
case("topk_indices", "top_k 0", lambda: al.topk_indices(q0, k0, top_k=0))
case("topk_indices", "d differ", lambda: al.topk_indices(q0, t(1, 2, 8, 3), top_k=2))
case("cluster_attention", "num_clusters 0", lambda: al.cluster_attention(q0, k0, v0, num_clusters=0))
case("cluster_attention", "return_clusters 'yes'",
     lambda: al.cluster_attention(q0, k0, v0, num_clusters=2, return_clusters="yes"))
case("kmeans_clusters", "num_clusters 0", lambda: al.kmeans_clusters(q0, k0, num_clusters=0))
case("performer_attention", "num_features 0", lambda: al.performer_attention(q0, k0, v0, num_features=0))
case("performer_attention", "causal 'y'", lambda: al.performer_attention(q0, k0, v0, num_features=4, causal="y"))
case("performer_attention", "orthogonal 'y'",
     lambda: al.performer_attention(q0, k0, v0, num_features=4, orthogonal="y"))
case("performer_feature_map", "x a list", lambda: al.performer_feature_map(q0.tolist(), t(8, 4)))
case("performer_feature_map", "projection d wrong", lambda: al.performer_feature_map(q0, t(8, 3)))
case("performer_feature_map", "projection rank 1", lambda: al.performer_feature_map(q0, t(8)))
case("performer_feature_map", "stabilise 'nope'", lambda: al.performer_feature_map(q0, t(8, 4), stabilise="nope"))
case("performer_projection", "head_dim 0", lambda: al.performer_projection(0, 8))
case("performer_projection", "num_features -1", lambda: al.performer_projection(4, -1))
case("performer_projection", "int dtype", lambda: al.performer_projection(4, 8, dtype=torch.long))
case("performer_projection", "device 'gpu'", lambda: al.performer_projection(4, 8, device="gpu"))
case("performer_projection", "absent device", lambda: al.performer_projection(4, 8, device=absent_device()))
case("linear_attention", "feature_map 'nope'", lambda: al.linear_attention(q0, k0, v0, feature_map="nope"))
case("linear_attention", "causal 'y'", lambda: al.linear_attention(q0, k0, v0, causal="y"))
case("LinearAttentionState", "feature_map 'nope'", lambda: al.LinearAttentionState(feature_map="nope"))
state = al.LinearAttentionState()
state.attend(t(1, 2, 1, 4), t(1, 2, 1, 4), t(1, 2, 1, 4))
case("LinearAttentionState.attend", "d changes", lambda: state.attend(t(1, 2, 1, 3), t(1, 2, 1, 3), t(1, 2, 1, 3)),
     state)
case("LinearAttentionState.attend", "q a list", lambda: state.attend(t(1, 2, 1, 4).tolist(), t(1, 2, 1, 4),
                                                                      t(1, 2, 1, 4)), state)
case("attention_within_clusters", "clusters float",
     lambda: al.attention_within_clusters(q0, k0, v0, torch.zeros(1, 2, 8), torch.zeros(1, 2, 8)))
case("attention_within_clusters", "clusters wrong shape",
     lambda: al.attention_within_clusters(q0, k0, v0, torch.zeros(1, 2, 3, dtype=torch.long),
                                          torch.zeros(1, 2, 8, dtype=torch.long)))
e_proj = t(3, 8)
case("linformer_attention", "e_proj and f_proj ranks differ",
     lambda: al.linformer_attention(q0, k0, v0, e_proj, t(2, 8)))
case("linformer_attention", "e_proj wrong n", lambda: al.linformer_attention(q0, k0, v0, t(3, 7), t(3, 7)))
case("linformer_attention", "e_proj a list", lambda: al.linformer_attention(q0, k0, v0, e_proj.tolist(), e_proj))
case("synthesizer_attention", "scores int", lambda: al.synthesizer_attention(torch.ones(8, 8, dtype=torch.long), v0))
case("synthesizer_attention", "causal 'y'", lambda: al.synthesizer_attention(t(8, 8), v0, causal="y"))

# --- scores, softmax, sdpa options
s0 = t(2, 5, 6)
case("attention_scores", "q a list", lambda: al.attention_scores(q0.tolist(), k0))
case("attention_scores", "scale 0", lambda: al.attention_scores(q0, k0, scale=0.0))
case("attention_scores", "scale NaN", lambda: al.attention_scores(q0, k0, scale=math.nan))
case("attention_scores", "scale a string", lambda: al.attention_scores(q0, k0, scale="1"))
case("masked_softmax", "scores a list", lambda: al.masked_softmax(s0.tolist()))
case("masked_softmax", "scores int", lambda: al.masked_softmax(s0.long()))
case("masked_softmax", "dim out of range", lambda: al.masked_softmax(s0, dim=5))
case("masked_softmax", "dim a string", lambda: al.masked_softmax(s0, dim="j"))
case("masked_softmax", "int mask", lambda: al.masked_softmax(s0, torch.ones(5, 6, dtype=torch.long)))
case("masked_softmax", "mask wrong shape", lambda: al.masked_softmax(s0, torch.ones(4, 6, dtype=torch.bool)))
case("scaled_dot_product_attention", "dropout_p 1.5",
     lambda: al.scaled_dot_product_attention(q0, k0, v0, dropout_p=1.5))
case("scaled_dot_product_attention", "dropout_p NaN",
     lambda: al.scaled_dot_product_attention(q0, k0, v0, dropout_p=math.nan))
case("scaled_dot_product_attention", "int mask",
     lambda: al.scaled_dot_product_attention(q0, k0, v0, torch.ones(8, 8, dtype=torch.long)))
case("scaled_dot_product_attention", "mask a list",
     lambda: al.scaled_dot_product_attention(q0, k0, v0, [[True] * 8] * 8))

# --- mask builders and converters
bool_mask = torch.ones(5, 6, dtype=torch.bool)
for n_q in (0, -1, 2.5, "3", None):
    case("causal_mask", f"n_queries {n_q!r}", lambda n_q=n_q: al.causal_mask(n_q))
case("causal_mask", "n_keys 0", lambda: al.causal_mask(3, 0))
case("causal_mask", "device 'gpu'", lambda: al.causal_mask(3, device="gpu"))
case("causal_mask", "absent device", lambda: al.causal_mask(3, device=absent_device()))
case("sliding_window_mask", "window 0", lambda: al.sliding_window_mask(4, 0))
case("sliding_window_mask", "n 0", lambda: al.sliding_window_mask(0, 2))
case("sliding_window_mask", "causal 'y'", lambda: al.sliding_window_mask(4, 2, causal="y"))
case("sliding_window_mask", "device 'gpu'", lambda: al.sliding_window_mask(4, 2, device="gpu"))
case("sliding_window_mask", "absent device", lambda: al.sliding_window_mask(4, 2, device=absent_device()))
case("padding_mask", "negative length", lambda: al.padding_mask([3, -1]))
case("padding_mask", "length past max_len", lambda: al.padding_mask([3, 5], max_len=4))
case("padding_mask", "float lengths", lambda: al.padding_mask(torch.tensor([1.5, 2.0])))
case("padding_mask", "lengths a string", lambda: al.padding_mask("34"))
case("combine_masks", "float mask", lambda: al.combine_masks(bool_mask, bool_mask.float()))
case("combine_masks", "shapes do not broadcast", lambda: al.combine_masks(bool_mask, torch.ones(4, 6, dtype=bool)))
case("combine_masks", "a list", lambda: al.combine_masks(bool_mask, [[True]]))
case("expand_mask", "batch 0", lambda: al.expand_mask(bool_mask, 0, 2))
case("expand_mask", "heads a string", lambda: al.expand_mask(bool_mask, 1, "2"))
case("expand_mask", "float mask", lambda: al.expand_mask(bool_mask.float(), 1, 2))
case("as_key_mask", "rank 3", lambda: al.as_key_mask(torch.ones(2, 3, 4, dtype=bool)))
case("as_key_mask", "int mask", lambda: al.as_key_mask(torch.ones(2, 3, dtype=torch.long)))
case("from_additive_mask", "bool mask", lambda: al.from_additive_mask(bool_mask))
case("from_additive_mask", "NaN in mask", lambda: al.from_additive_mask(torch.full((2, 2), math.nan)))
case("from_additive_mask", "positive values", lambda: al.from_additive_mask(torch.ones(2, 2)))
case("from_keep_ones", "values 0/2", lambda: al.from_keep_ones(torch.tensor([[0.0, 2.0]])))
case("from_keep_ones", "a list", lambda: al.from_keep_ones([[0, 1]]))
case("from_torch_attn_mask", "int mask", lambda: al.from_torch_attn_mask(torch.ones(2, 2, dtype=torch.long)))
case("from_torch_attn_mask", "num_heads 0", lambda: al.from_torch_attn_mask(bool_mask, num_heads=0))
case("from_torch_padding_mask", "rank 3", lambda: al.from_torch_padding_mask(torch.ones(2, 3, 4, dtype=bool)))
case("to_additive_mask", "float mask", lambda: al.to_additive_mask(bool_mask.float()))
case("to_additive_mask", "int dtype", lambda: al.to_additive_mask(bool_mask, dtype=torch.long))
case("to_torch_attn_mask", "float mask", lambda: al.to_torch_attn_mask(bool_mask.float()))
case("to_torch_attn_mask", "num_heads -1", lambda: al.to_torch_attn_mask(bool_mask, num_heads=-1))
case("to_torch_padding_mask", "rank 2 not a key mask", lambda: al.to_torch_padding_mask(bool_mask.float()))
case("sinusoidal_positions", "n 0", lambda: al.sinusoidal_positions(0, 4))
case("sinusoidal_positions", "d -2", lambda: al.sinusoidal_positions(4, -2))
case("sinusoidal_positions", "base NaN", lambda: al.sinusoidal_positions(4, 4, base=math.nan))
case("sinusoidal_positions", "int dtype", lambda: al.sinusoidal_positions(4, 4, dtype=torch.long))
case("sinusoidal_positions", "device 'gpu'", lambda: al.sinusoidal_positions(4, 4, device="gpu"))
case("sinusoidal_positions", "absent device", lambda: al.sinusoidal_positions(4, 4, device=absent_device()))
case("apply_rope", "odd d", lambda: al.apply_rope(t(1, 4, 3), torch.arange(4)))
case("apply_rope", "float positions", lambda: al.apply_rope(t(1, 4, 4), torch.arange(4.0)))
case("apply_rope", "positions wrong length", lambda: al.apply_rope(t(1, 4, 4), torch.arange(5)))
case("apply_rope", "x int", lambda: al.apply_rope(torch.ones(1, 4, 4, dtype=torch.long), torch.arange(4)))

# --- block-sparse
case("BlockLayout", "rule not callable", lambda: al.BlockLayout(2, "diag", "diag"))
case("BlockLayout", "name not a string", lambda: al.BlockLayout(2, lambda nb: torch.eye(nb, dtype=torch.bool), 3))
case("BlockLayout", "block_size 0", lambda: al.BlockLayout(0, lambda nb: torch.eye(nb, dtype=torch.bool), "diag"))
bad_rule = al.BlockLayout(2, lambda nb: torch.ones(nb, dtype=torch.bool), "bad rule")
float_rule = al.BlockLayout(2, lambda nb: torch.eye(nb), "float rule")
case("block_sparse_attention", "custom rule breaks its contract (shape)",
     lambda: al.block_sparse_attention(q0, k0, v0, bad_rule))
case("block_sparse_attention", "custom rule breaks its contract (dtype)",
     lambda: al.block_sparse_attention(q0, k0, v0, float_rule))
case("block_sparse_attention", "layout a string", lambda: al.block_sparse_attention(q0, k0, v0, "local"))
case("block_sparse_attention", "one layout per head, wrong count",
     lambda: al.block_sparse_attention(q0, k0, v0, [al.BlockLayout.sliding_window(2, 1)] * 3))
case("BlockLayout.sliding_window", "neighbours -1", lambda: al.BlockLayout.sliding_window(2, -1))
case("BlockLayout.strided", "stride 0", lambda: al.BlockLayout.strided(2, 0))
case("BlockLayout.random", "seed a string", lambda: al.BlockLayout.random(2, 1, seed="0"))

# --- modules
case("SelfAttention", "embed_dim 0", lambda: al.SelfAttention(0))
case("SelfAttention", "bias 'no'", lambda: al.SelfAttention(4, bias="no"))
sa = al.SelfAttention(4)
x0 = t(2, 5, 4)
case("SelfAttention.forward", "x rank 2 wrong e", lambda: sa(t(5, 3)), sa)
case("SelfAttention.forward", "need_weights 'yes'", lambda: sa(x0, need_weights="yes"), sa)
case("SelfAttention.forward", "x int", lambda: sa(x0.long()), sa)
case("MultiHeadAttention", "heads do not divide", lambda: al.MultiHeadAttention(6, 4))
case("MultiHeadAttention", "num_heads 0", lambda: al.MultiHeadAttention(6, 0))
mha = al.MultiHeadAttention(8, 2)
case("MultiHeadAttention.forward", "need_weights 'yes'", lambda: mha(t(2, 5, 8), need_weights="yes"), mha)
case("MultiHeadAttention.forward", "e wrong", lambda: mha(t(2, 5, 6)), mha)
case("MultiHeadAttention.forward", "float 0/1 mask", lambda: mha(t(2, 5, 8), mask=torch.ones(5, 5)), mha)
case("MultiHeadAttention.to_torch", "batch_first 'no'", lambda: mha.to_torch(batch_first="no"), mha)
case("MultiHeadAttention.from_torch", "not a module", lambda: al.MultiHeadAttention.from_torch("mha"))
case("LinformerSelfAttention", "rank 0", lambda: al.LinformerSelfAttention(8, 2, 8, 0))
lin = al.LinformerSelfAttention(8, 2, 8, 4)
case("LinformerSelfAttention.forward", "n past seq_len", lambda: lin(t(1, 9, 8)), lin)
case("LinformerSelfAttention.forward", "need_weights 'yes'", lambda: lin(t(1, 8, 8), need_weights="yes"), lin)
case("SynthesizerAttention", "kind 'nope'", lambda: al.SynthesizerAttention(8, 8, kind="nope"))
case("SynthesizerAttention", "causal 'y'", lambda: al.SynthesizerAttention(8, 8, causal="y"))
syn = al.SynthesizerAttention(8, 8)
case("SynthesizerAttention.forward", "n past seq_len", lambda: syn(t(1, 9, 8)), syn)
case("HeadwiseAttention", "causal 'y'",
     lambda: al.HeadwiseAttention(8, 2, "linear", al.linear_attention, causal="y"))
case("HeadwiseAttention", "attend not callable", lambda: al.HeadwiseAttention(8, 2, "linear", "attend", causal=False))
hw = al.HeadwiseAttention(8, 2, "linear", al.linear_attention, causal=False)
case("HeadwiseAttention.forward", "need_weights 'yes'", lambda: hw(t(1, 4, 8), need_weights="yes"), hw)
case("HeadwiseAttention.forward", "x wrong e", lambda: hw(t(1, 4, 6)), hw)
case("GroupedQueryAttention", "kv heads do not divide", lambda: al.GroupedQueryAttention(8, 4, 3))
case("GroupedQueryAttention", "causal 'y'", lambda: al.GroupedQueryAttention(8, 4, 2, causal="y"))
case("GroupedQueryAttention", "rope 'y'", lambda: al.GroupedQueryAttention(8, 4, 2, rope="y"))
gqa = al.GroupedQueryAttention(8, 4, 2)
gqa_enc = al.GroupedQueryAttention(8, 4, 2, causal=False)
x8 = t(1, 4, 8)
case("GroupedQueryAttention.forward", "need_weights 'yes'", lambda: gqa(x8, need_weights="yes"), gqa)
case("GroupedQueryAttention.forward", "float mask", lambda: gqa_enc(x8, mask=torch.ones(4, 4)), gqa_enc)
case("GroupedQueryAttention.forward", "int mask", lambda: gqa_enc(x8, mask=torch.ones(4, 4, dtype=torch.long)),
     gqa_enc)
case("GroupedQueryAttention.forward", "mask a list", lambda: gqa_enc(x8, mask=[[True] * 4] * 4), gqa_enc)
cache_full = gqa.new_cache(1, 4)
gqa(x8, cache=cache_full)
case("GroupedQueryAttention.forward", "cache overflow", lambda: gqa(x8, cache=cache_full), gqa, cache_full)
case("GroupedQueryAttention.forward", "cache a string", lambda: gqa(x8, cache="kv"), gqa)
case("GroupedQueryAttention.new_cache", "kind 'nope'", lambda: gqa.new_cache(1, 4, kind="nope"), gqa)
case("GroupedQueryAttention.new_cache", "batch_size 0", lambda: gqa.new_cache(0, 4), gqa)
case("GroupedQueryAttention.new_cache", "encoder", lambda: gqa_enc.new_cache(1, 4), gqa_enc)
case("MultiHeadLatentAttention", "latent_dim 0", lambda: al.MultiHeadLatentAttention(8, 2, 0))
mla = al.MultiHeadLatentAttention(8, 2, 4)
case("MultiHeadLatentAttention.forward", "x int", lambda: mla(x8.long()), mla)

# --- caches
for cls, args in ((al.KVCache, (1, 2, 4, 4)), (al.SlidingWindowKVCache, (1, 2, 2, 4)), (al.ConcatKVCache, (1, 2, 4)),
                  (al.LatentCache, (1, 4, 4))):
    name = cls.__name__
    case(name, "batch_size 0", lambda cls=cls, args=args: cls(0, *args[1:]))
    case(name, "device 'gpu'", lambda cls=cls, args=args: cls(*args, device="gpu"))
    case(name, "absent device", lambda cls=cls, args=args: cls(*args, device=absent_device()))
    case(name, "int dtype", lambda cls=cls, args=args: cls(*args, dtype=torch.long))
    case(name, "dtype a string", lambda cls=cls, args=args: cls(*args, dtype="float32"))
kv = al.KVCache(1, 2, 4, 4)
kv.append(t(1, 2, 3, 4), t(1, 2, 3, 4))
case("KVCache.append", "overflow", lambda: kv.append(t(1, 2, 2, 4), t(1, 2, 2, 4)), kv)
case("KVCache.append", "k and v differ", lambda: kv.append(t(1, 2, 1, 4), t(1, 2, 2, 4)), kv)
case("KVCache.append", "int k", lambda: kv.append(torch.ones(1, 2, 1, 4, dtype=torch.long), t(1, 2, 1, 4)), kv)
case("KVCache.append", "k a list", lambda: kv.append(t(1, 2, 1, 4).tolist(), t(1, 2, 1, 4)), kv)
lc = al.LatentCache(1, 2, 4)
lc.append(t(1, 2, 4))
case("LatentCache.append", "overflow", lambda: lc.append(t(1, 1, 4)), lc)
case("kv_cache_bytes", "num_layers 0", lambda: al.kv_cache_bytes(num_layers=0, num_kv_heads=1, head_dim=4, seq_len=4))
case("kv_cache_bytes", "latent_dim 0", lambda: al.kv_cache_bytes(num_layers=1, num_kv_heads=1, head_dim=4,
                                                                   seq_len=4, latent_dim=0))
case("count_flops", "fn not callable", lambda: al.count_flops("sdpa"))

# --- runtime, i18n
case("seed_everything", "seed past 64 bits", lambda: al.seed_everything(2 ** 70))
case("seed_everything", "seed negative", lambda: al.seed_everything(-1))
case("seed_everything", "seed a string", lambda: al.seed_everything("0"))
case("seed_everything", "seed a float", lambda: al.seed_everything(1.5))
case("set_language", "code 'fr'", lambda: al.set_language("fr"))

# --- models
CFG = dict(vocab_size=11, max_len=8, d_model=8, num_heads=2, num_layers=2)
TC = transformer.TransformerConfig
case("TransformerConfig", "vocab_size 0", lambda: TC(**{**CFG, "vocab_size": 0}))
case("TransformerConfig", "heads do not divide", lambda: TC(**{**CFG, "num_heads": 3}))
case("TransformerConfig", "causal 'y'", lambda: TC(**CFG, causal="y"))
case("TransformerConfig", "norm 'mid'", lambda: TC(**CFG, norm="mid"))
case("TransformerConfig", "attention 'nope'", lambda: TC(**CFG, attention="nope"))
case("attention_spec", "linear feature_map 'nope'",
     lambda: attention_choice.attention_spec("linear", feature_map="nope"))
case("attention_spec", "cluster num_clusters 0", lambda: attention_choice.attention_spec("cluster", num_clusters=0))
case("attention_spec", "topk top_k -1", lambda: attention_choice.attention_spec("topk", top_k=-1))
case("attention_spec", "performer num_features 'x'",
     lambda: attention_choice.attention_spec("performer", num_features="x"))
case("attention_spec", "unknown option", lambda: attention_choice.attention_spec("linear", window=3))
case("attention_spec", "unknown name", lambda: attention_choice.attention_spec("nope"))
torch.manual_seed(0)
dec = transformer.TinyTransformer(TC(**CFG, causal=True))
enc = transformer.TinyTransformer(TC(**CFG))
tok = torch.randint(0, 11, (1, 4))
case("TinyTransformer.forward", "return_attention 'yes'", lambda: dec(tok, return_attention="yes"), dec)
case("TinyTransformer.forward", "token past vocab", lambda: dec(torch.tensor([[1, 11]])), dec)
case("TinyTransformer.forward", "sequence past max_len", lambda: dec(torch.zeros(1, 9, dtype=torch.long)), dec)
case("TinyTransformer.forward", "float tokens", lambda: dec(tok.float()), dec)
case("TinyTransformer.forward", "tokens a list", lambda: dec(tok.tolist()), dec)
case("TinyTransformer.forward", "wrong number of caches", lambda: dec(tok, caches=dec.new_caches(1, 8)[:1]), dec)
caches = dec.new_caches(1, 8)
dec(torch.zeros(1, 6, dtype=torch.long), caches=caches)
caches[1].append(t(1, 2, 1, 4), t(1, 2, 1, 4))  # layer 1 holds one more position than layer 0: layer 1 overflows first
case("TinyTransformer.forward", "cache overflow at the last layer",
     lambda: dec(torch.zeros(1, 2, dtype=torch.long), caches=caches), dec, *caches)
case("TinyTransformer.new_caches", "encoder", lambda: enc.new_caches(1, 8), enc)
case("TinyTransformer.new_caches", "max_len past the model's", lambda: dec.new_caches(1, 9), dec)
case("TinyTransformer.new_caches", "kind 'nope'", lambda: dec.new_caches(1, 8, kind="nope"), dec)
case("TinyTransformer.generate", "token past vocab", lambda: dec.generate(torch.tensor([[1, 12]]), 2), dec)
case("TinyTransformer.generate", "max_new_tokens -1", lambda: dec.generate(tok, -1), dec)
case("TinyTransformer.generate", "use_cache 'yes'", lambda: dec.generate(tok, 2, use_cache="yes"), dec)
case("TinyTransformer.generate", "encoder", lambda: enc.generate(tok, 2), enc)
case("decode", "token past vocab", lambda: generate.decode(dec, torch.tensor([[1, -1]]), 2), dec)
case("decode", "cache 'nope'", lambda: generate.decode(dec, tok, 2, cache="nope"), dec)
case("decode", "model a string", lambda: generate.decode("model", tok, 2))
case("decode", "window 0", lambda: generate.decode(dec, tok, 2, cache="sliding", window=0), dec)
case("Repeat", "seq_len 0", lambda: tasks.Repeat(seq_len=0))
case("TriggerCopy", "n_triggers past n_symbols", lambda: tasks.TriggerCopy(n_symbols=4, n_triggers=4))

# --- lesson 14: sink logits, soft-capping, QK-norm, the output gate, the sink cache
qkv_cases("attention_with_sinks", lambda q, k, v: al.attention_with_sinks(
    q, k, v, torch.zeros(2, dtype=q.dtype) if isinstance(q, torch.Tensor) and q.is_floating_point()
    else torch.zeros(2)), empty=False)
s3 = t(1, 2, 3, 4)
case("softmax_with_sinks", "one sink for two heads", lambda: al.softmax_with_sinks(s3, torch.zeros(1)), s3)
case("softmax_with_sinks", "sink -inf", lambda: al.softmax_with_sinks(s3, torch.full((2,), -math.inf)), s3)
case("softmax_with_sinks", "no heads axis", lambda: al.softmax_with_sinks(t(3, 4), torch.zeros(3)))
case("softmax_with_sinks", "float mask", lambda: al.softmax_with_sinks(s3, torch.zeros(2), torch.ones(3, 4)), s3)
case("softcap", "cap 0", lambda: al.softcap(s3, 0), s3)
case("softcap", "cap NaN", lambda: al.softcap(s3, math.nan), s3)
case("softcap", "cap a string", lambda: al.softcap(s3, "50"), s3)
case("softcap", "int scores", lambda: al.softcap(torch.ones(3, dtype=torch.long), 5.0))
case("qk_norm", "gain of the wrong size", lambda: al.qk_norm(q0, k0, torch.ones(3), torch.ones(4)), q0)
case("qk_norm", "eps 0", lambda: al.qk_norm(q0, k0, torch.ones(4), torch.ones(4), eps=0.0), q0)
case("QKNorm", "head_dim 0", lambda: al.QKNorm(0))
case("gate_heads", "gate of the wrong size", lambda: al.gate_heads(q0, t(1, 2, 8, 3)), q0)
case("OutputGate", "heads do not divide", lambda: al.OutputGate(10, 3))
case("OutputGate", "per_head 'y'", lambda: al.OutputGate(8, 2, per_head="y"))
case("SinkKVCache", "window 0", lambda: al.SinkKVCache(1, 2, 1, 0, 4))
case("SinkKVCache", "sinks -1", lambda: al.SinkKVCache(1, 2, -1, 4, 4))
sink_cache = al.SinkKVCache(1, 2, 1, 2, 4)
sink_cache.append(t(1, 2, 3, 4), t(1, 2, 3, 4))
case("SinkKVCache.append", "a chunk once full", lambda: sink_cache.append(t(1, 2, 2, 4), t(1, 2, 2, 4)), sink_cache)
case("GroupedQueryAttention", "softcap 0", lambda: al.GroupedQueryAttention(8, 2, 2, softcap=0.0))
case("GroupedQueryAttention", "qk_norm 1", lambda: al.GroupedQueryAttention(8, 2, 2, qk_norm=1))
case("make_optimizer", "optimizer 'nope'", lambda: training.make_optimizer(dec, "nope", lr=1e-3), dec)
case("train", "steps 0", lambda: training.train(dec, tasks.Repeat(seq_len=4), steps=0, lr=1e-3, progress=False), dec)
case("train", "lr NaN", lambda: training.train(dec, tasks.Repeat(seq_len=4), steps=1, lr=math.nan, progress=False),
     dec)
voc, ids = text_corpus.CharVocabulary("ab(b)"), torch.tensor([1, 2, 1, 3, 2, 4])
case("read_stdlib", "one module in both lists", lambda: text_corpus.read_stdlib(("abc",), ("abc",)))
case("read_stdlib", "a string, not a list", lambda: text_corpus.read_stdlib("abc"))
case("CharVocabulary", "empty text", lambda: text_corpus.CharVocabulary(""))
case("CharVocabulary.encode", "a number", lambda: voc.encode(3), voc)
case("CharVocabulary.decode", "id past the vocabulary", lambda: voc.decode(torch.tensor([9])), voc)
case("TextWindows", "seq_len past the ids", lambda: text_corpus.TextWindows(ids, 8), ids)
case("TextWindows.sample", "batch_size 0", lambda: text_corpus.TextWindows(ids, 2).sample(0), ids)
case("ngram_bits_per_char", "order 0", lambda: text_corpus.ngram_bits_per_char(ids, ids, order=0, vocab_size=5), ids)
ngram = text_corpus.ngram_bits_per_char
case("ngram_bits_per_char", "alpha 0", lambda: ngram(ids, ids, order=2, vocab_size=5, alpha=0), ids)
case("ngram_bits_per_char", "float ids", lambda: ngram(ids.float(), ids, order=1, vocab_size=5))
case("bracket_pairs", "a list", lambda: text_corpus.bracket_pairs(["(", ")"]))

# --- analysis, measure, plotting
att = torch.softmax(t(2, 1, 4, 4), dim=-1)
case("attention_rollout", "zero layers", lambda: analysis.attention_rollout(att[:0]))
case("attention_rollout", "raw scores", lambda: analysis.attention_rollout(t(2, 1, 4, 4)))
case("attention_rollout", "residual 2", lambda: analysis.attention_rollout(att, residual=2.0))
case("attention_rollout", "not square", lambda: analysis.attention_rollout(att[..., :3]))
case("format_bytes", "a string", lambda: memory.format_bytes("12"))
case("format_bytes", "NaN", lambda: memory.format_bytes(math.nan))
case("format_bytes", "inf", lambda: memory.format_bytes(math.inf))
case("measure_peak_memory", "fn not callable", lambda: memory.measure_peak_memory("f"))
case("measure_peak_memory", "device 'gpu'", lambda: memory.measure_peak_memory(lambda: None, device="gpu"))
case("attention_flops", "n_queries 0", lambda: cost.attention_flops(0, head_dim=4))
case("attention_memory_bytes", "dtype a string", lambda: cost.attention_memory_bytes(4, head_dim=4, dtype="f"))
case("fit_slope", "lengths and times differ", lambda: conclusions.fit_slope([1, 2, 3], [1.0, 2.0]))
case("fit_slope", "NaN time", lambda: conclusions.fit_slope([1, 2, 3], [1.0, math.nan, 2.0]))
case("crossover", "ratios a string", lambda: conclusions.crossover([1, 2], "ab"))

# --- images (lesson 13)
vit, cnn = vision.TinyViT(), vision.TinyCNN()
case("patchify", "patch 3 on 8 x 8", lambda: vision.patchify(t(2, 8, 8), 3))
case("patchify", "one image, no batch axis", lambda: vision.patchify(t(8, 8), 2))
case("patchify", "integer pixels", lambda: vision.patchify(torch.zeros(1, 8, 8, dtype=torch.long), 2))
case("patchify", "patch 0", lambda: vision.patchify(t(1, 8, 8), 0))
case("unpatchify", "sizes of other images", lambda: vision.unpatchify(t(1, 16, 4), 6, 6, 2))
case("TinyViT", "patch that does not divide", lambda: vision.TinyViT(image_size=8, patch=3))
case("TinyViT.forward", "images of another size", lambda: vit(t(2, 6, 6)), vit)
case("TinyViT.forward", "need_weights 'yes'", lambda: vit(t(2, 8, 8), need_weights="yes"), vit)
case("TinyCNN.forward", "need_weights True", lambda: cnn(t(2, 8, 8), need_weights=True), cnn)
case("conv_as_attention", "channels differ", lambda: conv_attention.conv_as_attention(t(1, 2, 4, 4), t(3, 1, 3, 3)))
case("conv_as_attention", "even kernel", lambda: conv_attention.conv_as_attention(t(1, 1, 4, 4), t(3, 1, 2, 2)))
case("offset_weights", "float offset", lambda: conv_attention.offset_weights(3, 3, 1.0, 0))
case("training_subset", "float labels", lambda: digits.training_subset(t(10), 0.5))
case("training_subset", "fraction 0", lambda: digits.training_subset(torch.arange(10), 0.0))
case("train_classifier", "labels of other images", lambda: digits.train_classifier(cnn, t(4, 8, 8), torch.arange(3),
                                                                                     steps=1), cnn)
case("accuracy", "labels of other images", lambda: digits.accuracy(cnn, t(4, 8, 8), torch.arange(3)))


def plotting_cases() -> None:
    from attention_lab import plotting

    w = torch.softmax(t(4, 4), dim=-1)
    case("plot_attention", "ax a string", lambda: plotting.plot_attention(w, ax="ax"))
    case("plot_attention", "weights rank 3", lambda: plotting.plot_attention(t(2, 4, 4)))
    case("plot_attention", "labels wrong length", lambda: plotting.plot_attention(w, ["a", "b"]))
    case("plot_mask", "ax a string", lambda: plotting.plot_mask(bool_mask, ax="ax"))
    case("plot_mask", "float mask", lambda: plotting.plot_mask(bool_mask.float()))
    case("plot_positions", "ax a string", lambda: plotting.plot_positions(t(4, 4), ax="ax"))
    case("plot_heads", "ax a string", lambda: plotting.plot_heads(t(2, 4, 4), ax="ax"))
    case("plot_time_vs_length", "lengths and times differ",
         lambda: plotting.plot_time_vs_length([1, 2, 3], {"a": [1.0, 2.0]}))
    case("plot_time_vs_length", "ax a string",
         lambda: plotting.plot_time_vs_length([1, 2, 3], {"a": [1.0, 2.0, 4.0]}, ax="ax"))
    case("plot_memory_vs_length", "ax a string",
         lambda: plotting.plot_memory_vs_length([1, 2], {"a": [1, 2]}, ax="ax"))
    case("plot_bench", "rows missing keys", lambda: plotting.plot_bench([{"n": 1}]))
    case("plot_ratio_sweep", "rows missing keys", lambda: plotting.plot_ratio_sweep([{"n": 1}]))
    case("plot_lra_bubbles", "rows missing keys", lambda: plotting.plot_lra_bubbles({"task": [{"x": 1}]}))
    case("plot_block_layout", "layout a string", lambda: plotting.plot_block_layout("local", 8))
    case("plot_block_layout", "n 0", lambda: plotting.plot_block_layout(al.BlockLayout.sliding_window(2, 1), 0))
    case("plot_rollout", "residual 2", lambda: plotting.plot_rollout(att, residual=2.0))
    case("plot_cache_memory", "ax a string", lambda: plotting.plot_cache_memory([1, 2], {"a": [1, 2]}, ax="ax"))
    case("plot_steps", "ax a string", lambda: plotting.plot_steps({"a": [1.0, 2.0]}, ylabel="y", ax="ax"))
    case("position_labels", "labels a string", lambda: plotting.position_labels(3))


plotting_cases()


# --- classification
def fingerprint(obj: object, depth: int = 0) -> object:
    """A copy of everything observable of ``obj``: tensors cloned, a module's state and attributes, an object's vars."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, nn.Module):
        return ({k: v.detach().clone() for k, v in obj.state_dict().items()},
                {k: fingerprint(v, depth + 1) for k, v in vars(obj).items() if not k.startswith("_")})
    if isinstance(obj, (list, tuple)) and depth < 4:
        return [fingerprint(x, depth + 1) for x in obj]
    if isinstance(obj, dict) and depth < 4:
        return {k: fingerprint(v, depth + 1) for k, v in obj.items()}
    if hasattr(obj, "__dict__") and depth < 4 and not isinstance(obj, type):
        return {k: fingerprint(v, depth + 1) for k, v in vars(obj).items()}
    try:
        return copy.deepcopy(obj)
    except Exception:
        return repr(obj)


def same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num()))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return True


def parts_missing(fn: str, message: str) -> list[str]:
    missing = []
    if not message.startswith(f"{fn}()"):
        missing.append("name first")
    if "must" not in message and "expected" not in message:
        missing.append("expected")
    got = message.find("got")
    if got < 0:
        missing.append("got")
    if ";" not in message[max(got, 0):]:
        missing.append("fix")
    return missing


def empty_ok(result: object) -> bool:
    out = result[0] if isinstance(result, tuple) else result
    return isinstance(out, torch.Tensor) and (out.numel() == 0 or bool((out == 0).all()))


def classify(fn: str, call: Callable[[], object], watch: list[object], expect: str) -> tuple[str, str]:
    before = [fingerprint(w) for w in watch]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call()
        except (ValueError, TypeError) as error:
            message = str(error)
            if not all(same(b, fingerprint(w)) for b, w in zip(before, watch)):
                return "state", message
            if expect == "empty":
                return "raw", f"{type(error).__name__}: {message}"
            missing = parts_missing(fn, message)
            return ("ok" if not missing else "lacks " + ", ".join(missing)), message
        except Exception as error:
            return "raw", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if expect == "empty":
        return ("ok", "empty output") if empty_ok(result) else ("silent", f"result {type(result).__name__}")
    return "silent", f"returned {type(result).__name__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every call, not only those that fell short")
    args = parser.parse_args(argv)
    counts: Counter[str] = Counter()
    lacking: Counter[str] = Counter()
    lines = []
    for fn, label, call, watch, expect in CASES:
        verdict, message = classify(fn, call, watch, expect)
        key = "lacks a part" if verdict.startswith("lacks") else verdict
        counts[key] += 1
        if key == "lacks a part":
            for part in verdict.removeprefix("lacks ").split(", "):
                lacking[part] += 1
        if args.all or verdict != "ok":
            lines.append(f"{verdict:<28} {fn} [{label}]: {message[:200]}")
    callables = len({fn for fn, *_ in CASES})
    print("\n".join(lines))
    print(f"\n{len(CASES)} calls to {callables} callables: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if lacking:
        print("parts lacking: " + ", ".join(f"{k} {v}" for k, v in sorted(lacking.items())))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
