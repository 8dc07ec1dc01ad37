"""The FIRST reconstruction experiment: a micro Derenzo phantom and point sources through the
rotating dual-head scanner, reconstructed with OSEM by the faithful, matched and fast projectors.

Data come from the event Monte Carlo (:func:`~directpet.first.simulate_sinogram`: positron range,
non-collinearity, depth of interaction, rotating heads), not from the reconstruction model, and are
reconstructed with the analytic Super-LOR model and the heads' geometric normalisation
(:func:`~directpet.first.geometric_normalisation`): no inverse crime. OSEM uses 13 subsets of
interleaved angles. Reported: images after 1 and ``n_iter`` iterations, profiles through each rod
group with their peak-to-valley ratios, point-source FWHM (radial, tangential, axial) against the
distance from the axis, and the time per iteration of each method.

Used by ``directpet demo first`` and ``notebooks/first_superlor.ipynb``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .. import analysis, recon
from .._backend import resolve_backend
from .._checks import to_numpy
from ..geometry import ImageGrid
from ..sim import derenzo_phantom, point_sources, radial_point_positions
from .data import SinogramData
from .geometry import RotatingScanner
from .model import build_super_lor_table
from .monte_carlo import simulate_sinogram
from .normalisation import geometric_normalisation
from .projector import SuperLORProjector
from .subsets import AngleSubsets

#: name -> (scanner parameters, Derenzo radius (mm), binned Derenzo events, binned point events)
SIZES = {
    # CI: 26 angles (13 subsets of 2), 6 rows, a 34 mm field of view
    "tiny": (dict(n_rows=6, n_angles=26, n_radial=85, n_columns=36), 14.0, 3e6, 1e6),
    "small": (dict(n_rows=12, n_angles=52, n_radial=111, n_columns=44), 16.0, 3e7, 5e6),
    # the paper's sizes: 175 x 130 x 900 sinograms, 175 x 175 x 59 images
    "full": (dict(), 16.0, 3e8, 4e7),
}


@dataclass
class FirstExperimentConfig:
    size: str = "small"
    methods: Sequence[str] = ("faithful", "matched", "fast")
    n_iter: int = 24
    n_subsets: int = 13
    derenzo_events: Optional[float] = None     # binned events (default per size)
    point_events: Optional[float] = None
    quasi_tolerance: float = 0.05
    backend: str = "auto"
    seed: int = 2026
    progress: bool = True


@dataclass
class MethodResult:
    label: str
    derenzo: object              # ReconResult (images as NumPy)
    points: object
    pv: dict = field(default_factory=dict)       # diameter -> PeakToValley at the last iteration
    pv_first: dict = field(default_factory=dict)  # ... after one iteration
    fwhm: list = field(default_factory=list)     # per point source: dict from point_source_fwhm
    seconds_per_iteration: float = 0.0


@dataclass
class FirstExperimentResult:
    config: FirstExperimentConfig
    scanner: RotatingScanner
    table: object
    derenzo_truth: np.ndarray
    derenzo_info: object
    point_positions: np.ndarray
    data_stats: dict
    methods: dict = field(default_factory=dict)   # label -> MethodResult
    timings: dict = field(default_factory=dict)
    backend: str = "cpu"

    def table_text(self) -> str:
        """Peak-to-valley per rod group, FWHM per point and time per iteration, per method."""
        # peak_to_valley leaves out groups with fewer than two rods on their profile line
        groups = [d for d in self.derenzo_info.diameters_mm if all(d in r.pv for r in self.methods.values())]
        labels = list(self.methods)
        it = self.config.n_iter
        lines = [f"peak-to-valley after {it} iterations (1 iteration in brackets)",
                 f"{'rod (mm)':>9} " + " ".join(f"{m:>16}" for m in labels)]
        for d in groups:
            row = []
            for m in labels:
                r = self.methods[m]
                row.append(f"{r.pv[d].ratio_text():>7} ({r.pv_first[d].ratio_text():>6})")
            lines.append(f"{d:>9.2f} " + " ".join(f"{c:>16}" for c in row))
        lines.append("")
        lines.append(f"point-source FWHM after {it} iterations (mm): radial / tangential / axial")
        lines.append(f"{'r (mm)':>7} " + " ".join(f"{m:>20}" for m in labels))
        for k, p in enumerate(self.point_positions):
            cells = []
            for m in labels:
                f = self.methods[m].fwhm[k]["fwhm_mm"]
                cells.append(f"{f['radial']:.2f} / {f['tangential']:.2f} / {f['axial']:.2f}")
            lines.append(f"{np.hypot(p[0], p[1]):>7.1f} " + " ".join(f"{c:>20}" for c in cells))
        lines.append("")
        lines.append("time per OSEM iteration: " + ", ".join(
            f"{m} {self.methods[m].seconds_per_iteration * 1e3:.0f} ms" for m in labels))
        return "\n".join(lines)


def scanner_for(size: str) -> RotatingScanner:
    if size not in SIZES:
        raise ValueError(f"size: expected one of {sorted(SIZES)}, got {size!r}")
    return RotatingScanner(**SIZES[size][0])


def _fine_grid(scanner: RotatingScanner) -> ImageGrid:
    """The Monte Carlo's source lattice for extended phantoms: twice as fine as the image."""
    g = scanner.grid
    return ImageGrid(tuple(2 * n for n in g.shape), tuple(0.5 * v for v in g.voxel_size))


