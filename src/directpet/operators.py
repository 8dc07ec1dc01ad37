"""The operator model every projector shares: a linear map with forward / adjoint over its units.

Every projector (DIRECT's histo-image projectors, FIRST's Super-LOR projector, the dual-head projector)
is a :class:`LinearOperator` with one calling convention::

    y = A.forward(x, subset=None, out=None)      # A x            (subset: a list of units, or None: all)
    x = A.adjoint(y, subset=None, out=None)      # A^T y

over the family's *units* -- DIRECT's views, FIRST's angles, the dual-head orientation classes. The
result of a subset is the stack (or vector) of its units in the listed order; one unit is a subset of
length one. ``out`` is overwritten, never accumulated into, and may not overlap the input. Outputs live
where the inputs live (NumPy -> NumPy, CuPy -> CuPy, PyTorch CUDA -> PyTorch). The input and output
checks (array type, dtype float32, shape, C order, finite values, ``out``) are made here, once, and
their errors name the operator and the argument; a family implements only :meth:`_forward` and
:meth:`_adjoint` on checked arrays.

The algebra of the field's operator libraries (parallelproj, SigPy's ``Linop``) works on any of them:
``A.H`` (the adjoint as an operator), ``A @ B`` (composition), ``A + B``, ``A - B``, ``c * A``, ``-A``,
:func:`vstack` (the outputs of several operators of one input, concatenated as a vector),
:meth:`LinearOperator.subset` (the operator restricted to some units) and :meth:`LinearOperator.norm`
(the largest singular value, by power iteration).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from numbers import Number
from typing import Optional, Sequence

import numpy as np

from ._checks import check_volume, integer, integer_array, is_device_array, output_array


class LinearOperator(ABC):
    """A linear map ``in_shape -> out_shape`` of float32 arrays, optionally split into units.

    Subclasses set ``in_shape`` and ``out_shape`` (the whole operator's) and implement
    :meth:`_forward` / :meth:`_adjoint`. A projector split into units also sets ``n_units`` and
    ``unit_name`` and implements :meth:`_subset_shape` (the output shape of a list of units).
    ``in_name`` / ``out_name`` name the input and output arrays in error messages.
    """

    in_shape: tuple
    out_shape: tuple
    in_name: str = "x"
    out_name: str = "y"
    #: number of units (views, angles, classes); None: the operator is not split into units
    n_units: Optional[int] = None
    unit_name: str = "unit"
    #: NumPy defers to the operator: ``array * A`` / ``array @ A`` are TypeErrors, not object arrays of operators
    __array_ufunc__ = None

    # --- what a subclass implements ------------------------------------------------------------------
    @abstractmethod
    def _forward(self, x, units, out, **kwargs):
        """out = A x (restricted to ``units``: None for all, else an int32 NumPy array of checked unit
        indices); x and out are checked. Returns out."""

    @abstractmethod
    def _adjoint(self, y, units, out):
        """out = A^T y (y of the shape of ``units``' output); y and out are checked. Returns out."""

    def _subset_shape(self, units: np.ndarray) -> tuple:
        """Output shape of the listed units (operators split into units override it)."""
        raise TypeError(f"subset: {self._name()} is not split into units")

    # --- the calling convention -----------------------------------------------------------------------
    def forward(self, x, subset=None, out=None, **kwargs):
        """``A x`` for the listed units (``subset``; None: all): an array of
        ``self.output_shape(subset)`` living where x lives, written into ``out`` when given."""
        units = self._units(subset, "forward")
        x = self._checked(x, self.in_name, self.in_shape, "forward")
        out = self._output(x, out, self._shape_of(units), "forward")
        return self._forward(x, units, out, **kwargs)

    def adjoint(self, y, subset=None, out=None):
        """``A^T y`` for the listed units (y of ``self.output_shape(subset)``): an array of
        ``in_shape`` living where y lives, written into ``out`` when given."""
        units = self._units(subset, "adjoint")
        y = self._checked(y, self.out_name, self._shape_of(units), "adjoint")
        out = self._output(y, out, self.in_shape, "adjoint")
        return self._adjoint(y, units, out)

    def back(self, y, subset=None, out=None):
        """Alias of :meth:`adjoint` (back projection)."""
        return self.adjoint(y, subset, out)

    def __call__(self, x, subset=None, out=None, **kwargs):
        return self.forward(x, subset, out, **kwargs)

    # --- units ---------------------------------------------------------------------------------------
    def units(self, subset=None) -> Optional[np.ndarray]:
        """``subset`` checked: None (every unit), or an int32 array of unit indices in ``[0, n_units)``
        (a sequence, a NumPy integer array, or one integer for a subset of one); repeats are allowed."""
        if subset is None:
            return None
        if self.n_units is None:
            raise TypeError(f"subset: {self._name()} is not split into units; pass subset=None")
        if type(subset) is int and 0 <= subset < self.n_units:     # the common case, first (once per call)
            return np.array([subset], np.int32)
        if isinstance(subset, (int, np.integer)) or getattr(subset, "ndim", None) == 0:
            subset = [subset]      # one integer (or a 0-d array): a subset of one; integer_array refuses bools
        a = integer_array("subset", subset)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"subset: expected a non-empty sequence of {self.unit_name} indices, got shape {a.shape}")
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= self.n_units:
            raise ValueError(f"subset: {self.unit_name} indices must lie in [0, {self.n_units}), got {lo}..{hi}")
        return a.astype(np.int32)

    def output_shape(self, subset=None) -> tuple:
        """Shape of ``forward``'s result for ``subset`` (None: ``out_shape``)."""
        return self._shape_of(self._units(subset, "output_shape"))

    def _shape_of(self, units: Optional[np.ndarray]) -> tuple:
        return tuple(self.out_shape) if units is None else tuple(self._subset_shape(units))

    def subset(self, subset) -> "LinearOperator":
        """The operator restricted to the listed units, as an operator (shares this one's model):
        ``A.subset(s).forward(x) == A.forward(x, s)``."""
        return SubsetOperator(self, self._units(subset, "subset"))

    # --- the algebra ---------------------------------------------------------------------------------
    @property
    def H(self) -> "LinearOperator":
        """The adjoint ``A^T`` as an operator (``A.H.forward = A.adjoint``)."""
        return AdjointOperator(self)

    def __matmul__(self, other):
        if not isinstance(other, LinearOperator):
            return NotImplemented
        return ComposedOperator(self, other)

    def __add__(self, other):
        if not isinstance(other, LinearOperator):
            return NotImplemented
        return SumOperator(self, other)

    def __sub__(self, other):
        if not isinstance(other, LinearOperator):
            return NotImplemented
        return SumOperator(self, ScaledOperator(other, -1.0))

    def __neg__(self):
        return ScaledOperator(self, -1.0)

    def __mul__(self, c):
        if not isinstance(c, Number):
            return NotImplemented          # (a bool, a complex or a NaN is refused, by name, just below)
        return ScaledOperator(self, c)

    __rmul__ = __mul__

    def norm(self, n_iter: int = 30, rng=None) -> float:
        """The largest singular value ``||A||_2`` by power iteration on ``A^T A`` (NumPy arrays;
        ``n_iter`` iterations from a random start)."""
        from .sim.random import make_rng

        n_iter = integer("n_iter", n_iter, lo=1)
        x = make_rng(rng).random(self.in_shape).astype(np.float32)
        x /= np.linalg.norm(x)
        s = 0.0
        for _ in range(n_iter):
            y = np.asarray(self.adjoint(self.forward(x)), dtype=np.float32)
            s = float(np.linalg.norm(y))
            if s == 0.0:
                return 0.0
            x = y / np.float32(s)
        return float(np.sqrt(s))

    def adjointness_test(self, rng=None, dtype=np.float32) -> float:
        """Relative mismatch ``|<y, A x> - <A^T y, x>| / |<y, A x>|`` on fresh random inputs.

        Inner products are accumulated in float64. For a float32 operator a value well under 1e-5
        means the pair is an exact transpose up to rounding.
        """
        from .sim.random import make_rng       # the checked seed / Generator (errors name rng)

        rng = make_rng(rng)
        x = rng.random(self.in_shape).astype(dtype)
        y = rng.random(self.out_shape).astype(dtype)
        ax = np.asarray(self.forward(x), dtype=np.float64)
        aty = np.asarray(self.adjoint(y), dtype=np.float64)
        lhs = float(np.vdot(y.astype(np.float64), ax))
        rhs = float(np.vdot(aty, x.astype(np.float64)))
        return abs(lhs - rhs) / abs(lhs)

    # --- run settings (the projectors') and checks ---------------------------------------------------
    def _set_runtime(self, backend: str, threads, check_finite: bool):
        """The projectors' common run settings: ``backend`` (the one actually used, 'cpu' or
        'cuda'), ``threads`` (CPU threads; 0 = the OpenMP default) and ``check_finite``."""
        from ._backend import resolve_backend
        from ._checks import check_threads, flag

        self.threads = check_threads(threads)
        self.check_finite = flag("check_finite", check_finite)
        if not isinstance(backend, str):
            raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {type(backend).__name__}")
        self.backend = resolve_backend(backend)

    def _set_model(self, model, model_cls: type, model_name: str, method: str, methods, backend: str, threads,
                   check_finite: bool, cuda_only=()):
        """The model-based projectors' common setup (FIRST SuperLORProjector, dual-head
        DualHeadProjector): ``self.<model_name>`` (a ``model_cls``), ``method`` (one of ``methods``;
        one of ``cuda_only`` needs the CUDA backend: a ValueError naming ``method`` otherwise),
        ``scanner`` and ``grid`` (the model's), the run settings (:meth:`_set_runtime`) and
        ``in_shape`` (the grid's shape)."""
        from ._checks import expect_instance

        setattr(self, model_name, expect_instance(model, model_cls, model_name))
        if method not in methods:
            raise ValueError(f"method: expected one of {tuple(methods)}, got {method!r}")
        self.method = method
        self.scanner = model.scanner
        self.grid = model.scanner.grid
        self._set_runtime(backend, threads, check_finite)
        if method in cuda_only and self.backend != "cuda":
            others = [m for m in methods if m not in cuda_only]
            raise ValueError(f"method: {method!r} runs on the GPU only and needs backend=\"cuda\" (this projector "
                             f"runs on {self.backend!r}); use method={others[0]!r} on the CPU")
        self.in_shape = self.grid.shape

    def _name(self) -> str:
        return type(self).__name__

    def _units(self, subset, method: str) -> Optional[np.ndarray]:
        """:meth:`units`, its errors naming this operator and ``method``."""
        try:
            return self.units(subset)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} [{self._name()}.{method}]") from None

    def _checked(self, a, name: str, shape: tuple, method: str):
        try:
            return check_volume(a, name, shape, getattr(self, "check_finite", True))
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} [{self._name()}.{method}]") from None

    def _output(self, a, out, shape: tuple, method: str):
        try:
            if out is not None and is_device_array(out) != is_device_array(a):
                raise TypeError(f"out: must live where the input lives (a {type(a).__name__} input, "
                                f"a {type(out).__name__} out)")
            return output_array(a, out, shape)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} [{self._name()}.{method}]") from None


