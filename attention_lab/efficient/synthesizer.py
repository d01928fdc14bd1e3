"""Synthesizer attention (Tay et al. 2021): attention weights that do not come from q . k.

Softmax attention computes alpha_{i,j} from the pair (q^i, k^j). The Synthesizer asks whether the pair is needed:

* ``kind="dense"``: each token writes its own row of scores from itself alone, B_i = W_2 relu(W_1 x^i + c_1) + c_2,
  one score per position j (so the module is tied to its ``seq_len``; shorter inputs use the first columns);
* ``kind="random"``: one learned ``(seq_len, seq_len)`` matrix of scores per head, the same for every input.

Then b^i = sum_j softmax_j(B_{i,j}) v^j with v^j = W^v x^j, as usual. Neither kind can look a key up by its
content: a query cannot find "the token that matches me" wherever it is, which the lesson's benchmark shows.

Written out, the dense kind is ordinary dot-product attention whose keys belong to *positions*, not tokens:
B_{i,j} = h^i . w_j + c_j with h^i = relu(W_1 x^i + c_1) and w_j, c_j row j of W_2, c_2. Appending a 1 to h^i and
c_j to w_j makes it a plain dot product, so the module runs it through ``F.scaled_dot_product_attention`` (scale 1)
and never stores the i x j matrix. The random kind's matrix is itself the parameter, so it is stored.

How it differs from :func:`attention_lab.reference.synthesizer_attention` (softmax over the given scores B, then
the weighted sum of values; tested equal in fp64, the functional form and the dense module against its scores
written out, with and without ``causal``) and what that buys: the dense kind never materialises B, it runs PyTorch's
fused kernel on the dot-product form above (with v padded to the width of q and k, or the kernel falls back to one
that stores the (b, h, i, j) weights: at b = 16, h = 2, n = 1024, e = 32 one layer's forward and backward took half
the time and a thirteenth of the memory of that fallback); the random kind is the reference itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import (
    check_bool,
    check_choice,
    check_heads_divide,
    check_positive_ints,
    check_sequence_input,
    check_tensor,
    fail,
)

__all__ = ["SYNTHESIZER_KINDS", "SynthesizerAttention", "synthesizer_attention"]

SYNTHESIZER_KINDS = ("dense", "random")


def synthesizer_attention(scores: torch.Tensor, v: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
    """softmax(scores) v, with scores given rather than computed from q . k; ``causal`` hides keys j > i.

    Shape: scores ``(..., i, j)``, v ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    fn = "synthesizer_attention"
    check_tensor(fn, "scores", scores, min_dim=2, floating=True)
    check_tensor(fn, "v", v, min_dim=2, floating=True)
    if scores.shape[-1] != v.shape[-2]:
        fail(fn, f"scores must have one column per value: scores {tuple(scores.shape)} has j={scores.shape[-1]}, "
                 f"v {tuple(v.shape)} has j={v.shape[-2]}")
    if check_bool(fn, "causal", causal):
        i, j = scores.shape[-2:]
        future = torch.ones(i, j, dtype=torch.bool, device=scores.device).triu(1)  # (i, j): key after query
        scores = scores.masked_fill(future, float("-inf"))  # a new tensor
    return torch.softmax(scores, dim=-1) @ v  # (..., i, dv); every row keeps key 0, so no row is empty


