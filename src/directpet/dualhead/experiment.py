"""The dual-head reconstruction experiment (:ref:`physics-dualhead`): the micro Deluxe Derenzo phantom with
its rods along x (perpendicular to the heads) and a set of point sources across the planes, through
the stationary dual-head scanner, reconstructed with OSEM over the paper's random orientation
subsets.

Data come from the event Monte Carlo (:func:`~directpet.dualhead.simulate`: positron range,
acollinearity, penetration through the crystal array with exponential depth of interaction, the
finite front layer), not from the reconstruction model (the analytic multi-ray patches of
:func:`~directpet.dualhead.build_patch_model`): no inverse crime. OSEM uses 72 subsets of random
orientation classes (104 each at full size) with the zero-count skip. Reported: images after 1 and
``n_iter`` iterations, profiles along z at the paper's lines y = 11.7 mm and y = -2.7 mm, profiles
through each rod group with their peak-to-valley ratios, point-source FWHM in x (between the heads:
the depth-of-interaction and limited-angle blur), y and z against the plane, and the time per
iteration, for each projector method asked for (``'default'``; the paper's ``'alg1'`` .. ``'alg3'``
on CUDA); with ``bsrem_betas``, BSREM with the relative difference prior from the OSEM image and its
peak-to-valley against noise. The analysis, the table and the figure helpers are shared with the FIRST experiment
(:mod:`directpet.analysis.experiments`).

Used by ``directpet demo dualhead`` and ``notebooks/dual_head.ipynb``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .._backend import resolve_backend
from .._checks import to_numpy
from ..analysis import experiments as shared
from ..sim import derenzo_phantom
from .data import DualHeadData
from .geometry import DualHeadScanner
from .monte_carlo import simulate
from .projector import CUDA_ONLY, METHODS, DualHeadProjector
from .response import build_patch_model
from .subsets import DualHeadSubsets

#: name -> (scanner parameters, Derenzo radius (mm), detected Derenzo trues, detected point-source trues)
SIZES = {
    # CI and the notebook: 24 x 18 crystals, 1.2 mm voxels, 29 planes of 1 mm
    "tiny": (dict(n_y=24, n_z=18, voxels_per_crystal=2, n_planes=29, plane_mm=1.0), 16.0, 3e6, 1e6),
    # the notebook's and the CPU demo's size: tiny's heads with 0.8 mm voxels, which sample the rods
    # down to 1.35 mm (tiny's 1.2 mm voxels alias all but the largest), and 1e7 trues: ~40 s on 2 cores
    "cpu": (dict(n_y=24, n_z=18, voxels_per_crystal=3, n_planes=49, plane_mm=0.6), 16.0, 1e7, 1e6),
    # half the paper's heads at its voxel size
    "small": (dict(n_y=52, n_z=36), 16.0, 4.3e7, 5e6),
    # the paper: 104 x 72 crystals, 119 x 416 x 288 voxels, 1.72e8 true events
    "full": (dict(), 16.0, 1.72e8, 2e7),
}

#: the paper's transverse slices and profile lines ([DH], :ref:`physics-dualhead`)
PROFILE_Y_MM = (11.7, -2.7)


@dataclass
class ExperimentConfig(shared.ExperimentConfigBase):
    """The dual-head experiment's settings (``size``: a key of :data:`SIZES`; see
    :class:`~directpet.analysis.experiments.ExperimentConfigBase` for the common ones).

    derenzo_trues, point_trues : detected Monte Carlo coincidences of each phantom (None: the size's preset).
    """

    size: str = "tiny"
    methods: Sequence[str] = ("default",)
    n_subsets: int = 72
    derenzo_trues: Optional[float] = None
    point_trues: Optional[float] = None


class ExperimentResult(shared.ExperimentResult):
    """The dual-head experiment's outcome (``model``: the PatchModel). The point sources sit at
    y = 0, so their radial / tangential / axial FWHM are along x (between the heads), y and z."""

    FWHM_AXES = ("x (between the heads)", "y", "z")

    def point_labels(self):
        return "x, z (mm)", [f"{p[0]:.1f}, {p[2]:.1f}" for p in self.point_positions]


def scanner_for(size: str) -> DualHeadScanner:
    """The DualHeadScanner of a size of :data:`SIZES`."""
    return shared.preset_scanner(SIZES, size, DualHeadScanner)


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


def run_experiment(config: ExperimentConfig = ExperimentConfig()) -> ExperimentResult:
    """Build the model, simulate, reconstruct with each method, analyse (see the module docstring)."""
    cfg = config
    betas, arms = shared.check_bsrem_arm(cfg.bsrem_betas, cfg.bsrem_passes, cfg.bsrem_methods, cfg.methods)
    backend = resolve_backend(cfg.backend)
    scanner, (radius, default_derenzo, default_points), xp = shared.prepare(cfg, SIZES, DualHeadScanner, METHODS,
                                                                           backend, CUDA_ONLY)
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
    counts_d, st_d = simulate(scanner, truth, n_trues=int(round(trues_d)), seed=cfg.seed, backend=backend,
                              progress=cfg.progress)
    counts_p, st_p = simulate(scanner, _point_image(scanner, positions), n_trues=int(round(trues_p)),
                              seed=cfg.seed + 7, backend=backend, progress=cfg.progress)
    timings["simulation_s"] = time.perf_counter() - t0

    def problem(method, data):
        projector = DualHeadProjector(model, method, backend=backend, check_finite=False)
        return DualHeadSubsets(projector, data, cfg.n_subsets, skip_zero_counts=True)

    # the frame of point_source_fwhm for points at y = 0: radial = x, tangential = y, axial = z
    methods = shared.reconstruct_methods(cfg.methods, problem, DualHeadData(scanner, xp.asarray(counts_d)),
                                         DualHeadData(scanner, xp.asarray(counts_p)), cfg.n_iter, cfg.progress,
                                         grid, info, positions, half_width_mm=6.0,
                                         bsrem_betas=betas, bsrem_passes=cfg.bsrem_passes, bsrem_methods=arms)
    return ExperimentResult(cfg, scanner, model, truth, info, positions, {"derenzo": st_d, "points": st_p}, methods,
                            timings=timings, backend=backend)


def line_profile(image, scanner: DualHeadScanner, y_mm: float, x_half_mm: float = 5.0):
    """Profile along z at ``y = y_mm`` (nearest voxel row), averaged over the planes with
    ``abs(x) <= x_half_mm``.

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


def write_figures(result: ExperimentResult, outdir: str) -> list:
    """Derenzo slices per method (the x = 0 plane and the paper's y slices, 1 and n_iter iterations),
    profiles along z at y = 11.7 / -2.7 mm, profiles per rod group and the point-source FWHM against
    the plane x: ``dualhead_derenzo.png``, ``dualhead_profiles.png``, ``dualhead_rod_profiles.png``,
    ``dualhead_fwhm.png`` in ``outdir``, and with a penalised arm ``dualhead_bsrem_sweep.png``
    (peak-to-valley against noise). Returns their paths."""
    s, g, info = result.scanner, result.scanner.grid, result.derenzo_info
    view = (-(info.radius_mm + 3.0), info.radius_mm + 3.0)
    plane = dict(extent=[g.centres(1)[0], g.centres(1)[-1], g.centres(0)[0], g.centres(0)[-1]], xlim=view, ylim=view,
                 xlabel="y (mm)", ylabel="z (mm)")
    across = dict(extent=[g.centres(2)[0], g.centres(2)[-1], g.centres(0)[0], g.centres(0)[-1]], ylim=view,
                  aspect="auto", xlabel="x (mm, between the heads)", ylabel="z (mm)")
    p_mid = s.n_planes // 2
    rows = []
    for m in result.methods:
        images = shared.iteration_images(result, m)
        rows.append(([(img[:, :, p_mid], f"{title}: plane x = 0") for img, title in images], plane))
        rows += [([(transverse_slice(img, s, y), f"{title}: slice y = {y:g} mm") for img, title in images], across)
                 for y in PROFILE_Y_MM]
    paths = [shared.slice_figure(os.path.join(outdir, "dualhead_derenzo.png"), rows)]

    plt = shared.pyplot()
    curves = [(result.derenzo_truth, "truth")]
    for m in result.methods:
        curves += shared.iteration_images(result, m)[1:]
    fig, axes = plt.subplots(1, len(PROFILE_Y_MM), figsize=(11, 3.6), squeeze=False)
    for ax, y in zip(axes[0], PROFILE_Y_MM):
        for img, title in curves:
            z, v = line_profile(img, s, y)
            ax.plot(z, v / max(v.max(), 1e-12), label=title)
        ax.set_xlim(*view)
        ax.set_title(f"profile along z at y = {y:g} mm (|x| <= 5 mm)", fontsize=9)
        ax.set_xlabel("z (mm)")
        ax.set_ylabel("activity / profile maximum")
        ax.legend(fontsize=7)
    paths.append(shared.save_figure(fig, os.path.join(outdir, "dualhead_profiles.png")))

    curves = []
    for m, r in result.methods.items():
        curves += [(f"{m}: 1 iteration", r.derenzo.images[0], r.pv_first),
                   (f"{m}: {r.derenzo.image_iterations[-1]} iterations", r.derenzo.images[-1], r.pv)]
    paths.append(shared.rod_profile_figure(os.path.join(outdir, "dualhead_rod_profiles.png"), g, info, curves))
    paths.append(shared.fwhm_figure(os.path.join(outdir, "dualhead_fwhm.png"), result, result.point_positions[:, 0],
                                    "plane x of the point source (mm)"))
    if any(r.bsrem for r in result.methods.values()):
        paths.append(shared.bsrem_figure(os.path.join(outdir, "dualhead_bsrem_sweep.png"), result))
    return paths


__all__ = ["ExperimentConfig", "ExperimentResult", "PROFILE_Y_MM", "SIZES", "line_profile", "point_positions",
           "run_experiment", "scanner_for", "transverse_slice", "write_figures"]
