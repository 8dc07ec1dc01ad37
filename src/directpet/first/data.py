"""FIRST sinogram data: prompts, multiplicative factors and background, with ``.npz`` storage.

Model of the mean prompts, per sinogram bin ``i``: ``ybar_i = f_i (H x)_i + b_i`` with ``f`` the
multiplicative factors (normalisation, attenuation; None = 1) and ``b`` the additive background
(randoms, scatter; None = 0). All arrays ``(n_angles, n_rows, n_rows, n_radial)`` float32 [a, r1, r2, rho].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._checks import array_module, flag, real_number
from .._storage import CountData
from ..recon.problem import check_nonnegative
from ..sim.random import draw_counts
from .geometry import RotatingScanner


@dataclass
class SinogramData(CountData):
    """Prompts of a rotating dual-head scan with their corrections.

    Attributes
    ----------
    prompts : (n_angles, n_rows, n_rows, n_radial) float32 counts (NumPy or CuPy).
    scanner : the RotatingScanner the sinogram belongs to.
    factors : multiplicative factors ``f`` (same shape) or None.
    background : additive background ``b`` in counts (same shape) or None.
    meta : provenance (source, counts, seed, ...).
    """

    prompts: object
    scanner: RotatingScanner
    factors: Optional[object] = None
    background: Optional[object] = None
    meta: dict = field(default_factory=dict)

    FORMAT, VERSION, WHAT, SCANNER = "directpet.first.SinogramData", 1, "sinogram data", RotatingScanner

    def __post_init__(self):
        self._check_counts(lambda s: s.sinogram_shape)

    def to(self, xp) -> "SinogramData":
        """The same data in namespace xp (numpy or cupy)."""
        return self._in(xp)

    @classmethod
    def load(cls, path, xp=np) -> "SinogramData":
        """Read a file written by :meth:`save`; arrays in namespace xp (numpy or cupy)."""
        if not hasattr(xp, "asarray") or not hasattr(xp, "float32"):
            raise TypeError(f"xp: expected an array namespace (numpy or cupy), got {xp!r}")
        return cls._read(path, xp)


def model_consistent_sinogram(projector, image, factors=None, background=None, counts: Optional[float] = None,
                              rng=None, *, noise: bool = True) -> SinogramData:
    """Prompts drawn from the reconstruction model itself: ``Poisson(f * H x + b)``.

    Parameters
    ----------
    projector : a SuperLORProjector.
    image : (nz, n, n) float32 true image (NumPy or CuPy, matching the projector's backend), finite and
        >= 0 (an activity; checked before projecting).
    factors, background : optional sinogram-shaped f and b.
    counts : scale ``f H x + b`` by one factor so that the expected total is ``counts`` (image and
        background scaled together); ``meta['image_scale']`` records it.
    rng : seed or Generator (NumPy, or CuPy for CuPy images).
    noise : False returns the expected data.
    """
    if not callable(getattr(projector, "forward", None)) or not isinstance(getattr(projector, "scanner", None),
                                                                            RotatingScanner):
        raise TypeError(f"projector: expected a SuperLORProjector (forward and a RotatingScanner), got "
                        f"{type(projector).__name__}")
    if counts is not None:
        counts = real_number("counts", counts, positive=True)
    noise = flag("noise", noise)
    xp = array_module(image)
    check_nonnegative(image, "image", None, xp, projector.scanner.grid.shape)
    for name, a in (("factors", factors), ("background", background)):
        if a is not None:
            check_nonnegative(a, name, None, xp, projector.out_shape)
    ybar = projector.forward(image)
    if factors is not None:
        ybar = ybar * factors
    if background is not None:
        ybar = ybar + background
    prompts, bg, alpha, total = draw_counts(ybar, counts=counts, background=background, rng=rng, noise=noise)
    meta = {"source": "model_consistent_sinogram", "image_scale": alpha, "expected_counts": total * alpha,
            "noise": noise, "method": getattr(projector, "method", None)}
    return SinogramData(prompts, projector.scanner, factors, bg, meta)


__all__ = ["SinogramData", "model_consistent_sinogram"]
