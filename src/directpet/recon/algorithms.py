"""MLEM, OSEM and block-RAMLA for any projector split into subsets (:ref:`physics-recon`).

The algorithms see only a :class:`~directpet.recon.problem.SubsetProblem`: for subset s the mean
data are ``ybar_s = f_s * A_s x + b_s`` with counts d_s, multiplicative factors f_s (1 where the
problem has none) and background b_s (0 where it has none). The sensitivity image is
``S = sum_s A_s^T f_s``.

* MLEM:        ``x <- (x / S) * sum_s A_s^T [f_s d_s / ybar_s]``, subsets summed in index order
* OSEM:        ``x <- (x / S_s) * A_s^T [f_s d_s / ybar_s]`` with ``S_s = A_s^T f_s``, one update per
  subset, subsets visited in ``order``
* block-RAMLA: ``x <- x + lambda_n (x / Sbar) * A_s^T [f_s (d_s / ybar_s - 1)]``, ``Sbar = S / n_subsets``,
  one update per subset in ``order``, ``lambda_n = lambda0 / (1 + gamma (n - 1))`` constant within
  pass n, then ``x <- max(x, floor)``.

What a subset is belongs to the family: DIRECT's :class:`~directpet.direct.ViewSubsets` makes one
view a subset (block-RAMLA as in [HA]) or groups views into blocks (OSEM subsets). The loops are
written against the array namespace of the data (NumPy or CuPy): with CuPy data and a CUDA
projector everything stays on the device. Work arrays are allocated once per call and reused,
one pair per distinct subset shape (subsets may differ in shape).

A problem shared by several processes (:class:`directpet.parallel.DistributedSubsets`, one process
per GPU) runs MLEM and OSEM unchanged: its ``adjoint`` returns the back projection summed over the
processes (an NCCL all-reduce) and its ``reduce_sum`` sums the likelihood terms, so every process
computes the same updates. Block-RAMLA (and OSEM) run unchanged too when every subset holds at least
one unit per process: a one-view subset cannot be split, which
:meth:`~directpet.recon.problem.StoredSubsets.share` reports.

Every algorithm validates the problem once per call (:meth:`SubsetProblem.check`: data, factors
and background finite and non-negative, errors naming the argument), not per iteration, and checks
all its own arguments (``n_iter``, ``x0``, ``order``, ``callback``, ``store_every``, the relaxation
schedule, ``floor``, ...) in one place at entry, before any projection: a bad argument is a
ValueError or TypeError naming it, never a NaN surfacing later in a projector.

Division guards (documented choices):

* ``d / ybar`` uses ``max(ybar, eps_y)`` with ``eps_y = 1e-9 * mean(d)`` (tiny, positive): bins with
  ``d = 0`` contribute 0 whatever ybar is; a bin with ``d > 0`` and ``ybar = 0`` (impossible under the
  model) gets a large but finite ratio.
* Voxels with ``S`` (or ``S_s``, ``Sbar``) ``<= 1e-9 * max(S)`` receive no information from the data:
  their value is left unchanged (factor 1 in MLEM/OSEM, step 0 in RAMLA, where only the floor
  applies). A problem whose sensitivity image is zero everywhere is an error (``problem``).
* Voxels at 0 stay at 0 in MLEM and OSEM (multiplicative updates): ``x0`` may hold zeros (a support
  mask) but not only zeros.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from .._checks import array_module, flag, integer, real_number, require_memory
from .._checks import synchronize as _sync
from ._fused import ramla_update, subset_residual
from .problem import SubsetProblem

_EPS_Y_REL = 1e-9
_EPS_S_REL = 1e-9
#: n_iter of every algorithm is below this (2**31 passes: a count, never a running time anyone waits for).
MAX_ITERATIONS = 2**31


@dataclass
class ReconResult:
    """Output of a reconstruction.

    Attributes
    ----------
    image : final image (``problem.image_shape``, e.g. (nz, ny, nx)) float32 (namespace of the data).
    images : images stored every ``store_every`` iterations (copies, same namespace).
    image_iterations : the iteration number of each stored image.
    loglik : Poisson log-likelihood ``sum d log ybar - ybar`` (float64, constant ``-log d!`` omitted)
        of the initial image and after every iteration, or None if not tracked.
    loglik_iterations : 0, 1, ..., n_iter matching ``loglik``.
    n_iter : iterations (passes through the data) run.
    algorithm : 'mlem', 'osem' or 'block_ramla'.
    time_s : wall time of the update passes (excludes likelihood passes), seconds.
    iteration_times : per-iteration wall time (s).
    loglik_time_s : time spent on the extra likelihood passes (s).
    lambdas : relaxation of each pass (block-RAMLA, BSREM), else None.
    params : the settings used (subset order, floor, ...).
    objective : the penalised objective ``-L(x) + R(x)`` (float64) of the initial image and after every
        iteration (BSREM, MAP-EM, SVRG with ``track_objective``), else None.
    objective_iterations : 0, 1, ..., n_iter matching ``objective``.
    """

    image: object
    images: list = field(default_factory=list)
    image_iterations: list = field(default_factory=list)
    loglik: Optional[list] = None
    loglik_iterations: Optional[list] = None
    n_iter: int = 0
    algorithm: str = ""
    time_s: float = 0.0
    iteration_times: list = field(default_factory=list)
    loglik_time_s: float = 0.0
    lambdas: Optional[list] = None
    params: dict = field(default_factory=dict)
    objective: Optional[list] = None
    objective_iterations: Optional[list] = None


# --- checks and setup -------------------------------------------------------------------------------------

def _checked(problem: SubsetProblem):
    """Validate the problem (once per public call). Returns (xp, eps_y, totals)."""
    if not isinstance(problem, SubsetProblem):
        raise TypeError(f"problem: expected a SubsetProblem (e.g. directpet.direct.ViewSubsets), "
                        f"got {type(problem).__name__}")
    problem.check()
    totals = problem.totals()
    d_sum, _, size = totals
    mean = d_sum / size if size else 0.0
    eps_y = _EPS_Y_REL * mean if mean > 0 else 1e-30
    return problem.xp, eps_y, totals


def _check_run(n_iter, callback, store_every, track_loglik, progress) -> int:
    """The arguments every algorithm shares; returns n_iter as an int in [1, MAX_ITERATIONS)."""
    n_iter = integer("n_iter", n_iter, lo=1, hi=MAX_ITERATIONS - 1)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback: expected a callable callback(iteration, subiteration, x) or None, "
                        f"got {type(callback).__name__}")
    if store_every is not None:
        integer("store_every", store_every, lo=1)
    flag("track_loglik", track_loglik)
    flag("progress", progress)
    return n_iter


def _subset_index(s, n: int, name: str) -> int:
    return integer(name, s, lo=0, hi=n - 1)


def _index_list(indices, n: int, name: str) -> List[int]:
    """A sequence of subset indices as a list of ints (each checked)."""
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of subset indices, got {type(indices).__name__}")
    return [_subset_index(s, n, name) for s in indices]


def _check_order(order, n: int) -> List[int]:
    """order as a list: every subset index 0..n-1 exactly once."""
    idx = _index_list(order, n, "order")
    if len(idx) != n or len(set(idx)) != n:
        missing = sorted(set(range(n)) - set(idx))
        repeated = sorted({s for s in idx if idx.count(s) > 1})
        raise ValueError(f"order: expected each of the {n} subsets exactly once; missing {missing}, "
                         f"repeated {repeated}")
    return idx


def _check_image(x, name: str, shape, xp):
    """x as a new C-contiguous float32 array of ``shape`` in namespace xp: a real, finite,
    non-negative NumPy (or CuPy, with CuPy data) array; errors name the argument."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(f"{name}: expected a {xp.__name__} array of shape {tuple(shape)}, got {type(x).__name__}")
    if array_module(x) is not xp:
        raise TypeError(f"{name}: must live where the data live (both NumPy or both CuPy), got "
                        f"{type(x).__module__}.{type(x).__name__} for {xp.__name__} data")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):   # bool, complex
        raise TypeError(f"{name}: expected a real (float or integer) array, got dtype {x.dtype}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(x.shape)}")
    with np.errstate(over="ignore"):           # values beyond float32 become inf: reported just below
        out = xp.array(x, dtype=xp.float32, order="C", copy=True)
    if not bool(xp.isfinite(out).all()):
        raise ValueError(f"{name}: contains NaN or inf (or values beyond float32's range)")
    if bool((out < 0).any()):
        raise ValueError(f"{name}: contains negative values; an activity image must be >= 0")
    return out


