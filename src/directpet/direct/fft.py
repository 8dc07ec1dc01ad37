"""FFT projectors of DIRECT for invariant kernels (:ref:`physics-direct`).

For a shift-invariant kernel K_v the DIRECT forward projection is a convolution,
``H_v x = K_v * x``, and the back projection the correlation ``H_v^T y = K_v (star) y``; both are
done with FFTs on a zero-padded grid (FFTW3 on the CPU, cuFFT on the GPU; the shared engine is
csrc/direct/fft*.{hpp,cpp,cu}). Two modes:

``mode="spatial-exact"``
    The spectrum is the DFT of the *same* truncated, unit-sum lattice kernel that
    :class:`~directpet.direct.HistoImageProjector` uses (``build_lut(...).values``), laid out on the
    padded grid with wrap-around for negative offsets. With enough padding (the default) the result
    equals the spatial projector to float32 rounding. Requires an invariant kernel (all LUT rows
    equal); asymmetric-but-invariant kernels are fine (the back projection uses conj(K^)).
``mode="spectral"``
    The paper's FFT reference: the analytic Gaussian transform
    ``K^(w) = exp(-1/2 sum_dir sigma_dir^2 (w . e_dir)^2)`` sampled on the FFT grid (w in rad/mm),
    so the kernel is never truncated in space but is cut at the Nyquist frequency, which shows as
    small Gibbs ripples (negative lobes) along the short LOR axes. Needs a symmetric invariant
    Gaussian kernel (``kernel.is_symmetric_invariant``).

Padding. For N voxels on an axis and a kernel half-extent h (largest ``|offset|`` of mSR on that axis,
capped at N - 1 because longer offsets never couple two voxels of the image), a cyclic length
``M >= N + h`` makes the cyclic convolution equal the linear one on the N outputs. ``padding="auto"``
rounds that minimum up to an FFT-friendly size (prime factors 2, 3, 5, 7, which FFTW and cuFFT handle
fastest). An explicit ``padding=(Mz, My, Mx)`` is used as given (each at least the image extent); if
it is below the minimum the convolution *wraps around*: kernel mass that leaves one face of the
padded box re-enters on the opposite face -- the artefact the paper shows at the top/bottom edges.
The operator stays an exact adjoint pair either way; ``op.wraps`` says whether it differs from the
spatial projector.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Optional

import numpy as np

from .. import _core
from .._backend import cuda_module
from .._checks import require_host_arrays, require_memory
from ..geometry import ImageGrid
from .base import ViewProjector, ViewsLike
from .geometry import View
from .lut import build_lut
from .model import SRKernel, sigma_from_fwhm, tof_fwhm_mm

MODES = ("spatial-exact", "spectral")
PLANNERS = ("measure", "estimate")
FFT_PRIMES = (2, 3, 5, 7)


# --- padding --------------------------------------------------------------------------------------
def fft_friendly_size(n: int) -> int:
    """Smallest m >= n whose prime factors are all in (2, 3, 5, 7)."""
    m = max(int(n), 1)
    while True:
        r = m
        for p in FFT_PRIMES:
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


def minimal_padding(shape, half_extent) -> tuple:
    """Smallest cyclic lengths (Mz, My, Mx) that give the linear convolution on the image:
    ``M = N + min(h, N - 1)`` per axis (offsets with ``|d| >= N`` never couple two image voxels)."""
    return tuple(int(n + min(int(h), n - 1)) for n, h in zip(shape, half_extent))


def auto_padding(shape, half_extent) -> tuple:
    """:func:`minimal_padding` rounded up per axis to an FFT-friendly length."""
    return tuple(fft_friendly_size(m) for m in minimal_padding(shape, half_extent))


def fft_bytes(padded, resident_terms: int) -> float:
    """Bytes an FFT engine on the padded grid (Mz, My, Mx) needs with ``resident_terms`` half
    spectra: the spectra (complex64, ``Mz My (Mx/2+1)`` each on the CPU, ``(Mz/2+1) My Mx`` on the GPU:
    the larger counts), a real and a complex scratch grid, and the float32 + float64 temporaries of
    :func:`layout_kernels` for one term."""
    mz, my, mx = (float(m) for m in padded)
    real, half = mz * my * mx, max(mz * my * (mx // 2 + 1), (mz // 2 + 1) * my * mx)
    return 8.0 * half * (resident_terms + 1) + 4.0 * real + 12.0 * real


def layout_kernels(offsets: np.ndarray, values: np.ndarray, shape, padded) -> np.ndarray:
    """Kernels on the padded grid: (r, Mz, My, Mx) float32, offset d at index ``d mod M``.

    offsets : (N, 3) int (dz, dy, dx) voxel offsets; values : (r, N) kernel values per term.
    Offsets with ``|d| >= n`` on some axis are dropped: they never couple two voxels of the image,
    and on a padded grid shorter than 2n they would alias onto offsets that do. Values landing on
    one index (only when the padding is smaller than the minimum, i.e. the wrap-around case) add up,
    which is exactly the cyclic convolution's periodised kernel.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    keep = np.all(np.abs(offsets) < np.asarray(shape)[None, :], axis=1)
    o = offsets[keep]
    mz, my, mx = (int(m) for m in padded)
    flat = ((o[:, 0] % mz) * my + (o[:, 1] % my)) * mx + (o[:, 2] % mx)
    out = np.empty((values.shape[0], mz * my * mx), dtype=np.float32)
    for j, row in enumerate(values[:, keep]):
        out[j] = np.bincount(flat, weights=row, minlength=mz * my * mx)  # float64 sums, then cast
    return out.reshape((values.shape[0], mz, my, mx))


