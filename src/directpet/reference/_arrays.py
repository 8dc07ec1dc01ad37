"""The input check every reference operator shares: a real, finite NumPy array of the expected shape."""

from __future__ import annotations

from typing import Optional

import numpy as np


def real_input(a, name: str, shape: Optional[tuple] = None) -> np.ndarray:
    """a as float64: a NumPy array (of ``shape`` when given), real and finite, else an error naming
    ``name`` -- the checks of the compiled projectors, less their float32 and contiguity requirements."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name}: expected a real (float or integer) array, got dtype {a.dtype}")
    if shape is not None and a.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or inf")
    return a.astype(np.float64, copy=False)
