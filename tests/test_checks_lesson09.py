"""Lesson 09 checks accept the right answers and reject common mistakes with their hint."""

from __future__ import annotations

import pytest
import torch
from _check_helpers import rejects

from attention_lab.models.tasks import Reversal, make_generator
from attention_lab.models.training import evaluate
from attention_lab.models.transformer import TinyTransformer, attention_rollout
from attention_lab.teaching.checks import lesson09 as check

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def setup():
    task = Reversal(seq_len=6, n_symbols=5)
    torch.manual_seed(0)
    model = TinyTransformer(task.vocab_size, 12, 3, 2, max_len=6).eval()  # (layers, h) = (2, 3): a .T shows
    tokens, _ = task.sample(4, generator=make_generator(1))
    with torch.no_grad():
        _, attention = model(tokens, return_attention=True)
    return task, model, attention


def mirror(attention):
    n = attention.shape[-1]
    scores = torch.zeros(attention.shape[0], attention.shape[2])
    for layer in range(attention.shape[0]):
        for head in range(attention.shape[2]):
            scores[layer, head] = torch.stack([attention[layer, :, head, i, n - 1 - i] for i in range(n)]).mean()
    return scores


def test_mirror_scores_accepts(setup, capsys):
    _, _, attention = setup
    check.mirror_scores(mirror(attention), attention)
    check.mirror_scores(mirror(attention).tolist(), attention)
    assert capsys.readouterr().out.count("Correct:") == 2


def test_mirror_scores_rejects(setup):
    _, _, attention = setup
    n = attention.shape[-1]
    rows = torch.arange(n)
    rejects(check.mirror_scores, attention[..., rows, rows].mean(dim=(1, 3)), attention, match="diagonal")
    rejects(check.mirror_scores, attention[..., rows, n - 1 - rows].sum(dim=(1, 3)), attention, match="don't sum")
    rejects(check.mirror_scores, mirror(attention).T, attention, match="rows are layers")
    rejects(check.mirror_scores, torch.zeros(5), attention, match="shape \\(layers, h\\)")
    rejects(check.mirror_scores, None, attention, match="still empty")


def ablations(model, task, keep_only=False):
    out = torch.zeros(model.num_layers, model.num_heads)
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            if keep_only:  # the mistake: a mask that keeps only this head
                mask = torch.zeros(model.num_layers, model.num_heads, dtype=torch.bool)
                mask[layer, head] = True
            else:  # the answer: every head but this one
                mask = torch.ones(model.num_layers, model.num_heads, dtype=torch.bool)
                mask[layer, head] = False
            out[layer, head] = evaluate(model, task, head_mask=mask)["token_accuracy"]
    return out


def test_ablation_accepts_and_rejects(setup, capsys):
    task, model, _ = setup
    right = ablations(model, task)
    check.ablation(right, model, task)
    assert capsys.readouterr().out.startswith("Correct:")
    rejects(check.ablation, ablations(model, task, keep_only=True), model, task, match="heads to KEEP")
    rejects(check.ablation, right.T, model, task, match="shape \\(layers, h\\)")
    rejects(check.ablation, right + 0.01, model, task, match="right shape but not the right values")


def test_most_needed_head():
    accuracies = torch.tensor([[0.9, 0.5, 0.99], [1.0, 0.8, 0.95]])
    check.most_needed_head((0, 1), accuracies)
    check.most_needed_head(torch.tensor([0, 1]), accuracies)
    rejects(check.most_needed_head, (1, 0), accuracies, match="hurts least")
    rejects(check.most_needed_head, (1, 1), accuracies, match="smallest entry")
    rejects(check.most_needed_head, (2, 1), accuracies, match="count from 0")
    rejects(check.most_needed_head, 1, accuracies, match="two indices")


def test_rollout_accepts_and_rejects(setup, capsys):
    _, _, attention = setup
    eye = torch.eye(attention.shape[-1])
    a1, a2 = (0.5 * eye + 0.5 * attention[k].mean(1) for k in range(2))
    check.rollout(a2 @ a1, attention)
    check.rollout(attention_rollout(attention), attention)
    assert capsys.readouterr().out.count("Correct:") == 2
    rejects(check.rollout, a1 @ a2, attention, match="later layers on the left")
    rejects(check.rollout, attention[1].mean(1) @ attention[0].mean(1), attention, match="residual path")
    first = (0.5 * eye + 0.5 * attention[1, :, 0]) @ (0.5 * eye + 0.5 * attention[0, :, 0])
    rejects(check.rollout, first, attention, match="average the heads")
    rejects(check.rollout, a1[0], attention, match="shape \\(b, i, j\\)")
