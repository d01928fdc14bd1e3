"""attention_lab.BlockLayout and block_sparse_attention: every layout x length x causal x block size equals dense
attention masked by ``to_dense(n)`` (values and gradients); weights sum to 1 over the kept keys; per-row key counts
match their formulas; empty rows give zeros; the FlexAttention converter agrees; bad input is refused clearly."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL

import attention_lab as al
import attention_lab.efficient.block_sparse.attention as gather_module
from attention_lab import BlockLayout, reference
from attention_lab.efficient.block_sparse import cpu_tuning
from attention_lab.efficient.block_sparse.cpu_tuning import plan_for, query_block_groups

F64 = TOL[torch.float64]
F32 = TOL[torch.float32]
LENGTHS = [97, 127, 129, 257, 1]


def layouts(b):
    """One of each constructor, their causal versions, and combinations (block size b)."""
    return {
        "local": BlockLayout.local(b),
        "sliding": BlockLayout.sliding_window(b),
        "sliding2": BlockLayout.sliding_window(b, neighbours=2),
        "sliding_causal": BlockLayout.sliding_window(b, neighbours=1, causal=True),
        "strided": BlockLayout.strided(b, 3),
        "global": BlockLayout.global_blocks(b, [0, 2]),
        "random": BlockLayout.random(b, 2, seed=3),
        "causal": BlockLayout.causal(b),
        "sliding|global": BlockLayout.sliding_window(b) | BlockLayout.global_blocks(b, [0]),
        "strided&causal": BlockLayout.strided(b, 2) & BlockLayout.causal(b),
        "local|causal": BlockLayout.local(b) | BlockLayout.causal(b),
        "random&causal": BlockLayout.random(b, 3, seed=1) & BlockLayout.causal(b),
        "bigbird": BlockLayout.bigbird(b, neighbours=1, global_blocks=1, random_per_row=2, seed=0),
        "fixed": BlockLayout.fixed(b, 3, 1),
    }


def qkv(*lead, n, d=5, dv=3, dtype=torch.float64, grad=False):
    tensors = (torch.randn(*lead, n, d, dtype=dtype), torch.randn(*lead, n, d, dtype=dtype),
               torch.randn(*lead, n, dv, dtype=dtype))
    return tuple(t.requires_grad_(grad) for t in tensors)


def dense(q, k, v, layout):
    """The reference: plain attention (zeros for empty rows) with the layout's element mask."""
    return reference.block_sparse_attention(q, k, v, layout)


@pytest.fixture
def small_groups(monkeypatch):
    """One query block per batched group, so that group boundaries are exercised on small inputs."""
    monkeypatch.setattr(cpu_tuning, "TILE_ELEMENTS", 1)


@pytest.mark.parametrize("name", list(layouts(16)))
@pytest.mark.parametrize(("n", "block_size"), [*((n, 16) for n in LENGTHS), (129, 32), (1, 32)])
def test_equals_dense_with_expanded_mask(name, n, block_size):
    """Block 16 at every length; block 32 at a length it does not divide and at length 1."""
    layout = layouts(block_size)[name]
    q, k, v = qkv(2, 3, n=n, grad=True)
    out = al.block_sparse_attention(q, k, v, layout)
    expected = dense(q, k, v, layout)
    torch.testing.assert_close(out, expected, **F64)
    grad = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), grad), torch.autograd.grad(expected, (q, k, v), grad)):
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("name", ["sliding_causal", "sliding|global", "random&causal", "global"])
def test_groups_of_query_blocks(name, small_groups):
    layout = layouts(8)[name]
    q, k, v = qkv(2, n=61)
    torch.testing.assert_close(al.block_sparse_attention(q, k, v, layout), dense(q, k, v, layout), **F64)


BAND_LAYOUTS = ["local", "sliding", "sliding2", "sliding_causal"]


BAND_CASES = [(n, group, torch.float64) for n in LENGTHS + [20, 160] for group in (1, 2, 3, None)]  # 20: two blocks,
BAND_CASES += [(n, group, torch.float32) for n, group in ((97, 2), (257, None), (20, 1))]  # a band wider than n


