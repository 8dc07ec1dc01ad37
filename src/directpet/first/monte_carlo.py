"""Event-level Monte Carlo of the rotating dual-head scanner (FIRST, science.md 2.6).

:func:`simulate_sinogram` draws decays from an activity image and follows them through physics and
the detector geometry of :class:`~directpet.first.RotatingScanner` alone -- no Super-LOR table, no
projector -- so that reconstructing its sinograms with the analytic model is an honest test (no
inverse crime). Per decay (``csrc/first/monte_carlo.hpp``, one header for the CPU and the GPU):

1. an annihilation point: a voxel drawn with probability proportional to its activity (alias
   table), a uniform point inside it, plus an isotropic Gaussian positron range;
2. a gantry angle ``g ~ U[0, pi)`` (continuous rotation over the 180 degree scan);
3. the photon pair: photon 1 toward head B isotropic inside a band of directions that holds every
   direction able to reach head B from the activity's bounding box (so no coincidence is lost, and
   the band's share of the sphere gives the equivalent number of isotropic decays), photon 2
   opposite, turned by the non-collinearity (two Gaussian angles);
4. each photon through its head: it must enter the front face, interacts after an exponential path
   (depth of interaction; deeper than the crystal: not detected), must interact inside the head
   (else it left through a side face), optional intrinsic blur, then the crystal under the point.
   The head is one continuous slab: the gaps between crystals are not modelled;
5. the detected position: the crystal row's centre axially; transaxially the interaction point
   plus a uniform offset over the crystal width (the model's virtual heads need radial bins of a
   quarter pitch, which only sub-crystal sampling fills; the offset gives each LOR end the
   crystal-width aperture of a real crystal pair, while DOI, obliquity, non-collinearity and
   positron range stay physical);
6. binning with the conventions of :mod:`directpet.first.geometry`: the LOR joins the detections at
   the mean interaction depth ``E0 = depth_moments(0)[0]`` behind each front face; angle bin
   ``round(phi / (pi / n_angles))``, radial bin ``round(s / radial_bin + (n_radial - 1) / 2)``,
   rows ``(r1, r2)`` of heads A and B, folded to ``phi`` in ``[0, pi)``.

Random numbers and reproducibility
----------------------------------
Decay ``d`` draws from Philox4x32-10 with counter ``(d, block)`` and the seed as key, on both
backends, so the sinogram depends only on ``(seed, n_decays)``: not on ``threads``,
``chunk_decays``, the GPU or the scheduling. The CPU and CUDA backends simulate the *same* decays;
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
from .._checks import expect_instance, require_memory
from .._device import decay_count, host_volume, monte_carlo_options
from .._progress import progress_callback
from ..geometry import ImageGrid
from ..sim.random import check_seed
from .geometry import RotatingScanner

# Decays per chunk (between progress updates and Ctrl-C checks): a fraction of a second each.
DEFAULT_CHUNK_CPU = 1 << 22   # ~0.5 s at ~8e6 decays/s on two cores
DEFAULT_CHUNK_CUDA = 1 << 27  # well under a second on an H100-class GPU
MAX_TRACE = 1 << 26           # trace_decays' cap (the binding's)
TRACE_BYTES = 100             # a traced decay's record and returned arrays


@dataclass(frozen=True)
class MonteCarloStats:
    """What happened to the decays of one :func:`simulate_sinogram` call.

    Every decay has its photon pair's axis inside the direction band (``band_fraction`` of all
    directions); the classes are nested: binned + outside_radial = detected_both <= entered_both
    <= n_decays.
    """

    n_decays: int              # decays simulated
    n_isotropic_decays: float  # equivalent isotropic decays: n_decays / band_fraction (absolute sensitivity)
    band_fraction: float       # share of all decays whose pair axis lies in the band
    n_entered_both: int        # both photons entered their head's front face
    n_detected_both: int       # both photons interacted in their head (coincidences)
    n_binned: int              # added to the sinogram
    n_outside_radial: int      # coincidences whose radial bin lies outside [0, n_radial)
    sin_elevation_max: float   # the band: |sin(elevation)| <= this
    psi_max_rad: float         # the band: |in-plane angle to the head normal| <= this
    backend: str
    seed: int
    seconds: float

    @property
    def sensitivity(self) -> float:
        """Binned coincidences per isotropic decay."""
        return self.n_binned / self.n_isotropic_decays


def scanner_parameters(scanner: RotatingScanner) -> dict:
    """The compiled Monte Carlo's scanner dict: RotatingScanner's fields plus ``mean_depth_mm``."""
    d = scanner.to_dict()
    d["mean_depth_mm"] = float(scanner.depth_moments(0.0)[0])
    return d


def simulate_sinogram(scanner: RotatingScanner, activity, grid: ImageGrid, n_decays: int, *, seed: int = 0,
                      backend: str = "auto", threads: Optional[int] = None,
                      chunk_decays: Optional[int] = None, progress=True, xp=None):
    """Simulate ``n_decays`` decays of ``activity`` and bin the coincidences into a sinogram.

    Parameters
    ----------
    scanner : the :class:`RotatingScanner` (its physics switches: ``positron_range_fwhm_mm``,
        ``noncollinearity_fwhm_deg``, ``intrinsic_fwhm_mm``; 0 turns one off).
    activity : float32 C-contiguous array ``grid.shape`` ``(nz, ny, nx)``, finite, >= 0, not all zero,
        its non-zero voxels between the heads (NumPy, or CuPy: copied to the host for the alias table).
    grid : the activity's :class:`~directpet.geometry.ImageGrid` (any lattice; z is the scanner axis).
    n_decays : decays to simulate (all with the pair axis in the direction band; see the stats).
    seed : integer in [0, 2**64); the result depends only on (seed, n_decays).
    backend : ``'auto'`` (CUDA when usable, else CPU), ``'cpu'`` or ``'cuda'`` (an error without a GPU).
    threads : CPU threads (None: OpenMP's default); does not change the result.
    chunk_decays : decays between progress updates / Ctrl-C checks (None: 2**22 on the CPU, 2**27
        on the GPU, at most 2**31 there); does not change the result.
    progress : a tqdm bar (True), nothing (False), or a callable called with the decays done so far.
    xp : the array module of the result: None (NumPy on the CPU; on CUDA, CuPy when importable, else
        NumPy), ``numpy`` or ``cupy``.

    Returns
    -------
    (sinogram, stats): float32 counts ``(n_angles, n_rows, n_rows, n_radial)`` indexed
    ``[a, r1, r2, rho]``, and a :class:`MonteCarloStats`.
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    expect_instance(grid, ImageGrid, "grid")
    host_activity = host_volume(activity, "activity", grid.shape)
    n_decays = decay_count("n_decays", n_decays)
    seed, nthreads, chosen, want_cupy, chunk = monte_carlo_options(
        seed, threads, backend, xp, chunk_decays, "chunk_decays", (DEFAULT_CHUNK_CPU, DEFAULT_CHUNK_CUDA))
    params = scanner_parameters(scanner)
    voxel = list(grid.voxel_size)

    bar, callback = progress_callback(progress, n_decays, unit="decay", desc="FIRST Monte Carlo")
    t0 = time.perf_counter()
    try:
        if chosen == "cpu":
            sino = np.zeros(scanner.sinogram_shape, np.float32)
            counts = _core.first_mc_simulate_cpu(params, host_activity, voxel, n_decays, seed, sino, chunk,
                                                 nthreads, callback)
            if want_cupy:
                import cupy  # requested through xp, so it is installed

                sino = cupy.asarray(sino)
        else:
            sino, counts = _simulate_cuda(params, host_activity, voxel, n_decays, seed, chunk, callback,
                                          scanner.sinogram_shape, want_cupy)
    finally:
        if bar is not None:
            bar.close()
    stats = MonteCarloStats(
        n_decays=int(counts["n_decays"]),
        n_isotropic_decays=int(counts["n_decays"]) / float(counts["band_fraction"]),
        band_fraction=float(counts["band_fraction"]),
        n_entered_both=int(counts["n_entered_both"]),
        n_detected_both=int(counts["n_detected_both"]),
        n_binned=int(counts["n_binned"]),
        n_outside_radial=int(counts["n_outside_radial"]),
        sin_elevation_max=float(counts["sin_elevation_max"]),
        psi_max_rad=float(counts["psi_max_rad"]),
        backend=chosen, seed=seed, seconds=time.perf_counter() - t0)
    return sino, stats


def trace_decays(scanner: RotatingScanner, activity, grid: ImageGrid, n_decays: int, *, seed: int = 0) -> dict:
    """Decays ``0 .. n_decays - 1`` of :func:`simulate_sinogram`'s stream with their histories (CPU).

    The same decays as the sinogram of the same seed. Returns a dict of NumPy arrays: ``point``
    (n, 3) annihilation point (x, y, z) in mm after the positron range; ``direction`` (n, 3) photon 1
    in the gantry frame; ``gantry`` (rad); ``y_a``, ``y_b`` detected transaxial positions (mm, gantry
    frame) and ``row_a``, ``row_b`` crystal rows (-1: not detected) in heads A and B; ``outcome``
    (0 missed a front face, 1 not detected, 2 outside the radial range, 3 binned); ``index`` flat
    sinogram index (-1 unless binned). At most 2**26 decays: each traced decay takes about
    100 bytes (its record and the returned arrays), 6-7 GB at the cap.
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    expect_instance(grid, ImageGrid, "grid")
    host_activity = host_volume(activity, "activity", grid.shape)
    n_decays = decay_count("n_decays", n_decays)
    if n_decays > MAX_TRACE:
        raise ValueError(f"n_decays: at most 2**26 decays can be traced, got {n_decays}")
    require_memory("n_decays", TRACE_BYTES * n_decays, f"tracing {n_decays} decays")
    return _core.first_mc_trace_cpu(scanner_parameters(scanner), host_activity, list(grid.voxel_size), n_decays,
                                    check_seed("seed", seed))


def _simulate_cuda(params, activity, voxel, n_decays, seed, chunk, callback, shape, want_cupy):
    if want_cupy:
        import cupy  # importable: checked by wants_cupy

        from .._device import stream_of

        sino = cupy.zeros(shape, dtype=cupy.float32)
        counts = _core.first_mc_simulate_cuda(params, activity, voxel, n_decays, seed, int(sino.data.ptr), chunk,
                                              stream_of(sino), callback)
        return sino, counts
    # NumPy: a directpet-owned device buffer, zeroed by uploading zeros (no CuPy needed).
    sino = np.zeros(shape, np.float32)
    buf = _core.DeviceBuffer(int(sino.nbytes))
    buf.upload(sino)
    counts = _core.first_mc_simulate_cuda(params, activity, voxel, n_decays, seed, buf.ptr, chunk, 0, callback)
    buf.download(sino)
    return sino, counts


__all__ = ["MonteCarloStats", "scanner_parameters", "simulate_sinogram", "trace_decays"]