def _check_x0(x0, problem: SubsetProblem, xp):
    """x0 checked and copied (None stays None): also not all zeros, which EM would keep at zero."""
    if x0 is None:
        return None
    x = _check_image(x0, "x0", problem.image_shape, xp)
    if not bool((x > 0).any()):
        raise ValueError("x0: is zero everywhere; the multiplicative updates would keep it zero "
                         "(give a positive start image, or None for the default)")
    return x


def _check_sensitivity(S, xp) -> float:
    """max(S), or a ValueError naming the problem when no voxel is seen by the data."""
    s_max = float(S.max())
    if not s_max > 0:
        raise ValueError("problem: its sensitivity image sum_s A_s^T f_s is zero everywhere (all factors "
                         "zero, or a projector that sees no voxel); nothing can be reconstructed")
    return s_max


def _start(S, x0, totals, xp):
    """x0 (already checked and copied), or the uniform image whose expected total counts match the
    data: ``c = (sum d - sum b) / sum S``."""
    if x0 is not None:
        return x0
    d_sum, b_sum, _ = totals
    c = max(d_sum - b_sum, 1e-3 * d_sum, 1e-12) / max(float(S.sum(dtype=xp.float64)), 1e-30)
    return xp.full(S.shape, c, dtype=xp.float32)


