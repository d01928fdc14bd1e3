"""Block-sparse attention (lesson 07): attention computed only on the (query block, key block) pairs a layout keeps.

Read in this order: ``attention.py`` (:func:`block_sparse_attention`, the gather path, and how it differs from
:func:`attention_lab.reference.block_sparse_attention`), then ``layout.py`` (:class:`BlockLayout`: which block pairs,
for any sequence length) and ``_rules.py`` (its constructors' rules, pure functions of the number of blocks).
``cpu_tuning.py`` holds what makes it fast on a CPU without changing a result (plans built once per length, tile
sizes, the band path for sliding windows): a first reading can skip it.
"""

from .attention import block_sparse_attention
from .layout import BlockLayout

__all__ = ["BlockLayout", "block_sparse_attention"]
