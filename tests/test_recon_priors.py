"""The pairwise priors of directpet.recon.priors: value, gradient and Hessian diagonal against the
float64 reference written from the sums (directpet.reference.priors), derivatives against finite
differences, and the invariances a physicist would check (flips, translation inside a zero border,
constant images cost nothing, beta scales linearly), on NumPy and, where a GPU is present, CuPy."""

from __future__ import annotations

import numpy as np
import pytest

from directpet.geometry import ImageGrid
from directpet.recon import LogCoshPrior, QuadraticPrior, RelativeDifferencePrior
from directpet.reference import priors as ref

VOXEL = (2.0, 1.5, 1.5)       # anisotropic on purpose: the weights depend on the voxel edges


def _image(rng, shape=(4, 5, 6)):
    """A positive random image with structure on several scales (never a constant or zeros)."""
    x = rng.gamma(2.0, 1.0, shape) + 0.05
    x[1:3, 1:4, 2:5] += rng.uniform(3, 6)        # a hot block: edges for gamma to act on
    return x


def _priors(rng, shape):
    kappa = rng.uniform(0.5, 1.5, shape)
    return [
        (RelativeDifferencePrior(0.7, VOXEL, gamma=2.0, epsilon=0.01),
         lambda a, b: ref.rdp_pair(a, b, 2.0, 0.01), dict(neighbourhood=26)),
        (RelativeDifferencePrior(1.3, VOXEL, gamma=0.0, epsilon=0.3, neighbourhood=6, kappa=kappa),
         lambda a, b: ref.rdp_pair(a, b, 0.0, 0.3), dict(neighbourhood=6, kappa=kappa)),
        (QuadraticPrior(0.4, VOXEL), ref.quadratic_pair, dict(neighbourhood=26)),
        (LogCoshPrior(2.0, VOXEL, delta=0.8, kappa=kappa), lambda a, b: ref.logcosh_pair(a, b, 0.8),
         dict(neighbourhood=26, kappa=kappa)),
    ]


def test_value_gradient_and_hessian_diagonal_match_the_reference(rng):
    x = _image(rng)
    for prior, pair, kw in _priors(rng, x.shape):
        value, grad, hess = ref.pairwise_prior(x, pair, prior.beta, VOXEL, **kw)
        assert prior.value(x) == pytest.approx(value, rel=1e-12), prior
        np.testing.assert_allclose(prior.gradient(x), grad, rtol=1e-11, atol=1e-12 * np.abs(grad).max())
        np.testing.assert_allclose(prior.hessian_diagonal(x), hess, rtol=1e-11, atol=1e-12 * np.abs(hess).max())


def test_gradient_and_curvature_match_finite_differences(rng):
    """Central differences of the value (gradient) and of the gradient (Hessian diagonal), float64."""
    x = _image(rng, (3, 4, 4))
    h = 1e-5
    for prior, _, _ in _priors(rng, x.shape):
        grad, hess = prior.gradient(x), prior.hessian_diagonal(x)
        for j in [tuple(rng.integers(0, n) for n in x.shape) for _ in range(6)] + [(1, 2, 2), (0, 0, 0)]:
            e = np.zeros_like(x)
            e[j] = h
            fd = (prior.value(x + e) - prior.value(x - e)) / (2 * h)
            assert grad[j] == pytest.approx(fd, rel=1e-6, abs=1e-8), (prior, j)
            fd2 = (prior.gradient(x + e)[j] - prior.gradient(x - e)[j]) / (2 * h)
            assert hess[j] == pytest.approx(fd2, rel=1e-5, abs=1e-7), (prior, j)


def test_constant_images_cost_nothing_and_beta_scales(rng):
    c = np.full((3, 4, 5), rng.uniform(0.5, 3.0))
    x = _image(rng, (3, 4, 5))
    for prior, _, _ in _priors(rng, c.shape):
        assert prior.value(c) == 0.0 and not prior.gradient(c).any()
        assert prior.value(x) > 0
    a = RelativeDifferencePrior(1.0, VOXEL, epsilon=0.01)
    b = RelativeDifferencePrior(3.5, VOXEL, epsilon=0.01)
    assert b.value(x) == pytest.approx(3.5 * a.value(x), rel=1e-12)
    np.testing.assert_allclose(b.gradient(x), 3.5 * a.gradient(x), rtol=1e-12)
    off = RelativeDifferencePrior(0.0, VOXEL, epsilon=0.01)
    assert off.value(x) == 0.0 and not off.gradient(x).any() and not off.hessian_diagonal(x).any()


