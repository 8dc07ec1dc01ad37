"""DIRECT histo-images from events: deposition, correction histo-images, simulation (:ref:`conventions-direct`, :ref:`physics-direct`).

* :func:`deposit` canonicalises each event's direction, bins it into a view and adds it at its
  most likely point (MLP) ``r_hat = m + (c/2) dt u12`` into that view's histo-image.
* :func:`sensitivity_attenuation` computes the multiplicative correction histo-images
  ``f_v = n_v * a_v`` (the sensitivity s_v of [HA]) of the model ``ybar_v = f_v * H_v x + b_v`` for
  a cylindrical scanner and a water-cylinder phantom; :func:`randoms_background` the shape of
  uniform randoms.
* :func:`simulate_histo_images` streams simulated events into histo-images and returns them with
  their corrections as a :class:`~directpet.direct.data.HistoImageData`.

All array work is written against the namespace ``xp`` of the inputs (NumPy or CuPy).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Optional

import numpy as np

from .._backend import cuda_loaded
from .._checks import array_module, expect_instance, flag, positive_int, real_number, real_values
from ..geometry import ImageGrid
from ..recon.problem import check_nonnegative
from ..sim.lines import chord_length, cylinder_interval
from ..sim.phantoms import AnalyticPhantom, PhantomInfo, WaterCylinder
from ..sim.random import make_rng, seed_from_rng
from ._validate import check_weights, event_count
from .data import HistoImageData, require_stack_memory
from .geometry import CylindricalScanner, ViewSet, bin_canonical, sub_samples
from .model import SRKernel
from .monte_carlo import EventBatch, check_randoms_fraction


# --- view binning and deposition ----------------------------------------------------------------------

def bin_views(p1, p2, viewset: ViewSet, xp=None):
    """View index of the LORs p1 -> p2 ((n, 3) (x, y, z) mm) and whether they were flipped.

    :func:`~directpet.direct.geometry.bin_canonical` of the direction ``u = p2 - p1``: it is negated
    (p1, p2 swapped, dt negated) when its azimuth is outside [0, pi), and ``u`` and ``-u`` get the
    same view exactly; tilts outside +-theta_max get view -1. Returns ``(view (n,) int64, flipped (n,) bool)``.
    p1 and p2 must hold real, finite numbers (a NaN endpoint is corrupt data, not an LOR outside
    the views): else an error naming the argument.
    """
    expect_instance(viewset, ViewSet, "viewset")
    xp = array_module(p1) if xp is None else xp
    p1, p2 = real_values("p1", p1, xp), real_values("p2", p2, xp)
    for name, p in (("p1", p1), ("p2", p2)):
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f"{name}: expected an (n, 3) array of (x, y, z) points, got shape {tuple(p.shape)}")
    if p1.shape != p2.shape:
        raise ValueError(f"p2: has {p2.shape[0]} points but p1 has {p1.shape[0]}; one pair per LOR")
    return bin_canonical(p2.astype(xp.float64) - p1.astype(xp.float64), viewset, xp)


@dataclass
class DepositStats:
    """Book-keeping of :func:`deposit` (counts of events)."""

    n_events: int = 0          # events seen
    n_deposited: int = 0       # events that landed in the grid within a view (nearest mode)
    n_randoms_deposited: int = 0
    n_outside_views: int = 0   # tilt outside the view acceptance
    n_outside_grid: int = 0    # MLP outside the image grid
    n_in_band: int = 0         # sum of EventBatch.n_in_band (decays drawn in the tilt band)

    def add(self, other: "DepositStats"):
        """Add ``other``'s counts to these (in place)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def deposit(events, grid: ImageGrid, viewset: ViewSet, *, out=None, mode: str = "nearest", xp=None,
            return_stats: bool = False):
    """Deposit events into per-view histo-images ``(n_views, nz, ny, nx)`` float32.

    Parameters
    ----------
    events : an :class:`~directpet.direct.monte_carlo.EventBatch` or an iterable of them (a generator
        from :func:`~directpet.direct.monte_carlo.simulate_events` streams without keeping the events).
    grid, viewset : the histo-image lattice and the views.
    out : optional existing histo-image array to add into (accumulation over calls).
    mode : ``'nearest'`` adds 1 to the voxel containing the MLP (default, as in [HA]);
        ``'trilinear'`` splits it over the 8 neighbouring voxel centres (weights outside the grid
        are lost).
    xp : array namespace; default that of ``out`` or of the first batch.
    return_stats : also return a :class:`DepositStats`.

    Events whose tilt is outside the view acceptance (or whose endpoints coincide, so that the LOR
    has no direction), or whose MLP falls outside the grid, are dropped and counted in the stats.
    An event with a NaN or infinite position or time difference is corrupt data: a ValueError
    naming ``events`` (nothing is dropped silently); each batch is checked before it is deposited, so
    when a later batch of a stream is refused, a caller's ``out`` holds the batches before it. A batch
    with ``weights`` deposits each event's
    weight instead of 1 (an external scatter estimate as weighted list-mode events becomes the
    scatter background this way). The scatter-add runs on flattened indices (``numpy.add.at`` /
    ``cupyx.scatter_add``).
    """
    if mode not in ("nearest", "trilinear"):
        raise ValueError(f"mode: expected 'nearest' or 'trilinear', got {mode!r}")
    return_stats = flag("return_stats", return_stats)
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    batches = _batches(events)
    shape = (len(viewset),) + grid.shape
    if out is None:
        require_stack_memory("grid", len(viewset), grid)
    else:
        # counts are added into out: a NaN or a negative count there would pass into the result
        xp = array_module(out) if xp is None else xp
        check_nonnegative(out, "out", None, xp, shape)
    stats = DepositStats()
    for batch in batches:
        if not isinstance(batch, EventBatch):
            raise TypeError(f"events: expected EventBatch items, got {type(batch).__name__}")
        if out is None:
            xp = array_module(batch.dt_ps) if xp is None else xp
            out = xp.zeros(shape, dtype=xp.float32)
        stats.add(_deposit_batch(batch, grid, viewset, out, mode, xp))
    if out is None:                                  # no events at all
        xp = np if xp is None else xp
        out = xp.zeros(shape, dtype=xp.float32)
    return (out, stats) if return_stats else out


