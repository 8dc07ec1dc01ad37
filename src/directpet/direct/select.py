"""The DIRECT projector for a kernel and grid: the fastest path that meets a stated model accuracy.

The three DIRECT projectors compute the same operator in different ways, at costs that scale very
differently with the voxel size. The spatial projector (:class:`HistoImageProjector`) does one
multiply-add per voxel and kernel tap; halving the voxels multiplies the taps by 8 and the voxels by
8 (the variant1 kernel: 451 taps at 4 mm, 3261 at 2 mm, a 60x larger workload). The FFT paths cost
a few transforms of the padded grid whatever the kernel's size: :class:`FFTProjector` (exact, for
invariant kernels) and :class:`LowRankProjector` (a rank-r SVD of the kernel table, r + 1
transforms, for variant and asymmetric kernels; its model error is the table's relative Frobenius
error, chosen by ``tol``). :func:`select_projector` builds the candidates that meet ``accuracy``,
times one view's forward and back projection of each on the backend, and returns the fastest,
preferring an exact path unless an approximate one is clearly faster (``margin``), so that the
choice does not flip between runs on near ties.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from .._backend import resolve_backend
from .._checks import expect_instance, positive_int, real_number
from .._device import wants_cupy
from ..geometry import ImageGrid
from .fft import FFTProjector, ViewsLike
from .lowrank import LowRankProjector
from .model import SRKernel
from .projector import HistoImageProjector

#: the methods :func:`select_projector` takes; "auto" picks one of the others
METHODS = ("auto", "spatial", "fft", "lowrank")
#: the default model accuracy: relative Frobenius error of each view's kernel table
DEFAULT_ACCURACY = 1e-4


@dataclass(frozen=True)
class ProjectorChoice:
    """What :func:`select_projector` chose and why.

    Attributes
    ----------
    method : str
        "spatial", "fft" or "lowrank".
    model_error : float
        The chosen projector's relative kernel error: 0 for the exact paths; for "lowrank" the largest
        over the views, each at most ``accuracy``.
    accuracy : float
        The accuracy asked for.
    ms : dict
        {candidate: median ms of one view's forward + back projection} for every candidate timed
        (empty when a method was named).
    rank : int or None
        The low-rank path's rank on view 0 (None for the others).
    skipped : dict
        {candidate: why it was not a candidate}.
    """

    method: str
    model_error: float
    accuracy: float
    ms: Dict[str, float] = field(default_factory=dict)
    rank: Optional[int] = None
    skipped: Dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the choice, its model error and the candidates' times."""
        what = {"spatial": "spatial (exact)", "fft": "FFT (exact, invariant kernel)",
                "lowrank": f"low-rank FFT (rank {self.rank}, kernel error {self.model_error:.1e} <= {self.accuracy:.0e})"}
        line = f"DIRECT projector: {what[self.method]}"
        if self.method in self.ms:
            line += f", {self.ms[self.method]:.3g} ms per view (fp + bp)"
        others = [f"{k} {v:.3g} ms" for k, v in self.ms.items() if k != self.method]
        others += [f"{k} not a candidate ({v})" for k, v in self.skipped.items()]
        return line + "".join(f"; {o}" for o in others)


def select_projector(grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel] = None, *,
                     method: str = "auto", accuracy: float = DEFAULT_ACCURACY, backend: str = "auto",
                     threads: Optional[int] = None, margin: float = 1.25, repeat: int = 3,
                     check_finite: bool = True, verbose: bool = False):
    """The DIRECT projector of ``kernel`` on ``grid`` and ``views`` by ``method``.

    Parameters
    ----------
    grid, views, kernel
        As for :class:`HistoImageProjector`.
    method : str
        "auto" (default): of the candidates that meet ``accuracy`` -- "spatial" always, "fft" for
        invariant kernels, "lowrank" with its rank chosen for ``accuracy`` -- the one whose forward +
        back projection of view 0 is fastest on this backend (median of ``repeat`` after a warm-up);
        an approximate path ("lowrank") is taken only when it is at least ``margin`` times faster
        than the fastest exact one. "spatial", "fft", "lowrank": that projector, untimed.
    accuracy : float
        The model accuracy in (0, 1): the largest relative Frobenius error allowed for each view's
        kernel table (the low-rank path's ``tol``); the exact paths have none.
    backend, threads, check_finite
        As for :class:`HistoImageProjector`.
    margin : float
        How much faster (>= 1) the low-rank path must be to be taken over an exact one.
    repeat : int
        Timed repetitions per candidate.
    verbose : bool
        Print :meth:`ProjectorChoice.summary` (the choice and its error).

    Returns
    -------
    HistoImageProjector, FFTProjector or LowRankProjector
        The projector, with the :class:`ProjectorChoice` as its ``choice`` attribute. Timing costs a
        few projections of one view plus, for "lowrank", the views' SVDs; the discarded candidates'
        GPU memory is released on return.
    """
    expect_instance(grid, ImageGrid, "grid")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    accuracy = real_number("accuracy", accuracy)
    if not 0.0 < accuracy < 1.0:
        raise ValueError(f"accuracy: expected a relative kernel error in (0, 1), got {accuracy!r}")
    margin = real_number("margin", margin)
    if not margin >= 1.0:
        raise ValueError(f"margin: expected a speed ratio >= 1, got {margin!r}")
    repeat = positive_int("repeat", repeat)
    backend = resolve_backend(backend)
    common = dict(backend=backend, threads=threads, check_finite=check_finite)
    makers = {"spatial": lambda: HistoImageProjector(grid, views, kernel, **common),
              "fft": lambda: FFTProjector(grid, views, kernel, mode="spatial-exact", **common),
              "lowrank": lambda: LowRankProjector(grid, views, kernel, tol=accuracy, **common)}
    if method != "auto":
        return _chosen(makers[method](), method, accuracy, {}, {}, verbose)

    candidates, skipped = {}, {}
    for name, make in makers.items():
        try:
            with warnings.catch_warnings():
                # a low-rank rank capped below the accuracy warns: then it is no candidate
                warnings.simplefilter("error", RuntimeWarning)
                op = make()
                if name == "lowrank":
                    op.factors(0)
        except (ValueError, RuntimeWarning, MemoryError) as e:
            skipped[name] = str(e).split(";")[0]      # the reason, without the advice that follows
            continue
        candidates[name] = op
    xp = _array_module(backend)
    ms = {name: _time_view_pair(op, xp, repeat) for name, op in candidates.items()}
    exact = min((n for n in ms if n != "lowrank"), key=ms.get)
    best = exact
    if "lowrank" in ms and ms["lowrank"] * margin <= ms[exact]:
        best = "lowrank"
    op = candidates.pop(best)
    candidates.clear()                      # the others' LUTs, spectra and device buffers go
    return _chosen(op, best, accuracy, ms, skipped, verbose)


