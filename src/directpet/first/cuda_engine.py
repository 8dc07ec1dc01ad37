"""CUDA backend of SuperLORProjector: the model uploaded once (FirstDeviceModel) and kept resident."""

from __future__ import annotations

from .._backend import cuda_module
from .._device import Staging, run_on_device_arrays


class CudaEngine:
    """The CUDA backend of a SuperLORProjector: its table on the GPU and the staging buffers of
    NumPy inputs (``forward``, ``back``, ``back_faithful`` write ``out`` and return it)."""

    def __init__(self, op):
        self.op = op
        self.model = cuda_module().FirstDeviceModel(op._model)
        if op.method == "fast" and not self.model.fast_supported:
            raise ValueError(f"method: {self.model.fast_unsupported_reason}; use method='matched'")
        self._staging = Staging()

    def forward(self, image, angles, out):
        """out = H image for the listed angles (int32), on the GPU."""
        def kernel(src, dst, stream):
            cuda_module().first_forward_cuda(self.op.method, self.model, src, angles, dst, stream)

        run_on_device_arrays(kernel, [image], [out], self._staging)
        return out

    def back(self, sino, angles, out):
        """out = the method's back projection of the listed angles' sinogram, on the GPU."""
        def kernel(src, dst, stream):
            cuda_module().first_back_cuda(self.op.method, self.model, src, angles, dst, stream)

        run_on_device_arrays(kernel, [sino], [out], self._staging)
        return out

    def back_faithful(self, sino, factors, angles, out, sens):
        """The faithful back projection of ``sino`` into ``out`` and of ``factors`` (the sensitivity)
        into ``sens``, in one pass on the GPU."""
        def kernel(src, fac, dst, sns, stream):
            cuda_module().first_back_faithful_cuda(self.model, src, fac, angles, dst, sns, stream)

        run_on_device_arrays(kernel, [sino, factors], [out, sens], self._staging)
        return out, sens