def _batches(events):
    """One EventBatch as a list of one; any other iterable as it is (checked item by item)."""
    if isinstance(events, EventBatch):
        return [events]
    try:
        return iter(events)
    except TypeError:
        raise TypeError(f"events: expected an EventBatch or an iterable of them, got {type(events).__name__}") from None


def _deposit_batch(batch, grid, viewset, out, mode, xp) -> DepositStats:
    n = len(batch)
    st = DepositStats(n_events=n, n_in_band=int(getattr(batch, "n_in_band", 0)))
    if n == 0:
        return st
    finite = xp.isfinite(batch.p1).all(axis=1) & xp.isfinite(batch.p2).all(axis=1) & xp.isfinite(batch.dt_ps)
    n_bad = n - int(finite.sum())
    if n_bad:
        first = int(xp.flatnonzero(~finite)[0])
        raise ValueError(f"events: {n_bad} of {n} events have NaN or infinite positions or time differences "
                         f"(first at index {first} of its batch): corrupt data")
    weights = batch.weights
    if weights is not None:            # checked again: a batch's weights may be set after it was made
        check_weights(weights, n, xp)
        weights = weights.astype(xp.float32)
    view, _ = bin_canonical(batch.p2.astype(xp.float64) - batch.p1.astype(xp.float64), viewset, xp)
    r = batch.most_likely_points()                     # (n, 3) (x, y, z) mm, float64
    in_view = view >= 0
    st.n_outside_views = int(n - int(in_view.sum()))
    flat_out = out.reshape(-1)
    nz, ny, nx = grid.shape
    vz, vy, vx = grid.voxel_size
    # Continuous voxel coordinates f = c / v + (n - 1) / 2: voxel i has its centre at f = i.
    fx = r[:, 0] / vx + 0.5 * (nx - 1)
    fy = r[:, 1] / vy + 0.5 * (ny - 1)
    fz = r[:, 2] / vz + 0.5 * (nz - 1)
    if mode == "nearest":
        # floor(f + 1/2) is ImageGrid.index_of: the voxel whose box contains the point.
        ix, iy, iz = (xp.floor(f + 0.5).astype(xp.int64) for f in (fx, fy, fz))
        inside = (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny) & (iz >= 0) & (iz < nz)
        ok = in_view & inside
        st.n_outside_grid = int(int(in_view.sum()) - int(ok.sum()))
        st.n_deposited = int(ok.sum())
        if batch.is_random is not None:
            st.n_randoms_deposited = int((ok & batch.is_random).sum())
        idx = ((view[ok] * nz + iz[ok]) * ny + iy[ok]) * nx + ix[ok]
        _scatter_add(flat_out, idx, None if weights is None else weights[ok], xp)
        return st
    x0, y0, z0 = (xp.floor(f).astype(xp.int64) for f in (fx, fy, fz))
    wx1, wy1, wz1 = fx - x0, fy - y0, fz - z0
    deposited = xp.zeros(n)
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                ix, iy, iz = x0 + dx, y0 + dy, z0 + dz
                w = ((wx1 if dx else 1 - wx1) * (wy1 if dy else 1 - wy1) * (wz1 if dz else 1 - wz1))
                ok = in_view & (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny) & (iz >= 0) & (iz < nz)
                idx = ((view[ok] * nz + iz[ok]) * ny + iy[ok]) * nx + ix[ok]
                wk = w[ok] if weights is None else w[ok] * weights[ok]
                _scatter_add(flat_out, idx, wk.astype(xp.float32), xp)
                deposited = deposited + xp.where(ok, w, 0.0)
    st.n_deposited = int(round(float(deposited.sum())))
    st.n_outside_grid = int(int(in_view.sum()) - int((in_view & (deposited > 0)).sum()))
    if batch.is_random is not None:
        st.n_randoms_deposited = int(round(float(xp.where(batch.is_random, deposited, 0.0).sum())))
    return st


