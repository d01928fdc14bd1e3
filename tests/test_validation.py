"""The shared validators, seen through the functions that use them: each error names the function, what it expected,
what it got, and (where given) a fix, and bad flags, numbers and choices are refused the same way everywhere."""

import math

import pytest
import torch

import attention_lab as al
from attention_lab.analysis import attention_rollout
from attention_lab.measure.timing import compare


def sdpa_with_dropout(p):
    q = torch.randn(2, 3)
    return al.scaled_dot_product_attention(q, q, q, dropout_p=p)


def test_an_error_names_the_function_what_it_expected_what_it_got_and_a_fix():
    with pytest.raises(ValueError, match=r"^causal_mask\(\): n_queries must be >= 1, got n_queries=0; pass "
                                         r"n_queries=1 or more$"):
        al.causal_mask(0)


@pytest.mark.parametrize("value", [1, 0, None, "yes", torch.tensor(True)])
def test_a_flag_must_be_a_bool(value):
    with pytest.raises(TypeError, match=rf"^sliding_window_mask\(\): causal must be True or False, got "
                                        rf"{type(value).__name__} "):
        al.sliding_window_mask(4, 2, causal=value)


def test_a_flag_is_read_as_given():
    assert not torch.equal(al.sliding_window_mask(4, 2, causal=True), al.sliding_window_mask(4, 2, causal=False))


@pytest.mark.parametrize("call,match", [
    (lambda: compare({"a": lambda: None}, min_time=0),
     r"^compare\(\): min_time must be a finite number of seconds > 0, got min_time=0; pass a finite min_time > 0$"),
    (lambda: al.sinusoidal_positions(4, 4, base=1),
     r"^sinusoidal_positions\(\): base must be a finite number > 1, got base=1; the paper uses 10000$"),
    (lambda: sdpa_with_dropout(1.0),
     r"^scaled_dot_product_attention\(\): dropout_p must be a finite number in \[0, 1\), got dropout_p=1.0; pass 0.0 "
     r"at evaluation time$"),
    (lambda: sdpa_with_dropout(-0.5), r"dropout_p must be a finite number in \[0, 1\), got dropout_p=-0.5; "),
    (lambda: sdpa_with_dropout(math.inf), r"dropout_p must be a finite number in \[0, 1\), got dropout_p=inf; "),
    (lambda: attention_rollout(torch.full((1, 1, 1, 2, 2), 0.5), residual=1.5),
     r"^attention_rollout\(\): residual must be a finite number in \[0, 1\], got residual=1.5; it is the share of "
     r"the residual path$"),
    (lambda: attention_rollout(torch.full((1, 1, 1, 2, 2), 0.5), residual=math.nan), r"got residual=nan; "),
])
def test_numbers_out_of_range_are_refused_with_their_bounds(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("value", [True, "1", None, torch.tensor(0.5)])
def test_a_number_must_be_a_real_number(value):
    with pytest.raises(TypeError, match=rf"^scaled_dot_product_attention\(\): dropout_p must be a finite number, got "
                                        rf"{type(value).__name__} "):
        sdpa_with_dropout(value)


def test_the_ends_of_a_closed_range_are_accepted():
    sdpa_with_dropout(0)  # [0, 1): 0 is in
    weights = torch.full((1, 1, 1, 2, 2), 0.5)
    assert attention_rollout(weights, residual=0).shape == attention_rollout(weights, residual=1).shape == (1, 2, 2)


def test_a_choice_names_the_choices_and_the_fix():
    with pytest.raises(ValueError, match=r"^set_language\(\): code must be one of 'en', 'zh-CN', 'zh-TW', got "
                                         r"code='fr'; pick \"en\""):
        al.set_language("fr")


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
