"""Key/value caches (KV 缓存) for decoding one token at a time.

With a causal mask, the key and value of position j never change once computed: later tokens cannot influence them.
A decoder therefore keeps them and, for each new token, computes only that token's query, key and value. Three ways
to keep them, with one interface (``append(k, v)`` returns every cached key and value, ``len(cache)``, ``offset``,
``positions``, ``reset()``, ``nbytes``):

* :class:`KVCache`: one buffer of ``max_len`` positions allocated up front; appending copies only the new positions
  and returns views. The usual design (Hugging Face's ``StaticCache``, llama.cpp).
* :class:`ConcatKVCache`: grows by ``torch.cat``, which copies everything cached so far on every append; generating
  N tokens copies about N^2/2 positions. Simple, and the way a first cache is usually written; kept for comparison.
* :class:`SlidingWindowKVCache`: a ring buffer of the last ``window`` positions (Mistral's rolling cache), so memory
  stays constant however long generation runs, at the price of forgetting older tokens.
"""

from __future__ import annotations

import torch

from .._validation import check_positive_int, check_tensor, fail

__all__ = ["ConcatKVCache", "KVCache", "SlidingWindowKVCache"]


def _check_dtype(fn: str, dtype: object) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail(fn, f"dtype must be a floating torch.dtype such as torch.float32, got {dtype!r}", TypeError)
    return dtype


class _Cache:
    """What the three caches share: their sizes, the checks on appended keys and values, ``offset``, ``nbytes`` and
    (for the two that keep every position in order) ``positions``."""

    def __init__(self, fn: str, batch_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str | None) -> None:
        check_positive_int(fn, "batch_size", batch_size)
        check_positive_int(fn, "num_kv_heads", num_kv_heads)
        check_positive_int(fn, "head_dim", head_dim)
        self.batch_size, self.num_kv_heads, self.head_dim = batch_size, num_kv_heads, head_dim
        self.dtype = _check_dtype(fn, dtype)
        self.device = torch.device(device) if device is not None else torch.get_default_device()
        self._seen = 0  # positions appended since the last reset

    @property
    def positions(self) -> torch.Tensor:
        """The position of each cached key, in the order ``append`` returns them. Shape: ``(len,)``."""
        return torch.arange(len(self), device=self.device)

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds: its key and value buffers."""
        return self.keys.nbytes + self.values.nbytes

    @property
    def offset(self) -> int:
        """The position the next appended token will have: how many positions were appended since ``reset()``."""
        return self._seen

    def _check_kv(self, k: object, v: object) -> int:
        fn = f"{type(self).__name__}.append"
        check_tensor(fn, "k", k, floating=True)
        check_tensor(fn, "v", v, floating=True)
        expected = (self.batch_size, self.num_kv_heads, "t", self.head_dim)
        for name, x in (("k", k), ("v", v)):
            if x.dim() != 4 or (x.shape[0], x.shape[1], x.shape[3]) != (expected[0], expected[1], expected[3]):
                fail(fn, f"{name} must have shape (b, num_kv_heads, t, head_dim) = {expected} (the cache was built "
                         f"with batch_size={self.batch_size}, num_kv_heads={self.num_kv_heads}, "
                         f"head_dim={self.head_dim}), got shape {tuple(x.shape)}; build the cache to match the "
                         f"layer")
            if x.dtype != self.dtype or x.device != self.device:
                fail(fn, f"{name} must have the cache's dtype {self.dtype} and device {self.device}, got "
                         f"{x.dtype} on {x.device}; build the cache with dtype= and device= of the layer", TypeError)
        if k.shape[2] != v.shape[2]:
            fail(fn, f"k and v must hold the same number of positions t, got k {tuple(k.shape)} and v "
                     f"{tuple(v.shape)}")
        return k.shape[2]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(len={len(self)}, offset={self.offset}, batch_size={self.batch_size}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, nbytes={self.nbytes})")


class KVCache(_Cache):
    """A pre-allocated cache: keys and values of up to ``max_len`` positions, in two buffers made once.

    ``append(k, v)`` copies the t new positions into the next free slots and returns views of every position cached
    so far; appending past ``max_len`` raises a ``ValueError``. ``crop(length)`` forgets the positions from
    ``length`` on (to undo steps); ``reset()`` empties it without freeing memory. ``nbytes`` counts both buffers:
    2 x batch_size x num_kv_heads x max_len x head_dim values.

    Shape: k and v appended ``(b, h_kv, t, d)`` -> keys and values ``(b, h_kv, len, d)``.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, max_len: int, head_dim: int, *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__("KVCache", batch_size, num_kv_heads, head_dim, dtype, device)
        self.max_len = check_positive_int("KVCache", "max_len", max_len)
        shape = (batch_size, num_kv_heads, max_len, head_dim)  # (b, h_kv, max_len, d)
        self.keys = torch.zeros(shape, dtype=dtype, device=self.device)
        self.values = torch.zeros(shape, dtype=dtype, device=self.device)

    def __len__(self) -> int:
        return self._seen

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store t new positions; return views of all cached keys and values. Shape: ``(b, h_kv, len, d)`` each."""
        t = self._check_kv(k, v)
        start, end = self._seen, self._seen + t
        if end > self.max_len:
            fail("KVCache.append", f"the cache is full: it holds {start} of max_len={self.max_len} positions and "
                                   f"cannot take t={t} more; build it with max_len >= {end} or reset() it")
        self.keys[:, :, start:end] = k  # copies t positions, (b, h_kv, t, d)
        self.values[:, :, start:end] = v
        self._seen = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # views, (b, h_kv, len, d)

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (the next append overwrites the rest)."""
        check_positive_int("KVCache.crop", "length", length, minimum=0)
        if length > len(self):
            fail("KVCache.crop", f"length must be at most len(cache)={len(self)}, got length={length}")
        self._seen = length

    def reset(self) -> None:
        """Forget every position; the buffers stay allocated."""
        self._seen = 0


