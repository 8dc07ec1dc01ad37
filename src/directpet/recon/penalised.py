"""Penalised-likelihood reconstruction over any SubsetProblem: BSREM, MAP-EM and preconditioned SVRG.

All three minimise the same objective, the negative Poisson log-likelihood plus a prior
(:mod:`directpet.recon.priors`),

    ``Phi(x) = -L(x) + R(x)``,  ``L(x) = sum_s sum d_s log ybar_s - ybar_s``,  ``ybar_s = f_s A_s x + b_s``,

over non-negative images, written as a sum over the problem's subsets
``Phi = sum_s Phi_s`` with ``Phi_s = -L_s + R / n_subsets``. ``grad L_s = A_s^T [f_s (d_s / ybar_s - 1)]``.

* :func:`bsrem` (De Pierro and Yamagishi 2001; Ahn and Fessler 2003), one update per subset
  ``x <- max(x + lambda_n D [n_subsets A_s^T f_s (d_s / ybar_s - 1) - grad R(x)], floor)``
  with a preconditioner that is the same for every subset of a pass, ``D = x / (T + x diag(hess R))``
  (x and the prior's curvature taken at the start of the pass; ``D = x / T`` without a prior), and the
  diminishing relaxation ``lambda_n = lambda0 / (1 + gamma (n - 1))`` of pass n, the schedule under
  which the iterates converge to the minimiser. ``T = n_subsets max_s S_s`` (``S_s = A_s^T f_s``) by default: the
  data part of a step then never takes a voxel below zero for ``lambda_n <= 1``, whatever the subsets
  (a dual-head orientation subset can see a voxel many times more than the average subset does);
  ``T = S = sum_s S_s`` (``preconditioner='mean'``) is block-RAMLA's choice, equal where the subsets
  are balanced, and with ``beta = 0`` it is block-RAMLA's update, step for step.
* :func:`map_em` (De Pierro 1995): for the quadratic prior the separable surrogate gives a closed-form
  update per voxel, monotone in ``Phi`` (the check the other two are compared with on small problems).
* :func:`svrg`: stochastic variance-reduced gradient with a preconditioner, the family of methods
  that won the 2024 PET reconstruction challenge (PETRIC) on RDP-penalised objectives. Every
  ``snapshot_every`` passes it stores ``x~``, every subset's gradient ``G_s = grad Phi_s(x~)`` and their
  sum, and sets the preconditioner ``D = x~ / (S + x~ diag(hess R)(x~))`` (the EM preconditioner made
  harmonic with the prior's curvature); then, per subset in a random order,
  ``x <- max(x - alpha D [n_subsets (grad Phi_s(x) - G_s) + sum_s G_s], floor)``. One update costs
  one forward and one back projection, like BSREM; a snapshot costs one more pass and
  ``n_subsets`` stored images.

Every algorithm reports the objective per pass when asked (``track_objective``: one extra forward
pass per pass) and keeps the checks of :mod:`directpet.recon.algorithms` (problem, arguments, one
place, before any projection).

A problem shared by several processes (:class:`~directpet.parallel.DistributedSubsets`, every
subset split across the processes) runs all three unchanged: its ``adjoint`` returns the whole
subset's back projection summed over the processes and its ``reduce_sum`` the likelihood, so every
process holds the same image and evaluates the prior on the full image itself; only projections are
shared. SVRG's random subset order is drawn from ``seed`` and is the same on every process.

Helpers: :func:`sqrt_hessian_row_sum`, the spatially variant penalty strength ``kappa`` of Tsai et al.
(2020) as STIR computes it, and :func:`rdp_beta_sweep`, BSREM-RDP over a list of relative
strengths (the penalised arm of every family's experiment).
"""

from __future__ import annotations

import time
from typing import Callable, List, NamedTuple, Optional, Sequence

import numpy as np

from .._checks import integer, real_number, require_memory, to_numpy
from .._checks import synchronize as _sync
from ._fused import ramla_update
from .algorithms import (_EPS_S_REL, ReconResult, _backproject_residual, _check_first_update, _check_floor,
                         _check_image, _check_order, _check_relaxation, _check_run, _check_sensitivity, _check_x0, _checked, _floor_value,
                         _loglik, _model, _progress, _Recorder, _run_passes, _safe_inverse, _schedule, _sensitivity, _start,
                         _Work)
from .priors import PairwisePrior, QuadraticPrior, RelativeDifferencePrior
from .problem import SubsetProblem


