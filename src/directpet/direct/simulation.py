"""Compiled event simulation fused with deposition: C++/OpenMP and CUDA (science.md 1.2, 1.12).

:func:`simulate_deposit` draws true coincidences exactly as :func:`~directpet.direct.events.simulate_events`
does (annihilation points from the analytic phantom, isotropic directions in the tilt band,
detector exits, water attenuation, perpendicular LOR blur, TOF time difference) and adds each one,
at its most likely point ``r_hat = m + (c/2) dt u12``, to its view's histo-image, the way
:func:`~directpet.direct.deposition.deposit` (``mode='nearest'``) does. No event list is formed,
so the per-event cost is a few dozen nanoseconds of arithmetic on the CPU and far less on a GPU.

It agrees with the NumPy/CuPy path **in distribution**, not event by event (different random
streams). The C++ per-event code is one header shared by both backends
(``csrc/direct/events_worker.hpp``).

Random streams and reproducibility
----------------------------------
The work is split into a fixed number of random streams (256 on the CPU, 2^20 on the GPU, fewer
for small ``n_events``), each with a quota of accepted events that it meets exactly, so the result
holds exactly ``n_events`` accepted trues and depends only on ``seed`` and the backend: not on
``threads``, the GPU model or the scheduling. Both backends use the Philox4x32-10 generator keyed
by the seed: on the CPU a SIMD implementation with counters ``(decay, stream)`` (checked against
the Random123 known answers), on the GPU curand's, one subsequence per stream. Their bit streams
differ, so CPU and GPU results agree in distribution, not event by event. Counts are added as
float32 1.0, exact in any order while a voxel holds fewer than 2^24 counts.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from .. import _core
from .._backend import resolve_backend
from .._checks import check_threads, check_volume, device_pointer, expect_instance, flag, is_device_array
from .._progress import progress_callback
from ..geometry import ImageGrid
from ..sim.phantoms import AnalyticPhantom, CylinderSource, PhantomInfo, PointSource, SphereSource
from ..sim.random import check_seed
from ._validate import event_count
from .histo_data import require_stack_memory
from .scanner import CylindricalScanner
from .views import ViewSet

_KINDS = {CylinderSource: 0, SphereSource: 1, PointSource: 2}


def phantom_components(phantom) -> np.ndarray:
    """The compiled phantom table (n, 8) float64 of a PhantomInfo or AnalyticPhantom.

    Rows are ``(kind, x, y, z, radius, length, concentration, activity)`` in mm and activity per
    mm^3 (kind 0 cylinder about z centred at z, 1 sphere, 2 point source with total ``activity``).
    """
    analytic = _analytic(phantom)
    rows = []
    for s in analytic.sources:
        if isinstance(s, CylinderSource):
            rows.append((0, 0.0, 0.0, s.centre_z_mm, s.radius_mm, s.length_mm, s.concentration, s.activity))
        elif isinstance(s, SphereSource):
            rows.append((1, *s.centre_mm, s.radius_mm, 0.0, s.concentration, s.activity))
        else:
            rows.append((2, *s.position_mm, 0.0, 0.0, 0.0, s.activity))
    return np.ascontiguousarray(np.array(rows, dtype=np.float64).reshape(-1, 8))


def scanner_parameters(scanner: CylindricalScanner, phantom, *, attenuation: bool = True,
                       blur: bool = True, tof: bool = True) -> dict:
    """The compiled scanner/physics parameters (a switched-off effect gets 0; the switches are
    True or False)."""
    attenuation, blur, tof = flag("attenuation", attenuation), flag("blur", blur), flag("tof", tof)
    water = _analytic(phantom).attenuation if attenuation else None
    return {
        "radius_mm": float(scanner.radius_mm),
        "half_length_mm": float(scanner.half_length_mm),
        "sin_theta_max": float(np.sin(scanner.theta_max)),
        "blur_sigma_mm": float(scanner.intrinsic_sigma_mm) if blur else 0.0,
        "tof_sigma_ps": float(scanner.tof_sigma_ps) if tof else 0.0,
        "water_radius_mm": 0.0 if water is None else float(water.radius_mm),
        "water_half_length_mm": 0.0 if water is None else 0.5 * float(water.length_mm),
        "mu_per_mm": 0.0 if water is None else float(water.mu_per_mm),
    }


def simulate_deposit(phantom_info, scanner: CylindricalScanner, grid: ImageGrid, viewset: ViewSet,
                     n_events: int, *, backend: str = "auto", seed: int = 0, out=None,
                     threads: Optional[int] = None, attenuation: bool = True, blur: bool = True,
                     tof: bool = True, progress=False):
    """Simulate ``n_events`` true coincidences and deposit them into per-view histo-images.

    Parameters
    ----------
    phantom_info : a :class:`PhantomInfo` or :class:`AnalyticPhantom` (at most 64 sources).
    scanner : the :class:`CylindricalScanner`.
    grid, viewset : the histo-image lattice (:class:`ImageGrid`) and the views (:class:`ViewSet`).
    n_events : number of **accepted** true coincidences (like ``simulate_events(count='prompts')``
        without randoms); exactly this many are simulated and either deposited or counted as
        outside the views / the grid.
    backend : ``'auto'`` (where ``out`` lives; without ``out`` CUDA when usable, else CPU),
        ``'cpu'`` or ``'cuda'`` (an error without a usable GPU).
    seed : non-negative integer < 2**64; the result is reproducible for a given seed and backend.
    out : optional float32 C-contiguous array (n_views, nz, ny, nx) to **add** into: NumPy, or a
        CuPy / PyTorch CUDA array (used in place on its current stream). A NumPy ``out`` with
        ``backend='cuda'`` is staged through the GPU.
    threads : CPU threads (None: OpenMP's default); does not change the result.
    attenuation, blur, tof : switch the water attenuation, the detector blur and the timing noise.
    progress : show a tqdm bar (True), or a callable called with the number of accepted events
        so far; either way Ctrl-C interrupts between rounds (a few per second).

    Returns
    -------
    (histos, stats): histos (n_views, nz, ny, nx) float32 counts (``out`` if given; NumPy on the
    CPU, CuPy on the GPU when CuPy is installed, else NumPy); stats a dict with ``n_decays``
    (annihilations drawn in the tilt band, as ``EventBatch.n_decays``), ``n_trues`` (= n_events),
    ``n_deposited``, ``n_outside_views``, ``n_outside_grid``, ``backend``, ``seed``, ``n_streams``
    and ``seconds`` (wall time of the simulation).
    """
    expect_instance(scanner, CylindricalScanner, "scanner")
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    components = phantom_components(phantom_info)
    if components.shape[0] > 64:
        raise ValueError(f"phantom_info: the compiled path takes at most 64 sources, got {components.shape[0]}")
    params = scanner_parameters(scanner, phantom_info, attenuation=attenuation, blur=blur, tof=tof)
    n_events = event_count("n_events", n_events)
    seed = check_seed("seed", seed)
    nthreads = check_threads(threads)
    shape = (len(viewset),) + grid.shape
    backend = _backend_for(backend, out)
    if out is not None:
        _check_accumulator(out, shape)
    else:
        require_stack_memory("grid", len(viewset), grid)
    geometry = (list(grid.shape), list(grid.voxel_size), viewset.n_phi, viewset.n_theta,
                float(viewset.theta_max))

    bar, callback = progress_callback(progress, n_events, unit="ev", desc="simulating + depositing")
    t0 = time.perf_counter()
    try:
        if backend == "cpu":
            histos = np.zeros(shape, np.float32) if out is None else out
            counts = _core.direct_simulate_deposit_cpu(components, params, *geometry, n_events, seed,
                                                   histos, nthreads, callback)
            n_streams = min(n_events, int(_core.DIRECT_SIM_CPU_STREAMS))
        else:
            histos, counts = _simulate_cuda(components, params, geometry, n_events, seed, out, shape,
                                            callback)
            n_streams = min(n_events, int(_core.DIRECT_SIM_GPU_STREAMS))
    finally:
        if bar is not None:
            bar.close()
    stats = {k: int(v) for k, v in counts.items()}
    stats.update(backend=backend, seed=seed, n_streams=n_streams, seconds=time.perf_counter() - t0)
    return histos, stats


def _simulate_cuda(components, params, geometry, n_events, seed, out, shape, callback):
    from .._device import stream_of

    target = out
    if target is None:
        try:
            import cupy  # optional: results stay on the GPU when CuPy is there
        except ImportError:
            target = np.zeros(shape, np.float32)
        else:
            target = cupy.zeros(shape, dtype=cupy.float32)
    if is_device_array(target):
        counts = _core.direct_simulate_deposit_cuda(components, params, *geometry, n_events, seed,
                                                device_pointer(target), stream_of(target), callback)
        return target, counts
    # NumPy: stage through a directpet-owned device buffer (no CuPy needed).
    buf = _core.DeviceBuffer(int(target.nbytes))
    buf.upload(target)
    counts = _core.direct_simulate_deposit_cuda(components, params, *geometry, n_events, seed, buf.ptr, 0,
                                            callback)
    buf.download(target)
    return target, counts


def _backend_for(backend: str, out) -> str:
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {type(backend).__name__}")
    if out is not None and backend == "auto":
        backend = "cuda" if is_device_array(out) else "cpu"
    chosen = resolve_backend(backend)
    if chosen == "cpu" and out is not None and is_device_array(out):
        raise TypeError("out: a CUDA array needs backend='cuda' (or 'auto')")
    if out is not None and not is_device_array(out) and not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy.ndarray or a CUDA array, got {type(out).__name__}")
    return chosen



def _check_accumulator(out, shape) -> None:
    """The caller's ``out``, which counts are added into: float32 of ``shape``, C-contiguous,
    finite and >= 0 (a NaN or a negative count there would pass into the result)."""
    check_volume(out, "out", shape)
    if type(out).__module__.split(".")[0] in ("numpy", "cupy", "torch") and bool((out < 0).any()):
        raise ValueError("out: contains negative values; it holds the counts (>= 0) that the events are added to")


def _analytic(phantom) -> AnalyticPhantom:
    analytic = phantom.analytic if isinstance(phantom, PhantomInfo) else phantom
    if not isinstance(analytic, AnalyticPhantom):
        raise TypeError(f"phantom_info: expected a PhantomInfo or AnalyticPhantom, got {type(phantom).__name__}")
    return analytic


__all__ = ["phantom_components", "scanner_parameters", "simulate_deposit"]
