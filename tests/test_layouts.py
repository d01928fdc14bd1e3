"""BlockLayout.bigbird and BlockLayout.fixed against their papers' definitions, written out here element by element
(independently of the library's rules), and both through block_sparse_attention, one layout per head included."""

import pytest
import torch
from _tolerances import TOL

import attention_lab as al
from attention_lab import BlockLayout, reference

F64 = TOL[torch.float64]


# ---------------------------------------------------------------- fixed (Child et al. 2019)


def fixed_pattern(n: int, l: int, c: int) -> torch.Tensor:  # noqa: E741 (l as in the paper)
    """Sparse Transformers' fixed pattern, merged head, autoregressive: query i attends to key j <= i when
    floor(j / l) = floor(i / l) (A^(1)) or j mod l is one of the last c positions of a stretch, t..l-1 with
    t = l - c (A^(2))."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    same_stretch = torch.div(j, l, rounding_mode="floor") == torch.div(i, l, rounding_mode="floor")
    summary = (j % l) >= l - c
    return (j <= i) & (same_stretch | summary)


@pytest.mark.parametrize("block_size", [1, 3, 4])
@pytest.mark.parametrize("stride,summary", [(1, 1), (2, 1), (3, 1), (3, 2), (4, 4)])
@pytest.mark.parametrize("n", [1, 13, 40, 97])
def test_fixed_equals_the_papers_pattern(block_size, stride, summary, n):
    layout = BlockLayout.fixed(block_size, stride, summary)
    expected = fixed_pattern(n, stride * block_size, summary * block_size)
    assert torch.equal(layout.to_dense(n), expected)


def test_fixed_sees_earlier_summaries_and_nothing_later():
    dense = BlockLayout.fixed(2, 4, 1).to_dense(32)  # stretches of 8 positions, the last 2 of each summarise it
    assert dense[20, [6, 7, 14, 15]].all()  # summary columns of both earlier stretches
    assert not dense[20, [5, 13]].any()  # other positions of earlier stretches
    assert dense[20, 16:21].all() and not dense[20, 21:].any()  # its own stretch up to itself, nothing after


# ---------------------------------------------------------------- bigbird (Zaheer et al. 2020)


def bigbird_parts(n: int, b: int, neighbours: int, g: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BigBird's window and global parts as element masks, and the candidates of the random part per block pair:
    a window of neighbours blocks on each side; the first and last g blocks global; random blocks only among the
    blocks outside the window and not global, and only for rows that are not global."""
    nb = -(-n // b)
    block = torch.arange(n) // b
    window = (block[:, None] - block[None, :]).abs() <= neighbours  # (i, j)
    is_global = (torch.arange(nb) < g) | (torch.arange(nb) >= nb - g)  # (r,)
    global_part = is_global[block][:, None] | is_global[block][None, :]  # (i, j)
    blocks = torch.arange(nb)
    candidates = ((blocks[:, None] - blocks[None, :]).abs() > neighbours) & ~is_global[None, :] & ~is_global[:, None]
    return window, global_part, candidates


def expand(block_pairs: torch.Tensor, n: int, b: int) -> torch.Tensor:
    block = torch.arange(n) // b
    return block_pairs[block[:, None], block[None, :]]  # (i, j)


CASES = [  # n, block_size, neighbours, global_blocks, random_per_row
    (64, 4, 1, 1, 2), (97, 8, 1, 1, 3), (100, 5, 2, 2, 1), (40, 4, 0, 1, 4), (24, 8, 1, 1, 2), (7, 8, 1, 1, 2),
]


@pytest.mark.parametrize("n,b,neighbours,g,per_row", CASES)
@pytest.mark.parametrize("head", [0, 3])
def test_bigbird_is_window_global_and_random_outside_them(n, b, neighbours, g, per_row, head):
    layout = BlockLayout.bigbird(b, neighbours=neighbours, global_blocks=g, random_per_row=per_row, seed=5,
                                 head=head)
    window, global_part, candidates = bigbird_parts(n, b, neighbours, g)
    keep = layout.block_mask(n)
    random_part = keep & candidates  # what the layout adds beyond the window and the global blocks
    # Nothing outside window | global | candidates, and the first and last rows (global) draw nothing.
    assert torch.equal(layout.to_dense(n), window | global_part | expand(random_part, n, b))
    assert torch.equal(random_part.sum(dim=1), candidates.sum(dim=1).clamp(max=per_row))
    assert not random_part[0].any() and not random_part[-1].any()


def test_bigbird_draws_per_head_and_reproducibly():
    def random_part(seed, head, n=256):
        layout = BlockLayout.bigbird(8, neighbours=1, global_blocks=1, random_per_row=3, seed=seed, head=head)
        return layout.block_mask(n) & bigbird_parts(n, 8, 1, 1)[2]

    heads = [random_part(0, h) for h in range(4)]
    assert all(not torch.equal(heads[a], heads[b]) for a in range(4) for b in range(a + 1, 4))
    assert torch.equal(random_part(0, 2), heads[2])  # same seed and head: the same blocks
    assert not torch.equal(random_part(1, 2), heads[2])


def test_bigbird_random_blocks_are_drawn_uniformly():
    """Over 300 heads every candidate block of a row is drawn about per_row / candidates of the time."""
    nb, per_row = 10, 2
    _, _, candidates = bigbird_parts(nb, 1, 1, 1)
    counts = torch.zeros(nb, nb)
    for head in range(300):
        layout = BlockLayout.bigbird(1, neighbours=1, global_blocks=1, random_per_row=per_row, seed=0, head=head)
        counts += (layout.block_mask(nb) & candidates).float()
    expected = 300 * per_row / candidates.sum(dim=1, keepdim=True).clamp(min=1)  # (r, 1)
    share = counts[candidates] / expected.expand(nb, nb)[candidates]
    assert share.min() > 0.7 and share.max() < 1.3


def test_random_is_not_bigbird():
    """BlockLayout.random draws from all blocks, window included; the docstring no longer calls it BigBird's."""
    assert "BigBird's random part" not in BlockLayout.random.__doc__
    keep = BlockLayout.random(1, 3, seed=0).block_mask(40)
    assert (keep & torch.eye(40, dtype=torch.bool)).any()  # it may pick a row's own block


# ---------------------------------------------------------------- through block_sparse_attention


def bigbird_heads(h, b=8):
    return [BlockLayout.bigbird(b, neighbours=1, global_blocks=1, random_per_row=2, seed=1, head=i) for i in range(h)]


@pytest.mark.parametrize("layout", [
    BlockLayout.fixed(8, 3, 1), BlockLayout.bigbird(8, neighbours=1, global_blocks=1, random_per_row=2, seed=0),
    BlockLayout.fixed(4, 2, 1) | BlockLayout.bigbird(4, neighbours=0, global_blocks=1, random_per_row=1, seed=2),
], ids=["fixed", "bigbird", "fixed|bigbird"])
@pytest.mark.parametrize("n", [1, 97, 129])
def test_block_sparse_attention_with_the_new_layouts(layout, n):
    q, k, v = (torch.randn(2, 3, n, 5, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = al.block_sparse_attention(q, k, v, layout)
    expected = reference.block_sparse_attention(q, k, v, layout)
    torch.testing.assert_close(out, expected, **F64)
    grad = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), grad), torch.autograd.grad(expected, (q, k, v), grad)):
        torch.testing.assert_close(a, b, **F64)


