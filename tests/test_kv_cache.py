"""The three key/value caches and the latent cache: what they return, what they hold, what they cost in memory."""

import pytest
import torch

import attention_lab as al
from attention_lab.measure.memory import measure_peak_memory

B, H, D = 2, 3, 4


def kv(t, dtype=torch.float32):
    return torch.randn(B, H, t, D, dtype=dtype), torch.randn(B, H, t, D, dtype=dtype)


def test_kvcache_returns_views_of_everything_cached_so_far():
    cache = al.KVCache(B, H, 10, D)
    assert len(cache) == 0 and cache.offset == 0
    k1, v1 = kv(3)
    keys, values = cache.append(k1, v1)
    assert keys.shape == (B, H, 3, D) and keys._base is cache.keys and values._base is cache.values
    k2, v2 = kv(1)
    keys, values = cache.append(k2, v2)
    torch.testing.assert_close(keys, torch.cat([k1, k2], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(values, torch.cat([v1, v2], dim=2), rtol=0, atol=0)
    assert len(cache) == cache.offset == 4 and cache.positions.tolist() == [0, 1, 2, 3]
    assert keys.data_ptr() == cache.keys.data_ptr()  # no copy of what was cached


def test_kvcache_nbytes_reset_crop_and_overflow():
    cache = al.KVCache(B, H, 6, D, dtype=torch.float64)
    assert cache.nbytes == 2 * B * H * 6 * D * 8
    cache.append(*kv(4, torch.float64))
    cache.crop(2)
    assert len(cache) == 2
    k, v = kv(1, torch.float64)
    keys, _ = cache.append(k, v)
    torch.testing.assert_close(keys[:, :, 2:], k, rtol=0, atol=0)
    cache.reset()
    assert len(cache) == 0 and cache.nbytes == 2 * B * H * 6 * D * 8
    cache.append(*kv(6, torch.float64))
    with pytest.raises(ValueError, match=r"KVCache.append\(\): the cache must have room for t=1 more positions, got "
                                         r"a cache holding 6 of max_len=6; build it with max_len >= 7 or reset\(\) it"):
        cache.append(*kv(1, torch.float64))
    with pytest.raises(ValueError, match=r"length must be at most len\(cache\)=6, got length=7"):
        cache.crop(7)


def test_kvcache_memory_is_allocated_once_and_appending_allocates_nothing_lasting():
    made = measure_peak_memory(lambda: al.KVCache(B, H, 64, D))
    assert made.retained_bytes == made.result.nbytes == 2 * B * H * 64 * D * 4
    cache = made.result
    k, v = kv(1)
    for _ in range(5):
        assert measure_peak_memory(cache.append, k, v).retained_bytes == 0


def test_concat_cache_matches_the_preallocated_one_and_grows():
    pre, cat = al.KVCache(B, H, 8, D), al.ConcatKVCache(B, H, D)
    for t in (3, 1, 1, 2):
        k, v = kv(t)
        a, b = pre.append(k, v), cat.append(k, v)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert len(cat) == 7 and cat.nbytes == 2 * B * H * 7 * D * 4
    cat.crop(5)
    assert len(cat) == 5
    cat.reset()
    assert len(cat) == 0 and cat.nbytes == 0


@pytest.mark.parametrize("window", [1, 3, 5])
@pytest.mark.parametrize("chunks", [[1] * 12, [2, 5, 1, 1, 7], [9, 1, 4]])
def test_sliding_cache_holds_exactly_the_last_window_positions(window, chunks):
    cache = al.SlidingWindowKVCache(B, H, window, D, dtype=torch.float64)
    all_k, all_v = [], []
    for t in chunks:
        k, v = kv(t, torch.float64)
        all_k.append(k)
        all_v.append(v)
        keys, values = cache.append(k, v)
        full_k, full_v = torch.cat(all_k, dim=2), torch.cat(all_v, dim=2)  # the reference keeps everything
        n = full_k.shape[2]
        expected_positions = list(range(max(0, n - window), n))
        assert len(cache) == min(n, window) and cache.offset == n
        assert sorted(cache.positions.tolist()) == expected_positions
        order = cache.positions.argsort()  # the ring's slots, put back in position order
        torch.testing.assert_close(keys[:, :, order], full_k[:, :, expected_positions], rtol=0, atol=0)
        torch.testing.assert_close(values[:, :, order], full_v[:, :, expected_positions], rtol=0, atol=0)
        torch.testing.assert_close(keys, full_k[:, :, cache.positions], rtol=0, atol=0)  # each slot where it says


def test_sliding_cache_memory_stays_constant_however_long_it_runs():
    cache = al.SlidingWindowKVCache(B, H, 4, D)
    assert cache.nbytes == 2 * B * H * 4 * D * 4
    k, v = kv(1)
    for _ in range(20):
        assert measure_peak_memory(cache.append, k, v).retained_bytes == 0
    assert cache.nbytes == 2 * B * H * 4 * D * 4 and len(cache) == 4 and cache.offset == 20
    cache.reset()
    assert len(cache) == 0 and cache.offset == 0


def test_latent_cache_holds_batch_times_max_len_times_latent_dim_values():
    mla = al.MultiHeadLatentAttention(16, 4, 6)
    cache = mla.new_cache(3, 10)
    assert cache.nbytes == 3 * 10 * 6 * 4 and len(cache) == 0
    latents = torch.randn(3, 4, 6)
    out = cache.append(latents)
    assert out._base is cache.latents and len(cache) == cache.offset == 4
    torch.testing.assert_close(out, latents, rtol=0, atol=0)
    cache.reset()
    assert len(cache) == 0
    cache.append(torch.randn(3, 10, 6))
    with pytest.raises(ValueError, match=r"the cache must have room for t=1 more positions, got a cache holding 10 of "
                                         r"max_len=10.*max_len >= 11"):
        cache.append(torch.randn(3, 1, 6))
    with pytest.raises(ValueError, match=r"c must have shape \(b, t, latent_dim\) = \(3, t, 6\) \(the cache was built "
                                         r"with batch_size=3, latent_dim=6\), got shape \(3, 1, 5\)"):
        cache.append(torch.randn(3, 1, 5))


def test_caches_follow_the_requested_dtype_and_device():
    for cache in (al.KVCache(1, 1, 4, 2, dtype=torch.float16), al.SlidingWindowKVCache(1, 1, 4, 2, dtype=torch.float16),
                  al.ConcatKVCache(1, 1, 2, dtype=torch.float16)):
        keys, _ = cache.append(torch.ones(1, 1, 1, 2, dtype=torch.float16), torch.ones(1, 1, 1, 2, dtype=torch.float16))
        assert keys.dtype == torch.float16 and keys.device.type == "cpu"


def test_bad_inputs_name_the_cache_and_what_it_expects():
    cache = al.KVCache(B, H, 5, D)
    with pytest.raises(ValueError, match=r"KVCache.append\(\): k must have shape \(b, num_kv_heads, t, head_dim\) = "
                                         r"\(2, 3, t, 4\).*got shape \(2, 1, 1, 4\)"):
        cache.append(torch.randn(2, 1, 1, 4), torch.randn(2, 1, 1, 4))
    with pytest.raises(ValueError, match=r"k and v must hold the same number of positions t"):
        cache.append(torch.randn(B, H, 2, D), torch.randn(B, H, 1, D))
    with pytest.raises(TypeError, match=r"KVCache.append\(\): k must have the cache's dtype torch.float32, got "
                                        r"torch.float64; build the cache with the dtype= and device= of the layer"):
        cache.append(*kv(1, torch.float64))
    with pytest.raises(TypeError, match=r"k must be a torch.Tensor, got list"):
        cache.append([1.0], [1.0])
    with pytest.raises(ValueError, match=r"KVCache\(\): max_len must be >= 1, got max_len=0"):
        al.KVCache(1, 1, 0, 4)
    with pytest.raises(TypeError, match=r"SlidingWindowKVCache\(\): window must be an int, got float 2.5"):
        al.SlidingWindowKVCache(1, 1, 2.5, 4)
    with pytest.raises(TypeError, match=r"dtype must be a floating torch.dtype, got dtype torch.int64; pass "
                                        r"dtype=torch.float32"):
        al.ConcatKVCache(1, 1, 4, dtype=torch.int64)


def test_restore_undoes_every_append_after_a_snapshot():
    k = torch.randn(1, 2, 5, 4)
    for cache in (al.KVCache(1, 2, 8, 4), al.ConcatKVCache(1, 2, 4), al.SlidingWindowKVCache(1, 2, 3, 4)):
        cache.append(k[:, :, :3], k[:, :, :3])
        held = [t.clone() for t in cache.append(k[:, :, :0], k[:, :, :0])]  # what it holds: keys, values
        saved = cache.snapshot()
        cache.append(k[:, :, 3:5], -k[:, :, 3:5])  # the sliding cache overwrites two of its three slots
        cache.restore(saved)
        assert cache.offset == 3 and all(torch.equal(a, b) for a, b in zip(cache.append(k[:, :, :0], k[:, :, :0]),
                                                                            held, strict=True))
