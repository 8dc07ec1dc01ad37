"""Event-level Monte Carlo of the stationary dual-head scanner (:ref:`physics-dualhead`).

:func:`simulate` draws decays from an activity image and follows them through physics and the
detector geometry of :class:`~directpet.dualhead.DualHeadScanner` alone -- no patch model, no
projector -- so that reconstructing its data with the analytic model is an honest test (no inverse
crime). Per decay (``csrc/dualhead/monte_carlo.hpp``, one header for the CPU and the GPU):

1. an annihilation point: a voxel drawn with probability proportional to its activity (alias
   table), a uniform point inside it, plus an isotropic Gaussian positron range
   (``positron_range_fwhm_mm`` FWHM per Cartesian axis; common/emission.hpp, shared with FIRST);
2. the photon pair: the pair axis is isotropic; photon 1 heads for the upper head, photon 2 for the
   lower one along the opposite direction turned by the acollinearity (two independent Gaussian
   angles, ``acollinearity_fwhm_deg`` FWHM). Pair axes that cannot reach the upper crystals from the
   activity's bounding box (a conservative band) are counted without being followed;
3. each photon through its head's front layer, the real finite array of ``n_y x n_z`` crystals
   (``crystal_mm`` wide at ``pitch_mm``, ``depth_mm`` deep; the gaps do not attenuate): its path in
   crystal material to the first interaction is ``Exp(mu_per_mm)``, walked along the photon's line
   through the crystals it crosses (penetration into neighbours included). The crystal where the
   path runs out detects it; a photon whose line crosses no crystal, or that leaves the layer (back
   face, or beyond the side of the array) first, is lost. Photoelectric and Compton interactions are
   not distinguished; no energy window, no inter-crystal scatter, no object attenuation or scatter;
4. a coincidence ("true") when both photons are detected, binned as LOR ``(c_u, c_l)`` (upper,
   lower crystal) in the class-major layout of :mod:`directpet.dualhead.geometry`.

An annihilation point at or beyond a front face (only within a few positron-range sigma of the
outermost planes) is counted as lost.

Random numbers and reproducibility
----------------------------------
Decay ``d`` draws from Philox4x32-10 with counter ``(d, block)`` and the seed as key, and every
operation of a decay is IEEE-754 basic arithmetic (log, sin and cos from
``csrc/common/portable_math.hpp``) compiled without floating-point contraction. So the histogram of
decays ``0 .. n - 1`` depends only on ``(seed, n)``: not on ``threads``, ``chunk`` or the backend --
the CPU and the GPU produce *identical* histograms. Counts are float32 additions of 1, exact while a
LOR holds fewer than 2**24 counts.

Stopping at a number of trues
-----------------------------
``simulate(..., n_trues=N)`` simulates decays ``0, 1, 2, ...`` until exactly ``N`` trues are
detected: the result is the histogram of decays ``0 .. D - 1`` where decay ``D - 1`` gave the N-th
true, and ``stats.n_decays = D`` (so ``simulate(..., stats.n_decays, seed=stats.seed)`` reproduces it). It
runs chunks sized from the sensitivity measured so far, leaving a margin of four standard deviations;
the last chunk reaches (usually overshoots) the target, and the decays after the N-th true are located
by bisection (count-only runs) and taken back out (a run adding -1). The extra work is about twice the
last chunk, a small fraction of the total.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional

from .. import _core
from .._backend import cuda_module
from .._checks import expect_instance, integer, require_memory
from .._device import decay_count, host_volume, monte_carlo_options
from .._monte_carlo import CountsBuffer, MonteCarloStatsBase, reporting
from ..sim.random import seed_from_rng
from .geometry import DualHeadScanner

# Decays per call (between progress updates and Ctrl-C checks): a fraction of a second each.
DEFAULT_CHUNK_CPU = 1 << 22   # ~1-2 s at 2-4e6 decays/s on two cores (full size)
DEFAULT_CHUNK_CUDA = 1 << 28  # well under a second on an H100-class GPU
MAX_TRACE = 1 << 24           # trace_events' cap (the binding's)
TRACE_BYTES = 250             # a traced decay: its record (C++) and its rows of the returned arrays (116 B)
#: outcome codes of :func:`trace_events` (``outcome``) and photon fates (``fate``)
OUTCOMES = tuple(_core.DUALHEAD_MC_OUTCOMES)   # out_of_band, missed, not_detected, true
FATES = tuple(_core.DUALHEAD_MC_FATES)         # no_crystal, passed, interacted


@dataclass(frozen=True)
class MonteCarloStats(MonteCarloStatsBase):
    """What happened to the decays of one :func:`simulate` call.

    ``n_decays`` counts ALL decays of the activity (decays ``0 .. n_decays - 1``, isotropic pair
    axes); those out of the direction band (``n_decays - n_in_band``) cannot reach the upper crystals
    and are counted without being followed. Classes are nested: ``n_trues <= n_crossed <= n_in_band
    <= n_decays``; ``n_trues`` equals the sum of the returned counts.
    """

    n_trues: int           # detected coincidences (both photons detected): the histogram's sum
    n_crossed: int         # both photons' lines cross crystals of their heads

    @property
    def sensitivity(self) -> float:
        """Detected coincidences per decay (absolute coincidence sensitivity of the activity)."""
        return self.n_trues / self.n_decays


def scanner_parameters(scanner: DualHeadScanner) -> dict:
    """The compiled Monte Carlo's scanner dict (DualHeadScanner's fields)."""
    return scanner.to_dict()


def simulate(scanner: DualHeadScanner, activity, n_decays: Optional[int] = None, *, n_trues: Optional[int] = None,
             seed=None, backend: str = "auto", progress=False, threads: Optional[int] = None,
             chunk: Optional[int] = None, xp=None):
    """Simulate decays of ``activity`` and histogram the detected coincidences by LOR.

    Parameters
    ----------
    scanner : the :class:`DualHeadScanner` (its physics: ``mu_per_mm``, ``positron_range_fwhm_mm``,
        ``acollinearity_fwhm_deg``; 0 turns a blur off).
    activity : float32 C-contiguous image of ``scanner.grid.shape`` ``(n_z D, n_y D, n_planes)``
        ``[v_z, v_y, p]``, finite, >= 0, not all zero (NumPy, or CuPy: copied to the host for the alias
        table). Decays are drawn in proportion to voxel activity, uniformly inside the voxel.
    n_decays : ALL decays of the activity to simulate (numbers ``0 .. n_decays - 1``, isotropic pair
        axes; those out of the direction band are counted in ``stats.n_in_band`` without being
        followed); give this or ``n_trues``.
    n_trues : instead of n_decays: simulate until exactly this many coincidences are detected (see the
        module docstring); ``stats.n_decays`` then says how many decays that took.
    seed : an integer in [0, 2**64), a NumPy Generator (one draw) or None (fresh entropy); the result
        depends only on (``stats.seed``, ``stats.n_decays``).
    backend : ``'auto'`` (CUDA when usable, else CPU), ``'cpu'`` or ``'cuda'`` (an error without a GPU).
    progress : False (quiet), True (a tqdm bar) or a callable called after every chunk with the decays
        done so far (with ``n_trues``: the trues so far).
    threads : CPU threads (None: OpenMP's default); does not change the result.
    chunk : decays per compiled call, between progress updates / Ctrl-C checks (None: 2**22 on the
        CPU, 2**28 on the GPU, at most 2**31 there); does not change the result.
    xp : the array module of the result: None (NumPy on the CPU; on CUDA, CuPy when importable, else
        NumPy), ``numpy`` or ``cupy``.

    Returns
    -------
    (counts, stats): float32 ``(scanner.n_lors,)`` coincidences per LOR in the layout of
    :mod:`directpet.dualhead.geometry`, and a :class:`MonteCarloStats`.
    """
    expect_instance(scanner, DualHeadScanner, "scanner")
    host_activity = host_volume(activity, "activity", scanner.grid.shape)
    if (n_decays is None) == (n_trues is None):
        raise ValueError("n_decays, n_trues: give exactly one of them")
    if n_decays is not None:
        n_decays = decay_count("n_decays", n_decays)
    else:
        n_trues = decay_count("n_trues", n_trues)
    seed, nthreads, chosen, want_cupy, chunk = monte_carlo_options(
        seed, threads, backend, xp, chunk, "chunk", (DEFAULT_CHUNK_CPU, DEFAULT_CHUNK_CUDA))

    engine = _core.DualHeadMonteCarlo(scanner_parameters(scanner), host_activity)
    t0 = time.perf_counter()
    counts = CountsBuffer(scanner.n_lors, chosen, want_cupy)
    runner = _backend_runner(engine, chosen, seed, nthreads, counts)
    with reporting(progress, n_decays if n_decays is not None else n_trues,
                   unit="decay" if n_decays is not None else "true", desc="dual-head Monte Carlo") as update:
        driver = _Driver(runner, chunk, update, counting_trues=n_decays is None)
        if n_decays is not None:
            totals = driver.run(0, n_decays, +1)
        else:
            totals = driver.run_to_trues(n_trues)
    band = engine.band
    stats = MonteCarloStats(n_decays=int(totals["n_decays"]), n_in_band=int(totals["n_in_band"]),
                            band_fraction=float(band["band_fraction"]), backend=chosen, seed=seed,
                            seconds=time.perf_counter() - t0, n_trues=int(totals["n_trues"]),
                            n_crossed=int(totals["n_crossed"]))
    return counts.result(), stats


def trace_events(scanner: DualHeadScanner, activity, n_decays: int, *, seed=None, first: int = 0) -> dict:
    """Decays ``first .. first + n_decays - 1`` of :func:`simulate`'s stream with their histories
    (CPU; the same decays as the histogram of the same seed; ``seed`` as in :func:`simulate`). At
    most 2**24 decays.

    Returns a dict of NumPy arrays, one row per decay (mm, unit vectors):
    ``source`` (n, 3) the point drawn in the voxel, ``point`` (n, 3) the annihilation point (after the
    positron range), as (x, y, z); ``direction1`` / ``direction2`` (n, 3) the directions of travel of
    photon 1 (toward the upper head) and photon 2 (toward the lower head); ``path`` (n, 2) each
    photon's drawn crystal path to its first interaction; ``fate`` (n, 2) index into :data:`FATES`
    (``no_crystal`` also for photons not followed); ``hit1`` / ``hit2`` (n, 3) interaction points;
    ``crystal1`` / ``crystal2`` (n, 2) ``(c_y, c_z)`` of the detecting crystals (-1 when not
    detected); ``outcome`` index into :data:`OUTCOMES`; ``index`` the LOR (-1 unless a true).
    Decays out of the band have only their outcome (zeros elsewhere).
    """
    expect_instance(scanner, DualHeadScanner, "scanner")
    host_activity = host_volume(activity, "activity", scanner.grid.shape)
    n_decays = decay_count("n_decays", n_decays)
    if n_decays > MAX_TRACE:
        raise ValueError(f"n_decays: at most 2**24 decays can be traced, got {n_decays}")
    require_memory("n_decays", TRACE_BYTES * n_decays, f"tracing {n_decays} decays")
    first = integer("first", first, lo=0)
    engine = _core.DualHeadMonteCarlo(scanner_parameters(scanner), host_activity)
    return engine.trace(seed_from_rng(seed, "seed"), int(first), n_decays)


def direction_band(scanner: DualHeadScanner, activity) -> dict:
    """Photon 1's direction band for this activity: ``band_fraction``, ``sin_elevation_max``,
    ``psi_max_rad``, ``reach_mm`` (gap / 2 minus the source box's largest x, positron range
    included) and ``full_hemisphere`` (the box reaches a front face: no restriction)."""
    expect_instance(scanner, DualHeadScanner, "scanner")
    return dict(_core.DualHeadMonteCarlo(scanner_parameters(scanner), host_volume(activity, "activity", scanner.grid.shape)).band)


# --- running ranges of decays ------------------------------------------------------------------

class _Driver:
    """Runs decay ranges in chunks through ``runner(first, count, weight, histogram)`` (histogram False:
    count only) and keeps the counters of what is in the histogram (``totals``)."""

    KEYS = ("n_decays", "n_in_band", "n_crossed", "n_trues")

    def __init__(self, runner, chunk, callback, counting_trues):
        self.runner, self.chunk, self.callback = runner, chunk, callback
        self.counting_trues = counting_trues
        self.totals = dict.fromkeys(self.KEYS, 0)

    def run(self, first, count, weight, histogram=True):
        """Decays first .. first + count - 1, adding weight (+1 / -1) per true to the histogram (or only
        counting); returns this range's counters and adds them (times weight) to ``totals``."""
        part = dict.fromkeys(self.KEYS, 0)
        done = 0
        while done < count:
            m = min(self.chunk, count - done)
            c = self.runner(first + done, m, weight, histogram)
            for k in self.KEYS:
                part[k] += int(c[k])
                if histogram:
                    self.totals[k] += weight * int(c[k])
            if histogram and self.callback is not None:
                self.callback(self.totals["n_trues"] if self.counting_trues else self.totals["n_decays"])
            done += m
        return part

    def run_to_trues(self, n_trues):
        """Decays 0, 1, ... until exactly n_trues trues are in the histogram."""
        first = 0
        while self.totals["n_trues"] < n_trues:
            left = n_trues - self.totals["n_trues"]
            m = self._next_count(left)
            got = self.run(first, m, +1)["n_trues"]
            if got >= left:  # reached: find the decay of the n_trues-th true, take the later ones back out
                end = self._bisect(first, first + m, left)
                if end < first + m:
                    back = self.run(end, first + m - end, -1)["n_trues"]
                    if back != got - left:
                        raise RuntimeError(f"internal error: took back {back} trues, expected {got - left}")
                first = end
                break
            first += m
        if self.totals["n_trues"] != n_trues or self.totals["n_decays"] != first:
            raise RuntimeError(f"internal error: stopped at {self.totals['n_trues']} trues after "
                               f"{self.totals['n_decays']} decays (wanted {n_trues}, at decay {first})")
        return self.totals

    def _next_count(self, left):
        """Decays for the next step. With a well-measured rate: all ``left`` trues expected but four
        standard deviations (counting noise and the rate's uncertainty), the full expectation once
        ``left`` <= 100 (that step usually overshoots: :meth:`_bisect`). Else: ``left`` decays (a decay
        gives at most one true, so never too many), or double the decays so far while that is expected
        to give at most half of ``left``."""
        decays, trues = self.totals["n_decays"], self.totals["n_trues"]
        if trues == 0:
            return max(left, 2 * decays)
        rate = trues / decays
        if left <= 100:
            return max(1, math.ceil(left / rate))
        target = left - 4.0 * math.sqrt(left + left * left / trues)
        if target >= 0.5 * left:
            return max(1, math.ceil(target / rate))
        return max(left, min(2 * decays, math.floor(0.5 * left / rate)))

    def _bisect(self, first, end, needed):
        """The smallest e in (first, end] with ``needed`` trues in decays first .. e - 1 (decay e - 1 gave the
        last of them), given at least ``needed`` in first .. end - 1 (count-only runs over halving ranges:
        about end - first decays in all)."""
        lo, hi, below = first, end, 0   # trues(first, lo) = below < needed <= trues(first, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            c = self.run(lo, mid - lo, +1, histogram=False)["n_trues"]
            if below + c >= needed:
                hi = mid
            else:
                lo, below = mid, below + c
        return hi


def _backend_runner(engine, backend, seed, threads, counts: CountsBuffer):
    """runner(first, count, weight, histogram) -> counters dict, adding to ``counts`` (histogram True)."""
    if backend == "cpu":
        def run_cpu(first, count, weight, histogram):
            return engine.run_cpu(seed, first, count, float(weight), counts.host if histogram else None, threads)

        return run_cpu

    def run_cuda(first, count, weight, histogram):
        return cuda_module().dualhead_mc_run_cuda(engine, seed, first, count, float(weight), counts.ptr if histogram else 0,
                                          counts.stream)

    return run_cuda


__all__ = ["FATES", "MonteCarloStats", "OUTCOMES", "direction_band", "scanner_parameters", "simulate",
           "trace_events"]
