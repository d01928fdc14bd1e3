"""How many bytes a KV cache takes: the formula used to tabulate real models.

Every layer keeps, for every position of every sequence, one key and one value per key/value head:

    bytes = 2 (key and value) x layers x kv heads x head_dim x positions x batch x bytes per value

Multi-head latent attention keeps one latent of ``latent_dim`` numbers per position and layer instead:

    bytes = layers x latent_dim x positions x batch x bytes per value

How it differs from :func:`attention_lab.reference.kv_cache_bytes` (the bytes of tensors of the shapes a cache keeps,
counted on the meta device; tested equal for bf16, fp32, fp64 and 8-bit values) and what that buys: it is the
formula above in integers, with the bytes per value a plain number, so it needs no torch dtype and tabulates models
of any size at once (a 70B model at 128k positions); the tests also check it against the bytes the caches of
:mod:`attention_lab.generation.kv_cache` really allocate.
"""

from __future__ import annotations

from .._validation import check_positive_int, check_positive_ints

__all__ = ["kv_cache_bytes"]


def kv_cache_bytes(*, num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                   bytes_per_value: int = 2, latent_dim: int | None = None) -> int:
    """Bytes of the KV cache of a whole model (every layer) holding ``seq_len`` positions of ``batch_size`` sequences.

    ``bytes_per_value`` is 2 for bf16/fp16 (the default, as models are usually served), 4 for fp32, 1 for 8-bit
    caches. With ``latent_dim`` (multi-head latent attention) the cache holds one latent per position and layer, and
    ``num_kv_heads`` and ``head_dim`` do not enter. Example: 32 layers with 8 key/value heads of 128 (Llama-3-8B) at
    8,192 tokens in bf16 take 2 x 32 x 8 x 128 x 8192 x 2 bytes = 1 GiB per sequence.

    Shape: integers -> an integer number of bytes.
    """
    fn = "kv_cache_bytes"
    check_positive_ints(fn, num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len,
                        batch_size=batch_size, bytes_per_value=bytes_per_value)
    per_position = 2 * num_kv_heads * head_dim
    if latent_dim is not None:
        per_position = check_positive_int(fn, "latent_dim", latent_dim)
    return num_layers * per_position * seq_len * batch_size * bytes_per_value