def test_flips_and_translation_leave_the_prior_unchanged(rng):
    """A flip of any axis maps the pairs onto themselves (the weights are symmetric); shifting an
    object inside a zero border changes nothing either (pairs of zeros cost 0 with epsilon > 0)."""
    x = _image(rng)
    prior = RelativeDifferencePrior(0.9, VOXEL, gamma=2.0, epsilon=0.02)
    g = prior.gradient(x)
    for axis in range(3):
        assert prior.value(np.flip(x, axis)) == pytest.approx(prior.value(x), rel=1e-12)
        np.testing.assert_allclose(prior.gradient(np.flip(x, axis)), np.flip(g, axis), rtol=1e-12, atol=1e-14)
    big = np.zeros((10, 11, 12))
    big[2:6, 3:8, 1:7] = x
    moved = np.zeros_like(big)
    moved[5:9, 4:9, 5:11] = x
    assert prior.value(big) == pytest.approx(prior.value(moved), rel=1e-12)
    np.testing.assert_allclose(prior.gradient(moved)[5:9, 4:9, 5:11], prior.gradient(big)[2:6, 3:8, 1:7],
                               rtol=1e-12, atol=1e-14)


def test_the_relative_difference_prior_is_scale_aware(rng):
    """RDP's pair term is homogeneous of degree one where epsilon is negligible: R(c x) ~ c R(x),
    the property that makes one beta serve images of different count levels (Nuyts et al. 2002);
    the quadratic prior scales as c^2."""
    x = _image(rng) + 1.0
    c = 7.0
    rdp = RelativeDifferencePrior(1.0, VOXEL, epsilon=1e-9)
    assert rdp.value(c * x) == pytest.approx(c * rdp.value(x), rel=1e-7)
    quad = QuadraticPrior(1.0, VOXEL)
    assert quad.value(c * x) == pytest.approx(c * c * quad.value(x), rel=1e-12)


def test_the_hessian_diagonal_is_positive_where_a_preconditioner_needs_it(rng):
    """The three pair functions are convex in each argument: the diagonal is >= 0 everywhere, and
    > 0 for the RDP wherever epsilon > 0."""
    x = _image(rng)
    x[0] = 0.0                                 # zeros, as a reconstruction's cold background has
    for prior, _, _ in _priors(rng, x.shape):
        assert (prior.hessian_diagonal(x) >= 0).all(), prior
    assert (RelativeDifferencePrior(1.0, VOXEL, epsilon=0.01).hessian_diagonal(x) > 0).all()


def test_float32_images_stay_float32_and_out_is_overwritten(rng):
    x = _image(rng).astype(np.float32)
    prior = RelativeDifferencePrior(1.0, ImageGrid(x.shape, VOXEL), epsilon=0.01)
    g = prior.gradient(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, prior.gradient(x.astype(np.float64)), rtol=2e-4, atol=1e-5 * np.abs(g).max())
    out = np.full_like(x, np.nan)
    assert prior.hessian_diagonal(x, out=out) is out and np.isfinite(out).all()
    assert LogCoshPrior(1.0, VOXEL, delta=0.5).gradient(x).dtype == np.float32


