"""Efficient attention: exact attention that never holds the whole i x j matrix (blockwise), and attention that
skips blocks of it (block layouts, block-sparse). Each fast path is tested against :mod:`attention_lab.reference`.

Every public name here is also available as ``attention_lab.<name>``.
"""

from . import block_sparse, blockwise, layouts
from .block_sparse import *  # noqa: F403
from .blockwise import *  # noqa: F403
from .layouts import *  # noqa: F403

__all__ = [*blockwise.__all__, *layouts.__all__, *block_sparse.__all__]
