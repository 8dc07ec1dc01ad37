"""Analytic phantoms and their voxel images (:ref:`physics-phantoms`).

A phantom has two descriptions that always agree:

* an **analytic** one (:class:`AnalyticPhantom`): a sum of uniform cylinders, uniform spheres and
  point sources, plus a water cylinder for attenuation. Events are sampled from it and attenuation
  chord lengths are computed from it exactly;
* a **voxel image** on an :class:`~directpet.geometry.ImageGrid`, with partial-volume values from
  supersampling, used as the truth of reconstructions and for model-consistent data.

Units and conventions
---------------------
* Points are ``(x, y, z)`` in mm, z the scanner axis (the same order as event coordinates and view
  directions). Arrays are ``(nz, ny, nx)``.
* Volume sources carry an activity **concentration** (activity per mm^3, arbitrary units; the
  default background is 1). Image voxels hold the mean concentration over the voxel.
* Point sources carry a total **activity**; their image value is ``activity / voxel_volume`` in the
  voxel that contains them, so that ``image.sum() * voxel_volume`` is the total activity in every case.
* Sources are **additive**: a hot sphere of concentration ``c_s`` in a background ``c_b`` is the
  background cylinder plus a sphere of concentration ``c_s - c_b`` (negative for a cold sphere).
* Attenuation coefficients are in 1/mm (water at 511 keV: 0.0096/mm).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np

from .._checks import expect_instance, integer, real_array, real_number, require_memory
from ..geometry import ImageGrid
from .lines import chord_length

MU_WATER_PER_MM = 0.0096
#: The largest magnitude of a float32: voxel images and mu-maps are float32, so a concentration or
#: attenuation coefficient beyond it would become inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)


# --- analytic components ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CylinderSource:
    """Uniform cylinder about the z axis: radius and length in mm, concentration per mm^3."""

    radius_mm: float
    length_mm: float
    concentration: float = 1.0
    centre_z_mm: float = 0.0

    def __post_init__(self):
        _set_numbers(self, positive=("radius_mm", "length_mm"), finite=("concentration", "centre_z_mm"))

    @property
    def volume(self) -> float:
        """Volume of the cylinder (mm^3)."""
        with np.errstate(over="ignore"):           # inf, not an OverflowError, for an absurd radius
            return float(np.pi * np.float64(self.radius_mm) ** 2 * self.length_mm)

    @property
    def activity(self) -> float:
        """Total activity of the cylinder: concentration x volume."""
        return self.concentration * self.volume

    def inside(self, x, y, z, xp=np):
        """Whether points (x, y, z) (mm, broadcastable arrays) lie in the cylinder."""
        return (x * x + y * y <= self.radius_mm**2) & (xp.abs(z - self.centre_z_mm) <= 0.5 * self.length_mm)

    def sample(self, n: int, rng, xp=np):
        """n uniform points (n, 3) (x, y, z) mm: r = R sqrt(U) gives a uniform disc."""
        u = rng.random((3, n))
        r = self.radius_mm * xp.sqrt(u[0])
        phi = 2.0 * np.pi * u[1]
        z = self.centre_z_mm + self.length_mm * (u[2] - 0.5)
        return xp.stack([r * xp.cos(phi), r * xp.sin(phi), z], axis=1)

    def voxelise(self, grid: ImageGrid, supersample: int) -> np.ndarray:
        """Mean concentration per voxel: supersampled disc fraction x exact axial overlap."""
        supersample = _check_voxelise(grid, supersample)
        disc = _disc_fraction(grid, 0.0, 0.0, self.radius_mm, supersample)          # (ny, nx)
        z0 = self.centre_z_mm - 0.5 * self.length_mm
        z1 = self.centre_z_mm + 0.5 * self.length_mm
        axial = _interval_overlap(grid, z0, z1)                                    # (nz,)
        return self.concentration * axial[:, None, None] * disc[None, :, :]


@dataclass(frozen=True)
class SphereSource:
    """Uniform sphere: centre (x, y, z) mm, radius mm, concentration per mm^3 (additive)."""

    centre_mm: Tuple[float, float, float]
    radius_mm: float
    concentration: float

    def __post_init__(self):
        object.__setattr__(self, "centre_mm", check_point("centre_mm", self.centre_mm))
        _set_numbers(self, positive=("radius_mm",), finite=("concentration",))

    @property
    def volume(self) -> float:
        """Volume of the sphere (mm^3)."""
        with np.errstate(over="ignore"):           # inf, not an OverflowError, for an absurd radius
            return float(4.0 / 3.0 * np.pi * np.float64(self.radius_mm) ** 3)

    @property
    def activity(self) -> float:
        """Total activity of the sphere: concentration x volume."""
        return self.concentration * self.volume

    def inside(self, x, y, z, xp=np):
        """Whether points (x, y, z) (mm, broadcastable arrays) lie in the sphere."""
        cx, cy, cz = self.centre_mm
        return (x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2 <= self.radius_mm**2

    def sample(self, n: int, rng, xp=np):
        """n uniform points (n, 3): isotropic direction times R U^(1/3)."""
        g = rng.standard_normal((n, 3))
        g /= xp.sqrt(xp.sum(g * g, axis=1, keepdims=True))
        r = self.radius_mm * rng.random(n) ** (1.0 / 3.0)
        return g * r[:, None] + xp.asarray(self.centre_mm, dtype=g.dtype)[None, :]

    def voxelise(self, grid: ImageGrid, supersample: int) -> np.ndarray:
        """Mean concentration per voxel from supersampling the sphere's bounding box."""
        supersample = _check_voxelise(grid, supersample)
        out = np.zeros(grid.shape)
        cx, cy, cz = self.centre_mm
        box = _bounding_box(grid, (cz, cy, cx), self.radius_mm)
        if box is None:
            return out
        n_sub = float(np.prod([b.stop - b.start for b in box])) * float(supersample) ** 3
        require_memory("supersample", 24.0 * n_sub, f"a sphere sampled at {supersample}**3 points per voxel")
        (z, y, x), sl = _subsample_coords(grid, box, supersample)
        ins = ((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2 <= self.radius_mm**2).astype(np.float64)
        out[sl] = _block_mean(ins, supersample)
        return self.concentration * out


@dataclass(frozen=True)
class PointSource:
    """A point source at (x, y, z) mm with total activity ``activity``."""

    position_mm: Tuple[float, float, float]
    activity: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "position_mm", check_point("position_mm", self.position_mm))
        _set_numbers(self, nonnegative=("activity",))

    @property
    def volume(self) -> float:
        """0: a point has no volume (its activity is given directly)."""
        return 0.0

    def sample(self, n: int, rng, xp=np):
        """n copies of the point's position (n, 3) (x, y, z) mm."""
        return xp.broadcast_to(xp.asarray(self.position_mm, dtype=xp.float64), (n, 3)).copy()

    def voxelise(self, grid: ImageGrid, supersample: int) -> np.ndarray:
        """The point's activity in the voxel that contains it (nz, ny, nx); ``supersample`` is checked,
        not used."""
        _check_voxelise(grid, supersample)
        out = np.zeros(grid.shape)
        x, y, z = self.position_mm
        iz, iy, ix = (int(i) for i in grid.index_of(z, y, x))
        if 0 <= iz < grid.nz and 0 <= iy < grid.ny and 0 <= ix < grid.nx:
            out[iz, iy, ix] = self.activity / float(np.prod(grid.voxel_size))
        return out