def _check_prior(prior, problem: SubsetProblem) -> PairwisePrior:
    if not isinstance(prior, PairwisePrior):
        raise TypeError(f"prior: expected a directpet.recon.priors prior (RelativeDifferencePrior, QuadraticPrior, "
                        f"LogCoshPrior), got {type(prior).__name__}")
    shape = tuple(problem.image_shape)
    if len(shape) != 3:
        raise ValueError(f"prior: the pairwise priors work on (nz, ny, nx) images; this problem's image has "
                         f"shape {shape}")
    if prior.kappa is not None and tuple(prior.kappa.shape) != shape:
        raise ValueError(f"prior: its kappa has shape {tuple(prior.kappa.shape)}, the problem's image {shape}")
    return prior


class _PenalisedRecorder(_Recorder):
    """The shared recorder plus the objective ``-L(x) + R(x)`` when tracked (``result.objective``)."""

    def __init__(self, algorithm, problem, xp, eps_y, work, store_every, track_objective, params, prior):
        super().__init__(algorithm, problem, xp, eps_y, work, store_every, track_objective, params)
        self.prior = prior
        if self.track:
            self.res.objective, self.res.objective_iterations = [], []

    def loglik(self, x, it):
        if not self.track:
            return
        t = time.perf_counter()
        ll = _loglik(self.problem, self.xp, x, self.eps_y, self.work)
        self.res.loglik.append(ll)
        self.res.loglik_iterations.append(it)
        self.res.objective.append(-ll + self.prior.value(x))
        self.res.objective_iterations.append(it)
        self.res.loglik_time_s += time.perf_counter() - t


def penalised_objective(problem: SubsetProblem, x, prior: PairwisePrior) -> float:
    """``Phi(x) = -L(x) + R(x)`` (float64), the objective the algorithms of this module minimise;
    x as for :func:`~directpet.recon.poisson_loglik`."""
    xp, eps_y, _ = _checked(problem)
    prior = _check_prior(prior, problem)
    x = _check_image(x, "x", problem.image_shape, xp)
    return -_loglik(problem, xp, x, eps_y, _Work(problem, xp)) + prior.value(x)


