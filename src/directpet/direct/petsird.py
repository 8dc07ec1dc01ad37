"""DIRECT list-mode through PETSIRD: the cylindrical scanner as crystal rings, events both ways.

* :func:`scanner_header` describes a :class:`~directpet.direct.CylindricalScanner` as a ring
  scanner: ``n_per_ring`` single-column modules around the axis, each a column of ``n_rings``
  crystals whose centres lie on the detector cylinder (its radius is the crystals' mid-depth), and
  TOF bins of ``tof_bin_ps`` across the coincidence window.
* :func:`events_to_coincidences` snaps each event's endpoints to the nearest crystals and its time
  difference to a TOF bin; :func:`coincidences_to_events` turns coincidences of any PETSIRD scanner
  back into :class:`~directpet.direct.EventBatch` (crystal centres, TOF-bin centres), on the GPU
  when asked.
* :func:`write_events`, :func:`read_events` and :func:`deposit_file` stream whole files; depositing
  a file gives the histo-images of the events as PETSIRD represents them (the same as depositing
  ``coincidences_to_events(events_to_coincidences(events))``).

TOF in PETSIRD is ``(t1 - t2) c / 2`` in mm with ``t1`` at ``detection_bins[0]``; here
``dt_ps = t1 - t2`` with ``t1`` at ``p1``, so ``dt_ps = 2 tof_mm / c``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterator, Optional

import numpy as np

from .._backend import resolve_backend
from .._checks import array_module, expect_instance, flag, integer, positive_int, real_number, require_memory
from .._device import wants_cupy
from ..geometry import ImageGrid
from ..io.petsird import (Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter, _petsird, nearest_elements,
                          single_type_header)
from .data import require_stack_memory
from .deposition import DepositStats, deposit
from .geometry import CylindricalScanner, ViewSet
from .model import C_MM_PER_PS
from .monte_carlo import EventBatch


def scanner_header(scanner: CylindricalScanner, *, crystal_mm: float = 4.0, depth_mm: float = 20.0,
                   tof_bin_ps: float = 25.0, crystal_efficiencies=None, model_name: str = "directpet cylinder"):
    """A ``petsird.Header`` describing ``scanner`` as rings of crystals.

    Parameters
    ----------
    scanner : the :class:`CylindricalScanner`.
    crystal_mm : target crystal pitch along the ring and the axis (mm); the ring count and the
        crystals per ring are rounded so the crystals tile the cylinder exactly.
    depth_mm : crystal depth (mm), centred on the detector radius.
    tof_bin_ps : TOF bin width (ps); an odd number of bins, centred on 0, covers the coincidence window.
    crystal_efficiencies : optional ``(n_per_ring, n_rings)`` detection efficiencies per crystal
        (module = ring position, element = ring), stored as PETSIRD detection-bin efficiencies.
    """
    expect_instance(scanner, CylindricalScanner, "scanner")
    for name, value in (("crystal_mm", crystal_mm), ("depth_mm", depth_mm), ("tof_bin_ps", tof_bin_ps)):
        real_number(name, value, positive=True)
    # the header holds one transform object per module and per element, and the scanner tables
    # built from it a position per crystal (n_per_ring x n_rings) and one edge per TOF bin
    n_per_ring_f = max(8.0, round(2 * math.pi * scanner.radius_mm / crystal_mm))
    n_rings_f = max(1.0, round(scanner.axial_length_mm / crystal_mm))
    require_memory("crystal_mm", 64.0 * n_per_ring_f * n_rings_f + 1000.0 * (n_per_ring_f + n_rings_f),
                   f"a header of {n_per_ring_f:.0f} x {n_rings_f:.0f} crystals")
    require_memory("tof_bin_ps", 16.0 * scanner.coincidence_window_ps / tof_bin_ps,
                   f"{scanner.coincidence_window_ps / tof_bin_ps:.0f} TOF bins")
    n_per_ring, n_rings = int(n_per_ring_f), int(n_rings_f)
    ring_mm = scanner.axial_length_mm / n_rings
    tangential_mm = 2 * scanner.radius_mm * math.sin(math.pi / n_per_ring)
    angles = 2 * math.pi * np.arange(n_per_ring) / n_per_ring
    c, s = np.cos(angles), np.sin(angles)
    rotations = np.zeros((n_per_ring, 3, 3))
    rotations[:, 0, 0], rotations[:, 0, 1], rotations[:, 1, 0], rotations[:, 1, 1] = c, -s, s, c
    rotations[:, 2, 2] = 1.0
    rings = np.zeros((n_rings, 3))
    rings[:, 0] = scanner.radius_mm
    rings[:, 2] = (np.arange(n_rings) - 0.5 * (n_rings - 1)) * ring_mm
    half_bins = int(math.ceil(0.5 * scanner.coincidence_window_ps / tof_bin_ps - 0.5))
    edges_ps = (np.arange(-half_bins, half_bins + 2) - 0.5) * tof_bin_ps
    efficiencies = None
    if crystal_efficiencies is not None:
        efficiencies = np.asarray(crystal_efficiencies, np.float64)
        if efficiencies.shape != (n_per_ring, n_rings):
            raise ValueError(f"crystal_efficiencies: expected shape {(n_per_ring, n_rings)} (crystals per ring, "
                             f"rings), got {efficiencies.shape}")
        if not np.all(np.isfinite(efficiencies)) or np.any(efficiencies < 0):
            raise ValueError("crystal_efficiencies: expected finite values >= 0")
    return single_type_header(model_name, (depth_mm, tangential_mm, ring_mm), rings, rotations,
                              np.zeros((n_per_ring, 3)), tof_edges_mm=edges_ps * (0.5 * C_MM_PER_PS),
                              tof_fwhm_mm=scanner.tof_fwhm_ps * 0.5 * C_MM_PER_PS,
                              bin_efficiencies=efficiencies)


def ring_shape(header) -> tuple:
    """``(n_per_ring, n_rings)`` of a header made by :func:`scanner_header`."""
    expect_instance(header, _petsird().Header, "header")
    rep = header.scanner.scanner_geometry.replicated_modules[0]
    return len(rep.transforms), len(rep.object.detecting_elements.transforms)


def _tof_edges(pscanner: PetsirdScanner, pair) -> np.ndarray:
    edges = pscanner.tof_edges_mm(*pair)
    if edges.size <= 2:
        raise ValueError(f"events of module types {tuple(pair)}: the file has no TOF information "
                         f"({max(edges.size - 1, 0)} TOF bin); DIRECT histo-images need TOF")
    return edges


def events_to_coincidences(events: EventBatch, pscanner: PetsirdScanner) -> Coincidences:
    """PETSIRD coincidences of a batch for a one-module-type scanner: nearest crystals, TOF bins.

    Endpoints farther than a crystal's half diagonal from every crystal, or time differences outside
    the TOF bins, raise ValueError (events outside the scanner).
    """
    expect_instance(pscanner, PetsirdScanner, "pscanner")
    expect_instance(events, EventBatch, "events")
    if pscanner.n_types != 1:
        raise ValueError(f"pscanner: expected a scanner of one module type, got {pscanner.n_types}")
    edges = _tof_edges(pscanner, (0, 0))
    box = np.array([c.c for c in pscanner.info.scanner_geometry.replicated_modules[0]
                    .object.detecting_elements.object.shape.corners], np.float64)
    reach = 0.5 * float(np.linalg.norm(box.max(axis=0) - box.min(axis=0))) + 1e-3
    host = [np.asarray(a.get() if hasattr(a, "get") else a) for a in (events.p1, events.p2, events.dt_ps)]
    bin0 = nearest_elements(pscanner, host[0], max_distance_mm=reach)
    bin1 = nearest_elements(pscanner, host[1], max_distance_mm=reach)
    tof_mm = host[2].astype(np.float64) * (0.5 * C_MM_PER_PS)
    idx = np.searchsorted(edges, tof_mm, side="right") - 1
    bad = (idx < 0) | (idx >= edges.size - 1)
    if bad.any():
        raise ValueError(f"events: {int(bad.sum())} time differences outside the TOF bins "
                         f"[{2 * edges[0] / C_MM_PER_PS:.0f}, {2 * edges[-1] / C_MM_PER_PS:.0f}] ps")
    return Coincidences(bin0, bin1, idx)


def _pair_tables(pscanner: PetsirdScanner, pair):
    """(element centres of t0, of t1, TOF-bin centres as dt in ps) of module types ``pair``, float64: the
    tables coincidences_to_events gathers from (rounded to float32 where they are used)."""
    t0, t1 = pair
    edges = _tof_edges(pscanner, pair)
    dt_centres = (edges[:-1] + edges[1:]) / C_MM_PER_PS        # 2 tof_mm / c at the bin centres (ps)
    return pscanner.element_centres[t0], pscanner.element_centres[t1], dt_centres


def coincidences_to_events(pscanner: PetsirdScanner, pair, coincidences: Coincidences, *, xp=np) -> EventBatch:
    """An :class:`EventBatch` (crystal centres, TOF-bin centres) of coincidences of module types ``pair``.

    ``xp`` = CuPy builds the batch on the GPU (the integer lists are copied, the positions gathered there).
    """
    expect_instance(pscanner, PetsirdScanner, "pscanner")
    expect_instance(coincidences, Coincidences, "coincidences")
    if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise TypeError(f"pair: expected two integer module-type indices (t0, t1), got {pair!r}")
    t0, t1 = (integer("pair", t) for t in pair)
    if not 0 <= t1 <= t0 < pscanner.n_types:
        raise ValueError(f"pair: expected module types (t0, t1) with 0 <= t1 <= t0 < {pscanner.n_types}, "
                         f"got {pair!r}")
    pscanner.check((t0, t1), coincidences, where="coincidences")
    cache = pscanner.__dict__.setdefault("_device_tables", {})
    key = (xp.__name__, t0, t1)
    if key not in cache:
        cache[key] = tuple(xp.asarray(table, dtype=xp.float32) for table in _pair_tables(pscanner, (t0, t1)))
    centres0, centres1, dt_table = cache[key]
    e0 = xp.asarray(coincidences.bin0.astype(np.int64) // pscanner.n_energy_bins[t0])
    e1 = xp.asarray(coincidences.bin1.astype(np.int64) // pscanner.n_energy_bins[t1])
    tof = xp.asarray(coincidences.tof_idx.astype(np.int64))
    return EventBatch(centres0[e0], centres1[e1], dt_table[tof])


def write_events(path, header, prompts=None, delayeds=None, *, progress: bool = False) -> dict:
    """Write event batches (each an :class:`EventBatch` or an iterable of them) to a PETSIRD file,
    one time block per batch, prompts first. Returns the event counts written per kind."""
    from tqdm.auto import tqdm

    progress = flag("progress", progress)
    with PetsirdWriter(path, header) as writer:
        for kind, stream in (("prompts", prompts), ("delayeds", delayeds)):
            if stream is None:
                continue
            batches = [stream] if hasattr(stream, "dt_ps") else stream
            for batch in tqdm(batches, disable=not progress, desc=f"writing {kind}", unit="block"):
                lists = {(0, 0): events_to_coincidences(batch, writer.scanner)}
                writer.write_block(**{kind: lists})
        return dict(writer.n_written)


def read_events(path, kind: str = "prompts", *, xp=np, progress: bool = False) -> Iterator[EventBatch]:
    """Stream a PETSIRD file's prompts or delayeds as :class:`EventBatch` chunks (one per event
    list) in the namespace ``xp``. Needs TOF for every module-type pair that has events."""
    with PetsirdReader(path) as reader:
        for pair, coincidences in reader.coincidences(kind, progress=progress):
            yield coincidences_to_events(reader.scanner, pair, coincidences, xp=xp)


#: Bytes of an event list read, decoded and deposited at a time by the compiled deposition.
CHUNK_BYTES = 32 << 20


class _CompiledDeposition:
    """The compiled deposition of a file's coincidence lists (csrc/direct/listmode.hpp): each list's
    varints read from the file in chunks, decoded and deposited by ``_core.DirectListDeposit`` (CPU) or
    ``_cuda.DirectListDepositCuda`` (GPU) into the histo-images of its kind, with the tables of every
    (kind, module-type pair) registered once (the engine keeps its totals per registration)."""

    def __init__(self, reader: PetsirdReader, grid: ImageGrid, viewset: ViewSet, histos: dict, xp, chunk_bytes: int):
        self.reader, self.histos, self.gpu = reader, histos, xp is not np
        args = (list(grid.shape), [float(v) for v in grid.voxel_size], viewset.n_phi, viewset.n_theta,
                float(viewset.theta_max), chunk_bytes)
        if self.gpu:
            from .._backend import cuda_module

            self.engine = cuda_module().DirectListDepositCuda(*args)
        else:
            from .._core import DirectListDeposit

            self.engine = DirectListDeposit(*args)
        self.handles = {}                  # (kind, pair) -> the engine's handle, in registration order

    def __call__(self, event_list) -> int:
        """Deposit one list (an :class:`~directpet.io.petsird.EventList`); the byte after it."""
        key = (event_list.kind, event_list.pair)
        if key not in self.handles:
            pscanner, (t0, t1) = self.reader.scanner, event_list.pair
            c0, c1, dt = (np.ascontiguousarray(t, dtype=np.float32) for t in _pair_tables(pscanner, (t0, t1)))
            self.handles[key] = self.engine.add_pair(c0, c1, dt, pscanner.n_energy_bins[t0], pscanner.n_energy_bins[t1])
        out = self.histos[event_list.kind]
        end, _, complete = self.engine.deposit(self.handles[key], event_list.fd, event_list.offset,
                                               event_list.n_events, out.data.ptr if self.gpu else out)
        if not complete:
            raise EOFError("the file ends inside a list of coincidences")
        return end

    def finish(self) -> dict:
        """{kind: DepositStats} (the GPU waited for); faults found on the GPU raised as the reader raises them."""
        totals = self.engine.finish()
        path = self.reader.path
        if totals["varint_too_long"] or totals["value_too_wide"]:
            what = ("a varint longer than 5 bytes (not a 32-bit value; corrupt file)" if totals["varint_too_long"]
                    else "a detection bin or TOF index beyond 32 bits (corrupt file)")
            raise ValueError(f"path: {path!r} has a corrupt time block (event list: {what})")
        stats = {kind: DepositStats() for kind in self.histos}
        for (kind, pair), t in zip(self.handles, totals["pairs"]):
            self.reader.scanner.check_largest(pair, t["max_bin0"], t["max_bin1"], t["max_tof"], where=f"path {path!r}")
            stats[kind].add(DepositStats(n_events=t["n_events"], n_deposited=t["n_deposited"],
                                         n_outside_views=t["n_outside_views"], n_outside_grid=t["n_outside_grid"]))
        return stats


def deposit_file(path, grid: ImageGrid, viewset: ViewSet, *, kind: str = "prompts", xp=None, mode: str = "nearest",
                 progress: bool = True, return_stats: bool = False, engine: str = "compiled",
                 chunk_bytes: int = CHUNK_BYTES):
    """Histo-images ``(n_views, nz, ny, nx)`` float32 of a PETSIRD file's prompts or delayeds.

    ``xp``: None picks CuPy when a GPU is usable, else NumPy. See :func:`~directpet.direct.deposit`
    for ``mode`` and the stats. ``engine='compiled'`` (the default, for ``mode='nearest'``) reads,
    decodes and deposits the event lists in compiled code (:func:`deposit_prompts_and_delayeds`);
    ``'python'`` decodes them into :class:`EventBatch` chunks and deposits those with
    :func:`~directpet.direct.deposit` (the reference; ``mode='trilinear'`` always takes it).
    """
    if kind not in ("prompts", "delayeds"):
        raise ValueError(f"kind: expected 'prompts' or 'delayeds', got {kind!r}")
    if engine not in ("compiled", "python"):
        raise ValueError(f"engine: expected 'compiled' or 'python', got {engine!r}")
    if mode not in ("nearest", "trilinear"):
        raise ValueError(f"mode: expected 'nearest' or 'trilinear', got {mode!r}")
    return_stats = flag("return_stats", return_stats)
    if engine == "python" or mode != "nearest":
        expect_instance(grid, ImageGrid, "grid")
        expect_instance(viewset, ViewSet, "viewset")
        progress = flag("progress", progress)
        xp = _default_namespace(xp)
        # one deposit over the stream: the histo-images are allocated (or refused) before the file is read
        return deposit(read_events(path, kind, xp=xp, progress=progress), grid, viewset, mode=mode, xp=xp,
                       return_stats=return_stats)
    histos, stats, _ = _deposit_lists(path, grid, viewset, (kind,), xp, progress, chunk_bytes)
    return (histos[kind], stats[kind]) if return_stats else histos[kind]


@dataclass
class FileHistoImages:
    """What :func:`deposit_prompts_and_delayeds` returns: the histo-images ``(n_views, nz, ny, nx)``
    float32 of the prompts and of the delayeds (NumPy or CuPy), their :class:`DepositStats`, and the
    file's ``petsird.Header`` (read on the way)."""

    prompts: object
    delayeds: object
    prompt_stats: DepositStats
    delayed_stats: DepositStats
    header: object = None