# --- the analytic Gaussian ------------------------------------------------------------------------
def gaussian_sigmas(grid: ImageGrid, view: View, kernel: SRKernel) -> tuple:
    """(sigma_tof, sigma_radial, sigma_axial) in mm of an invariant Gaussian kernel, exactly as
    :func:`~directpet.direct.build_lut` uses them (including the optional voxel-box variance)."""
    e_t, e_r, e_a = view.direction, view.radial_axis, view.axial_axis
    s_max = kernel.s_max if kernel.s_max is not None else grid.max_transaxial_radius
    var_t = sigma_from_fwhm(tof_fwhm_mm(kernel.tof_fwhm_ps)) ** 2 + kernel.box_variance(e_t, grid.voxel_size)
    var_r = sigma_from_fwhm(kernel.radial_fwhm_at(0.0, s_max)) ** 2 + kernel.box_variance(e_r, grid.voxel_size)
    var_a = sigma_from_fwhm(kernel.axial_fwhm) ** 2 + kernel.box_variance(e_a, grid.voxel_size)
    return float(np.sqrt(var_t)), float(np.sqrt(var_r)), float(np.sqrt(var_a))


def gaussian_spectrum(grid: ImageGrid, view: View, sigmas, padded) -> np.ndarray:
    """``K^(w) = exp(-1/2 sum_dir sigma_dir^2 (w . e_dir)^2)`` on the R2C half-spectrum grid.

    Returns (1, Mz, My, Mx//2+1) complex64 (real values). ``w`` is in rad/mm: ``2 pi k / (M v)`` per
    axis in FFT order (numpy.fft.fftfreq / rfftfreq), v the voxel size. K^(0) = 1, so the lattice
    kernel has unit sum.

    Nyquist: on an even-length axis the bin k = M/2 stands for both +pi/v and -pi/v. For an oblique
    view K^ is not even in each axis separately, so the two differ; the sample used is their mean,
    per axis (the trapezoid rule on the band [-pi/v, pi/v]). This is what makes the result
    independent of the half-spectrum layout: the lattice kernel is real and point-symmetric, and
    the same on the R2C grid as on the full complex grid.
    """
    mz, my, mx = (int(m) for m in padded)
    vz, vy, vx = grid.voxel_size
    e = np.stack([view.direction, view.radial_axis, view.axial_axis])  # (dir, xyz)
    cov = (e.T * np.asarray(sigmas, dtype=np.float64) ** 2) @ e       # sum_dir s^2 e e^T, (x, y, z)
    out = np.empty((mz, my, mx // 2 + 1))
    # The grid splits into blocks of regular bins and Nyquist bins per axis; a block averages over
    # the sign variants of its Nyquist axes (1 for the bulk, 2 on a plane, 4 on a line, 8 at a corner).
    for iz, fzs in _axis_parts(mz, vz):
        for iy, fys in _axis_parts(my, vy):
            for ix, fxs in _axis_parts(mx, vx, half=True):
                acc = 0.0
                for fz in fzs:
                    for fy in fys:
                        for fx in fxs:
                            w = (fx[None, None, :], fy[None, :, None], fz[:, None, None])
                            q = sum(cov[i, j] * w[i] * w[j] for i in range(3) for j in range(3))
                            acc = acc + np.exp(-0.5 * q)
                out[np.ix_(iz, iy, ix)] = acc / (len(fzs) * len(fys) * len(fxs))
    return out.astype(np.complex64)[None]


def _axis_parts(m: int, v: float, half: bool = False) -> list:
    """[(bin indices, [angular frequencies (rad/mm) of those bins, one array per variant])] of an FFT
    axis of length m and spacing v (``half``: the R2C axis, bins 0..m//2). Odd m: one part. Even m:
    the regular bins, and the Nyquist bin m/2 with its two variants +pi/v and -pi/v."""
    w = 2 * np.pi * (np.fft.rfftfreq(m, d=v) if half else np.fft.fftfreq(m, d=v))
    idx = np.arange(w.size)
    if m % 2:
        return [(idx, [w])]
    k = m // 2  # the Nyquist bin, in both layouts
    regular = idx[idx != k]
    return [(regular, [w[regular]]), (np.array([k]), [np.array([np.pi / v]), np.array([-np.pi / v])])]


# --- shared operator machinery --------------------------------------------------------------------
class _ConvolutionProjector(ViewProjector):
    """Base of FFTProjector and LowRankProjector: padding, engine, forward/adjoint plumbing.

    Subclasses call :meth:`_setup` with the largest kernel half-extent over the views and implement
    ``_view_terms(v) -> dict(kernels=... | spectra=..., coefficients=...)`` (NumPy arrays in the
    engine's layout, see :meth:`directpet._core.DirectFftEngine.set_view`). Terms are computed on the
    first projection of a view and then stay resident in the engine (host or device memory).
    """

    def __init__(self, grid, views, kernel, *, backend, threads, planner, check_finite):
        super().__init__(grid, views, kernel, backend=backend, threads=threads, check_finite=check_finite)
        if planner not in PLANNERS:
            raise ValueError(f"planner: expected one of {PLANNERS}, got {planner!r}")
        self.planner = planner

    def _setup(self, half_extent, padding, resident_terms: int):
        """Choose the padded grid, check that ``resident_terms`` half spectra of it (plus the
        engine's scratch) fit in memory, and create the engine."""
        shape = self.grid.shape
        self.half_extent = tuple(int(h) for h in half_extent)
        self.min_padding = minimal_padding(shape, self.half_extent)
        if isinstance(padding, str):
            if padding != "auto":
                raise ValueError(f"padding: expected 'auto' or (Mz, My, Mx), got {padding!r}")
            self.padding = auto_padding(shape, self.half_extent)
        else:
            self.padding = _check_padding(padding, shape)
        require_memory("grid" if isinstance(padding, str) else "padding",
                       fft_bytes(self.padding, resident_terms),
                       f"the FFT engine on the padded grid {self.padding} with {resident_terms} resident kernel "
                       "spectra")
        if self.backend == "cuda":
            self._engine = _CudaEngine(shape, self.padding)
        else:
            self._engine = _CpuEngine(shape, self.padding, self.threads, self.planner)

    @property
    def wraps(self) -> bool:
        """True when the padding is below the minimum, so the cyclic convolution wraps around."""
        return any(m < lo for m, lo in zip(self.padding, self.min_padding))

    def _project(self, forward: bool, src, out, v: int):
        self._ensure_view(v)
        return self._engine.project(forward, v, src, out)

    def _ensure_view(self, v: int):
        if not self._engine.has_view(v):
            self._engine.set_view(v, **self._view_terms(v))

    def launcher(self, forward: bool, view: int):
        """The bare cuFFT projection of one view: ``f(src_ptr, out_ptr, stream=0)`` on raw device
        pointers to (nz, ny, nx) float32 arrays, asynchronous, no argument checks."""
        self._require_cuda("launcher()")
        v = self._view_index(view)
        self._ensure_view(v)
        return self._engine.launcher(bool(forward), v)

    @abstractmethod
    def _view_terms(self, v: int) -> dict:
        """The engine terms of view v: dict(kernels=... | spectra=..., coefficients=...)."""


class FFTProjector(_ConvolutionProjector):
    """DIRECT forward / back projector for invariant kernels by FFT (:ref:`physics-direct`).

    Same interface as :class:`~directpet.direct.HistoImageProjector`: ``forward(image, subset=None,
    out=None)``, ``adjoint(histo_images, subset=None, out=None)`` over the views, ``n_views``,
    ``in_shape``, ``out_shape``, ``backend``, ``adjointness_test()``, ``launcher(forward, view)``.

    Parameters
    ----------
    grid : ImageGrid of the image and of every histo-image.
    views : a ViewSet, one View, or a sequence of Views.
    kernel : SRKernel (default: invariant 400 ps, 5.8 mm). spatial-exact needs an invariant kernel
        (equal LUT rows), spectral a symmetric invariant one; otherwise ValueError (use
        HistoImageProjector, or LowRankProjector for an FFT approximation of a variant kernel).
    mode : ``"spatial-exact"`` (DFT of the truncated lattice kernel; equals HistoImageProjector) or
        ``"spectral"`` (the analytic Gaussian transform; the paper's FFT reference, Gibbs included).
    padding : ``"auto"`` (the smallest FFT-friendly grid without wrap-around) or ``(Mz, My, Mx)``;
        a smaller explicit grid wraps around (see the module docstring); ``op.padding`` is the grid
        used, ``op.min_padding`` the wrap-free minimum, ``op.wraps`` whether it wraps.
    backend : 'auto' (CUDA when usable, else CPU), 'cpu' or 'cuda' (an error without a GPU).
    threads : CPU threads of FFTW and of the element-wise passes (None: OpenMP default).
    planner : FFTW planning effort on the CPU, ``"measure"`` (default: planned once per padded
        shape and thread count, amortised over the many projections of a reconstruction) or
        ``"estimate"`` (instant planning, somewhat slower transforms). Ignored on the GPU.
    check_finite : reject NaN / inf inputs (one extra pass over the input).

    Memory: one half spectrum per view, ``8 Mz My (Mx/2+1)`` bytes (on the GPU ``8 (Mz/2+1) My Mx``: its
    spectra are half along z, see csrc/direct/fft_cuda.hpp), resident on the host or the GPU
    from a view's first projection: 5.3 MB per view for the 144 x 144 x 48 grid at 400 ps (auto padding
    50 x 162 x 162 over the 40 x 3 views), about 0.65 GB for all 120 views.
    """

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel] = None, *,
                 mode: str = "spatial-exact", padding="auto", backend: str = "auto",
                 threads: Optional[int] = None, planner: str = "measure", check_finite: bool = True):
        super().__init__(grid, views, kernel, backend=backend, threads=threads, planner=planner,
                         check_finite=check_finite)
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
        self.mode = mode
        if mode == "spectral" and not self.kernel.is_symmetric_invariant:
            raise ValueError(
                "kernel: mode='spectral' samples the analytic transform of a symmetric invariant "
                "Gaussian and needs kernel.is_symmetric_invariant (no radial model, no asymmetry, no "
                "custom values); use mode='spatial-exact' for other invariant kernels, "
                "HistoImageProjector or LowRankProjector for variant/asymmetric ones")
        self._spatial = {}  # view -> (offsets (N, 3), kernel values (N,)) for spatial-exact
        half = np.zeros(3, dtype=np.int64)
        for v, view in enumerate(self.views):
            lut = build_lut(grid, view, self.kernel)
            half = np.maximum(half, lut.half_extent)
            if mode == "spatial-exact":
                self._spatial[v] = (lut.offsets, _invariant_row(lut, v))
        self._setup(half, padding, resident_terms=len(self.views))

    def _view_terms(self, v: int) -> dict:
        if self.mode == "spatial-exact":
            offsets, row = self._spatial[v]
            return {"kernels": layout_kernels(offsets, row[None, :], self.grid.shape, self.padding)}
        view = self.views[v]
        sigmas = gaussian_sigmas(self.grid, view, self.kernel)
        return {"spectra": gaussian_spectrum(self.grid, view, sigmas, self.padding)}