@dataclass(frozen=True)
class WaterCylinder:
    """Uniform attenuating cylinder about the z axis (radius, length in mm; mu in 1/mm)."""

    radius_mm: float
    length_mm: float
    mu_per_mm: float = MU_WATER_PER_MM

    def __post_init__(self):
        _set_numbers(self, positive=("radius_mm", "length_mm"), nonnegative=("mu_per_mm",))

    def chord(self, x, y, z, ux, uy, uz, xp=np):
        """Length (mm) of the full line through (x, y, z) with unit direction u inside the cylinder."""
        return chord_length(x, y, z, ux, uy, uz, self.radius_mm, 0.5 * self.length_mm, xp)

    def survival(self, x, y, z, ux, uy, uz, xp=np):
        """Probability exp(-mu * chord) that both photons of the LOR escape."""
        return xp.exp(-self.mu_per_mm * self.chord(x, y, z, ux, uy, uz, xp))

    def mu_map(self, grid: ImageGrid, supersample: int = 4) -> np.ndarray:
        """Attenuation map (nz, ny, nx) float32 in 1/mm with partial-volume edges."""
        if self.mu_per_mm > FLOAT32_MAX:
            raise ValueError(f"mu_per_mm: {self.mu_per_mm!r} /mm is beyond float32's range (the mu-map is float32, "
                             f"values <= {FLOAT32_MAX:.4g})")
        cyl = CylinderSource(self.radius_mm, self.length_mm, self.mu_per_mm)
        return cyl.voxelise(grid, supersample).astype(np.float32)


