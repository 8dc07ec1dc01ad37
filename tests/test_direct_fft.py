"""FFT projectors of DIRECT (docs/physics.rst 1.8): spatial-exact against the spatial projector, spectral
against an independent float64 oracle, padding / wrap-around, Gibbs ripples, adjointness, argument
checks, and (marked ``gpu``) cuFFT against FFTW and NumPy / CuPy / PyTorch inputs.

Oracles and tolerances
----------------------
* spatial-exact: :class:`HistoImageProjector` (backend='cpu') with the same kernel. Both compute the
  same linear convolution of the same float32 lattice kernel; the FFT path adds float32 transform
  rounding of ~1e-7 * log2(M) relative to the 2-norm, so 1e-5 (relative, 2-norm) is safe while a
  single misplaced kernel tap or one voxel of wrap-around costs >= 1e-4.
* spectral: a float64 NumPy oracle written here from the definitions, independent of the package
  code: the covariance ``Sigma = sum_dir sigma_dir^2 e_dir e_dir^T`` from the view angles (docs/physics.rst
  1.1), the spectrum ``exp(-w^T Sigma w / 2)`` on the *full* complex FFT grid (numpy.fft.fftn, not
  the R2C half grid the engine uses), zero padding to the operator's grid, crop. Agreement to 1e-5
  checks the frequency grid (rad/mm, FFT order, Nyquist), the axis conventions and the padding.
  The physics of the mode (Gibbs ripples from cutting the spectrum at Nyquist) is checked against
  closed forms: for the untilted phi = 0 view the kernel is separable and its peak is the sampled
  Gaussian's peak times ``erf(pi sigma / (sqrt(2) v))`` per short axis.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

import directpet
from directpet import ImageGrid, LinearOperator
from directpet import _core
from directpet.direct import FFTProjector, HistoImageProjector, SRKernel, View, build_lut
from directpet.direct.fft import auto_padding, fft_friendly_size

RTOL = 1e-5

VIEWS = [View(0.0), View.from_degrees(23.625), View.from_degrees(128.25, 20 / 3),
         View.from_degrees(170.0, -20 / 3)]

GRIDS = {
    "even": ImageGrid((12, 24, 20), 4.0),
    "odd": ImageGrid((11, 23, 19), 4.0),
    "aniso": ImageGrid((13, 21, 18), (2.5, 4.0, 3.0)),
}

KERNELS = {
    "invariant": SRKernel.invariant(),
    # Invariant but asymmetric (a custom profile shifted along e_r, independent of s): forward and
    # back differ, so the conj(K^) of the adjoint matters.
    "asym_invariant": SRKernel.invariant(
        values=lambda t, r, a, s: np.exp(-np.abs(t) / 20.0 - np.abs(r - 2.0) / 3.0 - 0.5 * (a / 2.5) ** 2)),
    "wide_image_kernel": SRKernel.invariant(tof_fwhm_ps=600.0, fwhm=8.0, image_kernel=True),
}

FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))
C_MM_PER_PS = 0.299792458


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def spectral_cpu(grid, views, kernel=None, **kw):
    return FFTProjector(grid, views, kernel, mode="spectral", backend="cpu", **kw)


# --- spatial-exact == spatial projector -------------------------------------------------------
@pytest.mark.parametrize("grid_name", list(GRIDS))
@pytest.mark.parametrize("kernel_name", list(KERNELS))
def test_spatial_exact_matches_spatial_projector(grid_name, kernel_name, volume):
    """Forward and back of every view (tilted and untilted) == HistoImageProjector to 1e-5."""
    grid, kernel = GRIDS[grid_name], KERNELS[kernel_name]
    fft = FFTProjector(grid, VIEWS, kernel, backend="cpu")
    ref = HistoImageProjector(grid, VIEWS, kernel, backend="cpu")
    assert fft.backend == "cpu" and not fft.wraps
    for v in range(len(VIEWS)):
        x, y = volume(grid.shape), volume((1,) + grid.shape)
        assert rel_err(fft.forward(x, v), ref.forward(x, v)) < RTOL
        assert rel_err(fft.adjoint(y, v), ref.adjoint(y, v)) < RTOL


def test_asymmetric_invariant_forward_differs_from_back(volume):
    """Sanity of the previous test: for the shifted kernel H != H^T, so both paths were exercised."""
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS[:1], KERNELS["asym_invariant"], backend="cpu")
    x = volume(grid.shape)
    assert rel_err(op.forward(x, 0)[0], op.adjoint(x[None], 0)) > 1e-3


def test_all_views_and_batches_match_spatial(volume):
    grid = GRIDS["odd"]
    fft = FFTProjector(grid, VIEWS, backend="cpu")
    ref = HistoImageProjector(grid, VIEWS, backend="cpu")
    x, ys = volume(grid.shape), volume((len(VIEWS),) + grid.shape)
    assert fft.forward(x).shape == fft.out_shape == (len(VIEWS),) + grid.shape
    assert rel_err(fft.forward(x), ref.forward(x)) < RTOL
    assert rel_err(fft.adjoint(ys), ref.adjoint(ys)) < RTOL
    assert rel_err(fft.forward(x, [2, 0]), ref.forward(x, [2, 0])) < RTOL
    assert rel_err(fft.adjoint(ys[[2, 0]], [2, 0]), ref.adjoint(ys[[2, 0]], [2, 0])) < RTOL


# --- padding ----------------------------------------------------------------------------------------
def test_fft_friendly_size():
    assert [fft_friendly_size(n) for n in (1, 11, 13, 17, 29, 37, 97, 121, 127)] == [1, 12, 14, 18, 30, 40, 98, 125, 128]
    for n in range(1, 400):
        m = fft_friendly_size(n)
        assert m >= n
        r = m
        for p in (2, 3, 5, 7):
            while r % p == 0:
                r //= p
        assert r == 1


@pytest.mark.parametrize("grid_name", list(GRIDS))
def test_auto_padding_rule(grid_name):
    """padding = FFT-friendly M >= N + min(h, N - 1), h the largest |offset| over all views' mSR."""
    grid = GRIDS[grid_name]
    kernel = SRKernel.invariant(tof_fwhm_ps=900.0)  # TOF support longer than the grid along x
    op = FFTProjector(grid, VIEWS, kernel, backend="cpu")
    h = np.max([build_lut(grid, v, kernel).half_extent for v in VIEWS], axis=0)
    assert op.half_extent == tuple(h)
    assert op.min_padding == tuple(n + min(hh, n - 1) for n, hh in zip(grid.shape, h))
    assert op.padding == auto_padding(grid.shape, h) == tuple(fft_friendly_size(m) for m in op.min_padding)
    assert not op.wraps


