"""Input validation shared by every module.

Each helper raises ``TypeError`` (wrong kind of object or dtype) or ``ValueError`` (wrong value or shape) with a
message of the form ``"<function>(): expected ..., got ...; <how to fix>"``, so a learner sees which call failed,
what it wanted and what it was given. No ``assert`` here: asserts vanish under ``python -O``. Every check a module
needs more than once lives here (a flag, an int, a seed, a number in a range, one of a few choices, a floating dtype,
a device this machine has, tensors); a check that only one function needs stays in that function, written with
:func:`fail`. The mask checks live beside the masks, in ``core/_mask_checks.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NoReturn, TypeVar

import torch

Choice = TypeVar("Choice")

LOW_PRECISION = (torch.float16, torch.bfloat16)
"""Dtypes whose softmax sums are computed in fp32 (and the result cast back): their own sums lose too many digits."""


def fail(fn: str, message: str, error: type[Exception] = ValueError) -> NoReturn:
    """Raise ``error("<fn>(): <message>")``; never returns, so code after a ``fail`` is never reached."""
    raise error(f"{fn}(): {message}")


def check_bool(fn: str, name: str, value: object) -> bool:
    """``True`` or ``False`` itself (not 0/1, not None: a flag given by mistake would be read as its truth)."""
    if not isinstance(value, bool):
        fail(fn, f"{name} must be True or False, got {type(value).__name__} {value!r}; pass {name}=True or "
                 f"{name}=False", TypeError)
    return value


def check_number(fn: str, name: str, value: object, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, unit: str = "", hint: str = "") -> float:
    """A finite real number (bools refused) within ``low`` .. ``high`` (either end open, or absent when None).

    ``unit`` names what the number counts (``"seconds"``), ``hint`` says how to fix a bad value.
    """
    kind = f"a finite number of {unit}" if unit else "a finite number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(fn, f"{name} must be {kind}, got {type(value).__name__} {value!r}; pass a Python int or float"
                 + (f" ({hint})" if hint else ""), TypeError)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or too_low or too_high:
        if low is not None and high is not None:
            bounds = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        elif low is not None:
            bounds = f"{'>' if low_open else '>='} {low}"
        else:
            bounds = f"{'<' if high_open else '<='} {high}" if high is not None else ""
        fail(fn, f"{name} must be {kind} {bounds}".rstrip() + f", got {name}={value!r}; "
                 + (hint or f"pass a finite {name} {bounds}".rstrip()))
    return float(value)


def check_choice(fn: str, name: str, value: object, choices: Sequence[Choice], *, hint: str = "") -> Choice:
    """One of ``choices`` (compared with ``==``)."""
    if value not in choices:
        fail(fn, f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {name}={value!r}; "
                 + (hint or f"pass one of these, e.g. {name}={choices[0]!r}"))
    return value


def check_tensor(fn: str, name: str, x: object, *, min_dim: int = 0, floating: bool = False) -> torch.Tensor:
    """A tensor with at least ``min_dim`` dimensions (and a floating dtype if asked)."""
    if not isinstance(x, torch.Tensor):
        fail(fn, f"{name} must be a torch.Tensor, got {type(x).__name__}; convert it with torch.as_tensor({name})",
             TypeError)
    if x.dim() < min_dim:
        fail(fn, f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}; add the missing "
                 f"axes with {name}.unsqueeze(0) or {name}.reshape(...)")
    if floating and not x.is_floating_point():
        fail(fn, f"{name} must have a floating dtype, got {x.dtype}; convert it with {name}.float()", TypeError)
    return x


def check_token_ids(fn: str, name: str, tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Integer token ids (torch.long) in ``[0, vocab_size)``, the rows an embedding table of ``vocab_size`` has."""
    if tokens.dtype != torch.long:
        fail(fn, f"{name} must be integer ids (torch.long), got dtype {tokens.dtype}; convert with {name}.long()",
             TypeError)
    low, high = (int(end) for end in torch.aminmax(tokens)) if tokens.numel() else (0, 0)
    if low < 0 or high >= vocab_size:
        fail(fn, f"{name} must hold ids in [0, vocab_size={vocab_size}), got ids from {low} to {high}; map them "
                 f"into the model's vocabulary or build it with a larger vocab_size")
    return tokens


