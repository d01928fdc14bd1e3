"""attention_lab: the small library behind the attention lessons.

One axis legend for the whole package (every docstring's ``Shape:`` line uses it):

=====  ==========================================
``b``  batch
``h``  heads
``i``  query positions
``j``  key (and value) positions
``d``  head dimension (of queries and keys)
``e``  embedding dimension, ``e = h * d``
=====  ==========================================

Masks are boolean everywhere, ``True`` meaning "may attend" (as in ``F.scaled_dot_product_attention``).
Plotting lives in :mod:`attention_lab.plotting`, imported on demand so that ``import attention_lab`` stays light.
"""

from .functional import attention_scores, masked_softmax, scaled_dot_product_attention
from .runtime import device, environment, seed_everything

# Each lesson's additions, in lesson order (keep one block per lesson so parallel edits do not collide).
# lessons 03-04: masks, SelfAttention, positions
# isort: split
from .layers import SelfAttention
from .masks import (
    as_key_mask,
    causal_mask,
    combine_masks,
    expand_mask,
    from_additive_mask,
    from_keep_ones,
    from_torch_attn_mask,
    from_torch_padding_mask,
    padding_mask,
    sliding_window_mask,
    to_additive_mask,
    to_torch_attn_mask,
    to_torch_padding_mask,
)
from .positions import sinusoidal_positions

# isort: split

# lesson 05: MultiHeadAttention
from .multihead import MultiHeadAttention

# isort: split

# lesson 07: blockwise and block-sparse attention
from .block_sparse import block_sparse_attention
from .blockwise import blockwise_attention
from .layouts import BlockLayout

__version__ = "0.1.0"

__all__ = [
    # lesson 07
    "BlockLayout",
    "block_sparse_attention",
    "blockwise_attention",
    # lesson 05
    "MultiHeadAttention",
    # lessons 03-04
    "SelfAttention",
    "sinusoidal_positions",
    "as_key_mask",
    "causal_mask",
    "combine_masks",
    "expand_mask",
    "from_additive_mask",
    "from_keep_ones",
    "from_torch_attn_mask",
    "from_torch_padding_mask",
    "padding_mask",
    "sliding_window_mask",
    "to_additive_mask",
    "to_torch_attn_mask",
    "to_torch_padding_mask",
    # lessons 00-02
    "attention_scores",
    "device",
    "environment",
    "masked_softmax",
    "scaled_dot_product_attention",
    "seed_everything",
]
