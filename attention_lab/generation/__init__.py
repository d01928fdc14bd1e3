"""Attention while generating: rotary positions, key/value caches (pre-allocated, concatenated, sliding, and
StreamingLLM's first tokens plus a window), attention with fewer key/value heads (grouped-query, multi-query) or a
latent cache (multi-head latent attention), the size of a cache, and the windows of a stack of local and global
layers with its cache (lesson 14). Each is tested against :mod:`attention_lab.reference` and against decoding
without a cache.

Every public name here is also available as ``attention_lab.<name>``.
"""

from . import cache_size, flops, grouped, interleaved, kv_cache, latent, rope, sink_cache
from .cache_size import *  # noqa: F403
from .flops import *  # noqa: F403
from .grouped import *  # noqa: F403
from .interleaved import *  # noqa: F403
from .kv_cache import *  # noqa: F403
from .latent import *  # noqa: F403
from .rope import *  # noqa: F403
from .sink_cache import *  # noqa: F403

__all__ = [*rope.__all__, *kv_cache.__all__, *grouped.__all__, *latent.__all__, *cache_size.__all__,
           *flops.__all__, *sink_cache.__all__, *interleaved.__all__]
