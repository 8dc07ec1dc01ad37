"""Attenuation histo-images from a measured 3D attenuation map (:ref:`physics-direct`).

For view v and voxel r the attenuation factor is the mean of ``exp(-integral of mu)`` over the
LORs of the view that pass through r. Along one direction u the line integral through r is the
same for every point of that line, so it is computed once per direction as a parallel projection
of the map onto the plane perpendicular to u (``p_u(s1, s2) = int mu(s1 e1 + s2 e2 + t u) dt``)
and read back at each voxel's plane coordinates:

    ``a_v(r) = mean over directions u in the view's cell of exp(-p_u(r . e1, r . e2))``.

``n_sub = 1`` uses the view's representative direction alone -- the approximation of
:func:`~directpet.direct.sensitivity_attenuation` for analytic water cylinders -- and
``n_sub = k`` averages k x k directions at the midpoints of the view's (azimuth, tilt) cell.

The map is read by trilinear interpolation between its voxel centres (zero outside the map); the
projection is a midpoint rule in steps of ``step_mm`` on a plane lattice of spacing ``plane_mm``
(both by default half the map's smallest voxel), computed by the compiled kernels (one line per plane
point: ``csrc/direct/attenuation.hpp``, OpenMP on the CPU, CUDA on the GPU), and read back
bilinearly (``scipy.ndimage.map_coordinates`` / ``cupyx.scipy.ndimage.map_coordinates``). The same
projection written with ``map_coordinates`` (``_projection(..., compiled=False)``) is the tests' reference.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .._checks import array_module, expect_instance, positive_int, real_number, real_values, require_memory
from ..geometry import ImageGrid
from .data import require_stack_memory
from .geometry import ViewSet, sub_samples


def _ndimage(xp):
    if xp is np:
        import scipy.ndimage as nd
    else:
        import cupyx.scipy.ndimage as nd  # present: xp is CuPy
    return nd


def attenuation_histo_images(mu, mu_grid: ImageGrid, grid: ImageGrid, viewset: ViewSet, *, n_sub: int = 1,
                             step_mm: Optional[float] = None, plane_mm: Optional[float] = None, chunk: int = 16,
                             engine: str = "compiled"):
    """Per-view attenuation factors ``a_v`` on ``grid`` from the attenuation map ``mu``.

    Parameters
    ----------
    mu : (nz, ny, nx) attenuation map of ``mu_grid`` in 1/mm, finite, >= 0 (NumPy; CuPy runs on the
        GPU and returns CuPy).
    mu_grid : its :class:`~directpet.geometry.ImageGrid` (centred on the scanner axis; any shape and
        voxel size, e.g. a CT-derived map).
    grid, viewset : the reconstruction lattice and the DIRECT views.
    n_sub : directions per view-cell edge, 1 to 1024 (n_sub**2 directions averaged; 1: the representative one).
    step_mm : integration step along each line (default half the map's smallest voxel).
    plane_mm : spacing of the projection's plane lattice (default half the map's smallest voxel;
        the bilinear read-back across the map's sharp edges dominates the error).
    chunk : integration steps evaluated per interpolation call of the map_coordinates engine.
    engine : 'compiled' (default: the projections by csrc/direct/attenuation.hpp) or 'map_coordinates'
        (the same sums with scipy / cupyx ``map_coordinates``: the reference, and the baseline of
        ``benchmarks/direct_attenuation.py``).

    Returns (n_views, nz, ny, nx) float32 factors in (0, 1], in the namespace of ``mu``;
    multiply by the geometric sensitivity (``sensitivity_attenuation(grid, viewset)``) for s_v.
    """
    xp = array_module(mu)
    expect_instance(mu_grid, ImageGrid, "mu_grid")
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    if not hasattr(mu, "shape") or not hasattr(mu, "dtype"):
        raise TypeError(f"mu: expected a NumPy or CuPy array, got {type(mu).__name__}")
    real_values("mu", mu, xp, finite=False)          # no complex or boolean maps (finite: after float32)
    if tuple(mu.shape) != tuple(mu_grid.shape):
        raise ValueError(f"mu: expected shape {tuple(mu_grid.shape)} of mu_grid, got {getattr(mu, 'shape', None)}")
    mu = xp.ascontiguousarray(mu, dtype=xp.float32)
    if not bool(xp.isfinite(mu).all()):
        raise ValueError("mu: contains NaN or inf")
    if bool((mu < 0).any()):
        raise ValueError("mu: contains negative attenuation coefficients")
    n_sub, chunk = sub_samples("n_sub", n_sub, dims=2), positive_int("chunk", chunk)
    if engine not in ("compiled", "map_coordinates"):
        raise ValueError(f"engine: expected 'compiled' or 'map_coordinates', got {engine!r}")
    h = float(min(mu_grid.voxel_size))
    step = 0.5 * h if step_mm is None else real_number("step_mm", step_mm, positive=True)
    h = 0.5 * h if plane_mm is None else real_number("plane_mm", plane_mm, positive=True)
    require_stack_memory("grid", len(viewset), grid, copies=3)      # the factors and float64 sums
    corners = _box_corners(mu_grid)
    # the midpoints along a line: at most the map's diagonal / step of them, two float64 arrays
    n_steps = float(np.linalg.norm(np.ptp(corners, axis=0))) / step + 1.0
    require_memory("step_mm", 16.0 * n_steps, f"{n_steps:.3g} integration steps along a line (step_mm={step:g})")
    # the plane lattice covers the map's shadow (at most its diagonal on a side): a few float64
    # planes, and `chunk` steps of coordinates and samples at a time
    side = float(np.ptp(corners, axis=0).max() * np.sqrt(3.0)) / h + 3.0
    require_memory("plane_mm", 8.0 * (6 + 5 * chunk) * side * side,
                   f"a projection plane of about {side:.0f} x {side:.0f} points (plane_mm={h:g}, chunk={chunk})")
    nd = _ndimage(xp)
    coords = [xp.asarray(grid.centres(a), dtype=xp.float64) for a in range(3)]
    z, y, x = xp.meshgrid(*coords, indexing="ij")
    out = xp.empty((len(viewset),) + grid.shape, dtype=xp.float32)
    for v in range(len(viewset)):
        views = viewset.cell_views(v, n_sub)
        acc = xp.zeros(grid.shape, dtype=xp.float64)
        for view in views:
            u, e1 = view.direction, view.radial_axis
            e2 = np.cross(u, e1)
            p, lo1, lo2 = _projection(mu, mu_grid, corners, u, e1, e2, h, step, chunk, xp, nd,
                                      compiled=engine == "compiled")
            s1 = (x * e1[0] + y * e1[1] + z * e1[2] - lo1) / h
            s2 = (x * e2[0] + y * e2[1] + z * e2[2] - lo2) / h
            line = _linear_or_zero(nd, p, [s1.ravel(), s2.ravel()], xp)
            acc += xp.exp(-line.reshape(grid.shape))
        out[v] = (acc / len(views)).astype(xp.float32)
    if not bool(xp.isfinite(out).all()):
        raise RuntimeError("attenuation_histo_images: non-finite factors (an interpolation failure); please report")
    return out


def _linear_or_zero(nd, array, coords, xp):
    """Linear interpolation of ``array`` at ``coords`` (one flat array per axis), 0 outside
    ``[0, n - 1]`` on any axis: ``map_coordinates(..., mode='constant', cval=0)``'s semantics, with
    the outside points masked here and every coordinate clipped into the array, so the interpolation
    itself never reads outside (CuPy 14's constant mode left a few such outputs unwritten: NaN from
    recycled memory, seen on an H200 on 2026-11-23).
    """
    inside = None
    clipped = []
    for c, n in zip(coords, array.shape):
        ok = (c >= 0) & (c <= n - 1)
        inside = ok if inside is None else inside & ok
        clipped.append(xp.clip(c, 0, n - 1))
    vals = nd.map_coordinates(array, xp.stack(clipped), order=1, mode="nearest")
    return xp.where(inside, vals, 0.0)


def _box_corners(g: ImageGrid) -> np.ndarray:
    """The 8 corners (x, y, z) of the map's interpolation support: its outer voxel centres."""
    half = [(g.shape[a] - 1) / 2 * g.voxel_size[a] for a in (2, 1, 0)]
    return np.array([[sx * half[0], sy * half[1], sz * half[2]] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])


def _projection(mu, g: ImageGrid, corners, u, e1, e2, h, step, chunk, xp, nd, compiled: bool = True):
    """p(s1, s2) = int mu(s1 e1 + s2 e2 + t u) dt on a plane lattice of spacing h covering the
    map's shadow; returns (p, s1 of p[0], s2 of p[:, 0] ... as the lattice origins). ``compiled``:
    the compiled kernels (mu float32 C-contiguous), else the same sums with map_coordinates."""
    c1, c2, ct = corners @ e1, corners @ e2, corners @ u
    lo1, lo2 = c1.min() - h, c2.min() - h
    n1 = int(np.ceil((c1.max() + h - lo1) / h)) + 1
    n2 = int(np.ceil((c2.max() + h - lo2) / h)) + 1
    n_t = max(1, int(np.ceil((ct.max() - ct.min()) / step)))
    dt = (ct.max() - ct.min()) / n_t
    if compiled:
        plane = dict(u=tuple(map(float, u)), e1=tuple(map(float, e1)), e2=tuple(map(float, e2)), lo1=float(lo1),
                     lo2=float(lo2), h=float(h), n1=n1, n2=n2, t0=float(ct.min()), dt=float(dt), n_t=n_t)
        if xp is np:
            from .. import _core

            return _core.direct_attenuation_projection_cpu(mu, g.voxel_size, **plane), lo1, lo2
        from .._backend import cuda_module

        p = xp.empty((n1, n2), dtype=xp.float64)
        cuda_module().direct_attenuation_projection_cuda(mu.data.ptr, *mu.shape, g.voxel_size, out=p.data.ptr,
                                                         stream=xp.cuda.get_current_stream().ptr, **plane)
        return p, lo1, lo2
    ts = ct.min() + (np.arange(n_t) + 0.5) * (ct.max() - ct.min()) / n_t       # midpoints
    s1 = lo1 + h * xp.arange(n1, dtype=xp.float64)
    s2 = lo2 + h * xp.arange(n2, dtype=xp.float64)
    S1, S2 = xp.meshgrid(s1, s2, indexing="ij")
    base = [S1 * e1[a] + S2 * e2[a] for a in range(3)]            # x, y, z of the plane points
    vz, vy, vx = g.voxel_size
    nz, ny, nx = g.shape
    p = xp.zeros((n1, n2), dtype=xp.float64)
    for c0 in range(0, n_t, chunk):
        tc = xp.asarray(ts[c0:c0 + chunk], dtype=xp.float64)[:, None, None]
        ix = (base[0][None] + tc * u[0]) / vx + (nx - 1) / 2
        iy = (base[1][None] + tc * u[1]) / vy + (ny - 1) / 2
        iz = (base[2][None] + tc * u[2]) / vz + (nz - 1) / 2
        vals = _linear_or_zero(nd, mu, [iz.ravel(), iy.ravel(), ix.ravel()], xp)
        p += vals.reshape(tc.shape[0], n1, n2).sum(axis=0) * dt
    return p, lo1, lo2


__all__ = ["attenuation_histo_images"]