def test_minimal_padding_is_exact_and_one_less_wraps(volume):
    """At exactly the minimum padding the result is still exact; one voxel less on the TOF axis
    (x for the phi = 0 view) wraps and the error jumps by orders of magnitude."""
    grid = GRIDS["even"]
    ref = HistoImageProjector(grid, VIEWS[:1], backend="cpu")
    lo = FFTProjector(grid, VIEWS[:1], backend="cpu").min_padding
    x = volume(grid.shape)
    exact = FFTProjector(grid, VIEWS[:1], padding=lo, backend="cpu")
    short = FFTProjector(grid, VIEWS[:1], padding=(lo[0], lo[1], lo[2] - 1), backend="cpu")
    assert not exact.wraps and short.wraps
    e_exact = rel_err(exact.forward(x, 0), ref.forward(x, 0))
    e_short = rel_err(short.forward(x, 0), ref.forward(x, 0))
    assert e_exact < RTOL
    assert e_short > 100 * max(e_exact, 1e-7)


def test_too_small_padding_wraps_around():
    """No padding at all: a point source near the y = 0 face spreads across the face and re-enters
    at y = ny - 1 (cyclic convolution), where the spatial projector is exactly zero. The operator is
    still an exact adjoint pair."""
    grid = GRIDS["even"]
    view = [View.from_degrees(90.0)]  # TOF along y: the long axis of the kernel crosses the y faces
    ref = HistoImageProjector(grid, view, backend="cpu")
    op = FFTProjector(grid, view, padding=grid.shape, backend="cpu")
    assert op.wraps and op.padding == grid.shape
    x = np.zeros(grid.shape, np.float32)
    x[6, 1, 10] = 1.0
    a, b = op.forward(x, 0)[0], ref.forward(x, 0)[0]
    # The TOF support reaches 19 voxels (3 sigma = 76 mm): rows 21..23 are out of its reach from
    # y = 1, but cyclically they are only 2..4 voxels below it.
    far = (slice(None), slice(21, None), slice(None))
    assert np.all(b[far] == 0)
    assert a[far].max() > 0.5 * a.max()  # the wrapped TOF kernel, near its peak
    assert rel_err(a, b) > 0.1
    assert op.adjointness_test(rng=3) < RTOL


