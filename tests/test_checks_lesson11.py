"""Lesson 11 checks accept every right answer and reject common mistakes with their own hint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab.teaching.checks import lesson11 as check

# ---- exercise 1: cache bytes with an optional window ----


def right_bytes(layers, kv_heads, head_dim, tokens, batch, per_value, window):
    kept = tokens if window is None else min(tokens, window)
    return 2 * layers * kv_heads * head_dim * kept * batch * per_value


def test_cache_bytes_accepts_every_numeric_form(capsys):
    accepts(capsys, check.cache_bytes, right_bytes)
    accepts(capsys, check.cache_bytes, lambda *a: float(right_bytes(*a)))
    accepts(capsys, check.cache_bytes, lambda *a: torch.tensor(right_bytes(*a)))
    accepts(capsys, check.cache_bytes, lambda *a: np.int64(right_bytes(*a)))


def test_cache_bytes_refuses_a_hard_coded_number():
    rejects(check.cache_bytes, lambda *a: right_bytes(28, 4, 128, 32_768, 8, 2, 4_096), match="same number when")


def test_cache_bytes_refuses_the_library_the_exercise_forbids():
    import attention_lab as al

    def calls_library(layers, kv_heads, head_dim, tokens, batch, per_value, window):
        return al.kv_cache_bytes(num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim, batch_size=batch,
                                 seq_len=tokens if window is None else min(tokens, window), bytes_per_value=per_value)

    rejects(check.cache_bytes, calls_library, match="library's answer")


def test_cache_bytes_sees_the_library_however_it_is_reached():
    """An alias, a helper and getattr all end in the library's code: the check sees the call, not the name."""
    import attention_lab as al
    from attention_lab import kv_cache_bytes as size_of
    from attention_lab import reference

    def sizes(layers, kv_heads, head_dim, tokens, batch, per_value, window):
        return dict(num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim, batch_size=batch,
                    seq_len=tokens if window is None else min(tokens, window), bytes_per_value=per_value)

    def in_bf16(*args):  # reference.kv_cache_bytes counts bf16 values (2 bytes each)
        return {key: value for key, value in sizes(*args).items() if key != "bytes_per_value"}

    def helper(**kw):
        return al.kv_cache_bytes(**kw)

    for reach in (lambda *a: size_of(**sizes(*a)), lambda *a: helper(**sizes(*a)),
                  lambda *a: getattr(al, "kv_" + "cache_bytes")(**sizes(*a)),
                  lambda *a: reference.kv_cache_bytes(**in_bf16(*a)) * a[5] // 2):
        rejects(check.cache_bytes, reach, match="library's answer")


def test_cache_bytes_prints_the_exercise_model_once_right(capsys):
    check.cache_bytes(right_bytes)
    assert "1.75 GiB" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda *a: right_bytes(*a) // 2, "key AND a value"),
    (lambda lay, kv, d, n, b, v, w: right_bytes(lay, kv, d, n, b, v, None), "keeps only the last `window`"),
    (lambda lay, kv, d, n, b, v, w: right_bytes(lay, kv, d, w if w else n, b, v, None), "shorter than the window"),
    (lambda *a: 8 * right_bytes(*a), "no factor 8"),
    (lambda lay, *a: right_bytes(1, *a), "every layer"),
    (lambda lay, kv, d, n, b, v, w: right_bytes(lay, kv, d, n, 1, v, w), "each sequence of the batch"),
])
def test_cache_bytes_names_each_mistake(wrong, hint):
    rejects(check.cache_bytes, wrong, match=hint)


def test_cache_bytes_turns_errors_and_wrong_types_into_hints():
    rejects(check.cache_bytes, lambda *a: 1 / 0, match="ZeroDivisionError")
    rejects(check.cache_bytes, lambda *a: None, match="is None")
    rejects(check.cache_bytes, lambda *a: [1, 2], match="whole number")
    rejects(check.cache_bytes, 42, match="define a function cache_bytes")


# ---- exercise 2: the positions of the new tokens ----