def test_one_layout_per_head():
    layouts = bigbird_heads(3)
    q, k, v = (torch.randn(2, 3, 100, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = al.block_sparse_attention(q, k, v, layouts)
    for h, layout in enumerate(layouts):  # head h obeys layout h only
        torch.testing.assert_close(out[:, h], al.block_sparse_attention(q[:, h], k[:, h], v[:, h], layout), **F64)
    mask = torch.stack([layout.to_dense(100) for layout in layouts])  # (h, i, j)
    torch.testing.assert_close(out, reference.attention(q, k, v, mask)[0], **F64)
    torch.testing.assert_close(out, reference.block_sparse_attention(q, k, v, layouts), **F64)
    with torch.no_grad():  # the forward-only paths too
        torch.testing.assert_close(al.block_sparse_attention(q, k, v, layouts), out, **F64)
    shared = torch.randn(100, 4, dtype=torch.float64)  # k and v shared by every head broadcast
    torch.testing.assert_close(al.block_sparse_attention(q, shared, shared, layouts),
                               reference.block_sparse_attention(q, shared, shared, layouts), **F64)


@pytest.mark.parametrize("build,error,match", [
    (lambda: BlockLayout.fixed(4, 2, 3), ValueError, r"fixed\(\): summary must be <= stride"),
    (lambda: BlockLayout.fixed(4, 2, 0), ValueError, "summary must be >= 1"),
    (lambda: BlockLayout.fixed(4, 0, 1), ValueError, "stride must be >= 1"),
    (lambda: BlockLayout.bigbird(4, neighbours=1, global_blocks=0, random_per_row=1, seed=0), ValueError,
     "global_blocks must be >= 1"),
    (lambda: BlockLayout.bigbird(4, neighbours=-1, global_blocks=1, random_per_row=1, seed=0), ValueError,
     "neighbours must be >= 0"),
    (lambda: BlockLayout.bigbird(4, neighbours=1, global_blocks=1, random_per_row=1, seed=0, head=-1), ValueError,
     "head must be >= 0"),
    (lambda: BlockLayout.bigbird(4, 1, 1, 1, 0), TypeError, "positional argument"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_per_head_layouts():
    q = torch.randn(2, 3, 16, 4)
    with pytest.raises(ValueError, match=r"3 layouts need q, k, v of shape \(\.\.\., h, n, d\) with h = 3"):
        al.block_sparse_attention(q[:, :2], q[:, :2], q[:, :2], bigbird_heads(3, 4))
    with pytest.raises(TypeError, match="one BlockLayout per head"):
        al.block_sparse_attention(q, q, q, [BlockLayout.local(4), "local", BlockLayout.local(4)])
    with pytest.raises(TypeError, match="one BlockLayout per head"):
        al.block_sparse_attention(q, q, q, [])