def bsrem(problem: SubsetProblem, prior: PairwisePrior, n_iter: int, lambda0: float = 1.0, gamma: float = 0.1,
          schedule=None, floor: Optional[float] = None, order: Optional[Sequence[int]] = None, x0=None, *,
          preconditioner: str = "max", callback: Optional[Callable] = None, store_every: Optional[int] = None,
          track_objective: bool = False, progress: bool = True) -> ReconResult:
    """BSREM: block-sequential regularised EM, one relaxed preconditioned gradient step per subset.

    ``x <- max(x + lambda_n D [n_subsets A_s^T f_s (d_s / ybar_s - 1) - grad R(x)], floor)``,
    ``D = x / (T + x diag(hess R)(x))`` at the start of each pass (module docstring).

    Parameters
    ----------
    problem : the :class:`~directpet.recon.problem.SubsetProblem` (any family).
    prior : a :class:`~directpet.recon.priors.PairwisePrior` on the problem's image
        (e.g. ``RelativeDifferencePrior(beta, grid, epsilon=...)``).
    n_iter : passes through the subsets.
    lambda0, gamma : relaxation ``lambda_n = lambda0 / (1 + gamma (n - 1))`` of pass n (with the
        ``'max'`` preconditioner, ``lambda0`` in (0, 1] keeps the data part of every step positive). lambda0 = 1 makes the first pass OSEM-like
        where the subsets are balanced (with ``beta = 0`` the step is then OSEM's).
    preconditioner : ``'max'`` (default): ``T = n_subsets max_s S_s``; ``'mean'``: ``T = S``, block-RAMLA's
        ``x / Sbar`` (faster where subsets are balanced, e.g. DIRECT views, but a relaxation above
        ``min S / (n_subsets max_s S_s)`` can overshoot where they are not).
    schedule, floor, order, x0, callback, store_every, progress : as for
        :func:`~directpet.recon.block_ramla`.
    track_objective : record ``Phi = -L + R`` of x0 and after every pass (``result.objective``; one
        extra forward pass per pass), and the log-likelihood (``result.loglik``).
    """
    xp, eps_y, totals = _checked(problem)
    prior = _check_prior(prior, problem)
    n_iter = _check_run(n_iter, callback, store_every, track_objective, progress)
    lambda0, gamma = _check_relaxation(lambda0, gamma)
    lambdas = _schedule(schedule, lambda0, gamma, n_iter)
    order = _check_order(problem.order() if order is None else order, problem.n_subsets)
    floor = _check_floor(floor)
    if preconditioner not in ("max", "mean"):
        raise ValueError(f"preconditioner: expected 'max' or 'mean', got {preconditioner!r}")
    x0 = _check_x0(x0, problem, xp)
    n_sub = problem.n_subsets
    if preconditioner == "mean":
        S = _sensitivity(problem, xp, range(n_sub))
        T = S
    else:                                  # one subset's sensitivity at a time: S and T accumulate
        S = _sensitivity(problem, xp, [0])
        T = S.copy()
        for s in range(1, n_sub):
            S_s = _sensitivity(problem, xp, [s])
            S += S_s
            xp.maximum(T, S_s, out=T)
    s_max = _check_sensitivity(S, xp)
    # the step is lambda_n x (grad L_s - grad R / n) / base with base = T / n: max_s S_s ('max') or
    # S / n ('mean', block-RAMLA's Sbar); inv_base is block-RAMLA's inv_Sbar for 'mean'
    inv_T, good = _safe_inverse(T, _EPS_S_REL * float(T.max()), xp)
    good &= S > _EPS_S_REL * s_max
    if preconditioner == "mean":
        inv_base, base = inv_T * np.float32(n_sub), S * np.float32(1.0 / n_sub)
    else:
        inv_base, base = inv_T, T
    x = _start(S, x0, totals, xp)
    fl = _floor_value(x, floor, xp)
    work = _Work(problem, xp)
    rec = _PenalisedRecorder("bsrem", problem, xp, eps_y, work, store_every, track_objective,
                             {"order": order, "lambda0": lambda0, "gamma": gamma, "floor": fl, "prior": repr(prior),
                              "preconditioner": preconditioner}, prior)
    rec.res.lambdas = []
    grad = xp.empty_like(x)
    rec.loglik(x, 0)
    step = {}

    def start_pass(it, x):
        lam = lambdas(it)
        rec.res.lambdas.append(lam)
        step["first"] = True
        with np.errstate(over="ignore"):
            if not prior.beta:
                step["scale"] = xp.where(good, inv_base * np.float32(lam), 0.0).astype(xp.float32)
                return
            # lambda / (base + x diag(hess R) / n) at the pass's start: the prior's curvature bounds
            # its part of the step as the sensitivity bounds the data's (a weak-data voxel, S -> 0,
            # would otherwise take a prior step of x grad R / S)
            denominator = base + x * prior.hessian_diagonal(x, check=False) * np.float32(1.0 / n_sub)
            step["scale"] = xp.where(good, np.float32(lam) / xp.where(good, denominator, 1.0), 0.0).astype(xp.float32)

    def update(it, s, x):
        _backproject_residual(problem, xp, x, (s,), eps_y, 1.0, work, grad)
        prior.add_gradient(x, grad, -1.0 / n_sub)
        with np.errstate(over="ignore", invalid="ignore"):    # an overflow is the error raised below
            y = ramla_update(xp, x, step["scale"], grad, fl)
        if step.pop("first", False):
            name = "lambda0" if schedule is None else f"schedule: lambda_{it}"
            _check_first_update(xp, y, name, f"the relaxation {rec.res.lambdas[-1]!r} of pass {it}",
                                "use a relaxation of order 0.01 to 1 (lambda0 <= 1 keeps the data part positive)")
        return y

    x = _run_passes(rec, xp, x, n_iter, "BSREM", progress, order, update, callback, start_pass)
    if not bool(xp.isfinite(x).all()):
        raise ValueError(f"lambda0: the relaxation {lambda0!r} made the iterates overflow (NaN or inf); use a "
                         f"smaller lambda0")
    return rec.finish(x)