def _scatter_add(flat_out, idx, weights, xp):
    """flat_out[idx] += weights (1 when None), with repeated indices accumulated."""
    if idx.size == 0:
        return
    w = xp.ones(idx.shape, dtype=xp.float32) if weights is None else weights
    xp.add.at(flat_out, idx, w)  # numpy.add.at / cupy.add.at: unbuffered, repeats accumulate


# --- correction histo-images ---------------------------------------------------------------------------

def _grid_coords(grid: ImageGrid, xp):
    z = xp.asarray(grid.centres(0))[:, None, None]
    y = xp.asarray(grid.centres(1))[None, :, None]
    x = xp.asarray(grid.centres(2))[None, None, :]
    return x, y, z


def _tilt_window(x, y, z, phi, scanner: CylindricalScanner, xp):
    """Tilts [th_lo, th_hi] (radians) of the accepted LORs through r with azimuth phi.

    With in-plane distances rho+ / rho- from (x, y) to the detector circle along +-(cos phi, sin phi),
    the two photons reach the surface at heights ``z + rho+ tan(theta)`` and ``z - rho- tan(theta)``;
    both must lie in [-h, h], an interval in tan(theta). Empty where th_hi <= th_lo.
    """
    c, s = xp.asarray(np.cos(phi)), xp.asarray(np.sin(phi))
    t0, t1 = cylinder_interval(x, y, 0.0, c, s, xp.asarray(0.0), scanner.radius_mm, None, xp)
    rho_p, rho_m = t1, -t0                                 # > 0 for points inside the detector
    h = scanner.half_length_mm
    tan_lo = xp.maximum((-h - z) / rho_p, (z - h) / rho_m)
    tan_hi = xp.minimum((h - z) / rho_p, (z + h) / rho_m)
    return xp.arctan(tan_lo), xp.arctan(tan_hi)


def _cell_samples(viewset: ViewSet, v: int, n_phi_sub: int):
    """View v's cell as _cell_integral samples it: (azimuth step, the n_phi_sub midpoint azimuths, the
    cell's tilt edges), radians."""
    k, l = divmod(v, viewset.n_theta)
    pe, te = viewset.phi_edges, viewset.theta_edges
    dphi = (pe[k + 1] - pe[k]) / n_phi_sub
    return dphi, pe[k] + (np.arange(n_phi_sub) + 0.5) * dphi, te[l], te[l + 1]


def _cell_integral(x, y, z, viewset: ViewSet, v: int, scanner, n_phi_sub: int, xp, antiderivative,
                   phi_weight=None):
    """``int_cell accepted(r, u) g(theta) [w(r, phi)] dphi dtheta`` for view v's direction cell.

    The tilt integral is exact: accepted tilts form one interval per azimuth (:func:`_tilt_window`),
    and ``antiderivative(theta)`` is a primitive of g (sin for the solid angle cos(theta) dtheta).
    The azimuth integral is a midpoint rule with ``n_phi_sub`` points (the acceptance varies
    slowly with azimuth).
    """
    dphi, phis, theta_lo, theta_hi = _cell_samples(viewset, v, n_phi_sub)
    acc = xp.zeros(np.broadcast_shapes(x.shape, y.shape, z.shape))
    for phi in phis:
        th_lo, th_hi = _tilt_window(x, y, z, phi, scanner, xp)
        lo = xp.maximum(th_lo, theta_lo)
        hi = xp.minimum(th_hi, theta_hi)
        term = xp.where(hi > lo, antiderivative(hi) - antiderivative(lo), 0.0) * dphi
        if phi_weight is not None:
            term = term * phi_weight(phi)
        acc = acc + term
    return acc