def test_step_positions_accepts_the_offset_in_any_integer_form(capsys):
    accepts(capsys, check.step_positions, lambda cache, t: torch.arange(cache.offset, cache.offset + t))
    accepts(capsys, check.step_positions, lambda cache, t: list(range(cache.offset, cache.offset + t)))
    accepts(capsys, check.step_positions, lambda cache, t: np.arange(cache.offset, cache.offset + t))
    accepts(capsys, check.step_positions, lambda cache, t: torch.arange(t, dtype=torch.float64) + cache.offset)


@pytest.mark.parametrize("shift", [1, -2, 100])
def test_step_positions_refuses_a_constant_shift_from_a_prefilled_cache(shift):
    """From an empty cache a constant shift cancels under RoPE; from a cache a prompt filled (its keys rotated at
    0, 1, ...) it does not, and the check decodes from one."""
    rejects(check.step_positions, lambda cache, t: torch.arange(cache.offset, cache.offset + t) + shift,
            match=f"off by {shift}")


@pytest.mark.parametrize("wrong, hint", [
    (lambda cache, t: torch.arange(t), "restart at 0"),
    (lambda cache, t: torch.arange(len(cache), len(cache) + t), "stops growing once a sliding cache is full"),
    (lambda cache, t: torch.full((t,), cache.offset), "its own position"),
    (lambda cache, t: torch.arange(t) * 2 + cache.offset, "differs from running the layer"),
    (lambda cache, t: torch.arange(t) + len(cache), "stops growing once a sliding cache is full"),
    (lambda cache, t: torch.arange(cache.offset, cache.offset + 1), r"one position per new token: shape \(4,\)"),
    (lambda cache, t: torch.arange(t) + 0.5, "whole numbers"),
])
def test_step_positions_names_each_mistake(wrong, hint):
    rejects(check.step_positions, wrong, match=hint)


def test_step_positions_wraps_errors_into_hints():
    rejects(check.step_positions, lambda cache, t: cache.missing, match="AttributeError")


# ---- exercise 3: pooling key heads into groups ----

def pool(weight, num_heads, num_kv_heads):
    d = weight.shape[0] // num_heads
    blocks = [weight[d * i:d * (i + 1)] for i in range(num_heads)]  # one (d, e) block per head
    group = num_heads // num_kv_heads
    return torch.cat([torch.stack(blocks[g * group:(g + 1) * group]).mean(0) for g in range(num_kv_heads)])


def test_pool_kv_heads_accepts_loops_einops_and_numpy(capsys):
    from einops import reduce

    accepts(capsys, check.pool_kv_heads, pool)
    accepts(capsys, check.pool_kv_heads, lambda w, h, kv: reduce(w, "(kv g d) e -> (kv d) e", "mean", kv=kv, g=h // kv))
    accepts(capsys, check.pool_kv_heads, lambda w, h, kv: pool(w, h, kv).numpy())
    accepts(capsys, check.pool_kv_heads, lambda w, h, kv: pool(w.float(), h, kv))


@pytest.mark.parametrize("wrong, hint", [
    (lambda w, h, kv: w.unflatten(0, (h // kv, kv, -1)).mean(0).flatten(0, 1), "CONSECUTIVE"),
    (lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1)).sum(1).flatten(0, 1), "don't add them up"),
    (lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1))[:, 0].flatten(0, 1), "throws the others away"),
    (lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1)).mean(1), r"shape \(h_kv d, e\)"),
    (lambda w, h, kv: w.unflatten(0, (kv, -1, h // kv)).mean(2).flatten(0, 1), r"d consecutive rows"),
    (lambda w, h, kv: pool(w, h, kv) if h == 8 else pool(w, h, kv) + 1, r"d consecutive rows"),
])
def test_pool_kv_heads_names_each_mistake(wrong, hint):
    rejects(check.pool_kv_heads, wrong, match=hint)


def test_pool_kv_heads_wraps_errors_into_hints():
    rejects(check.pool_kv_heads, lambda w, h, kv: w.view(kv, -1, 7), match="RuntimeError")
