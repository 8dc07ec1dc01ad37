"""The DIRECT reconstruction experiment of [HA] section 6, simulated (:ref:`physics-evaluation`, :ref:`physics-phantoms`).

A 35 cm water cylinder with six 10 mm spheres (6:1) at 7.5 cm radius in the central slice is
simulated as list-mode TOF events (400 ps, 5.8 mm intrinsic blur, attenuation), deposited into
40 x 3 view histo-images, and reconstructed with block-RAMLA for several SR-kernel models:
the invariant kernel through the FFT projector and through the spatial projector, and the
variant kernels through the spatial projector. Contrast recovery and noise are computed exactly as
the paper does, compared at matched noise, and plotted.

``run_experiment`` is used by ``directpet demo`` (small size on a CPU, paper size on a GPU) and by
the notebook ``notebooks/direct_reconstruction.ipynb``. ``noise_realisation_job`` and
``ha_noise_jobs`` are the same experiment as a sweep over noise realisations (one job = one seed and
one kernel model) for :func:`directpet.parallel.run_sweep` (``benchmarks/sweep_ha.py``). Both go
through ``simulate_study`` and ``reconstruct_kernel``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .. import analysis, recon, sim
from .._backend import resolve_backend
from .._checks import to_numpy
from .._device import array_namespace
from ..analysis.experiments import check_bsrem_arm
from ..geometry import ImageGrid
from .deposition import simulate_histo_images
from .fft import FFTProjector
from .geometry import CylindricalScanner
from .model import SRKernel
from .projector import HistoImageProjector
from .subsets import ViewSubsets

#: Kernel models of [HA] Fig. 8 / 10: label -> (projector kind, kernel)
KERNEL_MODELS = {
    "invariant-fft": ("fft", lambda: SRKernel.invariant(400.0, 5.8)),
    "invariant": ("spatial", lambda: SRKernel.invariant(400.0, 5.8)),
    "variant1": ("spatial", lambda: SRKernel.clinical("variant1")),
    "variant2": ("spatial", lambda: SRKernel.clinical("variant2")),
    "variant3": ("spatial", lambda: SRKernel.clinical("variant3")),
}

SIZES = {
    # name: (grid shape, voxel mm, default prompts). The reduced sizes keep all the phantom's
    # activity inside their axial field (so edge slices are not fed by activity the model cannot
    # see) and about the paper's counts per slice (430 M over 48 slices), so that the noise and
    # contrast evolve over the passes roughly as at paper size.
    "tiny": ((8, 96, 96), 4.0, 72_000_000),
    # the notebook's size on a CPU: tiny's grid with 20 M prompts, so that 10 passes of the five
    # kernel models reach the matched noise and finish in about a minute on 2 cores
    "cpu": ((8, 96, 96), 4.0, 20_000_000),
    "small": ((16, 96, 96), 4.0, 143_000_000),
    "paper": ((48, 144, 144), 4.0, 430_000_000),
}


@dataclass
class ExperimentConfig:
    """The settings of :func:`run_experiment`.

    ``size`` is a key of :data:`SIZES`; ``n_events`` the number of simulated prompts (None: the
    size's default); ``n_iter`` the block-RAMLA passes; ``kernels`` the labels of
    :data:`KERNEL_MODELS` to reconstruct with; ``backend`` 'auto' | 'cpu' | 'cuda'; ``lambda0`` and
    ``gamma`` the relaxation ``lambda_n = lambda0 / (1 + gamma (n - 1))``; ``target_noise`` the
    relative noise (0.08 = 8 %) at which the models are compared; ``seed`` the noise realisation;
    ``progress`` shows progress bars.

    ``bsrem_betas`` (default none) adds a penalised arm: for each kernel model and each relative
    weight b, BSREM with the relative difference prior (``gamma = 2``, ``beta = b * mean(S)`` with S
    the sensitivity image, ``epsilon = 1e-3`` of the mean activity), ``bsrem_passes`` passes over the
    same one-view subsets from the model's last block-RAMLA image; each b gives one (noise, CRC)
    point of the curve that Q.Clear-type studies compare (:func:`bsrem_sweep`). ``bsrem_kernels``
    picks the kernel models that get it (None: every one of ``kernels``).
    """

    size: str = "small"
    n_events: Optional[int] = None
    n_iter: int = 30
    kernels: Sequence[str] = ("invariant-fft", "invariant", "variant1")
    backend: str = "auto"
    lambda0: float = 0.03  # block_ramla's calibrated default (see its docstring)
    gamma: float = 0.05
    target_noise: float = 0.08
    seed: int = 2026
    progress: bool = True
    bsrem_betas: Sequence[float] = ()
    bsrem_passes: int = 10
    bsrem_kernels: Optional[Sequence[str]] = None


@dataclass
class ExperimentResult:
    """The outcome of :func:`run_experiment`.

    ``truth`` is the ``(nz, ny, nx)`` activity image on ``grid``, ``phantom`` the phantom's ROI
    description, ``data`` the simulated histo-image data; per kernel label, ``results`` holds the
    :class:`~directpet.recon.ReconResult` (images as NumPy), ``curves`` the contrast-noise curves
    and ``matched`` the CRC at the matched noise level; ``timings`` are wall times in seconds and
    ``backend`` the backend actually used.
    """

    config: ExperimentConfig
    grid: ImageGrid
    phantom: object
    truth: np.ndarray
    data: object
    results: dict = field(default_factory=dict)     # label -> ReconResult (images as NumPy)
    curves: list = field(default_factory=list)      # ContrastNoiseCurve per label
    matched: list = field(default_factory=list)     # MatchedNoise per label
    timings: dict = field(default_factory=dict)     # seconds
    backend: str = "cpu"
    bsrem: dict = field(default_factory=dict)       # label -> [(b, noise, CRC), ...] of bsrem_sweep

    def table(self) -> str:
        """CRC and noise at matched noise and at the last iteration, one row per kernel model."""
        lines = [f"{'kernel':<14} {'iter@noise':>10} {'CRC@noise':>10} {'noise':>7}   {'CRC@last':>9} {'noise@last':>10} {'time/it':>8}"]
        for c, m in zip(self.curves, self.matched):
            r = self.results[c.label]
            it = f"{m.iteration:.1f}" if m.status == "ok" else m.status
            lines.append(f"{c.label:<14} {it:>10} {m.crc:>10.3f} {100 * m.noise:>6.1f}%   "
                         f"{c.crc[-1]:>9.3f} {100 * c.noise[-1]:>9.1f}% {r.time_s / r.n_iter:>7.2f}s")
        if self.bsrem:
            lines += ["", f"BSREM with the relative difference prior, {self.config.bsrem_passes} passes from the last "
                          f"block-RAMLA image (beta = b * mean sensitivity)",
                      f"{'kernel':<14} {'b':>8} {'CRC':>7} {'noise':>7}"]
            for label, points in self.bsrem.items():
                lines += [f"{label:<14} {b:>8g} {c:>7.3f} {100 * n:>6.1f}%" for b, n, c in points]
        return "\n".join(lines)


def make_projector(kind: str, grid, viewset, kernel, backend: str):
    """The projector of one kernel model: an :class:`~directpet.direct.FFTProjector` (mode
    'spatial-exact') for ``kind == 'fft'``, a :class:`~directpet.direct.HistoImageProjector`
    otherwise, on ``grid`` and the views of ``viewset`` with the SR-kernel ``kernel``."""
    if kind == "fft":
        return FFTProjector(grid, viewset, kernel, mode="spatial-exact", backend=backend, check_finite=False)
    return HistoImageProjector(grid, viewset, kernel, backend=backend, check_finite=False)


def _check_size(size: str, name: str = "size") -> None:
    if size not in SIZES:
        raise ValueError(f"{name}: expected one of {sorted(SIZES)}, got {size!r}")


def _check_kernel(label: str, name: str = "kernel") -> None:
    if label not in KERNEL_MODELS:
        raise ValueError(f"{name}: unknown model {label!r}; expected one of {sorted(KERNEL_MODELS)}")


@dataclass
class SimulatedStudy:
    """One noise realisation of the sphere-phantom data and the geometry it was simulated on.

    ``truth`` is the (nz, ny, nx) activity image, ``info`` the phantom's ROI description, ``data``
    the 40 x 3 view :class:`~directpet.direct.HistoImageData` (NumPy, or CuPy on the ``'cuda'``
    backend), ``seconds`` the wall time of the simulation (events, deposition, corrections).
    """

    size: str
    grid: ImageGrid
    truth: np.ndarray
    info: object
    scanner: CylindricalScanner
    viewset: object
    data: object
    backend: str
    seed: int
    seconds: float


def simulate_study(size: str = "small", n_events: Optional[int] = None, seed: int = 2026, backend: str = "auto",
                   progress: bool = True) -> SimulatedStudy:
    """Simulate the [HA] sphere phantom at one of :data:`SIZES` as TOF list-mode events deposited
    into 40 x 3 view histo-images, with the factors (sensitivity x attenuation; :ref:`physics-data`).

    ``n_events`` prompts (default: the size's, about the paper's counts per slice); ``seed`` picks
    the noise realisation (the same seed gives the same histo-images on the same backend);
    ``backend`` 'auto' | 'cpu' | 'cuda' (resolved here; the data live on that backend's arrays).
    """
    _check_size(size)
    backend = resolve_backend(backend)
    xp = array_namespace(backend)
    shape, voxel, default_events = SIZES[size]
    grid = ImageGrid(shape, voxel)
    length = min(250.0, grid.nz * voxel)        # the whole phantom inside the axial field (see SIZES)
    truth, info = sim.sphere_phantom(grid, length_mm=length)
    scanner = CylindricalScanner()
    viewset = scanner.viewset(40, 3)
    n_events = default_events if n_events is None else int(n_events)
    t0 = time.perf_counter()
    data = simulate_histo_images(scanner, info, n_events, grid=grid, viewset=viewset, seed=seed,
                                 kernel=scanner.kernel(), xp=xp, progress=progress)
    return SimulatedStudy(size, grid, truth, info, scanner, viewset, data, backend, seed,
                          time.perf_counter() - t0)


#: Projectors kept between calls of :func:`reconstruct_kernel` with ``cache_projector=True``, in
#: this process, keyed by (projector kind, kernel label, size, backend). A sweep worker runs many
#: jobs of the same few models, and building the LUTs (on the GPU) or the FFT plans costs more
#: than a small job's reconstruction. At most ``_PROJECTOR_CACHE_SIZE`` entries, the least
#: recently used evicted first; :func:`clear_projector_cache` empties it. A cached projector is
#: shared by the threads of a process: run one job per process at a time (``make_cluster`` gives
#: its workers one thread each) unless the projector is known to be thread safe.
_PROJECTOR_CACHE: "OrderedDict[tuple, object]" = OrderedDict()
_PROJECTOR_CACHE_SIZE = 8
_PROJECTOR_CACHE_LOCK = threading.Lock()


def clear_projector_cache() -> None:
    """Forget the projectors cached by :func:`reconstruct_kernel` (frees their LUTs / GPU memory)."""
    with _PROJECTOR_CACHE_LOCK:
        _PROJECTOR_CACHE.clear()


def _projector(label: str, study: SimulatedStudy, cache: bool):
    kind, make_kernel = KERNEL_MODELS[label]
    if not cache:
        return make_projector(kind, study.grid, study.viewset, make_kernel(), study.backend)
    key = (kind, label, study.size, study.backend)
    with _PROJECTOR_CACHE_LOCK:
        op = _PROJECTOR_CACHE.get(key)
        if op is not None:
            _PROJECTOR_CACHE.move_to_end(key)
            return op
    op = make_projector(kind, study.grid, study.viewset, make_kernel(), study.backend)
    with _PROJECTOR_CACHE_LOCK:
        _PROJECTOR_CACHE[key] = op
        while len(_PROJECTOR_CACHE) > _PROJECTOR_CACHE_SIZE:
            _PROJECTOR_CACHE.popitem(last=False)
    return op


@dataclass
class KernelReconstruction:
    """One kernel model's block-RAMLA reconstruction of a study and its contrast-noise curve.

    ``result`` is the :class:`~directpet.recon.ReconResult` (final and stored images as NumPy
    arrays, or no stored images when they were not kept), ``curve`` the CRC and noise of every
    stored iteration, ``seconds_projector`` the projector build (about 0 when it came from the cache),
    ``seconds_recon`` the reconstruction's wall time, ``projector`` the projector it used (kept for
    further runs on the same study, e.g. :func:`bsrem_sweep`).
    """

    label: str
    result: object
    curve: object
    seconds_projector: float
    seconds_recon: float
    projector: object = field(default=None, repr=False, compare=False)


def reconstruct_kernel(study: SimulatedStudy, label: str, n_iter: int, *,
                       lambda0: float = ExperimentConfig.lambda0, gamma: float = ExperimentConfig.gamma,
                       progress: bool = True, cache_projector: bool = False,
                       keep_images: bool = True) -> KernelReconstruction:
    """Reconstruct ``study`` with the kernel model ``label`` (a key of :data:`KERNEL_MODELS`) by
    block-RAMLA (one view per subset, ``lambda_n = lambda0 / (1 + gamma (n - 1))``) for ``n_iter``
    passes, storing every pass, and compute its contrast-noise curve.

    ``cache_projector`` reuses the projector of an earlier call in this process (see
    ``_PROJECTOR_CACHE``); ``keep_images=False`` drops the stored images after the curve is
    computed (a sweep job needs only the numbers).
    """
    _check_kernel(label)
    if int(n_iter) < 1:
        raise ValueError(f"n_iter: expected a positive number of passes, got {n_iter!r}")
    t0 = time.perf_counter()
    op = _projector(label, study, cache_projector)
    t1 = time.perf_counter()
    res = recon.block_ramla(ViewSubsets(op, study.data), int(n_iter), lambda0=lambda0, gamma=gamma,
                            store_every=1, progress=progress)
    t2 = time.perf_counter()
    curve = analysis.contrast_noise_curve(res, study.info, label=label)
    res.image = to_numpy(res.image)
    res.images = [to_numpy(im) for im in res.images] if keep_images else []
    return KernelReconstruction(label, res, curve, t1 - t0, t2 - t1, op)


def bsrem_sweep(study: SimulatedStudy, label: str, betas: Sequence[float], n_passes: int, x0, *,
                lambda0: float = ExperimentConfig.lambda0, gamma: float = ExperimentConfig.gamma,
                progress: bool = False, cache_projector: bool = False, projector=None) -> list:
    """``[(b, noise, CRC), ...]``: BSREM with the relative difference prior on ``study`` with the
    kernel model ``label``, one run of ``n_passes`` passes over the one-view subsets per relative weight b
    (:func:`directpet.recon.rdp_beta_sweep`: ``beta = b * mean(S)``, S the sensitivity image, ``gamma =
    2``, ``epsilon = 1e-3 * mean(x0)``), each from the image ``x0`` (e.g. the model's last block-RAMLA
    image), with the relaxation ``lambda0 / (1 + gamma (n - 1))``.
    CRC and noise as in :func:`directpet.analysis.contrast_noise_curve`. ``projector``: the model's
    projector when the caller has it (``KernelReconstruction.projector``), else one is built (or taken
    from the cache with ``cache_projector``).
    """
    _check_kernel(label)
    op = _projector(label, study, cache_projector) if projector is None else projector
    problem = ViewSubsets(op, study.data)

    def measure(image):
        return float(analysis.noise(image, study.info)), float(analysis.crc(image, study.info).mean)

    return [(run.b, *run.value) for run in
            recon.rdp_beta_sweep(problem, study.grid, betas, n_passes, problem.xp.asarray(x0, dtype=problem.xp.float32),
                                 measure, lambda0=lambda0, gamma=gamma, progress=progress)]


def run_experiment(cfg: ExperimentConfig = ExperimentConfig()) -> ExperimentResult:
    """Simulate the sphere phantom, reconstruct it with each kernel model, and analyse."""
    _check_size(cfg.size)
    _, arms = check_bsrem_arm(cfg.bsrem_betas, cfg.bsrem_passes, cfg.bsrem_kernels, tuple(cfg.kernels),
                              "bsrem_kernels")
    unknown = [k for k in cfg.kernels if k not in KERNEL_MODELS]
    if unknown:
        raise ValueError(f"kernels: unknown models {unknown}; expected some of {sorted(KERNEL_MODELS)}")
    study = simulate_study(cfg.size, cfg.n_events, cfg.seed, cfg.backend, cfg.progress)
    out = ExperimentResult(cfg, study.grid, study.info, study.truth, study.data,
                           timings={"simulation_s": study.seconds}, backend=study.backend)
    for label in cfg.kernels:
        rec = reconstruct_kernel(study, label, cfg.n_iter, lambda0=cfg.lambda0, gamma=cfg.gamma,
                                 progress=cfg.progress)
        out.results[label] = rec.result
        out.curves.append(rec.curve)
        if label in arms:
            out.bsrem[label] = bsrem_sweep(study, label, cfg.bsrem_betas, cfg.bsrem_passes, rec.result.image,
                                           lambda0=cfg.lambda0, gamma=cfg.gamma, progress=cfg.progress,
                                           projector=rec.projector)
    out.matched = analysis.pick_matched_noise(out.curves, target=cfg.target_noise)
    return out


#: Parameters of :func:`noise_realisation_job` (``realisation`` is a label only: ``seed`` picks the noise).
_JOB_KEYS = ("kernel", "seed", "n_iter", "size", "backend", "lambda0", "gamma", "n_events", "realisation")


def noise_realisation_job(params: dict) -> list:
    """One job of the [HA] section 6 noise-realisation sweep (for :func:`directpet.parallel.run_sweep`).

    Simulates the sphere phantom with the noise realisation ``params["seed"]`` at
    ``params["size"]`` (``params.get("n_events")`` prompts, default the size's), reconstructs it
    with the kernel model ``params["kernel"]`` by block-RAMLA for ``params["n_iter"]`` passes
    (``lambda0`` / ``gamma`` default to :class:`ExperimentConfig`'s) on ``params.get("backend",
    "auto")``, and returns one row per pass: ``iteration``, ``crc`` (mean over the spheres),
    ``noise`` (relative, not %), ``seconds_recon`` (the whole reconstruction), ``seconds_sim``,
    ``seconds_projector`` (projector build; about 0 when cached: projectors are kept per process,
    see ``_PROJECTOR_CACHE``) and ``backend_used``. A top-level function, so Dask workers import it.
    """
    if not isinstance(params, dict):
        raise TypeError(f"params: expected a dict, got {type(params).__name__}")
    unknown = sorted(set(params) - set(_JOB_KEYS))
    if unknown:
        raise ValueError(f"params: unknown keys {unknown}; expected some of {list(_JOB_KEYS)}")
    missing = [k for k in ("kernel", "seed", "n_iter", "size") if k not in params]
    if missing:
        raise ValueError(f"params: missing {missing}")
    _check_kernel(params["kernel"], "params['kernel']")      # before the simulation: fail fast
    _check_size(params["size"], "params['size']")
    study = simulate_study(params["size"], params.get("n_events"), int(params["seed"]),
                           params.get("backend", "auto"), progress=False)
    rec = reconstruct_kernel(study, params["kernel"], params["n_iter"],
                             lambda0=float(params.get("lambda0", ExperimentConfig.lambda0)),
                             gamma=float(params.get("gamma", ExperimentConfig.gamma)),
                             progress=False, cache_projector=True, keep_images=False)
    c = rec.curve
    return [{"iteration": int(it), "crc": float(cr), "noise": float(nz), "seconds_recon": rec.seconds_recon,
             "seconds_sim": study.seconds, "seconds_projector": rec.seconds_projector,
             "backend_used": study.backend}
            for it, cr, nz in zip(c.iterations, c.crc, c.noise)]


def ha_noise_jobs(kernels: Sequence[str] = tuple(KERNEL_MODELS), realisations: int = 20, size: str = "paper",
                  n_iter: int = 40, seed0: int = ExperimentConfig.seed, *, backend: str = "auto",
                  n_events: Optional[int] = None, lambda0: float = ExperimentConfig.lambda0,
                  gamma: float = ExperimentConfig.gamma) -> list:
    """The job list of the noise-realisation sweep: every kernel model on every realisation.

    Realisation r uses the seed ``seed0 + r`` for every kernel, so the models are compared on the
    same noisy data (paired, as in [HA] Fig. 10), and the spread over r is the realisation-to-
    realisation spread of CRC and noise. Jobs are ordered realisation by realisation.
    """
    kernels = list(kernels)
    for k in kernels:
        _check_kernel(k, "kernels")
    _check_size(size)
    if int(realisations) < 1:
        raise ValueError(f"realisations: expected a positive count, got {realisations!r}")
    if int(n_iter) < 1:
        raise ValueError(f"n_iter: expected a positive number of passes, got {n_iter!r}")
    jobs = []
    for r in range(int(realisations)):
        for k in kernels:
            job = {"kernel": k, "realisation": r, "seed": int(seed0) + r, "size": size, "n_iter": int(n_iter),
                   "backend": backend, "lambda0": float(lambda0), "gamma": float(gamma)}
            if n_events is not None:
                job["n_events"] = int(n_events)
            jobs.append(job)
    return jobs


def science_checks(result: ExperimentResult) -> list:
    """The [HA] section 6 statements as numbers: [(description, value)].

    FFT vs spatial invariant reconstructions (CRC difference at matched noise, largest image
    difference), and the CRC of each variant model minus the invariant one at the last iteration
    (the paper: variant1 slightly lower, variant2 / variant3 higher). Only the models that were run
    appear.
    """
    curves = {c.label: c for c in result.curves}
    matched = {m.label: m for m in result.matched}

    def at_noise(label):
        return matched[label].crc if matched[label].status == "ok" else float("nan")

    rows = []
    if "invariant-fft" in curves and "invariant" in curves:
        fft_img, sp_img = result.results["invariant-fft"].image, result.results["invariant"].image
        rows.append(("FFT vs spatial invariant: |CRC difference| at matched noise",
                     abs(at_noise("invariant-fft") - at_noise("invariant"))))
        rows.append(("FFT vs spatial invariant: max |image difference| / max image (last iteration)",
                     float(np.abs(fft_img - sp_img).max() / np.abs(sp_img).max())))
    if "invariant" in curves:
        for label in ("variant1", "variant2", "variant3"):
            if label in curves:
                rows.append((f"{label} - invariant: CRC at the last iteration", curves[label].crc[-1] - curves["invariant"].crc[-1]))
                rows.append((f"{label} - invariant: CRC at matched noise", at_noise(label) - at_noise("invariant")))
    return rows


def write_figures(result: ExperimentResult, out_dir: str) -> list:
    """Contrast-noise curves, matched-noise image panels and line profiles as PNG files."""
    os.makedirs(out_dir, exist_ok=True)
    target = result.config.target_noise
    paths = [os.path.join(out_dir, n) for n in ("contrast_noise.png", "matched_noise_panels.png", "line_profiles.png")]
    analysis.plot_contrast_noise(result.curves, target_noise=target, path=paths[0])
    labels = [c.label for c in result.curves]
    analysis.plot_matched_noise_panels([result.results[k] for k in labels], result.curves, result.phantom,
                                       target=target, path=paths[1])
    picks = []
    for m, k in zip(result.matched, labels):
        imgs = result.results[k].images
        picks.append(imgs[min(max(m.index, 0), len(imgs) - 1)] if imgs else result.results[k].image)
    analysis.plot_line_profiles(picks, labels, result.phantom, truth=result.truth, path=paths[2])
    if result.bsrem:
        paths.append(_bsrem_figure(result, os.path.join(out_dir, "bsrem_beta_sweep.png")))
    return paths


def _bsrem_figure(result: ExperimentResult, path: str) -> str:
    """The block-RAMLA contrast-noise curves with each model's BSREM points (one per b) on top."""
    fig = analysis.plot_contrast_noise(result.curves, target_noise=result.config.target_noise,
                                       title="block-RAMLA iterations (lines) and BSREM-RDP over beta (squares)")
    ax = fig.axes[0]
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for label, points in result.bsrem.items():
        b, n, c = (np.array(v) for v in zip(*points))
        ax.plot(100 * n, c, "s--", color=colours.get(label, "k"), ms=5, label=f"{label}, BSREM")
        for bi, ni, ci in zip(b, n, c):
            ax.annotate(f"b={bi:g}", (100 * ni, ci), fontsize=7, textcoords="offset points", xytext=(3, -9))
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120)
    return path
