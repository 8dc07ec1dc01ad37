"""DIRECT reconstruction: MLEM, OSEM over blocks of views and block-RAMLA (science.md 1.9).

Model, per view v: ``ybar_v = s_v * H_v x + b_v`` with histo-image data d_v, sensitivity
(normalisation x attenuation) histo-images s_v and background b_v (all ``(nz, ny, nx)`` float32).
The sensitivity image is ``S = sum_v H_v^T s_v``.

* MLEM:        ``x <- (x / S) * sum_v H_v^T [s_v * d_v / ybar_v]``
* OSEM:        the same over blocks B_m of views, with ``S_m = sum_{v in B_m} H_v^T s_v``
* block-RAMLA: ``x <- x + lambda_n (x / Sbar) * H_v^T [s_v * (d_v / ybar_v - 1)]``, ``Sbar = S / N_V``,
  one view per block in geometric order, ``lambda_n = lambda0 / (1 + gamma (n - 1))`` constant
  within pass n, then ``x <- max(x, floor)``.

The projector is used only through ``forward(x, v)``, ``adjoint(y, v)``, ``n_views`` and ``grid``,
so any DIRECT projector with that interface works (spatial, FFT, CPU or CUDA). The loops are
written against the array namespace of the data (NumPy or CuPy): with CuPy data and a CUDA
projector everything stays on the device.

Division guards (documented choices):

* ``d / ybar`` uses ``max(ybar, eps_y)`` with ``eps_y = 1e-9 * mean(d)`` (tiny, positive): bins with
  ``d = 0`` contribute 0 whatever ybar is; a bin with ``d > 0`` and ``ybar = 0`` (impossible under the
  model) gets a large but finite ratio.
* Voxels with ``S`` (or ``S_m``, ``Sbar``) ``<= 1e-9 * max(S)`` receive no information from the data:
  their value is left unchanged (factor 1 in MLEM/OSEM, step 0 in RAMLA).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from .._checks import array_module
from ._fused import ramla_update, view_residual
from ..direct.views import ViewSet
from ..direct.histo_data import HistoImageData

_EPS_Y_REL = 1e-9
_EPS_S_REL = 1e-9


@dataclass
class ReconResult:
    """Output of a reconstruction.

    Attributes
    ----------
    image : final image (nz, ny, nx) float32 (namespace of the data).
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
    lambdas : relaxation of each pass (block-RAMLA), else None.
    params : the settings used (blocks, floors, ...).
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


# --- helpers ----------------------------------------------------------------------------------------------

def _as_data(projector, data) -> HistoImageData:
    if isinstance(data, HistoImageData):
        d = data
    elif hasattr(data, "shape") and len(data.shape) == 4:
        d = HistoImageData(data, projector.grid)
    else:
        raise TypeError(f"data: expected HistoImageData or an (n_views, nz, ny, nx) array, got {type(data).__name__}")
    if d.n_views != projector.n_views:
        raise ValueError(f"data: has {d.n_views} views but the projector has {projector.n_views}")
    if tuple(d.grid.shape) != tuple(projector.grid.shape):
        raise ValueError(f"data: grid {d.grid.shape} does not match the projector's {projector.grid.shape}")
    return d


def _sync(xp):
    """Wait for the device so that wall times mean something (no-op for NumPy)."""
    if xp is not np:
        xp.cuda.Device().synchronize()


def _safe_inverse(s, eps, xp):
    """1 / s where s > eps, else 0, without a division by zero."""
    good = s > eps
    return xp.where(good, 1.0 / xp.where(good, s, 1.0), 0.0).astype(xp.float32), good


def _ybar(projector, x, data: HistoImageData, v: int):
    y = projector.forward(x, v)
    if data.sensitivity is not None:
        y = y * data.sensitivity[v]
    if data.background is not None:
        y = y + data.background[v]
    return y


