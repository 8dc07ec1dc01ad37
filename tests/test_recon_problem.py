"""The reconstruction layer without any projector family: a dense SubsetProblem (tests/dense_problem.py).

A random non-negative matrix split into row subsets of different sizes is reconstructed by MLEM,
OSEM and block-RAMLA and compared with float64 implementations of the same updates written here.
The layer's input checks (data, factors, background, order) are exercised on it and on DIRECT's
ViewSubsets. That recon/ imports no family is checked in test_layers.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from dense_problem import DenseSubsets, random_dense

from directpet.direct import HistoImageData, HistoImageProjector, SRKernel, ViewSet, ViewSubsets
from directpet.geometry import ImageGrid
from directpet.recon import (SubsetProblem, block_ramla, mlem, osem, poisson_loglik, ramla_lambda,
                             sensitivity_image)

IMAGE_SHAPE = (3, 4, 5)
ROWS = (17, 31, 23, 29)                     # rows per subset: subsets differ in shape


def make_dense(rng) -> DenseSubsets:
    """A well-conditioned random problem with Poisson data, random factors and background."""
    return random_dense(rng, IMAGE_SHAPE, ROWS, order=[2, 0, 3, 1])


@pytest.fixture
def dense(rng):
    return make_dense(rng)


# --- float64 references of the updates (written independently of directpet.recon) ----------------------

def _ref_parts(p):
    A = [a.astype(np.float64) for a in p.blocks]
    d = [x.astype(np.float64) for x in p._d]
    f = [x.astype(np.float64) for x in p._f]
    b = [x.astype(np.float64) for x in p._b]
    return A, d, f, b


def _ref_start(A, d, f, b):
    S = sum(a.T @ fs for a, fs in zip(A, f))
    return np.full(S.shape, (sum(x.sum() for x in d) - sum(x.sum() for x in b)) / S.sum())


def _ref_em(A, d, f, b, x, subsets):
    """x * sum_{s} A_s^T [f_s d_s / ybar_s] / sum_{s} A_s^T f_s over the given subsets."""
    num = sum(A[s].T @ (f[s] * d[s] / (f[s] * (A[s] @ x) + b[s])) for s in subsets)
    return x * num / sum(A[s].T @ f[s] for s in subsets)


def _ref_loglik(A, d, f, b, x):
    return sum(float(np.sum(ds * np.log(fs * (a @ x) + bs) - (fs * (a @ x) + bs)))
               for a, ds, fs, bs in zip(A, d, f, b))


# Tolerances: the layer runs in float32 (projections, ratios, updates), the references in float64.
# Each iteration adds a few float32 roundings per voxel (relative 6e-8 each, through sums of
# 17-60 terms); after these few iterations the images agree to about 1e-6 (worst 2.3e-6 over 30
# seeds when written). 2e-5 leaves a margin, while a wrong subset order, factor or one iteration
# more or less changes the images by 1e-2.
RTOL = 2e-5


def test_mlem_matches_float64_reference(dense):
    A, d, f, b = _ref_parts(dense)
    x = _ref_start(A, d, f, b)
    ref_ll = [_ref_loglik(A, d, f, b, x)]
    for _ in range(6):
        x = _ref_em(A, d, f, b, x, range(len(A)))
        ref_ll.append(_ref_loglik(A, d, f, b, x))
    res = mlem(dense, 6, track_loglik=True, progress=False)
    np.testing.assert_allclose(res.image.reshape(-1), x, rtol=RTOL)
    np.testing.assert_allclose(res.loglik, ref_ll, rtol=1e-6)
    assert res.image.shape == IMAGE_SHAPE and res.image.dtype == np.float32


def test_osem_matches_float64_reference_in_problem_order(dense):
    A, d, f, b = _ref_parts(dense)
    x = _ref_start(A, d, f, b)
    for _ in range(4):
        for s in dense.order():
            x = _ref_em(A, d, f, b, x, [s])
    res = osem(dense, 4, progress=False)
    assert res.params["order"] == dense.order()
    np.testing.assert_allclose(res.image.reshape(-1), x, rtol=RTOL)


def test_block_ramla_matches_float64_reference(dense):
    A, d, f, b = _ref_parts(dense)
    x = _ref_start(A, d, f, b)
    floor = 1e-6 * x.mean()
    Sbar = sum(a.T @ fs for a, fs in zip(A, f)) / len(A)
    order = [3, 1, 0, 2]
    for n in range(1, 5):
        lam = ramla_lambda(n, 0.5, 0.1)
        for s in order:
            grad = A[s].T @ (f[s] * (d[s] / (f[s] * (A[s] @ x) + b[s]) - 1))
            x = np.maximum(x + lam * x / Sbar * grad, floor)
    res = block_ramla(dense, 4, lambda0=0.5, gamma=0.1, order=order, progress=False)
    np.testing.assert_allclose(res.image.reshape(-1), x, rtol=RTOL)


def test_sensitivity_and_loglik_match_float64(dense):
    A, d, f, b = _ref_parts(dense)
    np.testing.assert_allclose(sensitivity_image(dense).reshape(-1), sum(a.T @ fs for a, fs in zip(A, f)),
                               rtol=1e-5)
    np.testing.assert_allclose(sensitivity_image(dense, subsets=[1, 3]).reshape(-1),
                               A[1].T @ f[1] + A[3].T @ f[3], rtol=1e-5)
    x = np.random.default_rng(1).uniform(0.5, 1.5, IMAGE_SHAPE).astype(np.float32)
    assert poisson_loglik(dense, x) == pytest.approx(_ref_loglik(A, d, f, b, x.reshape(-1).astype(np.float64)),
                                                     rel=1e-6)


def test_check_runs_once_per_call(dense, monkeypatch):
    calls = []
    original = DenseSubsets.check
    monkeypatch.setattr(DenseSubsets, "check", lambda self: calls.append(1) or original(self))
    for run in (lambda: mlem(dense, 3, track_loglik=True, store_every=1, progress=False),
                lambda: osem(dense, 3, track_loglik=True, progress=False),
                lambda: block_ramla(dense, 3, track_loglik=True, progress=False)):
        calls.clear()
        run()
        assert len(calls) == 1


# --- input checks, for every family -----------------------------------------------------------------------

GRID = ImageGrid((4, 12, 12), 8.0)
VIEWS = ViewSet(3, 2)


def _direct_problem(rng):
    """A tiny DIRECT problem with random counts, sensitivity and background (never zeros)."""
    proj = HistoImageProjector(GRID, VIEWS, SRKernel.invariant(), backend="cpu", threads=1)
    shape = (len(VIEWS),) + GRID.shape
    data = HistoImageData(rng.uniform(1, 5, shape).astype(np.float32), GRID, VIEWS,
                          rng.uniform(0.5, 1.5, shape).astype(np.float32),
                          rng.uniform(0.1, 0.5, shape).astype(np.float32))
    return ViewSubsets(proj, data)


def _arrays(problem, name):
    """The arrays of one kind of input, to be corrupted in place (DIRECT: whole stacks)."""
    if isinstance(problem, ViewSubsets):
        return {"data": problem.histo_image_data.prompts, "factors": problem.histo_image_data.factors,
                "background": problem.histo_image_data.background}[name]
    return {"data": problem._d, "factors": problem._f, "background": problem._b}[name][1]


ALGORITHMS = {"mlem": lambda p: mlem(p, 1, progress=False),
              "osem": lambda p: osem(p, 1, progress=False),
              "block_ramla": lambda p: block_ramla(p, 1, progress=False)}

BAD = [("data", -1.0, "negative"), ("data", np.nan, "NaN or inf"), ("data", np.inf, "NaN or inf"),
       ("factors", -0.5, "negative"), ("factors", np.nan, "NaN or inf"),
       ("background", -0.5, "negative"), ("background", np.nan, "NaN or inf")]


@pytest.mark.parametrize("family", ["dense", "direct"])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("name, value, what", BAD)
def test_bad_inputs_raise_naming_the_argument(family, algorithm, name, value, what, dense, rng):
    problem = dense if family == "dense" else _direct_problem(rng)
    a = _arrays(problem, name)
    a.reshape(-1)[int(rng.integers(a.size))] = value
    with pytest.raises(ValueError, match=rf"^{name}: contains {what}"):
        ALGORITHMS[algorithm](problem)


def test_view_subsets_check_agrees_with_the_generic_per_subset_check(rng):
    """ViewSubsets.check (whole stacks) rejects what SubsetProblem.check (subset by subset) rejects."""
    problem = _direct_problem(rng)
    assert problem.check() is problem and SubsetProblem.check(problem) is problem
    for name, value, what in BAD:
        p = _direct_problem(rng)
        a = _arrays(p, name)
        a.reshape(-1)[int(rng.integers(a.size))] = value
        for check in (p.check, lambda: SubsetProblem.check(p)):
            with pytest.raises(ValueError, match=rf"^{name}: contains {what}"):
                check()


def test_wrong_dtype_or_namespace_is_a_type_error(dense):
    dense._b[0] = dense._b[0].astype(np.float64)
    with pytest.raises(TypeError, match="background: expected dtype float32"):
        mlem(dense, 1, progress=False)
    dense._b = None
    dense._f[2] = list(dense._f[2])
    with pytest.raises(TypeError, match="factors"):
        osem(dense, 1, progress=False)


@pytest.mark.parametrize("algorithm", [osem, block_ramla])
@pytest.mark.parametrize("order, error, message", [
    ([0, 1, 2], ValueError, r"order: expected each of the 4 subsets exactly once; missing \[3\]"),
    ([0, 1, 2, 2], ValueError, r"order: .*missing \[3\], repeated \[2\]"),
    ([0, 1, 2, 3, 0], ValueError, r"order: .*repeated \[0\]"),
    ([0, 1, 2, 4], ValueError, r"order: expected an integer in \[0, 3\], got 4"),
    ([0, 1, -1, 2], ValueError, r"order: expected an integer in \[0, 3\], got -1"),
    ([0, 1, 2.0, 3], TypeError, "order: expected an integer, got float"),
    ([0, 1, True, 3], TypeError, "order: expected an integer, got bool"),
    (3, TypeError, "order: expected a sequence"),
])
def test_order_is_validated(dense, algorithm, order, error, message):
    with pytest.raises(error, match=message):
        algorithm(dense, 1, order=order, progress=False)


def test_subset_arguments_are_validated(dense):
    with pytest.raises(ValueError, match="subsets: expected an integer in .*, got 4"):
        sensitivity_image(dense, subsets=[0, 4])
    with pytest.raises(TypeError, match="problem: expected a SubsetProblem"):
        osem([dense], 1, progress=False)
    dense.n_subsets = 0
    with pytest.raises(ValueError, match="n_subsets"):
        mlem(dense, 1, progress=False)


@pytest.mark.gpu
def test_cupy_problem_matches_numpy(dense):
    """The same loops on CuPy arrays: everything stays on the device and agrees with NumPy."""
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    gpu = DenseSubsets(*([cp.asarray(a) for a in parts] for parts in (dense.blocks, dense._d, dense._f, dense._b)),
                       image_shape=IMAGE_SHAPE, order=dense.order())
    for algorithm in (mlem, osem, block_ramla):
        a = algorithm(dense, 3, track_loglik=True, progress=False)
        b = algorithm(gpu, 3, track_loglik=True, progress=False)
        assert isinstance(b.image, cp.ndarray) and b.image.dtype == cp.float32
        np.testing.assert_allclose(cp.asnumpy(b.image), a.image, rtol=1e-5)
        np.testing.assert_allclose(b.loglik, a.loglik, rtol=1e-6)
    gpu._d[3][0] = -1.0
    with pytest.raises(ValueError, match="^data: contains negative"):
        mlem(gpu, 1, progress=False)