def check_positive_int(fn: str, name: str, value: object, *, minimum: int = 1) -> int:
    """An ``int`` (bools and floats refused) that is at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail(fn, f"{name} must be an int, got {type(value).__name__} {value!r}; pass a whole number such as "
                 f"{name}={max(minimum, 1)}", TypeError)
    if value < minimum:
        fail(fn, f"{name} must be >= {minimum}, got {name}={value}; pass {name}={minimum} or more")
    return value


SEED_MAX = 2**64 - 1
"""The largest seed a torch generator takes (64 bits)."""


def check_seed(fn: str, seed: object) -> int:
    """A random seed: an ``int`` in ``[0, 2**64 - 1]``, what ``torch.Generator.manual_seed`` takes."""
    check_positive_int(fn, "seed", seed, minimum=0)
    if seed > SEED_MAX:
        fail(fn, f"seed must be at most 2**64 - 1 (a torch generator's seed has 64 bits), got seed={seed}; pass a "
                 f"smaller seed, e.g. seed % 2**64")
    return seed


def check_float_dtype(fn: str, name: str, dtype: object) -> torch.dtype:
    """A floating ``torch.dtype`` (float32, float64, float16, bfloat16): what weights, caches and features hold."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail(fn, f"{name} must be a floating torch.dtype, got {type(dtype).__name__} {dtype!r}; pass "
                 f"{name}=torch.float32 (or torch.float64, torch.float16, torch.bfloat16)", TypeError)
    return dtype


def available_devices() -> list[str]:
    """The device types this machine can put a tensor on: always ``"cpu"``, then ``"cuda"`` and ``"mps"`` if present."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def check_device(fn: str, name: str, device: object) -> torch.device | None:
    """``None`` (the default device) or a device this machine has, as a ``torch.device`` or a string (``"cpu"``,
    ``"cuda:0"``); ``"gpu"`` and a device this build of torch cannot reach are refused, naming the devices here."""
    if device is None:
        return None
    here = available_devices()
    fix = f"pass one of {', '.join(repr(d) for d in here)}, or attention_lab.device() for the best one here"
    if not isinstance(device, (str, torch.device)):
        fail(fn, f"{name} must be a torch.device or a device string, got {type(device).__name__} {device!r}; {fix}",
             TypeError)
    try:
        parsed = torch.device(device)
    except RuntimeError:
        fail(fn, f"{name} must be a device string such as 'cpu' or 'cuda:0', got {device!r}; {fix}")
    if parsed.type == "meta":  # shapes without data: every build of torch has it
        return parsed
    count = torch.cuda.device_count() if parsed.type == "cuda" else 1
    if parsed.type not in here or (parsed.index or 0) >= count:
        fail(fn, f"{name} must be a device this machine has ({', '.join(here)}), got {device!r}; {fix}")
    return parsed


def check_positive_ints(fn: str, *, minimum: int = 1, **values: object) -> None:
    """:func:`check_positive_int` on each keyword, in the order given: ``check_positive_ints(fn, embed_dim=e,
    num_heads=h)``."""
    for name, value in values.items():
        check_positive_int(fn, name, value, minimum=minimum)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def check_heads_divide(fn: str, width_name: str, width: int, num_heads: int) -> int:
    """Whether ``num_heads`` divides the model width (each head gets ``width / num_heads`` features); returns the
    head dim. The error lists the head counts that work."""
    if width % num_heads:
        fail(fn, f"{width_name} must be divisible by num_heads, got {width_name}={width} and num_heads={num_heads}; "
                 f"choose num_heads from the divisors of {width}: {_divisors(width)} (each head gets {width_name} / "
                 f"num_heads features)")
    return width // num_heads


def check_kv_heads(fn: str, num_heads: int, num_kv_heads: object) -> int:
    """``num_kv_heads`` an int >= 1 that divides ``num_heads`` (each key/value head serves a group of query heads).
    The error lists the counts that work."""
    check_positive_int(fn, "num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        fail(fn, f"num_heads must be a multiple of num_kv_heads (each key/value head serves a group of query heads), "
                 f"got num_heads={num_heads} and num_kv_heads={num_kv_heads}; choose num_kv_heads from the "
                 f"divisors of {num_heads}: {_divisors(num_heads)}")
    return num_kv_heads


def check_sequence_input(fn: str, name: str, x: object, weight: torch.Tensor, *, max_len: int | None = None
                         ) -> torch.Tensor:
    """``x`` the ``(b, n, e)`` input of a module whose projection ``weight`` is ``(out, e)``: a floating tensor of three
    axes with the weight's e, dtype and device; with ``max_len`` (a module whose weights are tied to positions,
    such as Linformer's E and F) also ``1 <= n <= max_len``."""
    check_tensor(fn, name, x, floating=True)
    e = weight.shape[-1]
    if x.dim() != 3:
        fail(fn, f"{name} must have shape (b, n, e) with e={e} (batch, tokens, features), got shape "
                 f"{tuple(x.shape)}; for one sequence add the batch axis with {name}.unsqueeze(0)")
    if x.shape[-1] != e:
        fail(fn, f"{name} must have e={e} features in its last dimension (the module was built with embed_dim={e}), "
                 f"got shape {tuple(x.shape)} with e={x.shape[-1]}; project the input to {e} features or build "
                 f"the module with embed_dim={x.shape[-1]}")
    if max_len is not None and not 1 <= x.shape[1] <= max_len:
        fail(fn, f"{name} must have shape (b, i, e) with 1 <= i <= seq_len={max_len} (the module's weights are tied "
                 f"to positions), got shape {tuple(x.shape)}; build the module with a larger seq_len for longer "
                 f"inputs")
    check_dtype_device(fn, name, x, weight, owner="the module",
                       fix=f"convert the input with {name}.to({weight.dtype}) or the module with .to({x.dtype})")
    return x


