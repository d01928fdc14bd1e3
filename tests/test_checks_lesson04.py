"""Lesson 04's checks: what the corpus (tests/answers/lesson04.py) cannot show by one answer at a time. The mask
each check expects does what its exercise says (packed documents attend as if each ran alone; a left-padded batch
gives each sequence its own outputs; the lower-right mask is the cached decoder's); every check tries more than one
size; the fallback hints never spell out the code of a solution."""

import pytest
import torch
from _check_helpers import rejects

import attention_lab as al
from attention_lab.teaching.checks import lesson04


def test_the_lower_right_mask_is_what_a_decoder_with_a_cache_sees():
    q, k, v = torch.randn(1, 8, 4), torch.randn(1, 8, 4), torch.randn(1, 8, 4)  # 5 cached tokens, then 3 new ones
    everything = al.scaled_dot_product_attention(q, k, v, al.causal_mask(8))[0]
    new_only = al.scaled_dot_product_attention(q[:, 5:], k, v, lesson04._lower_right(3, 8))[0]
    torch.testing.assert_close(new_only, everything[:, 5:])


@pytest.mark.parametrize("lengths", lesson04._PACKINGS)
def test_packed_documents_attend_as_if_each_ran_alone(lengths):
    x = torch.randn(1, sum(lengths), 4)
    packed = al.scaled_dot_product_attention(x, x, x, lesson04._packed(lengths))[0]
    alone = torch.cat([al.scaled_dot_product_attention(d, d, d, al.causal_mask(d.shape[1]))[0]
                       for d in x.split(list(lengths), dim=1)], dim=1)
    torch.testing.assert_close(packed, alone)


@pytest.mark.parametrize(("lengths", "n"), lesson04._LEFT_PADDED)
def test_a_left_padded_batch_gives_each_sequence_its_own_outputs(lengths, n):
    x = torch.randn(len(lengths), n, 4)
    mask = al.causal_mask(n) & lesson04._left_padding(lengths, n)[:, None, None, :]  # what the check expects
    out = al.scaled_dot_product_attention(x[:, None], x[:, None], x[:, None], mask)[0][:, 0]
    for s, length in enumerate(lengths):
        real = x[s:s + 1, n - length:]
        torch.testing.assert_close(out[s:s + 1, n - length:],
                                   al.scaled_dot_product_attention(real, real, real, al.causal_mask(length))[0])


def test_each_check_tries_several_sizes_so_one_written_in_fails():
    rejects(lesson04.lower_right_causal, lambda i, j: torch.ones(3, 8, dtype=torch.bool).tril(5), hint=r"\(4, 4\)")
    rejects(lesson04.packed_documents, lambda lengths: lesson04._packed([3, 2, 4]), hint=r"\(6, 6\)")
    rejects(lesson04.left_padded_decoder, lambda lengths, n: al.causal_mask(5) & lesson04._left_padding([5, 3], 5)
            [:, None, None, :], hint="must broadcast to")


def test_wrong_document_lengths_are_read_back_from_the_mask():
    assert lesson04._documents_in(lesson04._packed([2, 3])) == [2, 3]
    assert lesson04._documents_in(al.causal_mask(5)) == [5]
    assert lesson04._documents_in(~al.causal_mask(5)) is None  # not causal within documents: no lengths to name
    assert lesson04._documents_in(torch.ones(3, 3, dtype=torch.bool)) is None


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
                    lambda lengths, n: al.causal_mask(n) & lesson04._left_padding(lengths, n)[:, None, :, None])
    for code in ("causal_mask(", "padding_mask(", "as_key_mask(", "&", "tril", "arange", ">="):
        assert code not in decoder


def test_a_function_without_return_and_a_stub_get_their_own_hints():
    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for check in (lesson04.lower_right_causal, lesson04.packed_documents, lesson04.left_padded_decoder):
        assert "still raises NotImplementedError" in _hint(check, stub)
    rejects(lesson04.packed_documents, lambda lengths: None, hint="<lambda> returned None|function returned None")
