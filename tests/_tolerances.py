"""Tolerances shared by the numerical tests (a module of its own: two conftest.py files exist, so
`from conftest import ...` would be ambiguous)."""

import torch

# Tolerances from PyTorch's own attention tests (see CONTRIBUTING.md).
TOL = {
    torch.float64: dict(atol=1e-7, rtol=1e-7),
    torch.float32: dict(atol=1e-5, rtol=1.3e-6),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-3, rtol=1.6e-2),
}
