"""What the machine has now: free memory on a device, and a few printable lines on memory use."""

from __future__ import annotations

import torch

from .._validation import fail
from .memory import format_bytes

__all__ = ["available_memory_bytes", "memory_report"]


def _resolve(device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else torch.get_default_device()


def available_memory_bytes(device: torch.device | str | None = None) -> int:
    """Free memory on ``device`` now: on CUDA the driver's free bytes, on the CPU the RAM available to new
    allocations without swapping (psutil, on Linux, macOS and Windows alike). Shape: an int of bytes."""
    dev = _resolve(device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    if dev.type != "cpu":
        fail("available_memory_bytes", f"expected a 'cpu' or 'cuda' device, got {dev}")
    import psutil  # a learner requirement; imported here so that `import attention_lab` stays light

    return int(psutil.virtual_memory().available)


def memory_report(device: torch.device | str | None = None) -> str:
    """A few lines on memory now, on any device (CUDA or CPU).

    CUDA: tensor memory allocated, reserved by the caching allocator, the peak since the last reset, and the
    device's free/total memory. CPU: PyTorch keeps no running total of CPU tensor bytes, so the report gives the
    process's resident memory and the machine's available/total RAM (psutil) and points to ``measure_peak_memory``.

    Shape: a string of lines.
    """
    dev = _resolve(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            fail("memory_report", f"device {dev} was asked for but CUDA is not available here; use device='cpu'")
        free, total = torch.cuda.mem_get_info(dev)
        return "\n".join([
            f"device: {dev} ({torch.cuda.get_device_name(dev)})",
            f"allocated by tensors: {format_bytes(torch.cuda.memory_allocated(dev))}",
            f"reserved by the caching allocator: {format_bytes(torch.cuda.memory_reserved(dev))}",
            f"peak allocated since last reset: {format_bytes(torch.cuda.max_memory_allocated(dev))}",
            f"device memory free / total: {format_bytes(free)} / {format_bytes(total)}",
        ])
    if dev.type != "cpu":
        fail("memory_report", f"expected a 'cpu' or 'cuda' device, got {dev}")
    lines = [f"device: {dev}"]
    try:
        import psutil
    except ImportError:
        lines.append("psutil is not installed: `pip install psutil` to see process and system memory")
    else:
        vm = psutil.virtual_memory()
        lines += [
            f"process resident memory (RSS): {format_bytes(psutil.Process().memory_info().rss)}",
            f"system memory available / total: {format_bytes(vm.available)} / {format_bytes(vm.total)}",
        ]
    lines.append("tensor bytes: PyTorch keeps no running total on the CPU; measure_peak_memory(fn) gives exact "
                 "peaks")
    return "\n".join(lines)