@dataclass
class AnalyticPhantom:
    """Sum of analytic sources plus an optional attenuating water cylinder.

    ``sources`` is a sequence of :class:`CylinderSource`, :class:`SphereSource` and
    :class:`PointSource`. Negative concentrations (cold inserts) are allowed as long as the total
    concentration stays >= 0 everywhere; sampling then uses rejection (see :meth:`sample`).
    """

    sources: Sequence = ()
    attenuation: Optional[WaterCylinder] = None

    def __post_init__(self):
        if isinstance(self.sources, (str, bytes)) or not hasattr(self.sources, "__iter__"):
            raise TypeError(f"sources: expected a sequence of sources, got {type(self.sources).__name__}")
        self.sources = tuple(self.sources)
        for s in self.sources:
            if not all(hasattr(s, m) for m in ("activity", "sample", "voxelise")):   # e.g. derenzo.RodSource
                raise TypeError(f"sources: expected a source with activity, sample and voxelise, got {type(s).__name__}")
        if self.attenuation is not None:
            expect_instance(self.attenuation, WaterCylinder, "attenuation")
        total = self.total_activity
        if not np.isfinite(total) or total <= 0:
            raise ValueError(f"sources: the phantom's total activity must be positive and finite, got {total!r}")

    @property
    def total_activity(self) -> float:
        """Sum of the sources' activities."""
        return float(sum(s.activity for s in self.sources))

    def image(self, grid: ImageGrid, supersample: int = 4) -> np.ndarray:
        """Voxel image (nz, ny, nx) float32 of mean concentration (see the module docstring);
        ``supersample`` sub-samples per voxel and axis, a positive integer."""
        supersample = _check_voxelise(grid, supersample)
        out = np.zeros(grid.shape)
        for s in self.sources:
            out += s.voxelise(grid, supersample)
        with np.errstate(over="ignore", invalid="ignore"):
            image = np.maximum(out, 0.0).astype(np.float32)
        if not np.isfinite(image).all():
            raise ValueError(f"sources: their concentrations give voxel values beyond float32's range "
                             f"(|values| <= {FLOAT32_MAX:.4g}; the image is float32)")
        return image

    def sample(self, n: int, rng, xp=np):
        """n annihilation points (n, 3) float64 (x, y, z) mm, distributed as the activity.

        Each positive source gets a share of the points proportional to its activity (a
        multinomial draw) and samples them uniformly. Negative (cold) sources are applied by
        rejection: a point from the positive sources is kept with probability
        ``f(r) / f_positive(r)`` (total over positive concentration there); the loop tops up
        rejected points. ``rng`` is a NumPy or CuPy ``Generator`` of the namespace ``xp``; ``n``
        an integer >= 0.
        """
        n = integer("n", n, lo=0)
        # the points (24 bytes), the draws and the sources' temporaries: about 128 bytes per point
        require_memory("n", 128.0 * n, f"{n} annihilation points")
        if not callable(getattr(rng, "random", None)):
            raise TypeError(f"rng: expected a NumPy or CuPy Generator (directpet.sim.make_rng), got "
                            f"{type(rng).__name__}")
        if n == 0:
            return xp.zeros((0, 3))
        pos = [s for s in self.sources if s.activity > 0]
        neg = [s for s in self.sources if s.activity < 0]
        w = np.array([s.activity for s in pos], dtype=np.float64)
        cum = xp.asarray(np.cumsum(w) / w.sum())
        parts, have = [], 0
        while have < n:
            m = n - have
            which = xp.searchsorted(cum, rng.random(m), side="right")
            counts = [int(c) for c in xp.bincount(which, minlength=len(pos))[: len(pos)]]
            pts = xp.concatenate([s.sample(c, rng, xp) for s, c in zip(pos, counts) if c > 0], axis=0)
            if neg:
                pts = pts[self._keep_cold(pts, pos, neg, rng, xp)]
            parts.append(pts)
            have += int(pts.shape[0])
        return xp.concatenate(parts, axis=0)[:n]

    @staticmethod
    def _keep_cold(pts, pos, neg, rng, xp):
        x, y, z = pts[:, 0], pts[:, 1], pts[:, 2]
        f_pos = xp.zeros(x.shape)
        for s in pos:
            if not isinstance(s, PointSource):
                f_pos = f_pos + s.concentration * s.inside(x, y, z, xp)
        f_neg = xp.zeros(x.shape)
        for s in neg:
            f_neg = f_neg + s.concentration * s.inside(x, y, z, xp)
        # Points of point sources have f_pos = 0 here and are always kept.
        p = xp.where(f_pos > 0, (f_pos + f_neg) / xp.where(f_pos > 0, f_pos, 1.0), 1.0)
        return rng.random(x.shape[0]) < p


