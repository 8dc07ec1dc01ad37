"""Argument checks shared by several DIRECT modules (private; the package-wide ones live in
:mod:`directpet._checks`). Errors name the argument, say what was expected and what came."""

from __future__ import annotations

import numpy as np

from .._checks import array_module, integer

#: Largest event count of a simulation: the compiled counters are signed 64-bit.
MAX_EVENTS = 2**63 - 1


def event_count(name: str, value) -> int:
    """A number of events to simulate: an integer in [1, 2**63 - 1] (the compiled counters are
    64-bit; the Python path keeps the same rule), else an error naming ``name``."""
    return integer(name, value, lo=1, hi=MAX_EVENTS)


def check_weights(weights, n: int, xp) -> None:
    """Per-event weights (deposited instead of 1): an ``(n,)`` array of real numbers of namespace
    ``xp``, finite and >= 0 (a negative weight would deposit negative counts)."""
    if not hasattr(weights, "shape") or not hasattr(weights, "dtype"):
        raise TypeError(f"weights: expected an ({n},) array, got {type(weights).__name__}")
    if tuple(weights.shape) != (n,) or array_module(weights) is not xp:
        raise ValueError(f"weights: expected a ({n},) array living with the events, got "
                         f"{type(weights).__name__} {tuple(weights.shape)}")
    if np.dtype(weights.dtype).kind not in "iuf":
        raise TypeError(f"weights: expected real numbers, got dtype {weights.dtype}")
    if not bool(xp.isfinite(weights).all()):
        raise ValueError("weights: contains NaN or inf")
    if bool((weights < 0).any()):
        raise ValueError(f"weights: expected values >= 0 (counts), got {float(weights.min()):g}")


__all__ = ["MAX_EVENTS", "check_weights", "event_count"]
