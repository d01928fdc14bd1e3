"""The names the lessons give to what they time and meter, shown in the learner's language.

A conclusion (:mod:`attention_lab.measure.conclusions`, :meth:`attention_lab.measure.timing.Comparison.speed`) names
what it compares: ``crossover(..., name="one attention call", baseline="the RNN loop")``. Those names are strings in
the lessons' code, which the Chinese editions share word for word with the English lesson (only comments are
translated), and often keys of a timing or columns of a benchmark file. So the translation happens when the conclusion
is written: :func:`label` looks a name up here and gives its message (``msg("the RNN loop")``, rendered "RNN 循环"
in zh-CN from the package catalog); a name not listed, such as a function's name (``F.scaled_dot_product_attention``),
is code and prints as given. A lesson that times something under a new name adds the name here, and
``tools/editions.py update`` puts it in the catalog to translate; ``tests/test_editions.py`` fails on an English word
left in a Chinese edition's printed conclusion.
"""

from __future__ import annotations

from ..i18n import Message, msg

__all__ = ["LABELS", "label"]

LABELS: dict[str, Message] = {message.template: message for message in (
    # the conclusions' defaults
    msg("the variant"), msg("the baseline"), msg("time"), msg("it"),
    # lesson 03: the RNN against self-attention
    msg("the RNN loop"), msg("the RNN loop's time"), msg("one attention call"), msg("one attention call's time"),
    # lesson 06: naive attention against PyTorch's
    msg("naive"),
    # lesson 07: peak memory, and the variants of benchmarks/block_sparse.py
    msg("the naive peak"), msg("the blockwise peak"), msg("its peak"), msg("dense SDPA"),
    msg("blockwise_attention (exact)"), msg("block_sparse_attention (sliding)"),
    msg("flex_attention (sliding, compiled)"),
    # lesson 10: efficient attention
    msg("linear"), msg("linear's time"), msg("performer (256 features)"), msg("block-sparse sliding"),
    msg("SDPA (dense)'s time"), msg("a softmax step's time"), msg("a linear step's time"),
    # lesson 11: generating with and without a cache
    msg("the cache"), msg("recomputation"), msg("the cache's time per token"), msg("recomputation's time per token"),
    msg("the pre-allocated cache"), msg("the concatenated cache"),
    # lesson 12: the next character with and without the cache (the keys of next_token_timers)
    msg("pre-allocated cache"), msg("recompute"),
    # lesson 14: caches and states against the context (sections 5 and 6)
    msg("the 5:1 stack's cache"), msg("the all-global cache"), msg("the delta-rule memory"),
    msg("the attention layers' cache"),
)}


def label(name: str) -> Message | str:
    """``name`` as a conclusion prints it: its message when it is one of :data:`LABELS` (English in an English
    lesson, translated in a Chinese edition), otherwise ``name`` itself.

    Shape: no tensors.
    """
    return LABELS.get(name, name) if isinstance(name, str) else name
