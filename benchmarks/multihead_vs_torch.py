"""Forward time of attention_lab.MultiHeadAttention against torch.nn.MultiheadAttention, one process.

    OMP_PROC_BIND=close OMP_PLACES=cores .venv/bin/python benchmarks/multihead_vs_torch.py

Setting: self-attention, b=1, n=1024, e=512, h=8, float32, CPU, 2 threads. Both modules hold the same
weights (ours loaded with ``from_torch``), run in eval mode under ``torch.no_grad()``, and
neither returns attention weights: ours with ``need_weights=False`` (F.scaled_dot_product_attention
inside), PyTorch's with ``need_weights=False`` too, so in eval mode it takes its native fast path
(``torch._native_multi_head_attention``) when it can. A second row times both with autograd on (training
mode, no dropout), where PyTorch's fast path is off. Both are timed by
:func:`attention_lab.measure.timing.compare` in interleaved rounds, so that load from other processes hits both
alike: the fastest of the rounds per module, and the ratio ours / PyTorch taken within each round (the median of
the rounds' ratios) is what we report (target <= 1.15).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

from attention_lab import MultiHeadAttention, environment
from attention_lab.measure.timing import compare


def measure(label: str, ours_fn, torch_fn, rounds: int, min_run_time: float) -> float:
    """ours / PyTorch's time, the median over interleaved rounds of the ratio within one round."""
    result = compare({"ours": ours_fn, "torch": torch_fn}, baseline="torch", rounds=rounds, min_time=min_run_time)
    ratio = 1 / result.ratio["ours"]  # result.ratio is torch's time / ours
    print(f"{label:<38} ours {result.best_s['ours'] * 1e3:8.2f} ms   torch {result.best_s['torch'] * 1e3:8.2f} ms   "
          f"ratio {ratio:5.3f}")
    return ratio


def uses_native_fast_path(module: nn.MultiheadAttention, x: torch.Tensor) -> bool:
    """Whether ``module(x, x, x)`` runs ``torch._native_multi_head_attention`` (counted on one call)."""
    calls = []
    original = torch._native_multi_head_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    torch._native_multi_head_attention = counting
    try:
        module(x, x, x, need_weights=False)
    finally:
        torch._native_multi_head_attention = original
    return bool(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--embed", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=0.5)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(args.embed, args.heads, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    x = torch.randn(args.batch, args.tokens, args.embed)

    env = environment()
    print(f"torch {env['torch']}, {env['platform']}, threads {torch.get_num_threads()}, "
          f"OMP_PROC_BIND={os.environ.get('OMP_PROC_BIND', '-')} OMP_PLACES={os.environ.get('OMP_PLACES', '-')}")
    print(f"b={args.batch} n={args.tokens} e={args.embed} h={args.heads} float32, self-attention, "
          f"fastest of {args.rounds} interleaved rounds, ratio within a round (median)")

    reference.eval()
    ours.eval()
    with torch.no_grad():
        fast_path = uses_native_fast_path(reference, x)
        print(f"nn.MultiheadAttention takes its native fast path here: {fast_path}")
        out_ours, _ = ours(x)
        out_ref, _ = reference(x, x, x, need_weights=False)
        torch.testing.assert_close(out_ours, out_ref, atol=1e-5, rtol=1e-5)
        ratio = measure("eval, no_grad (reported)", lambda: ours(x), lambda: reference(x, x, x, need_weights=False),
                        args.rounds, args.min_run_time)

    reference.train()
    ours.train()
    measure("train mode, autograd on (forward only)", lambda: ours(x),
            lambda: reference(x, x, x, need_weights=False), args.rounds, args.min_run_time)
    verdict = "within" if ratio <= 1.15 else "OVER"
    print(f"RESULT ratio {ratio:.3f} ({verdict} the 1.15x target)")


if __name__ == "__main__":
    main()