def _check_geometry(grid, viewset, scanner) -> CylindricalScanner:
    """grid, viewset and scanner (None: the default scanner) of the correction histo-images."""
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    return CylindricalScanner() if scanner is None else expect_instance(scanner, CylindricalScanner, "scanner")


def sensitivity_attenuation(grid: ImageGrid, viewset: ViewSet, phantom_info=None,
                            scanner: Optional[CylindricalScanner] = None, *, n_quad: int = 4, xp=np,
                            attenuation=None, engine: str = "compiled"):
    """Per-view sensitivity-times-attenuation histo-images ``s_v = n_v * a_v`` (:ref:`physics-direct`).

    Parameters
    ----------
    grid, viewset : lattice and views.
    phantom_info : a :class:`~directpet.sim.phantoms.PhantomInfo` whose water cylinder gives the
        attenuation (None, or a phantom without one: a_v = 1).
    scanner : the :class:`CylindricalScanner` (default: the default scanner).
    n_quad : azimuth sub-samples per view cell for n_v, 1 to 1024 (the tilt integral is exact).
    xp : array namespace of the result (NumPy or CuPy).
    attenuation : optional :class:`~directpet.sim.phantoms.WaterCylinder` overriding the phantom's.
    engine : 'compiled' (default): without attenuation, n_v in one compiled pass per view on the CPU
        or the GPU (csrc/direct/corrections.hpp, the same arithmetic); 'python': the array code per
        azimuth sample (the reference, and the path with a water cylinder).

    Returns
    -------
    (n_views, nz, ny, nx) float32.

    Notes
    -----
    The approximations made:

    * ``a_v(r) = exp(-mu * chord)`` along the view's *representative* direction u_v through the
      voxel centre (analytic chord through the finite water cylinder), as in DIRECT, which ignores
      the spread of directions inside a view. At the centre of a 350 mm cylinder and tilt theta_v
      this is ``exp(-mu * 350 / cos(theta_v))``.
    * ``n_v(r)`` is the solid angle of the directions of the view's cell whose LOR through the
      voxel centre is accepted (both ends on the detector cylinder within its axial extent; the
      tilt limits are exact, the azimuth is sampled at ``n_quad`` midpoints), divided by the solid
      angle of the largest cell. A voxel near the centre, which sees every direction of a cell, has
      ``n_v = Omega_v / max Omega`` (1 for the central tilt bin). Detector efficiencies, gaps,
      depth of interaction and the voxel's extent are not modelled. Without attenuation this is
      the relative acceptance of :func:`~directpet.direct.monte_carlo.simulate_events` for an
      annihilation at the voxel centre.
    """
    scanner = _check_geometry(grid, viewset, scanner)
    if phantom_info is not None and not isinstance(phantom_info, (PhantomInfo, AnalyticPhantom)):
        raise TypeError(f"phantom_info: expected a PhantomInfo, an AnalyticPhantom or None, got "
                        f"{type(phantom_info).__name__}")
    if attenuation is not None:
        expect_instance(attenuation, WaterCylinder, "attenuation")
    water = attenuation
    if water is None and phantom_info is not None:
        water = phantom_info.attenuation
    n_quad = sub_samples("n_quad", n_quad)
    if engine not in ("compiled", "python"):
        raise ValueError(f"engine: expected 'compiled' or 'python', got {engine!r}")
    require_stack_memory("grid", len(viewset), grid)
    te, pe = viewset.theta_edges, viewset.phi_edges
    omega_max = float(np.max(np.diff(pe)) * np.max(np.sin(te[1:]) - np.sin(te[:-1])))
    if not omega_max > 0:
        raise ValueError(f"viewset: its view cells span no tilt (theta_max_deg = {viewset.theta_max_deg}), so they have "
                         "no solid angle to normalise by; give views with theta_max_deg > 0")
    attenuated = water is not None and water.mu_per_mm > 0
    if engine == "compiled" and not attenuated and (xp is np or cuda_loaded()):
        return _compiled_acceptance(grid, viewset, scanner, n_quad, omega_max, xp)
    x, y, z = _grid_coords(grid, xp)
    out = xp.zeros((len(viewset),) + grid.shape, dtype=xp.float32)
    for v, view in enumerate(viewset):
        nv = _cell_integral(x, y, z, viewset, v, scanner, n_quad, xp, xp.sin) / omega_max
        if water is not None and water.mu_per_mm > 0:
            u = view.direction
            chord = chord_length(x, y, z, *(xp.asarray(c) for c in u), water.radius_mm,
                                 0.5 * water.length_mm, xp)
            nv = nv * xp.exp(-water.mu_per_mm * chord)
        out[v] = nv
    return out


