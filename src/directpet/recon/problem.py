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

import functools
from abc import ABC, abstractmethod
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .._checks import array_module, array_namespace, integer, integer_array

#: The most subsets :func:`spread_order` orders (2**20: far more than any family's views, angles or
#: orientation classes; a larger n is a mistake that would take minutes and gigabytes to build).
MAX_SPREAD_ORDER = 2**20


def _count(n) -> int:
    """A problem's ``n_subsets`` as a positive int, else an error naming ``n_subsets``."""
    return integer("n_subsets", n, lo=1)


def _positions(self, subset: int, positions) -> np.ndarray:
    """take_units' positions as int64, each in [0, number of units of the subset)."""
    p = integer_array("positions", positions)
    n = len(self.subset_units(subset))
    if p.size and (int(p.min()) < 0 or int(p.max()) >= n):
        raise ValueError(f"positions: expected unit positions in [0, {n}) (subset {subset} has {n} units), "
                         f"got values in [{int(p.min())}, {int(p.max())}]")
    return p


#: Methods whose subset index is checked (see SubsetProblem.__init_subclass__): the position of
#: ``subset`` among the positional arguments after self.
_SUBSET_ARGUMENT = {"forward": 1, "adjoint": 1, "data": 0, "factors": 0, "background": 0, "subset_shape": 0,
                    "subset_units": 0, "take_units": 1}


def _checking_subset(f, where: int):
    """f with its ``subset`` argument (positional ``where`` or keyword) checked first, and for
    ``take_units(a, subset, positions)`` its positions too."""
    units = f.__name__ == "take_units"

    @functools.wraps(f)
    def checked(self, *args, **kwargs):
        if not units and len(args) > where and type(args[where]) is int and 0 <= args[where] < self.n_subsets:
            return f(self, *args, **kwargs)          # the common case, first (this runs per projection call)
        args = list(args)
        if len(args) > where:
            subset = args[where] = self._subset_index(args[where])
        elif "subset" in kwargs:
            subset = kwargs["subset"] = self._subset_index(kwargs["subset"])
        else:
            return f(self, *args, **kwargs)              # Python's own TypeError for the missing argument
        if units and len(args) > where + 1:
            args[where + 1] = _positions(self, subset, args[where + 1])
        elif units and "positions" in kwargs:
            kwargs["positions"] = _positions(self, subset, kwargs["positions"])
        return f(self, *args, **kwargs)

    checked._checks_subset = True
    return checked


