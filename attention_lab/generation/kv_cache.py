"""Key/value caches (KV 缓存) for decoding one token at a time.

With a causal mask, the key and value of position j never change once computed: later tokens cannot influence them.
A decoder therefore keeps them and, for each new token, computes only that token's query, key and value. Four ways
to keep them, with one interface (``append`` returns everything cached, ``len(cache)``, ``offset``, ``positions``,
``reset()``, ``nbytes``), built on one base:

* :class:`KVCache`: one buffer of ``max_len`` positions allocated up front; appending copies only the new positions
  and returns views. The usual design (Hugging Face's ``StaticCache``, llama.cpp).
* :class:`ConcatKVCache`: grows by ``torch.cat``, which copies everything cached so far on every append (N tokens:
  N^2/2 positions copied). Simple, and the way a first cache is usually written; here to be compared.
* :class:`SlidingWindowKVCache`: a ring buffer of the last ``window`` positions (Mistral's rolling cache), so memory
  stays constant however long generation runs, at the price of forgetting older tokens.
* :class:`LatentCache`: one latent vector per position instead of keys and values, from which multi-head latent
  attention rebuilds them (:class:`~attention_lab.MultiHeadLatentAttention`).

Reference: decoding without a cache, :func:`attention_lab.reference.attention` over every position with the causal
mask (for the sliding cache :func:`attention_lab.reference.sliding_window_attention`); the tests decode with each
cache chunk by chunk and compare with the whole sequence at once, and the sliding cache with that reference. How a
cache differs and what it buys: each new token's step reads the kept keys and values instead of recomputing them, so a
step costs one token's projections plus one row of attention instead of the whole prefix again (lesson 11 counts the
FLOPs and times both).
"""

from __future__ import annotations

import torch

from .._validation import (
    check_device,
    check_dtype_device,
    check_float_dtype,
    check_positive_int,
    check_positive_ints,
    check_tensor,
    fail,
)

__all__ = ["ConcatKVCache", "KVCache", "LatentCache", "SlidingWindowKVCache"]