def _compiled_acceptance(grid: ImageGrid, viewset: ViewSet, scanner: CylindricalScanner, n_quad: int,
                         omega_max: float, xp):
    """n_v of every view in one compiled pass per view (csrc/direct/corrections.hpp): the azimuth samples
    of _cell_integral, their cos and sin as _tilt_window takes them, the cells' tilt edges."""
    cells = np.empty((len(viewset), 3))
    cos_sin = np.empty((len(viewset), n_quad, 2))
    for v in range(len(viewset)):
        dphi, phis, theta_lo, theta_hi = _cell_samples(viewset, v, n_quad)
        cells[v] = dphi, theta_lo, theta_hi
        cos_sin[v] = [(np.cos(phi), np.sin(phi)) for phi in phis]     # as _tilt_window takes them
    zs, ys, xs = (np.ascontiguousarray(grid.centres(a), dtype=np.float64) for a in range(3))
    ring = (float(scanner.radius_mm), float(scanner.half_length_mm), float(scanner.axial_length_mm))
    out = xp.empty((len(viewset),) + grid.shape, dtype=xp.float32)
    if xp is np:
        from .._core import direct_acceptance_cpu

        direct_acceptance_cpu(ring, cells, cos_sin, omega_max, zs, ys, xs, out)
        return out
    from .._backend import cuda_module

    d_cos_sin, d_zs, d_ys, d_xs = (xp.asarray(a) for a in (cos_sin, zs, ys, xs))
    cuda_module().direct_acceptance_cuda(ring, cells, d_cos_sin.data.ptr, n_quad, omega_max, d_zs.data.ptr, zs.size,
                                         d_ys.data.ptr, ys.size, d_xs.data.ptr, xs.size, out.data.ptr)
    return out


def randoms_from_delayeds(delayeds, grid: ImageGrid, viewset: ViewSet, *, smooth_fwhm_mm=None, scale: float = 1.0,
                          xp=None):
    """The randoms background ``b_v`` (n_views, nz, ny, nx) float32 estimated from delayed coincidences.

    Delayed events (an :class:`~directpet.direct.monte_carlo.EventBatch` or an iterable of them, e.g. a
    scanner's delayed-window list-mode stream) are deposited like prompts (their time differences
    carry no position, so their most-likely points spread along each LOR's in-FOV segment as the
    randoms do), then smoothed and scaled by :func:`smooth_randoms` (``smooth_fwhm_mm``, ``scale``).
    """
    scale = real_number("scale", scale, nonnegative=True)
    expect_instance(grid, ImageGrid, "grid")
    if smooth_fwhm_mm is not None:
        _smoothing_fwhm(smooth_fwhm_mm, grid)      # checked before the events are read
    return smooth_randoms(deposit(delayeds, grid, viewset, xp=xp), grid, smooth_fwhm_mm=smooth_fwhm_mm, scale=scale)


