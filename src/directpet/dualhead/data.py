"""Dual-head LOR data: prompts, multiplicative factors and background, with ``.npz`` storage.

Model of the mean prompts, per LOR ``i``: ``ybar_i = f_i (H x)_i + b_i`` with ``f`` the multiplicative
factors (normalisation, attenuation; None = 1) and ``b`` the additive background (randoms, scatter;
None = 0). All arrays are flat float32 vectors of length ``scanner.n_lors`` in the class-major LOR
layout of :mod:`directpet.dualhead.geometry` (NumPy or CuPy, all in one namespace).

Honest data come from the event Monte Carlo (:func:`directpet.dualhead.simulate_events`);
:func:`model_consistent_data` draws Poisson data from the reconstruction model itself, for unit
tests of the reconstruction machinery (an inverse crime by construction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .._checks import array_module, flag, real_number
from .._storage import CountData
from ..recon.problem import check_nonnegative
from ..sim.random import draw_counts
from .geometry import DualHeadScanner


@dataclass
class DualHeadData(CountData):
    """Prompts of a dual-head scan with their corrections.

    Attributes
    ----------
    scanner : the DualHeadScanner the LORs belong to.
    prompts : (n_lors,) float32 counts (NumPy or CuPy), finite and >= 0.
    factors : multiplicative factors ``f`` (same shape and namespace) or None.
    background : additive background ``b`` in counts (same shape and namespace) or None.
    meta : provenance (source, counts, seed, ...).
    """

    scanner: DualHeadScanner
    prompts: object
    factors: Optional[object] = None
    background: Optional[object] = None
    meta: dict = field(default_factory=dict)

    FORMAT, VERSION, WHAT, SCANNER = "directpet.dualhead.DualHeadData", 1, "dual-head data", DualHeadScanner

    def __post_init__(self):
        self._check_counts(lambda s: (s.n_lors,))

    def to(self, backend) -> "DualHeadData":
        """The same data in another namespace: ``numpy`` / ``'cpu'`` / ``'numpy'`` or ``cupy`` /
        ``'cuda'`` / ``'cupy'`` (copies only when the namespace changes)."""
        return self._in(_namespace(backend))

    @property
    def total_counts(self) -> float:
        """Sum of the prompts (float64)."""
        return float(self.prompts.sum(dtype=self.xp.float64))

    @classmethod
    def load(cls, path, backend=np) -> "DualHeadData":
        """Read a file written by :meth:`save`; arrays in ``backend``'s namespace (as :meth:`to`)."""
        return cls._read(path, _namespace(backend))


def _namespace(backend):
    """numpy or cupy from a namespace or a name ('cpu', 'numpy', 'cuda', 'cupy')."""
    if backend is np or backend in ("cpu", "numpy"):
        return np
    if backend in ("cuda", "cupy") or getattr(backend, "__name__", None) == "cupy":
        import cupy  # optional: asked for by name, so it must be installed

        return cupy
    raise TypeError(f"backend: expected numpy, cupy, 'cpu' or 'cuda', got {backend!r}")


def _scanner_of(projector) -> DualHeadScanner:
    """The projector's scanner (``projector.scanner`` or ``projector.model.scanner``)."""
    scanner = getattr(projector, "scanner", None)
    if scanner is None:
        scanner = getattr(getattr(projector, "model", None), "scanner", None)
    if not isinstance(scanner, DualHeadScanner):
        raise TypeError(f"projector: expected a dual-head projector (with a DualHeadScanner), got "
                        f"{type(projector).__name__}")
    return scanner


def model_consistent_data(projector, image, *, seed, total_counts: Optional[float] = None, factors=None,
                          background=None, noise: bool = True) -> DualHeadData:
    """Prompts drawn from the reconstruction model itself: ``Poisson(f * H x + b)`` (unit tests).

    Parameters
    ----------
    projector : a DualHeadProjector (its ``forward(image)`` gives the full (n_lors,) vector).
    image : float32 image of ``scanner.grid.shape`` (NumPy or CuPy, matching the projector's backend),
        finite and >= 0 (an activity; checked before projecting).
    seed : seed or Generator of the Poisson draws (NumPy, or CuPy for CuPy images; None: fresh entropy).
    total_counts : scale ``f H x + b`` by one factor so that the expected total is ``total_counts``
        (image and background scaled together); ``meta['image_scale']`` records the factor.
    factors, background : optional (n_lors,) f and b.
    noise : False returns the expected data.
    """
    scanner = _scanner_of(projector)
    if total_counts is not None:
        total_counts = real_number("total_counts", total_counts, positive=True)
    noise = flag("noise", noise)
    xp = array_module(image)
    check_nonnegative(image, "image", None, xp, scanner.grid.shape)
    for name, a in (("factors", factors), ("background", background)):
        if a is not None:
            check_nonnegative(a, name, None, xp, (scanner.n_lors,))
    ybar = projector.forward(image)
    if factors is not None:
        ybar = ybar * factors
    if background is not None:
        ybar = ybar + background
    prompts, bg, alpha, total = draw_counts(ybar, counts=total_counts, background=background, rng=seed,
                                            noise=noise, counts_name="total_counts")
    meta = {"source": "model_consistent_data", "image_scale": alpha, "expected_counts": total * alpha,
            "noise": noise, "method": getattr(projector, "method", None)}
    return DualHeadData(scanner, prompts, factors, bg, meta)


__all__ = ["DualHeadData", "model_consistent_data"]