class _Cache:
    """What every cache shares: batch size, dtype, device, ``offset``, the positions and bytes held, ``reset()``, the
    checks on what is appended and on a buffer's room. ``_buffers`` names the tensors that hold the cache."""

    _buffers: tuple[str, ...] = ("keys", "values")

    def __init__(self, fn: str, batch_size: int, dtype: torch.dtype, device: torch.device | str | None) -> None:
        self.batch_size = check_positive_int(fn, "batch_size", batch_size)
        self.dtype = check_float_dtype(fn, "dtype", dtype)
        self.device = check_device(fn, "device", device) or torch.get_default_device()
        self._seen = 0  # positions appended since the last reset

    def __len__(self) -> int:
        return self._seen

    @property
    def positions(self) -> torch.Tensor:
        """The position of each cached entry, in the order ``append`` returns them. Shape: ``(len,)``."""
        return torch.arange(len(self), device=self.device)

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds: its buffers."""
        return sum(getattr(self, name).nbytes for name in self._buffers)

    @property
    def offset(self) -> int:
        """The position the next appended token will have: how many positions were appended since ``reset()``."""
        return self._seen

    def reset(self) -> None:
        """Forget every position; the buffers stay allocated. Shape: ``len(cache)`` becomes 0."""
        self._seen = 0

    def snapshot(self) -> tuple:
        """What :meth:`restore` needs to undo the appends after it (a model step failing at one layer puts every
        layer's cache back). Appends write past the held positions or into new tensors: nothing is copied."""
        return self._seen, tuple(getattr(self, name) for name in self._buffers)

    def restore(self, snapshot: tuple) -> None:
        """Go back to the state :meth:`snapshot` saw. Shape: ``len(cache)`` and the buffers as they were then."""
        self._seen, buffers = snapshot
        self.__dict__.update(zip(self._buffers, buffers, strict=True))  # each buffer's name -> the tensor it held

    def _check_new(self, fn: str, axes: tuple[str, ...], sizes: tuple[int | str, ...], **tensors: object) -> int:
        """Each tensor: shape ``sizes`` along ``axes`` (``"t"``: the same t for all), the cache's dtype and device."""
        axis = axes.index("t")
        for name, x in tensors.items():
            check_tensor(fn, name, x, floating=True)
            if x.dim() != len(sizes) or any(want not in ("t", got) for got, want in zip(x.shape, sizes)):
                built = ", ".join(f"{'batch_size' if axis_name == 'b' else axis_name}={size}"
                                  for axis_name, size in zip(axes, sizes) if axis_name != "t")
                fail(fn, f"{name} must have shape ({', '.join(axes)}) = ({', '.join(map(str, sizes))}) (the cache was "
                         f"built with {built}), got shape {tuple(x.shape)}; build the cache to match the layer")
            check_dtype_device(fn, name, x, getattr(self, self._buffers[0]), owner="the cache",
                               fix="build the cache with the dtype= and device= of the layer")
        lengths = {name: x.shape[axis] for name, x in tensors.items()}
        if len(set(lengths.values())) > 1:
            fail(fn, f"{' and '.join(lengths)} must hold the same number of positions t, got "
                     f"{', '.join(f'{name} {tuple(x.shape)}' for name, x in tensors.items())}; give one per position")
        return next(iter(lengths.values()))

    def _check_room(self, fn: str, t: int, max_len: int) -> int:
        """The end of t more positions in a buffer of ``max_len``; a full buffer is an error that names the fix."""
        end = self._seen + t
        if end > max_len:
            fail(fn, f"the cache must have room for t={t} more positions, got a cache holding {self._seen} of "
                     f"max_len={max_len}; build it with max_len >= {end} or reset() it")
        return end

    def _check_crop(self, length: int) -> int:
        fn = f"{type(self).__name__}.crop"
        check_positive_int(fn, "length", length, minimum=0)
        if length > len(self):
            fail(fn, f"length must be at most len(cache)={len(self)}, got length={length}")
        return length


class _KeyValueCache(_Cache):
    """A cache of keys and values: ``num_kv_heads`` heads of ``head_dim`` per position."""

    def __init__(self, fn: str, batch_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str | None) -> None:
        super().__init__(fn, batch_size, dtype, device)
        check_positive_ints(fn, num_kv_heads=num_kv_heads, head_dim=head_dim)
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim

    def _check_kv(self, k: object, v: object) -> int:
        return self._check_new(f"{type(self).__name__}.append", ("b", "num_kv_heads", "t", "head_dim"),
                               (self.batch_size, self.num_kv_heads, "t", self.head_dim), k=k, v=v)

    def _buffer(self, length: int) -> torch.Tensor:
        return torch.zeros(self.batch_size, self.num_kv_heads, length, self.head_dim, dtype=self.dtype,
                           device=self.device)  # (b, h_kv, length, d)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(len={len(self)}, offset={self.offset}, batch_size={self.batch_size}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, nbytes={self.nbytes})")


class KVCache(_KeyValueCache):
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
        self.keys, self.values = self._buffer(max_len), self._buffer(max_len)  # (b, h_kv, max_len, d) each

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store t new positions; return views of all cached keys and values. Shape: ``(b, h_kv, len, d)`` each."""
        start, end = self._seen, self._check_room("KVCache.append", self._check_kv(k, v), self.max_len)
        self.keys[:, :, start:end] = k  # copies t positions, (b, h_kv, t, d)
        self.values[:, :, start:end] = v
        self._seen = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # views, (b, h_kv, len, d)

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (the next append overwrites the rest).

        Shape: the next append returns ``(b, h_kv, length + t, d)``.
        """
        self._seen = self._check_crop(length)


class ConcatKVCache(_KeyValueCache):
    """A cache that grows by ``torch.cat``: every append copies all cached positions into new tensors.

    Same interface as :class:`KVCache` without a size limit; ``nbytes`` is what it holds now. Appending one
    position at a time to a cache of length L copies L + 1 positions, so N steps copy about N^2 / 2 positions.

    Shape: k and v appended ``(b, h_kv, t, d)`` -> keys and values ``(b, h_kv, len, d)``.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, head_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        super().__init__("ConcatKVCache", batch_size, num_kv_heads, head_dim, dtype, device)
        self.reset()

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Concatenate t new positions; return all cached keys and values. Shape: ``(b, h_kv, len, d)`` each."""
        t = self._check_kv(k, v)
        self.keys = torch.cat([self.keys, k], dim=2)  # a new tensor: copies len + t positions, (b, h_kv, len, d)
        self.values = torch.cat([self.values, v], dim=2)
        self._seen += t
        return self.keys, self.values

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions. Shape: keys and values become ``(b, h_kv, length, d)``."""
        self._seen = self._check_crop(length)
        self.keys, self.values = self.keys[:, :, :length], self.values[:, :, :length]  # (b, h_kv, length, d)

    def reset(self) -> None:
        """Forget every position. Shape: keys and values become ``(b, h_kv, 0, d)``."""
        self.keys, self.values = self._buffer(0), self._buffer(0)  # (b, h_kv, 0, d) each
        self._seen = 0


class SlidingWindowKVCache(_KeyValueCache):
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
        self.keys, self.values = self._buffer(window), self._buffer(window)  # (b, h_kv, window, d) each
        self._overwritten: list | None = None  # the slots overwritten since snapshot(), for restore()

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

    def snapshot(self) -> tuple:
        """As :meth:`KVCache.snapshot`; later appends copy the t slots they overwrite, for :meth:`restore`."""
        self._overwritten = []
        return self._seen, self._overwritten

    def restore(self, snapshot: tuple) -> None:
        """Go back to the state :meth:`snapshot` saw. Shape: ``len(cache)`` and the slots as they were then."""
        self._seen, overwritten = snapshot
        for slots, keys, values in reversed(overwritten):
            self.keys[:, :, slots], self.values[:, :, slots] = keys, values

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store t new positions, overwriting the oldest; return the filled slots. Shape: ``(b, h_kv, len, d)``."""
        t = self._check_kv(k, v)
        kept = min(t, self.window)  # of a chunk longer than the window, only its last `window` positions survive
        start = (self._seen + t - kept) % self.window  # the slot of the first surviving position
        head = min(kept, self.window - start)  # positions that fit before the ring's end; the rest wrap to slot 0
        if self._overwritten is not None:  # since a snapshot: copy what is about to be overwritten, slots (kept,)
            slots = (start + torch.arange(kept, device=self.device)) % self.window
            self._overwritten.append((slots, self.keys[:, :, slots], self.values[:, :, slots]))
        for buffer, new in ((self.keys, k[:, :, t - kept:]), (self.values, v[:, :, t - kept:])):  # (b, h_kv, kept, d)
            buffer[:, :, start:start + head] = new[:, :, :head]
            buffer[:, :, :kept - head] = new[:, :, head:]
        self._seen += t
        n = len(self)
        return self.keys[:, :, :n], self.values[:, :, :n]  # views, (b, h_kv, len, d)


class LatentCache(_Cache):
    """A pre-allocated cache of one latent vector per position: ``batch_size x max_len x latent_dim`` values.

    ``append(c)`` copies t new latents and returns a view of all cached ones; ``len(cache)``, ``offset`` (the
    next position), ``positions``, ``reset()`` and ``nbytes`` as for :class:`KVCache`.

    Shape: c appended ``(b, t, r)`` -> latents ``(b, len, r)``, with r = latent_dim.
    """

    _buffers = ("latents",)

    def __init__(self, batch_size: int, max_len: int, latent_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        super().__init__("LatentCache", batch_size, dtype, device)
        check_positive_ints("LatentCache", max_len=max_len, latent_dim=latent_dim)
        self.max_len, self.latent_dim = max_len, latent_dim
        self.latents = torch.zeros(batch_size, max_len, latent_dim, dtype=dtype, device=self.device)  # (b, L, r)

    def append(self, c: torch.Tensor) -> torch.Tensor:
        """Store t new latents; return a view of all cached ones. Shape: ``(b, t, r) -> (b, len, r)``."""
        fn = "LatentCache.append"
        t = self._check_new(fn, ("b", "t", "latent_dim"), (self.batch_size, "t", self.latent_dim), c=c)
        start, end = self._seen, self._check_room(fn, t, self.max_len)
        self.latents[:, start:end] = c  # copies t latents, (b, t, r)
        self._seen = end
        return self.latents[:, :end]  # a view, (b, len, r)

    def __repr__(self) -> str:
        return (f"LatentCache(len={len(self)}, batch_size={self.batch_size}, latent_dim={self.latent_dim}, "
                f"nbytes={self.nbytes})")