class _Derived(LinearOperator):
    """An operator made from others (the algebra): ``check_finite`` follows the first one's, so that
    switching the check off on a projector switches it off on its subsets and its adjoint too."""

    @property
    def check_finite(self) -> bool:
        return getattr(self._parts[0], "check_finite", True)


class SubsetOperator(_Derived):
    """An operator restricted to a list of its units (``A.subset(units)``): image -> their stack.
    Extra forward keywords (dual-head's ``skip_zero``) pass through to the parent."""

    def __init__(self, parent: LinearOperator, units: np.ndarray):
        self.parent, self.subset_units, self._parts = parent, units, (parent,)
        self.in_shape = tuple(parent.in_shape)
        self.out_shape = parent._shape_of(units)
        self.in_name, self.out_name = parent.in_name, parent.out_name

    def _forward(self, x, units, out, **kwargs):
        return self.parent._forward(x, self.subset_units, out, **kwargs)

    def _adjoint(self, y, units, out):
        return self.parent._adjoint(y, self.subset_units, out)

    def _name(self) -> str:
        return f"{self.parent._name()}.subset"


class AdjointOperator(_Derived):
    """``A.H``: the adjoint of A as an operator (``A.H.H`` is A again)."""

    def __init__(self, op: LinearOperator):
        self.op, self._parts = op, (op,)
        self.in_shape, self.out_shape = tuple(op.out_shape), tuple(op.in_shape)
        self.in_name, self.out_name = op.out_name, op.in_name

    @property
    def H(self) -> LinearOperator:
        return self.op

    # The composites' _forward take no extra keywords: a keyword of one family's forward (skip_zero)
    # has no meaning for A.H, A @ B, ..., and is a TypeError rather than silently dropped.
    def _forward(self, x, units, out):
        return self.op._adjoint(x, None, out)

    def _adjoint(self, y, units, out):
        return self.op._forward(y, None, out)

    def _name(self) -> str:
        return f"{self.op._name()}.H"