# --- the passes over the subsets --------------------------------------------------------------------------

class _Work:
    """Work arrays reused over all iterations: (forward projection, residual) per subset shape and
    one image for partial back projections."""

    def __init__(self, problem: SubsetProblem, xp):
        self.problem, self.xp = problem, xp
        self.part = xp.empty(tuple(problem.image_shape), dtype=xp.float32)
        self._by_shape = {}
        self._by_subset = {}     # subset -> its shape's pair: one dict lookup per subset update

    def subset(self, s: int):
        bufs = self._by_subset.get(s)
        if bufs is None:
            shape = tuple(self.problem.subset_shape(s))
            if shape not in self._by_shape:
                self._by_shape[shape] = tuple(self.xp.empty(shape, dtype=self.xp.float32) for _ in range(2))
            bufs = self._by_subset[s] = self._by_shape[shape]
        return bufs


def _model(xp, hx, f, b, out):
    """ybar = f * hx + b (f = 1, b = 0 where None); written into out unless it is hx itself."""
    y = hx if f is None else xp.multiply(hx, f, out=out)
    return y if b is None else xp.add(y, b, out=out)


def _subset_loglik(d, ybar, eps_y, xp) -> float:
    d64 = d.astype(xp.float64)
    y64 = xp.maximum(ybar.astype(xp.float64), eps_y)
    return float(xp.sum(d64 * xp.log(y64) - ybar.astype(xp.float64)))


def _loglik(problem: SubsetProblem, xp, x, eps_y: float, work: _Work) -> float:
    """Poisson log-likelihood of x, subsets in index order, without checking the problem."""
    ll = 0.0
    for s in range(problem.n_subsets):
        hx, r = work.subset(s)
        hx = problem.forward(x, s, out=hx)
        ll += _subset_loglik(problem.data(s), _model(xp, hx, problem.factors(s), problem.background(s), r),
                             eps_y, xp)
    return problem.reduce_sum(ll)


