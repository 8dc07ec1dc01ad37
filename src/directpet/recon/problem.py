"""The one interface every reconstruction algorithm uses: a projector split into subsets.

DIRECT views (or blocks of views), FIRST angle subsets and dual-head orientation subsets are all a
:class:`SubsetProblem`. For subset ``s`` the model of the mean data is

    ``ybar_s = f_s * (A_s x) + b_s``

with ``A_s`` the subset's projector, ``f_s`` multiplicative factors (normalisation, attenuation,
sensitivity; ``None`` means 1) and ``b_s`` an additive background (randoms, scatter; ``None``
means 0). ``d_s`` are the measured counts. ``forward(x, s)`` returns an array of the shape of
``data(s)``; ``adjoint(y, s)`` maps such an array back to an image of ``image_shape``.

The algorithms in :mod:`directpet.recon.algorithms` are written against this interface and the
array namespace of the data (NumPy or CuPy): they never import a projector family. A family
provides one subclass (``directpet.direct.ViewSubsets``, ``directpet.first.AngleSubsets``, ...).

:meth:`SubsetProblem.check` validates data, factors and background once, for every family:
arrays of the expected shape, finite, non-negative; the error names the argument and the subset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .._checks import array_module


class SubsetProblem(ABC):
    """A linear projector split into ``n_subsets`` subsets, with data, factors and background.

    Subclasses set ``n_subsets`` and ``image_shape`` and implement :meth:`forward`,
    :meth:`adjoint` and :meth:`data`; :meth:`factors`, :meth:`background` and :meth:`order` have
    defaults (none, none, ``0 .. n_subsets-1``).
    """

    n_subsets: int
    image_shape: tuple

    # --- what a family implements ---------------------------------------------------------------
    @abstractmethod
    def forward(self, x, subset: int, out=None):
        """``A_s x``: an array of the shape of ``data(subset)`` (float32, namespace of x)."""

    @abstractmethod
    def adjoint(self, y, subset: int, out=None):
        """``A_s^T y``: an image of ``image_shape`` (float32); y has the shape of ``data(subset)``."""

    @abstractmethod
    def data(self, subset: int):
        """Measured counts ``d_s`` (float32, non-negative)."""

    def factors(self, subset: int):
        """Multiplicative factors ``f_s`` (shape of the data), or None for 1."""
        return None

    def background(self, subset: int):
        """Additive background ``b_s`` (shape of the data), or None for 0."""
        return None

    def order(self) -> List[int]:
        """The visiting order of the subsets in OSEM and block-RAMLA (each subset once)."""
        return list(range(self.n_subsets))

    # --- shared ---------------------------------------------------------------------------------
    @property
    def xp(self):
        """Array namespace of the data (numpy or cupy)."""
        return array_module(self.data(0))

    def subset_shape(self, subset: int) -> tuple:
        return tuple(self.data(subset).shape)

    def totals(self) -> Tuple[float, float, int]:
        """``(sum of the data, sum of the background, number of data values)`` over all subsets.

        Sums in float64. The algorithms take their uniform start image and their ratio guard
        (``1e-9 * mean(d)``) from it. A family whose subsets are slices of whole arrays may
        override it with one reduction per array.
        """
        xp = self.xp
        d_sum, b_sum, size = 0.0, 0.0, 0
        for s in range(self.n_subsets):
            d, b = self.data(s), self.background(s)
            d_sum += float(d.sum(dtype=xp.float64))
            size += int(d.size)
            if b is not None:
                b_sum += float(b.sum(dtype=xp.float64))
        return d_sum, b_sum, size

    def check(self) -> "SubsetProblem":
        """Validate every subset's data, factors and background; returns self.

        Raises ValueError naming ``data``, ``factors`` or ``background`` (and the subset) for a
        wrong shape, NaN or inf, or negative values, and TypeError for a non-float32 array or an
        array that does not live where the data live.
        """
        n = self.n_subsets
        if isinstance(n, (bool, np.bool_)) or int(n) != n or n < 1:
            raise ValueError(f"n_subsets: expected a positive integer, got {n!r}")
        xp = self.xp
        for s in range(n):
            d = self.data(s)
            check_nonnegative(d, "data", s, xp, None)
            for name, a in (("factors", self.factors(s)), ("background", self.background(s))):
                if a is not None:
                    check_nonnegative(a, name, s, xp, tuple(d.shape))
        return self


class StoredSubsets(SubsetProblem):
    """A SubsetProblem whose subsets' data, factors and background are held as lists of arrays.

    Families that cut their data into per-subset arrays once (DIRECT view blocks, FIRST angle
    subsets) subclass it, call :meth:`store` in their constructor and implement only
    :meth:`forward` and :meth:`adjoint`.
    """

    def store(self, data: Sequence, factors: Sequence, background: Sequence, order: Sequence[int]):
        """Per-subset arrays (None entries for absent factors / background) and the visiting order."""
        self._data, self._factors, self._background = list(data), list(factors), list(background)
        self._order = [int(s) for s in order]
        self.n_subsets = len(self._data)

    def data(self, subset: int):
        return self._data[subset]

    def factors(self, subset: int):
        return self._factors[subset]

    def background(self, subset: int):
        return self._background[subset]

    def order(self) -> List[int]:
        return list(self._order)


def spread_order(n: int) -> List[int]:
    """A visiting order of n subsets in which consecutive ones are far apart.

    ``floor(vdc(i) * n)`` for i = 0, 1, ... with vdc the bit-reversed (van der Corput) sequence,
    duplicates skipped: 0, 20, 10, 30, 5, 25, ... for n = 40. With subsets that interleave angles
    (or views), consecutive updates then use data from distant directions.
    """
    if isinstance(n, (bool, np.bool_)) or int(n) != n or n < 1:
        raise ValueError(f"n: expected a positive integer, got {n!r}")
    order, seen, i = [], set(), 0
    while len(order) < n:
        k = int(_van_der_corput(i) * n)
        if k not in seen:
            seen.add(k)
            order.append(k)
        i += 1
    return order


def _van_der_corput(k: int) -> float:
    x, denom = 0.0, 1.0
    while k:
        denom *= 2
        x += (k & 1) / denom
        k >>= 1
    return x


def check_nonnegative(a, name: str, subset: Optional[int], xp, shape: Optional[Sequence[int]]):
    """a must be a float32 array of namespace xp (and of ``shape``), finite and >= 0."""
    where = "" if subset is None else f" (subset {subset})"
    if array_module(a) is not xp or not hasattr(a, "dtype"):
        raise TypeError(f"{name}: expected a {xp.__name__} array{where}, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{name}: expected dtype float32{where}, got {a.dtype}")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}{where}, got {tuple(a.shape)}")
    if not bool(xp.isfinite(a).all()):
        raise ValueError(f"{name}: contains NaN or inf{where}")
    if bool((a < 0).any()):
        raise ValueError(f"{name}: contains negative values{where}; counts, factors and background "
                         f"must be >= 0")
    return a


__all__ = ["StoredSubsets", "SubsetProblem", "check_nonnegative", "spread_order"]