def test_padding_argument_checks():
    grid = GRIDS["even"]
    with pytest.raises(ValueError, match="padding"):
        FFTProjector(grid, VIEWS[:1], padding=(11, 24, 20), backend="cpu")  # smaller than the image
    with pytest.raises(ValueError, match="padding"):
        FFTProjector(grid, VIEWS[:1], padding=(12, 24), backend="cpu")
    with pytest.raises(ValueError, match="padding"):
        FFTProjector(grid, VIEWS[:1], padding=(12.0, 24, 20), backend="cpu")
    with pytest.raises(ValueError, match="padding"):
        FFTProjector(grid, VIEWS[:1], padding="big", backend="cpu")
    with pytest.raises(TypeError, match="padding"):
        FFTProjector(grid, VIEWS[:1], padding=64, backend="cpu")


# --- spectral mode --------------------------------------------------------------------------------
def analytic_spectrum(grid, phi, theta, sigmas, padded):
    """exp(-w^T Sigma w / 2) on the full (Mz, My, Mx) FFT grid, float64; Sigma from the view angles.

    On an even axis the Nyquist bin means both +pi/v and -pi/v; the trapezoid rule on the band
    weights the two equally, so the spectrum is averaged over both signs, per even axis (brute
    force: 2^(number of even axes) full-grid evaluations)."""
    cp, sp, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
    e_t = np.array([ct * cp, ct * sp, st])  # (x, y, z)
    e_r = np.array([-sp, cp, 0.0])
    e_a = np.cross(e_t, e_r)
    cov = sum(s**2 * np.outer(e, e) for s, e in zip(sigmas, (e_t, e_r, e_a)))
    variants = []
    for m, v in zip(padded, grid.voxel_size):
        w = 2 * np.pi * np.fft.fftfreq(m, d=v)
        if m % 2:
            variants.append([w])
        else:
            flipped = w.copy()
            flipped[m // 2] = -w[m // 2]
            variants.append([w, flipped])
    total, count = 0.0, 0
    for fz in variants[0]:
        for fy in variants[1]:
            for fx in variants[2]:
                wz, wy, wx = np.meshgrid(fz, fy, fx, indexing="ij")
                w = np.stack([wx, wy, wz], axis=-1)
                total = total + np.exp(-0.5 * np.einsum("...i,ij,...j->...", w, cov, w))
                count += 1
    return total / count


def convolve_oracle(x, spectrum, conj=False):
    """crop(IFFT(K^ . FFT(pad x))) in float64 (conj(K^) for the adjoint)."""
    pad = np.zeros(spectrum.shape)
    pad[tuple(slice(0, n) for n in x.shape)] = x
    k = np.conj(spectrum) if conj else spectrum
    out = np.fft.ifftn(np.fft.fftn(pad) * k).real
    return out[tuple(slice(0, n) for n in x.shape)]


def kernel_sigmas(kernel):
    """(sigma_tof, sigma_radial, sigma_axial) in mm straight from the FWHMs (no voxel-box term)."""
    return (C_MM_PER_PS * kernel.tof_fwhm_ps / 2 / FWHM_PER_SIGMA, kernel.radial_fwhm / FWHM_PER_SIGMA,
            kernel.axial_fwhm / FWHM_PER_SIGMA)


@pytest.mark.parametrize("grid_name", list(GRIDS))
@pytest.mark.parametrize("padding", ["auto", "odd"])
def test_spectral_matches_float64_oracle(grid_name, padding, volume):
    grid = GRIDS[grid_name]
    kernel = SRKernel.invariant(tof_fwhm_ps=500.0, fwhm=6.5)
    pad = "auto" if padding == "auto" else tuple(2 * n + 3 - (n % 2) for n in grid.shape)  # odd M
    op = spectral_cpu(grid, VIEWS, kernel, padding=pad)
    for v, view in enumerate(VIEWS):
        spec = analytic_spectrum(grid, view.phi, view.theta, kernel_sigmas(kernel), op.padding)
        x, y = volume(grid.shape), volume(grid.shape)
        assert rel_err(op.forward(x, v)[0], convolve_oracle(x, spec)) < RTOL
        assert rel_err(op.adjoint(y[None], v), convolve_oracle(y, spec, conj=True)) < RTOL


def test_spectral_gibbs_ripples_and_band_limited_peak():
    """Point source, phi = 0 (TOF along x, LOR-radial along y, LOR-axial along z).

    * spectral: cutting K^ at Nyquist (K^ = exp(-sigma^2 pi^2 / 2 v^2) = 0.15 there for 5.8 mm at
      4 mm voxels) gives ripples of alternating sign along the short y axis, the largest about -1.3%
      of the peak; along the 60 mm TOF axis K^ is ~0 at Nyquist and there is no ripple. The kernel is
      separable here, and its peak is the sampled Gaussian's peak times erf(pi sigma / (sqrt(2) v))
      for each short axis (the fraction of the 1D Gaussian spectrum inside the band).
    * spatial-exact: the truncated non-negative lattice kernel: no negative values beyond rounding.
    """
    grid = GRIDS["even"]
    kernel = SRKernel.invariant()
    x = np.zeros(grid.shape, np.float32)
    c = (6, 12, 10)
    x[c] = 1.0
    spec = spectral_cpu(grid, VIEWS[:1], kernel).forward(x, 0)[0]
    exact = FFTProjector(grid, VIEWS[:1], kernel, backend="cpu").forward(x, 0)[0]

    st, sr, sa = kernel_sigmas(kernel)
    v = 4.0
    gauss_peak = v**3 / ((2 * np.pi) ** 1.5 * st * sr * sa)
    band = erf(np.pi * sr / (np.sqrt(2) * v)) * erf(np.pi * sa / (np.sqrt(2) * v))
    assert spec[c] == pytest.approx(gauss_peak * band, rel=2e-3)
    assert exact[c] == pytest.approx(exact.max())

    peak = spec.max()
    assert spec.min() < -0.005 * peak                       # negative lobes exist ...
    assert exact.min() > -1e-6 * exact.max()                # ... and not in spatial-exact
    y_profile = spec[c[0], c[1] + 2:c[1] + 8, c[2]]         # beyond the main lobe along e_r
    assert np.all(y_profile[::2] < 0) and np.all(y_profile[1::2] > 0)  # alternating: Gibbs
    assert spec[c[0], c[1], :].min() > 0                    # no ripple along the TOF axis


def test_spectral_mode_close_to_spatial_exact_for_practical_kernel(volume):
    """The two modes are different kernels (band-limited untruncated Gaussian vs truncated lattice
    Gaussian): on a random image they differ by a few percent (the band limit alone lowers the
    5.8 mm kernel's peak by 10%), far above float rounding but far below the image itself."""
    grid = GRIDS["even"]
    x = volume(grid.shape)
    a = spectral_cpu(grid, VIEWS[:2]).forward(x, 1)
    b = FFTProjector(grid, VIEWS[:2], backend="cpu").forward(x, 1)
    assert 1e-3 < rel_err(a, b) < 5e-2


# --- adjointness ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["spatial-exact", "spectral"])
@pytest.mark.parametrize("grid_name", ["even", "odd"])
def test_adjointness(mode, grid_name):
    op = FFTProjector(GRIDS[grid_name], VIEWS, mode=mode, backend="cpu")
    assert op.adjointness_test(rng=1) < RTOL
    assert op.adjointness_test(rng=2) < RTOL


def test_adjointness_asymmetric_invariant():
    op = FFTProjector(GRIDS["aniso"], VIEWS, KERNELS["asym_invariant"], backend="cpu")
    assert op.adjointness_test(rng=5) < RTOL


# --- interface ------------------------------------------------------------------------------------
def test_interface(volume):
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS[:2], backend="cpu")
    assert isinstance(op, LinearOperator)
    assert op.n_views == 2 and op.grid == grid and op.mode == "spatial-exact"
    assert op.in_shape == grid.shape and op.out_shape == (2,) + grid.shape
    assert op.n_units == 2 and op.output_shape(1) == (1,) + grid.shape
    x = volume(grid.shape)
    out = np.empty((1,) + grid.shape, np.float32)
    assert op.forward(x, 1, out=out) is out
    np.testing.assert_array_equal(out, op.forward(x, 1))
    np.testing.assert_array_equal(op.back(x[None], 0), op.adjoint(x[None], 0))
    np.testing.assert_array_equal(op(x, 1), op.forward(x, 1))
    vo = op.subset(1)
    np.testing.assert_array_equal(vo.forward(x), op.forward(x, 1))
    np.testing.assert_array_equal(vo.adjoint(x[None]), op.adjoint(x[None], 1))
    # the default backend is chosen and reported
    auto = FFTProjector(grid, VIEWS[:1])
    assert auto.backend == ("cuda" if directpet.cuda_device_count() > 0 else "cpu")


