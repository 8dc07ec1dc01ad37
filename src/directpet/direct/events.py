"""List-mode TOF event simulation for an idealised cylindrical scanner (science.md 1.12).

For every true coincidence:

1. an annihilation point r is drawn from the analytic phantom (proportional to activity);
2. a direction u is drawn isotropically **within the acceptance band** |theta| <= theta_max: u_z is
   uniform in [-sin theta_max, sin theta_max] and the azimuth uniform in [0, 2 pi). This is exactly an
   isotropic direction conditioned on being inside the band (Archimedes), so nothing is wasted on
   directions that could never be accepted; ``EventBatch.n_decays`` counts these draws, i.e. decays
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
   ``r_hat = m + (c/2) dt u12`` with ``u12 = (p2 - p1)/|p2 - p1|`` (science.md 1.2).

Randoms (optional) have endpoints uniform on the detector surface, are kept when their tilt is in
the acceptance and the LOR crosses the transaxial FOV (``scanner.fov_diameter_mm``), and get a time
difference that puts their most likely point uniformly on the LOR segment inside the FOV. Randoms
are flat in TOF, so this is the in-FOV part of a uniform coincidence window.

Everything is vectorised over a chunk of events with the array namespace ``xp`` (NumPy or CuPy);
chunks are yielded one by one so hundreds of millions of events can be streamed into
:func:`~directpet.direct.deposition.deposit` without being kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .._checks import expect_instance, flag, integer, positive_int, real_number, require_memory
from ..sim.lines import cylinder_interval
from ..sim.phantoms import AnalyticPhantom, PhantomInfo
from ..sim.random import make_rng
from ._validate import check_weights, event_count
from .kernels import C_MM_PER_PS
from .scanner import CylindricalScanner, _exits

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
    n_decays : number of annihilations drawn (within the direction band) to produce the trues.
    weights : (n,) float32 per-event weights deposited instead of 1 (None: 1), e.g. an external
        scatter estimate given as weighted list-mode events.
    """

    p1: object
    p2: object
    dt_ps: object
    is_random: object = None
    n_decays: int = 0
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
        self.n_decays = integer("n_decays", self.n_decays, lo=0)

    def __len__(self) -> int:
        return int(self.dt_ps.shape[0])

    @property
    def n_randoms(self) -> int:
        return 0 if self.is_random is None else int(self.is_random.sum())

    @property
    def n_trues(self) -> int:
        return len(self) - self.n_randoms

    def most_likely_points(self):
        """r_hat = m + (c/2) dt u12: (n, 3) float64 (x, y, z) mm."""
        xp = _xp_of(self.dt_ps)
        p1 = self.p1.astype(xp.float64)
        p2 = self.p2.astype(xp.float64)
        d = p2 - p1
        length = xp.sqrt(xp.sum(d * d, axis=1, keepdims=True))
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
                   xp.concatenate([b.dt_ps for b in batches]), flags, sum(b.n_decays for b in batches), weights)