def _backproject_residual(problem: SubsetProblem, xp, x, subsets, eps_y: float, c: float, work: _Work, out,
                          track: bool = False) -> float:
    """out = sum_{s in subsets} A_s^T [f_s (d_s / ybar_s - c)], ybar_s = f_s A_s x + b_s, summed in
    the order of ``subsets``.

    c = 0 gives the EM numerator (MLEM, OSEM), c = 1 the log-likelihood gradient (block-RAMLA).
    With ``track`` it also returns the log-likelihood terms of these subsets at x (MLEM gets the
    likelihood of its current iterate from the forward projections it needs anyway), else 0.
    """
    ll = 0.0
    for k, s in enumerate(subsets):
        hx, r = work.subset(s)
        hx = problem.forward(x, s, out=hx)
        d, f, b = problem.data(s), problem.factors(s), problem.background(s)
        if track:
            ll += _subset_loglik(d, _model(xp, hx, f, b, r), eps_y, xp)
        subset_residual(xp, hx, d, f, b, eps_y, c, out=r)
        if k == 0:
            bp = problem.adjoint(r, s, out=out)
            if bp is not out:
                xp.copyto(out, bp)
        else:
            out += problem.adjoint(r, s, out=work.part)
    return problem.reduce_sum(ll) if track else ll


def _em_update(xp, x, bp, inv_S, good):
    """The EM step x * bp / S where S is informative, x unchanged elsewhere (float32)."""
    return xp.where(good, x * bp * inv_S, x).astype(xp.float32)


def _safe_inverse(s, eps, xp):
    """1 / s where s > eps, else 0, without a division by zero."""
    good = s > eps
    return xp.where(good, 1.0 / xp.where(good, s, 1.0), 0.0).astype(xp.float32), good


def _sensitivity(problem: SubsetProblem, xp, subsets):
    """sum_{s in subsets} A_s^T f_s (f_s = 1 where the problem has none), in the order given."""
    S = xp.zeros(tuple(problem.image_shape), dtype=xp.float32)
    ones = {}
    for s in subsets:
        f = problem.factors(s)
        if f is None:
            shape = tuple(problem.subset_shape(s))
            if shape not in ones:
                ones[shape] = xp.ones(shape, dtype=xp.float32)
            f = ones[shape]
        S += problem.adjoint(f, s)
    return S


def _progress(n_iter: int, desc, progress):
    from tqdm.auto import tqdm

    return tqdm(range(1, n_iter + 1), desc=desc, disable=not progress, unit="it")


def _run_passes(rec, xp, x, n_iter: int, label: str, progress, order, update: Callable,
                callback: Optional[Callable], start_pass: Optional[Callable] = None):
    """n_iter passes of ``x = update(iteration, subset, x)`` over ``order`` (a sequence of subsets,
    or a callable ``iteration -> sequence`` for an order drawn per pass), shared by OSEM, block-RAMLA,
    BSREM and SVRG: ``start_pass(iteration, x)`` before each pass (x: the iterate the pass starts
    from), ``callback(iteration, index, x)`` after each subset (True stops after recording that pass),
    each pass timed and recorded. Returns x."""
    for it in _progress(n_iter, label, progress):
        _sync(xp)
        t = time.perf_counter()          # the pass's set-up (SVRG's snapshot) counts as its time
        if start_pass is not None:
            start_pass(it, x)
        stop = False
        for m, s in enumerate(order(it) if callable(order) else order):
            x = update(it, s, x)
            if callback is not None and callback(it, m, x):
                stop = True
                break
        _sync(xp)
        rec.after_iteration(x, it, time.perf_counter() - t)
        rec.loglik(x, it)
        if stop:
            break
    return x


