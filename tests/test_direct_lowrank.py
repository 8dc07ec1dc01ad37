"""Low-rank FFT projector of DIRECT: SVD factorisation, rank selection, exact adjointness, and the
approximation of the spatially variant HistoImageProjector.

Error bound used in the assertions
----------------------------------
With E = V - C B the kernel-table error (rows E_a), the operator error is the DIRECT operator of E,
so by the Schur test ``||(H - H_r) x|| <= sqrt(max_a ||E_a||_1 * sum_i max_a |E_a,i|) ||x||``
(``LowRankProjector.operator_error_bound``): rigorous, asserted as is (plus float32 rounding).
It is pessimistic by about 10x. The useful, empirical statement is relative to the kernel error
``k = ||E||_F / ||V||_F``: on random positive images the relative image error
``||(H - H_r) x|| / ||H x||`` measured 0.15 k to 0.56 k (variant, asymmetric and stress kernels,
tilted and untilted views, tol 1e-2 .. 1e-4). The tests assert it is at most ``1.0 k`` (a factor of
~2 margin) plus 2e-6 for float32 rounding when k itself is at rounding level.
"""

from __future__ import annotations

import numpy as np
import pytest

import directpet
from directpet import ImageGrid, LinearOperator
from directpet.direct import FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, View, ViewSet, build_lut
from directpet.direct.lowrank import factorize, relative_kernel_errors

RTOL = 1e-5
ROUNDING = 2e-6  # float32 FFT + accumulation rounding floor of the image-space comparisons

GRID = ImageGrid((12, 24, 20), 4.0)
ODD = ImageGrid((11, 23, 19), 4.0)
VIEWS = [View(0.0), View.from_degrees(23.625), View.from_degrees(128.25, 20 / 3)]

KERNELS = {
    "variant2": SRKernel.clinical("variant2"),
    "asym_variant": SRKernel.clinical("variant2", asymmetric=True),
    "linear_10_100": SRKernel(radial_fwhm=("linear", 10.0, 100.0)),
}


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def lowrank_cpu(grid, views, kernel, **kw):
    return LowRankProjector(grid, views, kernel, backend="cpu", planner="estimate", **kw)


# --- factorisation -----------------------------------------------------------------------------
def test_factorize_is_truncated_svd(rng):
    v = rng.uniform(0.0, 1.0, (30, 50)) @ np.diag(0.7 ** np.arange(50))
    s = np.linalg.svd(v, compute_uv=False)
    err = relative_kernel_errors(s)
    assert err[0] == pytest.approx(1.0) and err[-1] == 0.0 and np.all(np.diff(err) <= 0)
    for r in (1, 3, 10):
        f = factorize(v, rank=r)
        assert f.rank == r and f.coefficients.shape == (30, r) and f.kernels.shape == (r, 50)
        assert f.kernel_error == pytest.approx(np.linalg.norm(v - f.coefficients @ f.kernels) / np.linalg.norm(v))
        assert f.kernel_error == pytest.approx(err[r], rel=1e-9)  # Eckart-Young
        np.testing.assert_allclose(f.kernels @ f.kernels.T, np.eye(r), atol=1e-12)
    f = factorize(v, tol=1e-3)
    assert f.kernel_error <= 1e-3 and (f.rank == 1 or err[f.rank - 1] > 1e-3)  # smallest such rank


@pytest.mark.parametrize("shape", [(30, 50), (50, 30)])     # the Gram matrix of either side
def test_factorize_ranks_equal_lapacks_down_to_small_tol(shape, rng):
    """The Gram-matrix SVD picks the rank LAPACK's SVD would, at every tol; below its precision floor
    (GRAM_ERROR_FLOOR) factorize falls back to LAPACK, so tiny tols are honoured too."""
    k = min(shape)
    v = rng.uniform(0.0, 1.0, shape) * np.outer(0.5 ** np.arange(shape[0]) if shape[0] == k else np.ones(shape[0]),
                                                 0.5 ** np.arange(shape[1]) if shape[1] == k else np.ones(shape[1]))
    err = relative_kernel_errors(np.linalg.svd(v, compute_uv=False))
    for tol in (1e-2, 1e-4, 3e-5, 1e-6, 1e-9, 1e-12):
        f = factorize(v, tol=tol, max_rank=k)
        want = int(np.flatnonzero(err[1:] <= tol)[0]) + 1
        assert f.rank == want, tol
        assert f.kernel_error <= tol and f.kernel_error == pytest.approx(err[want], rel=1e-6, abs=1e-13)
        np.testing.assert_allclose(f.kernels @ f.kernels.T, np.eye(f.rank), atol=1e-9)
    assert factorize(v, rank=k).kernel_error < 1e-12                 # a fixed rank to the last term