def check_dtype_device(fn: str, name: str, x: torch.Tensor, like: torch.Tensor, *, owner: str, fix: str) -> None:
    """``x`` has the dtype and the device of ``like``, the tensors of its ``owner`` (a module's weights, a cache's
    buffers); ``fix`` says how to convert when the dtype differs."""
    if x.dtype != like.dtype:
        fail(fn, f"{name} must have {owner}'s dtype {like.dtype}, got {x.dtype}; {fix}", TypeError)
    if x.device != like.device:
        fail(fn, f"{name} must be on {owner}'s device {like.device}, got {x.device}; move it with "
                 f"{name}.to({str(like.device)!r})")


def check_scale(fn: str, scale: object) -> float | None:
    """``None`` (use 1/sqrt(d)) or a finite number > 0."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        fail(fn, f"scale must be a positive float or None, got {type(scale).__name__}; pass a number > 0, or None "
                 f"for 1/sqrt(d)", TypeError)
    return check_number(fn, "scale", scale, low=0, low_open=True, hint="leave it None for 1/sqrt(d)")


def check_same_dtype_device(fn: str, **tensors: torch.Tensor) -> None:
    """All tensors share one dtype and one device."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.dtype != first.dtype:
            fail(fn, f"{first_name} and {name} must share a dtype, got {first_name}.dtype={first.dtype} and "
                     f"{name}.dtype={t.dtype}; convert one with .to({first.dtype})", TypeError)
        if t.device != first.device:
            fail(fn, f"{first_name} and {name} must be on one device, got {first.device} and {t.device}; "
                     f"move them with .to(device)")


def check_qk(fn: str, q: torch.Tensor, k: torch.Tensor) -> None:
    """q ``(..., i, d)`` and k ``(..., j, d)``: same d, broadcastable leading dims."""
    _check_attention_inputs(fn, {"q": q, "k": k})


def check_qkv(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``."""
    _check_attention_inputs(fn, {"q": q, "k": k, "v": v})


def _check_attention_inputs(fn: str, tensors: dict[str, torch.Tensor]) -> None:
    for name, x in tensors.items():
        check_tensor(fn, name, x, min_dim=2, floating=True)
    check_same_dtype_device(fn, **tensors)
    q, k, v = tensors["q"], tensors["k"], tensors.get("v")
    if q.shape[-1] != k.shape[-1]:
        fail(fn, f"q and k must have the same last dimension d, got q {tuple(q.shape)} (d={q.shape[-1]}) and "
                 f"k {tuple(k.shape)} (d={k.shape[-1]}); project them to one size first")
    if v is not None and k.shape[-2] != v.shape[-2]:
        fail(fn, f"k and v must have the same number of positions j, got k {tuple(k.shape)} (j={k.shape[-2]}) "
                 f"and v {tuple(v.shape)} (j={v.shape[-2]}); every key needs exactly one value")
    try:
        torch.broadcast_shapes(*(x.shape[:-2] for x in tensors.values()))
    except RuntimeError:
        given = " and ".join(f"{name} {tuple(x.shape)}" for name, x in tensors.items())
        fail(fn, f"the leading (batch, head) dimensions of {given} do not broadcast; expected shapes (..., i, d), "
                 f"(..., j, d) and (..., j, dv) with matching '...'")
