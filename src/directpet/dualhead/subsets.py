"""The dual-head problem for the shared reconstruction layer: LOR data split into orientation subsets.

The paper's OSEM ([DH], :ref:`physics-dualhead`) splits the ``n_y x n_z`` orientation classes at random into
``n_subsets`` subsets: 72 subsets of 104 classes at full size. :func:`orientation_subsets` does it
reproducibly with a fixed, documented seed, :class:`DualHeadSubsets` holds the subsets' data,
factors and background (each subset's classes' LOR blocks, in the subset's class order) and runs the
projector on a subset's classes (the projector's units: ``projector.forward(x, classes)``).
"""

from __future__ import annotations

from typing import List

import numpy as np

from .._checks import array_module, integer_array, positive_int
from ..recon.problem import StoredSubsets, unit_groups
from .data import DualHeadData, _scanner_of
from .geometry import DualHeadScanner

#: The seed of the orientation subsets (the year of the paper and its 72 subsets: 2012, 72).
DEFAULT_SUBSET_SEED = 201272


def orientation_subsets(scanner: DualHeadScanner, n_subsets: int = 72,
                        seed: int = DEFAULT_SUBSET_SEED) -> List[np.ndarray]:
    """The orientation classes split at random into ``n_subsets`` subsets (int32 arrays).

    The classes ``0 .. n_classes - 1`` are put in a random order -- sorted by 64-bit keys drawn from
    ``numpy.random.PCG64(seed).random_raw`` (the bit generator's raw stream, which NumPy keeps stable
    across versions) -- and cut into consecutive runs: subset ``s`` gets ``n_classes // n_subsets``
    classes, plus one for the first ``n_classes % n_subsets`` subsets (sizes differ by at most one,
    equal when ``n_subsets`` divides ``n_classes``: 72 x 104 at full size). Each subset lists its classes
    in increasing order (neighbouring classes are neighbouring LOR blocks). Every class is in exactly
    one subset.

    With the defaults and the full-size scanner (7488 classes) subset 0 begins with classes
    ``[80, 81, 94, 97, 98]`` and subset 71 with ``[55, 153, 160, 217, 229]``.
    """
    if not isinstance(scanner, DualHeadScanner):
        raise TypeError(f"scanner: expected a DualHeadScanner, got {type(scanner).__name__}")
    n_subsets = positive_int("n_subsets", n_subsets)
    n = scanner.n_classes
    if n_subsets > n:
        raise ValueError(f"n_subsets: expected an integer in [1, {n}] (the number of orientation classes), "
                         f"got {n_subsets}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    keys = np.random.PCG64(int(seed)).random_raw(n)
    order = np.argsort(keys, kind="stable").astype(np.int32)
    base, extra = divmod(n, n_subsets)
    ends = np.cumsum([base + (1 if s < extra else 0) for s in range(n_subsets)])
    return [np.sort(part) for part in np.split(order, ends[:-1])]


class DualHeadSubsets(StoredSubsets):
    """A dual-head projector and DualHeadData split into orientation subsets.

    Parameters
    ----------
    projector : the DualHeadProjector (its method and backend are used as they are). Anything with
        ``forward(x, subset, out=, skip_zero=)``, ``adjoint(y, subset, out=)`` (``subset``: a list of
        classes) and a ``scanner`` (or ``model.scanner``) works.
    data : DualHeadData on the projector's side (NumPy for the CPU backend; NumPy or CuPy for CUDA).
    subsets : the number of random orientation subsets (72 by default: :func:`orientation_subsets`
        with ``seed``), or explicit lists of classes that together hold every class exactly once
        (visited in the given order).
    seed : the seed of the random split (:data:`DEFAULT_SUBSET_SEED`; unused with explicit lists).
    skip_zero_counts : project only the LORs with non-zero counts in the forward projection (the
        paper's zero-count skip): ``forward(x, s)`` is then 0 on the subset's zero-count LORs. The OSEM
        update stays exact -- a LOR with zero counts contributes ``0 / (H x)_i = 0`` to the
        back-projected ratio -- but the forward values there are not ``(H x)_i``, so a Poisson
        log-likelihood evaluated through this problem is not the true one (its ``sum (H x)_i`` term
        misses those LORs). Use ``skip_zero_counts=False`` to monitor the likelihood.

    Each subset's data, factors and background are its classes' LOR blocks (located with
    ``scanner.class_offsets()``) concatenated in the subset's class order, the layout of
    ``projector.forward(x, classes)``. ``n_subsets`` (attribute) is the number of subsets;
    ``classes[s]`` the classes of subset ``s``.
    """

    def __init__(self, projector, data: DualHeadData, subsets=72, *, seed: int = DEFAULT_SUBSET_SEED,
                 skip_zero_counts: bool = False):
        scanner = _scanner_of(projector)
        for name in ("forward", "adjoint"):
            if not callable(getattr(projector, name, None)):
                raise TypeError(f"projector: expected a dual-head projector with forward/adjoint, got "
                                f"{type(projector).__name__}")
        if not isinstance(data, DualHeadData):
            raise TypeError(f"data: expected DualHeadData, got {type(data).__name__}")
        if data.scanner != scanner:
            raise ValueError("data: its scanner differs from the projector's")
        if not isinstance(skip_zero_counts, (bool, np.bool_)):
            raise TypeError(f"skip_zero_counts: expected a bool, got {type(skip_zero_counts).__name__}")
        self.projector, self.lor_data, self.scanner = projector, data, scanner
        self.skip_zero_counts = bool(skip_zero_counts)
        groups, _ = unit_groups(subsets, scanner.n_classes, lambda n: orientation_subsets(scanner, n, seed),
                                lambda g: scanner.class_list(g, name="subset"), "orientation class")
        self.classes = groups
        self.image_shape = scanner.grid.shape
        xp = data.xp
        offsets = scanner.class_offsets()
        parts = {"data": [], "factors": [], "background": []}
        for g in groups:
            idx = xp.asarray(_lor_indices(offsets, g))
            for key, a in (("data", data.prompts), ("factors", data.factors), ("background", data.background)):
                parts[key].append(None if a is None else xp.ascontiguousarray(a[idx]))
        self.store(parts["data"], parts["factors"], parts["background"], range(len(groups)))

    def forward(self, x, subset: int, out=None):
        skip = self._data[subset] if self.skip_zero_counts else None
        return self.projector.forward(x, self.classes[subset], out=out, skip_zero=skip)

    def adjoint(self, y, subset: int, out=None):
        return self.projector.adjoint(y, self.classes[subset], out=out)

    # --- unit hooks: the classes of a subset (StoredSubsets.share splits them across processes) ---
    def subset_units(self, subset: int) -> list:
        """The orientation classes of ``subset``, in the order of its arrays."""
        return [int(k) for k in self.classes[subset]]

    def take_units(self, a, subset: int, positions):
        """The LOR blocks of the classes at ``positions`` of the subset, in that order."""
        offsets = self.scanner.class_offsets()
        classes = self.classes[subset]
        local = np.concatenate([[0], np.cumsum(offsets[classes + 1] - offsets[classes])])
        xp = array_module(a)
        return xp.ascontiguousarray(a[xp.asarray(_lor_indices(local, np.asarray(positions, np.int64)))])

    def forward_units(self, x, units, out=None, data=None):
        """The projection of image ``x`` onto the LORs of the classes ``units`` (their blocks in that
        order); ``data``: their counts (the zero-count skip when ``skip_zero_counts``)."""
        skip = data if self.skip_zero_counts else None
        return self.projector.forward(x, integer_array("units", units), out=out, skip_zero=skip)

    def adjoint_units(self, y, units, out=None):
        """The back projection (an image) of ``y``, the LOR blocks of the classes ``units``."""
        return self.projector.adjoint(y, integer_array("units", units), out=out)

    def totals(self):
        """(sum of the data, sum of the background, number of LORs): one reduction per whole array."""
        d = self.lor_data
        xp = d.xp
        b = 0.0 if d.background is None else float(d.background.sum(dtype=xp.float64))
        return float(d.prompts.sum(dtype=xp.float64)), b, int(d.prompts.size)


def _lor_indices(offsets: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Indices (int64) into the full vector of the LORs of ``classes``, class blocks in the listed order."""
    starts = offsets[classes]
    lengths = offsets[classes + 1] - starts
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) + shift


__all__ = ["DEFAULT_SUBSET_SEED", "DualHeadSubsets", "orientation_subsets"]