class _Recorder:
    """Stores images, likelihoods and timings shared by all algorithms."""

    def __init__(self, algorithm, problem, xp, eps_y, work, store_every, track_loglik, params):
        self.res = ReconResult(image=None, algorithm=algorithm, params=params)
        self.problem, self.xp, self.eps_y, self.work = problem, xp, eps_y, work
        self.store_every = int(store_every) if store_every is not None else 0
        self.track = bool(track_loglik)
        if self.track:
            self.res.loglik, self.res.loglik_iterations = [], []

    def loglik(self, x, it):
        if not self.track:
            return
        t = time.perf_counter()
        self.res.loglik.append(_loglik(self.problem, self.xp, x, self.eps_y, self.work))
        self.res.loglik_iterations.append(it)
        self.res.loglik_time_s += time.perf_counter() - t

    def after_iteration(self, x, it, dt):
        self.res.iteration_times.append(dt)
        self.res.time_s += dt
        self.res.n_iter = it
        if self.store_every and it % self.store_every == 0:
            self.res.images.append(x.copy())
            self.res.image_iterations.append(it)

    def finish(self, x):
        self.res.image = x
        return self.res


# --- public API -------------------------------------------------------------------------------------------

def sensitivity_image(problem: SubsetProblem, subsets: Optional[Sequence[int]] = None):
    """``S = sum_{s in subsets} A_s^T f_s`` (all subsets by default; f_s = 1 where the problem has
    no factors), summed in the order given; ``subsets`` are distinct indices in ``[0, n_subsets)``.
    Returns ``problem.image_shape`` float32 in the namespace of the data."""
    xp, _, _ = _checked(problem)
    n = problem.n_subsets
    subsets = range(n) if subsets is None else _index_list(subsets, n, "subsets")
    if not subsets:
        raise ValueError("subsets: empty; expected at least one subset index (None for all)")
    if len(set(subsets)) != len(subsets):              # a repeat would count its subset twice
        repeated = sorted({s for s in subsets if subsets.count(s) > 1})
        raise ValueError(f"subsets: expected distinct subset indices, got {repeated} more than once")
    return _sensitivity(problem, xp, subsets)


def poisson_loglik(problem: SubsetProblem, x) -> float:
    """Poisson log-likelihood ``sum_s sum d log ybar - ybar`` of image x (float64; ``log d!`` omitted).

    x : ``problem.image_shape``, real, finite and >= 0 (an activity image), in the namespace of
    the data; ``ybar`` is guarded by ``max(ybar, eps_y)`` inside the log (module docstring).
    """
    xp, eps_y, _ = _checked(problem)
    x = _check_image(x, "x", problem.image_shape, xp)
    return _loglik(problem, xp, x, eps_y, _Work(problem, xp))


def mlem(problem: SubsetProblem, n_iter: int, x0=None, *, callback: Optional[Callable] = None,
         store_every: Optional[int] = None, track_loglik: bool = False, progress: bool = True) -> ReconResult:
    """MLEM: ``x <- (x / S) * sum_s A_s^T [f_s d_s / ybar_s]`` (all subsets, summed in index order).

    Parameters
    ----------
    problem : a :class:`~directpet.recon.problem.SubsetProblem` (projector, data, factors,
        background), e.g. ``directpet.direct.ViewSubsets(projector, data)``.
    n_iter : iterations, an integer in ``[1, 2**31)``.
    x0 : initial image (``problem.image_shape``), real, finite, >= 0 and not all zeros (voxels at 0
        stay 0), NumPy or CuPy like the data (copied as float32); default uniform with matching
        total counts.
    callback : ``callback(iteration, subiteration, x)`` after every update (MLEM: subiteration 0);
        iterations count from 1. A return value of True stops the reconstruction. The x it receives
        is never modified afterwards (it may be kept).
    store_every : keep a copy of x every N iterations in ``result.images`` (a positive integer;
        None: none).
    track_loglik : record the Poisson log-likelihood of x0 and after every iteration (MLEM gets
        L(x_{k-1}) for free during iteration k and pays one extra forward pass at the end).
    progress : tqdm progress bar.

    Raises ValueError or TypeError naming the argument for any bad argument, before projecting.
    """
    xp, eps_y, totals = _checked(problem)
    n_iter = _check_run(n_iter, callback, store_every, track_loglik, progress)
    x0 = _check_x0(x0, problem, xp)
    S = _sensitivity(problem, xp, range(problem.n_subsets))
    inv_S, good = _safe_inverse(S, _EPS_S_REL * _check_sensitivity(S, xp), xp)
    x = _start(S, x0, totals, xp)
    work = _Work(problem, xp)
    rec = _Recorder("mlem", problem, xp, eps_y, work, store_every, track_loglik, {})
    bp = xp.empty_like(x)
    for it in _progress(n_iter, "MLEM", progress):
        _sync(xp)
        t = time.perf_counter()
        ll = _backproject_residual(problem, xp, x, range(problem.n_subsets), eps_y, 0.0, work, bp, rec.track)
        x = _em_update(xp, x, bp, inv_S, good)
        _sync(xp)
        if rec.track:
            rec.res.loglik.append(ll)                 # the likelihood of the previous iterate
            rec.res.loglik_iterations.append(it - 1)
        rec.after_iteration(x, it, time.perf_counter() - t)
        if callback is not None and callback(it, 0, x):
            break
    rec.loglik(x, rec.res.n_iter)
    return rec.finish(x)


