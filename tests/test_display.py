"""attention_lab.teaching.display.show: the format every lesson prints small tensors in (fixed decimals, one row per
line, a bool mask as 0/1), the same text on every CPU."""

import pytest
import torch

from attention_lab.teaching.display import show


def test_a_matrix_prints_one_row_per_line_with_four_decimals(capsys):
    show("w", torch.tensor([[0.25, -1.0], [1 / 3, 2.0]]))
    assert capsys.readouterr().out == "w (2, 2):\n  [ 0.2500, -1.0000]\n  [ 0.3333,  2.0000]\n"


def test_other_decimals_keep_the_columns_aligned(capsys):
    show("w", torch.tensor([[0.25, -10.5]]), decimals=3)  # lesson 05's format
    assert capsys.readouterr().out == "w (1, 2):\n  [ 0.250, -10.500]\n"
    show("w", torch.tensor([1.0, 22.0]), decimals=1)
    assert capsys.readouterr().out == "w (2,):\n  [ 1.0, 22.0]\n"


def test_a_bool_mask_prints_as_ones_and_zeros(capsys):
    show("mask", torch.tensor([[True, False, False], [True, True, False]]))
    assert capsys.readouterr().out == "mask (2, 3):\n  1 0 0\n  1 1 0\n"


def test_leading_axes_become_rows_and_a_scalar_one_row(capsys):
    show("x", torch.arange(8.0).reshape(2, 2, 2))
    assert capsys.readouterr().out.splitlines() == ["x (2, 2, 2):", "  [ 0.0000,  1.0000]", "  [ 2.0000,  3.0000]",
                                                     "  [ 4.0000,  5.0000]", "  [ 6.0000,  7.0000]"]
    show("s", torch.tensor(0.5))
    assert capsys.readouterr().out == "s ():\n  [ 0.5000]\n"


def test_bad_input_names_the_fix():
    with pytest.raises(TypeError, match=r"show\(\): t must be a torch.Tensor, got list; wrap numbers with torch"):
        show("x", [1.0, 2.0])
    with pytest.raises(ValueError, match=r"show\(\): decimals must be >= 0"):
        show("x", torch.ones(2), decimals=-1)
