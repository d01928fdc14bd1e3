"""What attention costs in memory: the bytes it should take (arithmetic) and the bytes it does take (measured).

``attention_memory_bytes`` counts the tensors of one attention call by hand. ``measure_peak_memory`` runs a function
and reports the highest amount of tensor memory it had allocated at any moment, above what was allocated before it
started. It works on the CPU as on CUDA:

* CPU: PyTorch keeps no running total for its CPU allocator, but the profiler (``profile_memory=True``) records every
  allocation and every free (with negative bytes) as a raw ``[memory]`` event. Summing those records in time order
  gives the exact level after every step, hence the exact peak. (An operator's ``cpu_memory_usage`` in the profiler's
  tables is not used: it also counts its children's allocations, so it overstates.)
* CUDA: the caching allocator's own peak statistics (``torch.cuda.max_memory_allocated``).

Measurements nest (a measured function may itself call ``measure_peak_memory``) and repeat; they are not thread-safe.
On the CPU, allocations made on other threads are counted only where PyTorch hands them its profiling state
(autograd's threads, for one).

The parts live in their own modules: the arithmetic in ``_byte_counts``, the meter in ``_peak_meter``, the report on
the machine's memory in ``_memory_report``; import every name from here.
"""

from ._byte_counts import AttentionMemory, MiB, attention_memory_bytes, format_bytes  # noqa: F401 (MiB: bytes per MiB)
from ._memory_report import available_memory_bytes, memory_report
from ._peak_meter import PeakMemory, _CpuSession, measure_peak_memory  # noqa: F401 (_CpuSession: read by the tests)

__all__ = [
    "AttentionMemory",
    "PeakMemory",
    "attention_memory_bytes",
    "available_memory_bytes",
    "format_bytes",
    "measure_peak_memory",
    "memory_report",
]
