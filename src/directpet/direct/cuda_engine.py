"""CUDA backend of HistoImageProjector: LUTs uploaded once per view and kept resident."""

from __future__ import annotations

from .. import _core
from .._device import Staging, run_on_device

METHODS = ("default", "slab", "slab_table", "columns", "columns24", "columns32", "tlp", "ilp")


class CudaEngine:
    def __init__(self, op, method: str):
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        self.op, self.method = op, method
        self._device_luts = {}
        self._staging = Staging()

    def device_lut(self, v: int):
        lut = self._device_luts.get(v)
        if lut is None:
            h = self.op.lut(v)
            lut = self._device_luts[v] = _core.DirectDeviceLut(
                list(self.op.grid.shape), h.lormap, h.offsets, h.flip, h.values)
        return lut

    def project(self, forward: bool, src, out, v: int):
        lut = self.device_lut(v)

        def kernel(src_ptr, out_ptr, stream):
            _core.direct_project_cuda(forward, self.method, src_ptr, out_ptr, lut, stream)

        return run_on_device(kernel, src, out, self._staging)
