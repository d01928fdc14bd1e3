"""The StreamingLLM cache: keep the first ``sinks`` positions for ever, and a sliding window of the latest ones.

A sliding-window cache (:class:`~attention_lab.SlidingWindowKVCache`) forgets the oldest position at every step, the
first token included. Trained models park the weight of heads with nothing to read on that first token (an attention
sink), so once it is gone those heads spread the weight over tokens they were never meant to read, and the loss
jumps. Xiao et al. (2024, *Efficient Streaming Language Models with Attention Sinks*) keep the first 4 tokens beside
the window and measure a loss as low as with the whole cache (their reference code's ``StartRecentKVCache``,
``start_size`` and ``recent_size``, read, not copied).

Reference: :func:`attention_lab.reference.streaming_attention`, causal attention over the first ``sinks`` and the last
``window`` positions. How this differs and what that buys: the keys live in one buffer of ``sinks + window`` slots,
the first ``sinks`` slots fixed, the others a ring like the sliding cache's, so memory stays constant and each step
writes one slot; tests decode with it token by token and compare with the reference. Unlike StreamingLLM, positions
are not renumbered inside the cache: a key keeps the position it was computed at (the lessons stay within the
positions a model was trained on).
"""

from __future__ import annotations

import torch

from .._validation import check_positive_int, fail
from .kv_cache import SlidingWindowKVCache, _KeyValueCache

__all__ = ["SinkKVCache"]


class SinkKVCache(_KeyValueCache):
    """Keys and values of the first ``sinks`` positions and of the last ``window`` ones, in ``sinks + window`` slots.

    Position p < sinks lives in slot p; a later one in slot ``sinks + (p - sinks) % window``, overwriting the
    oldest of the window. ``append`` returns the filled slots (not in position order once the ring wraps: attention
    does not care, see :class:`~attention_lab.SlidingWindowKVCache`); ``positions`` says which position each holds.
    Appends one position at a time once the window is full (a decoder's steps); a longer chunk is refused there.

    Shape: k and v appended ``(b, h_kv, t, d)`` -> keys and values ``(b, h_kv, min(offset, sinks + window), d)``.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, sinks: int, window: int, head_dim: int, *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        fn = "SinkKVCache"
        super().__init__(fn, batch_size, num_kv_heads, head_dim, dtype, device)
        self.sinks = check_positive_int(fn, "sinks", sinks, minimum=0)
        self.window = check_positive_int(fn, "window", window)
        self.keys, self.values = self._buffer(sinks + window), self._buffer(sinks + window)  # (b, h_kv, s + w, d)
        self._overwritten: list | None = None

    def __len__(self) -> int:
        return min(self._seen, self.sinks + self.window)

    @property
    def positions(self) -> torch.Tensor:
        """The position held by each returned slot. Shape: ``(len,)``."""
        slots = torch.arange(len(self), device=self.device)
        if self._seen <= self.sinks + self.window:
            return slots
        ring = slots[self.sinks:] - self.sinks  # (window,)
        newest = self._seen - 1 - self.sinks  # the ring index of the newest position
        return torch.cat([slots[:self.sinks], self.sinks + newest - (newest - ring) % self.window])

    # the sliding cache's: after snapshot(), append copies each slot it overwrites, and restore puts them back
    snapshot = SlidingWindowKVCache.snapshot
    restore = SlidingWindowKVCache.restore

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store t new positions (one at a time once the window is full); return the filled slots.

        Shape: k and v ``(b, h_kv, t, d)`` -> ``(b, h_kv, len, d)`` each.
        """
        t = self._check_kv(k, v)
        size = self.sinks + self.window
        if t > 1 and self._seen + t > size:
            fail("SinkKVCache.append", f"t must be 1 once the cache is full ({size} slots: sinks={self.sinks}, "
                                       f"window={self.window}), got t={t} with {self._seen} positions seen; append "
                                       f"one position at a time, or build a larger window")
        if self._seen + t <= size:
            slot = slice(self._seen, self._seen + t)
        else:
            ring = self.sinks + (self._seen - self.sinks) % self.window
            slot = slice(ring, ring + 1)
            if self._overwritten is not None:
                self._overwritten.append((slot, self.keys[:, :, slot].clone(), self.values[:, :, slot].clone()))
        self.keys[:, :, slot], self.values[:, :, slot] = k, v  # (b, h_kv, t, d)
        self._seen += t
        n = len(self)
        return self.keys[:, :, :n], self.values[:, :, :n]  # views, (b, h_kv, len, d)