def osem(problem: SubsetProblem, n_iter: int, x0=None, *, order: Optional[Sequence[int]] = None,
         callback: Optional[Callable] = None, store_every: Optional[int] = None, track_loglik: bool = False,
         progress: bool = True) -> ReconResult:
    """OSEM: one EM update per subset, ``x <- (x / S_s) * A_s^T [f_s d_s / ybar_s]``, ``S_s = A_s^T f_s``.

    ``order`` : the subsets' visiting order within a pass, every subset index exactly once
    (default ``problem.order()``). How data are grouped into subsets is the problem's: for DIRECT,
    ``ViewSubsets(projector, data, k)`` gives k interleaved blocks of views.
    ``callback(iteration, subiteration, x)`` runs after every subset update (subiteration: the
    position in ``order``). Other parameters as in :func:`mlem`; the likelihood costs one extra
    forward pass per iteration. A subset without counts is an error (``data``): its update would set
    every voxel it sees to 0, from which the multiplicative updates never recover.
    """
    xp, eps_y, totals = _checked(problem)
    n_iter = _check_run(n_iter, callback, store_every, track_loglik, progress)
    order = _check_order(problem.order() if order is None else order, problem.n_subsets)
    x0 = _check_x0(x0, problem, xp)
    for s in order:                  # summed over the processes that share the problem (same on each)
        if not problem.reduce_sum(float(problem.data(s).sum(dtype=xp.float64))) > 0:
            raise ValueError(f"data: subset {s} has no counts; its OSEM update would set every voxel it sees "
                             f"to 0 for good (use fewer subsets, MLEM or block-RAMLA)")
    S_sub = {s: _sensitivity(problem, xp, [s]) for s in order}
    S = S_sub[order[0]].copy()
    for s in order[1:]:
        S += S_sub[s]
    s_max = _check_sensitivity(S, xp)
    invs = {s: _safe_inverse(S_s, _EPS_S_REL * s_max, xp) for s, S_s in S_sub.items()}
    del S_sub
    x = _start(S, x0, totals, xp)
    work = _Work(problem, xp)
    rec = _Recorder("osem", problem, xp, eps_y, work, store_every, track_loglik, {"order": order})
    bp = xp.empty_like(x)
    rec.loglik(x, 0)

    def update(it, s, x):
        _backproject_residual(problem, xp, x, (s,), eps_y, 0.0, work, bp)
        return _em_update(xp, x, bp, *invs[s])

    x = _run_passes(rec, xp, x, n_iter, f"OSEM({problem.n_subsets})", progress, order, update, callback)
    return rec.finish(x)


def _check_relaxation(lambda0, gamma):
    """(lambda0, gamma) of the default schedule: lambda0 > 0, gamma >= 0, both finite."""
    return real_number("lambda0", lambda0, positive=True), real_number("gamma", gamma, nonnegative=True)