@dataclass
class PhantomInfo:
    """What analysis and simulation need to know about a phantom.

    Attributes
    ----------
    grid : the ImageGrid of the voxel images.
    analytic : the AnalyticPhantom (event sampling, attenuation chords).
    sphere_centres_mm : (n_spheres, 3) sphere centres, (x, y, z) mm.
    sphere_diameters_mm : (n_spheres,) mm.
    background_activity : background concentration.
    sphere_activity : (n_spheres,) total concentration inside each sphere (not the excess).
    mu_map : (nz, ny, nx) float32 attenuation map (1/mm), zeros without attenuation.
    centre_mm : (x, y, z) of the phantom centre (the noise ROI is centred here).
    cylinder_diameter_mm, length_mm : the background cylinder (None for point sources).
    """

    grid: ImageGrid
    analytic: AnalyticPhantom
    sphere_centres_mm: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    sphere_diameters_mm: np.ndarray = field(default_factory=lambda: np.zeros(0))
    background_activity: float = 0.0
    sphere_activity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mu_map: Optional[np.ndarray] = None
    centre_mm: Tuple[float, float, float] = (0.0, 0.0, 0.0)
    cylinder_diameter_mm: Optional[float] = None
    length_mm: Optional[float] = None

    @property
    def n_spheres(self) -> int:
        """Number of hot spheres."""
        return int(len(self.sphere_diameters_mm))

    @property
    def attenuation(self) -> Optional[WaterCylinder]:
        """The attenuating water cylinder of the phantom (None: no attenuation)."""
        return self.analytic.attenuation

    @property
    def contrast(self) -> np.ndarray:
        """True sphere-to-background ratio per sphere."""
        return np.asarray(self.sphere_activity, dtype=float) / float(self.background_activity)

    @property
    def sphere_z_mm(self) -> float:
        """Mean z (mm) of the sphere centres: the 'sphere slice' of the analysis."""
        if self.n_spheres == 0:
            return float(self.centre_mm[2])
        return float(np.mean(self.sphere_centres_mm[:, 2]))


# --- phantom factories ------------------------------------------------------------------------------