def _invariant_row(lut, v) -> np.ndarray:
    """The kernel row of an invariant LUT; ValueError when the rows (identifiers) differ."""
    vals = np.asarray(lut.values)
    row = vals[0]
    spread = float(np.max(np.abs(vals - row[None, :]))) if vals.shape[0] > 1 else 0.0
    if spread > 1e-6 * float(np.max(np.abs(row))):
        raise ValueError(
            f"kernel: the FFT projector needs a spatially invariant kernel, but view {v} has "
            f"{vals.shape[0]} different kernels across its LORmap (largest difference "
            f"{spread:.3g}); use HistoImageProjector for variant or asymmetric kernels, or "
            "LowRankProjector for an FFT approximation of them")
    return row


# --- engines ----------------------------------------------------------------------------------------
class _CpuEngine:
    """FFTW3 engine: NumPy in, NumPy out; the GIL is released while it runs."""

    def __init__(self, shape, padded, threads, planner):
        self.core = _core.DirectFftEngine(list(shape), list(padded), threads, planner)

    def has_view(self, v):
        return self.core.has_view(v)

    def set_view(self, v, kernels=None, spectra=None, coefficients=None):
        self.core.set_view(v, kernels=kernels, spectra=spectra, coefficients=coefficients)

    def project(self, forward, v, src, out):
        require_host_arrays(src)
        (self.core.forward if forward else self.core.adjoint)(v, src, out)
        return out


