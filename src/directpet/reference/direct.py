"""float64 NumPy reference of the DIRECT projectors, written literally from the definitions.

Forward projection is the *scatter*: every source voxel r' spreads x(r') with its own kernel,
``out(r' + d_i) += x(r') * values[a(r')][i]``. Back projection is the *gather*:
``out(r) = sum_i g(r + d_i) * values[a(r)][i]``. Both loop over the offsets of mSR and are
vectorised over voxels; voxels outside the volume are zero. They take the LUTs of
:func:`directpet.direct.build_lut` (or any DirectLUT) and never use the flip table, so they are an
independent check of the scatter-as-gather rewrite in the fast backends.
"""

from __future__ import annotations

import numpy as np

from .._checks import expect_attributes, real_number
from ._arrays import real_input
from ..geometry import ImageGrid


def _lut(lut):
    """lut, or a TypeError naming it when it is not a DirectLUT (lormap, offsets, values)."""
    return expect_attributes(lut, ("lormap", "offsets", "values"), "lut", "a DirectLUT (directpet.direct.build_lut)")


def _volume(a, name: str, lut) -> np.ndarray:
    """a as float64 (nz, ny, nx) with (ny, nx) those of the LUT (its grid's shape where it has one):
    a real, finite NumPy array, else an error naming ``name`` (as the compiled projectors check)."""
    grid = getattr(lut, "grid", None)
    if isinstance(grid, ImageGrid):
        return real_input(a, name, grid.shape)
    a = real_input(a, name)
    plane = tuple(np.shape(lut.lormap))
    if a.ndim != 3 or a.shape[1:] != plane:
        raise ValueError(f"{name}: expected shape (nz,) + {plane}, got {a.shape}")
    return a


def _overlap(n, d):
    """Slices (target, source) of an axis of length n for a shift target = source + d."""
    if d >= 0:
        return slice(d, n), slice(0, max(n - d, 0))
    return slice(0, max(n + d, 0)), slice(-d, n)


def forward(image, lut) -> np.ndarray:
    """Scatter: (H x)(r) = sum_{r'} x(r') K_{a(r')}(r - r'). image (nz, ny, nx) -> float64 histo-image."""
    x = _volume(image, "image", _lut(lut))
    nz, ny, nx = x.shape
    weights = np.asarray(lut.values, dtype=np.float64)[lut.lormap]  # (ny, nx, N): kernel of each source
    out = np.zeros_like(x)
    for i, (dz, dy, dx) in enumerate(np.asarray(lut.offsets)):
        tz, sz = _overlap(nz, dz)
        ty, sy = _overlap(ny, dy)
        tx, sx = _overlap(nx, dx)
        out[tz, ty, tx] += x[sz, sy, sx] * weights[sy, sx, i]
    return out


def back(histo, lut) -> np.ndarray:
    """Gather: (H^T g)(r) = sum_i g(r + d_i) K_{a(r)}(d_i). histo (nz, ny, nx) -> float64 image."""
    g = _volume(histo, "histo", _lut(lut))
    nz, ny, nx = g.shape
    weights = np.asarray(lut.values, dtype=np.float64)[lut.lormap]  # (ny, nx, N): own kernel
    out = np.zeros_like(g)
    for i, (dz, dy, dx) in enumerate(np.asarray(lut.offsets)):
        # out(r) += g(r + d): the source index is the target index shifted by +d.
        sz, tz = _overlap(nz, dz)
        sy, ty = _overlap(ny, dy)
        sx, tx = _overlap(nx, dx)
        out[tz, ty, tx] += g[sz, sy, sx] * weights[ty, tx, i]
    return out


def gaussian_kernel_values(grid, view, offsets, sigma_tof, sigma_axial, sigma_radial,
                           narrow_weight=None, wide_shift=None) -> np.ndarray:
    """mSRval from the formulas in float64: (n_kernels, N), unit sum per row.

    ``sigma_radial``, ``narrow_weight`` and ``wide_shift`` are per identifier (mm); without the last
    two the kernel is the symmetric Gaussian. The sigmas must be positive and finite (mm),
    ``narrow_weight`` in [0, 1], ``wide_shift`` finite, ``offsets`` integer (N, 3).
    """
    if not isinstance(grid, ImageGrid):
        raise TypeError(f"grid: expected an ImageGrid, got {type(grid).__name__}")
    expect_attributes(view, ("direction", "radial_axis", "axial_axis"), "view", "a View")
    o = np.asarray(offsets)
    if not np.issubdtype(o.dtype, np.integer):
        raise TypeError(f"offsets: expected integer voxel offsets (dz, dy, dx), got dtype {o.dtype}")
    if o.ndim != 2 or o.shape[1] != 3:
        raise ValueError(f"offsets: expected shape (N, 3) (dz, dy, dx), got {o.shape}")
    sigma_tof = real_number("sigma_tof", sigma_tof, positive=True)
    sigma_axial = real_number("sigma_axial", sigma_axial, positive=True)
    sigma_radial = _per_identifier("sigma_radial", sigma_radial, None, 0.0, np.inf, open_low=True)
    n = sigma_radial.shape[0]
    if narrow_weight is not None:
        narrow_weight = _per_identifier("narrow_weight", narrow_weight, n, 0.0, 1.0)
    if wide_shift is not None:
        wide_shift = _per_identifier("wide_shift", wide_shift, n, -np.inf, np.inf)
    vz, vy, vx = grid.voxel_size
    o = o.astype(np.float64)
    d = np.stack([o[:, 2] * vx, o[:, 1] * vy, o[:, 0] * vz], axis=1)
    t, r, a = d @ view.direction, d @ view.radial_axis, d @ view.axial_axis
    s = np.asarray(sigma_radial, dtype=np.float64)[:, None]
    w = np.ones_like(s) if narrow_weight is None else np.asarray(narrow_weight, dtype=np.float64)[:, None]
    sh = np.zeros_like(s) if wide_shift is None else np.asarray(wide_shift, dtype=np.float64)[:, None]

    def normal(x, mu, sig):
        return np.exp(-0.5 * ((x - mu) / sig) ** 2) / (np.sqrt(2 * np.pi) * sig)

    radial = w * normal(r[None, :], 0.0, s) + (1 - w) * normal(r[None, :], sh, 2 * s)
    k = np.exp(-0.5 * (t / sigma_tof) ** 2 - 0.5 * (a / sigma_axial) ** 2)[None, :] * radial
    return k / k.sum(axis=1, keepdims=True)


def _per_identifier(name, v, n, low, high, open_low=False) -> np.ndarray:
    """v as a 1D float64 array (of n values when n is given), finite, in [low, high] ((low, high]
    with ``open_low``); errors name ``name``."""
    a = np.asarray(v)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name}: expected real values (one per identifier), got dtype {a.dtype}")
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise ValueError(f"{name}: expected shape ({'n_kernels' if n is None else n},), got {a.shape}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all() or np.any(a < low) or np.any(a > high) or (open_low and np.any(a <= low)):
        raise ValueError(f"{name}: expected finite values in {'(' if open_low else '['}{low}, {high}], got {v!r}")
    return a
