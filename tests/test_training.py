"""The training loop: schedule values, the optimizers' one-step arithmetic, what History records, errors."""

import math

import pytest
import torch
from torch import nn

from attention_lab.models.schedule import warmup_schedule
from attention_lab.models.tasks import IGNORE_INDEX, PointerLookup, Reversal
from attention_lab.models.training import History, evaluate, make_optimizer, train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig


def tiny(task, norm="pre", seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=task.seq_len, d_model=16, num_heads=2,
                                             num_layers=1, norm=norm))


# ---- warmup_schedule -------------------------------------------------------------------------------------------

def test_warmup_is_linear_from_the_first_step():
    s = warmup_schedule(4, 12)
    assert [s(k) for k in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert s(100) == 1.0


def test_decays_after_the_warmup_at_known_steps():
    linear, cosine = warmup_schedule(4, 12, "linear"), warmup_schedule(4, 12, "cosine")
    assert linear(3) == cosine(3) == 1.0
    assert linear(4) == cosine(4) == 1.0  # p = 0 at the first step after warmup
    assert linear(8) == pytest.approx(0.5) and cosine(8) == pytest.approx(0.5)  # halfway: p = 1/2
    assert linear(6) == pytest.approx(0.75)
    assert cosine(6) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert linear(12) == pytest.approx(0.0) and cosine(12) == pytest.approx(0.0)
    assert linear(50) == pytest.approx(0.0)  # stays at the end value
    assert warmup_schedule(0, 10, "linear")(0) == 1.0  # no warmup: start at the full rate


def test_schedule_works_with_any_optimizer_through_lambdalr():
    w = nn.Parameter(torch.zeros(3))
    sgd = torch.optim.SGD([w], lr=0.2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(sgd, warmup_schedule(2, 6, "linear"))
    lrs = []
    for _ in range(6):
        lrs.append(sgd.param_groups[0]["lr"])
        sgd.step()
        scheduler.step()
    assert lrs == pytest.approx([0.1, 0.2, 0.2, 0.15, 0.1, 0.05])


def test_schedule_bad_inputs():
    with pytest.raises(ValueError, match=r"warmup_schedule\(\): warmup_steps must be >= 0, got warmup_steps=-1"):
        warmup_schedule(-1, 10)
    with pytest.raises(ValueError, match=r"total_steps must be >= 1"):
        warmup_schedule(0, 0)
    with pytest.raises(ValueError, match=r"schedule must be one of 'constant', 'linear', 'cosine', got"):
        warmup_schedule(1, 10, "step")


# ---- AdamW against Adam + L2, one step by hand ----------------------------------------------------------------

@pytest.mark.parametrize("grad", [-0.1, 0.3])
def test_adamw_and_adam_l2_differ_on_one_step_as_the_arithmetic_says(grad):
    lr, wd, eps, w0 = 0.1, 0.5, 1e-8, 1.0
    results = {}
    for name in ("adamw", "adam_l2"):
        layer = nn.Linear(1, 1, bias=False)  # a (1, 1) matrix: decayed
        with torch.no_grad():
            layer.weight.fill_(w0)
        opt = make_optimizer(layer, name, lr=lr, weight_decay=wd)
        layer.weight.grad = torch.full((1, 1), grad)
        opt.step()
        results[name] = layer.weight.item()
    # Adam's first step: m_hat = g, sqrt(v_hat) = |g|, so the step is lr * g / (|g| + eps).
    adamw = w0 * (1 - lr * wd) - lr * grad / (abs(grad) + eps)  # decay applied to w itself
    g_l2 = grad + wd * w0  # decay folded into the gradient, then normalised away by Adam
    adam_l2 = w0 - lr * g_l2 / (abs(g_l2) + eps)
    assert results["adamw"] == pytest.approx(adamw, abs=1e-6)
    assert results["adam_l2"] == pytest.approx(adam_l2, abs=1e-6)
    assert abs(results["adamw"] - results["adam_l2"]) > 0.04


@pytest.mark.parametrize("name, cls", [("adamw", torch.optim.AdamW), ("adam_l2", torch.optim.Adam)])
def test_the_fused_update_is_the_per_tensor_update(name, cls):
    """make_optimizer uses PyTorch's fused kernel (one kernel per group: lesson 08's steps are bound by per-op
    overhead); given the same gradients, ten of its steps agree with the per-tensor loop to float32 rounding."""
    task = Reversal(seq_len=5, n_symbols=6)
    fused_model, loop_model = tiny(task), tiny(task)
    fused = make_optimizer(fused_model, name, lr=0.01, weight_decay=0.1)
    assert fused.defaults["fused"] and not fused.defaults["foreach"]
    twin = dict(zip(fused_model.parameters(), loop_model.parameters()))
    loop = cls([{"params": [twin[p] for p in group["params"]], "weight_decay": group["weight_decay"]}
                for group in fused.param_groups], lr=0.01, foreach=False)
    generator = torch.Generator().manual_seed(0)
    for _ in range(10):
        for p, q in twin.items():
            p.grad = torch.randn(p.shape, generator=generator)  # well away from 0, where Adam's g / |g| is steady
            q.grad = p.grad.clone()
        fused.step()
        loop.step()
    moved = [(a - b).abs().max() for a, b in zip(fused_model.parameters(), tiny(task).parameters())]
    assert min(moved) > 1e-3, "every parameter moved: the comparison below is not of untouched weights"
    for a, b in zip(fused_model.parameters(), loop_model.parameters()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1.3e-6)


def test_biases_and_layernorm_are_not_decayed():
    model = tiny(Reversal(seq_len=4))
    opt = make_optimizer(model, "adamw", lr=1e-3, weight_decay=0.1)
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() == 1 for p in plain["params"])
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))
    assert isinstance(make_optimizer(model, "adam_l2", lr=1e-3), torch.optim.Adam)
    assert not isinstance(make_optimizer(model, "adam_l2", lr=1e-3), torch.optim.AdamW)


