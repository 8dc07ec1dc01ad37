"""FIRST sinogram data: prompts, multiplicative factors and background, with ``.npz`` storage.

Model of the mean prompts, per sinogram bin ``i``: ``ybar_i = f_i (H x)_i + b_i`` with ``f`` the
multiplicative factors (normalisation, attenuation; None = 1) and ``b`` the additive background
(randoms, scatter; None = 0). All arrays ``(n_angles, n_rows, n_rows, n_radial)`` float32 [a, r1, r2, rho].

Honest data come from the event Monte Carlo (:func:`directpet.first.simulate`);
:func:`model_consistent_data` draws Poisson data from the reconstruction model itself, for unit
tests of the reconstruction machinery (an inverse crime by construction).
"""

from __future__ import annotations

from typing import Optional

from .._checks import expect_instance
from .._storage import ScannerCounts, model_consistent_counts
from .geometry import RotatingScanner
from .projector import SuperLORProjector


class SinogramData(ScannerCounts):
    """Prompts of a rotating dual-head scan with their corrections.

    ``scanner`` is the RotatingScanner of the sinogram. ``prompts`` (counts), ``factors`` (the
    multiplicative ``f``; None means ones) and ``background`` (the additive ``b`` in counts; None means
    zeros) are float32 sinograms ``(n_angles, n_rows, n_rows, n_radial)`` ``[a, r1, r2, rho]``, NumPy or
    CuPy (all in one namespace), finite and >= 0. ``meta`` records the provenance (source, counts,
    seed, ...). The fields, their checks and ``SinogramData.load(path, *, xp=None)``, ``save(path)``,
    ``to(xp)`` are those of :class:`~directpet._storage.ScannerCounts` / ``CountData``.
    """

    FORMAT, VERSION, WHAT, SCANNER = "directpet.first.SinogramData", 1, "sinogram data", RotatingScanner

    @staticmethod
    def counts_shape(scanner: RotatingScanner) -> tuple:
        return scanner.sinogram_shape


def model_consistent_data(projector: SuperLORProjector, image, *, counts: Optional[float] = None, factors=None,
                          background=None, noise: bool = True, seed=None) -> SinogramData:
    """Prompts drawn from the Super-LOR model itself: ``Poisson(f * H x + b)`` (unit tests).

    A thin wrapper of :func:`directpet._storage.model_consistent_counts` (every argument is checked
    before the projection).

    Parameters
    ----------
    projector : a SuperLORProjector (``forward(image)`` gives the whole sinogram).
    image : (nz, n, n) float32 true image of ``scanner.grid.shape`` (NumPy or CuPy, matching the
        projector's backend), finite and >= 0 (an activity).
    counts : None, or the expected total of the data: ``f H x + b`` (image and background together)
        is scaled by one factor, recorded in ``meta['image_scale']``.
    factors, background : sinogram-shaped float32 f and b (counts), or None.
    noise : False returns the expected data instead of a Poisson draw.
    seed : int, Generator (NumPy, or CuPy for CuPy images) or None (fresh entropy) of the Poisson draws.
    """
    expect_instance(projector, SuperLORProjector, "projector")
    prompts, f, bg, meta = model_consistent_counts(projector, image, projector.grid.shape, counts=counts,
                                                   factors=factors, background=background, noise=noise, seed=seed)
    return SinogramData(projector.scanner, prompts, f, bg, meta)


__all__ = ["SinogramData", "model_consistent_data"]
