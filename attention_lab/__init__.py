"""attention_lab: the small library behind the attention lessons.

The folders are the map:

===================  ==============================================================================
``reference/``       the plain, slow, obviously-correct math of every attention the package computes
``core/``            scores and softmax, masks, positions, the self-attention layer, multi-head attention
``efficient/``       attention that avoids the full i x j matrix or skips parts of it (blockwise, block-sparse)
``generation/``      attention while generating: KV caches, rotary positions, grouped-query and latent attention
``measure/``         cost arithmetic, exact peak memory, the one timer and its conclusions, the committed
                     benchmark results, the long-range benchmark harness
``models/``          the tiny Transformer, its toy tasks, its training
``analysis.py``      reading a trained model's attention (attention rollout)
``teaching/``        exercise checks (one module per lesson), student copies of the lessons, ``show``
``plotting/``        every figure; the only place that imports matplotlib, and nothing else imports it
``runtime.py``       device(), seed_everything(), environment()
``i18n.py``          the language of the package's messages: set_language("zh-CN"), msg(), the catalogs in locale/
``_validation.py``   input validation shared by every module
===================  ==============================================================================

Imports point one way: ``reference``, ``runtime``, ``analysis`` and ``i18n`` need only ``_validation``;
``efficient`` and ``generation`` build on ``core``, ``models`` on ``core``, ``efficient`` and ``generation``,
``measure`` on ``core``, ``efficient`` and ``models``; ``teaching`` and ``plotting`` build on the rest, never the
reverse; every part may use ``i18n``. Every module has one import path, the folder path the docs show
(``attention_lab.models.training``).

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

from . import core, efficient, generation, i18n, reference, runtime  # noqa: F401 (attention_lab.reference etc. without a second import)
from .core import *  # noqa: F403 (every name in core.__all__)
from .efficient import *  # noqa: F403 (every name in efficient.__all__)
from .generation import *  # noqa: F403 (every name in generation.__all__)
from .i18n import set_language
from .runtime import *  # noqa: F403 (every name in runtime.__all__)

__version__ = "0.1.0"

__all__ = [*core.__all__, *efficient.__all__, *generation.__all__, *runtime.__all__, "set_language"]
