"""attention_lab: the small library behind the attention lessons.

The folders are the map:

===================  ==============================================================================
``reference.py``     the plain, slow, obviously-correct math of every attention the package computes
``core/``            scores and softmax, masks, positions, the self-attention layer, multi-head attention
``efficient/``       attention that avoids the full i x j matrix or skips parts of it (blockwise, block-sparse)
``generation/``      attention while generating: KV caches, rotary positions, grouped-query and latent attention
``measure/``         exact peak memory, timing sweeps
``models/``          the tiny Transformer, toy tasks, the training loop
``teaching/``        exercise checks (one module per lesson) and student copies of the lessons
``plotting/``        every figure; the only place that imports matplotlib, and nothing else imports it
``runtime.py``       device(), seed_everything(), environment()
``_validation.py``   input validation shared by every module
===================  ==============================================================================

Imports point one way: ``reference`` and ``runtime`` need only ``_validation``; ``efficient`` and ``generation``
build on ``core``, ``measure`` on ``core`` and ``efficient``, ``models`` on ``core`` and ``generation``;
``teaching`` and ``plotting`` build on the rest, never the reverse.

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

from . import core, efficient, generation, reference, runtime  # noqa: F401 (attention_lab.reference etc. without a second import)
from .core import *  # noqa: F403 (every name in core.__all__)
from .efficient import *  # noqa: F403 (every name in efficient.__all__)
from .generation import *  # noqa: F403 (every name in generation.__all__)
from .runtime import *  # noqa: F403 (every name in runtime.__all__)

__version__ = "0.1.0"

__all__ = [*core.__all__, *efficient.__all__, *generation.__all__, *runtime.__all__]
