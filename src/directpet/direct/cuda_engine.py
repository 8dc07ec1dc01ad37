"""CUDA backend of HistoImageProjector: LUTs uploaded once per view and kept resident."""

from __future__ import annotations

from .. import _core
from .._device import Staging, run_on_device

METHODS = ("default", "slab", "slab_table", "columns", "tlp", "ilp")


class CudaEngine:
    def __init__(self, op, method: str):
        self.op, self.method = op, method
        self._device_luts = {}
        self._launchers = {}
        self._staging = Staging()

    def device_lut(self, v: int):
        lut = self._device_luts.get(v)
        if lut is None:
            h = self.op.lut(v)
            lut = self._device_luts[v] = _core.DirectDeviceLut(
                list(self.op.grid.shape), h.lormap, h.offsets, h.flip, h.values)
        return lut

    def launcher(self, forward: bool, v: int):
        key = (forward, v)
        if key not in self._launchers:
            lut, method = self.device_lut(v), self.method

            def launch(src_ptr, out_ptr, stream=0):
                _core.direct_project_cuda(forward, method, src_ptr, out_ptr, lut, stream)

            self._launchers[key] = launch
        return self._launchers[key]

    def project(self, forward: bool, src, out, v: int):
        return run_on_device(self.launcher(forward, v), src, out, self._staging)