def test_rank_selection_monotone_in_tol():
    ranks, errors = [], []
    for tol in (3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5):
        op = lowrank_cpu(GRID, VIEWS[1:2], KERNELS["asym_variant"], tol=tol)
        ranks.append(op.rank(0))
        errors.append(op.kernel_error(0))
        assert op.kernel_error(0) <= tol
    assert ranks == sorted(ranks) and ranks[-1] > ranks[0]
    assert errors == sorted(errors, reverse=True)


def test_fixed_rank_and_max_rank():
    op = lowrank_cpu(GRID, VIEWS, KERNELS["variant2"], rank=2)
    assert [op.rank(v) for v in range(3)] == [2, 2, 2]
    s = op.factors(1).singular_values
    assert op.kernel_error(1) == pytest.approx(relative_kernel_errors(s)[2], rel=1e-6)
    capped = lowrank_cpu(GRID, VIEWS[1:2], KERNELS["asym_variant"], tol=1e-7, max_rank=3)
    with pytest.warns(RuntimeWarning, match="max_rank"):
        assert capped.rank(0) == 3
    with pytest.raises(ValueError, match="rank"):
        lowrank_cpu(GRID, VIEWS[:1], KERNELS["variant2"], rank=10**6).rank(0)


def test_invariant_kernel_is_rank_one_and_equals_fft(volume):
    """An invariant kernel has identical LUT rows: rank 1, zero kernel error, and the low-rank
    projector is the spatial-exact FFT projector with a constant coefficient map."""
    kernel = SRKernel.invariant()
    lr = lowrank_cpu(GRID, VIEWS, kernel)
    fft = FFTProjector(GRID, VIEWS, kernel, backend="cpu")
    assert lr.padding == fft.padding
    for v in range(len(VIEWS)):
        assert lr.rank(v) == 1 and lr.kernel_error(v) < 1e-6
        x = volume(GRID.shape)
        assert rel_err(lr.forward(x, v), fft.forward(x, v)) < RTOL
        assert rel_err(lr.adjoint(x[None], v), fft.adjoint(x[None], v)) < RTOL


@pytest.mark.slow
@pytest.mark.parametrize("kernel_name", ["stress", "clinical"])
def test_clinical_grid_svd_against_an_independent_spectrum(kernel_name, rng):
    """The SVD of one untilted view's kernel table on the 144 x 144, 4 mm grid (phi = 2.25 deg, the
    first of 40 x 3 views), checked without trusting factorize:

    * its singular values are sorted and are the square roots of the eigenvalues of V V^T
      (``numpy.linalg.eigvalsh``: a symmetric eigensolver, not the SVD), to 1e-10 of s_0^2;
    * the rank picked for a tolerance is the smallest whose kernel error, computed from those
      eigenvalues, is within it, and it does not decrease as the tolerance tightens;
    * the kernel error of the kept factors, measured as ``||V - C B||_F / ||V||_F`` here, is within
      the tolerance;
    * against the exact spatial projector on a 6-slice slab of the grid (the table does not depend
      on nz), the relative image error is at most the kernel error (measured 0.15-0.56 x it, see
      the module docstring) plus float32 rounding.

    (The issue quoted kernel errors of 1.6e-4 at rank 8 for stress and 7e-5 at rank 4 for clinical;
    this table reaches those levels one rank later, which is why no rank is pinned here.)"""
    kernel = {"stress": SRKernel.stress(), "clinical": SRKernel.clinical()}[kernel_name]
    vs = ViewSet(40, 3)
    view = vs[vs.index(0, 1)]
    assert abs(view.theta) < 1e-12  # untilted (the linspace centre is 7e-18, not exactly 0)
    values = build_lut(ImageGrid((48, 144, 144), 4.0), view, kernel).values.astype(np.float64)
    lam = np.sort(np.linalg.eigvalsh(values @ values.T))[::-1]
    lam = np.clip(lam, 0.0, None)
    tail = np.concatenate([np.cumsum(lam[::-1])[::-1], [0.0]])
    err_eig = np.sqrt(tail / tail[0])                    # err_eig[r] = ||V - V_r||_F / ||V||_F

    slab = ImageGrid((6, 144, 144), 4.0)
    lr = lowrank_cpu(slab, [view], kernel, tol=1e-3)
    np.testing.assert_array_equal(lr.lut(0).values, values.astype(np.float32))   # the same table
    ranks = []
    for tol, f in ((1e-2, factorize(values, tol=1e-2)), (1e-3, lr.factors(0)), (1e-4, factorize(values, tol=1e-4))):
        s = f.singular_values
        assert np.all(np.diff(s) <= 0)
        np.testing.assert_allclose(s ** 2, lam[: s.size], rtol=0, atol=1e-10 * lam[0])
        r = f.rank
        assert err_eig[r] <= tol * (1 + 1e-9) and (r == 1 or err_eig[r - 1] > tol)
        measured = np.linalg.norm(values - f.coefficients @ f.kernels) / np.linalg.norm(values)
        assert measured <= tol and measured == pytest.approx(err_eig[r], rel=1e-4, abs=1e-12)
        ranks.append(r)
    assert ranks == sorted(ranks) and ranks[-1] > ranks[0]

    exact = HistoImageProjector(slab, [view], kernel, backend="cpu")
    assert lr.kernel_error(0) <= 1e-3
    x = rng.uniform(0.1, 1.0, slab.shape).astype(np.float32)
    assert rel_err(lr.forward(x, 0), exact.forward(x, 0)) <= lr.kernel_error(0) + ROUNDING