def test_threads_and_planner_do_not_change_results(volume):
    grid = GRIDS["odd"]
    x = volume(grid.shape)
    base = FFTProjector(grid, VIEWS[2:3], backend="cpu", threads=1, planner="estimate").forward(x, 0)
    for kw in ({"threads": 2}, {"planner": "measure"}, {}):
        other = FFTProjector(grid, VIEWS[2:3], backend="cpu", **kw).forward(x, 0)
        assert rel_err(other, base) < 1e-6


def test_spectra_are_computed_once_and_kept(volume):
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS, backend="cpu")
    assert not any(op._engine.has_view(v) for v in range(len(VIEWS)))
    x = volume(grid.shape)
    op.forward(x, 2)
    assert op._engine.has_view(2) and not op._engine.has_view(0)
    calls = []
    op._view_terms = lambda v: calls.append(v)  # would break if called again
    op.adjoint(x[None], 2)
    op.forward(x, 2)
    assert calls == []
    assert op._engine.core.nbytes > 0


# --- wrong kernels and bad input ----------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [SRKernel.clinical("variant1"), SRKernel.invariant(asymmetric=True),
                                    SRKernel.stress()])
def test_spatial_exact_rejects_variant_kernels(kernel):
    with pytest.raises(ValueError, match="invariant.*HistoImageProjector.*LowRankProjector"):
        FFTProjector(GRIDS["even"], VIEWS[:1], kernel, backend="cpu")