def smooth_randoms(deposited, grid: ImageGrid, *, smooth_fwhm_mm=None, scale: float = 1.0):
    """The randoms background ``b_v`` (n_views, nz, ny, nx) float32 from deposited delayeds (histo-images
    of the delayed coincidences on ``grid``, NumPy or CuPy, e.g. from
    :func:`~directpet.direct.petsird.deposit_prompts_and_delayeds`).

    ``smooth_fwhm_mm`` (a scalar or (z, y, x) in mm; None: no smoothing) smooths every view with a
    Gaussian (``scipy.ndimage`` / ``cupyx.scipy.ndimage``, reflecting edges) to cut the Poisson
    noise of the estimate, each view rescaled to keep its deposited count. ``scale`` converts the
    delayed window to the prompt window (1 for equal windows). A new array; ``deposited`` is kept.
    """
    scale = real_number("scale", scale, nonnegative=True)
    expect_instance(grid, ImageGrid, "grid")
    fwhm = None if smooth_fwhm_mm is None else _smoothing_fwhm(smooth_fwhm_mm, grid)
    xp = array_module(deposited)
    b = check_nonnegative(deposited, "deposited", None, xp, None)
    if b.ndim != 4 or tuple(b.shape[1:]) != grid.shape:
        raise ValueError(f"deposited: expected histo-images (n_views,) + {grid.shape}, got shape {tuple(b.shape)}")
    if fwhm is None:
        b = b.copy()
    else:
        sigma = (0.0,) + tuple(fwhm / np.sqrt(8 * np.log(2)) / np.asarray(grid.voxel_size))
        if xp is np:
            from scipy.ndimage import gaussian_filter
        else:
            from cupyx.scipy.ndimage import gaussian_filter   # present: the events are CuPy
        before = b.sum(axis=(1, 2, 3), dtype=xp.float64)
        b = gaussian_filter(b, sigma=sigma, mode="reflect")
        after = b.sum(axis=(1, 2, 3), dtype=xp.float64)
        b *= xp.where(after > 0, before / xp.where(after > 0, after, 1.0), 0.0).astype(xp.float32)[:, None, None, None]
    if scale != 1.0:
        peak = float(b.max()) if b.size else 0.0
        if peak * scale > _FLOAT32_MAX:
            raise ValueError(f"scale: {scale:g} x the largest estimated randoms value {peak:g} overflows float32 "
                             "histo-images")
        b *= np.float32(scale)
    return b.astype(xp.float32, copy=False)


#: The largest finite float32: histo-images hold float32 counts.
_FLOAT32_MAX = float(np.finfo(np.float32).max)

#: A smoothing FWHM beyond this many times the grid's largest extent flattens the estimate along
#: every axis already; larger ones only cost (the filter grows with the FWHM).
_MAX_SMOOTHING_EXTENTS = 4.0


def _smoothing_fwhm(smooth_fwhm_mm, grid: ImageGrid) -> np.ndarray:
    """The (z, y, x) smoothing FWHM (mm) of a scalar or a 3-vector: real, finite, >= 0 and at most
    a few times the grid's extent, else an error naming ``smooth_fwhm_mm``."""
    a = real_values("smooth_fwhm_mm", smooth_fwhm_mm, np).astype(np.float64)
    if a.shape not in ((), (1,), (3,)):
        raise ValueError(f"smooth_fwhm_mm: expected one FWHM or three (z, y, x) in mm, got shape {a.shape}")
    fwhm = np.broadcast_to(a, (3,))
    if np.any(fwhm < 0):
        raise ValueError(f"smooth_fwhm_mm: expected FWHM >= 0 in mm, got {smooth_fwhm_mm!r}")
    bound = _MAX_SMOOTHING_EXTENTS * max(n * v for n, v in zip(grid.shape, grid.voxel_size))
    if np.any(fwhm > bound):
        raise ValueError(f"smooth_fwhm_mm: expected at most {bound:g} mm ({_MAX_SMOOTHING_EXTENTS:g} x the grid's "
                         f"largest extent; the estimate is flat long before), got {smooth_fwhm_mm!r}")
    return fwhm


