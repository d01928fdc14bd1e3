"""Lesson 07, the layout exercises: a layout that connects every pair of positions within a budget of layers and of
computed pairs (exercise 3), and the dilated layout and predicted sparsity that copies of the lesson handed out
earlier still call."""

from __future__ import annotations

import numbers

import torch

from ...efficient.block_sparse import BlockLayout
from ._core import correct, guard_errors, hint

__all__ = ["connected_layout", "dilated_layout", "layers_to_connect", "predicted_sparsity"]


@guard_errors
def dilated_layout(answer: object, *, block_size: int = 16, stride: int = 4) -> None:
    """Exercise 2: a dilated layout where each query block sees every ``stride``-th key block, itself included."""
    if answer is None or answer is Ellipsis:
        hint("your layout is still empty: build it with a BlockLayout constructor")
    if not isinstance(answer, BlockLayout):
        hint(f"the answer should be an attention_lab.BlockLayout, got {type(answer).__name__}; a bool matrix works "
             f"for one length only, a layout for every length")
    expected = BlockLayout.strided(block_size, stride)
    lengths = (1, 7 * block_size + 3, 13 * block_size)

    def same(a: BlockLayout, b: BlockLayout) -> bool:
        return a.block_size == b.block_size and all(torch.equal(a.to_dense(n), b.to_dense(n)) for n in lengths)

    if same(answer, expected):
        correct(f"query block r sees key blocks r, r +- {stride}, r +- {2 * stride}, ... in both directions")
        return
    if answer.block_size != block_size:
        hint(f"the blocks should hold {block_size} positions each, yours hold {answer.block_size}")
    for off_by_one in (stride - 1, stride + 1):
        if off_by_one >= 1 and same(answer, BlockLayout.strided(block_size, off_by_one)):
            hint(f"that skips the wrong number of blocks: 'every {stride}th block' means r - c is a multiple of "
                 f"{stride}")
    n = lengths[-1]
    if torch.equal(answer.to_dense(n), (expected & BlockLayout.causal(block_size)).to_dense(n)):
        hint("the exercise asks for both directions: earlier and later key blocks")
    if torch.equal(answer.to_dense(n), BlockLayout.sliding_window(block_size, neighbours=stride).to_dense(n)):
        hint("a sliding window sees every block up to the distance; a dilated layout sees only every "
             f"{stride}th one, with gaps in between")
    if not answer.to_dense(n).diagonal().all():
        hint("each query block should also see its own key block (distance 0 is a multiple of the stride)")
    hint(f"query block r should see key block c exactly when (r - c) is a multiple of {stride}")


@guard_errors
def predicted_sparsity(answer: object, layout: BlockLayout, n: int) -> None:
    """Exercise 3: the sparsity (share of the n x n (query, key) pairs skipped) of ``layout`` at length ``n``."""
    if answer is None or answer is Ellipsis:
        hint("your prediction is still empty: replace the placeholder with a number between 0 and 1")
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        hint(f"the sparsity is one number between 0 and 1, got {type(answer).__name__}")
    got = float(answer)
    expected = layout.sparsity(n)
    if abs(got - expected) <= 5e-4:
        correct(f"sparsity {expected:.4f}: {1 - expected:.2%} of the (query, key) pairs are computed")
        return
    if abs(got - (1 - expected)) <= 5e-4:
        hint("that is the share of pairs computed; sparsity is the share skipped")
    if got > 1 or got < 0:
        hint("a share of pairs lies between 0 and 1 (multiply by 100 for a percentage only when you print it)")
    blocks = layout.block_mask(n)
    block_share = 1 - blocks.double().mean().item()
    if abs(got - block_share) <= 5e-4:
        hint("that counts block pairs; count (query, key) pairs instead: the last block may be shorter, and a "
             "causal diagonal block keeps only its lower triangle")
    hint("count, for each query block, the key positions it keeps; add them up and divide by n * n; sparsity is "
         "1 minus that")


def layers_to_connect(block_mask: torch.Tensor) -> int | None:
    """Smallest p such that every block hears from every block in p layers (None: some pair never does).

    Shape: ``block_mask`` bool ``(query blocks, key blocks)``, square.
    """
    step = block_mask.to(torch.float64)
    reach = step.clone()
    for p in range(1, block_mask.shape[0] + 1):
        if bool((reach > 0).all()):
            return p
        grown = ((reach @ step) > 0).to(torch.float64)
        if torch.equal(grown, reach):
            return None
        reach = grown
    return None


@guard_errors
def connected_layout(answer: object, *, n: int = 4096, block_size: int = 64, max_layers: int = 3,
                     max_share: float = 0.05) -> None:
    """Exercise 3: a layout with blocks of ``block_size`` that, at length ``n``, connects every pair of positions
    within ``max_layers`` layers and computes at most ``max_share`` of the (query, key) pairs."""
    if answer is None or answer is Ellipsis:
        hint("your layout is still empty: build it from BlockLayout constructors, combined with | or &")
    if not isinstance(answer, BlockLayout):
        hint(f"the answer should be an attention_lab.BlockLayout, got {type(answer).__name__}; a layout works for "
             f"every length, a mask for one")
    if answer.block_size != block_size:
        hint(f"the blocks should hold {block_size} positions each, yours hold {answer.block_size}")
    share = 1 - answer.sparsity(n)
    blocks = answer.block_mask(n)
    dense = answer.to_dense(n)
    if not bool(torch.equal(dense, blocks.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)[:n, :n])):
        hint("a causal part keeps only the lower triangle of each diagonal block, so a query there does not see "
             "every key of its block; this exercise wants both directions: leave the causal part out")
    layers = layers_to_connect(blocks)
    if layers is None:
        hint("some blocks never hear from some others, in any number of layers: your layout splits the sequence "
             "into groups that no kept block joins")
    if layers > max_layers:
        hint(f"every pair is connected only after {layers} layers, more than {max_layers}: a window grows each "
             f"position's reach by a block or so per layer; what gives every block a path of two hops?")
    if share > max_share:
        hint(f"every pair is connected after {layers} layers, but your layout computes {share:.2%} of the "
             f"(query, key) pairs, over the budget of {max_share:.0%}: find the part of it that keeps the most "
             f"blocks, and ask whether the short paths need it")
    correct(f"{share:.2%} of the (query, key) pairs computed, and every pair connected after {layers} layers")