def _run_passes(rec, xp, x, n_iter: int, label: str, progress, blocks, update: Callable,
                callback: Optional[Callable], start_pass: Optional[Callable] = None):
    """n_iter passes of ``x = update(iteration, block, x)`` over ``blocks``, shared by the block
    algorithms: ``start_pass(iteration)`` before each pass, ``callback(iteration, index, x)`` after
    each block (True stops after recording that pass), each pass timed and recorded. Returns x."""
    for it in _progress(n_iter, label, progress):
        if start_pass is not None:
            start_pass(it)
        _sync(xp)
        t = time.perf_counter()
        stop = False
        for m, b in enumerate(blocks):
            x = update(it, b, x)
            if callback is not None and callback(it, m, x):
                stop = True
                break
        _sync(xp)
        rec.after_iteration(x, it, time.perf_counter() - t)
        rec.loglik(x, it)
        if stop:
            break
    return x


def _block_backprojection(projector, data: HistoImageData, x, views, eps_y: float, c: float, work, out):
    """out = sum_{v in views} H_v^T [ s_v (d_v / ybar_v - c) ], ybar_v = s_v H_v x + b_v.

    c = 0 gives the EM numerator (OSEM), c = 1 the log-likelihood gradient (block-RAMLA). ``work``
    holds three image-sized buffers (forward projection, residual, partial back projection).
    """
    hx, r, part = work
    for k, v in enumerate(views):
        projector.forward(x, v, out=hx)
        view_residual(array_module(x), hx, data.histos[v], _view_of(data.sensitivity, v),
                      _view_of(data.background, v), eps_y, c, out=r)
        if k == 0:
            projector.adjoint(r, v, out=out)
        else:
            out += projector.adjoint(r, v, out=part)
    return out


def _view_of(stack, v):
    """stack[v], or None for an absent correction (sensitivity 1, background 0)."""
    return None if stack is None else stack[v]


def _eps_y(data: HistoImageData, xp) -> float:
    mean = float(data.histos.mean(dtype=xp.float64))
    return _EPS_Y_REL * mean if mean > 0 else 1e-30


def _loglik_view(d, ybar, eps_y, xp) -> float:
    d64 = d.astype(xp.float64)
    y64 = xp.maximum(ybar.astype(xp.float64), eps_y)
    return float(xp.sum(d64 * xp.log(y64) - ybar.astype(xp.float64)))


def _check_x0(x0, grid, xp):
    if tuple(x0.shape) != tuple(grid.shape):
        raise ValueError(f"x0: expected shape {grid.shape}, got {tuple(x0.shape)}")
    if array_module(x0) is not xp:
        raise TypeError("x0: must live where the data live (both NumPy or both CuPy)")
    return xp.ascontiguousarray(x0, dtype=xp.float32).copy()


def _uniform_start(data: HistoImageData, S, xp):
    """Uniform image whose expected total counts match the data: c = (sum d - sum b) / sum S."""
    total = float(data.histos.sum(dtype=xp.float64))
    if data.background is not None:
        total -= float(data.background.sum(dtype=xp.float64))
    s_sum = float(S.sum(dtype=xp.float64))
    c = max(total, 1e-3 * float(data.histos.sum(dtype=xp.float64)), 1e-12) / max(s_sum, 1e-30)
    return xp.full(S.shape, c, dtype=xp.float32)


def _progress(n_iter, desc, progress):
    from tqdm.auto import tqdm

    return tqdm(range(1, n_iter + 1), desc=desc, disable=not progress, unit="it")


class _Recorder:
    """Stores images, likelihoods and timings shared by all algorithms."""

    def __init__(self, algorithm, projector, data, xp, store_every, track_loglik, params):
        self.res = ReconResult(image=None, algorithm=algorithm, params=params)
        self.projector, self.data, self.xp = projector, data, xp
        self.store_every = int(store_every) if store_every else 0
        self.track = bool(track_loglik)
        if self.track:
            self.res.loglik, self.res.loglik_iterations = [], []
        self.eps_y = _eps_y(data, xp)

    def loglik(self, x, it):
        if not self.track:
            return
        t = time.perf_counter()
        self.res.loglik.append(poisson_loglik(self.projector, self.data, x, _eps=self.eps_y))
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

