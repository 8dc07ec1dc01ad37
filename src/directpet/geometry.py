"""Image lattice shared by images and DIRECT histo-images."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

import numpy as np

from ._checks import integer, real_array, real_number

#: FWHM = FWHM_PER_SIGMA * sigma for a Gaussian (every family's blurs are given as FWHM).
FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))


def _three(name: str, value, expected: str) -> tuple:
    """value as a tuple of three entries: a TypeError for a non-sequence (a string, a dict or a set
    included: their entries have no order, or are not numbers), a ValueError for another length."""
    if isinstance(value, (str, bytes, Mapping, Set)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}")
    if len(value) != 3:
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class ImageGrid:
    """A voxel lattice centred on the scanner axis.

    Parameters
    ----------
    shape : (nz, ny, nx) voxels.
    voxel_size : mm, a scalar or (vz, vy, vx).

    Voxel centres are ``x_i = (i - (nx - 1) / 2) * vx`` (likewise y, z): symmetric about the axis.
    Each extent is below 2**31 (the compiled kernels index an axis with 32-bit integers).
    """

    shape: tuple
    voxel_size: tuple = (4.0, 4.0, 4.0)

    def __post_init__(self):
        shape = _three("shape", self.shape, "three positive integers (nz, ny, nx)")
        vs = self.voxel_size if np.ndim(self.voxel_size) else (self.voxel_size,) * 3
        vs = _three("voxel_size", vs, "a positive finite size (mm) or three of them (vz, vy, vx)")
        object.__setattr__(self, "shape", tuple(integer(f"shape[{i}]", n, lo=1, hi=2**31 - 1)
                                                 for i, n in enumerate(shape)))
        object.__setattr__(self, "voxel_size", tuple(real_number(f"voxel_size[{i}]", v, positive=True)
                                                     for i, v in enumerate(vs)))

    @property
    def nz(self) -> int:
        """Slices (voxels along z, axis 0)."""
        return self.shape[0]

    @property
    def ny(self) -> int:
        """Rows (voxels along y, axis 1)."""
        return self.shape[1]

    @property
    def nx(self) -> int:
        """Columns (voxels along x, axis 2)."""
        return self.shape[2]

    @property
    def n_voxels(self) -> int:
        """Voxels in the grid, ``nz * ny * nx``."""
        return self.nz * self.ny * self.nx

    def centres(self, axis: int) -> np.ndarray:
        """Voxel-centre coordinates (mm) along axis 0 (z), 1 (y) or 2 (x)."""
        if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)) or not 0 <= axis < 3:
            raise ValueError(f"axis: expected 0 (z), 1 (y) or 2 (x), got {axis!r}")
        n, v = self.shape[axis], self.voxel_size[axis]
        return (np.arange(n) - 0.5 * (n - 1)) * v

    @property
    def max_transaxial_radius(self) -> float:
        """Largest distance (mm) of a voxel centre from the scanner axis: the largest absolute LOR distance."""
        return float(np.hypot(self.centres(2)[-1], self.centres(1)[-1]))

    def index_of(self, z_mm, y_mm, x_mm):
        """Indices (iz, iy, ix), int64, of the voxels containing points in mm (finite real numbers or
        arrays; not bounds-checked: a point outside the grid gives an index outside [0, n)). A
        coordinate whose index would not fit int64 (beyond about 1e18 voxels away) is a ValueError
        naming it."""
        out = []
        for axis, (name, c) in enumerate(zip(("z_mm", "y_mm", "x_mm"), (z_mm, y_mm, x_mm))):
            n, v = self.shape[axis], self.voxel_size[axis]
            with np.errstate(over="ignore"):
                f = np.floor(real_array(name, c) / v + 0.5 * n)
            if not np.all(np.abs(f) < 2.0**62):
                raise ValueError(f"{name}: {c!r} mm is too far from the grid for a voxel index")
            out.append(f.astype(np.int64))
        return tuple(out)


def centred_coordinate(arg: str, count: str, spacing: str, doc: str):
    """A scanner method ``f(self, index)`` returning ``(index - (n - 1) / 2) * step`` in mm, ``n`` and
    ``step`` the scanner's attributes named ``count`` and ``spacing``: the position of an index on a
    lattice centred on 0. Indices are real (fractional or out of range allowed) and may be arrays;
    None, strings and NaN are errors naming ``arg``. ``doc`` is the method's docstring."""
    def coordinate(self, index) -> np.ndarray:
        return (real_array(arg, index) - 0.5 * (getattr(self, count) - 1)) * getattr(self, spacing)

    coordinate.__doc__ = doc
    return coordinate