def _simulate(scanner, activity, grid, events, seed, backend, progress):
    """Monte Carlo sinogram with about ``events`` binned events (decays from a pilot run's efficiency)."""
    pilot, st = simulate_sinogram(scanner, activity, grid, 200_000, seed=seed + 1, backend=backend, progress=False)
    eff = max(st.n_binned, 1) / st.n_decays
    n_decays = int(round(events / eff))
    sino, stats = simulate_sinogram(scanner, activity, grid, n_decays, seed=seed, backend=backend, progress=progress)
    return sino, stats


def run_first_experiment(cfg: FirstExperimentConfig = FirstExperimentConfig()) -> FirstExperimentResult:
    """Simulate, reconstruct with each method, analyse (see the module docstring)."""
    scanner = scanner_for(cfg.size)
    _, radius, default_derenzo, default_points = SIZES[cfg.size]
    unknown = [m for m in cfg.methods if m not in ("faithful", "matched", "fast")]
    if unknown:
        raise ValueError(f"methods: unknown {unknown}; expected some of faithful, matched, fast")
    backend = resolve_backend(cfg.backend)
    xp = np
    if backend == "cuda":
        try:
            import cupy as xp  # optional: keeps data and images on the GPU
        except ImportError:
            xp = np
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
    factors = geometric_normalisation(scanner)
    events_d = default_derenzo if cfg.derenzo_events is None else cfg.derenzo_events
    events_p = default_points if cfg.point_events is None else cfg.point_events
    sino_d, st_d = _simulate(scanner, derenzo_fine, fine, events_d, cfg.seed, backend, cfg.progress)
    sino_p, st_p = _simulate(scanner, points_act, plane, events_p, cfg.seed + 7, backend, cfg.progress)
    timings["simulation_s"] = time.perf_counter() - t0
    data_d = SinogramData(xp.asarray(sino_d), scanner, xp.asarray(factors), None,
                          {"source": "monte carlo", "binned": st_d.n_binned})
    data_p = SinogramData(xp.asarray(sino_p), scanner, data_d.factors, None,
                          {"source": "monte carlo", "binned": st_p.n_binned})
    out = FirstExperimentResult(cfg, scanner, table, truth, info, positions,
                                {"derenzo": st_d, "points": st_p}, timings=timings, backend=backend)
    for method in cfg.methods:
        P = SuperLORProjector(table, method, backend=backend, check_finite=False)
        runs = []
        for data in (data_d, data_p):
            problem = AngleSubsets(P, data, cfg.n_subsets)
            first = []                  # the image after iteration 1 (its last subset update)

            def keep_first(it, sub, x, last=problem.n_subsets - 1):
                if it == 1 and sub == last:
                    first.append(to_numpy(x))

            res = recon.osem(problem, cfg.n_iter, callback=keep_first, progress=cfg.progress)
            res.image = to_numpy(res.image)
            res.images, res.image_iterations = [first[0], res.image], [1, res.n_iter]
            runs.append(res)
        mr = MethodResult(method, runs[0], runs[1],
                          seconds_per_iteration=float(np.median(runs[0].iteration_times)))
        mr.pv = analysis.peak_to_valley(analysis.rod_profiles(runs[0].images[-1], grid, info))
        mr.pv_first = analysis.peak_to_valley(analysis.rod_profiles(runs[0].images[0], grid, info))
        spacing = float(np.linalg.norm(positions[1] - positions[0]))
        mr.fwhm = [analysis.point_source_fwhm(runs[1].images[-1], grid, p, half_width_mm=min(5.0, 0.45 * spacing))
                   for p in positions]
        out.methods[method] = mr
    return out


