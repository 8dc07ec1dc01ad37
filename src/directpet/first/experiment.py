"""The FIRST reconstruction experiment: a micro Derenzo phantom and point sources through the
rotating dual-head scanner, reconstructed with OSEM by the faithful, matched and fast projectors.

Data come from the event Monte Carlo (:func:`~directpet.first.simulate`: positron range,
acollinearity, depth of interaction, rotating heads), not from the reconstruction model, and are
reconstructed with the analytic Super-LOR model and the heads' geometric normalisation
(:func:`~directpet.first.geometric_normalisation`): no inverse crime. OSEM uses 13 subsets of
interleaved angles. Reported: images after 1 and ``n_iter`` iterations, profiles through each rod
group with their peak-to-valley ratios, point-source FWHM (radial, tangential, axial) against the
distance from the axis, and the time per iteration of each method; with ``bsrem_betas``, BSREM with
the relative difference prior from the OSEM image and its peak-to-valley against noise. The analysis, the table and the
figure helpers are shared with the dual-head experiment (:mod:`directpet.analysis.experiments`).

Used by ``directpet demo first`` and ``notebooks/first_superlor.ipynb``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .._backend import resolve_backend
from ..analysis import experiments as shared
from ..geometry import ImageGrid
from ..sim import derenzo_phantom, point_sources, radial_point_positions
from .data import SinogramData
from .geometry import RotatingScanner
from .model import build_super_lor_table
from .monte_carlo import direction_band, simulate
from .normalisation import geometric_normalisation
from .projector import METHODS, SuperLORProjector
from .subsets import AngleSubsets

#: name -> (scanner parameters, Derenzo radius (mm), binned Derenzo events, binned point events)
SIZES = {
    # CI: 26 angles (13 subsets of 2), 6 rows, a 34 mm field of view
    "tiny": (dict(n_rows=6, n_angles=26, n_radial=85, n_columns=36), 14.0, 3e6, 1e6),
    # the notebook's size on a CPU: tiny's scanner and counts, where the three methods' OSEM takes
    # about half a minute on 2 cores (faithful and matched cost 20 x fast there)
    "cpu": (dict(n_rows=6, n_angles=26, n_radial=85, n_columns=36), 14.0, 3e6, 1e6),
    "small": (dict(n_rows=12, n_angles=52, n_radial=111, n_columns=44), 16.0, 3e7, 5e6),
    # the paper's sizes: 175 x 130 x 900 sinograms, 175 x 175 x 59 images
    "full": (dict(), 16.0, 3e8, 4e7),
}
#: band decays of the pilot run that measures the binned events per decay
PILOT_BAND_DECAYS = 200_000


@dataclass
class ExperimentConfig(shared.ExperimentConfigBase):
    """The FIRST experiment's settings (``size``: a key of :data:`SIZES`; see
    :class:`~directpet.analysis.experiments.ExperimentConfigBase` for the common ones).

    derenzo_events, point_events : binned Monte Carlo events of each phantom (None: the size's preset).
    quasi_tolerance : the Super-LOR table's quasi-symmetry tolerance.
    """

    size: str = "small"
    methods: Sequence[str] = ("faithful", "matched", "fast")
    n_subsets: int = 13
    derenzo_events: Optional[float] = None
    point_events: Optional[float] = None
    quasi_tolerance: float = 0.05


class ExperimentResult(shared.ExperimentResult):
    """The FIRST experiment's outcome (``model``: the SuperLORTable; FWHM radial / tangential / axial
    against the distance from the axis)."""


def scanner_for(size: str) -> RotatingScanner:
    """The RotatingScanner of a size of :data:`SIZES`."""
    return shared.preset_scanner(SIZES, size, RotatingScanner)


def _fine_grid(scanner: RotatingScanner) -> ImageGrid:
    """The Monte Carlo's source lattice for extended phantoms: twice as fine as the image."""
    g = scanner.grid
    return ImageGrid(tuple(2 * n for n in g.shape), tuple(0.5 * v for v in g.voxel_size))


def _simulate(scanner, activity, grid, events, seed, backend, progress):
    """Monte Carlo sinogram with about ``events`` binned events (decays from a pilot run's binned
    events per decay)."""
    band = direction_band(scanner, activity, grid=grid)["band_fraction"]
    _, st = simulate(scanner, activity, math.ceil(PILOT_BAND_DECAYS / band), seed=seed + 1, backend=backend,
                     grid=grid)
    n_decays = int(round(events / (max(st.n_binned, 1) / st.n_decays)))
    return simulate(scanner, activity, n_decays, seed=seed, backend=backend, progress=progress, grid=grid)


