"""Random streams shared by every family's simulation: NumPy / CuPy Generators and compiled seeds.

The Python Monte Carlo paths draw from a ``Generator`` of the array namespace they run in
(:func:`make_rng`); the compiled paths take one integer seed of their Philox4x32-10 streams
(``csrc/common/philox.hpp``), obtained from whatever the caller passed (:func:`seed_from_rng`).
"""

from __future__ import annotations

import numpy as np

from .._checks import _is_cupy, array_module


def make_rng(rng=None, xp=np, name: str = "rng"):
    """A random Generator of namespace xp from None, a seed, or a Generator.

    A NumPy Generator passed for CuPy seeds a new CuPy Generator from it (reproducible). Anything
    ``numpy.random.default_rng`` refuses (a negative seed, a string, a float) is an error naming
    ``name`` (the caller's argument: ``rng`` or ``seed``).
    """
    if xp is not np and not callable(getattr(getattr(xp, "random", None), "default_rng", None)):
        raise TypeError(f"xp: expected the array module numpy or cupy, got {type(xp).__name__} {xp!r}")
    if rng is not None and _is_cupy(rng):
        if xp is np:
            raise TypeError(f"{name}: a CuPy Generator draws CuPy arrays; pass a NumPy Generator or a seed for NumPy data")
        return rng
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"{name}: expected None, a non-negative integer seed or a Generator, got bool")
    try:
        gen = np.random.default_rng(rng)       # validates seeds the NumPy way, for both namespaces
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: expected None, a non-negative integer seed or a Generator, got {rng!r} ({e})") from None
    if xp is np:
        return gen
    if not isinstance(rng, np.random.Generator) and rng is not None and not isinstance(rng, (int, np.integer)):
        rng = gen                              # a SeedSequence or a sequence of seeds: through NumPy
    if isinstance(rng, np.random.Generator):
        rng = int(rng.integers(2**63 - 1))
    return xp.random.default_rng(rng)


#: The largest mean NumPy's (and CuPy's) Poisson sampler takes (int64 counts).
MAX_POISSON_MEAN = 9.2e18
#: Expected data below zero by at most this fraction of their maximum are float32 round-off (set to 0).
NEGATIVE_ROUNDOFF = 1e-5


def draw_counts(expected, *, counts=None, background=None, rng=None, noise=True, counts_name="counts",
                rng_name="rng"):
    """Model-consistent counts, shared by every family's ``model_consistent_*``: the expected data
    ``expected`` (= f H x + b, float32, NumPy or CuPy) scaled by one factor alpha so that their total
    is ``counts`` (None: alpha = 1), then a Poisson draw (``noise``) from ``rng`` (see make_rng).

    ``counts`` must already be checked (a positive number); ``background`` (the b inside
    ``expected``, or None) is scaled along and returned, so the data stay consistent with
    ``alpha * x``. Returns ``(data, background, alpha, expected_total)``, ``expected_total`` before
    scaling. Values below zero by at most ``NEGATIVE_ROUNDOFF`` of the maximum (an FFT projector's
    float32 round-off) count as zero; more negative expected data (only a projector with negative
    weights makes them) and all-zero data are errors.
    """
    xp = array_module(expected)
    low, high = float(expected.min()), float(expected.max())
    if low < 0:
        # float32 round-off of an FFT projector leaves values a few 1e-7 of the maximum below zero:
        # those are zeros; a projector with negative weights (a spectral FFT kernel's ripples) is refused
        if low < -NEGATIVE_ROUNDOFF * max(high, 0.0):
            raise ValueError(f"projector: the expected data have negative values (min {low:.3g}, max {high:.3g}), "
                             "which no Poisson draw can have")
        expected = xp.maximum(expected, 0)
    total = float(expected.sum(dtype=xp.float64))
    if not total > 0:
        raise ValueError("image: the expected data are all zero; nothing to simulate")
    alpha = 1.0 if counts is None else counts / total
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"{counts_name}: {counts!r} gives the scale {alpha!r} of the expected data; expected "
                         "a positive finite scale")
    ybar = (expected * np.float32(alpha)).astype(xp.float32, copy=False)
    peak = float(ybar.max())
    if not np.isfinite(peak) or (noise and peak > MAX_POISSON_MEAN):
        raise ValueError(f"{counts_name}: {counts!r} makes the largest expected count {peak:.3g}, beyond what a "
                         f"Poisson draw takes ({MAX_POISSON_MEAN:.3g}: NumPy's limit) or float32 holds")
    data = make_rng(rng, xp, rng_name).poisson(ybar).astype(xp.float32) if noise else ybar
    bg = None if background is None else (background * np.float32(alpha)).astype(xp.float32)
    return data, bg, alpha, total


def check_seed(name: str, v) -> int:
    """v as a compiled-generator seed: an integer in [0, 2**64), else a ValueError naming ``name``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2**64:
        raise ValueError(f"{name}: expected an integer in [0, 2**64), got {v!r}")
    return int(v)


def seed_from_rng(rng, name: str = "rng") -> int:
    """A seed for a compiled simulation from None (fresh entropy), an int in [0, 2**64), or a
    NumPy/CuPy Generator (one draw from it); errors name ``name`` (the caller's argument)."""
    if rng is None:
        return int(np.random.default_rng().integers(2**63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        return check_seed(name, rng)
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2**63))
    if _is_cupy(rng):
        return int(float(rng.random()) * 2**53)
    raise TypeError(f"{name}: expected None, a seed or a Generator, got {type(rng).__name__}")


__all__ = ["check_seed", "draw_counts", "make_rng", "seed_from_rng"]