def map_em(problem: SubsetProblem, prior: QuadraticPrior, n_iter: int, x0=None, *,
           callback: Optional[Callable] = None, store_every: Optional[int] = None, track_objective: bool = False,
           progress: bool = True) -> ReconResult:
    """MAP-EM with De Pierro's separable surrogate for the quadratic prior: per voxel, the positive
    root of ``2 H x^2 + (S - 2 H x_n + g) x - x_n bp = 0`` with ``bp = sum_s A_s^T [f_s d_s / ybar_s]``,
    ``g = grad R(x_n)`` and ``H = diag(hess R)`` (constant for the quadratic prior). Each iteration
    decreases ``Phi`` (a majorise-minimise step); with ``beta = 0`` it is MLEM. ``prior`` must be a
    :class:`~directpet.recon.priors.QuadraticPrior` (the surrogate is exact for it only); other
    parameters as for :func:`~directpet.recon.mlem` and :func:`bsrem`.
    """
    xp, eps_y, totals = _checked(problem)
    prior = _check_prior(prior, problem)
    if not isinstance(prior, QuadraticPrior):
        raise TypeError(f"prior: map_em's closed-form surrogate update is for the QuadraticPrior; got "
                        f"{type(prior).__name__} (use bsrem or svrg)")
    n_iter = _check_run(n_iter, callback, store_every, track_objective, progress)
    x0 = _check_x0(x0, problem, xp)
    S = _sensitivity(problem, xp, range(problem.n_subsets))
    eps_s = _EPS_S_REL * _check_sensitivity(S, xp)
    good = S > eps_s
    x = _start(S, x0, totals, xp)
    work = _Work(problem, xp)
    rec = _PenalisedRecorder("map_em", problem, xp, eps_y, work, store_every, track_objective,
                             {"prior": repr(prior)}, prior)
    bp, g, h = xp.empty_like(x), xp.empty_like(x), xp.empty_like(x)
    rec.loglik(x, 0)
    for it in _progress(n_iter, "MAP-EM", progress):
        _sync(xp)
        t = time.perf_counter()
        _backproject_residual(problem, xp, x, range(problem.n_subsets), eps_y, 0.0, work, bp)
        prior.gradient(x, out=g, check=False)
        prior.hessian_diagonal(x, out=h, check=False)
        a = 2 * h
        b = S - a * x + g
        c = x * bp
        root = xp.sqrt(b * b + 4 * a * c)
        # the positive root, in the form that stays accurate where a -> 0 (b > 0) and where c -> 0 (b < 0)
        pos = b > 0
        new = xp.where(pos, 2 * c / xp.where(pos, b + root, 1), (root - b) / xp.where(a > 0, 2 * a, 1))
        x = xp.where(good, new, x).astype(xp.float32)
        _sync(xp)
        rec.after_iteration(x, it, time.perf_counter() - t)
        rec.loglik(x, it)
        if callback is not None and callback(it, 0, x):
            break
    return rec.finish(x)


