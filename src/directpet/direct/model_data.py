"""Model-consistent DIRECT data: d_v = Poisson(s_v * H_v x + b_v) (science.md 1.12, quick test mode)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from .._checks import array_module
from ..sim.random import make_rng
from .histo_data import HistoImageData


def expected_data(projector, image, sensitivity=None, background=None):
    """ybar = s_v * H_v x + b_v for every view: (n_views, nz, ny, nx) float32 (namespace of image)."""
    xp = array_module(image)
    grid = projector.grid
    out = xp.empty((projector.n_views,) + tuple(grid.shape), dtype=xp.float32)
    for v in range(projector.n_views):
        y = projector.forward(image, v)
        if sensitivity is not None:
            y = y * sensitivity[v]
        if background is not None:
            y = y + background[v]
        out[v] = y
    return out


def model_consistent_data(projector, image, sensitivity=None, background=None,
                          counts: Optional[float] = None, rng=None, *, noise: bool = True,
                          viewset=None, kernel=None) -> HistoImageData:
    """Simulate data from the reconstruction model itself.

    Parameters
    ----------
    projector : anything with ``forward(x, v)``, ``n_views`` and ``grid`` (e.g. HistoImageProjector).
    image : (nz, ny, nx) float32 true image x (NumPy or CuPy).
    sensitivity : (n_views, nz, ny, nx) s_v or None (ones).
    background : (n_views, nz, ny, nx) b_v or None (zeros).
    counts : if given, the mean ``s H x + b`` is scaled by one factor alpha so that the total
        expected counts equal ``counts`` (image and background scaled together, so the
        background fraction is kept).
    rng : seed or Generator (NumPy, or CuPy for CuPy images).
    noise : False returns the expected (noise-free) data instead of a Poisson draw.
    viewset, kernel : stored in the returned data (default: the projector's ``viewset`` /
        ``kernel`` attributes where it has them). Give ``viewset`` so that block-RAMLA can use
        its geometric order.

    Returns
    -------
    HistoImageData with ``histos = d``, ``sensitivity``, ``background`` (scaled by alpha) and
    ``meta`` keys ``image_scale`` (alpha: the image consistent with the data is ``alpha * image``)
    and ``expected_counts``.
    """
    xp = array_module(image)
    ybar = expected_data(projector, image, sensitivity, background)
    total = float(ybar.sum(dtype=xp.float64))
    if total <= 0:
        raise ValueError("image: the expected data are all zero; nothing to simulate")
    alpha = 1.0 if counts is None else float(counts) / total
    if counts is not None and not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"counts: expected a positive number, got {counts!r}")
    if alpha != 1.0:
        ybar *= np.float32(alpha)
    if noise:
        gen = make_rng(rng, xp)
        d = gen.poisson(ybar).astype(xp.float32)
    else:
        d = ybar
    bg = None if background is None else (background * np.float32(alpha)).astype(xp.float32)
    sens = None if sensitivity is None else sensitivity.astype(xp.float32, copy=False)
    viewset = getattr(projector, "viewset", None) if viewset is None else viewset
    kernel = getattr(projector, "kernel", None) if kernel is None else kernel
    meta = {"source": "model_consistent_data", "image_scale": alpha, "expected_counts": total * alpha,
            "noise": bool(noise)}
    return HistoImageData(d, projector.grid, viewset, sens, bg, kernel, None, meta)