def write_first_figures(result: FirstExperimentResult, out_dir: str) -> list:
    """Reconstructed slices (1 and n_iter iterations), rod profiles and FWHM against radius (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    grid, info = result.scanner.grid, result.derenzo_info
    labels = list(result.methods)
    paths = [os.path.join(out_dir, n) for n in ("first_derenzo.png", "first_rod_profiles.png", "first_fwhm.png")]
    z_mid = grid.nz // 2
    half = 0.5 * grid.nx * grid.voxel_size[2]
    extent = [-half, half, -half, half]
    view = min(half, info.radius_mm + 3.0)
    fig, axes = plt.subplots(len(labels), 3, figsize=(11, 3.6 * len(labels)), squeeze=False)
    for row, m in enumerate(labels):
        r = result.methods[m].derenzo
        for col, (img, title) in enumerate(((result.derenzo_truth, "truth"),
                                            (r.images[0], f"{m}: 1 iteration"),
                                            (r.images[-1], f"{m}: {r.image_iterations[-1]} iterations"))):
            ax = axes[row, col]
            ax.imshow(img[z_mid], origin="lower", cmap="gray_r", extent=extent)
            ax.set_xlim(-view, view)
            ax.set_ylim(-view, view)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("x (mm)")
            ax.set_ylabel("y (mm)")
    fig.tight_layout()
    fig.savefig(paths[0], dpi=90)
    plt.close(fig)

    diameters = [d for d in info.diameters_mm if all(d in result.methods[m].pv for m in labels)]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, d in zip(axes.ravel(), diameters):
        for m in labels:
            prof = analysis.rod_profiles(result.methods[m].derenzo.images[-1], grid, info)[d]
            ax.plot(prof.distance_mm, prof.values, label=f"{m} (P/V {result.methods[m].pv[d].ratio_text()})")
        truth = analysis.rod_profiles(result.derenzo_truth, grid, info)[d]
        ax.plot(truth.distance_mm, truth.values * max(ax.get_ylim()[1], 1e-12) / max(truth.values.max(), 1e-12),
                "k:", lw=0.8, label="truth (scaled)")
        ax.set_title(f"{d:g} mm rods", fontsize=9)
        ax.set_xlabel("distance along the profile (mm)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=90)
    plt.close(fig)

    radii = np.hypot(result.point_positions[:, 0], result.point_positions[:, 1])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, which in zip(axes, ("radial", "tangential", "axial")):
        for m in labels:
            ax.plot(radii, [f["fwhm_mm"][which] for f in result.methods[m].fwhm], "o-", label=m)
        ax.set_title(f"{which} FWHM", fontsize=9)
        ax.set_xlabel("distance from the axis (mm)")
        ax.set_ylabel("FWHM (mm)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=90)
    plt.close(fig)
    return paths


__all__ = ["FirstExperimentConfig", "FirstExperimentResult", "MethodResult", "SIZES", "run_first_experiment",
           "scanner_for", "write_first_figures"]