def deposit_prompts_and_delayeds(path, grid: ImageGrid, viewset: ViewSet, *, xp=None, progress: bool = True,
                                 chunk_bytes: int = CHUNK_BYTES) -> FileHistoImages:
    """The prompts and the delayeds of a PETSIRD file deposited into histo-images in one pass over the file.

    Each event list's varints are read straight from the file in chunks of ``chunk_bytes`` (memory
    stays bounded whatever the file's size), decoded and deposited as :func:`deposit_file` with
    ``mode='nearest'`` does -- in compiled code, without EventBatch or NumPy in between. On the GPU
    (``xp`` = CuPy; None: CuPy when a GPU is usable) the chunks go through two pinned buffers and two
    streams, so that reading chunk k + 1 overlaps decoding and depositing chunk k. A truncated or
    corrupt file raises the errors :class:`~directpet.io.PetsirdReader` raises.
    """
    histos, stats, header = _deposit_lists(path, grid, viewset, ("prompts", "delayeds"), xp, progress, chunk_bytes)
    return FileHistoImages(histos["prompts"], histos["delayeds"], stats["prompts"], stats["delayeds"], header)


def _default_namespace(xp):
    if xp is None:                   # the GPU when one is usable and CuPy is there
        if wants_cupy(None, resolve_backend("auto")):
            import cupy as xp  # importable: checked by wants_cupy
        else:
            xp = np
    return xp


