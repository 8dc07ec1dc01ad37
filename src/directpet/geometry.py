"""Image lattice shared by images and DIRECT histo-images."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: FWHM = FWHM_PER_SIGMA * sigma for a Gaussian (every family's blurs are given as FWHM).
FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))


@dataclass(frozen=True)
class ImageGrid:
    """A voxel lattice centred on the scanner axis.

    Parameters
    ----------
    shape : (nz, ny, nx) voxels.
    voxel_size : mm, a scalar or (vz, vy, vx).

    Voxel centres are ``x_i = (i - (nx - 1) / 2) * vx`` (likewise y, z): symmetric about the axis.
    """

    shape: tuple
    voxel_size: tuple = (4.0, 4.0, 4.0)

    def __post_init__(self):
        shape = tuple(int(n) for n in np.atleast_1d(self.shape))
        if len(shape) != 3 or any(n <= 0 for n in shape):
            raise ValueError(f"shape: expected three positive extents (nz, ny, nx), got {self.shape!r}")
        vs = np.broadcast_to(np.asarray(self.voxel_size, dtype=float), (3,))
        if not np.all(np.isfinite(vs)) or np.any(vs <= 0):
            raise ValueError(f"voxel_size: expected positive finite mm, got {self.voxel_size!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "voxel_size", tuple(float(v) for v in vs))

    @property
    def nz(self) -> int:
        return self.shape[0]

    @property
    def ny(self) -> int:
        return self.shape[1]

    @property
    def nx(self) -> int:
        return self.shape[2]

    @property
    def n_voxels(self) -> int:
        return self.nz * self.ny * self.nx

    def centres(self, axis: int) -> np.ndarray:
        """Voxel-centre coordinates (mm) along axis 0 (z), 1 (y) or 2 (x)."""
        n, v = self.shape[axis], self.voxel_size[axis]
        return (np.arange(n) - 0.5 * (n - 1)) * v

    @property
    def max_transaxial_radius(self) -> float:
        """Largest distance (mm) of a voxel centre from the scanner axis: the largest |LOR distance|."""
        return float(np.hypot(self.centres(2)[-1], self.centres(1)[-1]))

    def index_of(self, z_mm, y_mm, x_mm):
        """Nearest voxel indices (iz, iy, ix) of points in mm (arrays allowed, not bounds-checked)."""
        out = []
        for axis, c in enumerate((z_mm, y_mm, x_mm)):
            n, v = self.shape[axis], self.voxel_size[axis]
            out.append(np.floor(np.asarray(c) / v + 0.5 * n).astype(np.int64))
        return tuple(out)