class SubsetProblem(ABC):
    """A linear projector split into ``n_subsets`` subsets, with data, factors and background.

    Subclasses set ``n_subsets`` and ``image_shape`` and implement :meth:`forward`,
    :meth:`adjoint` and :meth:`data`; :meth:`factors`, :meth:`background` and :meth:`order` have
    defaults (none, none, ``0 .. n_subsets-1``).

    Every subset index a method of a subclass receives (``forward``, ``adjoint``, ``data``,
    ``factors``, ``background``, ``subset_shape``, and the unit hooks ``subset_units`` and
    ``take_units`` of :class:`StoredSubsets`) is checked before the subclass's code runs: an
    integer in ``[0, n_subsets)``, else a TypeError / ValueError naming ``subset`` (a -1 would
    otherwise silently take the last subset of a list, True subset 1). ``take_units`` also checks
    its ``positions``. :meth:`__init_subclass__` wraps those methods once per class, so each
    family's implementation needs no check of its own.
    """

    n_subsets: int
    image_shape: tuple

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, where in _SUBSET_ARGUMENT.items():
            f = cls.__dict__.get(name)
            if callable(f) and not getattr(f, "_checks_subset", False):
                setattr(cls, name, _checking_subset(f, where))

    def _subset_index(self, subset) -> int:
        """subset as an int in [0, n_subsets - 1], else an error naming ``subset``."""
        return integer("subset", subset, lo=0, hi=_count(getattr(self, "n_subsets", None)) - 1)

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

    #: Processes that hold parts of every subset (``directpet.parallel.DistributedSubsets``); 1 here.
    n_ranks: int = 1

    def reduce_sum(self, value: float) -> float:
        """The sum of a per-process float over the processes sharing this problem (the value itself
        when one process holds the whole problem). The algorithms pass their log-likelihood sums
        through it; ``adjoint`` of a shared problem already returns the summed image."""
        return value

    # --- shared ---------------------------------------------------------------------------------
    @property
    def xp(self):
        """Array namespace of the data (numpy or cupy)."""
        return array_module(self.data(0))

    def subset_shape(self, subset: int) -> tuple:
        """Shape of subset ``subset``'s data (and of ``forward(x, subset)``)."""
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
        n = _count(self.n_subsets)
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
    subsets, dual-head orientation subsets) subclass it, call :meth:`store` in their constructor
    and implement :meth:`forward` and :meth:`adjoint`.

    A subset is a list of *units* (DIRECT views, FIRST angles, dual-head orientation classes).
    A family that implements the three unit hooks (:meth:`subset_units`, :meth:`forward_units`,
    :meth:`adjoint_units`, and :meth:`take_units` where its subset arrays are not stacks over
    units) can be split across processes with :meth:`share`.
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

    # --- splitting the subsets across processes (directpet.parallel) ------------------------------
    # The unit hooks a family implements to be shareable (ViewSubsets, AngleSubsets, DualHeadSubsets):
    #   subset_units(subset) -> list: the units of a subset, in the order of its arrays;
    #   forward_units(x, units, out=None, data=None): the projection of x onto those units, laid out
    #       as take_units lays out their data (``data``: their counts, for families that use them);
    #   adjoint_units(y, units, out=None): the back projection (an image) of such an array.
    _UNIT_HOOKS = ("subset_units", "forward_units", "adjoint_units")

    def take_units(self, a, subset: int, positions: Sequence[int]):
        """The part of a subset array (data, factors or background) that belongs to the units at
        ``positions`` of ``subset_units(subset)`` (integers in ``[0, len(subset_units(subset)))``,
        checked before any family's override runs). Default: rows of a stack over the units."""
        xp = array_module(a)
        return xp.ascontiguousarray(a[xp.asarray(np.asarray(positions, dtype=np.int64))])

    def share(self, rank: int, n_ranks: int, xp=None) -> "SubsetShare":
        """Process ``rank``'s share when every subset is split across ``n_ranks`` processes.

        Each subset keeps its index; its units are dealt round-robin (unit positions ``rank``,
        ``rank + n_ranks``, ... of ``subset_units(s)``), so every process holds about the same
        work of every subset. The share copies its units' data, factors and background (to the
        array namespace ``xp`` when given, e.g. ``cupy``: only the share is then resident on the
        device) and projects through this problem's unit hooks. Raises ValueError when a subset
        has fewer units than ``n_ranks`` ([HA]'s one-view block-RAMLA subsets cannot be split: run
        those on one device, or group the views into blocks of at least ``n_ranks`` views).
        """
        missing = [h for h in self._UNIT_HOOKS if not callable(getattr(self, h, None))]
        if missing:
            raise TypeError(f"problem: {type(self).__name__} cannot be shared across processes (it has no "
                            f"{', '.join(missing)})")
        if xp is not None:
            array_namespace(xp)
        return SubsetShare(self, rank, n_ranks, xp)


class SubsetShare(StoredSubsets):
    """One process's share of a :class:`StoredSubsets` (see :meth:`StoredSubsets.share`).

    ``forward(x, s)`` is the projection onto the share's units of subset s only; ``adjoint(y, s)``
    is the back projection of those units alone: summing it over the processes
    (:class:`directpet.parallel.DistributedSubsets`) gives the whole subset's back projection.
    Attributes: ``parent``, ``rank``, ``n_ranks``, ``units`` (per subset, the share's units),
    ``positions`` (their positions in the parent's subsets).
    """

    def __init__(self, parent: StoredSubsets, rank: int, n_ranks: int, xp=None):
        if not isinstance(parent, StoredSubsets):
            raise TypeError(f"parent: expected a StoredSubsets, got {type(parent).__name__}")
        for name, v in (("n_ranks", n_ranks), ("rank", rank)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name}: expected an integer, got {type(v).__name__}")
        if n_ranks < 1:
            raise ValueError(f"n_ranks: expected >= 1, got {n_ranks}")
        if not 0 <= rank < n_ranks:
            raise ValueError(f"rank: expected an integer in [0, {n_ranks}), got {rank}")
        self.parent, self.rank, self.n_ranks = parent, int(rank), int(n_ranks)
        self.image_shape = tuple(parent.image_shape)
        self.units, self.positions = [], []
        for s in range(parent.n_subsets):
            units = list(parent.subset_units(s))
            if len(units) < n_ranks:
                raise ValueError(f"n_ranks: subset {s} has {len(units)} unit(s), fewer than the {n_ranks} "
                                 f"processes to share it (one-view block-RAMLA subsets run on one device; group the "
                                 f"views into blocks of at least {n_ranks})")
            pos = list(range(rank, len(units), n_ranks))
            self.positions.append(pos)
            self.units.append([units[p] for p in pos])
        move = (lambda a: a) if xp is None else (lambda a: xp.asarray(a))

        def part(getter, s):
            a = getter(s)
            return None if a is None else move(parent.take_units(a, s, self.positions[s]))

        n = parent.n_subsets
        self.store([part(parent.data, s) for s in range(n)], [part(parent.factors, s) for s in range(n)],
                   [part(parent.background, s) for s in range(n)], parent.order())

    def forward(self, x, subset: int, out=None):
        return self.parent.forward_units(x, self.units[subset], out=out, data=self._data[subset])

    def adjoint(self, y, subset: int, out=None):
        return self.parent.adjoint_units(y, self.units[subset], out=out)