@pytest.mark.parametrize("shape", [(4, 5, 6), (1, 7, 300), (3, 1, 9), (2, 3, 1)])
def test_the_compiled_kernel_matches_the_reference(rng, shape):
    """float32 C-contiguous NumPy images go through the compiled pass (csrc/recon/pair_prior.hpp,
    OpenMP): value, gradient, Hessian diagonal and the accumulating step against the float64 reference
    written from the sums, to float32 accuracy, for every prior, neighbourhood and kappa, on images
    with a single slice, row or column (where most neighbours fall outside) and rows longer than a
    GPU block."""
    x64 = _image(rng, shape) if min(shape) > 2 else rng.gamma(2.0, 1.0, shape) + 0.05
    x = x64.astype(np.float32)
    for prior, pair, kw in _priors(rng, shape):
        kw = dict(kw, kappa=None if kw.get("kappa") is None else kw["kappa"].astype(np.float32).astype(np.float64))
        if prior.kappa is not None:
            prior.kappa = kw["kappa"]
        assert prior._fused(x, np)
        value, grad, hess = ref.pairwise_prior(x.astype(np.float64), pair, prior.beta, VOXEL, **kw)
        assert prior.value(x) == pytest.approx(value, rel=2e-5), prior
        g = prior.gradient(x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, grad, rtol=1e-4, atol=2e-5 * np.abs(grad).max())
        np.testing.assert_allclose(prior.hessian_diagonal(x), hess, rtol=1e-4, atol=2e-5 * np.abs(hess).max())
        y = rng.normal(size=shape).astype(np.float32)
        out = y.copy()
        assert prior.add_gradient(x, out, -0.3) is out
        np.testing.assert_allclose(out, y - 0.3 * grad, rtol=1e-4, atol=2e-5 * max(np.abs(grad).max(), 1))
    # a strided float32 image takes the vectorised path and gives the same numbers
    prior = RelativeDifferencePrior(0.7, VOXEL, gamma=2.0, epsilon=0.01)
    wide = np.zeros(shape[:2] + (2 * shape[2],), np.float32)
    wide[..., ::2] = x
    assert not prior._fused(wide[..., ::2], np)
    np.testing.assert_allclose(prior.gradient(wide[..., ::2]), prior.gradient(x), rtol=2e-5,
                               atol=1e-6 * np.abs(prior.gradient(x)).max())


def test_log_cosh_value_is_accurate_in_float32_for_small_differences(rng):
    """log cosh t ~ t^2 / 2 for small t: the form |t| + log1p(exp(-2|t|)) - log 2 cancels there in
    float32 (negative pair values); the prior must agree with float64 to float32 accuracy."""
    x = (1.0 + 1e-4 * rng.standard_normal((4, 6, 7))).astype(np.float32)
    prior = LogCoshPrior(1.0, VOXEL, delta=1.0)
    exact = prior.value(x.astype(np.float64))
    assert exact > 0 and prior.value(x) == pytest.approx(exact, rel=1e-4)
    value, _, _ = ref.pairwise_prior(x.astype(np.float64), lambda a, b: ref.logcosh_pair(a, b, 1.0), 1.0, VOXEL)
    assert exact == pytest.approx(value, rel=1e-9)


def test_add_gradient_is_the_algorithms_step(rng):
    """``out += factor * grad R(x)``: the one call BSREM and SVRG make per subset."""
    x = _image(rng).astype(np.float32)
    y = rng.normal(size=x.shape).astype(np.float32)
    prior = RelativeDifferencePrior(1.7, VOXEL, epsilon=0.01)
    out = y.copy()
    assert prior.add_gradient(x, out, -0.3) is out
    np.testing.assert_allclose(out, y - 0.3 * prior.gradient(x), rtol=1e-6, atol=1e-6)


