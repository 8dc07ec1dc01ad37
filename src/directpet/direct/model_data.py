"""Model-consistent DIRECT data: d_v = Poisson(s_v * H_v x + b_v) (science.md 1.12, quick test mode)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from .._checks import array_module, check_volume, flag, real_number
from ..recon.problem import check_nonnegative
from ..sim.random import draw_counts
from .histo_data import HistoImageData, require_stack_memory
from .kernels import SRKernel
from .subsets import check_projector, check_views_match
from .views import ViewSet

#: what the model needs of a projector: the stack of H_v x over all views, the number of views, the grid
_MODEL_API = ("forward", "n_views", "grid")


def expected_data(projector, image, sensitivity=None, background=None):
    """ybar = s_v * H_v x + b_v for every view: (n_views, nz, ny, nx) float32 (namespace of image).

    ``image`` (nz, ny, nx) float32 must be finite and >= 0 (an activity); ``sensitivity`` (the
    multiplicative factors s_v) and ``background`` b_v, when given, (n_views, nz, ny, nx) float32,
    finite and >= 0, in the image's namespace. Everything is checked before any projection.
    """
    projector = check_projector(projector, needs=_MODEL_API)
    grid = projector.grid
    image = check_volume(image, "image", grid.shape)
    xp = array_module(image)
    check_nonnegative(image, "image", None, xp, grid.shape)
    shape = (projector.n_views,) + tuple(grid.shape)
    if sensitivity is not None:
        # the DIRECT name of the model's multiplicative factors f_s (SubsetProblem.factors)
        check_nonnegative(sensitivity, "sensitivity (factors)", None, xp, shape)
    if background is not None:
        check_nonnegative(background, "background", None, xp, shape)
    require_stack_memory("projector", projector.n_views, grid)
    out = projector.forward(image)                # (n_views, nz, ny, nx), then s and b in place
    if sensitivity is not None:
        out *= sensitivity
    if background is not None:
        out += background
    return out


def model_consistent_data(projector, image, sensitivity=None, background=None,
                          counts: Optional[float] = None, rng=None, *, noise: bool = True,
                          viewset=None, kernel=None) -> HistoImageData:
    """Simulate data from the reconstruction model itself.

    Parameters
    ----------
    projector : anything with ``forward(x)`` (the stack over all views), ``n_views`` and ``grid``
        (e.g. HistoImageProjector).
    image : (nz, ny, nx) float32 true image x (NumPy or CuPy), finite and >= 0.
    sensitivity : (n_views, nz, ny, nx) s_v (the multiplicative factors), finite and >= 0, or None (ones).
    background : (n_views, nz, ny, nx) b_v, finite and >= 0, or None (zeros).
    counts : if given, the mean ``s H x + b`` is scaled by one factor alpha so that the total
        expected counts equal ``counts`` (image and background scaled together, so the
        background fraction is kept).
    rng : seed or Generator (NumPy, or CuPy for CuPy images).
    noise : False returns the expected (noise-free) data instead of a Poisson draw.
    viewset, kernel : stored in the returned data (default: the projector's ``viewset`` /
        ``kernel`` attributes where it has them). Give ``viewset`` so that block-RAMLA can use
        its geometric order; it must be the projector's views.

    Returns
    -------
    HistoImageData with ``histos = d``, ``sensitivity``, ``background`` (scaled by alpha) and
    ``meta`` keys ``image_scale`` (alpha: the image consistent with the data is ``alpha * image``)
    and ``expected_counts``.
    """
    projector = check_projector(projector, needs=_MODEL_API)
    if counts is not None:
        counts = real_number("counts", counts, positive=True)
    noise = flag("noise", noise)
    viewset = getattr(projector, "viewset", None) if viewset is None else viewset
    kernel = getattr(projector, "kernel", None) if kernel is None else kernel
    if viewset is not None and not isinstance(viewset, ViewSet):
        raise TypeError(f"viewset: expected a ViewSet or None, got {type(viewset).__name__}")
    if kernel is not None and not isinstance(kernel, SRKernel):
        raise TypeError(f"kernel: expected an SRKernel or None, got {type(kernel).__name__}")
    check_views_match(viewset, projector, "viewset")
    ybar = expected_data(projector, image, sensitivity, background)
    d, bg, alpha, total = draw_counts(ybar, counts=counts, background=background, rng=rng, noise=noise)
    sens = None if sensitivity is None else sensitivity.astype(np.float32, copy=False)
    meta = {"source": "model_consistent_data", "image_scale": alpha, "expected_counts": total * alpha,
            "noise": noise}
    return HistoImageData(d, projector.grid, viewset, sens, bg, kernel, None, meta)