class ConcatKVCache(_Cache):
    """A cache that grows by ``torch.cat``: every append copies all cached positions into new tensors.

    Same interface as :class:`KVCache` without a size limit; ``nbytes`` is what it holds now. Appending one
    position at a time to a cache of length L copies L + 1 positions, so N steps copy about N^2 / 2 positions.

    Shape: k and v appended ``(b, h_kv, t, d)`` -> keys and values ``(b, h_kv, len, d)``.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, head_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        super().__init__("ConcatKVCache", batch_size, num_kv_heads, head_dim, dtype, device)
        self.reset()

    def __len__(self) -> int:
        return self.keys.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Concatenate t new positions; return all cached keys and values. Shape: ``(b, h_kv, len, d)`` each."""
        t = self._check_kv(k, v)
        self.keys = torch.cat([self.keys, k], dim=2)  # a new tensor: copies len + t positions, (b, h_kv, len, d)
        self.values = torch.cat([self.values, v], dim=2)
        self._seen += t
        return self.keys, self.values

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions."""
        check_positive_int("ConcatKVCache.crop", "length", length, minimum=0)
        if length > len(self):
            fail("ConcatKVCache.crop", f"length must be at most len(cache)={len(self)}, got length={length}")
        self.keys, self.values = self.keys[:, :, :length], self.values[:, :, :length]  # (b, h_kv, length, d)
        self._seen = length

    def reset(self) -> None:
        """Forget every position."""
        shape = (self.batch_size, self.num_kv_heads, 0, self.head_dim)  # (b, h_kv, 0, d)
        self.keys = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.values = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self._seen = 0


class SlidingWindowKVCache(_Cache):
    """The keys and values of the last ``window`` positions only, in a ring buffer of fixed size.

    Position p lives in slot ``p % window``: once the buffer is full, each new position overwrites the oldest one,
    so memory stays ``2 x batch_size x num_kv_heads x window x head_dim`` values however long generation runs.
    ``append`` returns the buffer's filled slots, which after wrapping around are not in position order. That does
    not matter: attention is a weighted sum over keys, the same in any order as long as each value stays beside its
    key, and with rotary positions each key already carries its position (it was rotated before it was stored).
    ``positions`` says which position each slot holds. ``len(cache)`` is the number of positions held (at most
    ``window``); ``offset`` counts every position ever appended.

    Shape: k and v appended ``(b, h_kv, t, d)`` -> keys and values ``(b, h_kv, min(offset, window), d)``.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, window: int, head_dim: int, *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__("SlidingWindowKVCache", batch_size, num_kv_heads, head_dim, dtype, device)
        self.window = check_positive_int("SlidingWindowKVCache", "window", window)
        shape = (batch_size, num_kv_heads, window, head_dim)  # (b, h_kv, window, d)
        self.keys = torch.zeros(shape, dtype=dtype, device=self.device)
        self.values = torch.zeros(shape, dtype=dtype, device=self.device)

    def __len__(self) -> int:
        return min(self._seen, self.window)

    @property
    def positions(self) -> torch.Tensor:
        """The position held by each returned slot (slot s holds the newest position p with p % window == s).

        Shape: ``(len,)``.
        """
        slots = torch.arange(len(self), device=self.device)
        oldest = self._seen - len(self)
        return oldest + (slots - oldest) % self.window

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store t new positions, overwriting the oldest; return the filled slots. Shape: ``(b, h_kv, len, d)``."""
        t = self._check_kv(k, v)
        kept = min(t, self.window)  # of a chunk longer than the window, only its last `window` positions survive
        start = (self._seen + t - kept) % self.window  # the slot of the first surviving position
        head = min(kept, self.window - start)  # positions that fit before the ring's end; the rest wrap to slot 0
        for buffer, new in ((self.keys, k[:, :, t - kept:]), (self.values, v[:, :, t - kept:])):  # (b, h_kv, kept, d)
            buffer[:, :, start:start + head] = new[:, :, :head]
            buffer[:, :, :kept - head] = new[:, :, head:]
        self._seen += t
        n = len(self)
        return self.keys[:, :, :n], self.values[:, :, :n]  # views, (b, h_kv, len, d)

    def reset(self) -> None:
        """Forget every position; the buffer stays allocated."""
        self._seen = 0
