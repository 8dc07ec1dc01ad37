"""The element-wise steps of the per-subset updates, fused into one pass each.

On CuPy arrays each step is one CUDA kernel (cupy.ElementwiseKernel) instead of a chain of
temporaries: a 144x144x48 DIRECT view update then costs two passes over memory besides the
projections. On NumPy arrays the same formulas run with in-place operations on the output.
The RAMLA step writes a new image rather than updating x in place, so that an x handed to a
callback stays as it was.
"""

from __future__ import annotations

import numpy as np

_KERNELS = {}


def _cupy_kernel(name):
    import cupy  # present: only called for CuPy arrays

    if name not in _KERNELS:
        if name == "residual":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float32 hx, float32 d, float32 s, float32 b, float32 eps, float32 c", "float32 r",
                "r = s * (d / max(s * hx + b, eps) - c)", "directpet_subset_residual")
        elif name == "ramla":
            _KERNELS[name] = cupy.ElementwiseKernel(
                "float32 x, float32 step, float32 g, float32 floor", "float32 y",
                "y = max(x + x * step * g, floor)", "directpet_ramla_update")
    return _KERNELS[name]


def subset_residual(xp, hx, d, s, b, eps: float, c: float, out):
    """out = s * (d / max(s * hx + b, eps) - c), with s = 1 and b = 0 where None.

    c = 1 gives the log-likelihood gradient's back-projection argument (block-RAMLA), c = 0 the
    EM ratio (MLEM / OSEM).
    """
    if xp is not np:
        one, zero = np.float32(1.0), np.float32(0.0)
        return _cupy_kernel("residual")(hx, d, one if s is None else s, zero if b is None else b,
                                        np.float32(eps), np.float32(c), out)
    ybar = np.multiply(hx, s, out=out) if s is not None else np.copyto(out, hx) or out
    if b is not None:
        ybar += b
    np.maximum(ybar, np.float32(eps), out=ybar)
    np.divide(d, ybar, out=out)
    if c:
        out -= np.float32(c)
    if s is not None:
        out *= s
    return out


def ramla_update(xp, x, step, g, floor: float):
    """A new array ``max(x + x * step * g, floor)``; x is not modified (a callback may keep it)."""
    if xp is not np:
        return _cupy_kernel("ramla")(x, step, g, np.float32(floor))
    y = np.multiply(step, g)
    y *= x
    y += x
    np.maximum(y, np.float32(floor), out=y)
    return y
