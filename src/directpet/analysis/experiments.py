"""What the FIRST and dual-head reconstruction experiments share (``directpet demo first`` /
``directpet demo dualhead``, :mod:`directpet.first.experiment`, :mod:`directpet.dualhead.experiment`).

Both simulate a micro Derenzo phantom and a set of point sources with their event Monte Carlo,
reconstruct both with OSEM by one or more projector methods, and report the same things: images
after 1 and ``n_iter`` iterations, rod profiles with their peak-to-valley ratios, point-source FWHM
(:mod:`directpet.analysis.resolution`) and the time per iteration. This module holds that common
part once: the configuration and result records, the reconstruction and analysis of each method
(:func:`reconstruct_methods`), the text table (:meth:`ExperimentResult.table_text`) and the figure
helpers (:func:`slice_figure`, :func:`rod_profile_figure`, :func:`fwhm_figure`). The families keep
their scanner sizes, phantoms, simulation and family-specific figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._checks import integer, real_number, to_numpy
from .resolution import AXIS_NAMES, UNDERSAMPLED_NOTE, peak_to_valley, point_source_fwhm, rod_noise, rod_profiles

#: the footnote of an FWHM in brackets (:meth:`MethodResult.fwhm_text`)
VOXEL_LIMITED_NOTE = ("(w): an FWHM below two voxels along its direction: the voxels, not the system, limit it, "
                      "so it is not a resolution result")

#: the colour-bar and profile label of reconstructed and true activity: OSEM's images are in the
#: units the data and system model give them (uncalibrated counts per voxel), so relative units
ACTIVITY_LABEL = "activity (a.u.)"


@dataclass
class ExperimentConfigBase:
    """The settings every family's ``ExperimentConfig`` has (each sets its own defaults and adds
    its simulation sizes).

    Parameters
    ----------
    size : a key of the family's ``SIZES`` (scanner, phantom and count presets).
    methods : projector methods to reconstruct with, each a row of the results.
    n_iter : OSEM iterations.
    n_subsets : OSEM subsets (the family's subset problem deals them).
    backend : ``'auto'``, ``'cpu'`` or ``'cuda'``.
    seed : the simulations' seed.
    progress : progress bars.
    bsrem_betas : relative strengths b of a penalised arm (default none): per method, BSREM with
        the relative difference prior from the last OSEM image of the Derenzo, ``bsrem_passes``
        passes per b (:func:`directpet.recon.rdp_beta_sweep`), and its peak-to-valley against
        noise (:func:`bsrem_arm`).
    bsrem_passes : BSREM passes per b.
    bsrem_methods : the methods that get the arm (None: every one).
    """

    size: str = "small"
    methods: Sequence[str] = ()
    n_iter: int = 24
    n_subsets: int = 1
    backend: str = "auto"
    seed: int = 2026
    progress: bool = True
    bsrem_betas: Sequence[float] = ()
    bsrem_passes: int = 10
    bsrem_methods: Optional[Sequence[str]] = None


def check_bsrem_arm(betas: Sequence[float], passes, arms=None, runs: Sequence[str] = (),
                    name: str = "bsrem_methods") -> Tuple[Tuple[float, ...], Tuple[str, ...]]:
    """A penalised arm's settings, checked before any simulation: its relative strengths (each
    finite and >= 0), passes (a positive integer, checked when there are strengths) and the runs it
    follows (``arms``: some of ``runs``, the experiment's methods or kernels; None: all of them).
    Returns ``(strengths, arms)``; ValueErrors name ``bsrem_betas``, ``bsrem_passes`` or ``name``."""
    values = tuple(real_number("bsrem_betas", b, nonnegative=True) for b in betas)
    if values:
        integer("bsrem_passes", passes, lo=1)
    arms = tuple(runs) if arms is None else tuple(arms)
    unknown = [a for a in arms if a not in runs]
    if unknown:
        raise ValueError(f"{name}: {unknown} are not among the runs of this experiment ({', '.join(runs)})")
    return values, (arms if values else ())


@dataclass
class SweepPoint:
    """One point of a penalised arm: relative strength ``b`` (``None`` for the unpenalised OSEM image
    it starts from), its noise (:func:`~directpet.analysis.rod_noise`) and peak-to-valley per rod group."""

    b: Optional[float]
    noise: float
    pv: Dict[float, object]
    seconds_per_pass: float = float("nan")        # BSREM's wall time per pass (NaN for the OSEM point)


@dataclass
class MethodResult:
    """One projector method's reconstructions and their analysis."""

    label: str
    derenzo: object              # ReconResult: images (NumPy) after 1 and n_iter iterations
    points: object               # ReconResult of the point sources
    pv: dict = field(default_factory=dict)        # rod diameter (mm) -> PeakToValley after n_iter iterations
    pv_first: dict = field(default_factory=dict)  # ... after one iteration
    fwhm: list = field(default_factory=list)      # per point source: the dict of point_source_fwhm
    seconds_per_iteration: float = 0.0            # median over the Derenzo reconstruction's iterations
    bsrem: List[SweepPoint] = field(default_factory=list)   # the penalised arm: OSEM first, then each b

    def fwhm_mm(self) -> np.ndarray:
        """``(n_points, 3)`` FWHM in mm along the radial, tangential and axial directions of each point."""
        return np.array([[f["fwhm_mm"][a] for a in AXIS_NAMES] for f in self.fwhm])

    def fwhm_limit_mm(self) -> np.ndarray:
        """``(n_points, 3)`` the smallest FWHM the voxels can measure along each direction (two
        voxels, see :func:`~directpet.analysis.point_source_fwhm`), and NaN where the FWHM is above it."""
        return np.array([[2.0 * f["voxel_mm"][a] if f["sampling_limited"][a] else np.nan for a in AXIS_NAMES]
                         for f in self.fwhm])

    def fwhm_text(self, k: int) -> str:
        """Point ``k``'s three FWHM for a table, in brackets (``'(0.80)'``) where they are below two
        voxels: there the voxels, not the system, limit the number (:data:`VOXEL_LIMITED_NOTE`)."""
        limits = self.fwhm_limit_mm()[k]
        return " / ".join(f"{w:.2f}" if not np.isfinite(b) else f"({w:.2f})" for w, b in zip(self.fwhm_mm()[k], limits))


@dataclass
class ExperimentResult:
    """A family experiment's outcome: the scanner, the system model, the truth and per-method results.

    ``point_positions`` are ``(n, 3)`` x, y, z in mm; ``data_stats`` the Monte Carlo statistics of
    ``'derenzo'`` and ``'points'``; ``methods`` maps a method's label to its :class:`MethodResult`;
    ``timings`` holds ``model_s`` and ``simulation_s`` (seconds). A family subclass names the FWHM
    directions (``FWHM_AXES``) and labels the points (:meth:`point_labels`).
    """

    config: ExperimentConfigBase
    scanner: object
    model: object                # the family's system model (SuperLORTable, PatchModel)
    derenzo_truth: np.ndarray
    derenzo_info: object         # DerenzoInfo of the phantom
    point_positions: np.ndarray
    data_stats: dict
    methods: Dict[str, MethodResult] = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    backend: str = "cpu"

    #: the names of the radial, tangential and axial FWHM directions in this family's frame
    FWHM_AXES: ClassVar[Tuple[str, str, str]] = AXIS_NAMES

    def point_labels(self) -> Tuple[str, List[str]]:
        """(column title, one label per point source) for the FWHM table."""
        return "r (mm)", [f"{np.hypot(p[0], p[1]):.1f}" for p in self.point_positions]

    def table_text(self) -> str:
        """Peak-to-valley per rod group, FWHM per point source and time per iteration, per method."""
        labels = list(self.methods)
        it = self.config.n_iter
        # peak_to_valley leaves out groups with fewer than two rods on their profile line
        groups = [d for d in self.derenzo_info.diameters_mm if all(d in r.pv for r in self.methods.values())]
        lines = [f"peak-to-valley after {it} iterations (1 iteration in brackets)",
                 f"{'rod (mm)':>9} " + " ".join(f"{m:>16}" for m in labels)]
        for d in groups:
            cells = [f"{r.pv[d].ratio_text():>7} ({r.pv_first[d].ratio_text():>7})" for r in self.methods.values()]
            lines.append(f"{d:>9.2f} " + " ".join(f"{c:>17}" for c in cells))
        if any(not r.pv[d].sampled for r in self.methods.values() for d in groups):
            lines.append(UNDERSAMPLED_NOTE)
        title, points = self.point_labels()
        lines += ["", f"point-source FWHM after {it} iterations (mm): {' / '.join(self.FWHM_AXES)}",
                  f"{title:>12} " + " ".join(f"{m:>24}" for m in labels)]
        for k, point in enumerate(points):
            cells = [r.fwhm_text(k) for r in self.methods.values()]
            lines.append(f"{point:>12} " + " ".join(f"{c:>24}" for c in cells))
        if any(np.isfinite(r.fwhm_limit_mm()).any() for r in self.methods.values()):
            lines.append(VOXEL_LIMITED_NOTE)
        lines += ["", f"time per OSEM iteration ({self.config.n_subsets} subsets): " + ", ".join(
            f"{m} {r.seconds_per_iteration * 1e3:.0f} ms" for m, r in self.methods.items())]
        if any(r.bsrem for r in self.methods.values()):
            lines += ["", f"BSREM with the relative difference prior, {self.config.bsrem_passes} "
                      f"pass{'es' if self.config.bsrem_passes != 1 else ''} from the last "
                      f"OSEM image per relative strength b (beta = b * mean sensitivity): noise = std / mean along "
                      f"the rods in the cores of the {max(self.derenzo_info.diameters_mm):g} mm rods; peak-to-valley "
                      f"per rod group"]
            for m, r in ((m, r) for m, r in self.methods.items() if r.bsrem):
                lines.append(f"{m:>9} {'b':>8} {'noise':>7} " + " ".join(f"{d:>7.2f}" for d in groups)
                             + f" {'ms/pass':>8}")
                for p in r.bsrem:
                    b = "OSEM" if p.b is None else f"{p.b:.3g}"
                    per_pass = f"{1e3 * p.seconds_per_pass:>8.0f}" if p.b is not None else f"{'':>8}"
                    lines.append(f"{'':>9} {b:>8} {100 * p.noise:>6.1f}% " + " ".join(
                        f"{p.pv[d].ratio_text():>7}" if d in p.pv else f"{'-':>7}" for d in groups) + " " + per_pass)
        return "\n".join(lines)


    def bsrem_relative_text(self) -> str:
        """Per method with a penalised arm: each strength b's noise and peak-to-valley (of every rod
        group the voxels sample) as multiples of the OSEM image's it starts from."""
        lines = []
        for m, r in self.methods.items():
            if not r.bsrem:
                continue
            osem = r.bsrem[0]
            groups = [d for d in self.derenzo_info.diameters_mm if osem.pv[d].sampled]
            lines.append(f"{m}: relative to OSEM ({100 * osem.noise:.1f} % noise); peak-to-valley of the "
                         + ", ".join(f"{d:g}" for d in groups) + " mm rods")
            for p in r.bsrem[1:]:
                pv = ", ".join(f"{p.pv[d].ratio / osem.pv[d].ratio:.2f}" for d in groups)
                lines.append(f"  b = {p.b:<6g} noise x {p.noise / osem.noise:.2f}   peak-to-valley x {pv}")
        return "\n".join(lines)


def preset_scanner(sizes: dict, size: str, scanner_cls: type):
    """``scanner_cls(**sizes[size][0])``: the scanner of a size preset (a ValueError naming ``size``)."""
    if size not in sizes:
        raise ValueError(f"size: expected one of {sorted(sizes)}, got {size!r}")
    return scanner_cls(**sizes[size][0])


def prepare(config: ExperimentConfigBase, sizes: dict, scanner_cls: type, methods: Sequence[str], backend: str,
            cuda_only: Sequence[str] = ()):
    """A run's ``(scanner, preset, xp)``: the scanner of ``config.size``, the size's preset
    (``sizes[size][1:]``) and the namespace data and images live in (on the resolved ``backend``
    'cuda', CuPy when importable: they stay on the GPU; else NumPy). ``config.methods`` must be some
    of ``methods``, those of ``cuda_only`` on the CUDA backend (ValueErrors naming ``methods``)."""
    scanner = preset_scanner(sizes, config.size, scanner_cls)
    unknown = [m for m in config.methods if m not in methods]
    if unknown:
        raise ValueError(f"methods: unknown {unknown}; expected some of {', '.join(methods)}")
    xp = np
    gpu_only = [m for m in config.methods if m in cuda_only]
    if gpu_only and backend != "cuda":
        raise ValueError(f"methods: {gpu_only} run on the GPU only and need the CUDA backend (this run uses "
                         f"{backend!r})")
    if backend == "cuda":
        try:
            import cupy as xp  # optional: keeps data and images on the GPU
        except ImportError:
            xp = np
    return scanner, sizes[config.size][1:], xp


def osem_first_and_last(problem, n_iter: int, progress: bool):
    """OSEM of ``problem``; the result's ``images`` are the NumPy images after iteration 1 and after
    ``n_iter`` iterations (``image_iterations`` ``[1, n_iter]``), ``image`` the last."""
    from ..recon import osem

    first = []

    def keep_first(it, position, x, last=problem.n_subsets - 1):
        if it == 1 and position == last:     # the last subset update of iteration 1
            first.append(to_numpy(x))

    res = osem(problem, n_iter, callback=keep_first, progress=progress)
    res.image = to_numpy(res.image)
    res.images, res.image_iterations = [first[0], res.image], [1, res.n_iter]
    return res


def bsrem_arm(problem, grid, info, x0, betas: Sequence[float], n_passes: int, progress: bool) -> List[SweepPoint]:
    """The penalised arm of a Derenzo reconstruction: the unpenalised image ``x0`` (the last OSEM
    image, ``b = None``) and BSREM-RDP from it for each relative strength b
    (:func:`directpet.recon.rdp_beta_sweep`, ``n_passes`` passes each), each with its noise in the
    cores of the largest rods (:func:`~directpet.analysis.rod_noise`) and its peak-to-valley per rod
    group: the peak-to-valley-against-noise curve, the Derenzo's counterpart of CRC against noise."""
    from ..recon import rdp_beta_sweep

    def measure(image):
        return rod_noise(image, grid, info), peak_to_valley(rod_profiles(image, grid, info))

    start = SweepPoint(None, *measure(to_numpy(x0)))
    return [start] + [SweepPoint(run.b, *run.value, seconds_per_pass=run.seconds_per_pass) for run in
                      rdp_beta_sweep(problem, grid, betas, n_passes, x0, measure, progress=progress)]


def reconstruct_methods(methods: Sequence[str], make_problem: Callable, derenzo_data, point_data, n_iter: int,
                        progress: bool, grid, info, positions, half_width_mm: float, *,
                        bsrem_betas: Sequence[float] = (), bsrem_passes: int = 10,
                        bsrem_methods: Sequence[str] = ()) -> Dict[str, MethodResult]:
    """For each method: OSEM of the Derenzo and of the point-source data (``make_problem(method,
    data)`` gives the subset problem), rod profiles and peak-to-valley after 1 and ``n_iter``
    iterations, the FWHM of each point source (profiles ``half_width_mm`` long each side), and for
    the methods in ``bsrem_methods`` the penalised arm of the Derenzo over ``bsrem_betas``
    (:func:`bsrem_arm`)."""
    out = {}
    for method in methods:
        problems = [make_problem(method, data) for data in (derenzo_data, point_data)]
        runs = [osem_first_and_last(p, n_iter, progress) for p in problems]
        r = MethodResult(method, runs[0], runs[1], seconds_per_iteration=float(np.median(runs[0].iteration_times)))
        r.pv = peak_to_valley(rod_profiles(runs[0].images[-1], grid, info))
        r.pv_first = peak_to_valley(rod_profiles(runs[0].images[0], grid, info))
        r.fwhm = [point_source_fwhm(runs[1].images[-1], grid, p, half_width_mm=half_width_mm) for p in positions]
        if bsrem_betas and method in bsrem_methods:
            x0 = problems[0].xp.asarray(runs[0].images[-1])
            r.bsrem = bsrem_arm(problems[0], grid, info, x0, bsrem_betas, bsrem_passes, progress)
        out[method] = r
    return out


# --- figures -------------------------------------------------------------------------------------------------

def pyplot():
    """matplotlib.pyplot on the Agg backend (files only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str, footnote: str = "") -> str:
    """Lay out, write (PNG, 90 dpi) and close ``fig``, with ``footnote`` (if any) in a strip along
    its bottom edge; returns ``path``."""
    plt = pyplot()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if footnote:
        fig.text(0.5, 0.005, footnote, ha="center", va="bottom", fontsize=8)
    fig.tight_layout(rect=(0, 0.04 if footnote else 0, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def iteration_images(result: ExperimentResult, method: str) -> list:
    """``[(image, title), ...]``: the Derenzo truth and ``method``'s images after 1 and n_iter iterations."""
    r = result.methods[method].derenzo
    return [(result.derenzo_truth, "truth"), (r.images[0], f"{method}: 1 iteration"),
            (r.images[-1], f"{method}: {r.image_iterations[-1]} iterations")]


def slice_figure(path: str, rows: Sequence[tuple]) -> str:
    """A grid of 2D slices, one row per ``(panels, style)`` of ``rows``: ``panels`` = ``[(slice2d,
    title), ...]``; ``style`` a dict with ``extent`` (mm, as imshow takes it), ``xlabel``, ``ylabel``
    and optionally ``xlim`` / ``ylim`` (pairs, mm) and ``aspect`` ('equal' by default, or 'auto')."""
    plt = pyplot()
    n_cols = max(len(panels) for panels, _ in rows)
    fig, axes = plt.subplots(len(rows), n_cols, figsize=(11, 3.5 * len(rows)), squeeze=False)
    for i, (panels, style) in enumerate(rows):
        for j, (img, title) in enumerate(panels):
            ax = axes[i, j]
            shown = ax.imshow(img, origin="lower", cmap="gray_r", extent=style["extent"],
                              aspect=style.get("aspect", "equal"), vmin=0)
            fig.colorbar(shown, ax=ax, shrink=0.8, label=ACTIVITY_LABEL)
            if "xlim" in style:
                ax.set_xlim(*style["xlim"])
            if "ylim" in style:
                ax.set_ylim(*style["ylim"])
            ax.set_title(title, fontsize=9)
            ax.set_xlabel(style["xlabel"])
            ax.set_ylabel(style["ylabel"])
    return save_figure(fig, path)


def rod_profile_figure(path: str, grid, info, curves: Sequence[tuple], truth=None) -> str:
    """Profiles through each rod group (up to six panels): ``curves`` = ``[(label, image, pv), ...]``
    (pv: diameter -> PeakToValley, shown in the legend), and the truth scaled to each panel."""
    plt = pyplot()
    diameters = [d for d in info.diameters_mm if all(d in pv for _, _, pv in curves)]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, d in zip(axes.ravel(), diameters):
        for label, img, pv in curves:
            prof = rod_profiles(img, grid, info)[d]
            ax.plot(prof.distance_mm, prof.values, label=f"{label} (P/V {pv[d].ratio_text()})")
        if truth is not None:
            t = rod_profiles(truth, grid, info)[d]
            ax.plot(t.distance_mm, t.values * max(ax.get_ylim()[1], 1e-12) / max(t.values.max(), 1e-12),
                    "k:", lw=0.8, label="truth (scaled)")
        pitch = next(iter(pv[d] for _, _, pv in curves)).pitch_mm
        ax.set_title(f"{d:g} mm rods ({pitch:.2f} mm apart on the line)", fontsize=9)
        ax.set_xlabel("distance along the profile (mm)")
        ax.set_ylabel(ACTIVITY_LABEL)
        ax.legend(fontsize=7)
    undersampled = any(not pv[d].sampled for _, _, pv in curves for d in diameters)
    return save_figure(fig, path, UNDERSAMPLED_NOTE if undersampled else "")


def fwhm_figure(path: str, result: ExperimentResult, coordinate: np.ndarray, xlabel: str) -> str:
    """Point-source FWHM along each of the three directions (``result.FWHM_AXES``, one panel each)
    against ``coordinate`` (one value per point), a line per method."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for k, (ax, name) in enumerate(zip(axes, result.FWHM_AXES)):
        for m, r in result.methods.items():
            line, = ax.plot(coordinate, r.fwhm_mm()[:, k], "o-", label=m)
            limit = r.fwhm_limit_mm()[:, k]
            hit = np.isfinite(limit)
            if hit.any():       # open markers: below two voxels, a bound set by the sampling
                ax.plot(np.asarray(coordinate)[hit], r.fwhm_mm()[hit, k], "o", mfc="white", mec=line.get_color())
        voxels = [f["voxel_mm"][AXIS_NAMES[k]] for r in result.methods.values() for f in r.fwhm[:1]]
        if voxels:
            ax.axhline(2.0 * voxels[0], color="0.5", ls="--", lw=1, label=f"two voxels ({2.0 * voxels[0]:.2f} mm)")
        ax.set_title(f"{name} FWHM after {result.config.n_iter} iterations", fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("FWHM (mm)")
        ax.legend(fontsize=7)
    return save_figure(fig, path, "open marks: an FWHM below two voxels (dashed line), limited by the voxels "
                       "rather than the system")


def bsrem_figure(path: str, result: ExperimentResult) -> str:
    """Peak-to-valley against noise over the penalised arm, one panel per rod group the voxels sample
    (up to six), a line per method from its OSEM image (square) through the strengths b (labelled)."""
    plt = pyplot()
    methods = {m: r for m, r in result.methods.items() if r.bsrem}
    diameters = [d for d in result.derenzo_info.diameters_mm
                 if all(d in p.pv and p.pv[d].sampled for r in methods.values() for p in r.bsrem)]
    n_cols = min(3, max(len(diameters), 1))
    n_rows = -(-max(len(diameters), 1) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4 * n_cols, 3.4 * n_rows), squeeze=False)
    for ax, d in zip(axes.ravel(), diameters):
        for m, r in methods.items():
            noise = [100 * p.noise for p in r.bsrem]
            ratio = [p.pv[d].ratio for p in r.bsrem]
            line, = ax.plot(noise, ratio, "o-", label=m)
            ax.plot(noise[:1], ratio[:1], "s", ms=8, mfc="white", mec=line.get_color())
            for p, x, y in zip(r.bsrem[1:], noise[1:], ratio[1:]):
                ax.annotate(f"{p.b:g}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set_title(f"{d:g} mm rods", fontsize=9)
        ax.set_xlabel(f"noise along the {max(result.derenzo_info.diameters_mm):g} mm rods' cores (%)")
        ax.set_ylabel("peak-to-valley")
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(diameters):]:
        ax.set_visible(False)
    return save_figure(fig, path, f"squares: OSEM after {result.config.n_iter} iterations; dots: BSREM-RDP, "
                       f"{result.config.bsrem_passes} passes from it, labelled with the relative strength b")


__all__ = ["ACTIVITY_LABEL", "VOXEL_LIMITED_NOTE", "ExperimentConfigBase", "ExperimentResult", "MethodResult",
           "SweepPoint", "bsrem_arm", "bsrem_figure", "check_bsrem_arm", "fwhm_figure", "iteration_images",
           "osem_first_and_last", "prepare", "preset_scanner", "pyplot", "reconstruct_methods", "rod_profile_figure",
           "save_figure", "slice_figure"]
