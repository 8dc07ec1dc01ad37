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
from .._checks import expect_instance, positive_int, real_number, synchronize
from .._device import array_namespace
from ..geometry import ImageGrid
from .fft import FFTProjector, ViewsLike
from .lowrank import LowRankProjector
from .model import SRKernel
from .projector import HistoImageProjector

#: the methods :func:`select_projector` takes; "auto" picks one of the others
METHODS = ("auto", "spatial", "fft", "lowrank")
#: the default model accuracy: relative Frobenius error of each view's kernel table
DEFAULT_ACCURACY = 1e-4
#: a bound on the timed repetitions (a few are enough; a huge count would hang the call)
MAX_REPEAT = 1000


@dataclass(frozen=True)
class ProjectorChoice:
    """What :func:`select_projector` chose and why.

    Attributes
    ----------
    method : str
        "spatial", "fft" or "lowrank".
    model_error : float
        The chosen projector's relative kernel error: 0 for the exact paths; for "lowrank" the largest
        over the views (at most ``accuracy`` when "auto" chose it; a named "lowrank" reports what its
        ``max_rank`` allowed).
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
        Timed repetitions per candidate (1 to 1000).
    verbose : bool
        Print :meth:`ProjectorChoice.summary` (the choice and its error).

    Returns
    -------
    HistoImageProjector, FFTProjector or LowRankProjector
        The projector, with the :class:`ProjectorChoice` as its ``choice`` attribute. Timing costs a
        few projections of one view plus, for "lowrank", the views' SVDs; the candidates are built and
        timed one at a time, the slower ones released at once. A candidate that runs out of memory is
        skipped (MemoryError when none is left); the spatial projector's ValueError (a bad argument)
        is raised.
    """
    expect_instance(grid, ImageGrid, "grid")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    accuracy = check_accuracy("accuracy", accuracy)
    margin = real_number("margin", margin)
    if not margin >= 1.0:
        raise ValueError(f"margin: expected a speed ratio >= 1, got {margin!r}")
    repeat = positive_int("repeat", repeat)
    if repeat > MAX_REPEAT:
        raise ValueError(f"repeat: at most {MAX_REPEAT} timed repetitions per candidate, got {repeat}")
    backend = resolve_backend(backend)
    common = dict(backend=backend, threads=threads, check_finite=check_finite)
    makers = {"spatial": lambda: HistoImageProjector(grid, views, kernel, **common),
              "fft": lambda: FFTProjector(grid, views, kernel, mode="spatial-exact", **common),
              "lowrank": lambda: LowRankProjector(grid, views, kernel, tol=accuracy, **common)}
    if method != "auto":
        op = makers[method]()
        return _chosen(op, method, accuracy, {}, {}, verbose, _lowrank_error(op) if method == "lowrank" else 0.0)

    # One candidate at a time (built, timed, kept only while it is the best of its kind), so that the
    # GPU never holds two candidates' LUTs or spectra. The spatial projector goes first: an error of
    # its own is an argument error shared by all and is raised as it is.
    ms, skipped, best = {}, {}, {}          # best: {"exact" | "lowrank": (name, op)}
    xp = array_namespace(backend)   # timed on device-resident arrays, as a reconstruction runs
    for name, make in makers.items():
        try:
            op = make()
            error = _lowrank_error(op) if name == "lowrank" else 0.0
            if error > accuracy:
                skipped[name] = f"kernel error {error:.2g} above the accuracy (max_rank reached)"
                continue
            ms[name] = _time_view_pair(op, xp, repeat)
        except MemoryError as e:
            skipped[name] = f"out of memory: {str(e).split(';')[0]}"
            continue
        except ValueError as e:
            if name == "spatial":
                raise
            skipped[name] = str(e).split(";")[0]      # the reason, without the advice that follows
            continue
        kind = "lowrank" if name == "lowrank" else "exact"
        if kind not in best or ms[name] < ms[best[kind][0]]:
            best[kind] = (name, op)
        del op                                        # a slower one's buffers go now
    if not best:
        raise MemoryError("grid: no DIRECT projector fits on this machine: " +
                          "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    name = pick(ms, margin)
    op = dict(best.values())[name]
    best.clear()
    return _chosen(op, name, accuracy, ms, skipped, verbose, _lowrank_error(op) if name == "lowrank" else 0.0)


def pick(ms: dict, margin: float) -> str:
    """The rule of ``method="auto"`` on the candidates' times ``ms`` ({name: ms}, non-empty): the
    fastest exact one ("spatial", "fft"), unless "lowrank" is at least ``margin`` times faster than it
    (or no exact one was timed)."""
    exact = [n for n in ms if n != "lowrank"]
    if not exact:
        return "lowrank"
    fastest = min(exact, key=ms.get)
    return "lowrank" if "lowrank" in ms and ms["lowrank"] * margin <= ms[fastest] else fastest


def check_accuracy(name: str, value) -> float:
    """A model accuracy: a relative kernel error in (0, 1); ValueError naming ``name`` otherwise."""
    value = real_number(name, value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name}: expected a relative kernel error in (0, 1), got {value!r}")
    return value


def _lowrank_error(op) -> float:
    """The largest relative kernel error over a low-rank projector's views (each view's SVD, cached
    for its projections); a view whose rank hit ``max_rank`` warns, and its error shows it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return max(op.kernel_error(v) for v in range(op.n_views))


def _chosen(op, method: str, accuracy: float, ms: dict, skipped: dict, verbose: bool, error: float):
    """``op`` with its :class:`ProjectorChoice`."""
    rank = op.rank(0) if method == "lowrank" else None
    op.choice = ProjectorChoice(method, error, accuracy, ms=ms, rank=rank, skipped=skipped)
    if verbose:
        print(op.choice.summary())
    return op


def _time_view_pair(op, xp, repeat: int) -> float:
    """Median ms of ``op``'s forward + adjoint of view 0 on random non-negative inputs (a warm-up
    first: LUT upload, plans, the view's spectra)."""
    rng = np.random.default_rng(20261124)
    x = xp.asarray(rng.random(op.grid.shape, dtype=np.float32) + 0.05)
    y = xp.asarray(rng.random((1,) + op.grid.shape, dtype=np.float32) + 0.05)
    fp = xp.empty((1,) + op.grid.shape, dtype=np.float32)
    bp = xp.empty(op.grid.shape, dtype=np.float32)

    times = []
    for k in range(repeat + 1):
        synchronize(xp)
        t0 = time.perf_counter()
        op.forward(x, [0], out=fp)
        op.adjoint(y, [0], out=bp)
        synchronize(xp)
        if k:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))