# ---- train and History ------------------------------------------------------------------------------------------

def test_history_records_every_step_and_follows_the_schedule():
    task = Reversal(seq_len=5, n_symbols=6)
    model = tiny(task)
    h = train(model, task, steps=12, lr=0.01, warmup_steps=4, schedule="linear", batch_size=8, progress=False)
    assert h.step == list(range(12))
    for values in (h.loss, h.accuracy, h.lr, h.grad_norm, h.clipped_grad_norm, h.weight_norm, h.seconds):
        assert len(values) == 12 and all(math.isfinite(v) for v in values)
    schedule = warmup_schedule(4, 12, "linear")
    assert h.lr == pytest.approx([0.01 * schedule(k) for k in range(12)])
    assert set(h.layer_grad_norm) == {"token_embedding", "position_embedding", "layers.0", "final_norm", "head"}
    total = torch.tensor([h.layer_grad_norm[name][3] for name in h.layer_grad_norm]).norm()
    assert float(total) == pytest.approx(h.grad_norm[3], rel=1e-5)  # layers partition the parameters
    assert all(0 <= a <= 1 for a in h.accuracy)
    assert h.seconds == sorted(h.seconds)
    assert h.config["warmup_steps"] == 4 and not h.diverged
    assert not model.training  # left in eval mode


def test_same_seed_same_run_other_seed_other_batches():
    task = PointerLookup(seq_len=5, n_symbols=4)
    runs = [train(tiny(task, seed=1), task, steps=6, lr=0.01, seed=seed, batch_size=8, progress=False)
            for seed in (7, 7, 8)]
    assert runs[0].loss == runs[1].loss and runs[0].weight_norm == runs[1].weight_norm
    assert runs[0].loss != runs[2].loss


def test_weight_decay_shrinks_weights_in_adamw():
    task = Reversal(seq_len=4, n_symbols=4)
    plain = train(tiny(task), task, steps=20, lr=0.01, weight_decay=0.0, batch_size=8, progress=False)
    decayed = train(tiny(task), task, steps=20, lr=0.01, weight_decay=2.0, batch_size=8, progress=False)
    assert decayed.weight_norm[-1] < plain.weight_norm[-1]


def test_clipping_changes_the_run_but_history_keeps_the_unclipped_norm():
    task = Reversal(seq_len=5, n_symbols=6)
    free = train(tiny(task), task, steps=8, lr=0.01, batch_size=8, progress=False)
    clipped = train(tiny(task), task, steps=8, lr=0.01, clip_grad_norm=1e-3, batch_size=8, progress=False)
    assert clipped.grad_norm[0] == pytest.approx(free.grad_norm[0])  # same start, recorded before clipping
    assert clipped.grad_norm[0] > 1e-3
    assert max(clipped.clipped_grad_norm) == pytest.approx(1e-3, rel=1e-3)
    assert free.clipped_grad_norm == free.grad_norm
    assert clipped.loss[-1] != free.loss[-1]