def simulate_events(phantom, scanner: CylindricalScanner, n_events: int, *, count: str = "prompts",
                    chunk_size: int = 10_000_000, randoms_fraction: float = 0.0,
                    attenuation: bool = True, blur: bool = True, tof: bool = True, rng=None, xp=np,
                    progress: bool = True) -> Iterator[EventBatch]:
    """Yield :class:`EventBatch` chunks of simulated TOF list-mode data.

    Parameters
    ----------
    phantom : a :class:`PhantomInfo` or :class:`AnalyticPhantom` (activity + optional water cylinder).
    scanner : the :class:`CylindricalScanner`.
    n_events : with ``count='prompts'`` (default) the number of accepted coincidences to produce
        (trues + randoms); with ``count='decays'`` the number of annihilations to draw within the
        direction band (the accepted number is then random).
    chunk_size : most decays drawn per chunk (memory: about 300 bytes per decay in float64
        temporaries, so 10 M needs about 3 GB).
    randoms_fraction : fraction of the prompts that are randoms, in [0, 1).
    attenuation, blur, tof : switch the water attenuation, the detector blur and the timing noise.
    rng : seed or Generator (NumPy, or CuPy when ``xp`` is CuPy).
    xp : array namespace (numpy or cupy); the batches live there.
    progress : show a tqdm bar of produced events.
    """
    from tqdm.auto import tqdm

    analytic = phantom.analytic if isinstance(phantom, PhantomInfo) else phantom
    if not isinstance(analytic, AnalyticPhantom):
        raise TypeError(f"phantom: expected a PhantomInfo or AnalyticPhantom, got {type(phantom).__name__}")
    if not isinstance(scanner, CylindricalScanner):
        raise TypeError(f"scanner: expected a CylindricalScanner, got {type(scanner).__name__}")
    if count not in ("prompts", "decays"):
        raise ValueError(f"count: expected 'prompts' or 'decays', got {count!r}")
    n_events, chunk_size = event_count("n_events", n_events), positive_int("chunk_size", chunk_size)
    attenuation, blur, tof, progress = (flag(k, v) for k, v in (("attenuation", attenuation), ("blur", blur),
                                                                ("tof", tof), ("progress", progress)))
    randoms_fraction = check_randoms_fraction(randoms_fraction)
    # a chunk draws up to about 4.4 x the prompts it still needs (first acceptance guess 25 %)
    largest = min(chunk_size, int(4.4 * n_events) + 1000)
    require_memory("chunk_size", _BYTES_PER_DECAY * largest, f"a chunk of {largest} decays")
    gen = make_rng(rng, xp)
    host = np.random.default_rng(int(gen.integers(0, 2**62)))   # scalar draws (Poisson counts)
    water = analytic.attenuation if attenuation else None

    done = 0                                    # prompts yielded ('prompts') or decays drawn ('decays')
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
                [trues, simulate_randoms(scanner, n_r, rng=gen, xp=xp)])
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


def simulate_randoms(scanner: CylindricalScanner, n: int, *, rng=None, xp=np) -> EventBatch:
    """n random coincidences: endpoints uniform on the detector, accepted tilt, MLP uniform in-FOV.

    Candidates whose tilt is outside the acceptance, whose LOR misses the transaxial FOV, or whose
    in-FOV time difference exceeds half the coincidence window are redrawn.
    """
    expect_instance(scanner, CylindricalScanner, "scanner")
    n = integer("n", n, lo=0)
    # candidates are drawn 2 x at a time (at least 1024), each with a few float64 (n, 3) temporaries
    require_memory("n", _BYTES_PER_DECAY * max(2 * n, 1024), f"{n} random coincidences drawn at once")
    gen = make_rng(rng, xp)
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
    """m isotropic unit vectors (m, 3) conditioned on |theta| <= theta_max (u_z uniform)."""
    a = gen.random((2, m))
    uz = np.sin(theta_max) * (2.0 * a[0] - 1.0)
    phi = 2.0 * np.pi * a[1]
    st = xp.sqrt(1.0 - uz * uz)
    return xp.stack([st * xp.cos(phi), st * xp.sin(phi), uz], axis=1)


def _truncate(batch: EventBatch, k: int, gen, xp) -> EventBatch:
    """k events of a batch chosen at random (so trues and randoms are cut evenly).

    ``n_decays`` is scaled by the fraction of trues kept.
    """
    n = len(batch)
    if n <= k:
        return batch
    keep = xp.argsort(gen.random(n))[:k]
    flags = None if batch.is_random is None else batch.is_random[keep]
    out = EventBatch(batch.p1[keep], batch.p2[keep], batch.dt_ps[keep], flags, batch.n_decays,
                     None if batch.weights is None else batch.weights[keep])
    if batch.n_trues:
        out.n_decays = int(round(batch.n_decays * out.n_trues / batch.n_trues))
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
