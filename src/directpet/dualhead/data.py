"""Dual-head LOR data: prompts, multiplicative factors and background, with ``.npz`` storage.

Model of the mean prompts, per LOR ``i``: ``ybar_i = f_i (H x)_i + b_i`` with ``f`` the multiplicative
factors (normalisation, attenuation; None = 1) and ``b`` the additive background (randoms, scatter;
None = 0). All arrays are flat float32 vectors of length ``scanner.n_lors`` in the class-major LOR
layout of :mod:`directpet.dualhead.geometry` (NumPy or CuPy, all in one namespace).

Honest data come from the event Monte Carlo (:func:`directpet.dualhead.simulate`);
:func:`model_consistent_data` draws Poisson data from the reconstruction model itself, for unit
tests of the reconstruction machinery (an inverse crime by construction).
"""

from __future__ import annotations

from typing import Optional

from .._storage import ScannerCounts, model_consistent_counts
from .geometry import DualHeadScanner


class DualHeadData(ScannerCounts):
    """Prompts of a dual-head scan with their corrections, the fields of
    :class:`~directpet._storage.ScannerCounts`: ``scanner`` (the DualHeadScanner of the LORs), then
    ``prompts`` (counts), ``factors`` (``f``, None: ones) and ``background`` (``b`` in counts, None:
    zeros), each a ``(scanner.n_lors,)`` float32 vector (NumPy or CuPy, one namespace), finite and
    >= 0; ``meta`` the provenance. ``DualHeadData.load(path, *, xp=None)``, ``save(path)`` and
    ``to(xp)`` come from :class:`~directpet._storage.CountData`.
    """

    FORMAT, VERSION, WHAT, SCANNER = "directpet.dualhead.DualHeadData", 1, "dual-head data", DualHeadScanner

    @staticmethod
    def counts_shape(scanner: DualHeadScanner) -> tuple:
        return (scanner.n_lors,)


def _scanner_of(projector) -> DualHeadScanner:
    """The projector's scanner (``projector.scanner`` or ``projector.model.scanner``)."""
    scanner = getattr(projector, "scanner", None)
    if scanner is None:
        scanner = getattr(getattr(projector, "model", None), "scanner", None)
    if not isinstance(scanner, DualHeadScanner):
        raise TypeError(f"projector: expected a dual-head projector (with a DualHeadScanner), got "
                        f"{type(projector).__name__}")
    return scanner


def model_consistent_data(projector, image, *, counts: Optional[float] = None, factors=None, background=None,
                          noise: bool = True, seed=None) -> DualHeadData:
    """Prompts drawn from the dual-head model itself, ``Poisson(f * H x + b)``, as DualHeadData (unit
    tests): :func:`directpet._storage.model_consistent_counts` with the dual-head shapes.

    ``projector``: a DualHeadProjector (``forward(image)`` gives the ``(n_lors,)`` vector); ``image``:
    float32 ``scanner.grid.shape`` = ``(n_z D, n_y D, n_planes)`` activity (NumPy or CuPy, where the
    projector takes it), finite and >= 0; ``factors`` / ``background``: ``(n_lors,)`` float32 or None;
    ``counts``: the expected total after scaling ``f H x + b`` by one factor (``meta['image_scale']``;
    None: no scaling); ``noise`` False: the expected data; ``seed``: int, Generator or None (fresh
    entropy) of the Poisson draws.
    """
    scanner = _scanner_of(projector)
    prompts, f, bg, meta = model_consistent_counts(projector, image, scanner.grid.shape, counts=counts,
                                                   factors=factors, background=background, noise=noise, seed=seed)
    return DualHeadData(scanner, prompts, f, bg, meta)


__all__ = ["DualHeadData", "model_consistent_data"]