def test_reversal_is_learned():
    task = Reversal(seq_len=6, n_symbols=6)
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=6, d_model=32, num_heads=2,
                                              num_layers=2))
    h = train(model, task, steps=60, lr=0.01, batch_size=32, progress=False)
    assert h.final("accuracy", last=5) > 0.95
    assert evaluate(model, task, n_sequences=300)["token_accuracy"] > 0.95


class _Oracle(nn.Module):
    """Logits that put all mass on the task's answer (with ``wrong`` positions shifted by one)."""

    def __init__(self, task, wrong=()):
        super().__init__()
        self.task, self.wrong, self.dummy = task, wrong, nn.Parameter(torch.zeros(()))

    def forward(self, tokens):
        answer = self.task.solve(tokens).clamp(min=0)
        for position in self.wrong:
            answer[:, position] = (answer[:, position] + 1) % self.task.n_symbols
        return nn.functional.one_hot(answer, self.task.vocab_size).float() * 20 + self.dummy


def test_evaluate_counts_tokens_and_sequences():
    task = Reversal(seq_len=4, n_symbols=5)
    perfect = evaluate(_Oracle(task), task, n_sequences=50)
    assert perfect["token_accuracy"] == 1.0 and perfect["sequence_accuracy"] == 1.0 and perfect["loss"] < 1e-6
    one_off = evaluate(_Oracle(task, wrong=(2,)), task, n_sequences=50)
    assert one_off["token_accuracy"] == pytest.approx(0.75) and one_off["sequence_accuracy"] == 0.0
    pointer = PointerLookup(seq_len=4, n_symbols=5)
    unscored_wrong = evaluate(_Oracle(pointer, wrong=(0, 1)), pointer, n_sequences=50)  # only the last counts
    assert unscored_wrong["token_accuracy"] == 1.0 and unscored_wrong["sequence_accuracy"] == 1.0
    assert IGNORE_INDEX == -100


class _Exploding(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2, 2))

    def forward(self, tokens):
        return torch.full((*tokens.shape, 5), float("nan")) * self.w.sum()


def test_training_stops_when_the_loss_becomes_nan():
    h = train(_Exploding(), Reversal(seq_len=3, n_symbols=5), steps=10, lr=0.1, batch_size=2, progress=False)
    assert h.diverged and len(h.loss) == 1


def test_steps_and_seconds_to_an_accuracy():
    h = History(step=[0, 1, 2], accuracy=[0.2, 1.0, 1.0], seconds=[0.1, 0.2, 0.3])
    assert h.steps_to(1.0) == 2 and h.seconds_to(1.0) == 0.2
    assert h.steps_to(0.1) == 1
    assert History(step=[0], accuracy=[0.5], seconds=[1.0]).steps_to(1.0) is None
    assert h.final("accuracy", last=2) == 1.0


def test_bad_inputs_get_clear_errors():
    task = Reversal(seq_len=4)
    model = tiny(task)
    with pytest.raises(ValueError, match=r"train\(\): steps must be >= 1, got steps=0"):
        train(model, task, steps=0, lr=0.01)
    with pytest.raises(ValueError, match=r"train\(\): warmup_steps must be >= 0, got warmup_steps=-5"):
        train(model, task, steps=10, lr=0.01, warmup_steps=-5)
    with pytest.raises(ValueError, match=r"optimizer must be one of 'adamw', 'adam_l2', got optimizer='sgd'"):
        train(model, task, steps=10, lr=0.01, optimizer="sgd")
    with pytest.raises(ValueError, match=r"schedule must be one of"):
        train(model, task, steps=10, lr=0.01, schedule="exp")
    with pytest.raises(ValueError, match=r"lr must be a finite number > 0, got lr=0"):
        train(model, task, steps=10, lr=0)
    with pytest.raises(ValueError, match=r"weight_decay must be a finite number >= 0"):
        train(model, task, steps=10, lr=0.01, weight_decay=-1)
    with pytest.raises(ValueError, match=r"clip_grad_norm must be a finite number > 0"):
        train(model, task, steps=10, lr=0.01, clip_grad_norm=0.0)
    with pytest.raises(TypeError, match=r"train\(\): model must be a torch.nn.Module, got str"):
        train("model", task, steps=10, lr=0.01)
    with pytest.raises(TypeError, match=r"task must have a sample"):
        train(model, "reversal", steps=10, lr=0.01)
    with pytest.raises(TypeError, match=r"steps must be an int, got float"):
        train(model, task, steps=10.0, lr=0.01)
