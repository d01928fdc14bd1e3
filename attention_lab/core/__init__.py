"""Core attention: scores and softmax, masks, positions, the self-attention layer, multi-head attention.

Lessons 01-05 build these by hand first; every public name here is also available as ``attention_lab.<name>``.
"""

from . import functional, layers, mask_conventions, masks, multihead, positions
from .functional import *  # noqa: F403
from .layers import *  # noqa: F403
from .mask_conventions import *  # noqa: F403
from .masks import *  # noqa: F403
from .multihead import *  # noqa: F403
from .positions import *  # noqa: F403

__all__ = [*functional.__all__, *masks.__all__, *mask_conventions.__all__, *positions.__all__, *layers.__all__,
           *multihead.__all__]
