"""The three DIRECT look-up tables of one view (science.md 1.6), built in C++ and kept as NumPy.

``lormap`` (ny, nx) int32
    Kernel identifier of every transaxial voxel position: ``floor(s / epsilon) + a0`` with s the
    signed LOR distance of the voxel centre. Shared by all z (and by tilted views of one azimuth).
``offsets`` (N, 3) int32, (dz, dy, dx)
    mSR: the kernel support, an ellipsoid with the largest widths of the view, in point-symmetric
    order (``offsets[N - 1 - i] == -offsets[i]``).
``flip`` (N,) int32
    Index of the negated offset (explicitly stored; equals ``N - 1 - i``).
``values`` (n_kernels, N) float32
    mSRval: the kernel of each identifier on the support, unit sum per row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import _core
from .._checks import expect_instance
from ..geometry import ImageGrid
from .kernels import SRKernel, sigma_from_fwhm, tof_fwhm_mm
from .views import View


@dataclass(frozen=True)
class DirectLUT:
    view: View
    grid: ImageGrid
    lormap: np.ndarray
    offsets: np.ndarray
    flip: np.ndarray
    values: np.ndarray
    a0: int
    epsilon: float
    s_centres: np.ndarray       # (n_kernels,) signed LOR distance (mm) of each identifier's bin centre
    sigma_radial: np.ndarray    # (n_kernels,) radial sigma (mm) used for each identifier
    semi_axes: tuple            # (tof, radial, axial) semi-axes of the support ellipsoid, mm

    @property
    def n_offsets(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def n_kernels(self) -> int:
        return int(self.values.shape[0])

    @property
    def half_extent(self) -> tuple:
        """Largest |offset| along (z, y, x), voxels."""
        return tuple(int(v) for v in np.abs(self.offsets).max(axis=0))

    def kernel_volume(self, identifier: int) -> np.ndarray:
        """The kernel of one identifier laid out on a (2hz+1, 2hy+1, 2hx+1) lattice (float64)."""
        if not 0 <= identifier < self.n_kernels:
            raise ValueError(f"identifier: {identifier} outside [0, {self.n_kernels})")
        h = self.half_extent
        k = np.zeros(tuple(2 * e + 1 for e in h))
        o = self.offsets
        k[o[:, 0] + h[0], o[:, 1] + h[1], o[:, 2] + h[2]] = self.values[identifier]
        return k

    def with_values(self, values, normalize: bool = True) -> "DirectLUT":
        """A copy with arbitrary kernel values (n_kernels, N); rows are normalised to unit sum by default."""
        v = np.array(values, dtype=np.float64)
        if v.shape != self.values.shape:
            raise ValueError(f"values: expected shape {self.values.shape}, got {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError("values: must be finite")
        if normalize:
            sums = v.sum(axis=1, keepdims=True)
            if np.any(sums == 0):
                raise ValueError("values: a row sums to zero and cannot be normalised")
            v = v / sums
        return replace(self, values=np.ascontiguousarray(v, dtype=np.float32))


def build_lut(grid: ImageGrid, view: View, kernel: SRKernel) -> DirectLUT:
    """Build LORmap, mSR (+ flip) and mSRval for one view."""
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(view, View, "view")
    expect_instance(kernel, SRKernel, "kernel")
    shape, vs = list(grid.shape), list(grid.voxel_size)
    eps = float(kernel.epsilon)

    raw = _core.direct_lormap(shape, vs, view.phi, eps, 0)
    a0 = -int(raw.min())
    lormap = np.ascontiguousarray(raw + a0, dtype=np.int32)
    n_kernels = int(lormap.max()) + 1
    s_centres = (np.arange(n_kernels) - a0 + 0.5) * eps

    s_max = kernel.s_max if kernel.s_max is not None else grid.max_transaxial_radius
    e_t, e_r, e_a = view.direction, view.radial_axis, view.axial_axis
    var_t = sigma_from_fwhm(tof_fwhm_mm(kernel.tof_fwhm_ps)) ** 2 + kernel.box_variance(e_t, grid.voxel_size)
    var_a = sigma_from_fwhm(kernel.axial_fwhm) ** 2 + kernel.box_variance(e_a, grid.voxel_size)
    var_r = sigma_from_fwhm(kernel.radial_fwhm_at(s_centres, s_max)) ** 2 + kernel.box_variance(e_r, grid.voxel_size)
    sig_t, sig_a, sig_r = np.sqrt(var_t), np.sqrt(var_a), np.sqrt(var_r)

    k = float(kernel.truncation)
    if kernel.asymmetric:
        delta = sig_r if kernel.wide_shift is None else np.full_like(sig_r, kernel.wide_shift)
        wide_shift = -np.sign(s_centres) * delta
        narrow = np.full_like(sig_r, kernel.narrow_weight)
        semi_r = float(np.max(k * 2.0 * sig_r + delta))
    else:
        wide_shift = np.zeros_like(sig_r)
        narrow = np.ones_like(sig_r)
        semi_r = float(k * sig_r.max())
    semi = (k * sig_t, semi_r, k * sig_a)

    offsets = _core.direct_support(shape, vs, view.phi, view.theta, *semi)
    n = offsets.shape[0]
    flip = np.arange(n - 1, -1, -1, dtype=np.int32)
    if not np.array_equal(offsets[flip], -offsets):
        raise RuntimeError("internal error: mSR is not point-symmetric")

    if kernel.values is None:
        values = _core.direct_kernel_values(shape, vs, view.phi, view.theta, offsets, sig_t, sig_a,
                                            sig_r.tolist(), narrow.tolist(), wide_shift.tolist())
    else:
        values = _custom_values(kernel, grid, view, offsets, s_centres)

    return DirectLUT(view=view, grid=grid, lormap=lormap, offsets=offsets, flip=flip, values=values,
                     a0=a0, epsilon=eps, s_centres=s_centres, sigma_radial=sig_r, semi_axes=semi)


def local_coordinates(grid: ImageGrid, view: View, offsets: np.ndarray):
    """Offsets (N, 3) (dz, dy, dx) in mm along the view's (TOF, radial, axial) axes: three (N,) arrays."""
    vz, vy, vx = grid.voxel_size
    d = np.stack([offsets[:, 2] * vx, offsets[:, 1] * vy, offsets[:, 0] * vz], axis=1).astype(np.float64)
    return d @ view.direction, d @ view.radial_axis, d @ view.axial_axis


def _custom_values(kernel, grid, view, offsets, s_centres):
    t, r, a = local_coordinates(grid, view, offsets)
    v = np.asarray(kernel.values(t, r, a, s_centres[:, None]), dtype=np.float64)
    v = np.broadcast_to(v, (s_centres.size, offsets.shape[0]))
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("values: the kernel callable returned negative or non-finite values")
    sums = v.sum(axis=1, keepdims=True)
    if np.any(sums == 0):
        raise ValueError("values: the kernel callable returned an all-zero row")
    return np.ascontiguousarray(v / sums, dtype=np.float32)