def svrg(problem: SubsetProblem, prior: PairwisePrior, n_iter: int, step: float = 1.0, *,
         snapshot_every: int = 2, seed: int = 0, floor: Optional[float] = None, x0=None,
         callback: Optional[Callable] = None, store_every: Optional[int] = None, track_objective: bool = False,
         progress: bool = True) -> ReconResult:
    """Preconditioned stochastic variance-reduced gradient descent on ``Phi = -L + R`` (module docstring).

    Parameters
    ----------
    n_iter : passes through the subsets (a snapshot pass, when due, comes on top).
    step : the step ``alpha`` (> 0) in units of the preconditioner; 1 makes a full-gradient step at
        the snapshot an EM step.
    snapshot_every : passes between snapshots (the full gradient and the preconditioner are
        recomputed at the first pass and every ``snapshot_every`` passes after it).
    seed : the subsets' random order in each pass (``numpy.random.default_rng(seed)``).
    x0 : the start image; default a uniform image with the data's total counts. A few BSREM or OSEM
        passes make a better start (``x0=bsrem(...).image``), as the PETRIC entries do.
    floor, callback, store_every, track_objective, progress : as for :func:`bsrem`.

    Stores ``n_subsets`` subset gradients (images) of the snapshot: the memory is checked first.
    """
    xp, eps_y, totals = _checked(problem)
    prior = _check_prior(prior, problem)
    n_iter = _check_run(n_iter, callback, store_every, track_objective, progress)
    step = real_number("step", step, positive=True)
    snapshot_every = integer("snapshot_every", snapshot_every, lo=1)
    rng = np.random.default_rng(integer("seed", seed, lo=0))
    floor = _check_floor(floor)
    x0 = _check_x0(x0, problem, xp)
    n_sub = problem.n_subsets
    n_vox = int(np.prod(problem.image_shape))
    require_memory("problem", 4.0 * n_vox * (n_sub + 6), f"SVRG's {n_sub} stored subset gradients of "
                   f"{n_vox:,} voxels")
    S = _sensitivity(problem, xp, range(n_sub))
    _, good = _safe_inverse(S, _EPS_S_REL * _check_sensitivity(S, xp), xp)
    x = _start(S, x0, totals, xp)
    fl = _floor_value(x, floor, xp)
    work = _Work(problem, xp)
    rec = _PenalisedRecorder("svrg", problem, xp, eps_y, work, store_every, track_objective,
                             {"step": step, "snapshot_every": snapshot_every, "seed": seed, "floor": fl,
                              "prior": repr(prior)}, prior)
    snap = {"grads": [xp.empty_like(x) for _ in range(n_sub)], "full": xp.empty_like(x)}
    g = xp.empty_like(x)
    rec.loglik(x, 0)

    def subset_gradient(x, s, out):
        """grad Phi_s(x) = -A_s^T f_s (d_s / ybar_s - 1) + grad R(x) / n_subsets, into out."""
        _backproject_residual(problem, xp, x, (s,), eps_y, 1.0, work, out)
        xp.negative(out, out=out)
        return prior.add_gradient(x, out, 1.0 / n_sub)

    def take_snapshot(x):
        full = snap["full"]
        full[...] = 0
        for s in range(n_sub):
            full += subset_gradient(x, s, snap["grads"][s])
        curvature = prior.hessian_diagonal(x, check=False) if prior.beta else 0
        denominator = S + x * curvature
        with np.errstate(over="ignore"):        # a step beyond float32 is reported by the first update
            snap["precond"] = (np.float32(step) * xp.where(good, x / xp.where(good, denominator, 1), 0)
                               ).astype(xp.float32)

    def start_pass(it, x):
        snap["first"] = True
        if (it - 1) % snapshot_every == 0:
            take_snapshot(x)

    def update(it, s, x):
        subset_gradient(x, s, g)
        xp.subtract(g, snap["grads"][s], out=g)
        xp.multiply(g, np.float32(n_sub), out=g)
        xp.add(g, snap["full"], out=g)
        with np.errstate(over="ignore", invalid="ignore"):    # an overflow is the error raised below
            y = xp.maximum(x - snap["precond"] * g, np.float32(fl))
        if snap.pop("first", False):
            _check_first_update(xp, y, "step", f"the step {step!r}", "use a step of order 0.1 to 1")
        return y

    def random_order(it):                # a fresh permutation of the subsets every pass
        return [int(s) for s in rng.permutation(n_sub)]

    x = _run_passes(rec, xp, x, n_iter, "SVRG", progress, random_order, update, callback, start_pass)
    if not bool(xp.isfinite(x).all()):
        raise ValueError(f"step: {step!r} made the iterates overflow (NaN or inf); use a smaller step")
    return rec.finish(x)


def sqrt_hessian_row_sum(problem: SubsetProblem, x=None, *, approximate: bool = False):
    """The spatially variant penalty strength ``kappa`` of Tsai et al. (2020), as STIR's
    ``compute_sqrt_Hessian_row_sum`` computes it: the square root of the row sums of the Hessian of
    the negative log-likelihood, an image of the problem's shape (float32, the data's namespace).

    ``kappa_j = sqrt(sum_s [A_s^T (f_s^2 d_s / ybar_s^2 * A_s 1)]_j)``, ``ybar_s = f_s A_s x + b_s``:
    the curvature the data give voxel j at the image x (e.g. a few OSEM passes). With
    ``approximate=True`` the data stand in for the mean, ``ybar_s = d_s``
    (``sum_s A_s^T (f_s^2 / d_s * A_s 1)``, bins with ``d_s = 0`` left out), and x is not needed.
    A prior with ``kappa`` (``RelativeDifferencePrior(..., kappa=kappa)``) then penalises each pair
    in proportion to the data's curvature at its voxels, which evens the resolution out over the
    field of view (Fessler and Rogers 1996). Costs one forward and one back projection per subset
    (two forward where x is given). Works on a shared problem (the back projections are summed).
    """
    xp, eps_y, _ = _checked(problem)
    if approximate:
        if x is not None:
            raise ValueError("x: approximate=True uses the data in place of the mean and takes no image")
    elif x is None:
        raise ValueError("x: the Hessian row sum is taken at an image (e.g. a few OSEM passes); pass x, or "
                         "approximate=True for the data-only form")
    else:
        x = _check_image(x, "x", problem.image_shape, xp)
    ones = xp.ones(tuple(problem.image_shape), dtype=xp.float32)
    work = _Work(problem, xp)
    total = xp.zeros(tuple(problem.image_shape), dtype=xp.float32)
    for s in range(problem.n_subsets):
        d, f, b = problem.data(s), problem.factors(s), problem.background(s)
        a1 = problem.forward(ones, s).astype(xp.float32, copy=False)
        if approximate:
            weight = xp.where(d > 0, 1.0 / xp.where(d > 0, d, 1.0), 0.0)
        else:
            hx, r = work.subset(s)
            ybar = xp.maximum(_model(xp, problem.forward(x, s, out=hx), f, b, r), np.float32(eps_y))
            weight = d / (ybar * ybar)
        if f is not None:
            weight = weight * f * f
        total += problem.adjoint((weight * a1).astype(xp.float32), s, out=work.part)
    return xp.sqrt(xp.maximum(total, 0)).astype(xp.float32)