def ramla_lambda(n: int, lambda0: float = 0.03, gamma: float = 0.05) -> float:
    """Relaxation of pass n (a positive integer, 1-based): ``lambda0 / (1 + gamma (n - 1))``
    (``lambda0 > 0``, ``gamma >= 0``)."""
    n = integer("n", n, lo=1)
    lambda0, gamma = _check_relaxation(lambda0, gamma)
    return lambda0 / (1.0 + gamma * (n - 1))


def block_ramla(problem: SubsetProblem, n_iter: int, lambda0: float = 0.03, gamma: float = 0.05,
                schedule=None, floor: Optional[float] = None, order: Optional[Sequence[int]] = None,
                x0=None, *, callback: Optional[Callable] = None, store_every: Optional[int] = None,
                track_loglik: bool = False, progress: bool = True) -> ReconResult:
    """Block-RAMLA, one update per subset ([HA]_ §6; :ref:`physics-recon`).

    ``x <- x + lambda_n (x / Sbar) * A_s^T [f_s * (d_s / ybar_s - 1)]``, ``Sbar = S / n_subsets``,
    then ``x <- max(x, floor)``. [HA]'s block-RAMLA is one DIRECT view per subset,
    ``ViewSubsets(projector, data)``, whose default order is the views' geometric order.

    Parameters
    ----------
    lambda0, gamma : default schedule ``lambda_n = lambda0 / (1 + gamma (n - 1))`` for pass n
        (``lambda0 > 0``, ``gamma >= 0``, finite). The default lambda0 = 0.03 is calibrated
        (:ref:`physics-recon`) on the simulated [HA]_
        experiment (sphere phantom, 430 M events, 144 x 144 x 48 voxels, 40 x 3 views, invariant
        400 ps kernel): with the starting value 0.1 of the literature the noise reached 8 % after 4.5
        passes, at a cumulative relaxation sum(lambda_n) of about 0.41; 0.03 reaches that sum after
        about 20 passes, where [HA] Fig. 10 reaches 8 %.
    schedule : overrides it: a callable ``n -> lambda_n`` or a sequence indexed by ``n - 1`` with at
        least ``n_iter`` values; every lambda_n must be a positive finite number. A callable is
        evaluated for n = 1 .. n_iter at entry (before any projection).
    floor : positivity floor, finite and >= 0 (default ``1e-6 * mean(x0)``).
    order : the subsets' visiting order within a pass, every subset index exactly once (default
        ``problem.order()``).
    Other parameters as in :func:`mlem`; ``callback(iteration, subiteration, x)`` runs after
    every subset update (each update makes a new array: an x the callback keeps is not changed by
    later updates), and the likelihood costs one extra forward pass per iteration.
    """
    xp, eps_y, totals = _checked(problem)
    n_iter = _check_run(n_iter, callback, store_every, track_loglik, progress)
    lambda0, gamma = _check_relaxation(lambda0, gamma)
    lambdas = _schedule(schedule, lambda0, gamma, n_iter)
    floor = _check_floor(floor)
    order = _check_order(problem.order() if order is None else order, problem.n_subsets)
    x0 = _check_x0(x0, problem, xp)
    S = _sensitivity(problem, xp, range(problem.n_subsets))
    inv_S, good = _safe_inverse(S, _EPS_S_REL * _check_sensitivity(S, xp), xp)
    inv_Sbar = inv_S * np.float32(problem.n_subsets)           # 1 / (S / n_subsets)
    x = _start(S, x0, totals, xp)
    fl = _floor_value(x, floor, xp)
    work = _Work(problem, xp)
    rec = _Recorder("block_ramla", problem, xp, eps_y, work, store_every, track_loglik,
                    {"order": order, "lambda0": lambda0, "gamma": gamma, "floor": fl})
    rec.res.lambdas = []
    grad = xp.empty_like(x)
    rec.loglik(x, 0)
    step = {}

    def start_pass(it, x):
        lam = lambdas(it)
        rec.res.lambdas.append(lam)
        with np.errstate(over="ignore"):       # a relaxation beyond float32 is reported by the first update
            step["scale"] = xp.where(good, inv_Sbar * np.float32(lam), 0.0).astype(xp.float32)
        step["first"] = True

    def update(it, s, x):
        _backproject_residual(problem, xp, x, (s,), eps_y, 1.0, work, grad)
        if not step.get("first"):
            return ramla_update(xp, x, step["scale"], grad, fl)    # a new array: x is left as it was
        del step["first"]
        with np.errstate(over="ignore", invalid="ignore"):    # an overflow is the error raised just below
            y = ramla_update(xp, x, step["scale"], grad, fl)
        _check_first_update(xp, y, "lambda0" if schedule is None else f"schedule: lambda_{it}",
                            f"the relaxation {rec.res.lambdas[-1]!r} of pass {it}",
                            "block-RAMLA needs lambda_n * max(A_s^T f_s / Sbar) <= 1 to stay positive: use a "
                            "relaxation of order 0.01 to 1 (the default lambda0 is 0.03)")
        return y

    x = _run_passes(rec, xp, x, n_iter, "block-RAMLA", progress, order, update, callback, start_pass)
    return rec.finish(x)


