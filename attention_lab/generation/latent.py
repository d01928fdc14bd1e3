"""Multi-head latent attention (多头潜在注意力, MLA; DeepSeek-V2, 2024): cache one small latent per token.

Instead of h_kv key heads and h_kv value heads, each token is compressed to one latent vector c^j = W^{DKV} x^j of
``latent_dim`` numbers, and every head's key and value are rebuilt from it: k^{j,h} = W^{UK}_h c^j,
v^{j,h} = W^{UV}_h c^j. The cache holds only the latents: ``latent_dim`` values per token and layer, against
2 h d for multi-head attention.

Left out here: DeepSeek-V2's decoupled rotary part (a small extra key per token, shared by the heads, that carries
RoPE). A rotation between q and W^{UK} would stop W^{UK} from being folded into the query projection, which is how
the real model avoids rebuilding the keys at every step; this module rebuilds them, which is plainer and gives the
same numbers. It has no position information of its own (add positions to x, e.g. learned embeddings), and its
cache is DeepSeek-V2's without that extra key.

How it differs from :func:`attention_lab.reference.latent_attention` (every head's keys and values rebuilt from the
latents, then plain attention with a mask; tested equal in fp64, gradients by gradcheck, and decoding chunk by chunk
with a :class:`~attention_lab.LatentCache` equals the whole sequence at once) and what that buys: the heads run in
PyTorch's fused kernel, causal without a mask tensor when nothing is cached, and with a cache the latents of the
earlier positions are read from it instead of recomputed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import check_bool, check_heads_divide, check_positive_ints, check_sequence_input, fail
from .kv_cache import LatentCache

__all__ = ["MultiHeadLatentAttention"]


class MultiHeadLatentAttention(nn.Module):
    """Causal self-attention whose keys and values are rebuilt from a cached latent of ``latent_dim`` per token.

    Attributes: ``embed_dim`` (e), ``num_heads`` (h), ``head_dim`` (d = e / h), ``latent_dim`` (r), and the
    ``nn.Linear`` projections ``q_proj`` (e -> e), ``kv_down`` (W^{DKV}: e -> r), ``k_up`` (W^{UK}: r -> e),
    ``v_up`` (W^{UV}: r -> e), ``out_proj`` (e -> e). ``forward(x, *, cache=None)`` with a cache from
    :meth:`new_cache` continues after the positions already cached. No rotary part (see the module docstring).

    Shape: x ``(b, n, e)`` -> ``(b, n, e)``.
    """

    def __init__(self, embed_dim: int, num_heads: int, latent_dim: int, *, bias: bool = False) -> None:
        super().__init__()
        fn = "MultiHeadLatentAttention"
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads, latent_dim=latent_dim)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        check_bool(fn, "bias", bias)
        self.embed_dim, self.num_heads, self.latent_dim = embed_dim, num_heads, latent_dim
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.kv_down = nn.Linear(embed_dim, latent_dim, bias=bias)
        self.k_up = nn.Linear(latent_dim, embed_dim, bias=bias)
        self.v_up = nn.Linear(latent_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, latent_dim={self.latent_dim}"

    def new_cache(self, batch_size: int, max_len: int) -> LatentCache:
        """An empty :class:`~attention_lab.LatentCache` for this layer, on its device and in its dtype.

        Shape: a cache whose buffer is ``(b, max_len, r)``, b = batch_size, r = latent_dim.
        """
        weight = self.q_proj.weight
        return LatentCache(batch_size, max_len, self.latent_dim, dtype=weight.dtype, device=weight.device)

    def forward(self, x: torch.Tensor, *, cache: LatentCache | None = None) -> torch.Tensor:
        """Causal self-attention over x, after the positions already in ``cache`` (if any).

        Shape: x ``(b, n, e)`` -> ``(b, n, e)``.
        """
        fn = "MultiHeadLatentAttention.forward"
        check_sequence_input(fn, "x", x, self.q_proj.weight)
        n = x.shape[1]
        latents = self.kv_down(x)  # c^j, (b, n, r)
        offset = 0
        if cache is not None:
            if not isinstance(cache, LatentCache):
                fail(fn, f"cache must be a LatentCache from new_cache(batch_size, max_len), got "
                         f"{type(cache).__name__}", TypeError)
            if (cache.batch_size, cache.latent_dim) != (x.shape[0], self.latent_dim):
                fail(fn, f"the cache does not match: (batch_size, latent_dim) is ({cache.batch_size}, "
                         f"{cache.latent_dim}) for the cache and ({x.shape[0]}, {self.latent_dim}) for x and the "
                         f"layer; build it with new_cache(batch_size={x.shape[0]}, max_len=...)")
            offset = cache.offset
            latents = cache.append(latents)  # every cached latent, (b, len, r)
        h = self.num_heads
        q = rearrange(self.q_proj(x), "b i (h d) -> b h i d", h=h)  # (b, h, i, d)
        k = rearrange(self.k_up(latents), "b j (h d) -> b h j d", h=h)  # k^{j,h} = W^{UK}_h c^j, (b, h, j, d)
        v = rearrange(self.v_up(latents), "b j (h d) -> b h j d", h=h)  # v^{j,h} = W^{UV}_h c^j, (b, h, j, d)
        if offset == 0:
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, i, d)
        else:  # lower-right aligned: query r sits at position offset + r
            keys = torch.arange(k.shape[2], device=x.device)  # (j,)
            allowed = keys[None, :] <= torch.arange(offset, offset + n, device=x.device)[:, None]  # (i, j)
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (b, h, i, d)
        return self.out_proj(rearrange(heads, "b h i d -> b i (h d)"))  # (b, i, e)
