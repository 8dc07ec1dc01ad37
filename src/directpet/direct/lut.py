"""The three DIRECT look-up tables of one view (:ref:`physics-direct`), built in C++ and kept as NumPy.

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
from .._checks import expect_instance, flag, integer, integer_array, real_values, require_memory
from ..geometry import ImageGrid
from .geometry import View
from .model import SRKernel, sigma_from_fwhm, tof_fwhm_mm


@dataclass(frozen=True)
class DirectLUT:
    """The DIRECT look-up tables of one view on one image grid (see the module docstring).

    ``lormap`` (ny, nx) int32 kernel identifiers, ``offsets`` (N, 3) int32 support (dz, dy, dx),
    ``flip`` (N,) int32 index of the negated offset, ``values`` (n_kernels, N) float32 kernel values
    (unit row sums); ``a0`` is the identifier offset and ``epsilon`` the bin width (mm) of the signed
    LOR distance in ``lormap = floor(s / epsilon) + a0``; ``s_centres`` and ``sigma_radial``
    (n_kernels,) give each identifier's bin centre and radial sigma (mm); ``semi_axes`` the (TOF,
    radial, axial) semi-axes (mm) of the support ellipsoid. Made by ``build_lut``.
    """

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

    def __post_init__(self):
        """Every way of making a LUT (build_lut, with_values, dataclasses.replace, by hand) passes
        here: the tables must be NumPy arrays of the compiled kernels' dtypes and ranks, and the
        values finite (a NaN would spread through every projection). Index ranges (lormap, flip)
        are checked in C++ before each projection."""
        expect_instance(self.view, View, "view")
        expect_instance(self.grid, ImageGrid, "grid")
        for name, dtype, ndim in (("lormap", np.int32, 2), ("offsets", np.int32, 2), ("flip", np.int32, 1),
                                  ("values", np.float32, 2)):
            a = getattr(self, name)
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
            if a.dtype != dtype:
                raise TypeError(f"{name}: expected dtype {np.dtype(dtype).name}, got {a.dtype}")
            if a.ndim != ndim:
                raise ValueError(f"{name}: expected a {ndim}-D array, got shape {a.shape}")
        if not np.all(np.isfinite(self.values)):
            raise ValueError("values: the kernel values contain NaN or inf")

    @property
    def n_offsets(self) -> int:
        """N, the number of offsets in the kernel support (rows of ``offsets``)."""
        return int(self.offsets.shape[0])

    @property
    def n_kernels(self) -> int:
        """The number of kernel identifiers (rows of ``values``)."""
        return int(self.values.shape[0])

    @property
    def half_extent(self) -> tuple:
        """Largest ``|offset|`` along (z, y, x), voxels."""
        return tuple(int(v) for v in np.abs(self.offsets).max(axis=0))

    def kernel_volume(self, identifier: int) -> np.ndarray:
        """The kernel of one identifier (an integer in [0, n_kernels)) laid out on a
        (2hz+1, 2hy+1, 2hx+1) lattice (float64)."""
        identifier = integer("identifier", identifier, lo=0, hi=self.n_kernels - 1)
        h = self.half_extent
        k = np.zeros(tuple(2 * e + 1 for e in h))
        o = self.offsets
        k[o[:, 0] + h[0], o[:, 1] + h[1], o[:, 2] + h[2]] = self.values[identifier]
        return k

    def with_values(self, values, normalize: bool = True) -> "DirectLUT":
        """A copy with arbitrary kernel values (n_kernels, N): real, finite and >= 0 (the rule of
        :func:`build_lut`'s custom values); rows are normalised to unit sum by default."""
        normalize = flag("normalize", normalize)
        v = real_values("values", values, np).astype(np.float64)
        if v.shape != self.values.shape:
            raise ValueError(f"values: expected shape {self.values.shape}, got {v.shape}")
        return replace(self, values=_kernel_table(v, "values", normalize))


def build_lut(grid: ImageGrid, view: View, kernel: SRKernel) -> DirectLUT:
    """Build LORmap, mSR (+ flip) and mSRval for one view."""
    expect_instance(grid, ImageGrid, "grid")   # its extents are below 2**31 (ImageGrid)
    expect_instance(view, View, "view")
    expect_instance(kernel, SRKernel, "kernel")
    shape, vs = list(grid.shape), list(grid.voxel_size)
    eps = float(kernel.epsilon)
    _check_identifiers(grid, eps)

    raw = _core.direct_lormap(shape, vs, view.phi, eps, 0)
    a0 = -int(raw.min())
    lormap = np.ascontiguousarray(raw + a0, dtype=np.int32)
    n_kernels = int(lormap.max()) + 1
    s_centres = (np.arange(n_kernels) - a0 + 0.5) * eps

    # the grid's largest LOR distance (half a voxel for a one-voxel transaxial grid, whose only centre is on the axis)
    s_max = kernel.s_max if kernel.s_max is not None else max(grid.max_transaxial_radius, 0.5 * min(vs[1:]))
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

    _check_support(grid, view, kernel, semi)
    offsets = _core.direct_support(shape, vs, view.phi, view.theta, *semi)
    n = offsets.shape[0]
    # mSRval is n_kernels x N float32 (custom values pass through float64 copies first)
    per_value = 4 if kernel.values is None else 28
    require_memory("kernel", float(n_kernels) * n * per_value,
                   f"the LUT of one view ({n_kernels} kernel identifiers at epsilon={eps:g} mm x {n} support "
                   f"offsets at truncation={k:g})")
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


#: The C++ support enumeration refuses bounding boxes of this many candidate offsets or more.
MAX_SUPPORT_BOX = 2.0e8


def _check_identifiers(grid: ImageGrid, eps: float) -> None:
    """The LORmap identifiers are int32 and each carries a few float64 parameters: refuse an
    epsilon so small that their number (at most 2 max|s| / epsilon + 2) cannot be held."""
    n_ids = 2.0 * grid.max_transaxial_radius / eps + 2.0
    if n_ids >= 2**31:
        raise ValueError(f"kernel: epsilon={eps:g} mm gives about {n_ids:.3g} kernel identifiers on this grid, more "
                         "than an int32 LORmap holds; use a larger epsilon (the LOR-distance bin, mm)")
    require_memory("kernel", 160.0 * n_ids, f"the parameters of {n_ids:.0f} kernel identifiers (epsilon={eps:g} mm)")


def _support_box(grid: ImageGrid, view: View, semi) -> float:
    """The number of lattice offsets in the bounding box of the support ellipsoid with semi-axes
    ``semi`` (tof, radial, axial; mm), as the C++ enumeration computes it (the ellipsoid's
    half-width along lattice axis k is ``sqrt(sum_dir R_dir^2 e_dir,k^2)``)."""
    axes = np.stack([view.direction, view.radial_axis, view.axial_axis])          # (dir, xyz)
    width = np.sqrt(((np.asarray(semi, dtype=np.float64)[:, None] * axes) ** 2).sum(axis=0))  # x, y, z
    vz, vy, vx = grid.voxel_size
    half = [float(np.floor(w / v + 1e-9)) for w, v in zip(width[::-1], (vz, vy, vx))]
    return float(np.prod([2.0 * h + 1.0 for h in half]))


def _check_support(grid: ImageGrid, view: View, kernel: SRKernel, semi) -> None:
    """Refuse a support the enumeration cannot hold, naming the kernel, before calling it."""
    box = _support_box(grid, view, semi)
    if box >= MAX_SUPPORT_BOX:
        raise ValueError(f"kernel: its support ellipsoid (semi-axes {semi[0]:.4g}, {semi[1]:.4g}, {semi[2]:.4g} mm "
                         f"at truncation={kernel.truncation:g}) spans {box:.3g} candidate offsets on voxels of "
                         f"{grid.voxel_size} mm, more than the {MAX_SUPPORT_BOX:.0e} allowed; reduce the widths "
                         "or the truncation")
    n_est = min(box, 4.0 / 3.0 * np.pi * float(np.prod(semi)) / float(np.prod(grid.voxel_size)) + 1.0)
    require_memory("kernel", 24.0 * n_est,
                   f"the support of about {n_est:.0f} offsets (truncation={kernel.truncation:g})")


def local_coordinates(grid: ImageGrid, view: View, offsets: np.ndarray):
    """Offsets (N, 3) (dz, dy, dx) integer voxel steps in mm along the view's (TOF, radial, axial)
    axes: three (N,) arrays."""
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(view, View, "view")
    offsets = integer_array("offsets", offsets)
    if offsets.ndim != 2 or offsets.shape[1] != 3:
        raise ValueError(f"offsets: expected an (N, 3) array of (dz, dy, dx) voxel steps, got shape {offsets.shape}")
    vz, vy, vx = grid.voxel_size
    d = np.stack([offsets[:, 2] * vx, offsets[:, 1] * vy, offsets[:, 0] * vz], axis=1).astype(np.float64)
    return d @ view.direction, d @ view.radial_axis, d @ view.axial_axis


def _custom_values(kernel, grid, view, offsets, s_centres):
    t, r, a = local_coordinates(grid, view, offsets)
    shape = (s_centres.size, offsets.shape[0])
    try:
        v = np.broadcast_to(np.asarray(kernel.values(t, r, a, s_centres[:, None]), dtype=np.float64), shape)
    except (TypeError, ValueError) as err:
        raise ValueError(f"values: the kernel callable must return numbers broadcastable to (n_kernels, N) = "
                         f"{shape} ({type(err).__name__}: {err})") from None
    return _kernel_table(v, "values (returned by the kernel callable)", True)


def _kernel_table(v: np.ndarray, what: str, normalize: bool) -> np.ndarray:
    """A float64 kernel table (n_kernels, N) as mSRval: finite and >= 0 (a kernel is a density),
    rows normalised to unit sum when ``normalize`` (an all-zero row cannot be); float32."""
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what}: contains NaN or inf")
    if np.any(v < 0):
        raise ValueError(f"{what}: expected kernel values >= 0 (a kernel is a density), got min {v.min():g}")
    if normalize:
        sums = v.sum(axis=1, keepdims=True)
        if np.any(sums == 0):
            raise ValueError(f"{what}: a row sums to zero and cannot be normalised to unit sum")
        v = v / sums
    return np.ascontiguousarray(v, dtype=np.float32)