def _chosen(op, method: str, accuracy: float, ms: dict, skipped: dict, verbose: bool):
    """``op`` with its :class:`ProjectorChoice`; a low-rank projector's views are all factored here
    (each view's SVD, cached for its projections) so that the error reported is the largest."""
    rank, error = None, 0.0
    if method == "lowrank":
        rank, error = op.rank(0), max(op.kernel_error(v) for v in range(op.n_views))
    op.choice = ProjectorChoice(method, error, accuracy, ms=ms, rank=rank, skipped=skipped)
    if verbose:
        print(op.choice.summary())
    return op


def _array_module(backend: str):
    if wants_cupy(None, backend):
        import cupy  # optional: time on device-resident arrays, as a reconstruction runs

        return cupy
    return np


def _time_view_pair(op, xp, repeat: int) -> float:
    """Median ms of ``op``'s forward + adjoint of view 0 on random non-negative inputs (a warm-up
    first: LUT upload, plans, the view's spectra)."""
    rng = np.random.default_rng(20261124)
    x = xp.asarray(rng.random(op.grid.shape, dtype=np.float32) + 0.05)
    y = xp.asarray(rng.random((1,) + op.grid.shape, dtype=np.float32) + 0.05)
    fp = xp.empty((1,) + op.grid.shape, dtype=np.float32)
    bp = xp.empty(op.grid.shape, dtype=np.float32)

    def sync():
        if xp is not np:
            xp.cuda.Device().synchronize()

    times = []
    for k in range(repeat + 1):
        sync()
        t0 = time.perf_counter()
        op.forward(x, [0], out=fp)
        op.adjoint(y, [0], out=bp)
        sync()
        if k:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))
