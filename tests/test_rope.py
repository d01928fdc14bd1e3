"""apply_rope: equal to explicit 2 x 2 rotations, and the properties that make it a position code for a cache."""

import math

import pytest
import torch
from _tolerances import TOL

import attention_lab as al
from attention_lab import reference


def test_equals_the_plain_rotation_of_each_pair_values_and_gradients():
    x = torch.randn(2, 3, 7, 10, dtype=torch.float64, requires_grad=True)  # (b, h, n, d): n odd, d not a power of 2
    positions = torch.tensor([0, 1, 2, 5, 9, 100, 4097])
    torch.testing.assert_close(al.apply_rope(x, positions), reference.rope(x, positions), **TOL[torch.float64])
    torch.testing.assert_close(al.apply_rope(x, positions, base=50.0), reference.rope(x, positions, base=50.0),
                               **TOL[torch.float64])
    assert torch.autograd.gradcheck(lambda t: al.apply_rope(t, positions), (x,))
    grad = torch.randn_like(x)
    ours = torch.autograd.grad(al.apply_rope(x, positions), x, grad)[0]
    plain = torch.autograd.grad(reference.rope(x, positions), x, grad)[0]
    torch.testing.assert_close(ours, plain, **TOL[torch.float64])


def test_pairs_are_adjacent_features_and_the_first_pair_turns_one_radian_per_position():
    x = torch.zeros(1, 4, dtype=torch.float64)
    x[0, 0] = 1.0  # the unit vector along feature 0, the first of pair 0
    out = al.apply_rope(x, torch.tensor([3]))
    torch.testing.assert_close(out[0, :2], torch.tensor([math.cos(3), math.sin(3)], dtype=torch.float64))
    assert out[0, 2:].abs().max() == 0  # the other pair is untouched: pairs are (0, 1), (2, 3), not split halves


def test_position_zero_is_the_identity_and_norms_never_change():
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(al.apply_rope(x, torch.zeros(5, dtype=torch.long)), x)
    rotated = al.apply_rope(x, torch.arange(5) * 1000)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), **TOL[torch.float64])
    pairs, rotated_pairs = x.unflatten(-1, (4, 2)), rotated.unflatten(-1, (4, 2))  # every pair keeps its length
    torch.testing.assert_close(rotated_pairs.norm(dim=-1), pairs.norm(dim=-1), **TOL[torch.float64])


def test_the_score_depends_only_on_the_distance_between_query_and_key():
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)

    def score(p, r):
        return al.apply_rope(q[None], torch.tensor([p])) @ al.apply_rope(k[None], torch.tensor([r]))[0]

    for p, r in [(5, 2), (7, 7), (3, 11)]:
        for shift in (1, 40, 1000):
            torch.testing.assert_close(score(p + shift, r + shift), score(p, r), **TOL[torch.float64])
    assert not torch.allclose(score(5, 2), score(5, 3))  # a different distance gives a different score


def test_positions_offset_by_a_cache_length_equal_the_longer_sequence():
    x = torch.randn(2, 4, 12, 8)  # (b, h, n, d)
    whole = al.apply_rope(x, torch.arange(12))
    for cached in (1, 5, 11):
        tail = al.apply_rope(x[..., cached:, :], torch.arange(cached, 12))
        torch.testing.assert_close(tail, whole[..., cached:, :], **TOL[torch.float32])
    forgot_offset = al.apply_rope(x[..., 5:, :], torch.arange(7))  # the classic bug: positions restart at 0
    assert not torch.allclose(forgot_offset, whole[..., 5:, :], atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_keeps_its_dtype_and_errs_no_more_than_the_plain_version(dtype):
    x = torch.randn(2, 9, 32, dtype=torch.float64).to(dtype)
    positions = torch.arange(9) * 300
    exact = al.apply_rope(x.double(), positions)
    ours, plain = al.apply_rope(x, positions), reference.rope(x, positions)
    assert ours.dtype == dtype
    assert (ours.double() - exact).abs().max() <= 2 * (plain.double() - exact).abs().max() + 1e-7


def test_input_is_not_changed_in_place_and_a_single_position_works():
    x = torch.randn(1, 1, 1, 6)
    before = x.clone()
    out = al.apply_rope(x, torch.tensor([3]))
    assert out.shape == x.shape and torch.equal(x, before)


def test_bad_inputs_name_what_was_given_and_what_is_expected():
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"apply_rope\(\): .*d of x must be even.*got d=7.*even head_dim such as 8"):
        al.apply_rope(torch.randn(2, 5, 7), torch.arange(5))
    with pytest.raises(TypeError, match=r"positions must hold integers.*got dtype torch.float32"):
        al.apply_rope(x, torch.arange(5.0))
    with pytest.raises(TypeError, match=r"positions must hold integers.*got dtype torch.bool"):
        al.apply_rope(x, torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"positions must have shape \(n,\) = \(5,\).*got shape \(4,\)"):
        al.apply_rope(x, torch.arange(4))
    with pytest.raises(ValueError, match=r"base must be a finite number > 1, got base=1.0.*10000"):
        al.apply_rope(x, torch.arange(5), base=1.0)
    with pytest.raises(TypeError, match=r"base must be a finite number, got str"):
        al.apply_rope(x, torch.arange(5), base="10000")
    with pytest.raises(TypeError, match=r"x must have a floating dtype, got torch.int64"):
        al.apply_rope(torch.ones(2, 5, 8, dtype=torch.long), torch.arange(5))
    with pytest.raises(ValueError, match=r"x must have at least 2 dimensions, got shape \(8,\)"):
        al.apply_rope(torch.randn(8), torch.arange(1))
