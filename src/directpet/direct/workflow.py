"""From a PETSIRD list-mode file to a reconstructed image in one call (``directpet reconstruct``).

:func:`reconstruct_petsird` runs the real-data workflow of ``notebooks/real_data_workflow.ipynb``
stage by stage, timing each one: the prompts and the delayeds read and deposited into the views'
histo-images in one pass over the file (compiled: no event batches in between), the delayeds smoothed
into the randoms estimate, the normalisation from the header's crystal
efficiencies, the attenuation from a μ-map, an optional external scatter estimate, the
reconstruction (block-RAMLA or OSEM over the views) and, when asked, the image written as NIfTI.
Everything stays in one array namespace: CuPy on a GPU, NumPy on the CPU.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._backend import resolve_backend
from .._device import array_namespace
from .._checks import check_path, expect_instance, flag, positive_int, real_number, synchronize
from ..geometry import ImageGrid
from .attenuation import attenuation_histo_images
from .data import HistoImageData
from .deposition import sensitivity_attenuation, smooth_randoms
from .geometry import CylindricalScanner, ViewSet
from .model import SRKernel
from .normalisation import normalisation_histo_images
from .select import DEFAULT_ACCURACY, METHODS as PROJECTOR_METHODS, check_accuracy, select_projector
from .subsets import ViewSubsets

ALGORITHMS = ("block_ramla", "osem", "bsrem")


@dataclass
class PetsirdReconstruction:
    """What :func:`reconstruct_petsird` returns.

    Attributes
    ----------
    image : the reconstructed image ``grid.shape`` = (nz, ny, nx), float32 NumPy.
    grid : its :class:`~directpet.geometry.ImageGrid`.
    result : the reconstruction's :class:`~directpet.recon.ReconResult` (arrays in the namespace it ran in).
    timings : seconds per stage, in the order run: ``events`` (the prompts and delayeds read and
        deposited, one pass over the file), ``randoms`` (the delayeds smoothed), ``normalisation``,
        ``sensitivity`` (the views' geometric acceptance), ``attenuation``, ``scatter``,
        ``reconstruction``, ``write`` (those run).
    wall_s : seconds of the whole call (the stages and everything between them:
        the factors multiplied, the data checked, the projector set up).
    n_prompts, n_deposited, n_delayeds : events read, prompts deposited (inside the views and the grid),
        delayeds read.
    backend : 'cuda' or 'cpu'.
    path : the NIfTI file written, or None.
    projector : the :class:`~directpet.direct.select.ProjectorChoice` (which DIRECT projector, its
        model error, the candidates' times).
    """

    image: np.ndarray
    grid: ImageGrid
    result: object
    timings: dict = field(default_factory=dict)
    wall_s: float = 0.0
    n_prompts: int = 0
    n_deposited: int = 0
    n_delayeds: int = 0
    backend: str = "cpu"
    path: Optional[str] = None
    projector: object = None

    def summary(self) -> str:
        """The timing of every stage, of the rest of the call (``other``) and of the whole call, one line each."""
        total = max(self.wall_s, sum(self.timings.values()))
        lines = [f"{name:<15} {seconds:8.2f} s" for name, seconds in self.timings.items()]
        lines.append(f"{'other':<15} {total - sum(self.timings.values()):8.2f} s")
        lines.append(f"{'total':<15} {total:8.2f} s  ({self.n_prompts:,} prompts, {self.n_delayeds:,} delayeds, "
                     f"{self.backend})")
        if self.projector is not None:
            lines.append(self.projector.summary())
        return "\n".join(lines)


def _mu_map(mu, mu_grid):
    """(array, grid) of the attenuation map: a NIfTI path (its own grid), or an array with its grid."""
    if isinstance(mu, (str, os.PathLike)):
        from ..io import load_nifti

        return load_nifti(mu)
    if mu_grid is None:
        raise ValueError("mu_grid: an attenuation map given as an array needs its ImageGrid")
    expect_instance(mu_grid, ImageGrid, "mu_grid")
    return mu, mu_grid


def reconstruct_petsird(path, grid: ImageGrid, *, viewset: Optional[ViewSet] = None,
                        scanner: Optional[CylindricalScanner] = None, kernel: Optional[SRKernel] = None,
                        mu=None, mu_grid: Optional[ImageGrid] = None, scatter=None, algorithm: str = "block_ramla",
                        n_iter: int = 10, subsets=None, rdp_b: float = 3e-4, init_iter: int = 2,
                        randoms_fwhm_mm: Optional[float] = None,
                        attenuation_n_sub: int = 2, normalisation_n_sub: int = 2, backend: str = "auto",
                        projector: str = "auto", model_accuracy: float = DEFAULT_ACCURACY,
                        out=None, progress: bool = True) -> PetsirdReconstruction:
    """Reconstruct a PETSIRD list-mode file of a ring scanner into an image on ``grid``.

    Parameters
    ----------
    path : the PETSIRD file (``.petsird``), prompts and (optionally) delayeds, with TOF.
    grid : the reconstruction lattice (:class:`~directpet.geometry.ImageGrid`, mm).
    viewset : the DIRECT views (default ``scanner.viewset(40, 3)``, the paper's 120 views).
    scanner : the :class:`CylindricalScanner` the file's header describes (its acceptance and
        axial length; default: the default scanner). The crystals and TOF bins come from the file.
    kernel : the system-response kernel (default ``scanner.kernel()``).
    mu : the attenuation map in 1/mm: a NIfTI path (read with its grid) or an array with ``mu_grid``;
        None: no attenuation correction.
    scatter : an external scatter estimate, histo-images ``(n_views, nz, ny, nx)`` (counts per view
        cell, the prompts' scale), added to the randoms as background; None: none.
    algorithm : 'block_ramla' (default; one view per subset, [HA]), 'osem', or 'bsrem': penalised
        likelihood with the relative difference prior (:func:`~directpet.recon.bsrem`, gamma = 2,
        epsilon = 1e-3 of the start image's mean, strength ``beta = rdp_b * mean sensitivity``),
        started from ``init_iter`` block-RAMLA passes.
    n_iter : passes through the data (BSREM's passes for 'bsrem', after the ``init_iter`` ones).
    subsets : as :class:`ViewSubsets` (None: one view per subset; an int k: k interleaved blocks).
    rdp_b : the prior's strength relative to the data's curvature (about 1e-4 to 1e-3 for DIRECT at
        [HA]'s size: larger, smoother; benchmarks/RESULTS.md section 10). 'bsrem' only.
    init_iter : block-RAMLA passes BSREM starts from. 'bsrem' only.
    randoms_fwhm_mm : Gaussian smoothing of the randoms estimate (default 3 voxels of ``grid``).
    attenuation_n_sub, normalisation_n_sub : directions per view-cell edge averaged for the factors.
    backend : 'auto' (the GPU when usable), 'cpu' or 'cuda'.
    projector : the DIRECT projector, as :func:`~directpet.direct.select_projector`'s ``method``:
        'auto' (default: the fastest that meets ``model_accuracy``, timed on this machine),
        'spatial', 'fft' or 'lowrank'.
    model_accuracy : the relative kernel error an approximate projector may have (default 1e-4).
    out : a ``.nii`` / ``.nii.gz`` path to write the image to (None: not written).
    progress : progress bars for the reading and the reconstruction.

    Returns
    -------
    PetsirdReconstruction : the image (NumPy), the ReconResult, seconds per stage (``summary()``).
    """
    from .. import recon
    from . import petsird as direct_petsird

    expect_instance(grid, ImageGrid, "grid")
    scanner = CylindricalScanner() if scanner is None else scanner
    expect_instance(scanner, CylindricalScanner, "scanner")
    viewset = scanner.viewset(40, 3) if viewset is None else viewset
    expect_instance(viewset, ViewSet, "viewset")
    kernel = scanner.kernel() if kernel is None else kernel
    expect_instance(kernel, SRKernel, "kernel")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {ALGORITHMS}, got {algorithm!r}")
    if projector not in PROJECTOR_METHODS:
        raise ValueError(f"projector: expected one of {PROJECTOR_METHODS}, got {projector!r}")
    model_accuracy = check_accuracy("model_accuracy", model_accuracy)
    n_iter = positive_int("n_iter", n_iter)
    rdp_b = real_number("rdp_b", rdp_b, positive=True)
    init_iter = positive_int("init_iter", init_iter)
    progress = flag("progress", progress)
    if randoms_fwhm_mm is None:
        randoms_fwhm_mm = 3 * min(grid.voxel_size)
    randoms_fwhm_mm = real_number("randoms_fwhm_mm", randoms_fwhm_mm, nonnegative=True)
    if out is not None and not str(out).endswith((".nii", ".nii.gz")):
        raise ValueError(f"out: expected a .nii or .nii.gz path, got {str(out)!r}")
    path = check_path(path, "path")
    if mu is not None:
        mu, mu_grid = _mu_map(mu, mu_grid)
    backend = resolve_backend(backend)
    # CuPy where importable on the GPU: every stage keeps its arrays there; otherwise NumPy (the CPU, or
    # CUDA projectors fed from NumPy)
    xp = array_namespace(backend)

    def sync():
        synchronize(xp)
    if scatter is not None:
        expected = (len(viewset),) + grid.shape
        if tuple(scatter.shape) != expected:
            raise ValueError(f"scatter: expected histo-images of shape {expected}, got {tuple(scatter.shape)}")

    timings = {}
    call_start = time.perf_counter()

    def timed(name, run):
        t0 = time.perf_counter()
        value = run()
        sync()
        timings[name] = time.perf_counter() - t0
        return value

    # one pass over the file: prompts and delayeds read, decoded and deposited in compiled code
    events = timed("events", lambda: direct_petsird.deposit_prompts_and_delayeds(path, grid, viewset, xp=xp,
                                                                                   progress=progress))
    prompts, header = events.prompts, events.header
    background = timed("randoms", lambda: smooth_randoms(events.delayeds, grid, smooth_fwhm_mm=randoms_fwhm_mm))
    n_delayeds = events.delayed_stats.n_events
    events.delayeds = None          # the smoothed estimate replaces it
    if n_delayeds == 0:
        background = None          # a file without delayeds: no randoms estimate
    normalisation = timed("normalisation", lambda: normalisation_histo_images(
        header, grid, viewset, scanner=scanner, n_sub=normalisation_n_sub, xp=xp))
    factors = timed("sensitivity", lambda: sensitivity_attenuation(grid, viewset, scanner=scanner, xp=xp)) * normalisation
    if mu is not None:
        attenuation = timed("attenuation", lambda: attenuation_histo_images(
            xp.asarray(mu, dtype=xp.float32), mu_grid, grid, viewset, n_sub=attenuation_n_sub))
        factors = factors * attenuation
    if scatter is not None:
        def add_scatter():
            s = xp.asarray(scatter, dtype=xp.float32)
            return s if background is None else background + s

        background = timed("scatter", add_scatter)
    data = HistoImageData(prompts, grid, viewset, factors=factors.astype(xp.float32),
                          background=None if background is None else background.astype(xp.float32),
                          kernel=kernel, scanner=scanner)
    op = timed("projector", lambda: select_projector(grid, viewset, kernel, method=projector,
                                                      accuracy=model_accuracy, backend=backend))
    problem = ViewSubsets(op, data, subsets)
    def reconstruct():
        if algorithm == "osem":
            return recon.osem(problem, n_iter, progress=progress)
        if algorithm == "block_ramla":
            return recon.block_ramla(problem, n_iter, progress=progress)
        start = recon.block_ramla(problem, init_iter, progress=progress).image
        prior = recon.RelativeDifferencePrior(rdp_b * float(recon.sensitivity_image(problem).mean()), grid,
                                              gamma=2.0, epsilon=1e-3 * max(float(start.mean()), 1e-30))
        return recon.bsrem(problem, prior, n_iter, x0=start, progress=progress)

    result = timed("reconstruction", reconstruct)
    image = np.asarray(result.image.get() if hasattr(result.image, "get") else result.image, dtype=np.float32)
    written = None
    if out is not None:
        from ..io import save_nifti

        written = timed("write", lambda: str(save_nifti(out, image, grid)))
    return PetsirdReconstruction(image=image, grid=grid, result=result, timings=timings,
                                 wall_s=time.perf_counter() - call_start,
                                 n_prompts=int(events.prompt_stats.n_events),
                                 n_deposited=int(events.prompt_stats.n_deposited),
                                 n_delayeds=n_delayeds, backend=backend, path=written, projector=op.choice)