class ComposedOperator(_Derived):
    """``A @ B``: x -> A (B x) (B's output shape must be A's input shape)."""

    def __init__(self, a: LinearOperator, b: LinearOperator):
        if tuple(b.out_shape) != tuple(a.in_shape):
            raise ValueError(f"A @ B: B = {b._name()} gives {tuple(b.out_shape)}, "
                             f"A = {a._name()} takes {tuple(a.in_shape)}")
        self.a, self.b, self._parts = a, b, (b, a)
        self.in_shape, self.out_shape = tuple(b.in_shape), tuple(a.out_shape)
        self.in_name, self.out_name = b.in_name, a.out_name

    def _forward(self, x, units, out):
        return self.a.forward(self.b.forward(x), out=out)

    def _adjoint(self, y, units, out):
        return self.b.adjoint(self.a.adjoint(y), out=out)

    def _name(self) -> str:
        return f"({self.a._name()} @ {self.b._name()})"


class SumOperator(_Derived):
    """``A + B`` (same shapes)."""

    def __init__(self, a: LinearOperator, b: LinearOperator):
        if (tuple(a.in_shape), tuple(a.out_shape)) != (tuple(b.in_shape), tuple(b.out_shape)):
            raise ValueError(f"A + B: A = {a._name()} is {tuple(a.in_shape)} -> {tuple(a.out_shape)}, "
                             f"B = {b._name()} is {tuple(b.in_shape)} -> {tuple(b.out_shape)}")
        self.a, self.b, self._parts = a, b, (a, b)
        self.in_shape, self.out_shape = tuple(a.in_shape), tuple(a.out_shape)
        self.in_name, self.out_name = a.in_name, a.out_name

    def _forward(self, x, units, out):
        self.a.forward(x, out=out)
        out += self.b.forward(x)
        return out

    def _adjoint(self, y, units, out):
        self.a.adjoint(y, out=out)
        out += self.b.adjoint(y)
        return out

    def _name(self) -> str:
        return f"({self.a._name()} + {self.b._name()})"


