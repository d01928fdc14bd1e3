"""Counting the floating-point operations of a call, CPU attention included.

PyTorch's ``FlopCounterMode`` counts matrix products and the GPU kernels of ``F.scaled_dot_product_attention``, but
not the kernel the CPU runs (``_scaled_dot_product_flash_attention_for_cpu`` in torch 2.13), so on a CPU the
attention itself would count as zero. :func:`count_flops` adds that kernel, with the counter's own rule for the GPU
kernels: 2 x b x h x i x j x d for the scores q . k and as much again for the weighted sum of values, every (i, j)
pair counted, also those a causal mask removes. Element-wise work (softmax, LayerNorm, GELU) is not counted.

How it differs from :func:`attention_lab.reference.attention_flops` (the count of attention's two matrix products
written out from the shapes; tested equal for PyTorch's attention and for the reference's written-out attention) and
what that buys: it runs the call and counts whatever it computes, so it also counts a whole model's step, with or
without a cache (lesson 11 compares both with the formula), where the reference knows one attention call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from .._validation import fail

__all__ = ["count_flops"]


def _cpu_sdpa_flops(query_shape, key_shape, value_shape, *args: Any, out_shape=None, **kwargs: Any) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


_EXTRA = {}
if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
    _EXTRA[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_sdpa_flops


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run ``fn(*args, **kwargs)`` and return the FLOPs of its matrix products and attention calls.

    A multiply and an add count as 2 FLOPs, as in PyTorch's counter: an (m x k) @ (k x n) product is 2 m k n.

    Shape: whatever ``fn`` takes -> an integer.
    """
    if not callable(fn):
        fail("count_flops", f"fn must be callable, got {type(fn).__name__}; pass the function and its arguments, "
                            f"e.g. count_flops(model, tokens)", TypeError)
    with FlopCounterMode(display=False, custom_mapping=_EXTRA) as counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())
