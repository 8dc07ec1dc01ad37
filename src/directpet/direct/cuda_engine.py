"""CUDA backend of HistoImageProjector: LUTs uploaded once per view and kept resident."""

from __future__ import annotations

from .._backend import cuda_module
from .._device import Staging, run_on_device

METHODS = ("default", "slab", "slab_table", "slab_r16", "columns", "tlp", "ilp")
#: the schemes only the CUDA backend has (the CPU has one scheme: "default", also called "slab")
CUDA_ONLY = ("slab_table", "slab_r16", "columns", "tlp", "ilp")


class CudaEngine:
    """The CUDA backend of a HistoImageProjector: its per-view LUTs on the GPU and the staging
    buffers of NumPy inputs.

    ``op`` is the projector (it supplies ``grid`` and ``lut(v)``), ``method`` the CUDA scheme, one of
    ``METHODS``. Device LUTs and launchers are built on first use of a view and kept for the life of
    the engine.
    """

    def __init__(self, op, method: str):
        self.op, self.method = op, method
        self._device_luts = {}
        self._launchers = {}
        self._staging = Staging()

    def device_lut(self, v: int):
        """The LUTs of view index ``v`` uploaded to the GPU (a ``directpet._cuda.DirectDeviceLut``), cached."""
        lut = self._device_luts.get(v)
        if lut is None:
            h = self.op.lut(v)
            lut = self._device_luts[v] = cuda_module().DirectDeviceLut(
                list(self.op.grid.shape), h.lormap, h.offsets, h.flip, h.values)
        return lut

    def launcher(self, forward: bool, v: int):
        """The bare launch of view index ``v``: ``f(src_ptr, out_ptr, stream=0)`` runs the forward
        (``forward=True``) or adjoint projection between raw device pointers to ``(nz, ny, nx)``
        float32 arrays, asynchronously, with no argument checks. Cached per ``(forward, v)``."""
        key = (forward, v)
        if key not in self._launchers:
            lut, method = self.device_lut(v), self.method

            def launch(src_ptr, out_ptr, stream=0):
                cuda_module().direct_project_cuda(forward, method, src_ptr, out_ptr, lut, stream)

            self._launchers[key] = launch
        return self._launchers[key]

    def project(self, forward: bool, src, out, v: int):
        """``out = H_v src`` (forward) or ``H_v^T src`` for view index ``v``; ``src`` and ``out`` are
        ``(nz, ny, nx)`` float32, both NumPy (staged through device buffers, ``out`` filled on return)
        or both device arrays (used in place, on their current stream). Returns ``out``."""
        return run_on_device(self.launcher(forward, v), src, out, self._staging)
