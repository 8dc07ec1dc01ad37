"""Communicators: the sum over processes that a reconstruction shared across GPUs needs.

A :class:`Communicator` has a ``rank`` and a ``size`` and sums arrays and floats over its
processes, in place and identically on every process (so every process then computes the same
update). The implementations use engines the field already trusts:

* :class:`NcclCommunicator` -- NCCL through CuPy's bindings (``cupy.cuda.nccl``), for CuPy arrays;
* :class:`TorchCommunicator` -- ``torch.distributed`` (``nccl`` for CUDA arrays, ``gloo`` for NumPy
  arrays on the CPU); CuPy arrays are handed to PyTorch without a copy;
* :class:`SingleProcess` -- one process (sums are the values themselves).

CuPy and PyTorch are imported only when such a communicator is made.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._checks import array_module


class Communicator(ABC):
    """Sums over the processes of one reconstruction (``size`` processes, this one ``rank``)."""

    rank: int = 0
    size: int = 1
    name: str = ""

    @abstractmethod
    def allreduce(self, a):
        """a <- sum of a over the processes, in place; returns a. a: a C-contiguous float32 or
        float64 array (CuPy for NCCL)."""

    @abstractmethod
    def allreduce_scalar(self, value: float) -> float:
        """The sum of a float over the processes (float64)."""

    def barrier(self):
        """Wait until every process has arrived."""
        self.allreduce_scalar(0.0)

    def close(self):
        """Release the communicator (idempotent)."""

    def __repr__(self):
        return f"{type(self).__name__}(rank={self.rank}, size={self.size})"


class SingleProcess(Communicator):
    """One process: every sum is the value itself."""

    name = "single"

    def allreduce(self, a):
        return a

    def allreduce_scalar(self, value: float) -> float:
        return float(value)


def _check_buffer(a, name="a"):
    if not hasattr(a, "dtype") or a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected a float32 or float64 array, got {getattr(a, 'dtype', type(a).__name__)}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous array (sums are in place)")
    return a


def nccl_available() -> bool:
    """True when CuPy and its NCCL bindings can be imported."""
    try:
        from cupy.cuda import nccl

        return bool(getattr(nccl, "available", True))
    except Exception:
        return False


def nccl_unique_id():
    """A new NCCL unique id (made by one process, handed to all of a communicator's processes)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


class NcclCommunicator(Communicator):
    """NCCL through CuPy: one process per GPU, sums of CuPy arrays on CuPy's current stream.

    Parameters: ``rank`` and ``size`` of this process, ``unique_id`` from :func:`nccl_unique_id`
    (the same for every process). The communicator lives on CuPy's current device.
    """

    name = "nccl"

    def __init__(self, rank: int, size: int, unique_id):
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise ImportError("NcclCommunicator needs CuPy with NCCL (pip install cupy-cuda12x / cupy-cuda13x "
                              "and nvidia-nccl); or use TorchCommunicator") from e
        self._cp, self._nccl = cupy, nccl
        self.rank, self.size = int(rank), int(size)
        self._comm = nccl.NcclCommunicator(self.size, unique_id, self.rank)
        self._scalar = cupy.zeros(1, cupy.float64)

    def allreduce(self, a):
        if array_module(a) is not self._cp:
            raise TypeError(f"a: NcclCommunicator sums CuPy arrays, got {type(a).__name__}")
        _check_buffer(a)
        kind = self._nccl.NCCL_FLOAT32 if a.dtype == np.float32 else self._nccl.NCCL_FLOAT64
        self._comm.allReduce(a.data.ptr, a.data.ptr, a.size, kind, self._nccl.NCCL_SUM,
                             self._cp.cuda.get_current_stream().ptr)
        return a

    def allreduce_scalar(self, value: float) -> float:
        self._scalar.fill(float(value))
        return float(self.allreduce(self._scalar)[0])

    def close(self):
        if getattr(self, "_comm", None) is not None:
            self._comm.destroy()
            self._comm = None


class TorchCommunicator(Communicator):
    """``torch.distributed``: ``backend`` 'nccl' (CUDA arrays: CuPy or PyTorch) or 'gloo' (NumPy).

    ``init_method`` is a rendezvous address every process gives (e.g. ``'tcp://127.0.0.1:29500'``).
    CuPy arrays are summed in place through PyTorch without a copy (``__cuda_array_interface__``);
    NumPy arrays through ``torch.from_numpy``.
    """

    name = "torch"

    def __init__(self, rank: int, size: int, init_method: str, backend: str = "nccl"):
        try:
            import torch
            import torch.distributed as dist
        except ImportError as e:
            raise ImportError("TorchCommunicator needs PyTorch (pip install 'directpet[torch]')") from e
        if backend not in ("nccl", "gloo"):
            raise ValueError(f"backend: expected 'nccl' or 'gloo', got {backend!r}")
        self._torch, self._dist, self.backend = torch, dist, backend
        self.rank, self.size = int(rank), int(size)
        if backend == "nccl":
            torch.cuda.set_device(0)      # the process's own GPU comes first in CUDA_VISIBLE_DEVICES
        dist.init_process_group(backend, init_method=init_method, rank=self.rank, world_size=self.size)
        self._open = True

    def _tensor(self, a):
        torch = self._torch
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, np.ndarray):
            return torch.from_numpy(a)
        return torch.as_tensor(a, device="cuda")      # CuPy: shares the memory

    def allreduce(self, a):
        _check_buffer(a)
        self._dist.all_reduce(self._tensor(a))
        return a

    def allreduce_scalar(self, value: float) -> float:
        torch = self._torch
        t = torch.tensor([float(value)], dtype=torch.float64, device="cuda" if self.backend == "nccl" else "cpu")
        self._dist.all_reduce(t)
        return float(t.item())

    def close(self):
        if getattr(self, "_open", False):
            self._dist.destroy_process_group()
            self._open = False


__all__ = ["Communicator", "NcclCommunicator", "SingleProcess", "TorchCommunicator", "nccl_available",
           "nccl_unique_id"]