def test_bad_input_is_a_clear_error(rng):
    x = _image(rng)
    with pytest.raises(ValueError, match="beta"):
        RelativeDifferencePrior(-1.0, VOXEL, epsilon=0.1)
    with pytest.raises(ValueError, match="epsilon"):
        RelativeDifferencePrior(1.0, VOXEL, epsilon=0.0)
    with pytest.raises(TypeError, match="epsilon"):
        RelativeDifferencePrior(1.0, VOXEL)
    with pytest.raises(ValueError, match="gamma"):
        RelativeDifferencePrior(1.0, VOXEL, gamma=-1, epsilon=0.1)
    with pytest.raises(ValueError, match="neighbourhood"):
        QuadraticPrior(1.0, VOXEL, neighbourhood=18)
    with pytest.raises(ValueError, match="voxel_size"):
        QuadraticPrior(1.0, (1.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="voxel_size"):
        QuadraticPrior(1.0, (1.0, 1.0))
    with pytest.raises(ValueError, match="delta"):
        LogCoshPrior(1.0, VOXEL, delta=0)
    with pytest.raises(ValueError, match="kappa"):
        QuadraticPrior(1.0, VOXEL, kappa=-np.ones(x.shape))
    with pytest.raises(ValueError, match="kappa"):
        QuadraticPrior(1.0, VOXEL, kappa=np.ones((2, 2, 2))).gradient(x)
    prior = RelativeDifferencePrior(1.0, VOXEL, epsilon=0.1)
    with pytest.raises(ValueError, match=r"x: the relative difference prior needs an image >= 0"):
        prior.value(x - 10)
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        prior.gradient(bad)
    with pytest.raises(ValueError, match="shape"):
        prior.value(x[0])
    with pytest.raises(TypeError, match="float32 or float64"):
        prior.value(x.astype(np.int64))
    with pytest.raises(ValueError, match="out"):
        prior.gradient(x, out=np.zeros(x.shape, np.float32))
    with pytest.raises(ValueError, match="out: expected"):
        prior.add_gradient(x, None)
    frozen = np.zeros(x.shape)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="out: the array is read-only"):
        prior.add_gradient(x, frozen)
    with pytest.raises(ValueError, match="out: the array is read-only"):
        prior.gradient(x, out=frozen)
    # parameters beyond float32 on a float32 image (the compiled pass): errors naming them
    x32 = x.astype(np.float32)
    with pytest.raises(ValueError, match="beta: 1e[+]?300 overflows"):
        RelativeDifferencePrior(1e300, VOXEL, epsilon=0.1).gradient(x32)
    with pytest.raises(ValueError, match="epsilon: 1e[+]?300 overflows"):
        RelativeDifferencePrior(1.0, VOXEL, epsilon=1e300).value(x32)
    with pytest.raises(ValueError, match="delta: 1e[+]?300 overflows"):
        LogCoshPrior(1.0, VOXEL, delta=1e300).hessian_diagonal(x32)


@pytest.mark.gpu
def test_cupy_matches_numpy(rng):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    x = _image(rng, (5, 9, 300)).astype(np.float32)         # nx > 256: several blocks along x
    kappa = rng.uniform(0.5, 1.5, x.shape).astype(np.float32)
    xd = cp.asarray(x)
    pairs = [(RelativeDifferencePrior(0.8, VOXEL, epsilon=0.01, kappa=cp.asarray(kappa)),
              RelativeDifferencePrior(0.8, VOXEL, epsilon=0.01, kappa=kappa)),
             (RelativeDifferencePrior(0.8, VOXEL, epsilon=0.01, neighbourhood=6),) * 2,
             (QuadraticPrior(0.5, VOXEL, kappa=kappa),) * 2, (LogCoshPrior(1.2, VOXEL, delta=0.7),) * 2]
    for prior, cpu in pairs:
        assert prior.value(xd) == pytest.approx(cpu.value(x), rel=1e-5)
        # and against the float64 vectorised sums (not the same compiled code as the CPU's)
        np.testing.assert_allclose(prior.gradient(xd).get(), cpu.gradient(x.astype(np.float64)), rtol=1e-4,
                                   atol=2e-5 * float(np.abs(cpu.gradient(x)).max()))
        g = prior.gradient(xd)
        assert isinstance(g, cp.ndarray) and g.dtype == cp.float32
        np.testing.assert_allclose(g.get(), cpu.gradient(x), rtol=1e-5, atol=1e-6 * float(abs(g).max()))
        np.testing.assert_allclose(prior.hessian_diagonal(xd).get(), cpu.hessian_diagonal(x), rtol=1e-5,
                                   atol=1e-6)
        y = rng.normal(size=x.shape).astype(np.float32)
        out = cp.asarray(y)
        prior.add_gradient(xd, out, -0.25)               # the fused accumulate
        np.testing.assert_allclose(out.get(), y - 0.25 * cpu.gradient(x), rtol=1e-5, atol=1e-5)