class BetaRun(NamedTuple):
    """One run of :func:`rdp_beta_sweep`: the relative strength ``b``, what ``measure`` returned for
    its image, and the wall time of its BSREM passes (s, ``seconds_per_pass`` = ``seconds / passes``)."""

    b: float
    value: object
    seconds: float
    passes: int

    @property
    def seconds_per_pass(self) -> float:
        """BSREM's wall time per pass (s)."""
        return self.seconds / self.passes


def rdp_beta_sweep(problem: SubsetProblem, voxel_size, betas: Sequence[float], n_passes: int, x0,
                   measure: Callable, *, edge_gamma: float = 2.0, epsilon_fraction: float = 1e-3, kappa=None,
                   progress: bool = False, **bsrem_options) -> List[BetaRun]:
    """``[BetaRun(b, measure(image), seconds, n_passes), ...]``: BSREM with the relative difference
    prior, one run of ``n_passes`` passes from ``x0`` per relative strength b in ``betas``, ``image``
    the result as a NumPy array. The penalised arm of every family's experiment (DIRECT CRC against noise, FIRST and
    dual-head peak-to-valley against noise).

    The strength is relative to the data, so that one b means about the same on every problem:
    ``beta = b * mean(S)`` (S the sensitivity image), which makes the prior's curvature ``beta / x``
    b times the data's ``S / x`` on average. ``gamma = edge_gamma`` (2, the clinical choice) and
    ``epsilon = epsilon_fraction * mean(x0)``. ``kappa`` (e.g. :func:`sqrt_hessian_row_sum`) is
    rescaled to a mean square of 1: it moves the strength between voxels, b keeps its meaning.
    ``bsrem_options`` go to :func:`bsrem` (``lambda0``, ``gamma``, ``preconditioner``, ...).
    """
    xp, _, _ = _checked(problem)
    if isinstance(betas, (str, bytes)) or not hasattr(betas, "__iter__"):
        raise TypeError(f"betas: expected a sequence of relative strengths, got {type(betas).__name__}")
    values = [real_number("betas", b, nonnegative=True) for b in betas]
    n_passes = integer("n_passes", n_passes, lo=1)
    if not callable(measure):
        raise TypeError(f"measure: expected a callable image -> result, got {type(measure).__name__}")
    x0 = _check_image(x0, "x0", problem.image_shape, xp)
    if kappa is not None:
        kappa = xp.asarray(kappa, dtype=xp.float32)
        mean_square = float((kappa.astype(xp.float64) ** 2).mean())
        if not mean_square > 0 or not np.isfinite(mean_square):
            raise ValueError("kappa: expected finite weights >= 0, not all 0")
        kappa = (kappa / np.float32(np.sqrt(mean_square))).astype(xp.float32)
    mean_s = float(_sensitivity(problem, xp, range(problem.n_subsets)).mean(dtype=xp.float64))
    epsilon = real_number("epsilon_fraction", epsilon_fraction, positive=True) * float(x0.mean(dtype=xp.float64))
    out = []
    for b in values:
        prior = RelativeDifferencePrior(b * mean_s, voxel_size, gamma=edge_gamma, epsilon=epsilon, kappa=kappa)
        res = bsrem(problem, prior, n_passes, x0=x0, progress=progress, **bsrem_options)
        out.append(BetaRun(b, measure(to_numpy(res.image)), float(res.time_s), int(res.n_iter)))
    return out


__all__ = ["BetaRun", "bsrem", "map_em", "penalised_objective", "rdp_beta_sweep", "sqrt_hessian_row_sum", "svrg"]