@pytest.mark.parametrize("kernel", [SRKernel.clinical("variant1"), SRKernel.invariant(asymmetric=True),
                                    KERNELS["asym_invariant"]])
def test_spectral_rejects_non_gaussian_invariant_kernels(kernel):
    with pytest.raises(ValueError, match="is_symmetric_invariant"):
        spectral_cpu(GRIDS["even"], VIEWS[:1], kernel)


def test_constructor_argument_checks():
    grid = GRIDS["even"]
    with pytest.raises(ValueError, match="mode"):
        FFTProjector(grid, VIEWS, mode="fft", backend="cpu")
    with pytest.raises(ValueError, match="planner"):
        FFTProjector(grid, VIEWS, planner="patient", backend="cpu")
    with pytest.raises(ValueError, match="threads"):
        FFTProjector(grid, VIEWS, threads=0, backend="cpu")
    with pytest.raises(ValueError, match="backend"):
        FFTProjector(grid, VIEWS, backend="gpu")
    with pytest.raises(TypeError, match="grid"):
        FFTProjector((12, 24, 20), VIEWS, backend="cpu")
    with pytest.raises(TypeError, match="kernel"):
        FFTProjector(grid, VIEWS, kernel="invariant", backend="cpu")
    with pytest.raises(TypeError, match="views"):
        FFTProjector(grid, [0.0, 1.0], backend="cpu")
    if directpet.cuda_device_count() == 0:
        with pytest.raises(RuntimeError, match="cuda"):
            FFTProjector(grid, VIEWS, backend="cuda")


