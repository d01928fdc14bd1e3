"""Bad input, drawn with Hypothesis, at every public callable: each gets the library's own error (ValueError or
TypeError), whose message starts with the name of the function called, and a failed call changes no object.

The classes of issue 35: things that are not tensors, wrong dtypes and ranks, sizes <= 0, flags that are not bools,
device strings this machine does not have, seeds past 64 bits, caches that overflow, tokens outside the vocabulary.
Empty batches, queries or keys are not bad input: every attention gives an empty output or zeros, as SDPA does.
A float mask of only 0s and 1s where a mask is read as additive gets a warning naming both readings.
``tools/bad_input_audit.py`` throws the same classes by hand and counts what falls short.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention_lab as al
from attention_lab import analysis, plotting
from attention_lab.measure import memory
from attention_lab.models import attention_choice, generate, transformer

FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

ATTENTIONS = {
    "scaled_dot_product_attention": lambda q, k, v: al.scaled_dot_product_attention(q, k, v)[0],
    "blockwise_attention": lambda q, k, v: al.blockwise_attention(q, k, v, block_size=2),
    "linear_attention": lambda q, k, v: al.linear_attention(q, k, v),
    "performer_attention": lambda q, k, v: al.performer_attention(q, k, v, num_features=8),
    "topk_attention": lambda q, k, v: al.topk_attention(q, k, v, top_k=2),
    "cluster_attention": lambda q, k, v: al.cluster_attention(q, k, v, num_clusters=2),
    "kernel_attention": lambda q, k, v: al.kernel_attention(q, k, v),
}


def fails_cleanly(fn: str, call, *watched: object) -> str:
    """Run ``call``; it must raise ValueError/TypeError starting with ``fn()`` and leave ``watched`` as they were."""
    before = [snapshot(x) for x in watched]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((ValueError, TypeError)) as caught:
            call()
    message = str(caught.value)
    assert message.startswith(f"{fn}()"), message
    for was, x in zip(before, watched):
        assert same(was, snapshot(x)), f"{fn}() changed an object it was given before failing"
    return message


def snapshot(x: object) -> object:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, torch.nn.Module):
        return {k: v.detach().clone() for k, v in x.state_dict().items()}
    if isinstance(x, al.KVCache | al.LatentCache | al.SlidingWindowKVCache | al.ConcatKVCache):
        return (x.offset, len(x), {k: snapshot(v) for k, v in vars(x).items() if isinstance(v, torch.Tensor)})
    raise TypeError(type(x))


def same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and torch.equal(a.nan_to_num(), b.nan_to_num())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ---- strategies
not_a_tensor = st.sampled_from([None, "q", 3, 2.5, [[1.0, 2.0]], np.ones((2, 3, 4), dtype=np.float32)])
bad_dtype = st.sampled_from([torch.long, torch.int32, torch.bool, torch.complex64])
not_a_bool = st.one_of(st.integers(-2, 2), st.sampled_from(["yes", "no", "", None, 1.0, "True"]))
not_a_size = st.one_of(st.integers(-5, 0), st.sampled_from([2.5, "3", None, True, math.nan, math.inf]))
absent_devices = ["gpu", "tpu", "cuda:99", "cpu:extra"] + ([] if torch.cuda.is_available() else ["cuda", "cuda:0"])
not_a_device = st.one_of(st.sampled_from(absent_devices), st.sampled_from([3, 1.5, ["cpu"]]))


def qkv(i: int = 5, j: int = 6, d: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.rand(2, i, d), torch.rand(2, j, d), torch.rand(2, j, d)


# ---- attentions
@FAST
@given(name=st.sampled_from(sorted(ATTENTIONS)), bad=not_a_tensor, slot=st.integers(0, 2))
def test_an_attention_refuses_what_is_not_a_tensor(name, bad, slot):
    args = list(qkv())
    args[slot] = bad
    fails_cleanly(name, lambda: ATTENTIONS[name](*args), *(a for a in args if isinstance(a, torch.Tensor)))


@FAST
@given(name=st.sampled_from(sorted(ATTENTIONS)), dtype=bad_dtype)
def test_an_attention_refuses_a_dtype_that_is_not_floating(name, dtype):
    q, k, v = (x.to(dtype) for x in qkv())
    fails_cleanly(name, lambda: ATTENTIONS[name](q, k, v), q, k, v)


@FAST
@given(name=st.sampled_from(sorted(ATTENTIONS)), d_k=st.integers(1, 6), j_v=st.integers(1, 8))
def test_an_attention_refuses_shapes_that_do_not_fit(name, d_k, j_v):
    q, k, v = torch.rand(2, 5, 4), torch.rand(2, 6, d_k), torch.rand(2, j_v, 4)
    if d_k == 4 and j_v == 6:
        return  # these fit
    fails_cleanly(name, lambda: ATTENTIONS[name](q, k, v), q, k, v)


@FAST
@given(name=st.sampled_from(sorted(ATTENTIONS)), b=st.integers(0, 2), i=st.integers(0, 3), j=st.integers(0, 3))
def test_empty_batches_queries_or_keys_give_empty_outputs_or_zeros(name, b, i, j):
    if b and i and j:
        return  # not empty
    q, k, v = torch.rand(b, i, 4), torch.rand(b, j, 4), torch.rand(b, j, 3)
    out = ATTENTIONS[name](q, k, v)
    assert out.shape == (b, i, 3)
    assert out.numel() == 0 or bool((out == 0).all())


# ---- sizes, flags, devices, seeds
SIZED = {
    "causal_mask": lambda n: al.causal_mask(n),
    "sliding_window_mask": lambda n: al.sliding_window_mask(4, n),
    "sinusoidal_positions": lambda n: al.sinusoidal_positions(n, 4),
    "KVCache": lambda n: al.KVCache(1, 2, n, 4),
    "LatentCache": lambda n: al.LatentCache(n, 4, 4),
    "SelfAttention": lambda n: al.SelfAttention(n),
    "MultiHeadAttention": lambda n: al.MultiHeadAttention(8, n),
    "performer_projection": lambda n: al.performer_projection(4, n),
    "kv_cache_bytes": lambda n: al.kv_cache_bytes(num_layers=n, num_kv_heads=1, head_dim=4, seq_len=4),
    "blockwise_attention": lambda n: al.blockwise_attention(*qkv(), block_size=n),
    "topk_attention": lambda n: al.topk_attention(*qkv(), top_k=n),
    "TransformerConfig": lambda n: transformer.TransformerConfig(vocab_size=n, max_len=8, d_model=8, num_heads=2,
                                                                 num_layers=1),
    "attention_spec": lambda n: attention_choice.attention_spec("cluster", num_clusters=n),
}


@FAST
@given(name=st.sampled_from(sorted(SIZED)), size=not_a_size)
def test_a_size_must_be_a_whole_number_at_least_one(name, size):
    message = fails_cleanly(name, lambda: SIZED[name](size))
    assert "; " in message  # and the message says how to fix it


FLAGGED = {
    "sliding_window_mask": lambda flag: al.sliding_window_mask(4, 2, causal=flag),
    "blockwise_attention": lambda flag: al.blockwise_attention(*qkv(), causal=flag),
    "linear_attention": lambda flag: al.linear_attention(*qkv(i=6), causal=flag),
    "SelfAttention.forward": lambda flag: al.SelfAttention(4)(torch.rand(1, 3, 4), need_weights=flag),
    "MultiHeadAttention.forward": lambda flag: al.MultiHeadAttention(8, 2)(torch.rand(1, 3, 8), need_weights=flag),
    "MultiHeadAttention.to_torch": lambda flag: al.MultiHeadAttention(8, 2).to_torch(batch_first=flag),
    "GroupedQueryAttention": lambda flag: al.GroupedQueryAttention(8, 4, 2, causal=flag),
    "cluster_attention": lambda flag: al.cluster_attention(*qkv(), num_clusters=2, return_clusters=flag),
    "performer_attention": lambda flag: al.performer_attention(*qkv(), num_features=4, orthogonal=flag),
    "TransformerConfig": lambda flag: transformer.TransformerConfig(vocab_size=5, max_len=8, d_model=8, num_heads=2,
                                                                    num_layers=1, causal=flag),
}


@FAST
@given(name=st.sampled_from(sorted(FLAGGED)), flag=not_a_bool)
def test_a_flag_must_be_true_or_false(name, flag):
    fails_cleanly(name, lambda: FLAGGED[name](flag))


DEVICED = {
    "causal_mask": lambda device: al.causal_mask(3, device=device),
    "sliding_window_mask": lambda device: al.sliding_window_mask(3, 1, device=device),
    "sinusoidal_positions": lambda device: al.sinusoidal_positions(3, 4, device=device),
    "performer_projection": lambda device: al.performer_projection(4, 8, device=device),
    "KVCache": lambda device: al.KVCache(1, 2, 4, 4, device=device),
    "ConcatKVCache": lambda device: al.ConcatKVCache(1, 2, 4, device=device),
    "SlidingWindowKVCache": lambda device: al.SlidingWindowKVCache(1, 2, 2, 4, device=device),
    "LatentCache": lambda device: al.LatentCache(1, 4, 4, device=device),
    "measure_peak_memory": lambda device: memory.measure_peak_memory(lambda: None, device=device),
}


@FAST
@given(name=st.sampled_from(sorted(DEVICED)), device=not_a_device)
def test_a_device_must_be_one_this_machine_has(name, device):
    fails_cleanly(name, lambda: DEVICED[name](device))


@FAST
@given(seed=st.one_of(st.integers(2**64, 2**80), st.integers(-(2**70), -1)))
def test_a_seed_must_fit_in_64_bits(seed):
    fails_cleanly("seed_everything", lambda: al.seed_everything(seed))
    fails_cleanly("performer_projection", lambda: al.performer_projection(4, 8, seed=seed))


# ---- options checked when given, names of the function called
@FAST
@given(feature_map=st.one_of(st.text(max_size=6).filter(lambda s: s not in al.FEATURE_MAPS), st.integers()))
def test_options_are_checked_when_the_spec_or_state_is_made(feature_map):
    fails_cleanly("attention_spec", lambda: attention_choice.attention_spec("linear", feature_map=feature_map))
    fails_cleanly("LinearAttentionState", lambda: al.LinearAttentionState(feature_map=feature_map))


@FAST
@given(rank_e=st.integers(1, 4), rank_f=st.integers(1, 4))
def test_linformer_refuses_projections_of_different_ranks(rank_e, rank_f):
    q, k, v = (torch.rand(1, 2, 6, 4) for _ in range(3))
    e, f = torch.rand(rank_e, 6), torch.rand(rank_f, 6)
    if rank_e == rank_f:
        assert al.linformer_attention(q, k, v, e, f).shape == (1, 2, 6, 4)
    else:
        fails_cleanly("linformer_attention", lambda: al.linformer_attention(q, k, v, e, f), q, k, v, e, f)


@FAST
@given(bad=st.sampled_from([lambda nb: torch.ones(nb, dtype=torch.bool), lambda nb: (torch.eye(nb), torch.ones(nb)),
                            lambda nb: None, lambda nb: (torch.eye(nb + 1, dtype=torch.bool),
                                                         torch.ones(nb + 1, dtype=torch.bool))]))
def test_a_custom_block_rule_that_breaks_its_contract_is_refused(bad):
    q = torch.rand(1, 1, 8, 4)
    fails_cleanly("block_sparse_attention", lambda: al.block_sparse_attention(q, q, q, al.BlockLayout(2, bad, "mine")),
                  q)


@FAST
@given(ax=st.sampled_from(["ax", 3, None.__class__, [1, 2]]))
def test_plots_refuse_an_ax_that_is_not_an_axes(ax):
    fails_cleanly("plot_attention", lambda: plotting.plot_attention(torch.eye(3), ax=ax))
    fails_cleanly("plot_mask", lambda: plotting.plot_mask(al.causal_mask(3), ax=ax))


@FAST
@given(value=st.sampled_from(["12", math.nan, math.inf, None, [1]]))
def test_format_bytes_takes_a_finite_number(value):
    fails_cleanly("format_bytes", lambda: memory.format_bytes(value))


@FAST
@given(layers=st.just(0) | st.integers(1, 2), raw=st.booleans())
def test_attention_rollout_refuses_no_layers_and_raw_scores(layers, raw):
    weights = torch.rand(layers, 1, 2, 4, 4) * (5 if raw else 1)
    weights = weights if raw else weights / weights.sum(-1, keepdim=True)
    if layers and not raw:
        assert analysis.attention_rollout(weights).shape == (1, 4, 4)
    else:
        fails_cleanly("attention_rollout", lambda: analysis.attention_rollout(weights), weights)


# ---- a failed call changes nothing
@pytest.fixture(scope="module")
def decoder():
    torch.manual_seed(0)
    config = transformer.TransformerConfig(vocab_size=11, max_len=8, d_model=8, num_heads=2, num_layers=2,
                                           causal=True)
    return transformer.TinyTransformer(config).eval()


@FAST
@given(extra=st.integers(1, 4))
def test_a_cache_that_overflows_is_left_as_it_was(extra):
    cache = al.KVCache(1, 2, 4, 4)
    cache.append(torch.rand(1, 2, 3, 4), torch.rand(1, 2, 3, 4))
    t = 1 + extra
    fails_cleanly("KVCache.append", lambda: cache.append(torch.rand(1, 2, t, 4), torch.rand(1, 2, t, 4)), cache)
    layer = al.GroupedQueryAttention(8, 4, 2)
    cache = layer.new_cache(1, 4)
    layer(torch.rand(1, 3, 8), cache=cache)
    fails_cleanly("GroupedQueryAttention.forward", lambda: layer(torch.rand(1, t, 8), cache=cache), layer, cache)


@FAST
@given(steps=st.integers(2, 4))
def test_a_cached_forward_that_fails_at_a_later_layer_changes_no_cache(decoder, steps):
    caches = decoder.new_caches(1, 8)
    decoder(torch.zeros(1, 8 - steps, dtype=torch.long), caches=caches)
    caches[1].append(torch.rand(1, 2, steps - 1, 4), torch.rand(1, 2, steps - 1, 4))  # the last layer is fuller
    tokens = torch.zeros(1, steps, dtype=torch.long)
    fails_cleanly("TinyTransformer.forward", lambda: decoder(tokens, caches=caches), decoder, *caches)


@FAST
@given(token=st.one_of(st.integers(11, 50), st.integers(-50, -1)))
def test_tokens_outside_the_vocabulary_are_refused_by_every_entry(decoder, token):
    prompt = torch.tensor([[1, token]])
    fails_cleanly("TinyTransformer.forward", lambda: decoder(prompt), decoder, prompt)
    fails_cleanly("TinyTransformer.generate", lambda: decoder.generate(prompt, 2), decoder, prompt)
    fails_cleanly("decode", lambda: generate.decode(decoder, prompt, 2), decoder, prompt)


@FAST
@given(count=st.integers(0, 4).filter(lambda c: c != 2))
def test_a_wrong_number_of_caches_is_refused(decoder, count):
    caches = decoder.new_caches(1, 8)[:1] * count
    fails_cleanly("TinyTransformer.forward", lambda: decoder(torch.zeros(1, 2, dtype=torch.long), caches=caches),
                  decoder)


# ---- the float 0/1 mask
@FAST
@given(keep=st.lists(st.booleans(), min_size=16, max_size=16).filter(any))
def test_a_float_mask_of_zeros_and_ones_read_as_additive_gets_a_warning(keep):
    q = torch.rand(1, 4, 4)
    mask = torch.tensor(keep, dtype=torch.float32).view(4, 4)
    with pytest.warns(UserWarning, match=r"^scaled_dot_product_attention\(\): mask is a float mask of only 0s and 1s, "
                                         r"read as additive .* not as a keep mask .*from_keep_ones"):
        al.scaled_dot_product_attention(q, q, q, mask)


def test_an_all_zero_additive_mask_gets_no_warning():
    q = torch.rand(1, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        al.scaled_dot_product_attention(q, q, q, torch.zeros(4, 4))
        al.scaled_dot_product_attention(q, q, q, al.to_additive_mask(al.causal_mask(4)))