class _CudaEngine:
    """cuFFT engine: spectra resident on the GPU; NumPy data staged, CuPy/PyTorch used in place."""

    def __init__(self, shape, padded):
        from .._device import Staging

        self.core = cuda_module().DirectFftEngineCuda(list(shape), list(padded))
        self._staging = Staging()

    def has_view(self, v):
        return self.core.has_view(v)

    def set_view(self, v, kernels=None, spectra=None, coefficients=None):
        self.core.set_view(v, kernels=kernels, spectra=spectra, coefficients=coefficients)

    def launcher(self, forward, v):
        fn = self.core.forward if forward else self.core.adjoint

        def launch(src_ptr, out_ptr, stream=0):
            fn(v, src_ptr, out_ptr, stream)

        return launch

    def project(self, forward, v, src, out):
        from .._device import run_on_device

        return run_on_device(self.launcher(forward, v), src, out, self._staging)


# --- small helpers (kept local: the spatial projector module has its own) --------------------------
def _check_padding(padding, shape) -> tuple:
    try:
        p = tuple(padding)
    except TypeError:
        raise TypeError(f"padding: expected 'auto' or a tuple (Mz, My, Mx), got {type(padding).__name__}") from None
    if len(p) != 3 or not all(isinstance(m, (int, np.integer)) and not isinstance(m, (bool, np.bool_))
                              for m in p):
        raise ValueError(f"padding: expected three integers (Mz, My, Mx), got {padding!r}")
    p = tuple(int(m) for m in p)
    if any(m < n for m, n in zip(p, shape)):
        raise ValueError(f"padding: every extent must be at least the image shape {tuple(shape)}, got {p}")
    if max(p) >= 2**31:
        raise ValueError(f"padding: every extent must be below 2**31 (FFTW and cuFFT index with int), got {p}")
    return p