def run_experiment(config: ExperimentConfig = ExperimentConfig()) -> ExperimentResult:
    """Simulate, reconstruct with each method, analyse (see the module docstring)."""
    cfg = config
    betas, arms = shared.check_bsrem_arm(cfg.bsrem_betas, cfg.bsrem_passes, cfg.bsrem_methods, cfg.methods)
    backend = resolve_backend(cfg.backend)
    scanner, (radius, default_derenzo, default_points), xp = shared.prepare(cfg, SIZES, RotatingScanner, METHODS,
                                                                           backend)
    grid = scanner.grid
    t0 = time.perf_counter()
    table = build_super_lor_table(scanner, quasi_tolerance=cfg.quasi_tolerance)
    timings = {"model_s": time.perf_counter() - t0}

    # phantoms: the Derenzo on a twice-finer source lattice, point sources on a 0.1 mm plane
    fine = _fine_grid(scanner)
    derenzo_fine, _ = derenzo_phantom(fine, radius_mm=radius, length_mm=min(20.0, 0.8 * grid.nz * grid.voxel_size[0]))
    truth, info = derenzo_phantom(grid, radius_mm=radius, length_mm=min(20.0, 0.8 * grid.nz * grid.voxel_size[0]))
    # points along +x on voxel centres (NEMA-style profiles then sample every source alike)
    r_max = 0.5 * grid.nx * grid.voxel_size[2] - 4.0
    positions = radial_point_positions(r_max, 7 if cfg.size == "full" else 4)
    positions[:, 0] = np.round(positions[:, 0] / grid.voxel_size[2]) * grid.voxel_size[2]
    plane = ImageGrid((1, grid.ny * 4 + 1, grid.nx * 4 + 1), (0.1, 0.1, 0.1))
    points_act, _ = point_sources(plane, positions)

    t0 = time.perf_counter()
    factors = xp.asarray(geometric_normalisation(scanner))
    events_d = default_derenzo if cfg.derenzo_events is None else cfg.derenzo_events
    events_p = default_points if cfg.point_events is None else cfg.point_events
    sino_d, st_d = _simulate(scanner, derenzo_fine, fine, events_d, cfg.seed, backend, cfg.progress)
    sino_p, st_p = _simulate(scanner, points_act, plane, events_p, cfg.seed + 7, backend, cfg.progress)
    timings["simulation_s"] = time.perf_counter() - t0
    data_d = SinogramData(scanner, xp.asarray(sino_d), factors, meta={"source": "monte carlo", "binned": st_d.n_binned})
    data_p = SinogramData(scanner, xp.asarray(sino_p), factors, meta={"source": "monte carlo", "binned": st_p.n_binned})

    def problem(method, data):
        return AngleSubsets(SuperLORProjector(table, method, backend=backend, check_finite=False), data, cfg.n_subsets)

    spacing = float(np.linalg.norm(positions[1] - positions[0]))
    methods = shared.reconstruct_methods(cfg.methods, problem, data_d, data_p, cfg.n_iter, cfg.progress, grid, info,
                                         positions, half_width_mm=min(5.0, 0.45 * spacing), bsrem_betas=betas,
                                         bsrem_passes=cfg.bsrem_passes, bsrem_methods=arms)
    return ExperimentResult(cfg, scanner, table, truth, info, positions, {"derenzo": st_d, "points": st_p}, methods,
                            timings=timings, backend=backend)


def write_figures(result: ExperimentResult, outdir: str) -> list:
    """Reconstructed slices (1 and n_iter iterations) per method, rod profiles and FWHM against the
    distance from the axis: ``first_derenzo.png``, ``first_rod_profiles.png``, ``first_fwhm.png``
    in ``outdir``, and with a penalised arm ``first_bsrem_sweep.png`` (peak-to-valley against noise).
    Returns their paths."""
    grid, info = result.scanner.grid, result.derenzo_info
    half = 0.5 * grid.nx * grid.voxel_size[2]
    z_mid = grid.nz // 2
    view = (-min(half, info.radius_mm + 3.0), min(half, info.radius_mm + 3.0))
    style = dict(extent=[-half, half, -half, half], xlim=view, ylim=view, xlabel="x (mm)", ylabel="y (mm)")
    rows = [([(img[z_mid], title) for img, title in shared.iteration_images(result, m)], style) for m in result.methods]
    return [
        shared.slice_figure(os.path.join(outdir, "first_derenzo.png"), rows),
        shared.rod_profile_figure(os.path.join(outdir, "first_rod_profiles.png"), grid, info,
                                  [(m, r.derenzo.images[-1], r.pv) for m, r in result.methods.items()],
                                  truth=result.derenzo_truth),
        shared.fwhm_figure(os.path.join(outdir, "first_fwhm.png"), result,
                           np.hypot(result.point_positions[:, 0], result.point_positions[:, 1]),
                           "distance from the axis (mm)"),
    ] + ([shared.bsrem_figure(os.path.join(outdir, "first_bsrem_sweep.png"), result)]
         if any(r.bsrem for r in result.methods.values()) else [])


__all__ = ["ExperimentConfig", "ExperimentResult", "SIZES", "run_experiment", "scanner_for", "write_figures"]