def _deposit_lists(path, grid, viewset, kinds, xp, progress, chunk_bytes):
    """({kind: histo-images}, {kind: DepositStats}, the file's header) of the lists of ``kinds``, one
    pass over the file."""
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    progress = flag("progress", progress)
    chunk_bytes = integer("chunk_bytes", chunk_bytes, lo=1 << 12, hi=1 << 30)
    # two chunks of bytes and their decoded values (4 bytes per varint at most) on the host or the GPU
    require_memory("chunk_bytes", 10.0 * chunk_bytes, f"two event-list chunks of {chunk_bytes} bytes, decoded")
    xp = _default_namespace(xp)
    require_stack_memory("grid", len(viewset), grid, copies=len(kinds))
    shape = (len(viewset),) + grid.shape
    with PetsirdReader(path) as reader:
        histos = {kind: xp.zeros(shape, dtype=xp.float32) for kind in kinds}
        engine = _CompiledDeposition(reader, grid, viewset, histos, xp, chunk_bytes)
        reader.stream_lists(engine, kinds=kinds, progress=progress)
        stats = engine.finish()
    return histos, stats, reader.header


def lor_background(pscanner: PetsirdScanner, coincidences: Coincidences, values, grid: ImageGrid, viewset: ViewSet,
                   *, fov_radius_mm: float, step_mm: Optional[float] = None, out=None, xp=np, chunk: int = 200_000):
    """Deposit a background given per LOR in the scanner's own binning (e.g. an external scatter
    sinogram) into histo-images ``(n_views, nz, ny, nx)`` float32.

    ``coincidences`` names the LORs (detection-bin pairs of module types (0, 0)) and ``values`` (n,)
    their expected counts. With one TOF bin (or a non-TOF scanner) a value is spread evenly along
    the LOR's segment inside the transaxial FOV of radius ``fov_radius_mm`` -- its TOF is unknown, as
    for randoms -- in steps of ``step_mm`` (default half the smallest voxel), each step a weighted
    pseudo-event at its most likely point; with TOF bins (``coincidences.tof_idx``) the value sits at
    the bin's most likely point. Values of LORs that miss the FOV are dropped.
    """
    expect_instance(pscanner, PetsirdScanner, "pscanner")
    expect_instance(coincidences, Coincidences, "coincidences")
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    pscanner.check((0, 0), coincidences, where="coincidences")
    chunk = positive_int("chunk", chunk)
    try:
        vals = np.asarray(values.get() if hasattr(values, "get") else values, np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"values: expected an array of numbers, got {type(values).__name__}") from None
    if vals.shape != (len(coincidences),):
        raise ValueError(f"values: expected ({len(coincidences)},) values, one per LOR, got {vals.shape}")
    if not np.all(np.isfinite(vals)) or np.any(vals < 0):
        raise ValueError("values: expected finite values >= 0")
    fov_radius_mm = real_number("fov_radius_mm", fov_radius_mm, positive=True)
    step = 0.5 * min(grid.voxel_size) if step_mm is None else real_number("step_mm", step_mm, positive=True)
    # each LOR of a chunk becomes up to (FOV diameter / step) pseudo-events of ~100 bytes
    require_memory("step_mm", 100.0 * min(chunk, max(len(coincidences), 1)) * (2 * fov_radius_mm / step + 1),
                   f"the pseudo-events of {min(chunk, len(coincidences))} LORs in steps of {step:g} mm")
    spread = pscanner.tof_edges_mm(0, 0).size <= 2

    def batches():
        for start in range(0, len(coincidences), chunk):
            s = slice(start, start + chunk)
            part = Coincidences(coincidences.bin0[s], coincidences.bin1[s],
                                np.zeros(len(coincidences.bin0[s]), np.uint32) if spread else coincidences.tof_idx[s])
            if spread:
                yield _spread_along_fov(pscanner, part, vals[s], fov_radius_mm, step, xp)
            else:
                batch = coincidences_to_events(pscanner, (0, 0), part, xp=xp)
                yield replace(batch, weights=xp.asarray(vals[s], dtype=xp.float32))

    return deposit(batches(), grid, viewset, out=out, xp=xp)