def sensitivity_image(projector, data, views: Optional[Sequence[int]] = None):
    """``S = sum_{v in views} H_v^T s_v`` (all views by default; s_v = 1 when data has none).

    ``data`` is a HistoImageData (or an (n_views, nz, ny, nx) array, then s = 1). Returns
    (nz, ny, nx) float32 in the namespace of the data.
    """
    data = _as_data(projector, data)
    xp = data.xp
    views = range(projector.n_views) if views is None else views
    S = xp.zeros(tuple(projector.grid.shape), dtype=xp.float32)
    ones = None
    for v in views:
        if data.sensitivity is not None:
            s_v = data.sensitivity[v]
        else:
            ones = xp.ones(tuple(projector.grid.shape), dtype=xp.float32) if ones is None else ones
            s_v = ones
        S += projector.adjoint(s_v, v)
    return S


def poisson_loglik(projector, data, x, *, _eps=None) -> float:
    """Poisson log-likelihood ``sum_v sum_r d log ybar - ybar`` (float64; ``log d!`` omitted)."""
    data = _as_data(projector, data)
    xp = data.xp
    eps = _eps_y(data, xp) if _eps is None else _eps
    return float(sum(_loglik_view(data.histos[v], _ybar(projector, x, data, v), eps, xp)
                     for v in range(projector.n_views)))


def mlem(projector, data, n_iter: int, x0=None, *, callback: Optional[Callable] = None,
         store_every: int = 0, track_loglik: bool = False, progress: bool = True) -> ReconResult:
    """MLEM: ``x <- (x / S) * sum_v H_v^T [s_v d_v / ybar_v]``.

    Parameters
    ----------
    projector : DIRECT projector (``forward(x, v)``, ``adjoint(y, v)``, ``n_views``, ``grid``).
    data : HistoImageData (histos, optional sensitivity and background) or a histo-image array.
    n_iter : iterations.
    x0 : initial image (nz, ny, nx), positive; default uniform with matching total counts.
    callback : ``callback(iteration, subiteration, x)`` after every update (MLEM: subiteration 0);
        iterations count from 1. A return value of True stops the reconstruction.
    store_every : keep a copy of x every N iterations in ``result.images`` (0: none).
    track_loglik : record the Poisson log-likelihood of x0 and after every iteration (MLEM gets
        L(x_{k-1}) for free during iteration k and pays one extra forward pass at the end).
    progress : tqdm progress bar.
    """
    data = _as_data(projector, data)
    xp = data.xp
    S = sensitivity_image(projector, data)
    inv_S, good = _safe_inverse(S, _EPS_S_REL * float(S.max()), xp)
    x = _uniform_start(data, S, xp) if x0 is None else _check_x0(x0, projector.grid, xp)
    rec = _Recorder("mlem", projector, data, xp, store_every, track_loglik, {})
    eps_y = rec.eps_y
    for it in _progress(n_iter, "MLEM", progress):
        _sync(xp)
        t = time.perf_counter()
        bp = xp.zeros_like(x)
        ll = 0.0
        for v in range(projector.n_views):
            d = data.histos[v]
            yb = _ybar(projector, x, data, v)
            if rec.track:
                ll += _loglik_view(d, yb, eps_y, xp)
            r = d / xp.maximum(yb, eps_y)
            if data.sensitivity is not None:
                r = r * data.sensitivity[v]
            bp += projector.adjoint(xp.ascontiguousarray(r, dtype=xp.float32), v)
        x = xp.where(good, x * bp * inv_S, x).astype(xp.float32)
        _sync(xp)
        if rec.track:
            rec.res.loglik.append(ll)                 # the likelihood of the previous iterate
            rec.res.loglik_iterations.append(it - 1)
        rec.after_iteration(x, it, time.perf_counter() - t)
        if callback is not None and callback(it, 0, x):
            break
    rec.loglik(x, rec.res.n_iter)
    return rec.finish(x)