def spread_order(n: int) -> List[int]:
    """A visiting order of n subsets in which consecutive ones are far apart.

    ``floor(vdc(i) * n)`` for i = 0, 1, ... with vdc the bit-reversed (van der Corput) sequence,
    duplicates skipped: 0, 20, 10, 30, 5, 25, ... for n = 40. With subsets that interleave angles
    (or views), consecutive updates then use data from distant directions. ``n`` is an integer in
    ``[1, MAX_SPREAD_ORDER]``.
    """
    n = integer("n", n, lo=1, hi=MAX_SPREAD_ORDER)
    # i < 2**bits gives vdc(i) = j / 2**bits for every j: a spacing <= 1 / n, so every k in 0..n-1
    # occurs; the order is that of first occurrences (vectorised, exact: j / 2**bits is a float64).
    bits = (n - 1).bit_length()
    i = np.arange(2**bits, dtype=np.int64)
    j = np.zeros_like(i)
    for b in range(bits):                                 # bit reversal of i over `bits` bits
        j |= ((i >> b) & 1) << (bits - 1 - b)
    k = np.floor(j * 2.0**-bits * n).astype(np.int64)
    _, first = np.unique(k, return_index=True)
    return k[np.sort(first)].tolist()


def check_nonnegative(a, name: str, subset: Optional[int], xp, shape: Optional[Sequence[int]]):
    """a must be a float32 array of namespace xp (and of ``shape``), finite and >= 0."""
    array_namespace(xp)
    where = "" if subset is None else f" (subset {subset})"
    if array_module(a) is not xp or not hasattr(a, "dtype"):
        raise TypeError(f"{name}: expected a {xp.__name__} array{where}, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{name}: expected dtype float32{where}, got {a.dtype} (use .astype(np.float32))")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}{where}, got {tuple(a.shape)}")
    if not bool(xp.isfinite(a).all()):
        raise ValueError(f"{name}: contains NaN or inf{where}")
    if bool((a < 0).any()):
        raise ValueError(f"{name}: contains negative values{where} (min {float(a.min()):g}); expected values >= 0")
    return a


def unit_groups(subsets, n_units: int, deal, unit_list, unit_name: str):
    """A subset problem's third argument ``subsets`` as its subsets, shared by the families:

    * an int ``n`` in ``[1, n_units]``: ``deal(n)``, the family's split into n subsets (DIRECT
      interleaved view blocks, FIRST interleaved angles, dual-head random orientation classes);
    * a sequence of unit lists: each entry through ``unit_list`` (the projector's check of a subset:
      integers in range, an int a subset of one unit), together holding every unit of ``[0,
      n_units)`` exactly once.

    Returns ``(groups, dealt)``: a list of int arrays, and whether they were dealt from a number.
    Anything else is a TypeError / ValueError naming ``subsets``.
    """
    if isinstance(subsets, (bool, np.bool_)) or isinstance(subsets, (str, bytes)):
        raise TypeError(f"subsets: expected a number of subsets or a list of {unit_name} lists, got "
                        f"{type(subsets).__name__} {subsets!r}")
    if isinstance(subsets, (int, np.integer)) or (getattr(subsets, "ndim", None) == 0 and hasattr(subsets, "item")):
        return deal(integer("subsets", subsets, lo=1, hi=n_units)), True
    try:
        n = len(subsets)
    except TypeError:
        raise TypeError(f"subsets: expected a number of subsets or a list of {unit_name} lists, got "
                        f"{type(subsets).__name__}") from None
    if n == 0:
        raise ValueError(f"subsets: expected a number of subsets or a non-empty list of {unit_name} lists")
    groups = []
    for k, g in enumerate(subsets):
        try:
            groups.append(unit_list(g))
        except (TypeError, ValueError) as e:
            raise type(e)(f"subsets: entry {k} is not a list of {unit_name}s ({e})") from None
    flat = np.sort(np.concatenate([np.ravel(g) for g in groups]))
    if not np.array_equal(flat, np.arange(n_units)):
        raise ValueError(f"subsets: expected lists of {unit_name}s that together hold every {unit_name} of "
                         f"[0, {n_units}) exactly once")
    return groups, False


for _name in ("factors", "background", "subset_shape"):        # the base's own defaults, checked alike
    setattr(SubsetProblem, _name, _checking_subset(getattr(SubsetProblem, _name), _SUBSET_ARGUMENT[_name]))


__all__ = ["MAX_SPREAD_ORDER", "StoredSubsets", "SubsetProblem", "SubsetShare", "check_nonnegative", "spread_order",
           "unit_groups"]