# --- adjointness and accuracy --------------------------------------------------------------------
@pytest.mark.parametrize("kernel_name", list(KERNELS))
@pytest.mark.parametrize("grid", [GRID, ODD], ids=["even", "odd"])
def test_adjointness(kernel_name, grid):
    op = lowrank_cpu(grid, VIEWS, KERNELS[kernel_name], tol=1e-3)
    assert all(op.rank(v) > 1 for v in (1, 2))
    assert op.adjointness_test(rng=1) < RTOL
    assert op.adjointness_test(rng=2) < RTOL


@pytest.mark.parametrize("kernel_name", list(KERNELS))
@pytest.mark.parametrize("tol", [1e-2, 1e-3, 1e-4])
def test_approximates_spatial_projector(kernel_name, tol, volume):
    """Relative image error <= 1.0 x the kernel error (measured <= 0.56 x), and <= the rigorous
    Schur bound, forward and back, untilted and tilted views."""
    kernel = KERNELS[kernel_name]
    lr = lowrank_cpu(GRID, VIEWS, kernel, tol=tol)
    ref = HistoImageProjector(GRID, VIEWS, kernel, backend="cpu")
    for v in range(len(VIEWS)):
        k = lr.kernel_error(v)
        assert k <= tol
        bound = lr.operator_error_bound(v)
        x, y = volume(GRID.shape), volume((1,) + GRID.shape)      # y: one view's histo-image stack
        for got, want, src in ((lr.forward(x, v), ref.forward(x, v), x), (lr.adjoint(y, v), ref.adjoint(y, v), y)):
            err = rel_err(got, want)
            assert err <= 1.0 * k + ROUNDING
            assert err * np.linalg.norm(want) <= bound * np.linalg.norm(src) + ROUNDING * np.linalg.norm(want)


def test_higher_rank_is_more_accurate(volume):
    kernel = KERNELS["linear_10_100"]
    ref = HistoImageProjector(GRID, VIEWS[1:2], kernel, backend="cpu")
    x = volume(GRID.shape)
    want = ref.forward(x, 0)
    errs = [rel_err(lowrank_cpu(GRID, VIEWS[1:2], kernel, rank=r).forward(x, 0), want) for r in (1, 3, 6)]
    assert errs[0] > errs[1] > errs[2]


def test_stress_kernel_small_grid(volume):
    """The 900 ps / 10 -> 100 mm stress kernel on a small grid: rank from tol, exact adjoint pair."""
    grid = ImageGrid((8, 20, 20), 4.0)
    op = lowrank_cpu(grid, VIEWS[:2], SRKernel.stress(), tol=1e-3)
    ref = HistoImageProjector(grid, VIEWS[:2], SRKernel.stress(), backend="cpu")
    x = volume(grid.shape)
    for v in range(2):
        assert 3 <= op.rank(v) <= 12
        assert rel_err(op.forward(x, v), ref.forward(x, v)) <= op.kernel_error(v) + ROUNDING
    assert op.adjointness_test(rng=7) < RTOL


# --- interface and bad input ----------------------------------------------------------------------
def test_interface(volume):
    op = lowrank_cpu(GRID, VIEWS, KERNELS["variant2"])
    assert isinstance(op, LinearOperator)
    assert op.n_views == 3 and op.in_shape == GRID.shape and op.out_shape == (3,) + GRID.shape
    assert op.backend == "cpu" and not op.wraps
    x, ys = volume(GRID.shape), volume((3,) + GRID.shape)
    stacked = op.forward(x)
    for v in range(3):
        np.testing.assert_array_equal(stacked[v:v + 1], op.forward(x, v))
    np.testing.assert_array_equal(op.forward(x, [2, 0]), stacked[[2, 0]])
    total = sum(op.adjoint(ys[v:v + 1], v).astype(np.float64) for v in range(3))
    assert rel_err(op.adjoint(ys), total) < 1e-6
    np.testing.assert_array_equal(op.subset(2).forward(x), op.forward(x, 2))


