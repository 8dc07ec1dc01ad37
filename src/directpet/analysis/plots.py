"""Figures for DIRECT evaluations: contrast-noise curves (also with error bars over noise
realisations), matched-noise panels, line profiles.

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot state, so it works
under the Agg backend, in scripts and in notebooks), returns it, and writes a PNG when ``path`` is
given. matplotlib is imported only when a function is called.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .._checks import check_path, integer, real_number, require_memory
from .metrics import ContrastNoiseCurve, _image, _phantom_info, pick_matched_noise
from .roi import _xy, slice_weights


def _figure(figsize):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def _save(fig, path, dpi=120, name: str = "path"):
    if path is not None:
        fig.savefig(check_path(path, name, writing=True), dpi=dpi)
    return fig


def _sequence(name: str, value) -> list:
    """value (a sequence, not a string) as a list, else a TypeError naming ``name``."""
    if value is None or isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name}: expected a sequence, got {type(value).__name__}")
    return list(value)


def plot_contrast_noise(curves: Sequence[ContrastNoiseCurve], *, target_noise: Optional[float] = 0.08,
                        annotate_every: int = 0, title: str = "CRC vs noise", path=None, ax=None):
    """CRC (y) against noise in % (x), one line per curve; a vertical line at the target noise and
    the interpolated matched-noise points. ``annotate_every=N`` labels every N-th point with its
    iteration. Returns the Figure (that of ``ax`` when given)."""
    if isinstance(curves, ContrastNoiseCurve):
        curves = [curves]
    annotate_every = integer("annotate_every", annotate_every, lo=0)
    if target_noise is not None:
        target_noise = real_number("target_noise", target_noise, positive=True)
    matched = pick_matched_noise(curves, target_noise) if target_noise is not None else []  # checks curves
    fig = _figure((6, 4.5)) if ax is None else ax.figure
    ax = fig.add_subplot() if ax is None else ax
    for c in curves:
        line, = ax.plot(100 * np.asarray(c.noise), c.crc, marker="o", ms=3, label=c.label or None)
        if annotate_every:
            for k in range(0, len(c.noise), annotate_every):
                ax.annotate(f"{c.iterations[k]:g}", (100 * c.noise[k], c.crc[k]), fontsize=7,
                            textcoords="offset points", xytext=(3, 3), color=line.get_color())
    if target_noise is not None:
        ax.axvline(100 * target_noise, color="0.6", ls="--", lw=1)
        for m in matched:
            if m.status == "ok":
                ax.plot(100 * m.noise, m.crc, marker="x", color="k", ms=7)
    ax.set_xlabel("noise (%)")
    ax.set_ylabel("CRC")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if any(c.label for c in curves):
        ax.legend(fontsize=8)
    return _save(fig, path)


def _slice(image, grid, z_mm, name="image"):
    """Transaxial plane at z (linear interpolation between slices, as the ROIs do) of a real, finite
    image of ``grid.shape``."""
    img = _image(image, grid, name)
    return sum(a * img[iz] for iz, a in slice_weights(grid, z_mm, "linear"))


def plot_image_panels(images: Sequence, titles: Sequence[str], grid, *, z_mm: float = 0.0,
                      vmax: Optional[float] = None, cmap: str = "gray_r", ncols: Optional[int] = None,
                      units: str = "activity (a.u.)", path=None):
    """Transaxial slices at z (mm) of several images side by side, on a common grey scale
    (``vmax`` default: the largest value over the panels) with one colour bar labelled ``units``
    (reconstructions are uncalibrated: relative units). Used for matched-noise panels."""
    images, titles = _sequence("images", images), _sequence("titles", titles)
    if not images:
        raise ValueError("images: expected at least one image, got none")
    bad = [k for k, t in enumerate(titles) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"titles: expected strings, entry {bad[0]} is a {type(titles[bad[0]]).__name__}")
    if len(titles) != len(images):
        raise ValueError(f"titles: expected one title per image, got {len(titles)} for {len(images)} image(s)")
    if not isinstance(units, str):
        raise TypeError(f"units: expected the colour bar's label as a string, got {type(units).__name__}")
    planes = [_slice(im, grid, z_mm, f"images[{k}]") for k, im in enumerate(images)]
    ncols = len(planes) if ncols is None else integer("ncols", ncols, lo=1)
    nrows = int(np.ceil(len(planes) / ncols))
    vmax = max(float(p.max()) for p in planes) if vmax is None else real_number("vmax", vmax)
    if not vmax > 0:
        raise ValueError(f"vmax: the grey scale runs from 0 to vmax, which must be positive, got {vmax!r} "
                         f"(all panels <= 0?)")
    fig = _figure((3.0 * ncols, 3.0 * nrows + 0.3))
    hx = 0.5 * grid.nx * grid.voxel_size[2]
    hy = 0.5 * grid.ny * grid.voxel_size[1]
    axes = []
    for k, (p, t) in enumerate(zip(planes, titles)):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        shown = ax.imshow(p, origin="lower", cmap=cmap, vmin=0, vmax=vmax, extent=(-hx, hx, -hy, hy))
        ax.set_title(t, fontsize=9)
        ax.set_xlabel("x (mm)", fontsize=8)
        ax.set_ylabel("y (mm)", fontsize=8)
        ax.tick_params(labelsize=7)
        axes.append(ax)
    fig.colorbar(shown, ax=axes, shrink=0.8, label=units)     # one grey scale for every panel
    return _save(fig, path)


def plot_matched_noise_panels(results: Sequence, curves: Sequence[ContrastNoiseCurve], phantom_info, *,
                              target: float = 0.08, path=None, **kw):
    """Panels of the stored image nearest to the matched-noise point of each reconstruction.

    ``results`` are :class:`~directpet.recon.ReconResult` objects whose stored images produced
    ``curves`` (same order). Titles give the label, iteration and CRC.
    """
    results, curves = list(results), [curves] if isinstance(curves, ContrastNoiseCurve) else list(curves)
    if len(results) != len(curves):
        raise ValueError(f"results: expected one ReconResult per curve, got {len(results)} for {len(curves)} curve(s)")
    picks = pick_matched_noise(curves, target)
    for k, (r, m) in enumerate(zip(results, picks)):
        if len(getattr(r, "images", ())) <= m.index:
            raise ValueError(f"results: entry {k} stores {len(getattr(r, 'images', ()))} image(s); its curve "
                             f"needs image {m.index} (reconstruct with store_every)")
    images, titles = [], []
    for r, m in zip(results, picks):
        images.append(r.images[m.index])
        titles.append(f"{m.label}: it {r.image_iterations[m.index]}"
                      + (f", CRC {m.crc:.2f}" if np.isfinite(m.crc) else ""))
    return plot_image_panels(images, titles, phantom_info.grid, z_mm=phantom_info.sphere_z_mm, path=path, **kw)


def line_profile(image, grid, start_xy_mm, end_xy_mm, z_mm: float = 0.0, n_samples: int = 200):
    """Values along the segment start -> end (mm) in the plane z, by bilinear interpolation.

    image : (nz, ny, nx) real, finite, on ``grid``; start_xy_mm, end_xy_mm : (x, y) mm;
    n_samples : an integer >= 2. Points outside the image read 0.
    Returns ``(distance_mm from start, values)``.
    """
    from scipy.ndimage import map_coordinates

    plane = _slice(image, grid, z_mm)
    start_xy_mm, end_xy_mm = _xy("start_xy_mm", start_xy_mm), _xy("end_xy_mm", end_xy_mm)
    n_samples = integer("n_samples", n_samples, lo=2)
    require_memory("n_samples", 64.0 * n_samples, f"a profile of {n_samples} samples")   # ~8 float64 arrays of n
    t = np.linspace(0.0, 1.0, n_samples)
    x = start_xy_mm[0] + t * (end_xy_mm[0] - start_xy_mm[0])
    y = start_xy_mm[1] + t * (end_xy_mm[1] - start_xy_mm[1])
    fx = x / grid.voxel_size[2] + 0.5 * (grid.nx - 1)
    fy = y / grid.voxel_size[1] + 0.5 * (grid.ny - 1)
    vals = map_coordinates(plane, [fy, fx], order=1, mode="constant", cval=0.0)
    return t * np.hypot(end_xy_mm[0] - start_xy_mm[0], end_xy_mm[1] - start_xy_mm[1]), vals


def plot_line_profiles(images: Sequence, labels: Sequence[str], phantom_info, *, sphere: int = 0,
                       half_length_mm: float = 25.0, truth=None, normalise: bool = True, path=None):
    """Radial line profiles through one sphere (through the phantom centre and the sphere centre,
    ``+-half_length_mm`` around the sphere), one line per image; ``truth`` adds the true image.
    ``normalise`` divides each profile by its image's background mean (the sphere's annulus)."""
    from .metrics import crc as _crc

    _phantom_info(phantom_info)
    sphere = integer("sphere", sphere, lo=0)
    if sphere >= phantom_info.n_spheres:
        raise ValueError(f"sphere: expected an index in [0, {phantom_info.n_spheres}), got {sphere}")
    half_length_mm = real_number("half_length_mm", half_length_mm, positive=True)
    images, labels = list(images), list(labels)
    if len(labels) != len(images):
        raise ValueError(f"labels: expected one label per image, got {len(labels)} for {len(images)} image(s)")
    c = np.asarray(phantom_info.sphere_centres_mm[sphere], dtype=float)
    d = c[:2] / max(np.hypot(c[0], c[1]), 1e-9) if np.hypot(c[0], c[1]) > 0 else np.array([1.0, 0.0])
    a, b = c[:2] - half_length_mm * d, c[:2] + half_length_mm * d
    fig = _figure((6, 4))
    ax = fig.add_subplot()
    series = list(zip(images, labels))
    if truth is not None:
        series.append((truth, "truth"))
    for im, lab in series:
        s, v = line_profile(im, phantom_info.grid, a, b, z_mm=c[2])
        if normalise:
            v = v / _crc(im, phantom_info).background_means[sphere]
        ax.plot(s - half_length_mm, v, label=lab, ls="--" if lab == "truth" else "-")
    ax.set_xlabel(f"distance from sphere {sphere} centre (mm, radial)")
    ax.set_ylabel("activity / background" if normalise else "activity (a.u.)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_contrast_noise_errorbars(aggregated_rows: Sequence[dict], out_path=None, *, group: str = "kernel",
                                  order: str = "iteration", target_noise: Optional[float] = 0.08,
                                  title: str = "CRC vs noise over noise realisations (mean ± std)"):
    """Contrast-noise curves with error bars, one curve per ``group`` value (kernel model).

    ``aggregated_rows`` are the output of
    :meth:`directpet.parallel.SweepResult.aggregate` ``(by=(group, order), values=("crc", "noise"))``:
    dicts with ``crc_mean``, ``crc_std``, ``noise_mean``, ``noise_std`` (noise relative, plotted in %)
    per (kernel, iteration). Points are joined in ``order``; the bars are one standard deviation
    over the realisations on both axes. A dashed line marks ``target_noise``. Writes a PNG to
    ``out_path`` when given; returns the Figure.
    """
    from collections.abc import Mapping

    rows = _sequence("aggregated_rows", aggregated_rows)
    need = (group, order, "crc_mean", "crc_std", "noise_mean", "noise_std")
    if not rows:
        raise ValueError("aggregated_rows: empty")
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError(f"aggregated_rows: row {i} is a {type(r).__name__}, expected a dict (the rows of "
                            f"SweepResult.aggregate)")
        missing = [k for k in need if k not in r]
        if missing:
            raise ValueError(f"aggregated_rows: row {i} lacks {missing} (expected SweepResult.aggregate("
                             f"by=({group!r}, {order!r}), values=('crc', 'noise')) rows)")
    curves = {}
    for r in rows:
        curves.setdefault(r[group], []).append(r)
    fig = _figure((6.5, 4.8))
    ax = fig.add_subplot()
    for label, members in curves.items():
        members = sorted(members, key=lambda r: r[order])
        x = 100 * np.array([r["noise_mean"] for r in members], dtype=float)
        xe = 100 * np.array([r["noise_std"] for r in members], dtype=float)
        y = np.array([r["crc_mean"] for r in members], dtype=float)
        ye = np.array([r["crc_std"] for r in members], dtype=float)
        n = max(int(r.get("n", 0)) for r in members)
        ax.errorbar(x, y, xerr=np.nan_to_num(xe), yerr=np.nan_to_num(ye), marker="o", ms=3, lw=1, capsize=2,
                    elinewidth=0.8, label=f"{label}" + (f" (n={n})" if n else ""))
    if target_noise is not None:
        ax.axvline(100 * target_noise, color="0.6", ls="--", lw=1)
    ax.set_xlabel("noise (%)")
    ax.set_ylabel("CRC")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out_path, name="out_path")
