"""Regions of interest with partial-voxel weights ([HA]_ §6.1; :ref:`physics-evaluation`).

2D ROIs live in one transaxial slice: weights ``(ny, nx)`` are the fraction of each pixel's area
inside the region, estimated with ``supersample x supersample`` sub-pixels. Axially, an ROI is
evaluated in the slice(s) its centre z selects (:func:`slice_weights`).

Coordinates: ROI centres are ``(x, y)`` or ``(x, y, z)`` in mm (the same convention as phantoms);
images are ``(nz, ny, nx)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from .._checks import expect_attributes, expect_instance, integer, real_array, real_number, real_values, require_memory
from ..geometry import ImageGrid

#: Background annulus of [HA]: inner diameter = sphere diameter + 14 mm, 8 mm thick.
ANNULUS_GAP_MM = 14.0
ANNULUS_THICKNESS_MM = 8.0


def circle_weights(grid: ImageGrid, centre_xy_mm, diameter_mm: float, supersample: int = 10) -> np.ndarray:
    """Area fraction (ny, nx) float64 of each pixel inside a circle (centre (x, y) mm, diameter mm
    positive and finite, ``supersample`` a positive integer)."""
    expect_instance(grid, ImageGrid, "grid")
    diameter_mm = real_number("diameter_mm", diameter_mm, positive=True)
    return _circle(grid, _xy("centre_xy_mm", centre_xy_mm), diameter_mm, integer("supersample", supersample, lo=1))


def _circle(grid: ImageGrid, centre_xy, diameter_mm: float, ss: int) -> np.ndarray:
    """circle_weights of checked arguments (a diameter of 0 gives zeros: the annulus's inner circle)."""
    cx, cy = centre_xy
    r = 0.5 * diameter_mm
    vy, vx = grid.voxel_size[1], grid.voxel_size[2]
    out = np.zeros((grid.ny, grid.nx))
    # Only the pixels of the bounding box can be touched.
    iy0, iy1 = _span(grid.centres(1), vy, cy - r, cy + r)
    ix0, ix1 = _span(grid.centres(2), vx, cx - r, cx + r)
    if iy1 <= iy0 or ix1 <= ix0:
        return out
    # the sub-pixel test below holds about 24 bytes per sub-pixel of the box
    require_memory("supersample", 24.0 * (iy1 - iy0) * (ix1 - ix0) * float(ss) ** 2,
                   f"ROI weights with {ss} x {ss} sub-pixels per pixel")
    sub = (np.arange(ss) + 0.5) / ss - 0.5
    y = (grid.centres(1)[iy0:iy1, None] + sub[None, :] * vy).ravel()
    x = (grid.centres(2)[ix0:ix1, None] + sub[None, :] * vx).ravel()
    ins = ((x[None, :] - cx) ** 2 + (y[:, None] - cy) ** 2 <= r * r).astype(np.float64)
    out[iy0:iy1, ix0:ix1] = ins.reshape(iy1 - iy0, ss, ix1 - ix0, ss).mean(axis=(1, 3))
    return out


def annulus_weights(grid: ImageGrid, centre_xy_mm, inner_diameter_mm: float, outer_diameter_mm: float,
                    supersample: int = 10) -> np.ndarray:
    """Area fraction (ny, nx) of each pixel inside an annulus (outer circle minus inner circle)."""
    expect_instance(grid, ImageGrid, "grid")
    inner_diameter_mm = real_number("inner_diameter_mm", inner_diameter_mm, nonnegative=True)
    outer_diameter_mm = real_number("outer_diameter_mm", outer_diameter_mm, positive=True)
    if outer_diameter_mm < inner_diameter_mm:
        raise ValueError(f"outer_diameter_mm ({outer_diameter_mm}) < inner_diameter_mm ({inner_diameter_mm})")
    centre, ss = _xy("centre_xy_mm", centre_xy_mm), integer("supersample", supersample, lo=1)
    return np.clip(_circle(grid, centre, outer_diameter_mm, ss) - _circle(grid, centre, inner_diameter_mm, ss),
                   0.0, 1.0)


def slice_weights(grid: ImageGrid, z_mm: float, axial: str = "linear") -> List[Tuple[int, float]]:
    """Slices ``[(iz, weight), ...]`` that represent the plane z = z_mm.

    ``axial='linear'``: linear interpolation between the two slices whose centres bracket z (one
    slice when z is on a slice centre). For an even number of slices and z = 0 this is the
    average of the two central slices. ``axial='nearest'``: the slice containing z.
    """
    expect_instance(grid, ImageGrid, "grid")
    nz, vz = grid.nz, grid.voxel_size[0]
    f = real_number("z_mm", z_mm) / vz + 0.5 * (nz - 1)        # continuous slice index, centres at integers
    if axial == "nearest":
        i = int(np.floor(f + 0.5))
        if not 0 <= i < nz:
            raise ValueError(f"z_mm: {z_mm} mm is outside the grid")
        return [(i, 1.0)]
    if axial != "linear":
        raise ValueError(f"axial: expected 'linear' or 'nearest', got {axial!r}")
    if not -1e-9 <= f <= nz - 1 + 1e-9:
        raise ValueError(f"z_mm: {z_mm} mm is outside the range of slice centres")
    f = min(max(f, 0.0), nz - 1.0)
    i0 = int(np.floor(f))
    w1 = f - i0
    if w1 < 1e-9 or i0 == nz - 1:
        return [(i0, 1.0)]
    return [(i0, 1.0 - w1), (i0 + 1, w1)]


def weighted_mean(plane: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean of a 2D plane."""
    sw = float(w.sum())
    if sw <= 0:
        raise ValueError("ROI: has no area inside the grid")
    return float(np.sum(plane * w) / sw)


def weighted_std(plane: np.ndarray, w: np.ndarray) -> float:
    """Weighted (population) standard deviation: sqrt(sum w (p - mean)^2 / sum w)."""
    m = weighted_mean(plane, w)
    return float(np.sqrt(np.sum(w * (plane - m) ** 2) / float(w.sum())))


def roi_mean(image: np.ndarray, weights2d: np.ndarray, slices) -> float:
    """``sum_iz a_iz * weighted_mean(image[iz], weights2d)`` for slices ``[(iz, a_iz), ...]``.

    Parameters
    ----------
    image : (nz, ny, nx) real (float or integer) array; the slices used must be finite (a NaN or
        inf is a ValueError naming ``image``).
    weights2d : (ny, nx) real, finite weights >= 0, not all zero (e.g. :func:`circle_weights`).
    slices : pairs ``(iz, a_iz)``, iz an integer in ``[0, nz)``, a_iz a finite weight >= 0 (e.g.
        :func:`slice_weights`); no slices give 0.
    """
    image = real_values("image", image, np, finite=False)
    if image.ndim != 3:
        raise ValueError(f"image: expected an (nz, ny, nx) array, got shape {image.shape}")
    w = real_array("weights2d", weights2d)
    if w.shape != image.shape[1:]:
        raise ValueError(f"weights2d: expected shape {image.shape[1:]} (ny, nx) of the image, got {w.shape}")
    if np.any(w < 0) or not np.any(w > 0):
        raise ValueError("weights2d: expected weights >= 0, not all zero (an ROI with no area inside the grid "
                         "has no mean)")
    pairs = _slice_pairs(slices, image.shape[0])
    for iz, _ in pairs:
        if not np.isfinite(image[iz]).all():
            raise ValueError(f"image: contains NaN or inf (slice {iz})")
    return float(sum(a * weighted_mean(image[iz], w) for iz, a in pairs))


def _slice_pairs(slices, nz: int) -> List[Tuple[int, float]]:
    """slices ``[(iz, a), ...]`` checked: iz an integer in [0, nz), a a finite number >= 0."""
    if isinstance(slices, (str, bytes)) or not hasattr(slices, "__iter__"):
        raise TypeError(f"slices: expected pairs (iz, weight) (see slice_weights), got {type(slices).__name__}")
    pairs = []
    for k, pair in enumerate(slices):
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise TypeError(f"slices: entry {k} is not a pair (iz, weight): {pair!r}")
        pairs.append((integer(f"slices: entry {k} index", pair[0], lo=0, hi=nz - 1),
                      real_number(f"slices: entry {k} weight", pair[1], nonnegative=True)))
    return pairs


@dataclass
class SphereROIs:
    """The [HA] ROIs of every sphere of a phantom, built once and applied to many images.

    ``sphere[i]`` / ``background[i]``: (ny, nx) weights of the sphere circle (the sphere diameter)
    and of the background annulus (inner = diameter + 14 mm, 8 mm thick) of sphere i;
    ``slices[i]``: its :func:`slice_weights`.
    """

    sphere: list
    background: list
    slices: list

    @classmethod
    def from_info(cls, info, axial: str = "linear", supersample: int = 10, sphere_roi_diameter_mm=None,
                  annulus_gap_mm: float = ANNULUS_GAP_MM, annulus_thickness_mm: float = ANNULUS_THICKNESS_MM):
        """ROIs for the spheres of a :class:`~directpet.sim.phantoms.PhantomInfo`.

        ``sphere_roi_diameter_mm`` overrides the sphere ROI diameter (default: each sphere's).
        """
        expect_attributes(info, ("grid", "sphere_centres_mm", "sphere_diameters_mm"), "info", "a PhantomInfo")
        grid = expect_instance(info.grid, ImageGrid, "info.grid")
        annulus_gap_mm = real_number("annulus_gap_mm", annulus_gap_mm, nonnegative=True)
        annulus_thickness_mm = real_number("annulus_thickness_mm", annulus_thickness_mm, positive=True)
        if sphere_roi_diameter_mm is not None:
            sphere_roi_diameter_mm = real_number("sphere_roi_diameter_mm", sphere_roi_diameter_mm, positive=True)
        sph, bg, sl = [], [], []
        for c, d in zip(np.asarray(info.sphere_centres_mm), np.asarray(info.sphere_diameters_mm)):
            d_roi = float(d) if sphere_roi_diameter_mm is None else float(sphere_roi_diameter_mm)
            inner = float(d) + annulus_gap_mm
            sph.append(circle_weights(grid, c[:2], d_roi, supersample))
            bg.append(annulus_weights(grid, c[:2], inner, inner + 2 * annulus_thickness_mm, supersample))
            sl.append(slice_weights(grid, c[2], axial))
        return cls(sph, bg, sl)

    def means(self, image: np.ndarray):
        """(sphere means, background means), arrays of shape (n_spheres,), of a finite (nz, ny, nx)
        image on the ROIs' grid (NaN or inf in a slice used: see :func:`roi_mean`)."""
        image = real_values("image", image, np, finite=False)
        if self.sphere and (image.ndim != 3 or image.shape[1:] != self.sphere[0].shape):
            raise ValueError(f"image: expected (nz, ny, nx) with (ny, nx) = {self.sphere[0].shape}, got "
                             f"shape {image.shape}")
        ps = np.array([roi_mean(image, w, s) for w, s in zip(self.sphere, self.slices)])
        pb = np.array([roi_mean(image, w, s) for w, s in zip(self.background, self.slices)])
        return ps, pb


def _xy(name: str, p) -> Tuple[float, float]:
    """An (x, y) point in mm as two finite floats; errors name ``name``."""
    if isinstance(p, (str, bytes)) or not hasattr(p, "__len__"):
        raise TypeError(f"{name}: expected an (x, y) point in mm, got {type(p).__name__}")
    if len(p) not in (2, 3):                   # (x, y) or an (x, y, z) centre whose z is not used
        raise ValueError(f"{name}: expected an (x, y) point in mm, got {p!r}")
    return real_number(f"{name}[0]", p[0]), real_number(f"{name}[1]", p[1])


def _span(centres, v, lo, hi):
    """Index range [i0, i1) of the pixels whose extent overlaps [lo, hi]."""
    i0 = int(np.searchsorted(centres + 0.5 * v, lo, side="left"))
    i1 = int(np.searchsorted(centres - 0.5 * v, hi, side="right"))
    return max(i0, 0), min(i1, len(centres))