def make_blocks(n_views: int, n_subsets: int, viewset: Optional[ViewSet] = None) -> List[List[int]]:
    """Blocks of views for OSEM, in a geometric visiting order.

    With a ViewSet, block m holds every azimuth k with ``k % n_subsets == m`` (all tilts), so each
    block spans all directions evenly; without one, views ``v % n_subsets == m``. The blocks are
    visited in bit-reversed (van der Corput) order of m, so consecutive blocks are far apart.
    """
    if isinstance(n_subsets, (bool, np.bool_)) or int(n_subsets) != n_subsets or n_subsets < 1:
        raise ValueError(f"n_subsets: expected a positive integer, got {n_subsets!r}")
    m_total = int(n_subsets)
    if viewset is not None:
        if m_total > viewset.n_phi:
            raise ValueError(f"n_subsets: {m_total} exceeds the {viewset.n_phi} azimuths")
        groups = [[viewset.index(k, l) for k in range(m, viewset.n_phi, m_total)
                   for l in range(viewset.n_theta)] for m in range(m_total)]
    else:
        if m_total > n_views:
            raise ValueError(f"n_subsets: {m_total} exceeds the {n_views} views")
        groups = [list(range(m, n_views, m_total)) for m in range(m_total)]
    order = ViewSet(m_total, 1, 0.0).geometric_order()   # bit-reversed 0..M-1
    return [groups[m] for m in order]


def _check_blocks(blocks, n_views):
    blocks = [[int(v) for v in b] for b in blocks]
    flat = sorted(v for b in blocks for v in b)
    if any(len(b) == 0 for b in blocks) or flat != list(range(n_views)):
        raise ValueError("blocks: expected non-empty blocks that together hold every view exactly once")
    return blocks


def osem(projector, data, n_iter: int, n_subsets: Optional[int] = None, x0=None, *,
         blocks: Optional[Sequence[Sequence[int]]] = None, callback: Optional[Callable] = None,
         store_every: int = 0, track_loglik: bool = False, progress: bool = True) -> ReconResult:
    """OSEM over blocks of views: ``x <- (x / S_m) * sum_{v in B_m} H_v^T [s_v d_v / ybar_v]``.

    Give ``n_subsets`` (blocks from :func:`make_blocks`, using ``data.viewset`` when present) or
    explicit ``blocks`` (lists of view indices, a partition of all views, visited in the given
    order). ``callback(iteration, subiteration, x)`` runs after every block update. Other
    parameters as in :func:`mlem`; the likelihood costs one extra forward pass per iteration.
    """
    data = _as_data(projector, data)
    xp = data.xp
    if blocks is None:
        if n_subsets is None:
            raise ValueError("osem: give n_subsets or blocks")
        blocks = make_blocks(projector.n_views, n_subsets, data.viewset)
    blocks = _check_blocks(blocks, projector.n_views)
    S_blocks = [sensitivity_image(projector, data, b) for b in blocks]
    S = sum(S_blocks[1:], S_blocks[0].copy())
    s_max = float(S.max())
    invs = [_safe_inverse(Sm, _EPS_S_REL * s_max, xp) for Sm in S_blocks]
    x = _uniform_start(data, S, xp) if x0 is None else _check_x0(x0, projector.grid, xp)
    rec = _Recorder("osem", projector, data, xp, store_every, track_loglik, {"blocks": blocks})
    eps_y = rec.eps_y
    hx, r, part, bp = (xp.empty(projector.grid.shape, dtype=xp.float32) for _ in range(4))  # work buffers
    rec.loglik(x, 0)

    def update(it, block, x):
        b, (inv_S, good) = block
        _block_backprojection(projector, data, x, b, eps_y, 0.0, (hx, r, part), out=bp)
        return xp.where(good, x * bp * inv_S, x).astype(xp.float32)

    x = _run_passes(rec, xp, x, n_iter, f"OSEM({len(blocks)})", progress, list(zip(blocks, invs)), update,
                    callback)
    return rec.finish(x)


def ramla_lambda(n: int, lambda0: float = 0.03, gamma: float = 0.05) -> float:
    """Relaxation of pass n (1-based): ``lambda0 / (1 + gamma (n - 1))``."""
    return float(lambda0) / (1.0 + float(gamma) * (n - 1))


