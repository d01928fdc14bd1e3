"""Lesson 04's checks: what the corpus (tests/answers/lesson04.py) cannot show by one answer at a time. The mask
each check expects does what its exercise says (packed documents attend as if each ran alone; a left-padded batch
gives each sequence its own outputs; the lower-right mask is the cached decoder's); every check tries more than one
size; the fallback hints never spell out the code of a solution. Each test's mask is one the check accepts on every
case it tries, and the cases are those it passes a learner's function (_check_helpers.inputs_tried)."""

import re

import pytest
import torch
from _check_helpers import accepts, inputs_tried, rejects
from answers.lesson04 import left_right as left_padded
from answers.lesson04 import packed_repeat as packed

import attention_lab as al
from attention_lab.teaching.checks import lesson04


def lower_right(n_queries, n_keys):
    return torch.ones(n_queries, n_keys, dtype=torch.bool).tril(n_keys - n_queries)


PACKINGS = [lengths for (lengths,) in inputs_tried(lesson04.packed_documents, packed)]
LEFT_PADDED = inputs_tried(lesson04.left_padded_decoder, left_padded)  # (lengths, n) per case


def test_the_masks_below_are_what_the_checks_accept(capsys):
    accepts(capsys, lesson04.lower_right_causal, lower_right)
    accepts(capsys, lesson04.packed_documents, packed)
    accepts(capsys, lesson04.left_padded_decoder, left_padded)


def test_the_lower_right_mask_is_what_a_decoder_with_a_cache_sees():
    q, k, v = torch.randn(1, 8, 4), torch.randn(1, 8, 4), torch.randn(1, 8, 4)  # 5 cached tokens, then 3 new ones
    everything = al.scaled_dot_product_attention(q, k, v, al.causal_mask(8))[0]
    new_only = al.scaled_dot_product_attention(q[:, 5:], k, v, lower_right(3, 8))[0]
    torch.testing.assert_close(new_only, everything[:, 5:])


@pytest.mark.parametrize("lengths", PACKINGS)
def test_packed_documents_attend_as_if_each_ran_alone(lengths):
    x = torch.randn(1, sum(lengths), 4)
    packed_mask = packed(list(lengths))
    packed_out = al.scaled_dot_product_attention(x, x, x, packed_mask)[0]
    alone = torch.cat([al.scaled_dot_product_attention(d, d, d, al.causal_mask(d.shape[1]))[0]
                       for d in x.split(list(lengths), dim=1)], dim=1)
    torch.testing.assert_close(packed_out, alone)


@pytest.mark.parametrize(("lengths", "n"), LEFT_PADDED)
def test_a_left_padded_batch_gives_each_sequence_its_own_outputs(lengths, n):
    x = torch.randn(len(lengths), n, 4)
    mask = left_padded(lengths, n)  # (b, 1, n, n)
    out = al.scaled_dot_product_attention(x[:, None], x[:, None], x[:, None], mask)[0][:, 0]
    for s, length in enumerate(lengths):
        real = x[s:s + 1, n - length:]
        torch.testing.assert_close(out[s:s + 1, n - length:],
                                   al.scaled_dot_product_attention(real, real, real, al.causal_mask(length))[0])


def test_each_check_tries_several_sizes_so_one_written_in_fails():
    rejects(lesson04.lower_right_causal, lambda i, j: torch.ones(3, 8, dtype=torch.bool).tril(5), hint=r"\(4, 4\)")
    rejects(lesson04.packed_documents, lambda lengths: packed([3, 2, 4]), hint=r"\(6, 6\)")
    rejects(lesson04.left_padded_decoder, lambda lengths, n: left_padded([5, 3], 5), hint="must broadcast to")


def test_wrong_document_lengths_are_read_back_from_the_mask():
    first = list(PACKINGS[0])
    read_back = f"your documents have lengths {first[::-1]} where the packing is {first}"
    rejects(lesson04.packed_documents, lambda lengths: packed(list(lengths)[::-1]), hint=re.escape(read_back))
    merged = [first[0] + first[1], *first[2:]]  # the first two documents read as one
    assert f"lengths {merged} where" in hint_of(lesson04.packed_documents,
                                                lambda lengths: packed([lengths[0] + lengths[1], *lengths[2:]]))
    for not_causal in (lambda lengths: ~al.causal_mask(sum(lengths)),  # no lengths to name: the general hint
                       lambda lengths: torch.ones(sum(lengths), sum(lengths), dtype=torch.bool)):
        assert "your documents have lengths" not in hint_of(lesson04.packed_documents, not_causal)


def hint_of(check, answer):
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        check(answer)
    return str(error.value)


def _hint(check, answer):
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        check(answer)
    return str(error.value)


def test_fallback_hints_do_not_spell_out_the_solution():
    lower = _hint(lesson04.lower_right_causal, lambda i, j: torch.ones(i, j, dtype=torch.bool).tril(j - i)
                  .triu(j - i))
    for code in ("tril", "triu", "torch.ones", "arange", "<="):
        assert code not in lower
    packed = _hint(lesson04.packed_documents, lambda lengths: torch.ones(sum(lengths), sum(lengths)).bool().triu())
    for code in ("repeat_interleave", "block_diag", "==", "&", "causal_mask("):
        assert code not in packed
    decoder = _hint(lesson04.left_padded_decoder,
                    lambda lengths, n: left_padded(lengths, n).transpose(-2, -1))
    for code in ("causal_mask(", "padding_mask(", "as_key_mask(", "&", "tril", "arange", ">="):
        assert code not in decoder


def test_a_function_without_return_and_a_stub_get_their_own_hints():
    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for check in (lesson04.lower_right_causal, lesson04.packed_documents, lesson04.left_padded_decoder):
        assert "still raises NotImplementedError" in _hint(check, stub)
    rejects(lesson04.packed_documents, lambda lengths: None, hint="<lambda> returned None|function returned None")