def sphere_phantom(grid: ImageGrid, cylinder_diameter_mm: float = 350.0, length_mm: float = 250.0,
                   n_spheres: int = 6, sphere_diameter_mm: float = 10.0, sphere_radius_mm: float = 75.0,
                   contrast: float = 6.0, supersample: int = 4, *, background: float = 1.0,
                   sphere_z_mm: float = 0.0, start_angle_deg: float = 0.0,
                   mu_per_mm: float = MU_WATER_PER_MM):
    """The [HA] evaluation phantom: a water cylinder with hot spheres in one transaxial plane.

    ``n_spheres`` spheres of ``sphere_diameter_mm`` are spread evenly on a circle of radius
    ``sphere_radius_mm`` (the first at ``start_angle_deg`` from +x) at ``z = sphere_z_mm``; their
    concentration is ``contrast * background``. The attenuation is water (``mu_per_mm``) over the
    whole cylinder (``mu_per_mm=0`` switches it off).

    Returns ``(image, info)``: image (nz, ny, nx) float32 mean concentration per voxel
    (``supersample**3`` sub-samples per voxel for spheres, ``supersample**2`` transaxially for the
    cylinder), and a :class:`PhantomInfo`.
    """
    grid = expect_instance(grid, ImageGrid, "grid")
    _check_positive(cylinder_diameter_mm=cylinder_diameter_mm, length_mm=length_mm,
                    sphere_diameter_mm=sphere_diameter_mm, background=background)
    n_spheres = integer("n_spheres", n_spheres, lo=0)
    contrast = real_number("contrast", contrast, nonnegative=True)          # sphere-to-background ratio
    sphere_radius_mm = real_number("sphere_radius_mm", sphere_radius_mm, nonnegative=True)
    sphere_z_mm = real_number("sphere_z_mm", sphere_z_mm)
    start_angle_deg = real_number("start_angle_deg", start_angle_deg)
    mu_per_mm = real_number("mu_per_mm", mu_per_mm, nonnegative=True)
    supersample = integer("supersample", supersample, lo=1)
    _float32_value("background", background, "the background concentration")
    _float32_value("contrast", contrast * background, "the sphere concentration contrast * background")
    _float32_value("mu_per_mm", mu_per_mm, "the attenuation coefficient (/mm)")
    _check_cylinder_activity("cylinder_diameter_mm", cylinder_diameter_mm, length_mm, background)
    gap = 2.0 * sphere_radius_mm * np.sin(np.pi / max(n_spheres, 1))     # between neighbouring centres
    if n_spheres > 1 and gap < sphere_diameter_mm * (1 - 1e-12):           # overlapping spheres would add up
        raise ValueError(f"n_spheres: {n_spheres} spheres of {sphere_diameter_mm} mm on a circle of radius "
                         f"{sphere_radius_mm} mm overlap (neighbouring centres {gap:.3g} mm apart); use fewer or "
                         f"smaller spheres or a larger sphere_radius_mm")
    angles = np.deg2rad(start_angle_deg) + 2.0 * np.pi * np.arange(int(n_spheres)) / max(int(n_spheres), 1)
    centres = np.stack([sphere_radius_mm * np.cos(angles), sphere_radius_mm * np.sin(angles),
                        np.full(angles.shape, float(sphere_z_mm))], axis=1)
    if np.any(np.hypot(centres[:, 0], centres[:, 1]) + 0.5 * sphere_diameter_mm > 0.5 * cylinder_diameter_mm):
        raise ValueError("sphere_radius_mm: the spheres do not fit inside the cylinder")
    sources = [CylinderSource(0.5 * cylinder_diameter_mm, length_mm, background)]
    sources += [SphereSource(tuple(c), 0.5 * sphere_diameter_mm, (contrast - 1.0) * background)
                for c in centres if contrast != 1.0]
    water = WaterCylinder(0.5 * cylinder_diameter_mm, length_mm, mu_per_mm) if mu_per_mm > 0 else None
    phantom = AnalyticPhantom(sources, water)
    info = PhantomInfo(grid=grid, analytic=phantom, sphere_centres_mm=centres,
                       sphere_diameters_mm=np.full(len(centres), float(sphere_diameter_mm)),
                       background_activity=float(background),
                       sphere_activity=np.full(len(centres), contrast * background),
                       mu_map=_mu_map(water, grid, supersample),
                       cylinder_diameter_mm=float(cylinder_diameter_mm), length_mm=float(length_mm))
    return phantom.image(grid, supersample), info


