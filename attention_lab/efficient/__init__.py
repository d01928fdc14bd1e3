"""Efficient attention: exact attention that never holds the whole i x j matrix (blockwise), attention that skips
blocks of it (block layouts, block-sparse), and the family that changes the matrix itself: linear and Performer
(a kernel instead of the softmax), top-k and cluster (fewer keys per query, exact on them), Linformer (fewer,
mixed keys) and Synthesizer (weights without q . k); HeadwiseAttention makes a multi-head layer of any of them.
Lesson 14 adds the gated delta rule (a linear-attention state that overwrites) and attention over the keys a
lightning indexer picks (DeepSeek Sparse Attention).
Each fast path is tested against :mod:`attention_lab.reference`.

Every public name here is also available as ``attention_lab.<name>``.
"""

from . import (
    block_sparse,
    blockwise,
    cluster,
    delta_rule,
    headwise,
    indexed_sparse,
    linear,
    linformer,
    performer,
    synthesizer,
    topk,
)
from .block_sparse import *  # noqa: F403
from .blockwise import *  # noqa: F403
from .cluster import *  # noqa: F403
from .delta_rule import *  # noqa: F403
from .headwise import *  # noqa: F403
from .indexed_sparse import *  # noqa: F403
from .linear import *  # noqa: F403
from .linformer import *  # noqa: F403
from .performer import *  # noqa: F403
from .synthesizer import *  # noqa: F403
from .topk import *  # noqa: F403

__all__ = [*blockwise.__all__, *block_sparse.__all__]
__all__ += [*linear.__all__, *performer.__all__, *topk.__all__, *cluster.__all__, *linformer.__all__,
            *synthesizer.__all__, *headwise.__all__]
__all__ += [*delta_rule.__all__, *indexed_sparse.__all__]