def randoms_background(grid: ImageGrid, viewset: ViewSet, scanner: Optional[CylindricalScanner] = None, *,
                       total: float = 1.0, n_quad: int = 4, xp=np):
    """Expected deposited uniform randoms (n_views, nz, ny, nx) float32, summing to ``total``.

    Matches :func:`~directpet.direct.monte_carlo.simulate_randoms`: endpoints uniform on the detector
    surface give a density of lines (per solid angle and perpendicular area) proportional to
    ``|p1 - p2|^2 / (cos a1 cos a2) = 4 R^2 / cos(theta)^4``, independent of the LOR's transaxial
    distance s. Each random is spread uniformly along its in-FOV length
    ``2 sqrt(R_fov^2 - s^2) / cos(theta)``. Per unit volume and solid angle therefore
    ``b(r, u) ~ accepted(r, u) / (cos(theta)^3 sqrt(R_fov^2 - s^2))`` inside the FOV cylinder; with
    ``dOmega = cos(theta) dtheta dphi`` the tilt integral of ``1 / cos(theta)^2`` is exact (tan).
    Scale with the number of randoms deposited in the grid (``total``).
    """
    scanner = _check_geometry(grid, viewset, scanner)
    total = real_number("total", total, nonnegative=True)
    if total > _FLOAT32_MAX:
        raise ValueError(f"total: expected at most {_FLOAT32_MAX:.4g} (float32 histo-images), got {total!r}")
    n_quad = sub_samples("n_quad", n_quad)
    require_stack_memory("grid", len(viewset), grid)
    x, y, z = _grid_coords(grid, xp)
    rf = scanner.fov_radius_mm
    in_fov = (x * x + y * y) < rf * rf

    def weight(phi):
        s = -x * np.sin(phi) + y * np.cos(phi)
        return xp.where(in_fov, 1.0 / xp.sqrt(xp.maximum(rf * rf - s * s, 1e-6)), 0.0)

    out = xp.zeros((len(viewset),) + grid.shape, dtype=xp.float32)
    for v in range(len(viewset)):
        out[v] = _cell_integral(x, y, z, viewset, v, scanner, n_quad, xp, xp.tan, weight)
    s = float(out.sum(dtype=xp.float64))
    if s > 0:                  # in two steps (values <= 1, then <= total): total / s may overflow float32
        out /= np.float32(s)
        out *= np.float32(total)
    return out


# --- simulation convenience ---------------------------------------------------------------------------------

def simulate_histo_images(scanner: CylindricalScanner, activity, n_events: int, *, grid: ImageGrid,
                          viewset: ViewSet, seed=None, kernel: Optional[SRKernel] = None,
                          randoms_fraction: float = 0.0, with_corrections: bool = True, mode: str = "nearest",
                          n_quad: int = 4, chunk_size: int = 10_000_000, xp=np, progress: bool = True,
                          engine: str = "auto", threads: Optional[int] = None,
                          **event_kw) -> HistoImageData:
    """Simulate the prompts of ``activity`` (a PhantomInfo or AnalyticPhantom) in ``scanner`` and
    deposit them into the histo-images of ``grid`` and ``viewset`` (:ref:`physics-data`).

    ``n_events`` prompts (trues + randoms) are deposited. ``seed``: int, Generator or None (fresh
    entropy). With ``with_corrections`` the data carry :func:`sensitivity_attenuation` as
    ``factors`` and, when there are randoms, :func:`randoms_background` scaled to the number of
    randoms deposited in the grid as ``background``. ``meta`` records the counts
    (:class:`DepositStats`), the engine and the seed.

    engine : ``'compiled'`` simulates the trues with the fused C++/CUDA path
        (:func:`~directpet.direct.monte_carlo.simulate`; CPU for NumPy ``xp``, CUDA for CuPy);
        ``'python'`` streams :func:`~directpet.direct.monte_carlo.simulate_events` chunks (extra keywords
        go there) through :func:`deposit`; ``'auto'`` (default) is ``'compiled'`` whenever it
        applies (``mode='nearest'``, event keywords among ``attenuation``, ``blur``, ``tof``, and
        for CuPy a compiled CUDA backend with a usable GPU), else ``'python'``. With randoms, the
        compiled engine splits the prompts into Binomial(n_events, randoms_fraction) randoms, drawn
        and deposited by the Python path, and the rest trues. The two engines agree in
        distribution, not event by event.

    threads : CPU threads of the compiled engine (None: OpenMP's default).
    """
    if engine not in ("auto", "compiled", "python"):
        raise ValueError(f"engine: expected 'auto', 'compiled' or 'python', got {engine!r}")
    expect_instance(scanner, CylindricalScanner, "scanner")
    _check_geometry(grid, viewset, scanner)
    if kernel is not None:
        expect_instance(kernel, SRKernel, "kernel")
    randoms_fraction = check_randoms_fraction(randoms_fraction)
    # checked before simulating: the corrections are computed after the (long) simulation
    n_events, n_quad = event_count("n_events", n_events), sub_samples("n_quad", n_quad)
    with_corrections, progress = flag("with_corrections", with_corrections), flag("progress", progress)
    why_not = _compiled_unsupported(mode, xp, event_kw)
    if engine == "compiled" and why_not:
        raise ValueError(f"engine: 'compiled' cannot run this simulation ({why_not}); use engine='python'")
    if engine == "auto":
        engine = "python" if why_not else "compiled"
    if engine == "compiled":
        prompts, stats, seed = _simulate_compiled(scanner, activity, grid, viewset, n_events, randoms_fraction,
                                                  chunk_size, seed, xp, progress, threads, event_kw)
    else:
        from .monte_carlo import simulate_events

        stream = simulate_events(scanner, activity, n_events, seed=seed, chunk_size=chunk_size,
                                 randoms_fraction=randoms_fraction, xp=xp, progress=progress, **event_kw)
        prompts, stats = deposit(stream, grid, viewset, mode=mode, xp=xp, return_stats=True)
        seed = seed if isinstance(seed, (int, np.integer)) else None      # recorded in meta when an int
    factors = bg = None
    if with_corrections:
        factors = sensitivity_attenuation(grid, viewset, activity, scanner, n_quad=n_quad, xp=xp)
        if stats.n_randoms_deposited > 0:
            bg = randoms_background(grid, viewset, scanner, total=stats.n_randoms_deposited,
                                    n_quad=n_quad, xp=xp)
    kernel = scanner.kernel() if kernel is None else kernel
    meta = {"source": "simulate_histo_images", "n_prompts": int(n_events),
            "randoms_fraction": float(randoms_fraction), "deposit_mode": mode, "engine": engine,
            "seed": None if seed is None else int(seed), **asdict(stats)}
    return HistoImageData(prompts, grid, viewset, factors, bg, kernel, scanner, meta)


