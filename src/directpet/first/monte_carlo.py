"""Event-level Monte Carlo of the rotating dual-head scanner (FIRST, :ref:`physics-first`).

:func:`simulate` draws decays from an activity image and follows them through physics and the
detector geometry of :class:`~directpet.first.RotatingScanner` alone -- no Super-LOR table, no
projector -- so that reconstructing its sinograms with the analytic model is an honest test (no
inverse crime). Per decay (``csrc/first/monte_carlo.hpp``, one header for the CPU and the GPU):

1. an annihilation point: a voxel drawn with probability proportional to its activity (alias
   table), a uniform point inside it, plus an isotropic Gaussian positron range;
2. a gantry angle ``g ~ U[0, pi)`` (continuous rotation over the 180 degree scan);
3. the photon pair: photon 1 toward head B isotropic inside a band of directions that holds every
   direction able to reach head B from the activity's bounding box (no coincidence is lost), photon
   2 opposite, turned by the acollinearity (two Gaussian angles);
4. each photon through its head: it must enter the front face, interacts after an exponential path
   (depth of interaction; deeper than the crystal: not detected), must interact inside the head
   (else it left through a side face), optional intrinsic blur, then the crystal under the point.
   The head is one continuous slab: the gaps between crystals are not modelled;
5. the detected position: the crystal row's centre axially; transaxially the interaction point
   plus a uniform offset over the crystal width (the model's virtual heads need radial bins of a
   quarter pitch, which only sub-crystal sampling fills; the offset gives each LOR end the
   crystal-width aperture of a real crystal pair, while DOI, obliquity, acollinearity and
   positron range stay physical);
6. binning with the conventions of :mod:`directpet.first.geometry`: the LOR joins the detections at
   the mean interaction depth ``E0 = depth_moments(0)[0]`` behind each front face; angle bin
   ``round(phi / (pi / n_angles))``, radial bin ``round(s / radial_bin + (n_radial - 1) / 2)``,
   rows ``(r1, r2)`` of heads A and B, folded to ``phi`` in ``[0, pi)``.

All decays and the direction band
---------------------------------
``simulate(..., n_decays=N)`` simulates N decays of the activity with isotropic pair axes: ALL
decays, as the other families count them. Only a pair whose axis lies in the direction band (a
share ``band_fraction`` of all directions, :func:`direction_band`) can reach both heads, so only
those are followed: their number is drawn as ``n_in_band ~ Binomial(N, band_fraction)`` (from the
seed), and the compiled engine follows band decays ``0 .. n_in_band - 1``, each drawn uniformly inside
the band. The result has the distribution of N isotropic decays of which the out-of-band ones were
lost; ``stats.n_in_band`` says how many were followed and ``stats.sensitivity`` (binned
coincidences per decay) is an absolute sensitivity.

Random numbers and reproducibility
----------------------------------
Decay ``d`` draws from Philox4x32-10 with counter ``(d, block)`` and the seed as key, on both
backends (``d`` numbers the band decays), so the sinogram depends only on ``(seed, n_decays)``
(the band count is drawn from the seed too): not on ``threads``, ``chunk``, the GPU or the
scheduling. The CPU and CUDA backends simulate the *same* decays;
their sinograms differ only where a last-ulp difference between libm and CUDA math moves an event
across a bin edge. Counts are float32 additions of 1, exact in any order while a bin holds fewer
than 2**24 counts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import _core
from .._backend import cuda_module
from .._checks import expect_instance, require_memory
from .._device import decay_count, host_volume, monte_carlo_options
from .._monte_carlo import CountsBuffer, MonteCarloStatsBase, reporting
from ..geometry import ImageGrid
from ..sim.random import seed_from_rng
from .geometry import RotatingScanner

# Band decays per chunk (between progress updates and Ctrl-C checks): a fraction of a second each.
DEFAULT_CHUNK_CPU = 1 << 22   # ~0.5 s at ~8e6 decays/s on two cores
DEFAULT_CHUNK_CUDA = 1 << 27  # well under a second on an H100-class GPU
MAX_TRACE = 1 << 26           # trace_decays' cap (the binding's)
TRACE_BYTES = 100             # a traced decay's record and returned arrays
#: The stream of the band count: ``Binomial(n_decays, band_fraction)`` from ``SeedSequence((seed, BAND_STREAM))``.
BAND_STREAM = 0x46495253      # 'FIRS'


@dataclass(frozen=True)
class MonteCarloStats(MonteCarloStatsBase):
    """What happened to the decays of one :func:`simulate` call.

    ``n_decays`` counts ALL decays of the activity; ``n_in_band`` of them (``Binomial(n_decays,
    band_fraction)``) had their pair axis in the direction band and were followed. The classes are
    nested: ``n_binned + n_outside_radial = n_detected_both <= n_entered_both <= n_in_band <=
    n_decays``.
    """

    n_entered_both: int        # both photons entered their head's front face
    n_detected_both: int       # both photons interacted in their head (coincidences)
    n_binned: int              # added to the sinogram (its sum)
    n_outside_radial: int      # coincidences whose radial bin lies outside [0, n_radial)
    sin_elevation_max: float   # the band: |sin(elevation)| <= this
    psi_max_rad: float         # the band: |in-plane angle to the head normal| <= this

    @property
    def sensitivity(self) -> float:
        """Binned coincidences per decay (absolute sensitivity of the activity)."""
        return self.n_binned / self.n_decays


def scanner_parameters(scanner: RotatingScanner) -> dict:
    """The compiled Monte Carlo's scanner dict: RotatingScanner's fields plus ``mean_depth_mm``.

    The binding (``csrc/bindings/first_monte_carlo.cpp``) reads the acollinearity under its C++ name
    ``noncollinearity_fwhm_deg``."""
    d = scanner.to_dict()
    d["noncollinearity_fwhm_deg"] = d.pop("acollinearity_fwhm_deg")
    d["mean_depth_mm"] = float(scanner.depth_moments(0.0)[0])
    return d


def _source(scanner, activity, grid):
    """Checked ``(grid, host activity (float32 C-contiguous NumPy), voxel size list)``."""
    expect_instance(scanner, RotatingScanner, "scanner")
    grid = scanner.grid if grid is None else expect_instance(grid, ImageGrid, "grid")
    return grid, host_volume(activity, "activity", grid.shape), list(grid.voxel_size)


def _band(params: dict, host_activity, voxel) -> dict:
    """The compiled plan's direction band: one decay through a sinogram of one angle and one radial
    bin (the band depends on the heads and the activity's bounding box, not on the binning)."""
    params = dict(params, n_angles=1, n_radial=1)
    scratch = np.zeros((1, params["n_rows"], params["n_rows"], 1), np.float32)
    c = _core.first_mc_simulate_cpu(params, host_activity, voxel, 1, 0, scratch, 1, 1, None)
    return {k: float(c[k]) for k in ("band_fraction", "sin_elevation_max", "psi_max_rad", "source_radius_mm")}


def direction_band(scanner: RotatingScanner, activity, *, grid: Optional[ImageGrid] = None) -> dict:
    """Photon 1's direction band for this activity: ``band_fraction`` (its share of all directions),
    ``sin_elevation_max``, ``psi_max_rad`` (the band: ``|sin(elevation)| <=`` and ``|in-plane angle to
    the head normal| <=``) and ``source_radius_mm`` (the activity's largest distance from the axis,
    positron range included). ``activity`` and ``grid`` as in :func:`simulate`."""
    grid, host_activity, voxel = _source(scanner, activity, grid)
    return _band(scanner_parameters(scanner), host_activity, voxel)


def band_decays(n_decays: int, band_fraction: float, seed: int) -> int:
    """How many of ``n_decays`` isotropic decays have their pair axis in the band:
    ``Binomial(n_decays, band_fraction)`` drawn from ``SeedSequence((seed, BAND_STREAM))``."""
    rng = np.random.default_rng(np.random.SeedSequence((int(seed), BAND_STREAM)))
    return int(rng.binomial(int(n_decays), float(band_fraction)))


def simulate(scanner: RotatingScanner, activity, n_decays: Optional[int] = None, *, seed=None,
             backend: str = "auto", progress=False, grid: Optional[ImageGrid] = None,
             threads: Optional[int] = None, chunk: Optional[int] = None, xp=None):
    """Simulate ``n_decays`` decays of ``activity`` and bin the coincidences into a sinogram.

    Parameters
    ----------
    scanner : the :class:`RotatingScanner` (its physics switches: ``positron_range_fwhm_mm``,
        ``acollinearity_fwhm_deg``, ``intrinsic_fwhm_mm``; 0 turns one off).
    activity : float32 C-contiguous array ``grid.shape`` ``(nz, ny, nx)``, finite, >= 0, not all zero,
        its non-zero voxels between the heads (NumPy, or CuPy: copied to the host for the alias table).
    n_decays : ALL decays of the activity to simulate (isotropic pair axes), a positive integer. Only
        the ``stats.n_in_band ~ Binomial(n_decays, stats.band_fraction)`` of them whose pair axis can
        reach both heads are followed (see the module docstring); FIRST has no ``n_trues``.
    seed : an integer in [0, 2**64), a NumPy Generator (one draw) or None (fresh entropy); the result
        depends only on (``stats.seed``, n_decays).
    backend : ``'auto'`` (CUDA when usable, else CPU), ``'cpu'`` or ``'cuda'`` (an error without a GPU).
    progress : False (quiet), True (a tqdm bar) or a callable called after every chunk with the number
        of decays (of ``n_decays``) done so far.
    grid : the activity's :class:`~directpet.geometry.ImageGrid` (any lattice; z is the scanner axis);
        None: ``scanner.grid``.
    threads : CPU threads (None: OpenMP's default); does not change the result.
    chunk : band decays followed between progress updates / Ctrl-C checks (None: 2**22 on the CPU,
        2**27 on the GPU, at most 2**31 there); does not change the result.
    xp : the array module of the result: None (NumPy on the CPU; on CUDA, CuPy when importable, else
        NumPy), ``numpy`` or ``cupy``.

    Returns
    -------
    (counts, stats): float32 sinogram counts ``(n_angles, n_rows, n_rows, n_radial)`` indexed
    ``[a, r1, r2, rho]``, and a :class:`MonteCarloStats`.
    """
    grid, host_activity, voxel = _source(scanner, activity, grid)
    n_decays = decay_count("n_decays", n_decays)
    seed, nthreads, chosen, want_cupy, chunk = monte_carlo_options(
        seed, threads, backend, xp, chunk, "chunk", (DEFAULT_CHUNK_CPU, DEFAULT_CHUNK_CUDA))
    params = scanner_parameters(scanner)
    band = _band(params, host_activity, voxel)
    n_band = band_decays(n_decays, band["band_fraction"], seed)
    counts = CountsBuffer(scanner.sinogram_shape, chosen, want_cupy)
    c = dict.fromkeys(("n_entered_both", "n_detected_both", "n_binned", "n_outside_radial"), 0)
    t0 = time.perf_counter()
    with reporting(progress, n_decays, unit="decay", desc="FIRST Monte Carlo") as update:
        # the engine reports band decays done; progress speaks of all decays (the last report: n_decays)
        hook = None if update is None else (lambda done: update(n_decays if done >= n_band
                                                                else done * n_decays // n_band))
        if n_band == 0:
            if hook is not None:
                hook(0)
        elif chosen == "cpu":
            c = _core.first_mc_simulate_cpu(params, host_activity, voxel, n_band, seed, counts.host, chunk,
                                            nthreads, hook)
        else:
            c = cuda_module().first_mc_simulate_cuda(params, host_activity, voxel, n_band, seed, counts.ptr, chunk,
                                             counts.stream, hook)
    stats = MonteCarloStats(
        n_decays=n_decays, n_in_band=n_band, band_fraction=band["band_fraction"], backend=chosen, seed=seed,
        seconds=time.perf_counter() - t0,
        n_entered_both=int(c["n_entered_both"]), n_detected_both=int(c["n_detected_both"]),
        n_binned=int(c["n_binned"]), n_outside_radial=int(c["n_outside_radial"]),
        sin_elevation_max=band["sin_elevation_max"], psi_max_rad=band["psi_max_rad"])
    return counts.result(), stats


def trace_decays(scanner: RotatingScanner, activity, n_decays: int, *, seed=None,
                 grid: Optional[ImageGrid] = None) -> dict:
    """Band decays ``0 .. n_decays - 1`` of :func:`simulate`'s stream with their histories (CPU).

    Every traced decay has its pair axis in the direction band (the decays :func:`simulate` follows):
    ``simulate(scanner, activity, N, seed=s)`` bins the traced decays ``0 .. stats.n_in_band - 1`` of
    ``trace_decays(scanner, activity, stats.n_in_band, seed=stats.seed)``. ``seed`` and ``grid`` as
    in :func:`simulate`. Returns a dict of NumPy arrays: ``point`` (n, 3) annihilation point (x, y, z)
    in mm after the positron range; ``direction`` (n, 3) photon 1 in the gantry frame; ``gantry``
    (rad); ``y_a``, ``y_b`` detected transaxial positions (mm, gantry frame) and ``row_a``, ``row_b``
    crystal rows (-1: not detected) in heads A and B; ``outcome`` (0 missed a front face, 1 not
    detected, 2 outside the radial range, 3 binned); ``index`` flat sinogram index (-1 unless binned).
    At most 2**26 decays: each traced decay takes about 100 bytes (its record and the returned
    arrays), 6-7 GB at the cap.
    """
    grid, host_activity, voxel = _source(scanner, activity, grid)
    n_decays = decay_count("n_decays", n_decays)
    if n_decays > MAX_TRACE:
        raise ValueError(f"n_decays: at most 2**26 decays can be traced, got {n_decays}")
    require_memory("n_decays", TRACE_BYTES * n_decays, f"tracing {n_decays} decays")
    return _core.first_mc_trace_cpu(scanner_parameters(scanner), host_activity, voxel, n_decays,
                                    seed_from_rng(seed, "seed"))


__all__ = ["MonteCarloStats", "band_decays", "direction_band", "scanner_parameters", "simulate", "trace_decays"]
