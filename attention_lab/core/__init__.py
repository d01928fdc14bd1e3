"""Core attention: scores and softmax, masks, positions, the self-attention layer, multi-head attention, and the
changes of lesson 14 (sink logits, soft-capping, QK-norm, the output gate).

Lessons 01-05 build these by hand first; every public name here is also available as ``attention_lab.<name>``.
"""

from . import (
               functional,
               layers,
               mask_conventions,
               masks,
               multihead,
               output_gate,
               positions,
               qk_normalization,
               sinks,
               softcapping,
)
from .functional import *  # noqa: F403
from .layers import *  # noqa: F403
from .mask_conventions import *  # noqa: F403
from .masks import *  # noqa: F403
from .multihead import *  # noqa: F403
from .output_gate import *  # noqa: F403
from .positions import *  # noqa: F403
from .qk_normalization import *  # noqa: F403
from .sinks import *  # noqa: F403
from .softcapping import *  # noqa: F403

__all__ = [*functional.__all__, *masks.__all__, *mask_conventions.__all__, *positions.__all__, *layers.__all__,
           *multihead.__all__, *sinks.__all__, *softcapping.__all__, *qk_normalization.__all__, *output_gate.__all__]
