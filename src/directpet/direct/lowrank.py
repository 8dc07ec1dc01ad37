"""Low-rank FFT approximation of the spatially variant DIRECT projector.

Per view, the kernel table mSRval ``V`` (n_kernels x N: one row per LORmap identifier a, one column
per support offset d_i) is factored with a truncated SVD (float64)::

    V[a, i]  ~=  sum_{j < r} C[a, j] B_j[i],      C = U_r S_r,  B = W_r^T.

Each B_j is an invariant kernel on the support and each column of C becomes a per-pixel coefficient
map ``c_j(y, x) = C[LORmap(y, x), j]`` (broadcast along z, like LORmap). Then, with
``H x (r) = sum_{r'} x(r') K_{a(r')}(r - r')`` (:ref:`physics-direct`),

    forward   H_r x = sum_j B_j * (c_j . x)        (convolution: r FFTs in, one FFT out)
    adjoint   H_r^T y = sum_j c_j . (B_j star y)   (correlation: one FFT in, r FFTs out)

H_r is exactly the DIRECT operator of the rank-r kernel table C B, so the pair is an exact transpose
(to float rounding) and approximates HistoImageProjector as well as C B approximates V. The rank is
the smallest r whose relative Frobenius kernel error ``||V - C B||_F / ||V||_F`` is at most ``tol``
(Eckart-Young: no rank-r factorisation does better), or a fixed ``rank``.

Image-space error. With E = V - C B (rows E_a),
``||(H - H_r) x||_2 <= sqrt(max_a ||E_a||_1 * sum_i max_a |E_a,i|) ||x||_2`` (Schur test: the first
factor bounds the column sums of ``|H - H_r|``, the second its row sums); :meth:`LowRankProjector.
operator_error_bound` returns that factor. It is rigorous but pessimistic; in practice the relative
image error ``||(H - H_r) x|| / ||H x||`` on random images is well below the kernel error (see
tests/test_direct_lowrank.py for the measured ratio).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .._checks import positive_int, real_number, require_memory
from ..geometry import ImageGrid
from .fft import ViewsLike, _ConvolutionProjector, layout_kernels
from .lut import DirectLUT, build_lut
from .model import SRKernel


@dataclass(frozen=True)
class LowRankFactors:
    """A rank-r factorisation ``values ~= coefficients @ kernels`` of one view's mSRval.

    coefficients : (n_kernels, r) float64, C = U_r S_r.
    kernels : (r, N) float64, B = W_r^T (orthonormal rows).
    singular_values : all singular values of the table, descending.
    kernel_error : ``||V - C B||_F / ||V||_F``, measured directly in float64.
    """

    coefficients: np.ndarray
    kernels: np.ndarray
    singular_values: np.ndarray
    kernel_error: float

    @property
    def rank(self) -> int:
        """The rank r of the factorisation (the number of rows of ``kernels``)."""
        return int(self.kernels.shape[0])


def relative_kernel_errors(singular_values) -> np.ndarray:
    """``err[r] = ||V - V_r||_F / ||V||_F`` for r = 0 .. len(s) from the singular values (Eckart-Young)."""
    s2 = np.asarray(singular_values, dtype=np.float64) ** 2
    tail = np.concatenate([np.cumsum(s2[::-1])[::-1], [0.0]])  # tail[r] = sum_{k >= r} s_k^2
    return np.sqrt(tail / tail[0])


#: relative kernel errors below this are picked with LAPACK's SVD (the Gram matrix's eigenvalues cannot
#: resolve them; see factorize)
GRAM_ERROR_FLOOR = 1e-5


def factorize(values, *, tol: float = 1e-3, rank: Optional[int] = None, max_rank: int = 32) -> LowRankFactors:
    """Truncated SVD of a kernel table (n_kernels, N) in float64 (through the Gram matrix of its short side).

    The rank is ``rank`` when given, else the smallest r <= max_rank with relative kernel error
    <= tol (max_rank, with a RuntimeWarning, when even that is not enough).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values: expected a non-empty (n_kernels, N) table, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values: the kernel table contains NaN or inf")
    # The SVD through the Gram matrix of the short side (n_kernels x n_kernels for the usual wide
    # tables): its eigenvalues are s^2 and its eigenvectors U, then W^T = S^-1 U^T V for the kept
    # terms. About 25x faster than LAPACK's thin SVD on the 2 mm tables (406 x 3771: 12 ms against
    # 0.3 s, for each of 120 views). The eigenvalues are exact only to about eps * s_0^2, which puts a
    # floor of a few 1e-7 under the relative errors it can tell apart: below GRAM_ERROR_FLOOR (a tol
    # that small, or a fixed rank whose error is) the rank and the factors come from LAPACK's SVD, as
    # do terms too small to normalise.
    m, n = v.shape
    require_memory("values", 8.0 * (2 * m * n + 2 * min(m, n) * (m + n)),
                   f"the float64 SVD of a {m} x {n} kernel table")
    wide = m <= n
    lam, vecs = np.linalg.eigh(v @ v.T if wide else v.T @ v)
    lam, vecs = lam[::-1], vecs[:, ::-1]
    s = np.sqrt(np.maximum(lam, 0.0))
    if rank is not None and int(rank) > len(s):
        raise ValueError(f"rank: {int(rank)} exceeds the table's rank bound min(n_kernels, N) = {len(s)}")
    gram_ok = (tol >= GRAM_ERROR_FLOOR) if rank is None else relative_kernel_errors(s)[int(rank)] >= GRAM_ERROR_FLOOR
    u = wt = None
    if not gram_ok:
        u, s, wt = np.linalg.svd(v, full_matrices=False)
    if rank is None:
        err = relative_kernel_errors(s)
        ok = np.flatnonzero(err[1:] <= tol)
        r = int(ok[0]) + 1 if ok.size else len(s)
        if r > max_rank:
            warnings.warn(f"low-rank kernel: tol={tol:g} needs rank {r} > max_rank={max_rank}; using "
                          f"rank {max_rank} (relative kernel error {err[max_rank]:.3g})", RuntimeWarning,
                          stacklevel=3)
            r = max_rank
    else:
        r = int(rank)
    if u is None and s[r - 1] <= 1e-7 * s[0]:
        u, s, wt = np.linalg.svd(v, full_matrices=False)
    if u is not None:
        c, b = u[:, :r] * s[:r], wt[:r]
    elif wide:
        c = vecs[:, :r] * s[:r]                      # U_r S_r
        b = (vecs[:, :r].T @ v) / s[:r, None]        # W_r^T = S_r^-1 U_r^T V
    else:
        b = vecs[:, :r].T                            # W_r^T
        c = v @ vecs[:, :r]                          # V W_r = U_r S_r
    error = float(np.linalg.norm(v - c @ b) / np.linalg.norm(v))
    return LowRankFactors(coefficients=c, kernels=b, singular_values=s, kernel_error=error)