class SynthesizerAttention(nn.Module):
    """Self-attention with synthesised weights (``kind`` ``"dense"`` or ``"random"``), see the module docstring.

    ``num_heads`` heads, each with its own scores and a slice of the value projection; ``causal=True`` hides keys
    after the query. ``forward(x, *, mask=None, need_weights=False, cache=None)`` returns ``(output, weights)``;
    ``mask`` (build with ``causal=True`` instead) and ``cache`` are refused.
    Attributes: ``v_proj``, ``out_proj``, and ``hidden`` +
    ``to_scores`` (dense) or ``random_scores`` ``(h, seq_len, seq_len)`` (random).

    Shape: x ``(b, i, e)`` with i <= seq_len -> output ``(b, i, e)``, weights ``(b, h, i, i)`` or ``None``.
    """

    def __init__(self, embed_dim: int, seq_len: int, *, kind: str = "dense", num_heads: int = 1,
                 causal: bool = False, bias: bool = True) -> None:
        super().__init__()
        fn = "SynthesizerAttention"
        check_positive_ints(fn, embed_dim=embed_dim, seq_len=seq_len, num_heads=num_heads)
        check_choice(fn, "kind", kind, SYNTHESIZER_KINDS)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        check_bool(fn, "causal", causal)
        self.embed_dim, self.seq_len, self.kind, self.num_heads, self.causal = (embed_dim, seq_len, kind, num_heads,
                                                                                causal)
        if kind == "dense":
            self.hidden = nn.Linear(embed_dim, embed_dim, bias=bias)
            self.to_scores = nn.Linear(embed_dim, num_heads * seq_len, bias=bias)
        else:
            self.random_scores = nn.Parameter(torch.randn(num_heads, seq_len, seq_len))
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, seq_len={self.seq_len}, kind={self.kind!r}, "
                f"num_heads={self.num_heads}, causal={self.causal}")

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """The synthesised scores B (before the softmax). Shape: x ``(b, i, e)`` -> ``(b, h, i, i)``."""
        n = x.shape[1]
        if self.kind == "dense":
            rows = self.to_scores(F.relu(self.hidden(x)))  # (b, i, h*seq_len)
            return rearrange(rows, "b i (h l) -> b h i l", h=self.num_heads)[..., :n]  # (b, h, i, j)
        return self.random_scores[:, :n, :n].unsqueeze(0)  # (1, h, i, j)

    def _dense_heads(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(B) v for the dense kind as one fused dot-product attention: queries [h^i, 1] against
        position keys [w_j, c_j], scale 1 (see the module docstring). Shape: -> ``(b, h, i, d)``."""
        b, n, e = x.shape
        hidden = F.relu(self.hidden(x))  # h^i, (b, i, e)
        q = torch.cat([hidden, hidden.new_ones(b, n, 1)], dim=-1)  # (b, i, e + 1)
        w = self.to_scores.weight.view(self.num_heads, self.seq_len, e)[:, :n]  # row j of W_2 per head, (h, j, e)
        bias = self.to_scores.bias
        c = (bias.view(self.num_heads, self.seq_len)[:, :n, None] if bias is not None
             else w.new_zeros(self.num_heads, n, 1))  # (h, j, 1)
        k = torch.cat([w, c], dim=-1)  # (h, j, e + 1)
        q = q[:, None].expand(b, self.num_heads, n, e + 1)  # (b, h, i, e + 1)
        k = k[None].expand(b, -1, -1, -1)  # (b, h, j, e + 1)
        # PyTorch's fused CPU kernel needs v as wide as q and k; otherwise it falls back to one that stores the
        # (b, h, i, j) weights. Zero columns cost less: at b = 16, h = 2, n = 1024, e = 32, one layer's forward and
        # backward took half the time and a thirteenth of the memory.
        d = v.shape[-1]
        v_wide = F.pad(v, (0, e + 1 - d))  # (b, h, j, e + 1), zeros after column d
        out = F.scaled_dot_product_attention(q, k, v_wide, is_causal=self.causal, scale=1.0)  # (b, h, i, e + 1)
        return out[..., :d]  # (b, h, i, d)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, need_weights: bool = False,
                cache: None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        fn = "SynthesizerAttention.forward"
        check_sequence_input(fn, "x", x, self.v_proj.weight, max_len=self.seq_len)
        check_bool(fn, "need_weights", need_weights)
        if mask is not None:
            fail(fn, "SynthesizerAttention takes no mask; build it with causal=True for a decoder")
        if cache is not None:
            fail(fn, "SynthesizerAttention keeps no cache (its weights are synthesised for the whole sequence); "
                     "generate by running the whole sequence again (cache=None)")
        v = rearrange(self.v_proj(x), "b j (h d) -> b h j d", h=self.num_heads)  # (b, h, j, d)
        if self.kind == "dense":
            heads = self._dense_heads(x, v)  # (b, h, i, d)
        else:
            heads = synthesizer_attention(self.scores(x), v, causal=self.causal)  # (b, h, i, d)
        out = self.out_proj(rearrange(heads, "b h i d -> b i (h d)"))  # (b, i, e)
        weights = None
        if need_weights:
            scores = self.scores(x)  # (b or 1, h, i, j)
            masked = scores if not self.causal else scores.masked_fill(
                torch.ones_like(scores[0, 0], dtype=torch.bool).triu(1), float("-inf"))
            weights = torch.softmax(masked, dim=-1).expand(x.shape[0], -1, -1, -1)  # (b, h, i, j)
        return out, weights