def uniform_cylinder(grid: ImageGrid, diameter_mm: float = 350.0, length_mm: float = 250.0,
                     activity: float = 1.0, supersample: int = 4, *, mu_per_mm: float = MU_WATER_PER_MM):
    """A uniform water cylinder of concentration ``activity``. Returns ``(image, info)``."""
    _check_positive(diameter_mm=diameter_mm, activity=activity)        # named as here, not as below
    _float32_value("activity", activity, "the concentration")
    _check_cylinder_activity("diameter_mm", diameter_mm, length_mm, activity)
    return sphere_phantom(grid, diameter_mm, length_mm, n_spheres=0, contrast=1.0,
                          supersample=supersample, background=activity, mu_per_mm=mu_per_mm)


def point_source_phantom(grid: ImageGrid, points_mm, activity=1.0, *,
                         attenuation: Optional[WaterCylinder] = None):
    """Point sources at ``points_mm`` ((n, 3) or (3,), (x, y, z) mm) with activities ``activity``.

    The image holds ``activity / voxel_volume`` in the voxel containing each point; every point
    must lie inside the grid (else a ValueError naming ``points_mm``: its image would be all zero).
    ``attenuation`` optionally embeds the points in a :class:`WaterCylinder`. Returns ``(image, info)``.
    """
    grid = expect_instance(grid, ImageGrid, "grid")
    pts = np.atleast_2d(real_array("points_mm", points_mm))
    if pts.ndim != 2 or pts.shape[1] != 3 or pts.shape[0] == 0:
        raise ValueError(f"points_mm: expected finite (n, 3) (x, y, z) mm with n >= 1, got shape {pts.shape}")
    check_inside_grid("points_mm", grid, pts)
    acts = real_array("activity", activity)
    if acts.ndim > 1 or (acts.ndim == 1 and acts.shape[0] != pts.shape[0]):
        raise ValueError(f"activity: expected a scalar or {pts.shape[0]} values (one per point), got shape "
                         f"{acts.shape}")
    if np.any(acts < 0):
        raise ValueError(f"activity: expected finite values >= 0, got {activity!r}")
    _float32_value("activity", float(np.max(acts)) / float(np.prod(grid.voxel_size)),
                   "the image value activity / voxel volume")
    acts = np.broadcast_to(acts, (pts.shape[0],))
    if attenuation is not None:
        expect_instance(attenuation, WaterCylinder, "attenuation")
    phantom = AnalyticPhantom([PointSource(tuple(p), float(a)) for p, a in zip(pts, acts)], attenuation)
    info = PhantomInfo(grid=grid, analytic=phantom, mu_map=_mu_map(attenuation, grid, 4))
    return phantom.image(grid), info


# --- voxelisation helpers ---------------------------------------------------------------------------

def _mu_map(water, grid, supersample):
    return np.zeros(grid.shape, np.float32) if water is None else water.mu_map(grid, supersample)


def _disc_fraction(grid: ImageGrid, cx: float, cy: float, radius: float, supersample: int) -> np.ndarray:
    """Fraction (ny, nx) of each pixel inside a disc, by supersample^2 sub-pixels."""
    ss = int(supersample)
    require_memory("supersample", 24.0 * grid.ny * grid.nx * float(ss) ** 2,
                   f"a disc sampled at {ss} x {ss} points per pixel")
    vy, vx = grid.voxel_size[1], grid.voxel_size[2]
    sub = (np.arange(ss) + 0.5) / ss - 0.5
    y = (grid.centres(1)[:, None] + sub[None, :] * vy).ravel()
    x = (grid.centres(2)[:, None] + sub[None, :] * vx).ravel()
    ins = ((x[None, :] - cx) ** 2 + (y[:, None] - cy) ** 2 <= radius**2).astype(np.float64)
    return ins.reshape(grid.ny, ss, grid.nx, ss).mean(axis=(1, 3))


def _interval_overlap(grid: ImageGrid, z0: float, z1: float) -> np.ndarray:
    """Exact fraction (nz,) of each slice's extent inside [z0, z1]."""
    vz = grid.voxel_size[0]
    lo = grid.centres(0) - 0.5 * vz
    return np.clip(np.minimum(lo + vz, z1) - np.maximum(lo, z0), 0.0, None) / vz


