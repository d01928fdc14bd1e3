"""Real images for lesson 13: scikit-learn's handwritten digits, a fixed split, and a full-batch training loop.

``load_digits_split()`` reads the 1,797 digits of 8 x 8 pixels that ship inside scikit-learn
(``sklearn.datasets.load_digits``: 16 grey levels, 0 to 16, scaled here to 0..1; nothing is downloaded) and splits
them once, stratified by label with a fixed seed, into a training and a test set. :func:`training_subset` takes the
same share of every digit from the training set, nested (a larger fraction keeps every image of a smaller one), so
that a curve over fractions varies the amount of data and little else. :func:`train_classifier` trains any model
that returns ``(logits, weights)`` on all of its images at once (full batch: a few thousand images of 64 pixels fit
in one step) with AdamW (:func:`~attention_lab.models.training.make_optimizer`), for a fixed number of steps, so two
models get the same budget; :func:`accuracy` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_number, check_positive_int, check_seed, check_tensor, fail
from .training import make_optimizer

__all__ = ["DigitsSplit", "accuracy", "load_digits_split", "train_classifier", "training_subset"]


@dataclass(frozen=True)
class DigitsSplit:
    """The digits, split once: images in 0..1 and their labels 0-9.

    Shape: train_images ``(n_train, 8, 8)``, train_labels ``(n_train,)``, test_images ``(n_test, 8, 8)``,
        test_labels ``(n_test,)``.
    """

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


def load_digits_split(*, test_size: float = 0.25, seed: int = 0) -> DigitsSplit:
    """scikit-learn's digits, split by ``sklearn.model_selection.train_test_split(..., stratify=labels,
    random_state=seed)``: every digit has the same share in both parts, and the split is the same on every run.

    Shape: -> a :class:`DigitsSplit` of float32 images ``(n, 8, 8)`` and int64 labels ``(n,)``.
    """
    fn = "load_digits_split"
    check_number(fn, "test_size", test_size, low=0, high=1, low_open=True, high_open=True)
    check_seed(fn, seed)
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        fail(fn, "scikit-learn is needed for the digits and is not installed; install the lessons' requirements "
                 "with pip install -r requirements.txt", ImportError)
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32) / 16  # (1797, 8, 8), grey levels 0..16 -> 0..1
    labels = torch.tensor(digits.target, dtype=torch.long)  # (1797,)
    train, test = train_test_split(torch.arange(len(labels)).numpy(), test_size=test_size, random_state=seed,
                                   stratify=labels.numpy())
    train, test = torch.as_tensor(train), torch.as_tensor(test)
    return DigitsSplit(images[train], labels[train], images[test], labels[test])


def training_subset(labels: torch.Tensor, fraction: float, *, seed: int = 0) -> torch.Tensor:
    """The indices of a stratified share ``fraction`` of ``labels``: of each class, the first ``round(fraction *
    count)`` (at least one) of a fixed shuffle drawn from ``seed``. Nested: a larger fraction, same seed, keeps
    every index of a smaller one.

    Shape: labels ``(n,)`` -> indices ``(m,)``, sorted.
    """
    fn = "training_subset"
    check_tensor(fn, "labels", labels)
    if labels.dim() != 1 or labels.dtype != torch.long:
        fail(fn, f"labels must be a 1-D tensor of class ids (torch.long), got shape {tuple(labels.shape)} and dtype "
                 f"{labels.dtype}; pass e.g. split.train_labels")
    check_number(fn, "fraction", fraction, low=0, high=1, low_open=True)
    check_seed(fn, seed)
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(labels), generator=generator)  # one shuffle for every class and fraction
    chosen = []
    for label in labels.unique():
        members = order[labels[order] == label]  # this class's indices, in shuffled order
        chosen.append(members[:max(1, round(fraction * len(members)))])
    return torch.cat(chosen).sort().values  # (m,)


def train_classifier(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, steps: int, lr: float = 1e-2,
                     weight_decay: float = 1e-2, seed: int = 0) -> list[float]:
    """Train ``model`` on every image at once, ``steps`` times: cross-entropy, AdamW, no schedule. ``seed`` seeds
    torch's global generator first (dropout or anything else random in the model). Returns the loss of each step.

    Shape: images ``(b, H, W)`` (or ``(b, c, H, W)``), labels ``(b,)`` -> ``steps`` floats.
    """
    fn = "train_classifier"
    if not isinstance(model, nn.Module):
        fail(fn, f"model must be a torch.nn.Module, got {type(model).__name__}; pass the model itself", TypeError)
    check_tensor(fn, "images", images, floating=True)
    check_tensor(fn, "labels", labels)
    if labels.dim() != 1 or len(labels) != len(images) or labels.dtype != torch.long:
        fail(fn, f"labels must be one class id (torch.long) per image, shape ({len(images)},), got shape "
                 f"{tuple(labels.shape)} and dtype {labels.dtype}; pass the labels of the same images")
    check_positive_int(fn, "steps", steps)
    check_seed(fn, seed)
    torch.manual_seed(seed)
    optimizer = make_optimizer(model, lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    for _ in range(steps):
        logits, _ = model(images)  # (b, classes)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of ``images`` whose largest logit is their label.

    Shape: images ``(b, H, W)`` (or ``(b, c, H, W)``), labels ``(b,)`` -> a float in [0, 1].
    """
    fn = "accuracy"
    check_tensor(fn, "labels", labels)
    if labels.dim() != 1 or len(labels) != len(images):
        fail(fn, f"labels must have one class id per image, shape ({len(images)},), got shape "
                 f"{tuple(labels.shape)}; pass the labels of the same images")
    logits, _ = model(images)  # (b, classes)
    return (logits.argmax(-1) == labels).float().mean().item()