class ScaledOperator(_Derived):
    """``c * A`` for a finite real number c."""

    def __init__(self, op: LinearOperator, c):
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, Number) or np.iscomplexobj(c):
            raise TypeError(f"c * A: expected a real number c, got {type(c).__name__} {c!r}")
        if not np.isfinite(c):
            raise ValueError(f"c * A: expected a finite c, got {c!r}")
        self.op, self.c, self._parts = op, float(c), (op,)
        self.in_shape, self.out_shape = tuple(op.in_shape), tuple(op.out_shape)
        self.in_name, self.out_name = op.in_name, op.out_name

    def _forward(self, x, units, out):
        self.op.forward(x, out=out)
        out *= self.c
        return out

    def _adjoint(self, y, units, out):
        self.op.adjoint(y, out=out)
        out *= self.c
        return out

    def _name(self) -> str:
        return f"{self.c:g} * {self.op._name()}"


class StackedOperator(_Derived):
    """``vstack([A_1, ..., A_k])``: x -> the concatenation of the flattened ``A_i x`` (one input shape)."""

    def __init__(self, ops: Sequence[LinearOperator]):
        if not isinstance(ops, (list, tuple)) or not ops or not all(isinstance(o, LinearOperator) for o in ops):
            raise TypeError(f"vstack: expected a non-empty list of LinearOperators, got {ops!r}")
        ops = list(ops)
        if len({tuple(o.in_shape) for o in ops}) != 1:
            raise ValueError("vstack: the operators take different inputs: "
                             + ", ".join(f"{o._name()} takes {tuple(o.in_shape)}" for o in ops))
        self.ops, self._parts = ops, tuple(ops)
        self.sizes = [int(np.prod(o.out_shape)) for o in ops]
        self.in_shape, self.out_shape = tuple(ops[0].in_shape), (sum(self.sizes),)
        self.in_name = ops[0].in_name

    def _blocks(self, v):
        """The operators' parts of a stacked vector v, as views shaped like their outputs."""
        start = 0
        for op, n in zip(self.ops, self.sizes):
            yield op, v[start:start + n].reshape(op.out_shape)
            start += n

    def _forward(self, x, units, out):
        for op, part in self._blocks(out):
            op.forward(x, out=part)                 # written in place: the slices are contiguous views
        return out

    def _adjoint(self, y, units, out):
        out[...] = 0
        for op, part in self._blocks(y):
            out += op.adjoint(part)
        return out

    def _name(self) -> str:
        return f"vstack({', '.join(o._name() for o in self.ops)})"


def vstack(ops: Sequence[LinearOperator]) -> LinearOperator:
    """The operators of one input stacked vertically: x -> concatenation of their flattened outputs."""
    return StackedOperator(ops)


__all__ = ["AdjointOperator", "ComposedOperator", "LinearOperator", "ScaledOperator", "StackedOperator",
           "SubsetOperator", "SumOperator", "vstack"]
