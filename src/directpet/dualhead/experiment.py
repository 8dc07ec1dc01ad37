"""The dual-head reconstruction experiment (science.md 3.8): the micro Deluxe Derenzo phantom with
its rods along x (perpendicular to the heads) and a set of point sources across the planes, through
the stationary dual-head scanner, reconstructed with OSEM over the paper's random orientation
subsets.

Data come from the event Monte Carlo (:func:`~directpet.dualhead.simulate_events`: positron range,
acollinearity, penetration through the crystal array with exponential depth of interaction, the
finite front layer), not from the reconstruction model (the analytic multi-ray patches of
:func:`~directpet.dualhead.build_patch_model`): no inverse crime. OSEM uses 72 subsets of random
orientation classes (104 each at full size) with the zero-count skip. Reported: images after 1 and
``n_iter`` iterations, profiles along z at the paper's lines y = 11.7 mm and y = -2.7 mm, profiles
through each rod group with their peak-to-valley ratios, point-source FWHM in x (between the heads:
the depth-of-interaction and limited-angle blur), y and z against the plane, and the time per
iteration.

Used by ``directpet demo dualhead`` and ``notebooks/dual_head.ipynb``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .. import analysis, recon
from .._backend import resolve_backend
from .._checks import to_numpy
from ..sim import derenzo_phantom
from .data import DualHeadData
from .geometry import DualHeadScanner
from .monte_carlo import simulate_events
from .projector import DualHeadProjector
from .response import build_patch_model
from .subsets import DualHeadSubsets

#: name -> (scanner parameters, Derenzo radius (mm), detected Derenzo trues, detected point-source trues)
SIZES = {
    # CI and the notebook: 24 x 18 crystals, 1.2 mm voxels, 29 planes of 1 mm
    "tiny": (dict(n_y=24, n_z=18, voxels_per_crystal=2, n_planes=29, plane_mm=1.0), 16.0, 3e6, 1e6),
    # half the paper's heads at its voxel size
    "small": (dict(n_y=52, n_z=36), 16.0, 4.3e7, 5e6),
    # the paper: 104 x 72 crystals, 119 x 416 x 288 voxels, 1.72e8 true events
    "full": (dict(), 16.0, 1.72e8, 2e7),
}

#: the paper's transverse slices and profile lines (science.md 3.8)
PROFILE_Y_MM = (11.7, -2.7)


@dataclass
class DualHeadExperimentConfig:
    size: str = "tiny"
    n_iter: int = 24
    n_subsets: int = 72
    derenzo_trues: Optional[float] = None   # detected coincidences (default per size)
    point_trues: Optional[float] = None
    backend: str = "auto"
    seed: int = 2026
    progress: bool = True


@dataclass
class DualHeadExperimentResult:
    config: DualHeadExperimentConfig
    scanner: DualHeadScanner
    model: object
    derenzo_truth: np.ndarray
    derenzo_info: object
    point_positions: np.ndarray          # (n, 3) x, y, z mm
    data_stats: dict
    derenzo: object = None               # ReconResult (images after 1 and n_iter iterations)
    points: object = None
    pv: dict = field(default_factory=dict)          # diameter -> PeakToValley (n_iter)
    pv_first: dict = field(default_factory=dict)    # ... after one iteration
    fwhm: list = field(default_factory=list)        # per point: dict from point_source_fwhm
    timings: dict = field(default_factory=dict)
    backend: str = "cpu"

    def fwhm_xyz(self) -> np.ndarray:
        """(n_points, 3) FWHM in mm along x (between the heads), y and z."""
        return np.array([[f["fwhm_mm"]["radial"], f["fwhm_mm"]["tangential"], f["fwhm_mm"]["axial"]]
                         for f in self.fwhm])

    def table_text(self) -> str:
        it = self.config.n_iter
        lines = [f"peak-to-valley after {it} iterations (1 iteration in brackets)", f"{'rod (mm)':>9} {'P/V':>16}"]
        for d in self.derenzo_info.diameters_mm:
            if d in self.pv:
                lines.append(f"{d:>9.2f} {self.pv[d].ratio_text():>7} ({self.pv_first[d].ratio_text():>6})")
        lines += ["", f"point-source FWHM after {it} iterations (mm)",
                  f"{'x (mm)':>7} {'z (mm)':>7} {'x':>6} {'y':>6} {'z':>6}"]
        for p, f in zip(self.point_positions, self.fwhm_xyz()):
            lines.append(f"{p[0]:>7.1f} {p[2]:>7.1f} {f[0]:>6.2f} {f[1]:>6.2f} {f[2]:>6.2f}")
        lines += ["", f"time per OSEM iteration ({self.config.n_subsets} subsets): "
                      f"{self.timings.get('seconds_per_iteration', float('nan')) * 1e3:.0f} ms"]
        return "\n".join(lines)


def scanner_for(size: str) -> DualHeadScanner:
    if size not in SIZES:
        raise ValueError(f"size: expected one of {sorted(SIZES)}, got {size!r}")
    return DualHeadScanner(**SIZES[size][0])


def point_positions(scanner: DualHeadScanner) -> np.ndarray:
    """Point sources across the planes: x from -0.8 to 0.8 of the half gap in 7 steps, y = 0, z staggered
    (neighbours 10 mm or more apart), all on voxel centres."""
    g = scanner.grid
    half = 0.5 * (scanner.n_planes - 1) * scanner.plane_mm
    xs = np.linspace(-0.8 * half, 0.8 * half, 7)
    zs = np.array([-1, 1, -1, 1, -1, 1, -1]) * min(6.0, 0.3 * 0.5 * g.nz * g.voxel_size[0])
    pos = np.stack([xs, np.zeros_like(xs), zs], axis=1)
    # voxel centres: y and z lattices are offset by half a voxel (even counts), x planes are not
    for axis, grid_axis in ((0, 2), (1, 1), (2, 0)):
        c = g.centres(grid_axis)
        pos[:, axis] = c[np.argmin(np.abs(c[None, :] - pos[:, axis, None]), axis=1)]
    return pos


def _point_image(scanner: DualHeadScanner, positions: np.ndarray) -> np.ndarray:
    img = np.zeros(scanner.grid.shape, np.float32)
    iz, iy, ix = scanner.grid.index_of(positions[:, 2], positions[:, 1], positions[:, 0])
    img[iz, iy, ix] = 1.0
    return img


def _simulate(scanner, activity, trues, seed, backend, progress):
    """Monte Carlo LOR counts with exactly ``trues`` detected coincidences."""
    return simulate_events(scanner, activity, seed=seed, n_trues=int(round(trues)), backend=backend,
                           progress=progress)


def run_dualhead_experiment(cfg: DualHeadExperimentConfig = DualHeadExperimentConfig()) -> DualHeadExperimentResult:
    """Build the model, simulate, reconstruct, analyse (see the module docstring)."""
    scanner = scanner_for(cfg.size)
    _, radius, default_derenzo, default_points = SIZES[cfg.size]
    backend = resolve_backend(cfg.backend)
    xp = np
    if backend == "cuda":
        try:
            import cupy as xp  # optional: keeps data and images on the GPU
        except ImportError:
            xp = np
    grid = scanner.grid
    t0 = time.perf_counter()
    model = build_patch_model(scanner, backend=backend)
    timings = {"model_s": time.perf_counter() - t0}

    half_x = 0.5 * scanner.n_planes * scanner.plane_mm
    truth, info = derenzo_phantom(grid, radius_mm=radius, length_mm=min(20.0, 1.4 * half_x), axis="x")
    positions = point_positions(scanner)

    t0 = time.perf_counter()
    trues_d = default_derenzo if cfg.derenzo_trues is None else cfg.derenzo_trues
    trues_p = default_points if cfg.point_trues is None else cfg.point_trues
    counts_d, st_d = _simulate(scanner, truth, trues_d, cfg.seed, backend, cfg.progress)
    counts_p, st_p = _simulate(scanner, _point_image(scanner, positions), trues_p, cfg.seed + 7, backend,
                               cfg.progress)
    timings["simulation_s"] = time.perf_counter() - t0

    projector = DualHeadProjector(model, "default", backend=backend, check_finite=False)
    out = DualHeadExperimentResult(cfg, scanner, model, truth, info, positions,
                                   {"derenzo": st_d, "points": st_p}, timings=timings, backend=backend)
    runs = []
    for counts in (counts_d, counts_p):
        data = DualHeadData(scanner, xp.asarray(counts))
        problem = DualHeadSubsets(projector, data, cfg.n_subsets, skip_zero_counts=True)
        first = []

        def keep_first(it, sub, x, last=problem.order()[-1]):
            if it == 1 and sub == last:
                first.append(to_numpy(x))

        res = recon.osem(problem, cfg.n_iter, callback=keep_first, progress=cfg.progress)
        res.image = to_numpy(res.image)
        res.images, res.image_iterations = [first[0], res.image], [1, res.n_iter]
        runs.append(res)
    out.derenzo, out.points = runs
    timings["seconds_per_iteration"] = float(np.median(runs[0].iteration_times))
    out.pv = analysis.peak_to_valley(analysis.rod_profiles(runs[0].images[-1], grid, info))
    out.pv_first = analysis.peak_to_valley(analysis.rod_profiles(runs[0].images[0], grid, info))
    # frame of point_source_fwhm for points at y = 0: radial = x, tangential = y, axial = z
    out.fwhm = [analysis.point_source_fwhm(runs[1].images[-1], grid, p, half_width_mm=6.0) for p in positions]
    return out


def line_profile(image, scanner: DualHeadScanner, y_mm: float, x_half_mm: float = 5.0):
    """Profile along z at ``y = y_mm`` (nearest voxel row), averaged over the planes with |x| <= x_half_mm.

    Returns ``(z_mm (n_z D,), values)``.
    """
    g = scanner.grid
    img = to_numpy(image)
    iy = int(np.argmin(np.abs(g.centres(1) - y_mm)))
    planes = np.flatnonzero(np.abs(g.centres(2)) <= x_half_mm + 1e-9)
    return g.centres(0), img[:, iy, planes].mean(axis=1)


def transverse_slice(image, scanner: DualHeadScanner, y_mm: float) -> np.ndarray:
    """The (z, x) slice at ``y = y_mm`` (nearest voxel row)."""
    g = scanner.grid
    iy = int(np.argmin(np.abs(g.centres(1) - y_mm)))
    return to_numpy(image)[:, iy, :]


def write_dualhead_figures(result: DualHeadExperimentResult, out_dir: str) -> list:
    """Derenzo slices (x = 0 plane and the paper's y slices, 1 and n_iter iterations), profiles at
    y = 11.7 / -2.7 mm and per rod group, and the point-source FWHM against x (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    s, g, info = result.scanner, result.scanner.grid, result.derenzo_info
    names = ("dualhead_derenzo.png", "dualhead_profiles.png", "dualhead_rod_profiles.png", "dualhead_fwhm.png")
    paths = [os.path.join(out_dir, n) for n in names]
    r = result.derenzo
    images = ((result.derenzo_truth, "truth"), (r.images[0], "1 iteration"),
              (r.images[-1], f"{r.image_iterations[-1]} iterations"))
    ext_yz = [g.centres(1)[0], g.centres(1)[-1], g.centres(0)[0], g.centres(0)[-1]]
    ext_xz = [g.centres(2)[0], g.centres(2)[-1], g.centres(0)[0], g.centres(0)[-1]]
    view = info.radius_mm + 3.0
    p_mid = s.n_planes // 2
    fig, axes = plt.subplots(1 + len(PROFILE_Y_MM), 3, figsize=(11, 3.4 * (1 + len(PROFILE_Y_MM))), squeeze=False)
    for col, (img, title) in enumerate(images):
        ax = axes[0, col]
        ax.imshow(img[:, :, p_mid], origin="lower", cmap="gray_r", extent=ext_yz)
        ax.set_xlim(-view, view)
        ax.set_ylim(-view, view)
        ax.set_title(f"{title}: plane x = 0", fontsize=9)
        ax.set_xlabel("y (mm)")
        ax.set_ylabel("z (mm)")
        for row, y in enumerate(PROFILE_Y_MM, start=1):
            ax = axes[row, col]
            ax.imshow(transverse_slice(img, s, y), origin="lower", cmap="gray_r", extent=ext_xz, aspect="auto")
            ax.set_ylim(-view, view)
            ax.set_title(f"{title}: slice y = {y:g} mm", fontsize=9)
            ax.set_xlabel("x (mm, between the heads)")
            ax.set_ylabel("z (mm)")
    fig.tight_layout()
    fig.savefig(paths[0], dpi=90)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(PROFILE_Y_MM), figsize=(11, 3.6), squeeze=False)
    for ax, y in zip(axes[0], PROFILE_Y_MM):
        for img, title in images:
            z, v = line_profile(img, s, y)
            ax.plot(z, v / max(v.max(), 1e-12), label=title)
        ax.set_xlim(-view, view)
        ax.set_title(f"profile along z at y = {y:g} mm (|x| <= 5 mm)", fontsize=9)
        ax.set_xlabel("z (mm)")
        ax.set_ylabel("normalised")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=90)
    plt.close(fig)

    diameters = [d for d in info.diameters_mm if d in result.pv]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, d in zip(axes.ravel(), diameters):
        for img, title, pv in ((r.images[0], "1 iteration", result.pv_first),
                               (r.images[-1], f"{r.image_iterations[-1]} iterations", result.pv)):
            prof = analysis.rod_profiles(img, g, info)[d]
            ax.plot(prof.distance_mm, prof.values, label=f"{title} (P/V {pv[d].ratio_text()})")
        ax.set_title(f"{d:g} mm rods", fontsize=9)
        ax.set_xlabel("distance along the profile (mm)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=90)
    plt.close(fig)

    f = result.fwhm_xyz()
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, axis in enumerate(("x (between the heads)", "y", "z")):
        ax.plot(result.point_positions[:, 0], f[:, k], "o-", label=axis)
    ax.set_xlabel("plane x of the point source (mm)")
    ax.set_ylabel("FWHM (mm)")
    ax.set_title(f"point sources after {result.config.n_iter} iterations", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[3], dpi=90)
    plt.close(fig)
    return paths


__all__ = ["DualHeadExperimentConfig", "DualHeadExperimentResult", "PROFILE_Y_MM", "SIZES", "line_profile",
           "point_positions", "run_dualhead_experiment", "scanner_for", "transverse_slice",
           "write_dualhead_figures"]