@pytest.mark.parametrize("name", BAND_LAYOUTS)
@pytest.mark.parametrize(("n", "group", "dtype"), BAND_CASES)
def test_band_path_equals_dense(name, n, group, dtype, monkeypatch):
    """Without autograd, layouts whose kept blocks form one band per row take the band path (strided views over
    K and V). Groups of 1, 2 or 3 query blocks (None: the default size) put group edges everywhere: inside a head,
    across two heads (6 of them here) and at both zero-padded ends; every case in fp64, and a few in fp32 (the
    path's arithmetic is the same in both dtypes)."""
    layout = layouts(16)[name]
    plan = plan_for(layout, n, torch.device("cpu"), band=True)
    assert plan is not None, f"{name} should be a band layout"
    if group is not None:
        monkeypatch.setattr(cpu_tuning, "BAND_TILE_ELEMENTS", group * 16 * plan.key_blocks.shape[1] * 16)
    calls = []
    band_attention = cpu_tuning.band_attention
    monkeypatch.setattr(gather_module, "band_attention", lambda *args: calls.append(1) or band_attention(*args))
    q, k, v = qkv(2, 3, n=n, dtype=dtype)
    with torch.no_grad():
        out = al.block_sparse_attention(q, k, v, layout)
    assert calls, "the band path did not run"
    torch.testing.assert_close(out, dense(q, k, v, layout), **TOL[dtype])


@pytest.mark.parametrize("name", ["strided", "global", "random", "sliding|global", "strided&causal", "causal"])
def test_other_layouts_take_the_general_path(name):
    """Not one band per row, or (causal) a band so wide that computing it whole would double the work."""
    assert plan_for(layouts(16)[name], 257, torch.device("cpu"), band=True) is None


@pytest.mark.parametrize("name", list(layouts(16)))
@pytest.mark.parametrize("n", [1, 97, 2048])
def test_work_follows_the_kept_blocks(name, n):
    """The general path sorts query blocks by how many key blocks they keep and pads only within groups of similar
    count: the block pairs it computes stay within a quarter of the kept pairs (plus one per empty row), even when a
    global block keeps every key block while its neighbours keep three."""
    layout = layouts(16)[name]
    plan = plan_for(layout, n, torch.device("cpu"), band=False)
    kept = int(layout.block_mask(n).sum())
    assert sum(plan.counts) == kept
    groups = query_block_groups(plan.counts, 6 * 16 * 16)  # 6 heads
    assert [first for first, _, _ in groups] == [0] + [last for _, last, _ in groups[:-1]]  # contiguous runs
    assert groups[-1][1] == layout.n_blocks(n)
    computed = 0
    for first, last, width in groups:
        assert width == max(max(plan.counts[first:last]), 1)
        assert last - first == 1 or (last - first) * width * 6 * 16 * 16 <= cpu_tuning.TILE_ELEMENTS
        computed += (last - first) * width
    assert computed <= 1.25 * kept + plan.counts.count(0)  # an empty row computes one (masked) block
    if name in ("global", "sliding|global") and n == 2048:  # padding every row to the longest would be dense
        assert computed < 0.2 * layout.n_blocks(n) * max(plan.counts)


@pytest.mark.parametrize("block_size", [1, 3, 128])
def test_odd_block_sizes(block_size):
    layout = BlockLayout.sliding_window(block_size, neighbours=1, causal=True) | BlockLayout.strided(block_size, 4)
    q, k, v = qkv(2, n=37)
    torch.testing.assert_close(al.block_sparse_attention(q, k, v, layout), dense(q, k, v, layout), **F64)


def test_fp32_matches_pytorch_sdpa():
    layout = BlockLayout.sliding_window(64, neighbours=1)
    q, k, v = qkv(1, 4, n=1000, d=64, dv=64, dtype=torch.float32)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=layout.to_dense(1000))
    torch.testing.assert_close(al.block_sparse_attention(q, k, v, layout), expected, **F32)


def test_causal_layout_equals_is_causal():
    q, k, v = qkv(2, 2, n=129)
    torch.testing.assert_close(al.block_sparse_attention(q, k, v, BlockLayout.causal(32)),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True), **F64)
    assert torch.equal(BlockLayout.causal(32).to_dense(129), torch.ones(129, 129, dtype=torch.bool).tril())


