"""Penalised-likelihood reconstruction (directpet.recon.penalised): BSREM, MAP-EM and preconditioned
SVRG minimise -L + R. On a dense problem (tests/dense_problem.py) they reach the minimiser of a long
float64 L-BFGS-B run (SciPy) on the same objective; on a small problem of each family (DIRECT, FIRST,
dual-head; real projectors) they decrease the objective; BSREM with beta = 0 is block-RAMLA and MAP-EM
with beta = 0 is MLEM, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from dense_problem import random_dense
from scipy.optimize import minimize

from directpet import recon
from directpet.recon import (LogCoshPrior, QuadraticPrior, RelativeDifferencePrior, bsrem, map_em,
                             penalised_objective, svrg)

SHAPE = (3, 4, 5)
ROWS = (17, 31, 23, 29)


def _lbfgs_minimiser(problem, prior):
    """The minimiser of -L + R over x >= 0 by L-BFGS-B in float64, from the objective written here."""
    blocks = [a.astype(np.float64) for a in problem.blocks]
    parts = [(problem._d[s].astype(np.float64), problem._f[s].astype(np.float64), problem._b[s].astype(np.float64))
             for s in range(problem.n_subsets)]

    def objective(x):
        value, grad = 0.0, np.zeros_like(x)
        for a, (d, f, b) in zip(blocks, parts):
            ybar = f * (a @ x) + b
            value -= np.sum(d * np.log(ybar) - ybar)
            grad -= a.T @ (f * (d / ybar - 1.0))
        value += prior.value(x.reshape(SHAPE))
        return value, grad + prior.gradient(x.reshape(SHAPE)).ravel()

    n = int(np.prod(SHAPE))
    res = minimize(objective, np.ones(n), jac=True, method="L-BFGS-B", bounds=[(0, None)] * n,
                   options=dict(maxiter=10000, ftol=1e-15, gtol=1e-11))
    assert res.success, res.message
    return res.x.reshape(SHAPE), res.fun


@pytest.fixture(scope="module")
def dense():
    return random_dense(np.random.default_rng(20261124), SHAPE, ROWS, order=[2, 0, 3, 1])


PRIORS = {
    "rdp": lambda: RelativeDifferencePrior(2.0, (2.0, 1.5, 1.5), gamma=2.0, epsilon=0.01),
    "rdp6": lambda: RelativeDifferencePrior(5.0, (1.0, 1.0, 1.0), gamma=0.5, epsilon=0.1, neighbourhood=6),
    "quadratic": lambda: QuadraticPrior(3.0, (1.0, 1.0, 1.0)),
    "logcosh": lambda: LogCoshPrior(4.0, (1.0, 1.0, 1.0), delta=0.3),
}


def _rel(x, ref):
    return float(np.linalg.norm(np.asarray(x, np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_bsrem_and_svrg_reach_the_lbfgs_minimiser(dense, name):
    prior = PRIORS[name]()
    ref, ref_value = _lbfgs_minimiser(dense, prior)
    b = bsrem(dense, prior, 600, track_objective=True, progress=False)
    s = svrg(dense, prior, 150, seed=3, track_objective=True, progress=False)
    assert _rel(b.image, ref) < 1e-3, _rel(b.image, ref)
    assert _rel(s.image, ref) < 1e-3, _rel(s.image, ref)
    assert _rel(b.image, s.image.astype(np.float64)) < 1e-3
    for res in (b, s):
        assert res.objective_iterations == list(range(res.n_iter + 1))
        assert res.objective[-1] < res.objective[0]
        assert res.objective[-1] == pytest.approx(ref_value, rel=1e-6)      # float32 iterates
        assert res.objective[-1] == pytest.approx(penalised_objective(dense, res.image, prior), rel=1e-12)
        assert (res.image >= 0).all() and res.image.dtype == np.float32


def test_map_em_is_monotone_and_reaches_the_minimiser(dense):
    prior = PRIORS["quadratic"]()
    ref, _ = _lbfgs_minimiser(dense, prior)
    res = map_em(dense, prior, 400, track_objective=True, progress=False)
    obj = np.asarray(res.objective)
    assert np.all(np.diff(obj) <= 1e-7 * abs(obj[-1])), np.diff(obj).max()     # majorise-minimise (float32 x)
    assert _rel(res.image, ref) < 1e-3
    with pytest.raises(TypeError, match="QuadraticPrior"):
        map_em(dense, PRIORS["rdp"](), 1, progress=False)


def test_beta_zero_gives_the_unpenalised_algorithms_bit_for_bit(dense):
    off = RelativeDifferencePrior(0.0, (1.0, 1.0, 1.0), epsilon=0.1)
    a = bsrem(dense, off, 4, lambda0=0.3, gamma=0.05, preconditioner="mean", progress=False)
    b = recon.block_ramla(dense, 4, lambda0=0.3, gamma=0.05, progress=False)
    np.testing.assert_array_equal(a.image, b.image)
    a = map_em(dense, QuadraticPrior(0.0, (1.0, 1.0, 1.0)), 5, progress=False)
    b = recon.mlem(dense, 5, progress=False)
    np.testing.assert_allclose(a.image, b.image, rtol=2e-6)         # the root formula vs x * bp / S


@pytest.mark.parametrize("preconditioner", ["max", "mean"])
def test_one_bsrem_step_is_the_documented_formula(dense, preconditioner, rng):
    """The first subset update against the formula written out in float64:
    ``x1 = max(x0 + lambda0 x0 (g_s - grad R / n) / (T + x0 H / n), floor)`` with
    ``g_s = A_s^T f_s (d_s / ybar_s - 1)``, ``H = diag(hess R)(x0)`` and ``T = max_s S_s`` ('max') or
    ``S / n`` ('mean')."""
    prior = RelativeDifferencePrior(3.0, (1.0, 1.0, 1.0), epsilon=0.05)
    x0 = rng.uniform(0.5, 2.0, SHAPE).astype(np.float32)
    first = []
    bsrem(dense, prior, 1, lambda0=0.7, x0=x0, preconditioner=preconditioner, progress=False,
          callback=lambda it, m, x: first.append(np.array(x)) or True)
    n = dense.n_subsets
    A = [a.astype(np.float64) for a in dense.blocks]
    f = [v.astype(np.float64) for v in dense._f]
    S_s = np.array([(a.T @ fs).reshape(SHAPE) for a, fs in zip(A, f)])
    T = S_s.max(axis=0) if preconditioner == "max" else S_s.sum(axis=0) / n
    s = dense.order()[0]
    x = x0.astype(np.float64)
    ybar = f[s] * (A[s] @ x.ravel()) + dense._b[s]
    g_s = (A[s].T @ (f[s] * (dense._d[s] / ybar - 1.0))).reshape(SHAPE)
    ref64 = RelativeDifferencePrior(3.0, (1.0, 1.0, 1.0), epsilon=0.05)
    step = g_s - ref64.gradient(x) / n
    x1 = np.maximum(x + 0.7 * x * step / (T + x * ref64.hessian_diagonal(x) / n), 1e-6 * x.mean())
    np.testing.assert_allclose(first[0], x1, rtol=2e-5, atol=1e-6)


def test_a_stronger_prior_gives_a_smoother_image(dense):
    """The prior does what it is for: the roughness (the quadratic prior's value at beta = 1) of the
    minimiser falls as beta grows."""
    rough = QuadraticPrior(1.0, (1.0, 1.0, 1.0))
    values = [rough.value(svrg(dense, RelativeDifferencePrior(beta, (1, 1, 1), epsilon=0.01), 60, seed=1,
                               progress=False).image) for beta in (0.0, 1.0, 10.0)]
    assert values[0] > values[1] > values[2], values


# --- the penalty strength and the sweep ---------------------------------------------------------------------

def _hessian_row_sum(problem, x, approximate=False):
    """sum_s A_s^T diag(f_s^2 d_s / ybar_s^2) A_s 1 from the dense blocks in float64, the matrix
    written out (with ybar_s = d_s and d_s = 0 rows left out when approximate)."""
    total = np.zeros(int(np.prod(SHAPE)))
    for a, d, f, b in zip(problem.blocks, problem._d, problem._f, problem._b):
        a, d, f = a.astype(np.float64), d.astype(np.float64), f.astype(np.float64)
        if approximate:
            w = np.where(d > 0, f * f / np.where(d > 0, d, 1), 0.0)
        else:
            ybar = f * (a @ x.ravel().astype(np.float64)) + b
            w = f * f * d / ybar**2
        total += (a.T * w) @ a @ np.ones(a.shape[1])      # the Hessian block, then its row sums
    return np.sqrt(total).reshape(SHAPE)


def test_sqrt_hessian_row_sum_is_the_root_of_the_likelihood_hessians_row_sums(dense, rng):
    x = rng.uniform(0.5, 2.0, SHAPE).astype(np.float32)
    got = recon.sqrt_hessian_row_sum(dense, x)
    assert got.dtype == np.float32 and got.shape == SHAPE
    np.testing.assert_allclose(got, _hessian_row_sum(dense, x), rtol=2e-5)
    approx = recon.sqrt_hessian_row_sum(dense, approximate=True)
    np.testing.assert_allclose(approx, _hessian_row_sum(dense, x, approximate=True), rtol=2e-5)
    # the Hessian at x is the curvature of -L: a finite difference of the gradient along the ones
    # image, summed per voxel, is its row sum (the likelihood is smooth here: ybar > 0)
    def grad(z):
        g = np.zeros(int(np.prod(SHAPE)))
        for a, d, f, b in zip(dense.blocks, dense._d, dense._f, dense._b):
            a = a.astype(np.float64)
            g -= a.T @ (f * (d / (f * (a @ z) + b) - 1.0))
        return g
    h = 1e-4
    x64 = x.ravel().astype(np.float64)
    fd = (grad(x64 + h) - grad(x64 - h)) / (2 * h)
    np.testing.assert_allclose(got.ravel() ** 2, fd, rtol=1e-4)
    with pytest.raises(ValueError, match="x: the Hessian row sum"):
        recon.sqrt_hessian_row_sum(dense)
    with pytest.raises(ValueError, match="x: approximate=True"):
        recon.sqrt_hessian_row_sum(dense, x, approximate=True)
    with pytest.raises(ValueError, match="x"):
        recon.sqrt_hessian_row_sum(dense, np.full(SHAPE, np.nan, np.float32))


def test_rdp_beta_sweep_scales_beta_by_the_sensitivity_and_smooths_as_b_grows(dense, rng):
    x0 = rng.uniform(0.5, 2.0, SHAPE).astype(np.float32)
    rough = QuadraticPrior(1.0, (1.0, 1.0, 1.0))
    sweep = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [0.0, 0.05, 0.5], 40, x0, rough.value,
                                 lambda0=0.5)
    assert [run.b for run in sweep] == [0.0, 0.05, 0.5] and all(run.passes == 40 for run in sweep)
    assert all(run.seconds > 0 and run.seconds_per_pass == run.seconds / 40 for run in sweep)
    values = [run.value for run in sweep]
    assert values[0] > values[1] > values[2], values
    # b = 0.05 is beta = 0.05 * mean(S), gamma 2, epsilon 1e-3 mean(x0): the same run written out
    mean_s = float(np.mean([(a.T @ f).sum() for a, f in zip(dense.blocks, dense._f)]) * dense.n_subsets
                   / int(np.prod(SHAPE)))
    prior = RelativeDifferencePrior(0.05 * mean_s, (1.0, 1.0, 1.0), gamma=2.0, epsilon=1e-3 * float(x0.mean()))
    direct = bsrem(dense, prior, 40, lambda0=0.5, x0=x0, progress=False).image
    assert rough.value(direct) == pytest.approx(values[1], rel=1e-4)
    # kappa is rescaled to a mean square of 1: a multiple of it gives the same run
    kappa = recon.sqrt_hessian_row_sum(dense, x0)
    one = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [0.5], 5, x0, np.copy, kappa=kappa)[0][1]
    ten = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [0.5], 5, x0, np.copy, kappa=10 * kappa)[0][1]
    np.testing.assert_allclose(one, ten, rtol=1e-5)
    # a kappa that is 0 for x < 2 switches the prior off there (every pair with a voxel there has
    # weight 0): the image is rougher than the fully penalised one and smoother than the unpenalised
    # one, and where the prior acts it is nearer the fully penalised image than the unpenalised is
    half = np.ones(SHAPE, np.float32)
    half[..., :2] = 0
    off = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [0.0], 20, x0, np.copy)[0][1]
    on = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [5.0], 20, x0, np.copy)[0][1]
    halved = recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [5.0], 20, x0, np.copy, kappa=half)[0][1]
    assert rough.value(off) > rough.value(halved) > rough.value(on)
    assert _rel(halved[..., 2:], on[..., 2:].astype(np.float64)) < _rel(off[..., 2:], on[..., 2:].astype(np.float64))
    with pytest.raises(ValueError, match="betas"):
        recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [-1.0], 5, x0, np.copy)
    with pytest.raises(TypeError, match="measure"):
        recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [1.0], 5, x0, "noise")
    with pytest.raises(ValueError, match="kappa"):
        recon.rdp_beta_sweep(dense, (1.0, 1.0, 1.0), [1.0], 5, x0, np.copy, kappa=np.zeros(SHAPE))


# --- every family -----------------------------------------------------------------------------------------

def _direct_problem(rng):
    from directpet.direct import HistoImageProjector, SRKernel, ViewSet, ViewSubsets, model_consistent_data
    from directpet.geometry import ImageGrid

    grid = ImageGrid((4, 16, 16), 8.0)
    proj = HistoImageProjector(grid, ViewSet(4, 1), SRKernel.invariant(), backend="cpu", threads=1)
    truth = rng.uniform(0.5, 1.5, grid.shape).astype(np.float32)
    data = model_consistent_data(proj, truth, counts=3e4, seed=rng)
    return ViewSubsets(proj, data), grid.voxel_size


def _first_problem(rng):
    from directpet.first import AngleSubsets, RotatingScanner, SuperLORProjector, build_super_lor_table
    from directpet.first import model_consistent_data

    scanner = RotatingScanner.small()
    proj = SuperLORProjector(build_super_lor_table(scanner), "fast", backend="cpu")
    truth = rng.uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32)
    data = model_consistent_data(proj, truth, counts=3e4, seed=rng)
    return AngleSubsets(proj, data, 4), scanner.grid.voxel_size


def _dualhead_problem(rng):
    from directpet.dualhead import DualHeadProjector, DualHeadScanner, DualHeadSubsets, build_patch_model
    from directpet.dualhead import model_consistent_data

    scanner = DualHeadScanner.small()
    proj = DualHeadProjector(build_patch_model(scanner), "default", backend="cpu")
    truth = rng.uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32)
    data = model_consistent_data(proj, truth, counts=3e4, seed=rng)
    return DualHeadSubsets(proj, data, 4), scanner.grid.voxel_size


@pytest.mark.parametrize("family", ["direct", "first", "dualhead"])
def test_every_algorithm_decreases_the_objective_on_every_family(family, rng):
    problem, voxel = {"direct": _direct_problem, "first": _first_problem, "dualhead": _dualhead_problem}[family](rng)
    # beta in units of the data's curvature, so that the data and the prior both matter (the families'
    # sensitivities differ by orders of magnitude at the same counts): the log-likelihood's curvature
    # is about S / x, the RDP's beta / x and the quadratic prior's beta, with x about sum d / sum S
    S = recon.sensitivity_image(problem)
    level = sum(float(problem.data(s).sum()) for s in range(problem.n_subsets)) / float(S.sum())
    beta = 0.5 * float(S.mean())
    rdp = RelativeDifferencePrior(beta, voxel, epsilon=0.01 * level)
    runs = {"bsrem": bsrem(problem, rdp, 4, track_objective=True, progress=False),
            "svrg": svrg(problem, rdp, 4, track_objective=True, progress=False),
            "map_em": map_em(problem, QuadraticPrior(beta / level, voxel), 4, track_objective=True, progress=False)}
    for name, res in runs.items():
        obj = res.objective
        assert obj[-1] < obj[0] - 1.0, (family, name, obj)         # by more than float rounding
        assert np.isfinite(res.image).all() and (res.image >= 0).all()
    assert np.all(np.diff(runs["map_em"].objective) <= 1e-7 * abs(runs["map_em"].objective[-1]))


# --- arguments --------------------------------------------------------------------------------------------

def test_bad_arguments_are_clear_errors_before_any_projection(dense):
    prior = PRIORS["rdp"]()
    dense.projections = 0
    with pytest.raises(TypeError, match="prior"):
        bsrem(dense, "rdp", 1, progress=False)
    with pytest.raises(ValueError, match="prior: its kappa"):
        bsrem(dense, QuadraticPrior(1.0, (1, 1, 1), kappa=np.ones((2, 2, 2))), 1, progress=False)
    with pytest.raises(ValueError, match="lambda0"):
        bsrem(dense, prior, 1, lambda0=0.0, progress=False)
    with pytest.raises(ValueError, match="step"):
        svrg(dense, prior, 1, step=-1.0, progress=False)
    with pytest.raises(ValueError, match="snapshot_every"):
        svrg(dense, prior, 1, snapshot_every=0, progress=False)
    with pytest.raises(ValueError, match="n_iter"):
        map_em(dense, PRIORS["quadratic"](), 0, progress=False)
    with pytest.raises(ValueError, match="x0"):
        svrg(dense, prior, 1, x0=-np.ones(SHAPE, np.float32), progress=False)
    assert dense.projections == 0
    # a step size so large that the first update overflows: an error naming it, not a NaN met later
    with pytest.raises(ValueError, match="lambda0: the relaxation 1e[+]?300 of pass 1 makes the first update"):
        bsrem(dense, prior, 1, lambda0=1e300, progress=False)
    with pytest.raises(ValueError, match="step: the step 1e[+]?300 makes the first update"):
        svrg(dense, prior, 1, step=1e300, progress=False)


@pytest.mark.gpu
def test_the_gpu_runs_agree_with_the_cpu(rng):
    """BSREM and SVRG with CuPy data and the CUDA projector (the prior through its fused kernel) give
    the CPU's images to float32 accuracy."""
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    from directpet.direct import HistoImageProjector, SRKernel, ViewSet, ViewSubsets, model_consistent_data
    from directpet.geometry import ImageGrid

    grid = ImageGrid((6, 24, 24), 6.0)
    views = ViewSet(6, 1)
    cpu = HistoImageProjector(grid, views, SRKernel.invariant(), backend="cpu")
    gpu = HistoImageProjector(grid, views, SRKernel.invariant(), backend="cuda")
    data = model_consistent_data(cpu, rng.uniform(0.5, 1.5, grid.shape).astype(np.float32), counts=1e5, seed=rng)
    problems = ViewSubsets(cpu, data), ViewSubsets(gpu, data.to(cp))
    prior = RelativeDifferencePrior(2.0, grid, epsilon=0.01)
    for run in (lambda p: bsrem(p, prior, 3, progress=False), lambda p: svrg(p, prior, 3, progress=False)):
        a, b = (run(p).image for p in problems)
        assert isinstance(b, cp.ndarray)
        assert _rel(b.get(), a.astype(np.float64)) < 1e-4