class LowRankProjector(_ConvolutionProjector):
    """FFT projector for spatially variant / asymmetric DIRECT kernels via a per-view low-rank SVD.

    Interface as :class:`~directpet.direct.HistoImageProjector` (``forward(image, subset=None,
    out=None)``, ``adjoint(histo_images, subset=None, out=None)``, ``adjointness_test()``, ...), plus
    ``rank(v)``, ``kernel_error(v)``, ``factors(v)`` and ``operator_error_bound(v)``.

    Parameters
    ----------
    grid, views, kernel : as for HistoImageProjector (kernel default: invariant 400 ps, 5.8 mm).
    tol : target relative Frobenius kernel error ``||V - C B|| / ||V||`` per view, in (0, 1).
    rank : fixed rank for every view instead of ``tol``.
    max_rank : cap on the tol-selected rank (a RuntimeWarning when it binds).
    backend, threads, planner, check_finite : as for :class:`~directpet.direct.FFTProjector`.

    Padding is the automatic wrap-free grid of the kernel support (as for spatial-exact FFT). Cost
    per projection: (r + 1) FFTs of the padded grid; memory: r half spectra per view plus r (ny, nx)
    coefficient maps. Factorisations are computed on a view's first use (one float64 SVD of
    n_kernels x N, about a second for the stress kernel on the clinical grid) and cached.
    """

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel] = None, *,
                 tol: float = 1e-3, rank: Optional[int] = None, max_rank: int = 32,
                 backend: str = "auto", threads: Optional[int] = None, planner: str = "measure",
                 check_finite: bool = True):
        super().__init__(grid, views, kernel, backend=backend, threads=threads, planner=planner,
                         check_finite=check_finite)
        tol = real_number("tol", tol)
        if not (0.0 < tol < 1.0):
            raise ValueError(f"tol: expected a relative error in (0, 1), got {tol!r}")
        rank = None if rank is None else positive_int("rank", rank)
        self.tol, self.fixed_rank, self.max_rank = tol, rank, positive_int("max_rank", max_rank)
        self._factors = {}
        # The padded grid must hold every view's support: scan the LUTs once (values not kept; they
        # are rebuilt when a view is factored, which keeps memory at the factors' size).
        half = np.zeros(3, dtype=np.int64)
        bounds = []                                  # no table has a rank above min(n_kernels, N)
        for view in self.views:
            lut = build_lut(grid, view, self.kernel)
            half = np.maximum(half, lut.half_extent)
            bounds.append(min(lut.n_kernels, lut.n_offsets))
        rank_bound = max(bounds)
        if rank is not None and rank > min(bounds):
            v = int(np.argmin(bounds))
            raise ValueError(f"rank: {rank} exceeds the rank bound min(n_kernels, N) = {bounds[v]} of view {v}'s "
                             "kernel table; give rank <= that or use tol")
        # at least one spectrum per view, and one view at the largest rank it can have (ranks are
        # known only once each view is factored)
        largest = min(self.fixed_rank or self.max_rank, rank_bound)
        self._setup(half, "auto", resident_terms=len(self.views) + largest)

    # --- factorisation ------------------------------------------------------------------------
    def lut(self, v: int) -> DirectLUT:
        """The exact LUTs of view v (rebuilt on each call; not cached)."""
        return build_lut(self.grid, self.views[self._view_index(v)], self.kernel)

    def factors(self, v: int) -> LowRankFactors:
        """The rank-r factorisation of view v's kernel table (computed on first use, cached)."""
        return self._factored(v)[0]

    def _factored(self, v: int):
        """(factors, offsets (N, 3), lormap (ny, nx)) of view v; the LUT values are not kept."""
        v = self._view_index(v)
        if v not in self._factors:
            lut = self.lut(v)
            f = factorize(lut.values, tol=self.tol, rank=self.fixed_rank, max_rank=self.max_rank)
            self._factors[v] = (f, lut.offsets, lut.lormap)
        return self._factors[v]

    def rank(self, v: int) -> int:
        """Number of FFT terms r of view v."""
        return self.factors(v).rank

    def kernel_error(self, v: int) -> float:
        """Relative Frobenius kernel error ``||V - C B|| / ||V||`` of view v."""
        return self.factors(v).kernel_error

    def operator_error_bound(self, v: int) -> float:
        """Schur-test bound ``sqrt(max_a ||E_a||_1 * sum_i max_a |E_a,i|)`` on ``||H_v - H_{r,v}||_2``
        (E = V - C B in float64): ``||(H - H_r) x|| <= bound * ||x||`` for every x."""
        f = self.factors(v)
        e = np.abs(np.asarray(self.lut(v).values, dtype=np.float64) - f.coefficients @ f.kernels)
        return float(np.sqrt(e.sum(axis=1).max() * e.max(axis=0).sum()))

    def _view_terms(self, v: int) -> dict:
        f, offsets, lormap = self._factored(v)
        coefficients = np.ascontiguousarray(f.coefficients.T[:, lormap], dtype=np.float32)  # (r, ny, nx)
        kernels = layout_kernels(offsets, f.kernels, self.grid.shape, self.padding)
        return {"kernels": kernels, "coefficients": coefficients}