@pytest.mark.parametrize("name", list(layouts(16)))
def test_weights_sum_to_one_over_kept_keys(name):
    layout = layouts(16)[name]
    n = 97
    q, k, _ = qkv(1, n=n)
    # With the identity as values, output row i is the row of weights alpha'_{i, .}
    weights = al.block_sparse_attention(q, k, torch.eye(n, dtype=torch.float64)[None], layout)[0]
    mask = layout.to_dense(n)
    assert (weights[~mask] == 0).all()
    has_key = mask.any(dim=1)
    torch.testing.assert_close(weights.sum(dim=1)[has_key], torch.ones(int(has_key.sum()), dtype=torch.float64))
    assert (weights[~has_key] == 0).all()


def block_sizes(n, b):
    sizes = [b] * (n // b) + ([n % b] if n % b else [])
    return torch.tensor(sizes)


@pytest.mark.parametrize("n", LENGTHS + [64])
@pytest.mark.parametrize("b", [16, 5])
def test_per_row_key_counts_match_formulas(n, b):
    rows = torch.arange(n)
    r = rows // b  # query block of each row
    sizes = block_sizes(n, b)
    nb = len(sizes)
    blocks = torch.arange(nb)

    def keys_in(selected):  # selected: (n, nb) bool, which key blocks each row sees
        return (selected * sizes).sum(dim=1)

    def count(layout):
        return layout.to_dense(n).sum(dim=1)

    assert torch.equal(count(BlockLayout.local(b)), sizes[r])
    for w in (0, 1, 2):
        near = (r[:, None] - blocks[None, :]).abs() <= w
        assert torch.equal(count(BlockLayout.sliding_window(b, neighbours=w)), keys_in(near))
        # causal: from the first position of block r - w up to i itself
        causal = BlockLayout.sliding_window(b, neighbours=w, causal=True)
        assert torch.equal(count(causal), rows - (r - w).clamp_min(0) * b + 1)
    for s in (1, 2, 3):
        assert torch.equal(count(BlockLayout.strided(b, s)), keys_in((r[:, None] - blocks[None, :]) % s == 0))
    assert torch.equal(count(BlockLayout.causal(b)), rows + 1)
    chosen = [0, 2, 50]
    in_chosen = torch.isin(blocks, torch.tensor(chosen))
    expected = torch.where(in_chosen[r], torch.full_like(rows, n), keys_in(in_chosen[None, :].expand(n, nb)))
    assert torch.equal(count(BlockLayout.global_blocks(b, chosen)), expected)
    random = BlockLayout.random(b, 2, seed=0)
    assert torch.equal(random.block_mask(n).sum(dim=1), torch.full((nb,), min(2, nb)))
    assert torch.equal(count(random), keys_in(random.block_mask(n)[r]))


@pytest.mark.parametrize("name", list(layouts(16)))
@pytest.mark.parametrize("n", [1, 97, 256])
def test_sparsity_and_block_mask(name, n):
    layout = layouts(16)[name]
    mask = layout.to_dense(n)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    assert math.isclose(layout.sparsity(n), 1.0 - mask.double().mean().item(), abs_tol=1e-12)
    block = layout.block_mask(n)
    assert block.shape == (math.ceil(n / 16),) * 2
    # a block is kept exactly when some pair inside it is kept
    padded = F.pad(mask, (0, -n % 16, 0, -n % 16)).view(block.shape[0], 16, block.shape[0], 16)
    assert torch.equal(padded.any(dim=3).any(dim=1), block)


def test_union_and_intersection_are_elementwise():
    parts = [BlockLayout.sliding_window(8, neighbours=1, causal=True), BlockLayout.local(8), BlockLayout.strided(8, 3),
             BlockLayout.causal(8), BlockLayout.global_blocks(8, [1])]
    for a in parts:
        for b in parts:
            for n in (1, 30, 64):
                assert torch.equal((a | b).to_dense(n), a.to_dense(n) | b.to_dense(n))
                assert torch.equal((a & b).to_dense(n), a.to_dense(n) & b.to_dense(n))


def test_random_layout_is_reproducible():
    assert torch.equal(BlockLayout.random(4, 3, seed=7).to_dense(80), BlockLayout.random(4, 3, seed=7).to_dense(80))
    assert not torch.equal(BlockLayout.random(4, 3, seed=7).to_dense(80), BlockLayout.random(4, 3, seed=8).to_dense(80))


def test_global_tokens_restore_a_path():
    """Two hops through a global block connect any two positions; a sliding window alone needs many hops."""
    n, b = 64, 8
    sliding = BlockLayout.sliding_window(b, neighbours=1).to_dense(n).double()
    with_global = (BlockLayout.sliding_window(b, neighbours=1) | BlockLayout.global_blocks(b, [0])).to_dense(n).double()
    assert (sliding @ sliding)[0, n - 1] == 0
    assert ((with_global @ with_global) > 0).all()


def test_describe_and_repr():
    layout = BlockLayout.sliding_window(4, neighbours=1, causal=True) | BlockLayout.global_blocks(4, [0])
    text = layout.describe(14)
    lines = text.splitlines()
    name = "BlockLayout(sliding_window(4, neighbours=1, causal=True) | global_blocks(4, [0])), n=14"
    assert lines[0].startswith(name)
    assert "4 x 4 blocks of 4" in lines[0] and f"sparsity {layout.sparsity(14):.4f}" in lines[0]
    assert lines[2:] == ["####", "#\\..", "##\\.", "#.#\\"]
    assert repr(BlockLayout.local(3)) == "BlockLayout(local(3))"


@pytest.mark.parametrize("n", [1, 20, 97])
def test_empty_rows_give_zeros_and_finite_gradients(n):
    layout = BlockLayout.global_blocks(8, [2]) & BlockLayout.causal(8)  # rows before block 2 see nothing
    q, k, v = qkv(2, n=n, grad=True)
    out = al.block_sparse_attention(q, k, v, layout)
    empty = ~layout.to_dense(n).any(dim=1)
    assert (out[:, empty] == 0).all()
    torch.testing.assert_close(out, dense(q, k, v, layout), **F64)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert all(torch.isfinite(g).all() for g in grads)
    assert (grads[0][:, empty] == 0).all()


def test_gradcheck_fp64():
    layout = BlockLayout.sliding_window(3, neighbours=1, causal=True) | BlockLayout.global_blocks(3, [0])
    q, k, v = qkv(2, n=8, d=3, dv=2, grad=True)
    assert torch.autograd.gradcheck(lambda *x: al.block_sparse_attention(*x, layout), (q, k, v), fast_mode=True)


def test_broadcast_leading_dimensions():
    layout = BlockLayout.sliding_window(4, neighbours=1)
    q = torch.randn(2, 3, 10, 4, dtype=torch.float64)
    k = torch.randn(1, 3, 10, 4, dtype=torch.float64)
    v = torch.randn(10, 2, dtype=torch.float64)
    torch.testing.assert_close(al.block_sparse_attention(q, k, v, layout), dense(q, k, v, layout), **F64)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision(dtype):
    layout = BlockLayout.sliding_window(16, neighbours=1, causal=True)
    q, k, v = qkv(2, n=70, d=8, dv=8, dtype=dtype)
    out = al.block_sparse_attention(q, k, v, layout)
    assert out.dtype == dtype
    mask = layout.to_dense(70)
    reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    naive = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (out.double() - reference).abs().max() <= 2 * (naive.double() - reference).abs().max() + TOL[dtype]["atol"]


def test_inputs_not_modified():
    q, k, v = qkv(2, n=33)
    copies = [t.clone() for t in (q, k, v)]
    al.block_sparse_attention(q, k, v, BlockLayout.causal(8))
    for original, copy in zip((q, k, v), copies):
        assert torch.equal(original, copy)


@pytest.mark.parametrize("name", ["sliding|global", "causal", "strided&causal", "local"])
@pytest.mark.parametrize("n", [1, 97, 128])
def test_flex_block_mask_agrees(name, n):
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    layout = layouts(16)[name]
    q, k, v = qkv(1, 2, n=n, d=8, dv=8, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # eager flex warns that it is unfused; fine for a test
        out = flex.flex_attention(q, k, v, block_mask=layout.to_flex_block_mask(n))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=layout.to_dense(n))
    torch.testing.assert_close(out, expected, **F32)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("build", [
    lambda: BlockLayout.local(0),
    lambda: BlockLayout.sliding_window(0),
    lambda: BlockLayout.strided(0, 2),
    lambda: BlockLayout.global_blocks(0, [1]),
    lambda: BlockLayout.random(0, 1, seed=0),
    lambda: BlockLayout.causal(-1),
])
def test_block_size_below_one(build):
    with pytest.raises(ValueError, match=r"BlockLayout\.\w+\(\): block_size must be >= 1"):
        build()


@pytest.mark.parametrize("build,error,match", [
    (lambda: BlockLayout.sliding_window(4, -1), ValueError, "neighbours must be >= 0"),
    (lambda: BlockLayout.sliding_window(4, neighbours=1, causal="yes"), TypeError, "causal must be True or False"),
    (lambda: BlockLayout.sliding_window(4, width=2), TypeError, "unexpected keyword argument 'width'"),
    (lambda: BlockLayout.strided(4, 0), ValueError, "stride must be >= 1"),
    (lambda: BlockLayout.global_blocks(4, []), ValueError, "at least one block index"),
    (lambda: BlockLayout.global_blocks(4, [-1]), ValueError, "each block index must be >= 0"),
    (lambda: BlockLayout.global_blocks(4, 3), TypeError, "blocks must be a list"),
    (lambda: BlockLayout.random(4, 0, seed=1), ValueError, "per_row must be >= 1"),
    (lambda: BlockLayout.local(4.0), TypeError, "block_size must be an int"),
    (lambda: BlockLayout.local(4).sparsity(0), ValueError, r"sparsity\(\): n must be >= 1"),
    (lambda: BlockLayout.local(4).to_dense(-1), ValueError, "n must be >= 0"),
])
def test_bad_layout_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_combining_different_block_sizes_or_non_layouts():
    with pytest.raises(ValueError, match=r"BlockLayout\.__or__\(\): expected layouts with the same block_size, "
                                         r"got 4 and 8"):
        BlockLayout.local(4) | BlockLayout.local(8)
    with pytest.raises(ValueError, match=r"__and__\(\): expected layouts with the same block_size"):
        BlockLayout.local(4) & BlockLayout.causal(2)
    with pytest.raises(TypeError, match="expected another BlockLayout"):
        BlockLayout.local(4) | torch.ones(3, 3, dtype=torch.bool)


def test_bad_attention_input():
    q, k, v = qkv(2, n=8)
    layout = BlockLayout.local(4)
    with pytest.raises(TypeError, match=r"block_sparse_attention\(\): layout must be a BlockLayout"):
        al.block_sparse_attention(q, k, v, layout.to_dense(8))
    with pytest.raises(ValueError, match="as many queries as keys"):
        al.block_sparse_attention(q[:, :5], k, v, layout)
    with pytest.raises(ValueError, match="same number of positions j"):
        al.block_sparse_attention(q, k, v[:, :5], layout)
    with pytest.raises(ValueError, match="same last dimension d"):
        al.block_sparse_attention(q, k[..., :2], v, layout)
    with pytest.raises(TypeError, match="floating dtype"):
        al.block_sparse_attention(q.long(), k, v, layout)


# ---------------------------------------------------------------- block_fill


@pytest.mark.parametrize("n", [1, 50, 64])
def test_block_fill_counts_pairs_per_block(n):
    layout = BlockLayout.sliding_window(16, neighbours=1, causal=True) | BlockLayout.global_blocks(16, [1])
    fill = layout.block_fill(n)
    sizes = block_sizes(n, 16)
    padded = F.pad(layout.to_dense(n), (0, -n % 16, 0, -n % 16)).view(len(sizes), 16, len(sizes), 16)
    expected = padded.sum(dim=(1, 3)).double() / (sizes[:, None] * sizes[None, :])
    torch.testing.assert_close(fill, expected)
