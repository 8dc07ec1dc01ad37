"""FIRST's problem for the shared reconstruction layer: the sinogram split into angle subsets.

OSEM with ``n`` subsets of interleaved angles (:ref:`physics-first`; the paper gives no subset count:
directpet's choice is 13 subsets of 10 angles for 130 angles, ``AngleSubsets(projector, data, 13)``):
subset ``m`` holds angles ``m, m + n, m + 2 n, ...``;
subsets are visited in a spread order (:func:`directpet.recon.problem.spread_order`). The same back projector
serves numerator and sensitivity (the layer back-projects the factors for the sensitivity).
"""

from __future__ import annotations

from typing import List

import numpy as np

from .._checks import expect_instance, integer_array, positive_int, require_memory
from ..recon.problem import StoredSubsets, spread_order, unit_groups
from .data import SinogramData
from .projector import SuperLORProjector


def interleaved_angle_subsets(n_angles: int, n_subsets: int) -> List[np.ndarray]:
    """Subset m = angles m, m + n_subsets, ... (int32 arrays)."""
    n_angles = positive_int("n_angles", n_angles)
    require_memory("n_angles", 4.0 * n_angles, f"{n_angles} int32 angle indices")
    n_subsets = positive_int("n_subsets", n_subsets)
    if n_subsets > n_angles:
        raise ValueError(f"n_subsets: expected an integer in [1, {n_angles}], got {n_subsets!r}")
    return [np.arange(m, n_angles, n_subsets, dtype=np.int32) for m in range(n_subsets)]


class AngleSubsets(StoredSubsets):
    """A SuperLORProjector and SinogramData split into angle subsets.

    Parameters
    ----------
    projector : the SuperLORProjector (its method and backend are used as they are).
    data : SinogramData (prompts, optional factors and background) on the projector's side
        (NumPy for the CPU backend; NumPy or CuPy for CUDA).
    subsets : the number of interleaved angle subsets (13 by default: subset ``m`` holds angles
        ``m, m + subsets, ...``, visited in a spread order), or explicit lists of angles that together
        hold every angle exactly once (visited in the given order).

    ``n_subsets`` (attribute) is the number of subsets; ``angles[s]`` the angles of subset ``s``.
    """

    def __init__(self, projector: SuperLORProjector, data: SinogramData, subsets=13):
        self.projector = expect_instance(projector, SuperLORProjector, "projector")
        self.sinogram = expect_instance(data, SinogramData, "data")
        if data.scanner != projector.scanner:
            raise ValueError("data: its scanner differs from the projector's")
        n_angles = projector.n_angles
        groups, dealt = unit_groups(subsets, n_angles, lambda n: interleaved_angle_subsets(n_angles, n),
                                    lambda g: projector._angles(projector.units(g)), "angle")
        order = spread_order(len(groups)) if dealt else range(len(groups))
        self.angles = groups
        self.image_shape = projector.grid.shape
        xp = data.xp
        take = lambda a, g: None if a is None else xp.ascontiguousarray(a[xp.asarray(g)])  # noqa: E731
        self.store(*([take(a, g) for g in groups] for a in (data.prompts, data.factors, data.background)), order)

    def forward(self, x, subset: int, out=None):
        return self.projector.forward(x, self.angles[subset], out=out)

    def adjoint(self, y, subset: int, out=None):
        return self.projector.adjoint(y, self.angles[subset], out=out)

    # --- unit hooks: the angles of a subset (StoredSubsets.share splits them across processes) ----
    def subset_units(self, subset: int) -> list:
        """The angles of ``subset``, in the order of its arrays."""
        return [int(a) for a in self.angles[subset]]

    def forward_units(self, x, units, out=None, data=None):
        """The sinogram of image ``x`` at the angles ``units`` (a stack over them; ``data`` unused)."""
        # integer_array: units are never truncated (0.5 is no angle); the projector checks the range
        return self.projector.forward(x, integer_array("units", units), out=out)

    def adjoint_units(self, y, units, out=None):
        """The back projection (an image) of ``y``, the sinogram of the angles ``units``."""
        return self.projector.adjoint(y, integer_array("units", units), out=out)


__all__ = ["AngleSubsets", "interleaved_angle_subsets"]