@pytest.mark.parametrize("mode", ["spatial-exact", "spectral"])
def test_bad_inputs_name_the_argument(mode, volume):
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS[:2], mode=mode, backend="cpu")
    x = volume(grid.shape)
    with pytest.raises(TypeError, match="image.*float32"):
        op.forward(x.astype(np.float64), 0)
    with pytest.raises(ValueError, match="image.*shape"):
        op.forward(x[:, :, :-1].copy(), 0)
    with pytest.raises(ValueError, match="image.*C-contiguous"):
        op.forward(np.asfortranarray(x), 0)
    bad = x.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="image.*NaN"):
        op.forward(bad, 0)
    with pytest.raises(ValueError, match="histo_images.*NaN"):
        op.adjoint(bad[None], 1)
    with pytest.raises(TypeError, match="image"):
        op.forward(x.tolist(), 0)
    with pytest.raises(ValueError, match="out.*shape"):
        op.forward(x, 0, out=np.empty(grid.shape, np.float32))
    with pytest.raises(ValueError, match="histo_images.*shape"):
        op.adjoint(np.stack([x] * 3), [0, 1])
    with pytest.raises(ValueError, match="subset: view indices"):
        op.forward(x, 2)
    with pytest.raises(TypeError, match="subset"):
        op.forward(x, 0.0)


def test_engine_checks_arrays():
    """The compiled engine validates what Python hands it (names the argument, never reads past)."""
    eng = _core.DirectFftEngine([4, 6, 5], [6, 8, 8], 1, "estimate")
    ok = np.zeros((1, 6, 8, 8), np.float32)
    with pytest.raises(ValueError, match="kernels.*shape"):
        eng.set_view(0, kernels=np.zeros((1, 6, 8, 7), np.float32))
    with pytest.raises(TypeError, match="kernels.*float32"):
        eng.set_view(0, kernels=ok.astype(np.float64))
    with pytest.raises(TypeError, match="kernels.*ndarray"):
        eng.set_view(0, kernels=ok.tolist())
    with pytest.raises(TypeError, match="spectra.*complex64"):
        eng.set_view(0, spectra=np.zeros((1, 6, 8, 5), np.complex128))
    with pytest.raises(ValueError, match="exactly one"):
        eng.set_view(0)
    with pytest.raises(ValueError, match="coefficients"):
        eng.set_view(0, kernels=np.zeros((2, 6, 8, 8), np.float32))
    with pytest.raises(ValueError, match="coefficients.*shape"):
        eng.set_view(0, kernels=ok, coefficients=np.zeros((1, 6, 4), np.float32))
    with pytest.raises(ValueError, match="padded"):
        _core.DirectFftEngine([4, 6, 5], [3, 8, 8], 1, "estimate")
    with pytest.raises(ValueError, match="planner"):
        _core.DirectFftEngine([4, 6, 5], [6, 8, 8], 1, "slow")
    x = np.ones((4, 6, 5), np.float32)
    with pytest.raises(ValueError, match="view: 3"):
        eng.forward(3, x, np.empty_like(x))
    eng.set_view(3, kernels=ok)
    with pytest.raises(ValueError, match="alias"):
        eng.forward(3, x, x)
    with pytest.raises(ValueError, match="out"):
        eng.adjoint(3, x, np.empty((4, 6, 4), np.float32))