def test_argument_checks(volume):
    with pytest.raises(ValueError, match="tol"):
        LowRankProjector(GRID, VIEWS, tol=0.0, backend="cpu")
    with pytest.raises(ValueError, match="tol"):
        LowRankProjector(GRID, VIEWS, tol=1.5, backend="cpu")
    with pytest.raises(TypeError, match="tol"):
        LowRankProjector(GRID, VIEWS, tol="small", backend="cpu")
    with pytest.raises(ValueError, match="rank"):
        LowRankProjector(GRID, VIEWS, rank=0, backend="cpu")
    with pytest.raises(ValueError, match="max_rank"):
        LowRankProjector(GRID, VIEWS, max_rank=-1, backend="cpu")
    with pytest.raises(ValueError, match="threads"):
        LowRankProjector(GRID, VIEWS, threads=-2, backend="cpu")
    with pytest.raises(TypeError, match="kernel"):
        LowRankProjector(GRID, VIEWS, kernel=5.8, backend="cpu")
    op = lowrank_cpu(GRID, VIEWS, KERNELS["variant2"])
    x = volume(GRID.shape)
    with pytest.raises(TypeError, match="image.*float32"):
        op.forward(x.astype(np.float64), 0)
    with pytest.raises(ValueError, match="image.*shape"):
        op.forward(x[:-1].copy(), 0)
    x[0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="histo_images.*NaN or inf"):
        op.adjoint(x[None], 0)
    with pytest.raises(ValueError, match="view"):
        op.rank(3)


# --- GPU ----------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kernel_name", list(KERNELS))
def test_gpu_matches_cpu(kernel_name, volume):
    kernel = KERNELS[kernel_name]
    cpu = lowrank_cpu(GRID, VIEWS, kernel, tol=1e-4)
    gpu = LowRankProjector(GRID, VIEWS, kernel, tol=1e-4, backend="cuda")
    assert gpu.backend == "cuda"
    for v in range(len(VIEWS)):
        assert gpu.rank(v) == cpu.rank(v) > 1
        x, y = volume(GRID.shape), volume((1,) + GRID.shape)
        assert rel_err(gpu.forward(x, v), cpu.forward(x, v)) < RTOL
        assert rel_err(gpu.adjoint(y, v), cpu.adjoint(y, v)) < RTOL
    assert gpu.adjointness_test(rng=3) < RTOL


@pytest.mark.gpu
def test_gpu_odd_padded_grid_several_terms(volume):
    """A padded grid of odd size (9 x 25 x 21 here) puts term 1 of the uploaded kernels off 8-byte
    alignment, which cuFFT rejects: every term must still be transformed, and equal the CPU's."""
    grid = ImageGrid((7, 13, 11), 4.0)
    views = [View.from_degrees(31.5, 6.67), View.from_degrees(100.0, -6.67)]
    cpu = lowrank_cpu(grid, views, SRKernel.clinical(), tol=1e-4)
    gpu = LowRankProjector(grid, views, SRKernel.clinical(), tol=1e-4, backend="cuda")
    assert np.prod(gpu.padding) % 2 == 1 and gpu.rank(0) > 1
    x, y = volume(grid.shape), volume((2,) + grid.shape)
    assert rel_err(gpu.forward(x), cpu.forward(x)) < RTOL
    assert rel_err(gpu.adjoint(y), cpu.adjoint(y)) < RTOL


@pytest.mark.gpu
def test_gpu_cupy_identical(volume):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    op = LowRankProjector(ODD, VIEWS, KERNELS["asym_variant"], backend="cuda")
    x, ys = volume(ODD.shape), volume((2,) + ODD.shape)
    np.testing.assert_array_equal(cp.asnumpy(op.forward(cp.asarray(x), 2)), op.forward(x, 2))
    np.testing.assert_array_equal(cp.asnumpy(op.adjoint(cp.asarray(x[None]), 2)), op.adjoint(x[None], 2))
    np.testing.assert_array_equal(cp.asnumpy(op.adjoint(cp.asarray(ys), [2, 0])), op.adjoint(ys, [2, 0]))
    assert directpet.cuda_device_count() > 0