def _spread_along_fov(pscanner, part, w, fov_radius_mm, step, xp):
    from ..sim.lines import cylinder_interval

    p1 = xp.asarray(pscanner.positions(0, part.bin0))
    p2 = xp.asarray(pscanner.positions(0, part.bin1))
    d = p2 - p1
    length = xp.sqrt(xp.sum(d * d, axis=1))
    u = d / xp.where(length > 0, length, 1.0)[:, None]
    t0, t1 = cylinder_interval(p1[:, 0], p1[:, 1], p1[:, 2], u[:, 0], u[:, 1], u[:, 2], fov_radius_mm, None, xp)
    seg = xp.maximum(t1 - t0, 0.0)
    n_steps = xp.where(seg > 0, xp.ceil(seg / step), 0).astype(xp.int64)
    lor = xp.repeat(xp.arange(len(part)), n_steps)
    first = xp.cumsum(n_steps) - n_steps
    k = xp.arange(lor.size) - first[lor]
    t = t0[lor] + (k + 0.5) * (seg / xp.maximum(n_steps, 1))[lor]       # step midpoints in the FOV
    dt = 2.0 * (t - 0.5 * length[lor]) / C_MM_PER_PS                  # MLP = p1 + t u
    weights = (xp.asarray(w) / xp.maximum(n_steps, 1))[lor]
    return EventBatch(p1[lor].astype(xp.float32), p2[lor].astype(xp.float32), dt.astype(xp.float32),
                      weights=weights.astype(xp.float32))


def quantised(events: EventBatch, pscanner: PetsirdScanner, *, xp=None) -> EventBatch:
    """The batch as PETSIRD stores it (crystal centres, TOF-bin centres): what reading a file gives."""
    xp = array_module(events.dt_ps) if xp is None else xp
    return coincidences_to_events(pscanner, (0, 0), events_to_coincidences(events, pscanner), xp=xp)


__all__ = ["FileHistoImages", "coincidences_to_events", "deposit_file", "deposit_prompts_and_delayeds",
           "events_to_coincidences", "lor_background", "quantised", "read_events",
           "ring_shape", "scanner_header", "write_events"]
