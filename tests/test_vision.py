"""Lesson 13's images: patches checked by hand, both models' parameters counted by hand, the convolution written as
attention equal to nn.Conv2d (the plain reference and the shifted fast path), the digits split and subsets, and
every bad input refused with a message that names the function."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL
from torch import nn

from attention_lab import reference
from attention_lab.models.conv_attention import conv_as_attention, offset_weights
from attention_lab.models.digits import accuracy, train_classifier, training_subset
from attention_lab.models.vision import TinyCNN, TinyViT, patchify, unpatchify

# ---- patches ----


def test_patchify_a_4x4_image_by_hand():
    """Pixels 0..15 row by row; 2 x 2 patches, row by row: the top-left patch holds 0 1 / 4 5."""
    image = torch.arange(16.0).reshape(1, 4, 4)
    expected = torch.tensor([[[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]]).float()
    assert torch.equal(patchify(image, 2), expected)
    assert torch.equal(unpatchify(expected, 4, 4, 2), image)


def test_patchify_rectangular_and_colour_images_round_trip():
    images = torch.randn(3, 2, 4, 6)  # (b, c, H, W)
    tokens = patchify(images, 2)
    assert tokens.shape == (3, 2 * 3, 2 * 2 * 2)
    # a patch's vector lists its pixels row by row, the channels of each pixel together
    assert torch.equal(tokens[1, 4], images[1, :, 2:4, 2:4].permute(1, 2, 0).reshape(-1))
    assert torch.equal(unpatchify(tokens, 4, 6, 2, channels=2), images)
    assert torch.equal(patchify(images[:, 0], 1), images[:, 0].reshape(3, 24, 1))  # patch 1: one pixel a token


# ---- the two models ----


def test_vit_parameters_counted_by_hand():
    e, d_ff, n, patch_dim, classes = 16, 32, 16, 4, 10
    by_hand = ((patch_dim * e + e)  # patch embedding
               + e + (1 + n) * e  # class token, positions
               + 4 * (e * e + e) + (e * d_ff + d_ff) + (d_ff * e + e) + 2 * 2 * e  # one block: q k v o, MLP, 2 LN
               + 2 * e + (e * classes + classes))  # final LayerNorm, head
    assert by_hand == 2794
    assert sum(p.numel() for p in TinyViT().parameters()) == by_hand


def test_cnn_parameters_counted_by_hand():
    by_hand = (1 * 8 * 9 + 8) + (8 * 24 * 9 + 24) + (24 * 2 * 2 * 10 + 10)  # conv 1 -> 8, conv 8 -> 24, linear
    assert by_hand == 2802
    assert sum(p.numel() for p in TinyCNN().parameters()) == by_hand


def test_vit_returns_the_class_tokens_attention_and_logits():
    model = TinyViT(num_layers=2)
    images = torch.rand(5, 8, 8)
    logits, weights = model(images, need_weights=True)
    assert logits.shape == (5, 10) and weights.shape == (2, 5, 2, 17, 17)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5, 2, 17))
    torch.testing.assert_close(model(images)[0], logits)
    assert model(images)[1] is None
    torch.testing.assert_close(model(images[:, None])[0], logits)  # (b, 1, H, W) is the same grey image


def test_models_can_learn_a_batch():
    images, labels = torch.rand(40, 8, 8), torch.arange(40) % 10
    for model in (TinyViT(), TinyCNN()):
        losses = train_classifier(model, images, labels, steps=60, lr=2e-2)
        assert losses[-1] < 0.5 * losses[0], type(model).__name__
        assert 0.0 <= accuracy(model, images, labels) <= 1.0


# ---- a convolution as attention ----


@pytest.mark.parametrize("c_in, c_out, height, width, kernel, bias", [
    (1, 1, 8, 8, 3, True), (1, 8, 8, 8, 3, False), (3, 5, 7, 4, 3, True), (4, 2, 1, 1, 3, True),
    (2, 3, 2, 9, 3, False), (2, 2, 6, 5, 5, True), (3, 3, 5, 5, (1, 3), True),
])
def test_conv_as_attention_equals_conv2d(c_in, c_out, height, width, kernel, bias):
    conv = nn.Conv2d(c_in, c_out, kernel, padding="same", bias=bias).double()
    x = torch.randn(2, c_in, height, width, dtype=torch.float64)
    expected = conv(x)
    plain, weights = reference.conv_as_attention(x, conv.weight, conv.bias)
    kh, kw = conv.weight.shape[-2:]
    assert weights.shape == (kh * kw, height * width, height * width)
    torch.testing.assert_close(plain, expected, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(conv_as_attention(x, conv.weight, conv.bias), expected, atol=1e-12, rtol=1e-12)
    conv32, x32 = conv.float(), x.float()
    torch.testing.assert_close(conv_as_attention(x32, conv32.weight, conv32.bias), conv32(x32), **TOL[torch.float32])
    torch.testing.assert_close(reference.conv_as_attention(x32, conv32.weight, conv32.bias)[0], conv32(x32),
                               **TOL[torch.float32])


def test_conv_as_attention_gradients_match_conv2d():
    weight = torch.randn(3, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: conv_as_attention(x, w), (x, weight), fast_mode=True)
    ours = torch.autograd.grad(conv_as_attention(x, weight).square().sum(), (x, weight))
    theirs = torch.autograd.grad(F.conv2d(x, weight, padding=1).square().sum(), (x, weight))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


def test_each_head_attends_to_one_pixel_or_to_nothing_at_the_border():
    _, weights = reference.conv_as_attention(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 3))
    up_left = offset_weights(3, 4, -1, -1)
    assert torch.equal(weights[0], up_left)
    assert up_left[5, 0] == 1 and up_left[5].sum() == 1  # pixel (1, 1) looks at (0, 0)
    assert up_left[0].sum() == 0 and up_left[4].sum() == 0  # the top row and the left column look outside
    assert torch.equal(weights[4], torch.eye(12))  # the centre head: every pixel attends to itself
    right = offset_weights(3, 4, 0, 1)
    assert right[3].sum() == 0 and right[7].sum() == 0  # the right column does not wrap to the next row
    assert torch.equal(offset_weights(3, 4, 1, 1), up_left.T)  # the opposite offset: the transposed pattern


def test_conv_as_attention_leaves_its_inputs_alone():
    x, w, b = torch.randn(2, 2, 4, 4), torch.randn(3, 2, 3, 3), torch.randn(3)
    copies = [t.clone() for t in (x, w, b)]
    conv_as_attention(x, w, b)
    reference.conv_as_attention(x, w, b)
    assert all(torch.equal(t, c) for t, c in zip((x, w, b), copies))


# ---- the digits: subsets (the data itself needs scikit-learn, which the lesson loads) ----


def test_training_subset_is_stratified_and_nested():
    labels = torch.arange(100) % 4  # 25 of each class
    small, large = training_subset(labels, 0.2, seed=3), training_subset(labels, 0.6, seed=3)
    assert labels[small].bincount().tolist() == [5, 5, 5, 5]
    assert labels[large].bincount().tolist() == [15, 15, 15, 15]
    assert set(small.tolist()) <= set(large.tolist())
    assert torch.equal(training_subset(labels, 1.0), torch.arange(100))
    assert not torch.equal(training_subset(labels, 0.2, seed=4), small)
    assert len(training_subset(labels, 0.001)) == 4  # at least one of each class


def test_load_digits_split_is_fixed_and_stratified():
    pytest.importorskip("sklearn")
    from attention_lab.models.digits import load_digits_split

    split = load_digits_split()
    assert split.train_images.shape == (1347, 8, 8) and split.test_images.shape == (450, 8, 8)
    assert 0 <= split.train_images.min() and split.train_images.max() <= 1
    test, every = split.test_labels.bincount(), torch.cat([split.train_labels, split.test_labels]).bincount()
    assert (test - 0.25 * every).abs().max() <= 1  # stratified: each digit's quarter in the test set, up to rounding
    assert torch.equal(load_digits_split().test_labels, split.test_labels)


# ---- bad inputs ----


@pytest.mark.parametrize("call, error, match", [
    (lambda: patchify(torch.rand(2, 8, 7), 2), ValueError, r"patchify\(\): .*multiples of patch=2.*W=7"),
    (lambda: patchify(torch.rand(8, 8), 2), ValueError, r"patchify\(\): images must have shape \(b, H, W\)"),
    (lambda: patchify(torch.arange(64).reshape(1, 8, 8), 2), TypeError, r"patchify\(\): .*floating"),
    (lambda: patchify(torch.rand(1, 8, 8), 0), ValueError, r"patchify\(\): patch must be >= 1"),
    (lambda: unpatchify(torch.rand(1, 16, 4), 8, 8, 4), ValueError, r"unpatchify\(\): tokens must have shape "
                                                                      r"\(b, 4, 16\)"),
    (lambda: TinyViT(image_size=8, patch=3), ValueError, r"TinyViT\(\): image_size must be a multiple of patch"),
    (lambda: TinyViT(dim=15, num_heads=2), ValueError, r"TinyViT\(\): dim must be divisible by num_heads"),
    (lambda: TinyViT()(torch.rand(2, 6, 6)), ValueError, r"TinyViT.forward\(\): images must be 1 x 8 x 8"),
    (lambda: TinyCNN(image_size=6), ValueError, r"TinyCNN\(\): image_size must be a multiple of 4"),
    (lambda: TinyCNN(widths=[8, 24]), TypeError, r"TinyCNN\(\): widths must be a tuple"),
    (lambda: TinyCNN()(torch.rand(2, 8, 8), need_weights=True), ValueError,
     r"TinyCNN.forward\(\): need_weights must be False"),
    (lambda: conv_as_attention(torch.rand(1, 2, 4, 4), torch.rand(3, 1, 3, 3)), ValueError,
     r"conv_as_attention\(\): images must be \(b, c, H, W\) and weight \(o, c, kh, kw\) with the same c"),
    (lambda: conv_as_attention(torch.rand(1, 1, 4, 4), torch.rand(3, 1, 2, 2)), ValueError,
     r"conv_as_attention\(\): the kernel must have odd sizes"),
    (lambda: conv_as_attention(torch.rand(1, 1, 4, 4), torch.rand(3, 1, 3, 3), torch.rand(2)), ValueError,
     r"conv_as_attention\(\): bias must have shape \(3,\)"),
    (lambda: offset_weights(3, 3, 1.0, 0), TypeError, r"offset_weights\(\): dy must be an int"),
    (lambda: offset_weights(0, 3, 1, 0), ValueError, r"offset_weights\(\): height must be >= 1"),
    (lambda: training_subset(torch.arange(10.0), 0.5), ValueError, r"training_subset\(\): labels must be"),
    (lambda: training_subset(torch.arange(10), 0.0), ValueError, r"training_subset\(\): fraction must be"),
    (lambda: train_classifier(TinyCNN(), torch.rand(4, 8, 8), torch.arange(3), steps=1), ValueError,
     r"train_classifier\(\): labels must be one class id"),
    (lambda: train_classifier(TinyCNN(), torch.rand(4, 8, 8), torch.arange(4), steps=0), ValueError,
     r"train_classifier\(\): steps must be >= 1"),
    (lambda: accuracy(TinyCNN(), torch.rand(4, 8, 8), torch.arange(3)), ValueError, r"accuracy\(\): labels must"),
])
def test_bad_inputs_name_the_function_and_a_fix(call, error, match):
    with pytest.raises(error, match=match):
        call()
