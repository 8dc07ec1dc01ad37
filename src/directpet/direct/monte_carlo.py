"""DIRECT Monte Carlo: TOF events of an analytic phantom in the idealised cylindrical scanner, as
list-mode batches (:func:`simulate_events`, NumPy / CuPy) or deposited straight into per-view
histo-images by the compiled C++ / CUDA path (:func:`simulate`) (:ref:`conventions-direct`, :ref:`physics-data`).

List-mode events
----------------
For every true coincidence:

1. an annihilation point r is drawn from the analytic phantom (proportional to activity);
2. a direction u is drawn isotropically **within the acceptance band** ``|theta| <= theta_max``: u_z is
   uniform in [-sin theta_max, sin theta_max] and the azimuth uniform in [0, 2 pi). This is exactly an
   isotropic direction conditioned on being inside the band (Archimedes), so nothing is wasted on
   directions that could never be accepted; ``EventBatch.n_in_band`` counts these draws, i.e. decays
   whose LOR points into the band (a fraction ``sin(theta_max)`` of all decays);
3. both photons travel to the detector cylinder: p1 = r + t_plus u, p2 = r - t_minus u; the pair is
   kept only if both hit within the axial extent;
4. attenuation: kept with probability exp(-mu * chord), the chord of the *whole* LOR through the
   water cylinder (both photons must escape);
5. detector blur: the whole LOR is shifted by a 2D Gaussian offset perpendicular to u
   (``intrinsic_fwhm_mm``) and p1, p2 are re-intersected with the detector (an event whose shifted
   LOR leaves the axial extent is dropped);
6. timing: ``dt = t1 - t2 = (|r' - p1| - |r' - p2|) / c`` plus Gaussian noise of FWHM
   ``tof_fwhm_ps`` (r' the shifted annihilation point), so that the most likely point is
   ``r_hat = m + (c/2) dt u12`` with ``u12 = (p2 - p1)/|p2 - p1|`` (:ref:`conventions-direct`).

Randoms (optional) have endpoints uniform on the detector surface, are kept when their tilt is in
the acceptance and the LOR crosses the transaxial FOV (``scanner.fov_diameter_mm``), and get a time
difference that puts their most likely point uniformly on the LOR segment inside the FOV. Randoms
are flat in TOF, so this is the in-FOV part of a uniform coincidence window.

Everything is vectorised over a chunk of events with the array namespace ``xp`` (NumPy or CuPy);
chunks are yielded one by one so hundreds of millions of events can be streamed into
:func:`~directpet.direct.deposition.deposit` without being kept.

Compiled simulation fused with deposition
-----------------------------------------
:func:`simulate` draws true coincidences exactly as :func:`simulate_events` does (annihilation
points from the analytic phantom, isotropic directions in the tilt band, detector exits, water
attenuation, perpendicular LOR blur, TOF time difference) and adds each one, at its most likely
point ``r_hat = m + (c/2) dt u12``, to its view's histo-image, the way
:func:`~directpet.direct.deposition.deposit` (``mode='nearest'``) does. No event list is formed,
so the per-event cost is a few dozen nanoseconds of arithmetic on the CPU and far less on a GPU.
It agrees with the NumPy/CuPy path **in distribution**, not event by event (different random
streams). The C++ per-event code is one header shared by both backends
(``csrc/direct/events_worker.hpp``).

The work is split into a fixed number of random streams (256 on the CPU, 2^20 on the GPU, fewer
for small ``n_trues``), each with a quota of accepted events that it meets exactly, so the result
holds exactly ``n_trues`` accepted trues and depends only on ``seed`` and the backend: not on
``threads``, the GPU model or the scheduling. Both backends use the Philox4x32-10 generator keyed
by the seed: on the CPU a SIMD implementation with counters ``(decay, stream)`` (checked against
the Random123 known answers), on the GPU curand's, one subsequence per stream. Their bit streams
differ, so CPU and GPU results agree in distribution, not event by event. Counts are added as
float32 1.0, exact in any order while a voxel holds fewer than 2^24 counts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np

from .. import _core
from .._backend import cuda_module
from .._backend import resolve_backend
from .._checks import (check_threads, check_volume, device_pointer, expect_instance, flag, integer, is_device_array,
                       positive_int, real_number, require_memory)
from .._monte_carlo import MonteCarloStatsBase, reporting
from ..geometry import ImageGrid
from ..sim.lines import cylinder_interval
from ..sim.phantoms import AnalyticPhantom, CylinderSource, PhantomInfo, SphereSource
from ..sim.random import make_rng, seed_from_rng
from ._validate import check_weights, event_count
from .data import require_stack_memory
from .geometry import CylindricalScanner, ViewSet, _exits
from .model import C_MM_PER_PS

#: Bytes of float64 temporaries per decay drawn in a chunk (measured: about 300).
_BYTES_PER_DECAY = 300


@dataclass
class EventBatch:
    """A chunk of list-mode TOF coincidences.

    Attributes
    ----------
    p1, p2 : (n, 3) float32 detection points (x, y, z) mm.
    dt_ps : (n,) float32 arrival-time difference t1 - t2 (ps).
    is_random : (n,) bool, True for random coincidences (None if unknown).
    n_in_band : number of annihilations drawn within the direction band (a fraction
        ``sin(theta_max)`` of all decays) to produce the trues.
    weights : (n,) float32 per-event weights deposited instead of 1 (None: 1), e.g. an external
        scatter estimate given as weighted list-mode events.
    """

    p1: object
    p2: object
    dt_ps: object
    is_random: object = None
    n_in_band: int = 0
    weights: object = None

    def __post_init__(self):
        """Shapes, kinds and one length (no pass over the positions and times: batches are made in
        hot loops; finite values are checked where the events are used, :func:`~directpet.direct.deposit`);
        weights, when given, are checked finite and >= 0 here (and again by deposit: they may be set
        after the batch was made)."""
        n = None
        for name, tail, kinds in (("p1", (3,), "fiu"), ("p2", (3,), "fiu"), ("dt_ps", (), "fiu"),
                                  ("is_random", (), "b"), ("weights", (), "fiu")):
            a = getattr(self, name)
            if a is None and name in ("is_random", "weights"):
                continue
            want = "(n, 3)" if tail else "(n,)"
            if not hasattr(a, "shape") or not hasattr(a, "dtype"):
                raise TypeError(f"{name}: expected an {want} array, got {type(a).__name__}")
            if len(a.shape) != 1 + len(tail) or tuple(a.shape[1:]) != tail:
                raise ValueError(f"{name}: expected an {want} array (one row per event), got shape {tuple(a.shape)}")
            if np.dtype(a.dtype).kind not in kinds:
                raise TypeError(f"{name}: expected {'booleans' if kinds == 'b' else 'real numbers'}, "
                                f"got dtype {a.dtype}")
            if n is None:
                n, first = int(a.shape[0]), name
            elif int(a.shape[0]) != n:
                raise ValueError(f"{name}: has {int(a.shape[0])} events but {first} has {n}; p1, p2, dt_ps (and "
                                 "is_random, weights) must hold one row per event")
        if self.weights is not None:
            check_weights(self.weights, n, _xp_of(self.dt_ps))
        self.n_in_band = integer("n_in_band", self.n_in_band, lo=0)

    def __len__(self) -> int:
        return int(self.dt_ps.shape[0])

    @property
    def n_randoms(self) -> int:
        """Random coincidences in the batch (0 when ``is_random`` is None)."""
        return 0 if self.is_random is None else int(self.is_random.sum())

    @property
    def n_trues(self) -> int:
        """True coincidences in the batch (all events when ``is_random`` is None)."""
        return len(self) - self.n_randoms

    def most_likely_points(self):
        """r_hat = m + (c/2) dt u12: (n, 3) float64 (x, y, z) mm."""
        xp = _xp_of(self.dt_ps)
        p1 = self.p1.astype(xp.float64)
        p2 = self.p2.astype(xp.float64)
        d = p2 - p1
        # summed in the order bin_canonical sums its norm (and the compiled list-mode deposition both):
        # the same bits on every path
        length = xp.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])[:, None]
        u12 = d / xp.where(length > 0, length, 1.0)    # a zero-length LOR has no direction: its midpoint
        return 0.5 * (p1 + p2) + (0.5 * C_MM_PER_PS) * self.dt_ps.astype(xp.float64)[:, None] * u12

    @classmethod
    def concatenate(cls, batches) -> "EventBatch":
        """One batch of the events of a non-empty sequence of batches, in order."""
        if isinstance(batches, (str, bytes, EventBatch)) or not hasattr(batches, "__iter__"):
            raise TypeError(f"batches: expected a sequence of EventBatch, got {type(batches).__name__}")
        batches = list(batches)
        if not batches:
            raise ValueError("batches: expected at least one EventBatch, got none")
        for b in batches:
            if not isinstance(b, EventBatch):
                raise TypeError(f"batches: expected EventBatch items, got {type(b).__name__}")
        xp = _xp_of(batches[0].dt_ps)
        flags = None
        if all(b.is_random is not None for b in batches):
            flags = xp.concatenate([b.is_random for b in batches])
        weights = None
        if any(b.weights is not None for b in batches):
            weights = xp.concatenate([xp.ones(len(b), xp.float32) if b.weights is None else b.weights
                                      for b in batches])
        return cls(xp.concatenate([b.p1 for b in batches]), xp.concatenate([b.p2 for b in batches]),
                   xp.concatenate([b.dt_ps for b in batches]), flags, sum(b.n_in_band for b in batches), weights)


def simulate_events(scanner: CylindricalScanner, activity, n_events: int, *, seed=None, count: str = "prompts",
                    chunk_size: int = 10_000_000, randoms_fraction: float = 0.0,
                    attenuation: bool = True, blur: bool = True, tof: bool = True, xp=np,
                    progress: bool = True) -> Iterator[EventBatch]:
    """Yield :class:`EventBatch` chunks of simulated TOF list-mode data.

    Parameters
    ----------
    scanner : the :class:`CylindricalScanner`.
    activity : a :class:`PhantomInfo` or :class:`AnalyticPhantom` (activity + optional water cylinder).
    n_events : with ``count='prompts'`` (default) the number of accepted coincidences to produce
        (trues + randoms); with ``count='in_band'`` the number of annihilations to draw within the
        direction band ``|theta| <= theta_max`` (a fraction ``sin(theta_max)`` of all decays; the
        accepted number is then random).
    seed : int, Generator or None (fresh entropy); NumPy, or CuPy when ``xp`` is CuPy.
    chunk_size : most decays drawn per chunk (memory: about 300 bytes per decay in float64
        temporaries, so 10 M needs about 3 GB).
    randoms_fraction : fraction of the prompts that are randoms, in [0, 1).
    attenuation, blur, tof : switch the water attenuation, the detector blur and the timing noise.
    xp : array namespace (numpy or cupy); the batches live there.
    progress : show a tqdm bar of produced events.
    """
    from tqdm.auto import tqdm

    expect_instance(scanner, CylindricalScanner, "scanner")
    analytic = _analytic(activity)
    if count not in ("prompts", "in_band"):
        raise ValueError(f"count: expected 'prompts' or 'in_band', got {count!r}")
    n_events, chunk_size = event_count("n_events", n_events), positive_int("chunk_size", chunk_size)
    attenuation, blur, tof, progress = (flag(k, v) for k, v in (("attenuation", attenuation), ("blur", blur),
                                                                ("tof", tof), ("progress", progress)))
    randoms_fraction = check_randoms_fraction(randoms_fraction)
    # a chunk draws up to about 4.4 x the prompts it still needs (first acceptance guess 25 %)
    largest = min(chunk_size, int(4.4 * n_events) + 1000)
    require_memory("chunk_size", _BYTES_PER_DECAY * largest, f"a chunk of {largest} decays")
    gen = make_rng(seed, xp, "seed")
    host = np.random.default_rng(int(gen.integers(0, 2**62)))   # scalar draws (Poisson counts)
    water = analytic.attenuation if attenuation else None

    done = 0                                    # prompts yielded ('prompts') or decays drawn ('in_band')
    drawn, accepted = 0, 0                      # for the acceptance estimate in 'prompts' mode
    with tqdm(total=n_events, disable=not progress, unit="ev", unit_scale=True,
              desc="simulating " + count) as bar:
        while done < n_events:
            remaining = n_events - done
            if count == "prompts":
                # Draw about as many decays as the remaining prompts need (acceptance estimated
                # from what has been drawn so far; a first guess of 25 %), capped by chunk_size.
                acc = accepted / drawn if accepted > 0 else 0.25
                m = min(chunk_size, int(remaining * (1.0 - randoms_fraction) / acc * 1.1) + 1000)
            else:
                m = min(chunk_size, remaining)
            trues = _simulate_trues(analytic, water, scanner, m, gen, xp, blur, tof)
            drawn, accepted = drawn + m, accepted + len(trues)
            if accepted == 0 and drawn >= 10 * chunk_size:
                raise RuntimeError(f"simulate_events: none of {drawn} decays gave an accepted coincidence; "
                                   "is the activity inside the detector cylinder?")
            n_r = 0
            if randoms_fraction > 0:
                # Randoms in proportion to the trues of this chunk, randomised by Poisson.
                n_r = int(host.poisson(len(trues) * randoms_fraction / (1.0 - randoms_fraction)))
            batch = trues if n_r == 0 else EventBatch.concatenate(
                [trues, simulate_randoms(scanner, n_r, seed=gen, xp=xp)])
            if count == "prompts":
                batch = _truncate(batch, remaining, gen, xp)
                done += len(batch)
                bar.update(len(batch))
            else:
                done += m
                bar.update(m)
            if len(batch):
                yield batch


def _simulate_trues(analytic, water, scanner, m, gen, xp, blur, tof) -> EventBatch:
    r = analytic.sample(m, gen, xp)                                       # (m, 3) float64
    x, y, z = r[:, 0], r[:, 1], r[:, 2]
    u = _band_directions(m, scanner.theta_max, gen, xp)
    ux, uy, uz = u[:, 0], u[:, 1], u[:, 2]

    _, _, keep = _exits(x, y, z, ux, uy, uz, scanner, xp)
    if water is not None:
        keep &= gen.random(m) < water.survival(x, y, z, ux, uy, uz, xp)
    x, y, z, ux, uy, uz = (a[keep] for a in (x, y, z, ux, uy, uz))
    n = int(x.shape[0])

    if blur and scanner.intrinsic_fwhm_mm > 0:
        # Perpendicular axes: e1 transaxial (the LOR-radial axis), e2 = u x e1.
        ct = xp.sqrt(ux * ux + uy * uy)
        e1x, e1y = -uy / ct, ux / ct
        e2x, e2y, e2z = -uz * e1y, uz * e1x, ux * e1y - uy * e1x
        g = gen.standard_normal((2, n)) * scanner.intrinsic_sigma_mm
        x = x + g[0] * e1x + g[1] * e2x
        y = y + g[0] * e1y + g[1] * e2y
        z = z + g[1] * e2z
    t_plus, t_minus, ok = _exits(x, y, z, ux, uy, uz, scanner, xp)
    p1 = xp.stack([x + t_plus * ux, y + t_plus * uy, z + t_plus * uz], axis=1)
    p2 = xp.stack([x - t_minus * ux, y - t_minus * uy, z - t_minus * uz], axis=1)
    dt = (t_plus - t_minus) / C_MM_PER_PS        # t1 - t2: photon 1 travels t_plus, photon 2 t_minus
    if tof:
        dt = dt + gen.standard_normal(n) * scanner.tof_sigma_ps
    p1, p2, dt = p1[ok], p2[ok], dt[ok]
    return EventBatch(p1.astype(xp.float32), p2.astype(xp.float32), dt.astype(xp.float32),
                      xp.zeros(dt.shape, dtype=bool), m)


def simulate_randoms(scanner: CylindricalScanner, n: int, *, seed=None, xp=np) -> EventBatch:
    """n random coincidences: endpoints uniform on the detector, accepted tilt, MLP uniform in-FOV.

    Candidates whose tilt is outside the acceptance, whose LOR misses the transaxial FOV, or whose
    in-FOV time difference exceeds half the coincidence window are redrawn. ``seed``: int,
    Generator or None (fresh entropy), of ``xp`` (numpy or cupy).
    """
    expect_instance(scanner, CylindricalScanner, "scanner")
    n = integer("n", n, lo=0)
    # candidates are drawn 2 x at a time (at least 1024), each with a few float64 (n, 3) temporaries
    require_memory("n", _BYTES_PER_DECAY * max(2 * n, 1024), f"{n} random coincidences drawn at once")
    gen = make_rng(seed, xp, "seed")
    parts, have = [], 0
    sin_max = np.sin(scanner.theta_max)
    R, h, Rf = scanner.radius_mm, scanner.half_length_mm, scanner.fov_radius_mm
    while have < n:
        m = max(2 * (n - have), 1024)
        a = gen.random((4, m))
        phi1, phi2 = 2 * np.pi * a[0], 2 * np.pi * a[1]
        p1 = xp.stack([R * xp.cos(phi1), R * xp.sin(phi1), h * (2 * a[2] - 1)], axis=1)
        p2 = xp.stack([R * xp.cos(phi2), R * xp.sin(phi2), h * (2 * a[3] - 1)], axis=1)
        d = p2 - p1
        length = xp.sqrt(xp.sum(d * d, axis=1))
        ok = (length > 0) & (xp.abs(d[:, 2]) <= sin_max * length)
        length = xp.where(ok, length, 1.0)
        u = d / length[:, None]
        # In-FOV segment of the line p1 + t u (t in mm along the LOR).
        t0, t1 = cylinder_interval(p1[:, 0], p1[:, 1], p1[:, 2], u[:, 0], u[:, 1], u[:, 2], Rf, None, xp)
        ok &= t1 > t0
        t = t0 + (t1 - t0) * gen.random(m)
        dt = 2.0 * (t - 0.5 * length) / C_MM_PER_PS      # r_hat = m + (c/2) dt u12
        ok &= xp.abs(dt) <= 0.5 * scanner.coincidence_window_ps
        parts.append((p1[ok], p2[ok], dt[ok]))
        have += int(ok.sum())
    if not parts:
        empty = xp.zeros((0, 3), dtype=xp.float32)
        return EventBatch(empty, empty, xp.zeros(0, dtype=xp.float32), xp.zeros(0, dtype=bool), 0)
    p1 = xp.concatenate([p[0] for p in parts])[:n]
    p2 = xp.concatenate([p[1] for p in parts])[:n]
    dt = xp.concatenate([p[2] for p in parts])[:n]
    return EventBatch(p1.astype(xp.float32), p2.astype(xp.float32), dt.astype(xp.float32),
                      xp.ones(dt.shape, dtype=bool), 0)


def _band_directions(m, theta_max, gen, xp):
    """m isotropic unit vectors (m, 3) conditioned on ``|theta| <= theta_max`` (u_z uniform)."""
    a = gen.random((2, m))
    uz = np.sin(theta_max) * (2.0 * a[0] - 1.0)
    phi = 2.0 * np.pi * a[1]
    st = xp.sqrt(1.0 - uz * uz)
    return xp.stack([st * xp.cos(phi), st * xp.sin(phi), uz], axis=1)


def _truncate(batch: EventBatch, k: int, gen, xp) -> EventBatch:
    """k events of a batch chosen at random (so trues and randoms are cut evenly).

    ``n_in_band`` is scaled by the fraction of trues kept.
    """
    n = len(batch)
    if n <= k:
        return batch
    keep = xp.argsort(gen.random(n))[:k]
    flags = None if batch.is_random is None else batch.is_random[keep]
    out = EventBatch(batch.p1[keep], batch.p2[keep], batch.dt_ps[keep], flags, batch.n_in_band,
                     None if batch.weights is None else batch.weights[keep])
    if batch.n_trues:
        out.n_in_band = int(round(batch.n_in_band * out.n_trues / batch.n_trues))
    return out


def _xp_of(a):
    from .._checks import array_module

    return array_module(a)


def check_randoms_fraction(randoms_fraction) -> float:
    """The fraction of prompts that are randoms: a float in [0, 1), else an error naming it."""
    f = real_number("randoms_fraction", randoms_fraction)
    if not (0.0 <= f < 1.0):
        raise ValueError(f"randoms_fraction: expected a value in [0, 1), got {randoms_fraction!r}")
    return f


# --- the compiled simulation fused with deposition ---------------------------------------------------------

def phantom_components(activity) -> np.ndarray:
    """The compiled phantom table (n, 8) float64 of a PhantomInfo or AnalyticPhantom.

    Rows are ``(kind, x, y, z, radius, length, concentration, activity)`` in mm and activity per
    mm^3 (kind 0 cylinder about z centred at z, 1 sphere, 2 point source with total ``activity``).
    """
    analytic = _analytic(activity)
    rows = []
    for s in analytic.sources:
        if isinstance(s, CylinderSource):
            rows.append((0, 0.0, 0.0, s.centre_z_mm, s.radius_mm, s.length_mm, s.concentration, s.activity))
        elif isinstance(s, SphereSource):
            rows.append((1, *s.centre_mm, s.radius_mm, 0.0, s.concentration, s.activity))
        else:
            rows.append((2, *s.position_mm, 0.0, 0.0, 0.0, s.activity))
    return np.ascontiguousarray(np.array(rows, dtype=np.float64).reshape(-1, 8))


def scanner_parameters(scanner: CylindricalScanner, activity, *, attenuation: bool = True,
                       blur: bool = True, tof: bool = True) -> dict:
    """The compiled scanner/physics parameters (a switched-off effect gets 0; the switches are
    True or False); the water cylinder is ``activity``'s."""
    attenuation, blur, tof = flag("attenuation", attenuation), flag("blur", blur), flag("tof", tof)
    water = _analytic(activity).attenuation if attenuation else None
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