_COMPILED_EVENT_KEYWORDS = ("attenuation", "blur", "tof")


def _compiled_unsupported(mode, xp, event_kw) -> str:
    """Why the compiled engine cannot run these options ('' when it can)."""
    if mode != "nearest":
        return f"mode={mode!r}; it deposits nearest-voxel only"
    extra = sorted(k for k in event_kw if k not in _COMPILED_EVENT_KEYWORDS)
    if extra:
        return f"event keywords {extra}; it takes only {list(_COMPILED_EVENT_KEYWORDS)}"
    if xp is not np:
        from .._backend import cuda_device_count, has_cuda

        if not (has_cuda() and cuda_device_count() > 0):
            return "a GPU array namespace but no usable compiled CUDA backend"
    return ""


def _simulate_compiled(scanner, activity, grid, viewset, n_events, randoms_fraction, chunk_size, seed, xp,
                       progress, threads, event_kw):
    """Trues by the compiled fused path, randoms (if any) by the Python path. -> (prompts, stats, seed)."""
    from .monte_carlo import simulate, simulate_randoms

    n_events = event_count("n_events", n_events)
    chunk_size = positive_int("chunk_size", chunk_size)
    randoms_fraction = check_randoms_fraction(randoms_fraction)
    seed = seed_from_rng(seed, "seed")
    # Each prompt is a random with probability randoms_fraction, independently (what the Python
    # engine's per-chunk Poisson randoms and random truncation amount to).
    host = np.random.default_rng([seed, 1])
    n_randoms = int(host.binomial(n_events, randoms_fraction)) if randoms_fraction > 0 else 0
    n_trues = n_events - n_randoms
    shape = (len(viewset),) + grid.shape
    stats = DepositStats(n_events=n_events)
    if n_trues > 0:
        prompts, st = simulate(scanner, activity, n_trues=n_trues, seed=seed, backend="cpu" if xp is np else "cuda",
                               progress=progress, grid=grid, viewset=viewset, threads=threads, **event_kw)
        if xp is not np and isinstance(prompts, np.ndarray):      # CUDA backend without CuPy output
            prompts = xp.asarray(prompts)
        stats.n_deposited, stats.n_in_band = st.n_deposited, st.n_in_band
        stats.n_outside_views, stats.n_outside_grid = st.n_outside_views, st.n_outside_grid
    else:
        prompts = xp.zeros(shape, dtype=xp.float32)
    gen = make_rng(np.random.default_rng([seed, 2]), xp)

    def randoms():                               # in chunks, deposited into the same prompts
        for done in range(0, n_randoms, chunk_size):
            yield simulate_randoms(scanner, min(chunk_size, n_randoms - done), seed=gen, xp=xp)

    if n_randoms:
        _, st = deposit(randoms(), grid, viewset, out=prompts, xp=xp, return_stats=True)
        st.n_events = 0                          # already counted as prompts
        stats.add(st)
    return prompts, stats, seed


__all__ = ["DepositStats", "bin_views", "deposit", "randoms_background", "sensitivity_attenuation",
           "simulate_histo_images"]
