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


def _overlap(n, d):
    """Slices (target, source) of an axis of length n for a shift target = source + d."""
    if d >= 0:
        return slice(d, n), slice(0, max(n - d, 0))
    return slice(0, max(n + d, 0)), slice(-d, n)


def forward(image, lut) -> np.ndarray:
    """Scatter: (H x)(r) = sum_{r'} x(r') K_{a(r')}(r - r'). image (nz, ny, nx) -> float64 histo-image."""
    x = np.asarray(image, dtype=np.float64)
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
    g = np.asarray(histo, dtype=np.float64)
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
    two the kernel is the symmetric Gaussian.
    """
    vz, vy, vx = grid.voxel_size
    o = np.asarray(offsets, dtype=np.float64)
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