def block_ramla(projector, data, n_iter: int, lambda0: float = 0.03, gamma: float = 0.05,
                schedule=None, floor: Optional[float] = None, order: Optional[Sequence] = None,
                x0=None, *, callback: Optional[Callable] = None, store_every: int = 0,
                track_loglik: bool = False, progress: bool = True) -> ReconResult:
    """Block-RAMLA with one view per block (science.md 1.9, [HA] §6).

    ``x <- x + lambda_n (x / Sbar) * H_v^T [s_v * (d_v / ybar_v - 1)]``, ``Sbar = S / N_blocks``,
    then ``x <- max(x, floor)``.

    Parameters
    ----------
    lambda0, gamma : default schedule ``lambda_n = lambda0 / (1 + gamma (n - 1))`` for pass n.
        The default lambda0 = 0.03 is calibrated (science.md 1.9, Q10) on the simulated [HA]
        experiment (sphere phantom, 430 M events, 144 x 144 x 48 voxels, 40 x 3 views, invariant
        400 ps kernel): with science.md's starting value 0.1 the noise reached 8 % after 4.5
        passes, at a cumulative relaxation sum(lambda_n) of about 0.41; 0.03 reaches that sum after
        about 20 passes, where [HA] Fig. 10 reaches 8 %.
    schedule : overrides it: a callable ``n -> lambda_n`` or a sequence indexed by ``n - 1``.
    floor : positivity floor (default ``1e-6 * mean(x0)``).
    order : view visiting order: a sequence of view indices (one view per block, each view once)
        or of lists of views (blocks; the gradients of a block are summed). Default
        ``data.viewset.geometric_order()`` (bit-reversed azimuths, tilts 0, +, -), else 0..N-1.
    Other parameters as in :func:`mlem`; ``callback(iteration, subiteration, x)`` runs after
    every view update, and the likelihood costs one extra forward pass per iteration.
    """
    data = _as_data(projector, data)
    xp = data.xp
    if order is None:
        order = data.viewset.geometric_order() if data.viewset is not None else list(range(projector.n_views))
    blocks = _check_blocks([b if isinstance(b, (list, tuple)) else [b] for b in order], projector.n_views)
    S = sensitivity_image(projector, data)
    inv_S, good = _safe_inverse(S, _EPS_S_REL * float(S.max()), xp)
    inv_Sbar = inv_S * np.float32(len(blocks))                # 1 / (S / N_blocks)
    x = _uniform_start(data, S, xp) if x0 is None else _check_x0(x0, projector.grid, xp)
    fl = float(1e-6 * float(x.mean(dtype=xp.float64))) if floor is None else float(floor)
    lam_of = _schedule(schedule, lambda0, gamma)
    rec = _Recorder("block_ramla", projector, data, xp, store_every, track_loglik,
                    {"order": blocks, "lambda0": lambda0, "gamma": gamma, "floor": fl})
    rec.res.lambdas = []
    eps_y = rec.eps_y
    x = x.astype(xp.float32, copy=True)  # updated in place below; never the caller's x0
    hx, r, grad, part = (xp.empty_like(x) for _ in range(4))  # per-view work buffers
    rec.loglik(x, 0)
    step = {}

    def start_pass(it):
        lam = lam_of(it)
        rec.res.lambdas.append(lam)
        step["scale"] = xp.where(good, inv_Sbar * np.float32(lam), 0.0).astype(xp.float32)

    def update(it, b, x):
        _block_backprojection(projector, data, x, b, eps_y, 1.0, (hx, r, part), out=grad)
        return ramla_update(xp, x, step["scale"], grad, fl)

    x = _run_passes(rec, xp, x, n_iter, "block-RAMLA", progress, blocks, update, callback, start_pass)
    return rec.finish(x)


def _schedule(schedule, lambda0, gamma) -> Callable[[int], float]:
    if schedule is None:
        return lambda n: ramla_lambda(n, lambda0, gamma)
    if callable(schedule):
        return lambda n: float(schedule(n))
    seq = [float(s) for s in schedule]
    return lambda n: seq[min(n, len(seq)) - 1]


__all__ = ["ReconResult", "block_ramla", "make_blocks", "mlem", "osem", "poisson_loglik", "ramla_lambda",
           "sensitivity_image"]