# --- GPU: cuFFT vs FFTW, array libraries --------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["spatial-exact", "spectral"])
@pytest.mark.parametrize("grid_name", list(GRIDS))
def test_gpu_matches_cpu(mode, grid_name, volume):
    grid = GRIDS[grid_name]
    kernel = SRKernel.invariant(tof_fwhm_ps=500.0, fwhm=6.5)
    cpu = FFTProjector(grid, VIEWS, kernel, mode=mode, backend="cpu")
    gpu = FFTProjector(grid, VIEWS, kernel, mode=mode, backend="cuda")
    assert gpu.backend == "cuda" and gpu.padding == cpu.padding
    for v in range(len(VIEWS)):
        x, y = volume(grid.shape), volume((1,) + grid.shape)
        assert rel_err(gpu.forward(x, v), cpu.forward(x, v)) < RTOL
        assert rel_err(gpu.adjoint(y, v), cpu.adjoint(y, v)) < RTOL
    assert gpu.adjointness_test(rng=4) < RTOL


@pytest.mark.gpu
def test_gpu_matches_spatial_projector_and_wraps_like_cpu(volume):
    grid = GRIDS["odd"]
    ref = HistoImageProjector(grid, VIEWS, backend="cpu")
    gpu = FFTProjector(grid, VIEWS, backend="cuda")
    x = volume(grid.shape)
    assert rel_err(gpu.forward(x), ref.forward(x)) < RTOL
    short_cpu = FFTProjector(grid, VIEWS[:1], padding=grid.shape, backend="cpu")
    short_gpu = FFTProjector(grid, VIEWS[:1], padding=grid.shape, backend="cuda")
    assert rel_err(short_gpu.forward(x, 0), short_cpu.forward(x, 0)) < RTOL


@pytest.mark.gpu
def test_gpu_numpy_cupy_torch_identical(volume):
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS, backend="cuda")
    x, y = volume(grid.shape), volume((1,) + grid.shape)
    fx, by = op.forward(x, 2), op.adjoint(y, 2)
    assert isinstance(fx, np.ndarray)
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    fx_c, by_c = op.forward(cp.asarray(x), 2), op.adjoint(cp.asarray(y), 2)
    assert isinstance(fx_c, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(fx_c), fx)
    np.testing.assert_array_equal(cp.asnumpy(by_c), by)
    stacked = op.forward(cp.asarray(x))
    np.testing.assert_array_equal(cp.asnumpy(stacked[2:3]), fx)


@pytest.mark.gpu
def test_gpu_torch_identical(volume):
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS, mode="spectral", backend="cuda")
    x = volume(grid.shape)
    fx = op.forward(x, 1)
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA support here")
    fx_t = op.forward(torch.from_numpy(x).cuda(), 1)
    assert fx_t.is_cuda
    np.testing.assert_array_equal(fx_t.cpu().numpy(), fx)


@pytest.mark.gpu
def test_gpu_non_default_stream(volume):
    """Work is enqueued on the caller's stream (its own cuFFT plans and scratch) with the same result
    (same plan configuration, so equal to rounding; compared at 1e-6 rather than bit for bit)."""
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS, backend="cuda")
    x = volume(grid.shape)
    ref = op.forward(x, 0)
    with cp.cuda.Stream(non_blocking=True) as s:
        out = op.forward(cp.asarray(x), 0)
        s.synchronize()
    assert rel_err(cp.asnumpy(out), ref) < 1e-6


@pytest.mark.gpu
def test_gpu_bad_inputs(volume):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    grid = GRIDS["even"]
    op = FFTProjector(grid, VIEWS, backend="cuda")
    x = volume(grid.shape)
    with pytest.raises(TypeError, match="out"):
        op.forward(cp.asarray(x), 0, out=np.empty((1,) + grid.shape, np.float32))
    with pytest.raises(TypeError, match="image.*float32"):
        op.forward(cp.asarray(x, dtype=cp.float64), 0)
    bad = cp.asarray(x)
    bad[0, 0, 0] = cp.nan
    with pytest.raises(ValueError, match="image.*NaN"):
        op.forward(bad, 0)