def _check_first_update(xp, y, name: str, what: str, advice: str) -> None:
    """The first update of a pass (one reduction per pass, not per update; block-RAMLA, BSREM, SVRG):
    inf or NaN there is an error naming the step-size argument, before the next projection meets it."""
    if not bool(xp.isfinite(y).all()):
        raise ValueError(f"{name}: {what} makes the first update of the pass overflow (the image holds inf or "
                         f"NaN); {advice}")


def _check_floor(floor) -> Optional[float]:
    """The positivity floor argument: None (the default) or a finite number >= 0 (checked at entry)."""
    return None if floor is None else real_number("floor", floor, nonnegative=True)


def _floor_value(x, floor: Optional[float], xp) -> float:
    """The floor in use: ``floor``, or by default ``1e-6 * mean(x)`` of the start image."""
    return float(1e-6 * float(x.mean(dtype=xp.float64))) if floor is None else floor


def _schedule(schedule, lambda0: float, gamma: float, n_iter: int) -> Callable[[int], float]:
    """``n -> lambda_n`` for n = 1 .. n_iter, every value checked (positive, finite) here, at entry;
    errors name ``schedule`` (or ``lambda0`` for the default schedule)."""
    if schedule is None:
        # computed pass by pass (n_iter may be large); lambda_n decreases, so the last could underflow
        if not ramla_lambda(n_iter, lambda0, gamma) > 0:
            raise ValueError(f"lambda0: {lambda0!r} with gamma={gamma!r} gives lambda_{n_iter} = 0 (underflow)")
        return lambda n: ramla_lambda(n, lambda0, gamma)
    if callable(schedule):
        require_memory("n_iter", 64.0 * n_iter, f"evaluating the schedule for n_iter={n_iter} passes")
        values = [schedule(n) for n in range(1, n_iter + 1)]
    elif isinstance(schedule, (str, bytes)) or not hasattr(schedule, "__iter__"):
        raise TypeError(f"schedule: expected a callable n -> lambda_n or a sequence of relaxations, "
                        f"got {type(schedule).__name__}")
    else:
        values = list(schedule)
        if len(values) < n_iter:
            raise ValueError(f"schedule: {len(values)} relaxation(s) for n_iter={n_iter} passes; give at "
                             f"least n_iter values (or a callable)")
        values = values[:n_iter]
    values = [real_number(f"schedule: lambda_{n}", v, positive=True) for n, v in enumerate(values, start=1)]
    return lambda n: values[n - 1]


__all__ = ["ReconResult", "block_ramla", "mlem", "osem", "poisson_loglik", "ramla_lambda", "sensitivity_image"]
