"""Contrast recovery, noise and contrast-noise curves ([HA]_ §6.1; :ref:`physics-evaluation`).

* CRC of sphere s: ``((p_s - p_b) / p_b) / c_s`` with p_s the mean in a circle of the sphere's
  diameter centred on it, p_b the mean in the background annulus around it (inner diameter =
  sphere diameter + 14 mm, 8 mm thick), both in the sphere's slice with partial-voxel weights, and
  ``c_s = true sphere / background ratio - 1``. The reported CRC is the mean over spheres.
* Noise: weighted pixel standard deviation over weighted mean inside a 50 mm circle at the
  phantom centre, in the sphere slice (optionally averaged over +-k slices).

Images may be NumPy or CuPy arrays (they are copied to the host: one image at a time is small);
they must be real and finite. A ratio whose denominator is not positive (a background or noise-ROI
mean <= 0, e.g. an all-zero image) is a ValueError naming ``image``, never a NaN or inf result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from .._checks import expect_attributes, expect_instance, integer, real_array, real_number, to_numpy
from ..geometry import ImageGrid
from .roi import SphereROIs, circle_weights, weighted_mean, weighted_std


@dataclass
class CRCResult:
    """CRC of one image: ``mean`` over spheres, ``per_sphere`` values, the ROI means used."""

    mean: float
    per_sphere: np.ndarray
    sphere_means: np.ndarray
    background_means: np.ndarray

    def __float__(self) -> float:
        return float(self.mean)


def _image(image, grid: ImageGrid, name: str = "image") -> np.ndarray:
    """image as a float64 host array of ``grid.shape``, real and finite; errors name ``name``."""
    expect_instance(grid, ImageGrid, "grid")
    if not hasattr(image, "shape") or not hasattr(image, "dtype"):
        raise TypeError(f"{name}: expected a NumPy or CuPy array of shape {grid.shape}, got {type(image).__name__}")
    a = to_numpy(image)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name}: expected a real (float or integer) array, got dtype {a.dtype}")
    if a.shape != tuple(grid.shape):
        raise ValueError(f"{name}: expected shape {grid.shape}, got {a.shape}")
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or inf")
    return a


def _phantom_info(info, name: str = "phantom_info"):
    """info, or a TypeError naming ``name`` when it is not a PhantomInfo-like object."""
    return expect_attributes(info, ("grid", "n_spheres", "sphere_centres_mm", "sphere_diameters_mm",
                                    "sphere_activity", "background_activity", "centre_mm", "sphere_z_mm"),
                             name, "a PhantomInfo (directpet.sim.sphere_phantom)")


def crc(image, phantom_info, *, axial: str = "linear", supersample: int = 10,
        rois: Optional[SphereROIs] = None) -> CRCResult:
    """Contrast recovery coefficients of the phantom's spheres.

    ``axial='linear'`` interpolates the ROI means between the two slices bracketing each sphere
    centre (for spheres at z = 0 on an even number of slices: the mean of the two central slices);
    ``'nearest'`` uses the slice containing the centre. ``rois`` reuses precomputed ROIs.
    """
    _phantom_info(phantom_info)
    if phantom_info.n_spheres == 0:
        raise ValueError("phantom_info: has no spheres")
    bg = real_number("phantom_info.background_activity", phantom_info.background_activity)
    if bg <= 0:
        raise ValueError(f"phantom_info: background_activity must be positive (the true contrast divides "
                         f"by it), got {bg!r}")
    c = phantom_info.contrast - 1.0
    if not np.all(np.isfinite(c)):
        raise ValueError("phantom_info: sphere_activity contains NaN or inf")
    if np.any(c == 0):
        raise ValueError("phantom_info: a sphere has the background's activity (true contrast 0)")
    img = _image(image, phantom_info.grid)
    if rois is None:
        rois = SphereROIs.from_info(phantom_info, axial, supersample)
    elif not isinstance(rois, SphereROIs):
        raise TypeError(f"rois: expected SphereROIs (SphereROIs.from_info), got {type(rois).__name__}")
    elif len(rois.sphere) != phantom_info.n_spheres:
        raise ValueError(f"rois: {len(rois.sphere)} sphere ROIs for the {phantom_info.n_spheres} spheres of "
                         f"phantom_info")
    ps, pb = rois.means(img)
    if np.any(pb <= 0):
        bad = np.flatnonzero(pb <= 0).tolist()
        raise ValueError(f"image: the background mean around sphere(s) {bad} is {pb[bad].tolist()}, not "
                         f"positive; the CRC ((sphere - background) / background) is undefined")
    per = (ps - pb) / pb / c
    return CRCResult(float(per.mean()), per, ps, pb)


def _noise_slices(grid: ImageGrid, z_mm: float, half_slices: int) -> List[int]:
    """The slice containing z (both slices when z is on their common boundary), widened by +-k."""
    f = float(z_mm) / grid.voxel_size[0] + 0.5 * grid.nz        # slice boundaries at integers
    if abs(f - round(f)) < 1e-6:
        lo, hi = int(round(f)) - 1, int(round(f))
    else:
        lo = hi = int(np.floor(f))
    lo, hi = max(lo - half_slices, 0), min(hi + half_slices, grid.nz - 1)
    if hi < lo:
        raise ValueError(f"z_mm: {z_mm} mm is outside the grid")
    return list(range(lo, hi + 1))


def noise(image, where, diameter_mm: float = 50.0, *, grid: Optional[ImageGrid] = None,
          half_slices: int = 0, supersample: int = 10) -> float:
    """Relative noise: weighted std / weighted mean in a central circle.

    Parameters
    ----------
    image : (nz, ny, nx) image.
    where : a :class:`~directpet.sim.phantoms.PhantomInfo` (circle at its centre (x, y), in its
        sphere slice) or an ``(x, y, z)`` centre in mm (then ``grid`` is required).
    diameter_mm : ROI diameter (50 mm in [HA]).
    half_slices : also use +-k neighbouring slices (an integer >= 0); the result is the mean of the
        per-slice values.
    supersample : sub-pixels per pixel and axis of the ROI weights (a positive integer).

    The slice is the one containing z; when z falls exactly on a slice boundary (e.g. z = 0 on an
    even number of slices) both neighbouring slices are used. Pixels are weighted by their area
    fraction inside the circle; the std is the weighted population std. A slice whose ROI mean is
    not positive (relative noise undefined) is a ValueError naming ``image``.
    """
    if hasattr(where, "grid") and hasattr(where, "centre_mm"):
        grid = where.grid if grid is None else grid
        centre = (float(where.centre_mm[0]), float(where.centre_mm[1]), where.sphere_z_mm)
    else:
        if isinstance(where, (str, bytes)) or not hasattr(where, "__len__"):
            raise TypeError(f"where: expected a PhantomInfo or an (x, y, z) centre in mm, got {type(where).__name__}")
        if len(where) != 3:
            raise ValueError(f"where: expected (x, y, z) mm, got {where!r}")
        if grid is None:
            raise ValueError("grid: required when `where` is a centre (x, y, z)")
        centre = tuple(real_number(f"where[{i}]", c) for i, c in enumerate(where))
    half_slices = integer("half_slices", half_slices, lo=0)
    img = _image(image, grid)
    w = circle_weights(grid, centre[:2], diameter_mm, supersample)
    if not w.any():
        raise ValueError(f"where: the {diameter_mm} mm noise ROI at (x, y) = {centre[:2]} mm lies outside the grid "
                         f"(the grid spans |x| < {0.5 * grid.nx * grid.voxel_size[2]} mm, |y| < "
                         f"{0.5 * grid.ny * grid.voxel_size[1]} mm)")
    vals = []
    for iz in _noise_slices(grid, centre[2], half_slices):
        m = weighted_mean(img[iz], w)
        if not m > 0:
            raise ValueError(f"image: the mean in the noise ROI of slice {iz} is {m!r}, not positive; the "
                             f"relative noise (std / mean) is undefined")
        vals.append(weighted_std(img[iz], w) / m)
    return float(np.mean(vals))


@dataclass
class ContrastNoiseCurve:
    """CRC and noise of a sequence of images (e.g. the stored iterates of one reconstruction).

    ``iterations``, ``crc`` and ``noise`` (relative, >= 0) are finite 1D sequences of one common
    length n; ``per_sphere`` is ``(n, n_spheres)`` finite values (or empty); ``label`` a string.
    They are checked and stored as float64 arrays; errors name the field.
    """

    iterations: np.ndarray
    crc: np.ndarray
    noise: np.ndarray
    per_sphere: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))   # (n_images, n_spheres)
    label: str = ""

    def __post_init__(self):
        n = len(_set_vector(self, "iterations"))
        for name in ("crc", "noise"):
            if len(_set_vector(self, name)) != n:
                raise ValueError(f"{name}: {len(getattr(self, name))} values for {n} iterations (one per iteration)")
        if np.any(self.noise < 0):
            raise ValueError(f"noise: expected relative noise values >= 0, got {self.noise.tolist()}")
        ps = real_array("per_sphere", self.per_sphere)
        if ps.size and (ps.ndim != 2 or ps.shape[0] != n):
            raise ValueError(f"per_sphere: expected shape ({n}, n_spheres), got {ps.shape}")
        self.per_sphere = ps
        if not isinstance(self.label, str):
            raise TypeError(f"label: expected a string, got {type(self.label).__name__}")


def _set_vector(obj, name: str) -> np.ndarray:
    v = _finite_vector(name, getattr(obj, name))
    setattr(obj, name, v)
    return v


def contrast_noise_curve(images, phantom_info, iterations: Optional[Sequence] = None, label: str = "", *,
                         axial: str = "linear", noise_diameter_mm: float = 50.0, half_slices: int = 0,
                         supersample: int = 10) -> ContrastNoiseCurve:
    """CRC and noise for every image.

    ``images`` is a list of images or a :class:`~directpet.recon.ReconResult` (its stored images
    and their iterations are used). ``iterations`` defaults to 1, 2, ... for a plain list.
    """
    _phantom_info(phantom_info)
    if hasattr(images, "images") and hasattr(images, "image_iterations"):
        iterations = images.image_iterations if iterations is None else iterations
        label = label or images.algorithm
        images = images.images
    if isinstance(images, (str, bytes)) or not hasattr(images, "__iter__") or hasattr(images, "dtype"):
        raise TypeError(f"images: expected a list of images or a ReconResult, got {type(images).__name__}")
    images = list(images)
    if not images:
        raise ValueError("images: empty (a ReconResult stores images only with store_every)")
    its = np.arange(1, len(images) + 1) if iterations is None else _finite_vector("iterations", iterations)
    if len(its) != len(images):
        raise ValueError(f"iterations: {len(its)} values for {len(images)} images")
    rois = SphereROIs.from_info(phantom_info, axial, supersample)
    res = [crc(im, phantom_info, rois=rois) for im in images]
    nz = [noise(im, phantom_info, noise_diameter_mm, half_slices=half_slices, supersample=supersample)
          for im in images]
    return ContrastNoiseCurve(its, np.array([r.mean for r in res]), np.array(nz),
                              np.array([r.per_sphere for r in res]), label)


@dataclass
class MatchedNoise:
    """Where one curve reaches the target noise (``status`` 'ok', 'not reached' or 'above at first')."""

    label: str
    iteration: float
    crc: float
    noise: float
    index: int
    status: str


def pick_matched_noise(curves, target: float = 0.08) -> List[MatchedNoise]:
    """For each curve, the (interpolated) iteration and CRC at which noise first reaches ``target``.

    Linear interpolation between the two stored points bracketing the first crossing;
    ``index`` is the stored image nearest to it (for image panels). A curve that never reaches the
    target gives NaN iteration and CRC by design ('not reached': the status says so, and plots skip
    it); one already above it at its first point gives that point ('above at first').

    ``target`` is a positive finite noise level; every curve must hold finite iterations, CRC and
    noise of one common, non-zero length (errors name ``curves`` or ``target``).
    """
    if isinstance(curves, ContrastNoiseCurve):
        curves = [curves]
    if isinstance(curves, (str, bytes)) or not hasattr(curves, "__iter__"):
        raise TypeError(f"curves: expected ContrastNoiseCurve objects, got {type(curves).__name__}")
    curves = list(curves)
    target = real_number("target", target, positive=True)
    out = []
    for k, c in enumerate(curves):
        if not isinstance(c, ContrastNoiseCurve):
            raise TypeError(f"curves: entry {k} is a {type(c).__name__}, expected a ContrastNoiseCurve")
        n, it, cr = (_finite_vector(f"curves: entry {k} {name}", getattr(c, name))
                     for name in ("noise", "iterations", "crc"))
        if not len(n) or not len(n) == len(it) == len(cr):
            raise ValueError(f"curves: entry {k} has {len(it)} iterations, {len(cr)} CRC and {len(n)} noise "
                             f"values; expected one common, non-zero number")
        above = np.nonzero(n >= target)[0]
        if above.size == 0:
            out.append(MatchedNoise(c.label, np.nan, np.nan, target, int(len(n) - 1), "not reached"))
            continue
        j = int(above[0])
        if j == 0:
            out.append(MatchedNoise(c.label, float(it[0]), float(cr[0]), float(n[0]), 0, "above at first"))
            continue
        t = (target - n[j - 1]) / (n[j] - n[j - 1])
        out.append(MatchedNoise(c.label, float(it[j - 1] + t * (it[j] - it[j - 1])),
                                float(cr[j - 1] + t * (cr[j] - cr[j - 1])), float(target),
                                j if t >= 0.5 else j - 1, "ok"))
    return out


def _finite_vector(name: str, values) -> np.ndarray:
    """values as a 1D float64 array of real, finite numbers; errors name ``name``."""
    a = real_array(name, values)
    if a.ndim > 1:
        raise ValueError(f"{name}: expected a 1D sequence of numbers, got shape {a.shape}")
    return a.reshape(-1)
