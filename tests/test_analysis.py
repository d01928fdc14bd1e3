"""attention_lab.analysis: attention rollout against the product written out by hand, on a trained model's weights,
and its errors."""

import pytest
import torch
from _tolerances import TOL

from attention_lab.analysis import attention_rollout
from attention_lab.models.transformer import TinyTransformer, TransformerConfig


def test_rollout_multiplies_the_residual_mixed_layers_in_order():
    attention = torch.softmax(torch.randn(3, 2, 4, 5, 5, dtype=torch.float64), dim=-1)
    eye = torch.eye(5, dtype=torch.float64)
    mixed = [0.5 * eye + 0.5 * attention[layer].mean(1) for layer in range(3)]
    expected = mixed[2] @ mixed[1] @ mixed[0]  # the last layer acts last
    torch.testing.assert_close(attention_rollout(attention), expected, **TOL[torch.float64])
    assert not torch.allclose(expected, mixed[0] @ mixed[1] @ mixed[2])
    torch.testing.assert_close(attention_rollout(attention).sum(-1), torch.ones(2, 5, dtype=torch.float64))
    torch.testing.assert_close(attention_rollout(attention[:1], residual=0.0), attention[0].mean(1))
    identity = attention_rollout(attention, residual=1.0)
    torch.testing.assert_close(identity, eye.expand(2, 5, 5))


def test_rollout_of_a_trained_models_attention_is_a_distribution():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=7, d_model=12, num_heads=2, num_layers=2, max_len=9,
                                              causal=True)).eval()
    tokens = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(1))  # (b, i)
    with torch.no_grad():
        _, attention = model(tokens, return_attention=True)  # (layers, b, h, i, j)
    rollout = attention_rollout(attention)
    assert rollout.shape == (3, 6, 6)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(3, 6))
    assert (rollout[:, torch.ones(6, 6, dtype=torch.bool).triu(1)] == 0).all()  # causal stays causal


def test_rollout_bad_inputs():
    with pytest.raises(ValueError, match=r"attention_rollout\(\): attention must have shape \(layers, b, h, i, j\)"):
        attention_rollout(torch.rand(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"with i == j"):
        attention_rollout(torch.rand(1, 1, 1, 3, 4))
    with pytest.raises(ValueError, match=r"residual must be a finite number in \[0, 1\]"):
        attention_rollout(torch.rand(1, 1, 1, 3, 3), residual=1.5)
    with pytest.raises(TypeError, match=r"attention must have a floating dtype"):
        attention_rollout(torch.ones(1, 1, 1, 3, 3, dtype=torch.long))
