"""Lesson 03's checks: what the corpus (tests/answers/lesson03.py) cannot show by one answer at a time. The rules the
checks encode hold for real layers; every mistake a check names differs from the right answer on the exercise's own
example (kernel 7, 4 layers), so a hint is never shown to a right formula that happens to agree there; hints name the
learner's own function; the checks leave the lesson's random numbers alone; no success line gives away another
exercise's answer."""

from pathlib import Path

import nbformat
import pytest
import torch
from _check_helpers import accepts, inputs_tried, only_on, rejects
from answers import GENERIC
from answers import lesson03 as corpus
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import lesson03

# ---- the rules against real layers, on the inputs each check tries (as a learner's function receives them) ----


def window_rule(kernel, layers):
    return layers * (kernel // 2) + 1


def mult_adds_rule(n, e):
    return 3 * n * e * e + 2 * n * n * e


STACKS = inputs_tried(lesson03.window_for_stack, window_rule)  # (kernel, layers) per input; the first: the example
LAYER_SIZES = inputs_tried(lesson03.layer_mult_adds, mult_adds_rule)  # (n, e) per input


def measured_window(kernel, layers, n=40, e=2):
    """The window of the mask that equals a real conv stack's dependencies (via the Jacobian)."""
    stack = nn.Sequential(*[nn.Conv1d(e, e, kernel, padding=kernel // 2) for _ in range(layers)])
    with torch.no_grad():
        for conv in stack:
            conv.weight.uniform_(0.1, 1.0)  # positive weights: no accidental cancellation
    jac = torch.autograd.functional.jacobian(lambda t: stack(t.T[None])[0].T, torch.randn(n, e))  # (n, e, n, e)
    field = jac.abs().sum(dim=(1, 3)) > 0
    return next(w for w in range(1, n + 1) if torch.equal(al.sliding_window_mask(n, w), field))


@pytest.mark.parametrize(("kernel", "layers"), STACKS)
def test_the_window_rule_matches_real_convolutions(kernel, layers):
    assert measured_window(kernel, layers) == window_rule(kernel, layers)


@pytest.mark.parametrize(("n", "e"), LAYER_SIZES)
def test_the_multiply_add_rule_is_what_flopcountermode_counts(n, e):
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        al.SelfAttention(e)(torch.zeros(1, n, e))
    assert counter.get_total_flops() == 2 * mult_adds_rule(n, e)  # 2 FLOPs per multiply-add


# ---- example numbers on which the mistakes differ (issue 20, 03/3) ----


def corpus_formulas(exercise: str, example: tuple) -> list:
    """The corpus's wrong formulas of an exercise, each with its value on the example: not its stubs and broken
    functions, nor the answers right by design on the example (the number written in, the count measured)."""
    found = []
    for attempt in corpus.ATTEMPTS:
        if (attempt.exercise != exercise or attempt.right or not callable(attempt.answer)
                or attempt.label in ("the first answer written in", "measured with FlopCounterMode")):
            continue
        try:
            value = attempt.answer(*example)
        except Exception:
            continue
        if isinstance(value, int):
            found.append((attempt.answer, value, attempt.hint))
    return found


@pytest.mark.parametrize(("exercise", "check", "rule", "inputs"), [
    ("03/3", lesson03.window_for_stack, window_rule, STACKS),
    ("03/4", lesson03.layer_mult_adds, mult_adds_rule, LAYER_SIZES),
])
def test_every_named_mistake_differs_from_the_rule_and_the_others_on_the_first_input(exercise, check, rule, inputs):
    """On the example (the first input), each wrong formula of the corpus gives its own number, none the rule's: a
    function wrong on the example only is refused. (That each gets its own hint on every input is the corpus's
    test, tests/answers/lesson03.py.)"""
    example = inputs[0]
    formulas = corpus_formulas(exercise, example)
    assert len(formulas) >= 10 and rule(*example) not in [value for _, value, _ in formulas]
    named = {hint: value for _, value, hint in formulas if hint != GENERIC}  # one value per mistake the check names
    assert len(set(named.values())) == len(named), "two mistakes agree on the first input: one hint would name both"
    for formula, _, _ in formulas:
        rejects(check, only_on(example, formula, rule), match="")


def test_the_prompts_example_is_the_checks_first_input():
    lesson = Path(__file__).resolve().parents[1] / "notebooks" / "03_self_attention_layer.ipynb"
    prompt = next(cell.source for cell in nbformat.read(lesson, as_version=4).cells
                  if cell.cell_type == "markdown" and "window_for_stack" in cell.source)
    kernel, layers = STACKS[0]
    assert f"kernel {kernel}" in prompt and f"{layers} layers" in prompt


def test_a_formula_that_agrees_with_the_rule_at_kernel_5_and_2_layers_gets_its_own_hint():
    # kernel, kernel * layers // 2 and kernel // 2 * layers + 1 are all 5 at (5, 2): the old example
    rejects(lesson03.window_for_stack, lambda kernel, layers: kernel, hint="that is the kernel size")
    rejects(lesson03.window_for_stack, lambda kernel, layers: kernel * layers // 2, hint="half an input per layer")


def test_a_hint_names_the_learners_own_function():
    def layer_mult_adds(n, e):
        return 2 * n * n * e

    def my_count(n, e):
        return "many"

    rejects(lesson03.layer_mult_adds, my_count, hint="what your my_count returns for n = 5, e = 4")
    with pytest.raises(AssertionError) as error:
        lesson03.layer_mult_adds(lambda n, e: [][0])
    assert "your function raised IndexError" in str(error.value) and "mult_adds" not in str(error.value)
    rejects(lesson03.layer_mult_adds, layer_mult_adds, hint="attention products only")


def test_a_measured_count_is_refused_but_arithmetic_on_tensors_is_fine(capsys):
    def measured(n, e):
        with FlopCounterMode(display=False) as counter:
            al.SelfAttention(e)(torch.zeros(1, n, e))
        return counter.get_total_flops() // 2

    rejects(lesson03.layer_mult_adds, measured, hint="multiplies matrices: the exercise asks you to predict")
    accepts(capsys, lesson03.layer_mult_adds, lambda n, e: torch.tensor([3 * e, 2 * n]).mul(n * e).sum())


def test_checks_leave_the_lessons_random_numbers_alone():
    state = torch.random.get_rng_state()
    with pytest.raises(AssertionError):
        lesson03.cross_attention_from_fused(lambda layer, x_dec, x_enc: x_dec)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_success_lines_state_no_other_exercise_answer(capsys):
    from answers.lesson03 import _cross, grid_arithmetic

    lesson03.cross_attention_from_fused(_cross())
    lesson03.grid_mask(grid_arithmetic)
    lesson03.window_for_stack(lambda kernel, layers: layers * (kernel // 2) + 1)
    lesson03.layer_mult_adds(lambda n, e: 3 * n * e * e + 2 * n * n * e)
    cross_line, grid_line, window_line, count_line = capsys.readouterr().out.splitlines()
    assert "kernel" not in cross_line and "neighbour" not in cross_line and "n e^2" not in cross_line
    assert "kernel" not in grid_line and "n e^2" not in grid_line
    assert "neighbour" not in window_line and "n e^2" not in window_line
    assert "kernel" not in count_line and "neighbour" not in count_line
