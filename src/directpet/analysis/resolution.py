"""Spatial resolution: NEMA-style FWHM of point sources and peak-to-valley ratios of Derenzo rods.

Family-independent: images are ``(nz, ny, nx)`` arrays on an :class:`~directpet.geometry.ImageGrid`
(NumPy or CuPy; they are copied to the host), z the scanner axis, points ``(x, y, z)`` mm.

* :func:`fwhm_1d` -- width of a sampled 1D response as in NEMA NU 4: the maximum from a parabola
  through the largest sample and its two neighbours, then linear interpolation between the
  samples bracketing half (a tenth) of that maximum, walking outwards from the peak on each side.
* :func:`point_source_fwhm` -- radial, tangential and axial FWHM / FWTM of a point source, from
  profiles through its located peak.
* :func:`rod_profiles`, :func:`peak_to_valley` -- profiles along a row of rods of each Derenzo group
  (:func:`directpet.sim.derenzo.derenzo_phantom`) and their peak-to-valley ratios.

Profiles are read from the image by linear interpolation (``scipy.ndimage.map_coordinates``,
order 1, ``mode='nearest'`` so that a profile leaving the image is not cut to zero, which would
fake a fall below half maximum).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .._checks import expect_attributes, integer, real_number, require_memory
from ..geometry import ImageGrid
from ..sim.phantoms import check_point
from .metrics import _image

AXIS_NAMES = ("radial", "tangential", "axial")
_POINT_AXIS = {"x": 0, "y": 1, "z": 2}
_GRID_AXIS = {"z": 0, "y": 1, "x": 2}


# --- 1D widths ---------------------------------------------------------------------------------------

def _parabolic_peak(p: np.ndarray, i: int) -> Tuple[float, float]:
    """Vertex (offset from i in samples, value) of the parabola through p[i-1], p[i], p[i+1]."""
    a, b, c = p[i - 1], p[i], p[i + 1]
    curv = a - 2.0 * b + c
    if curv >= 0.0:              # flat top (a == b == c): no curvature, the sample is the peak
        return 0.0, float(b)
    offset = 0.5 * (a - c) / curv
    return float(offset), float(b - 0.25 * (a - c) * offset)


def fwhm_1d(profile, spacing_mm: float, *, fraction: float = 0.5) -> float:
    """Full width (mm) of a sampled peak at ``fraction`` of its maximum (0.5: FWHM, 0.1: FWTM).

    Parameters
    ----------
    profile : (n,) samples, n >= 3, one peak whose maximum is not at either end.
    spacing_mm : distance between samples (mm).
    fraction : the level, a fraction of the maximum in (0, 1).

    The maximum is the vertex of the parabola through the largest sample and its two neighbours
    (NEMA NU 4). On each side, walking outwards from the largest sample, the first sample below
    the level and its inner neighbour bracket the crossing, found by linear interpolation.

    Raises ``ValueError`` when the largest sample is at an end (the peak is not inside the
    profile), when the maximum is not positive, or when the profile never falls below the level
    on one side (widen the profile).
    """
    p = np.asarray(profile)
    if not (np.issubdtype(p.dtype, np.floating) or np.issubdtype(p.dtype, np.integer)):
        raise TypeError(f"profile: expected real samples, got dtype {p.dtype}")
    p = p.astype(np.float64)
    if p.ndim != 1 or p.shape[0] < 3:
        raise ValueError(f"profile: expected a 1D array of at least 3 samples, got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("profile: contains NaN or inf")
    spacing_mm = real_number("spacing_mm", spacing_mm, positive=True)
    fraction = real_number("fraction", fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction: expected a level in (0, 1), got {fraction!r}")
    n = p.shape[0]
    i = int(np.argmax(p))
    if i == 0 or i == n - 1:
        raise ValueError(f"profile: its maximum is at the edge (sample {i} of {n}); centre the profile "
                         "on the peak or widen it")
    _, peak = _parabolic_peak(p, i)
    if peak <= 0.0:
        raise ValueError(f"profile: expected a positive maximum, got {peak!r}")
    level = fraction * peak
    if p[i] < level:
        raise ValueError(f"fraction: {fraction!r} of the fitted maximum lies above every sample")
    left = np.flatnonzero(p[:i] < level)
    right = np.flatnonzero(p[i + 1:] < level)
    for side, found in (("left", left), ("right", right)):
        if found.size == 0:
            raise ValueError(f"profile: never falls below {fraction:g} of its maximum on the {side}; "
                             "widen the profile")
    jl = int(left[-1])                          # p[jl] < level <= p[jl + 1]
    xl = jl + (level - p[jl]) / (p[jl + 1] - p[jl])
    jr = i + 1 + int(right[0])                  # p[jr - 1] >= level > p[jr]
    xr = jr - 1 + (p[jr - 1] - level) / (p[jr - 1] - p[jr])
    return float((xr - xl) * spacing_mm)


# --- sampling helpers -----------------------------------------------------------------------------------

def _sample(img: np.ndarray, grid: ImageGrid, points_xyz: np.ndarray) -> np.ndarray:
    """Linear interpolation of the image at points (..., 3) (x, y, z) mm; shape (...)."""
    from scipy.ndimage import map_coordinates

    coords = []
    for name in "zyx":
        a = _GRID_AXIS[name]
        coords.append(points_xyz[..., _POINT_AXIS[name]] / grid.voxel_size[a] + 0.5 * (grid.shape[a] - 1))
    flat = [c.ravel() for c in coords]
    return map_coordinates(img, flat, order=1, mode="nearest").reshape(points_xyz.shape[:-1])


def _n_offsets(half_width_mm: float, step_mm: float) -> float:
    """How many samples _offsets gives, as a float (inf for absurd widths: checked before allocating)."""
    with np.errstate(over="ignore"):
        return 2.0 * np.floor(half_width_mm / step_mm + 1e-9) + 1.0


def _offsets(half_width_mm: float, step_mm: float) -> np.ndarray:
    m = int(_n_offsets(half_width_mm, step_mm) - 1) // 2
    return np.arange(-m, m + 1) * step_mm


# --- point sources ----------------------------------------------------------------------------------

def _locate_peak(img: np.ndarray, grid: ImageGrid, position: np.ndarray, search_mm: float) -> np.ndarray:
    """(x, y, z) mm of the largest voxel within +-search_mm of position, refined per axis by a parabola."""
    box, lo = [], []
    for name in "zyx":
        a = _GRID_AXIS[name]
        c = grid.centres(a)
        inside = np.flatnonzero(np.abs(c - position[_POINT_AXIS[name]]) <= search_mm + 1e-9)
        if inside.size == 0:
            raise ValueError(f"position_mm: {position.tolist()} has no voxel centre within search_mm="
                             f"{search_mm} mm along {name} (is it inside the image?)")
        box.append(slice(int(inside[0]), int(inside[-1]) + 1))
        lo.append(int(inside[0]))
    sub = img[tuple(box)]
    idx = np.unravel_index(int(np.argmax(sub)), sub.shape)
    peak = np.empty(3)
    for a, name in enumerate("zyx"):
        i = lo[a] + int(idx[a])
        frac = float(i)
        if 0 < i < grid.shape[a] - 1:
            line = [img[tuple(i + d if b == a else lo[b] + int(idx[b]) for b in range(3))] for d in (-1, 0, 1)]
            frac += float(np.clip(_parabolic_peak(np.asarray(line), 1)[0], -0.5, 0.5))
        peak[_POINT_AXIS[name]] = (frac - 0.5 * (grid.shape[a] - 1)) * grid.voxel_size[a]
    return peak


def _frame(position: np.ndarray) -> Dict[str, np.ndarray]:
    """Unit vectors (x, y, z): radial from the z axis through ``position`` (x at the axis),
    tangential (radial turned +90 degrees about z) and axial."""
    r = float(np.hypot(position[0], position[1]))
    er = np.array([1.0, 0.0, 0.0]) if r < 1e-6 else np.array([position[0] / r, position[1] / r, 0.0])
    return {"radial": er, "tangential": np.array([-er[1], er[0], 0.0]), "axial": np.array([0.0, 0.0, 1.0])}


def point_source_fwhm(image, grid: ImageGrid, position_mm, *, half_width_mm: float = 5.0,
                      axes: Sequence[str] = AXIS_NAMES, search_mm: float = 2.0, oversample: int = 1,
                      sum_halfwidth_mm: float = 0.0) -> dict:
    """FWHM and FWTM (mm) of a point source along the radial, tangential and axial directions.

    Parameters
    ----------
    image : (nz, ny, nx) reconstructed image (NumPy or CuPy).
    grid : its ImageGrid.
    position_mm : (x, y, z) mm, the nominal source position.
    half_width_mm : each profile runs +-half_width_mm about the peak (mm).
    axes : any of ``'radial'``, ``'tangential'``, ``'axial'``.
    search_mm : the peak is the largest voxel whose centre is within +-search_mm of
        ``position_mm`` along each axis, refined to sub-voxel precision by a parabola per axis.
    oversample : profiles are sampled every ``voxel / oversample``: the transaxial voxel
        ``min(vx, vy)`` for radial and tangential profiles, ``vz`` for the axial one. The default
        1 is NEMA's sampling at the voxel spacing.
    sum_halfwidth_mm : NEMA NU 4 forms the response from profiles summed over a few voxels
        perpendicular to the direction of measurement to reduce noise. Profiles parallel to the
        direction, offset by multiples of the sampling step up to +-sum_halfwidth_mm along both
        perpendicular directions of the (radial, tangential, axial) frame, are summed. The default
        0 takes the single line through the peak: for a noise-free or high-count image that is
        the least biased choice (summing widens a response that is not separable in this frame).

    Directions: radial is from the scanner axis z through the *nominal* position (x when the
    position is on the axis, within 1e-6 mm), tangential is radial turned +90 degrees about z,
    axial is z. Every profile passes through the located peak.

    Returns
    -------
    dict with ``'fwhm_mm'`` and ``'fwtm_mm'`` ({direction: mm}; an FWTM is NaN when the profile
    does not fall to a tenth of its peak within +-half_width_mm, e.g. over a background or a
    neighbouring source, while an FWHM that cannot be measured raises), ``'peak_mm'`` ((3,) located peak
    (x, y, z) mm), ``'directions'`` ({direction: (3,) unit vector}) and ``'profiles'``
    ({direction: (distance_mm from the peak (n,), values (n,))}), ``'voxel_mm'`` ({direction: the
    voxel size along it, mm: ``sqrt(sum_a (e_a v_a)**2)`` over the unit vector ``e`` and the voxel
    edges ``v``}) and ``'sampling_limited'`` ({direction: bool}): True when the FWHM is below two of
    those voxels, where a response narrower than the voxels measures about one to two voxels
    whatever its true width (a single hot voxel gives one voxel) -- such an FWHM is a bound set by
    the voxel size, not a resolution result (NEMA NU 2 / NU 4 ask for at least three
    samples across the FWHM).
    """
    img = _image(image, grid)
    pos = np.array(check_point("position_mm", position_mm))
    if isinstance(axes, (str, bytes)) or not hasattr(axes, "__iter__"):
        raise TypeError(f"axes: expected a sequence of names from {AXIS_NAMES}, got {type(axes).__name__}")
    axes = tuple(axes)
    bad = [a for a in axes if not isinstance(a, str) or a not in AXIS_NAMES]
    if bad or not axes:
        raise ValueError(f"axes: expected a non-empty subset of {AXIS_NAMES}, got {axes!r}")
    half_width_mm = real_number("half_width_mm", half_width_mm, positive=True)
    search_mm = real_number("search_mm", search_mm, positive=True)
    sum_halfwidth_mm = real_number("sum_halfwidth_mm", sum_halfwidth_mm, nonnegative=True)
    oversample = integer("oversample", oversample, lo=1)

    peak = _locate_peak(img, grid, pos, float(search_mm))
    frame = _frame(pos)
    step = {"radial": min(grid.voxel_size[1], grid.voxel_size[2]) / oversample,
            "tangential": min(grid.voxel_size[1], grid.voxel_size[2]) / oversample,
            "axial": grid.voxel_size[0] / oversample}
    # the voxel size along each direction, sqrt(sum_a (e_a v_a)^2): v_x for a profile along x on
    # voxels of vx != vy, v for any direction on isotropic voxels, in between for an oblique one
    sizes = np.array([grid.voxel_size[2], grid.voxel_size[1], grid.voxel_size[0]])         # x, y, z
    voxel = {k: float(np.sqrt(np.sum((frame[k] * sizes) ** 2))) for k in AXIS_NAMES}
    fwhm, fwtm, profiles = {}, {}, {}
    for name in axes:
        perp = [p for p in AXIS_NAMES if p != name]
        n_t = _n_offsets(float(half_width_mm), step[name])
        if n_t < 3:
            raise ValueError(f"half_width_mm: {half_width_mm!r} mm gives fewer than 3 samples at {step[name]:.3g} mm")
        n_pts = float(n_t) * _n_offsets(float(sum_halfwidth_mm), step[perp[0]]) \
            * _n_offsets(float(sum_halfwidth_mm), step[perp[1]])
        # the sample points (3 coordinates), their interpolation coordinates and values: ~100 bytes each
        require_memory("half_width_mm / sum_halfwidth_mm / oversample", 100.0 * n_pts,
                       f"the {name} profile of {n_pts:.3g} sample points")
        t = _offsets(float(half_width_mm), step[name])
        o1, o2 = (_offsets(float(sum_halfwidth_mm), step[p]) for p in perp)
        pts = (peak[None, None, None, :] + t[:, None, None, None] * frame[name]
               + o1[None, :, None, None] * frame[perp[0]] + o2[None, None, :, None] * frame[perp[1]])
        values = _sample(img, grid, pts).sum(axis=(1, 2))
        fwhm[name] = fwhm_1d(values, step[name], fraction=0.5)
        try:
            fwtm[name] = fwhm_1d(values, step[name], fraction=0.1)
        except ValueError:           # the tails do not reach a tenth within the profile
            fwtm[name] = float("nan")
        profiles[name] = (t, values)
    return {"fwhm_mm": fwhm, "fwtm_mm": fwtm, "peak_mm": peak,
            "directions": {k: frame[k] for k in axes}, "profiles": profiles,
            "voxel_mm": {k: voxel[k] for k in axes},
            "sampling_limited": {k: bool(fwhm[k] < 2.0 * voxel[k]) for k in axes}}


# --- Derenzo rods --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RodProfile:
    """Profile along a row of rods of one Derenzo group.

    Attributes
    ----------
    diameter_mm : rod diameter d (mm).
    distance_mm : (n,) positions along the profile line from its start (mm).
    values : (n,) image values there, averaged over the slices along the rod axis.
    rod_mm : (m,) positions of the profiled rods' centres along the line (mm).
    valley_mm : (m - 1,) midpoints between neighbouring rods along the line (mm).
    start_mm, end_mm : (3,) ends of the line (x, y, z) mm, at the phantom centre along the axis.
    slices : indices (along the rod axis's image axis) of the slices averaged.
    voxel_mm : the larger in-plane voxel size of the image (mm): the profile's sampling limit.
    """

    diameter_mm: float
    distance_mm: np.ndarray
    values: np.ndarray
    rod_mm: np.ndarray
    valley_mm: np.ndarray
    start_mm: np.ndarray
    end_mm: np.ndarray
    slices: np.ndarray
    voxel_mm: float = 0.0


@dataclass(frozen=True, eq=False)
class PeakToValley:
    """Peak-to-valley ratio of one Derenzo group.

    Attributes
    ----------
    diameter_mm : rod diameter (mm).
    peaks : (m,) profile maximum within +-window of each rod centre.
    valleys : (m - 1,) profile minimum within +-window of each midpoint between rods.
    mean_peak, mean_valley : their means.
    ratio : ``mean_peak / mean_valley``; ``inf`` when ``mean_valley <= 0 < mean_peak`` (perfect
        separation in a cold background) and ``nan`` when ``mean_peak <= 0``. ``mean_peak`` and
        ``mean_valley`` are kept so that a contrast (e.g. their difference) can be used instead.
    profile : the :class:`RodProfile` measured.
    pitch_mm : the distance between neighbouring rods along the profile (mm).
    sampled : whether the image's voxels can resolve the rods at all: the pitch is at least two
        in-plane voxels (the sampling theorem's limit). When it is not, the ratio measures how the
        rods alias onto the voxel lattice, not the resolution of the reconstruction, and
        :meth:`ratio_text` marks it with ``*``.
    """

    diameter_mm: float
    peaks: np.ndarray
    valleys: np.ndarray
    mean_peak: float
    mean_valley: float
    ratio: float
    profile: RodProfile
    pitch_mm: float = float("nan")
    sampled: bool = True

    def ratio_text(self) -> str:
        """The ratio for tables and legends: ``'inf'`` for perfect separation, else 2 decimals;
        followed by ``*`` when the voxels cannot sample the rods (see ``sampled``)."""
        text = "inf" if not np.isfinite(self.ratio) else f"{self.ratio:.2f}"
        return text if self.sampled else text + "*"


#: the footnote that explains a ``*`` of :meth:`PeakToValley.ratio_text` in tables and legends
UNDERSAMPLED_NOTE = ("* rods closer than two voxels along the profile: the voxels cannot resolve them, so the "
                     "ratio is an aliasing artefact, not a result")


def _central_slices(grid: ImageGrid, info, axial_fraction: float):
    """(voxel centres along the rod axis, the phantom centre's coordinate there, the indices of the
    slices whose centres lie in the central ``axial_fraction`` of the rods), with ``info`` checked
    against ``grid``."""
    expect_attributes(info, ("grid", "axis", "plane_axes", "centre_mm", "length_mm", "groups"), "info",
                      "a DerenzoInfo (directpet.sim.derenzo_phantom)")
    if tuple(info.grid.shape) != tuple(grid.shape) or tuple(info.grid.voxel_size) != tuple(grid.voxel_size):
        raise ValueError(f"info: its grid {info.grid} differs from grid {grid}")
    axial_fraction = real_number("axial_fraction", axial_fraction)
    if not 0.0 < axial_fraction <= 1.0:
        raise ValueError(f"axial_fraction: expected a value in (0, 1], got {axial_fraction!r}")
    along = grid.centres(_GRID_AXIS[info.axis])
    centre_along = info.centre_mm[_POINT_AXIS[info.axis]]
    slices = np.flatnonzero(np.abs(along - centre_along) <= 0.5 * axial_fraction * info.length_mm + 1e-9)
    if slices.size == 0:
        raise ValueError(f"axial_fraction: no image slice along {info.axis} lies in the central "
                         f"{axial_fraction:g} of the rods ({info.length_mm} mm at {centre_along} mm)")
    return along, centre_along, slices


def rod_noise(image, grid: ImageGrid, info, *, diameter_mm: Optional[float] = None,
              core_fraction: Optional[float] = None, axial_fraction: float = 0.5) -> float:
    """The noise of a Derenzo reconstruction: the relative voxel-to-voxel variation along the rods in
    the cores of one group of rods.

    A rod's core is the voxel columns along its axis whose centres lie within ``core_fraction`` of its
    radius of the axis (default: half the radius, or one in-plane voxel where that is more, so that
    coarse voxels still put centres in the cores; at 1.2 mm voxels in 2.4 mm rods that is the whole rod), over the image slices of the central ``axial_fraction`` of its length (as
    :func:`rod_profiles`). Along a column the true activity is constant and so is the resolution
    blur, so what spreads the values there is noise: per column the standard deviation over the slices
    (``ddof = 1``) divided by the column's mean, root-mean-square over the columns of every rod of the
    group. The blur across the rod (which a strong prior makes into a peak) and the differences
    between rods (sensitivity, partial volume) therefore do not count as noise; a slow variation of
    the sensitivity along the axis would. ``diameter_mm`` picks the group (default the largest rods,
    whose cores hold the most columns). On voxels as coarse as the rods a core may hold no voxel
    centre: that rod is left out, and when every rod is, it is an error (``core_fraction``), as are
    fewer than two slices (``axial_fraction``) and a non-positive column mean.
    """
    img = _image(image, grid)
    _, _, slices = _central_slices(grid, info, axial_fraction)
    if slices.size < 2:
        raise ValueError(f"axial_fraction: the noise along the rods needs two slices or more in the central "
                         f"{axial_fraction:g} of their length; {slices.size} lies there")
    group = max(info.groups, key=lambda g: g.diameter_mm) if diameter_mm is None else info.group(diameter_mm)
    u_name, v_name = info.plane_axes
    if core_fraction is None:
        voxel = max(grid.voxel_size[_GRID_AXIS[u_name]], grid.voxel_size[_GRID_AXIS[v_name]])
        core_fraction = min(1.0, max(0.5, voxel / (0.5 * group.diameter_mm)))
    core_fraction = real_number("core_fraction", core_fraction, positive=True)
    if core_fraction > 1.0:
        raise ValueError(f"core_fraction: expected a value in (0, 1], got {core_fraction!r}")
    cu, cv = grid.centres(_GRID_AXIS[u_name]), grid.centres(_GRID_AXIS[v_name])
    radius = core_fraction * 0.5 * group.diameter_mm
    # the image with the rod axis first and (u, v) after: slices x u x v
    order = (_GRID_AXIS[info.axis], _GRID_AXIS[u_name], _GRID_AXIS[v_name])
    stack = np.transpose(img, order)[slices]
    columns = []
    for c in np.asarray(group.centres_mm, float):
        iu = np.flatnonzero(np.abs(cu - c[0]) <= radius)
        iv = np.flatnonzero(np.abs(cv - c[1]) <= radius)
        inside = (cu[iu, None] - c[0]) ** 2 + (cv[None, iv] - c[1]) ** 2 <= radius * radius
        if inside.any():           # coarse voxels: a rod's core may hold no voxel centre
            columns.append(stack[:, iu[:, None], iv[None, :]][:, inside].astype(np.float64))
    if not columns:
        raise ValueError(f"core_fraction: the core of no {group.diameter_mm:g} mm rod ({radius:.2f} mm radius) holds a "
                         f"voxel centre on {grid.voxel_size} mm voxels; use a larger core_fraction")
    values = np.concatenate(columns, axis=1)              # slices x columns
    mean = values.mean(axis=0)
    if not (mean > 0).all():
        raise ValueError(f"image: a column in the cores of the {group.diameter_mm:g} mm rods has mean "
                         f"{float(mean.min()):g}; the noise is relative to a positive mean")
    return float(np.sqrt(np.mean((values.std(axis=0, ddof=1) / mean) ** 2)))


def rod_profiles(image, grid: ImageGrid, info, *, step_mm: Optional[float] = None,
                 axial_fraction: float = 0.5) -> Dict[float, RodProfile]:
    """Profiles along the row of collinear rods that ``info`` names for each group.

    Parameters
    ----------
    image : (nz, ny, nx) image (NumPy or CuPy).
    grid : its ImageGrid (the phantom's, ``info.grid``).
    info : a :class:`~directpet.sim.derenzo.DerenzoInfo` (anything with its ``axis``, ``plane_axes``,
        ``centre_mm``, ``length_mm`` and ``groups``).
    step_mm : sampling step along the line (mm); default a quarter of the smaller in-plane voxel.
    axial_fraction : the profile is averaged over the image slices along the rod axis whose centres
        lie in the central ``axial_fraction`` of the rods' length (inside the image), away from
        the rod ends where the axial blur of a reconstruction mixes in the cold background.

    Returns ``{diameter_mm: RodProfile}`` in the order of ``info.groups``.
    """
    img = _image(image, grid)
    along, centre_along, slices = _central_slices(grid, info, axial_fraction)
    u_name, v_name = info.plane_axes
    in_plane = min(grid.voxel_size[_GRID_AXIS[u_name]], grid.voxel_size[_GRID_AXIS[v_name]])
    step = 0.25 * in_plane if step_mm is None else real_number("step_mm", step_mm, positive=True)

    out = {}
    for g in info.groups:
        start, end = np.asarray(g.profile_start_mm, float), np.asarray(g.profile_end_mm, float)
        length = float(np.hypot(*(end - start)))
        e = (end - start) / length
        with np.errstate(over="ignore"):
            n_t = np.floor(length / step + 1e-9) + 1.0
        # points (3 coordinates) per slice, their interpolation coordinates and values: ~100 bytes each
        require_memory("step_mm", 100.0 * n_t * slices.size, f"profiles of {n_t:.3g} samples over {slices.size} "
                       "slice(s)")
        t = np.arange(int(n_t)) * step
        uv = start[None, :] + t[:, None] * e[None, :]                                   # (n, 2)
        pts = np.empty((slices.size, t.size, 3))
        pts[..., _POINT_AXIS[u_name]] = uv[None, :, 0]
        pts[..., _POINT_AXIS[v_name]] = uv[None, :, 1]
        pts[..., _POINT_AXIS[info.axis]] = along[slices][:, None]
        values = _sample(img, grid, pts).mean(axis=0)
        rods = (np.asarray(g.centres_mm, float)[np.asarray(g.profile_rods)] - start[None, :]) @ e
        ends = np.empty((2, 3))
        for k, p in enumerate((start, end)):
            ends[k, _POINT_AXIS[u_name]], ends[k, _POINT_AXIS[v_name]] = p
            ends[k, _POINT_AXIS[info.axis]] = centre_along
        out[float(g.diameter_mm)] = RodProfile(diameter_mm=float(g.diameter_mm), distance_mm=t, values=values,
                                               rod_mm=rods, valley_mm=0.5 * (rods[1:] + rods[:-1]),
                                               start_mm=ends[0], end_mm=ends[1], slices=slices,
                                               voxel_mm=float(max(grid.voxel_size[_GRID_AXIS[u_name]],
                                                                  grid.voxel_size[_GRID_AXIS[v_name]])))
    return out


def _window(t: np.ndarray, centre: float, half: float) -> np.ndarray:
    """Indices of samples within +-half of centre, or the nearest sample when none is."""
    idx = np.flatnonzero(np.abs(t - centre) <= half)
    return idx if idx.size else np.array([int(np.argmin(np.abs(t - centre)))])


def peak_to_valley(profiles: Mapping[float, RodProfile], *,
                   window_fraction: float = 0.25) -> Dict[float, PeakToValley]:
    """Peak-to-valley ratio per Derenzo group from :func:`rod_profiles`.

    Peaks are the profile maxima within ``+-window_fraction * d`` of each rod centre, valleys the
    minima within ``+-window_fraction * d`` of each midpoint between neighbouring rods (the gap
    between rod edges is ``+-d / 2`` about the midpoint); the ratio is mean peak / mean valley
    (see :class:`PeakToValley` for a valley of 0). Groups whose profile crosses a single rod have
    no valley and are left out; groups whose rods are closer than two voxels are kept but marked
    (``sampled=False``). Returns ``{diameter_mm: PeakToValley}``.
    """
    window_fraction = real_number("window_fraction", window_fraction)
    if not 0.0 < window_fraction <= 0.5:
        raise ValueError(f"window_fraction: expected a value in (0, 0.5], got {window_fraction!r}")
    if not isinstance(profiles, Mapping):
        raise TypeError(f"profiles: expected the {{diameter_mm: RodProfile}} of rod_profiles, got "
                        f"{type(profiles).__name__}")
    out = {}
    for d, prof in profiles.items():
        if not isinstance(prof, RodProfile):
            raise TypeError(f"profiles: the entry for {d!r} is a {type(prof).__name__}, expected a RodProfile")
        if prof.rod_mm.size < 2:
            continue
        half = window_fraction * prof.diameter_mm
        peaks = np.array([prof.values[_window(prof.distance_mm, c, half)].max() for c in prof.rod_mm])
        valleys = np.array([prof.values[_window(prof.distance_mm, c, half)].min() for c in prof.valley_mm])
        mp, mv = float(peaks.mean()), float(valleys.mean())
        ratio = float("nan") if mp <= 0 else (float("inf") if mv <= 0 else mp / mv)
        pitch = float(np.median(np.abs(np.diff(prof.rod_mm))))
        out[d] = PeakToValley(diameter_mm=float(prof.diameter_mm), peaks=peaks, valleys=valleys,
                              mean_peak=mp, mean_valley=mv, ratio=ratio, profile=prof, pitch_mm=pitch,
                              sampled=bool(pitch >= 2.0 * prof.voxel_mm - 1e-9))
    return out
