"""The shared validators of attention_lab._validation: each names the function, what it expected, what it got, and
(where given) a fix; and the functions that use them refuse bad flags, numbers and choices the same way."""

import math

import pytest
import torch

import attention_lab as al
from attention_lab._validation import check_bool, check_choice, check_number, fail


def test_fail_names_the_function_and_never_returns():
    with pytest.raises(TypeError, match=r"^f\(\): wrong$"):
        fail("f", "wrong", TypeError)


@pytest.mark.parametrize("value", [1, 0, None, "yes", torch.tensor(True)])
def test_check_bool_refuses_anything_but_a_bool(value):
    with pytest.raises(TypeError, match=rf"^f\(\): flag must be True or False, got {type(value).__name__} "):
        check_bool("f", "flag", value)


def test_check_bool_returns_the_flag():
    assert check_bool("f", "flag", True) is True and check_bool("f", "flag", False) is False


@pytest.mark.parametrize("kwargs,value,match", [
    (dict(low=0, low_open=True), 0, r"x must be a finite number > 0, got x=0$"),
    (dict(low=0), -1.5, r"x must be a finite number >= 0, got x=-1.5$"),
    (dict(high=1, high_open=True), 1, r"x must be a finite number < 1, got x=1$"),
    (dict(low=0, high=1, high_open=True), 1.0, r"x must be a finite number in \[0, 1\), got x=1.0$"),
    (dict(low=0, high=1, low_open=True), 0, r"x must be a finite number in \(0, 1\], got x=0$"),
    (dict(), math.inf, r"x must be a finite number, got x=inf$"),
    (dict(low=0), math.nan, r"x must be a finite number >= 0, got x=nan$"),
    (dict(low=0, low_open=True, unit="seconds"), -2, r"x must be a finite number of seconds > 0, got x=-2$"),
    (dict(low=1, low_open=True, hint="try 10"), 1, r"x must be a finite number > 1, got x=1; try 10$"),
])
def test_check_number_ranges(kwargs, value, match):
    with pytest.raises(ValueError, match=r"^f\(\): " + match):
        check_number("f", "x", value, **kwargs)


@pytest.mark.parametrize("value", [True, "1", None, torch.tensor(1.0)])
def test_check_number_refuses_non_numbers(value):
    with pytest.raises(TypeError, match=rf"^f\(\): x must be a finite number, got {type(value).__name__} "):
        check_number("f", "x", value)


def test_check_number_accepts_the_ends_and_returns_a_float():
    assert check_number("f", "x", 0, low=0, high=1) == 0.0 and isinstance(check_number("f", "x", 1, low=0), float)
    assert check_number("f", "x", 1, low=0, high=1) == 1.0


def test_check_choice():
    assert check_choice("f", "mode", "b", ("a", "b")) == "b"
    with pytest.raises(ValueError, match=r"^f\(\): mode must be one of 'a', 'b', got mode='c'; pick a$"):
        check_choice("f", "mode", "c", ("a", "b"), hint="pick a")


@pytest.mark.parametrize("call", [
    lambda: al.sliding_window_mask(4, 2, causal=1),
    lambda: al.blockwise_attention(*(torch.randn(2, 3),) * 3, causal=0),
    lambda: al.BlockLayout.sliding_window(4, causal=None),
    lambda: al.SelfAttention(4, bias="no"),
    lambda: al.MultiHeadAttention(4, 2, bias=1),
])
def test_every_flag_is_checked_the_same_way(call):
    with pytest.raises(TypeError, match=r"\(\): (causal|bias) must be True or False, got "):
        call()