def _bounding_box(grid: ImageGrid, centre_zyx, half_width):
    """Index slices of the voxels that can overlap a cube of half-width about a centre, or None."""
    sl = []
    for axis, c in enumerate(centre_zyx):
        n, v = grid.shape[axis], grid.voxel_size[axis]
        lo = int(np.floor((c - half_width) / v + 0.5 * n))
        hi = int(np.floor((c + half_width) / v + 0.5 * n)) + 1
        lo, hi = max(lo, 0), min(hi, n)
        if hi <= lo:
            return None
        sl.append(slice(lo, hi))
    return tuple(sl)


def _subsample_coords(grid: ImageGrid, box, supersample: int):
    """Sub-voxel centre coordinates (z, y, x) broadcastable over the box, each axis ss x finer."""
    ss = int(supersample)
    sub = (np.arange(ss) + 0.5) / ss - 0.5
    coords = []
    for axis, s in enumerate(box):
        c = grid.centres(axis)[s]
        coords.append((c[:, None] + sub[None, :] * grid.voxel_size[axis]).ravel())
    z, y, x = coords
    return (z[:, None, None], y[None, :, None], x[None, None, :]), box


def _block_mean(a: np.ndarray, ss: int) -> np.ndarray:
    nz, ny, nx = (n // ss for n in a.shape)
    return a.reshape(nz, ss, ny, ss, nx, ss).mean(axis=(1, 3, 5))


def _check_cylinder_activity(name: str, diameter_mm, length_mm, concentration) -> None:
    """ValueError naming the diameter ``name`` when the cylinder's total activity overflows float64."""
    _check_positive(**{name: diameter_mm}, length_mm=length_mm)
    with np.errstate(over="ignore"):
        activity = np.prod(np.array([np.pi / 4, diameter_mm, diameter_mm, length_mm, concentration]))
    if not np.isfinite(activity):
        raise ValueError(f"{name}: a cylinder of {diameter_mm!r} mm x length_mm={length_mm!r} mm at concentration "
                         f"{concentration!r} holds an activity beyond float64's range")


def _float32_value(name: str, value: float, what: str) -> None:
    """ValueError naming ``name`` when ``value`` (a voxel value of a float32 image) exceeds float32."""
    if not abs(value) <= FLOAT32_MAX:
        raise ValueError(f"{name}: {what} {value!r} is beyond float32's range (|values| <= {FLOAT32_MAX:.4g}; "
                         "phantom images are float32)")


def check_inside_grid(name: str, grid: ImageGrid, pts: np.ndarray) -> None:
    """ValueError naming ``name`` unless every point of ``pts`` ((n, 3) (x, y, z) mm) lies inside the grid."""
    half = 0.5 * np.array(grid.shape, dtype=float)[::-1] * np.array(grid.voxel_size)[::-1]     # (x, y, z)
    outside = np.any(np.abs(pts) >= half[None, :], axis=1)
    if np.any(outside):
        raise ValueError(f"{name}: points {pts[outside].tolist()} lie outside the image "
                         f"(|x|, |y|, |z| < {half.tolist()} mm)")


def _check_positive(**kw):
    for name, v in kw.items():
        real_number(name, v, positive=True)


def _set_numbers(obj, *, positive=(), nonnegative=(), finite=()):
    """Check and set float fields of a frozen source in ``__post_init__``: errors name the field
    (TypeError for a non-number, ValueError for NaN, inf or out of range)."""
    for names, kw in ((positive, {"positive": True}), (nonnegative, {"nonnegative": True}), (finite, {})):
        for name in names:
            object.__setattr__(obj, name, real_number(name, getattr(obj, name), **kw))


def check_point(name: str, p) -> Tuple[float, float, float]:
    """p as three finite floats (x, y, z) mm, else an error naming ``name``."""
    a = real_array(name, p)
    if a.shape != (3,):
        raise ValueError(f"{name}: expected three finite coordinates (x, y, z) mm, got {p!r}")
    return tuple(float(v) for v in a)


def _check_voxelise(grid, supersample) -> int:
    """The arguments of every ``voxelise``: an ImageGrid and a positive integer supersample."""
    expect_instance(grid, ImageGrid, "grid")
    return integer("supersample", supersample, lo=1)
