"""Differentiable projectors for PyTorch: any linear operator as a ``torch.autograd.Function``.

``op = TorchOperator.from_operator(A, subset)`` wraps any :class:`~directpet.operators.LinearOperator`
-- a projector of any family (DIRECT ``HistoImageProjector`` / ``FFTProjector`` / ``LowRankProjector``,
FIRST ``SuperLORProjector``, dual-head ``DualHeadProjector``), restricted to some of its units
(``subset``: views, angles, classes; ``A.forward(x, subset)``'s stack), or made with the operator algebra
(``A.H``, ``A @ B``, ...); :meth:`TorchOperator.from_subset` wraps a reconstruction subset.
``y = op(x)`` is ``A x`` and back-propagates ``A^T dL/dy`` into ``x``; ``op.T`` is the adjoint,
differentiable the same way (so second derivatives work too). CUDA tensors go to the compiled
projectors without a copy (their output is a tensor on the same device); CPU tensors are handed
over as NumPy views.

The compiled projectors are float32. For ``torch.autograd.gradcheck`` (float64) wrap the float64
references instead with :meth:`TorchOperator.from_numpy` (e.g. ``directpet.reference.first``'s
``scipy.sparse`` H); tests do both.

PyTorch is imported only when this module's functions are used (``import directpet`` does not).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("directpet.autograd needs PyTorch: pip install 'directpet[torch]'") from e
    return torch


_FUNCTION = None


def _function():
    """The autograd Function (made once, when PyTorch is first needed)."""
    global _FUNCTION
    if _FUNCTION is None:
        torch = _torch()

        class LinearOperatorFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, op):
                ctx.op = op
                return op._apply(op._forward, x)

            @staticmethod
            def backward(ctx, grad):
                return ctx.op.T(grad.contiguous()), None    # A^T grad, itself differentiable

        _FUNCTION = LinearOperatorFunction
    return _FUNCTION


class TorchOperator:
    """A linear map ``A`` (image -> data) usable in PyTorch graphs.

    Parameters
    ----------
    forward, adjoint : callables ``x -> A x`` and ``y -> A^T y`` on arrays (NumPy; also CUDA
        tensors when ``cuda_tensors``).
    in_shape, out_shape : shapes of x and of A x (checked on every call).
    cuda_tensors : the callables accept CUDA tensors and return tensors on the same device (the
        compiled projectors do); else every tensor goes through NumPy on the host.
    name : for error messages and ``repr``.
    """

    def __init__(self, forward: Callable, adjoint: Callable, in_shape: Sequence[int], out_shape: Sequence[int], *,
                 cuda_tensors: bool = False, name: str = "A"):
        if not callable(forward) or not callable(adjoint):
            raise TypeError("forward, adjoint: expected callables x -> A x and y -> A^T y")
        self._forward, self._adjoint = forward, adjoint
        self.in_shape, self.out_shape = tuple(int(n) for n in in_shape), tuple(int(n) for n in out_shape)
        self.cuda_tensors, self.name = bool(cuda_tensors), str(name)
        self._transpose: Optional[TorchOperator] = None

    # --- construction ------------------------------------------------------------------------------
    @classmethod
    def from_operator(cls, op, subset=None, *, name: Optional[str] = None) -> "TorchOperator":
        """``A = op`` restricted to ``subset`` (None: all units): ``A x = op.forward(x, subset)``, of
        shape ``op.output_shape(subset)`` (a one-unit subset keeps its unit axis, e.g. a DIRECT view
        gives ``(1, nz, ny, nx)``). CUDA tensors go to op in place."""
        from .operators import LinearOperator

        if not isinstance(op, LinearOperator):
            raise TypeError(f"op: expected a directpet LinearOperator (a projector, A.H, A @ B, ...), "
                            f"got {type(op).__name__}")
        A = op if subset is None else op.subset(subset)
        return cls(A.forward, A.adjoint, A.in_shape, A.out_shape, cuda_tensors=True,
                   name=name or (op._name() if subset is None else f"{op._name()}[{subset}]"))

    @classmethod
    def from_subset(cls, problem, subset: int) -> "TorchOperator":
        """``A = A_s`` of a reconstruction subset (any family's SubsetProblem)."""
        fwd = lambda x: problem.forward(x, subset)  # noqa: E731
        adj = lambda y: problem.adjoint(y, subset)  # noqa: E731
        return cls._probed(fwd, adj, tuple(problem.image_shape), False, f"{type(problem).__name__}[{subset}]",
                           out_shape=tuple(problem.subset_shape(subset)))

    @classmethod
    def from_numpy(cls, forward: Callable, adjoint: Callable, in_shape, out_shape=None, *,
                   name: str = "A") -> "TorchOperator":
        """NumPy callables (e.g. the float64 references, or ``H @ x`` / ``H.T @ y`` of a
        ``scipy.sparse`` matrix applied to flattened arrays): the dtype of the result is kept."""
        return cls._probed(forward, adjoint, tuple(in_shape), False, name, out_shape=out_shape)

    @classmethod
    def _probed(cls, fwd, adj, in_shape, cuda_tensors, name, out_shape=None):
        if out_shape is None:
            out_shape = np.shape(fwd(np.zeros(in_shape, np.float32)))
        return cls(fwd, adj, in_shape, out_shape, cuda_tensors=cuda_tensors, name=name)

    # --- use ---------------------------------------------------------------------------------------
    @property
    def T(self) -> "TorchOperator":
        """The adjoint ``A^T`` (data -> image), differentiable."""
        if self._transpose is None:
            self._transpose = TorchOperator(self._adjoint, self._forward, self.out_shape, self.in_shape,
                                            cuda_tensors=self.cuda_tensors, name=f"{self.name}^T")
            self._transpose._transpose = self
        return self._transpose

    def __call__(self, x):
        torch = _torch()
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
        if tuple(x.shape) != self.in_shape:
            raise ValueError(f"x: expected shape {self.in_shape} for {self.name}, got {tuple(x.shape)}")
        return _function().apply(x, self)

    def _apply(self, fn, t):
        """fn on a tensor's values: the tensor itself (CUDA, compiled) or a NumPy view on the host."""
        torch = _torch()
        t = t.detach().contiguous()
        if t.is_cuda and self.cuda_tensors:
            out = fn(t)
            return out if isinstance(out, torch.Tensor) else torch.as_tensor(out, device=t.device)
        out = fn(t.cpu().numpy())
        return torch.from_numpy(np.ascontiguousarray(out)).to(t.device)

    def __repr__(self):
        return f"TorchOperator({self.name}: {self.in_shape} -> {self.out_shape})"


__all__ = ["TorchOperator"]