@dataclass(frozen=True)
class MonteCarloStats(MonteCarloStatsBase):
    """What one :func:`simulate` call simulated.

    The engine follows only the decays whose pair axis lies in the tilt band ``|theta| <= theta_max``
    (``n_in_band``; ``band_fraction = sin(theta_max)`` of all directions), the only ones that can
    give an accepted coincidence, until ``n_trues`` of them gave one. ``n_decays`` is ALL decays of
    the activity that this takes: ``n_in_band`` plus the decays outside the band that come with
    them, whose number is drawn (from ``seed``) as NegativeBinomial(n_in_band, band_fraction) --
    exactly its distribution, since those decays have no other effect. Classes are nested:
    ``n_deposited + n_outside_views + n_outside_grid = n_trues <= n_in_band <= n_decays``.
    """

    n_trues: int           # accepted true coincidences (the n_trues asked for)
    n_deposited: int       # added to a histo-image (the counts' sum)
    n_outside_views: int   # tilt outside the views' acceptance
    n_outside_grid: int    # most likely point outside the grid
    n_streams: int         # random streams the work was split into

    @property
    def sensitivity(self) -> float:
        """Accepted true coincidences per decay (absolute sensitivity for the activity)."""
        return self.n_trues / self.n_decays


def simulate(scanner: CylindricalScanner, activity, n_decays=None, *, n_trues: Optional[int] = None, seed=None,
             backend: str = "auto", progress=False, grid: ImageGrid, viewset: ViewSet, out=None,
             threads: Optional[int] = None, attenuation: bool = True, blur: bool = True, tof: bool = True):
    """Simulate ``n_trues`` true coincidences of ``activity`` and deposit them into per-view
    histo-images (the compiled C++/OpenMP or CUDA engine; see the module docstring).

    Parameters
    ----------
    scanner : the :class:`CylindricalScanner`.
    activity : a :class:`PhantomInfo` or :class:`AnalyticPhantom` (at most 64 sources; its water
        cylinder attenuates).
    n_decays : not available in DIRECT: the engine stops at a number of accepted (detected) true
        coincidences, not of decays (each random stream meets a quota of accepted events), so a
        number of decays cannot be honoured exactly; giving it is a ValueError. ``stats.n_decays``
        says how many decays (of all directions) the trues took.
    n_trues : number of **accepted** true coincidences (the pair reaches the detector within its
        axial extent and the tilt band, survives the water); exactly this many are simulated and
        either deposited or counted as outside the views / the grid. Required.
    seed : int in [0, 2**64), a NumPy Generator (one draw) or None (fresh entropy); the result is
        reproducible for a given integer seed and backend (``stats.seed`` records it).
    backend : ``'auto'`` (where ``out`` lives; without ``out`` CUDA when usable, else CPU),
        ``'cpu'`` or ``'cuda'`` (an error without a usable GPU).
    progress : False, True (a tqdm bar) or a callable called with the number of accepted events
        so far; either way Ctrl-C interrupts between rounds (a few per second).
    grid, viewset : the histo-image lattice (:class:`ImageGrid`) and the views (:class:`ViewSet`).
    out : optional float32 C-contiguous array (n_views, nz, ny, nx) to **add** into: NumPy, or a
        CuPy / PyTorch CUDA array (used in place on its current stream). A NumPy ``out`` with
        ``backend='cuda'`` is staged through the GPU.
    threads : CPU threads (None: OpenMP's default); does not change the result.
    attenuation, blur, tof : switch the water attenuation, the detector blur and the timing noise.

    Returns
    -------
    (counts, stats): counts (n_views, nz, ny, nx) float32 (``out`` if given; NumPy on the CPU,
    CuPy on the GPU when CuPy is installed, else NumPy); stats a :class:`MonteCarloStats`.
    """
    expect_instance(scanner, CylindricalScanner, "scanner")
    components = phantom_components(activity)
    if n_decays is not None:
        raise ValueError("n_decays: DIRECT's simulation counts detected true coincidences, not decays (its random "
                         "streams each stop at a quota of accepted events), so it cannot stop at a number of "
                         "decays; pass n_trues (stats.n_decays then says how many decays that took)")
    if n_trues is None:
        raise ValueError("n_trues: required: the number of accepted true coincidences to simulate")
    n_trues = event_count("n_trues", n_trues)
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    if components.shape[0] > 64:
        raise ValueError(f"activity: the compiled path takes at most 64 sources, got {components.shape[0]}")
    params = scanner_parameters(scanner, activity, attenuation=attenuation, blur=blur, tof=tof)
    seed = seed_from_rng(seed, "seed")
    nthreads = check_threads(threads)
    shape = (len(viewset),) + grid.shape
    backend = _backend_for(backend, out)
    if out is not None:
        _check_accumulator(out, shape)
    else:
        require_stack_memory("grid", len(viewset), grid)
    geometry = (list(grid.shape), list(grid.voxel_size), viewset.n_phi, viewset.n_theta,
                float(viewset.theta_max))

    t0 = time.perf_counter()
    with reporting(progress, n_trues, unit="ev", desc="simulating + depositing") as callback:
        if backend == "cpu":
            counts = np.zeros(shape, np.float32) if out is None else out
            tally = _core.direct_simulate_deposit_cpu(components, params, *geometry, n_trues, seed, counts,
                                                      nthreads, callback)
            n_streams = min(n_trues, int(_core.DIRECT_SIM_CPU_STREAMS))
        else:
            counts, tally = _simulate_cuda(components, params, geometry, n_trues, seed, out, shape, callback)
            n_streams = min(n_trues, int(_core.DIRECT_SIM_GPU_STREAMS))
    seconds = time.perf_counter() - t0
    tally = {k: int(v) for k, v in tally.items()}
    band = float(np.sin(scanner.theta_max))
    n_in_band = tally["n_decays"]                  # the engine's decays are those drawn in the band
    outside = int(np.random.default_rng([seed, 3]).negative_binomial(n_in_band, band)) if band < 1 else 0
    stats = MonteCarloStats(n_decays=n_in_band + outside, n_in_band=n_in_band, band_fraction=band,
                            backend=backend, seed=seed, seconds=seconds, n_trues=tally["n_trues"],
                            n_deposited=tally["n_deposited"], n_outside_views=tally["n_outside_views"],
                            n_outside_grid=tally["n_outside_grid"], n_streams=n_streams)
    return counts, stats


def _simulate_cuda(components, params, geometry, n_trues, seed, out, shape, callback):
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
        tally = cuda_module().direct_simulate_deposit_cuda(components, params, *geometry, n_trues, seed,
                                                   device_pointer(target), stream_of(target), callback)
        return target, tally
    # NumPy: stage through a directpet-owned device buffer (no CuPy needed).
    buf = cuda_module().DeviceBuffer(int(target.nbytes))
    buf.upload(target)
    tally = cuda_module().direct_simulate_deposit_cuda(components, params, *geometry, n_trues, seed, buf.ptr, 0,
                                               callback)
    buf.download(target)
    return target, tally


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


def _analytic(activity) -> AnalyticPhantom:
    """The AnalyticPhantom of a PhantomInfo or AnalyticPhantom, else a TypeError naming ``activity``."""
    analytic = activity.analytic if isinstance(activity, PhantomInfo) else activity
    if not isinstance(analytic, AnalyticPhantom):
        raise TypeError(f"activity: expected a PhantomInfo or AnalyticPhantom, got {type(activity).__name__}")
    return analytic


__all__ = ["EventBatch", "MonteCarloStats", "check_randoms_fraction", "phantom_components", "scanner_parameters",
           "simulate", "simulate_events", "simulate_randoms"]
