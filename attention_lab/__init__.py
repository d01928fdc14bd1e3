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
``i18n.py``          the language of the package's messages: set_language("zh-CN"), msg(), the catalogs in locale/
``_validation.py``   input validation shared by every module
===================  ==============================================================================

Imports point one way: ``reference``, ``runtime`` and ``i18n`` need only ``_validation``; ``efficient`` and
``generation`` build on ``core``, ``measure`` on ``core`` and ``efficient``, ``models`` on ``core`` and
``generation``; ``teaching`` and ``plotting`` build on the rest, never the reverse; every part may use ``i18n``.

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

import importlib
import importlib.util
import sys

from . import core, efficient, generation, i18n, reference, runtime  # noqa: F401 (attention_lab.reference etc. without a second import)
from .core import *  # noqa: F403 (every name in core.__all__)
from .efficient import *  # noqa: F403 (every name in efficient.__all__)
from .generation import *  # noqa: F403 (every name in generation.__all__)
from .i18n import set_language
from .runtime import *  # noqa: F403 (every name in runtime.__all__)

__version__ = "0.1.0"

__all__ = [*core.__all__, *efficient.__all__, *generation.__all__, *runtime.__all__, "set_language"]

# Short module paths: `attention_lab.training` is `attention_lab.models.training`, and so on, so that
# `from attention_lab.checks import lesson03` and `from attention_lab.model import TinyTransformer` keep working in
# lesson copies already handed out and in code written against the flat layout.
_SHORT_PATHS = {
    "functional": "core.functional",
    "masks": "core.masks",
    "positions": "core.positions",
    "layers": "core.layers",
    "multihead": "core.multihead",
    "blockwise": "efficient.blockwise",
    "layouts": "efficient.layouts",
    "block_sparse": "efficient.block_sparse",
    "memory": "measure.memory",
    "bench": "measure.bench",
    "model": "models.transformer",
    "tasks": "models.tasks",
    "training": "models.training",
    "checks": "teaching.checks",
    "classroom": "teaching.classroom",
}


def __getattr__(name: str):
    """Load a short module path (``attention_lab.training``) on first use, without importing it up front."""
    if name in _SHORT_PATHS:
        module = importlib.import_module(f"{__name__}.{_SHORT_PATHS[name]}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _ShortPathFinder:
    """Lets ``import attention_lab.training`` (and ``from attention_lab.checks import lesson03``) find the module
    in its folder; the module object is the same one, not a copy."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        prefix = __name__ + "."
        if not fullname.startswith(prefix):
            return None
        head, _, rest = fullname[len(prefix):].partition(".")
        if head not in _SHORT_PATHS:
            return None
        real = f"{__name__}.{_SHORT_PATHS[head]}" + (f".{rest}" if rest else "")
        module = importlib.import_module(real)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


class _AliasLoader:
    """Hands the import system the module already loaded under its folder path, and keeps its own ``__spec__``."""

    def __init__(self, module):
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the import system set the short path's spec; the folder path is the real one


sys.meta_path.insert(0, _ShortPathFinder())
