"""CUDA backend of DualHeadProjector: the model uploaded once (DualHeadDeviceModel) and kept resident.

``op`` is the projector: ``op._model`` the compiled host model (``_core.DualHeadModel``), ``op.method``
one of 'default', 'alg1', 'alg2', 'alg3'. Arrays are NumPy (staged through device buffers) or CUDA
arrays (CuPy / PyTorch, used in place on their current stream); see ``directpet._device``.
"""

from __future__ import annotations

import numpy as np

from .._backend import cuda_module
from .._device import Staging, run_on_device_arrays


class CudaEngine:
    """The CUDA backend of a DualHeadProjector: its model on the GPU (``window_limit``: the tiled
    kernels' largest window, 0 for the default) and the staging buffers of NumPy inputs."""

    def __init__(self, op, window_limit: int = 0):
        self.op = op
        self.model = cuda_module().DualHeadDeviceModel(op._model, window_limit=int(window_limit))
        self._staging = Staging()

    def _classes(self, classes) -> np.ndarray:
        """int32 class indices (all classes, in index order, for None)."""
        if classes is None:
            return np.arange(self.model.n_classes, dtype=np.int32)
        return np.ascontiguousarray(classes, dtype=np.int32)

    def forward(self, image, classes, skip, out):
        """out = H image for the listed classes' LORs; skip (or None): LORs whose value is 0 get 0."""
        cls = self._classes(classes)
        method = self.op.method

        def kernel(src, sk, dst, stream):
            cuda_module().dualhead_forward_cuda(method, self.model, src, cls, sk, dst, stream)

        run_on_device_arrays(kernel, [image, skip], [out], self._staging)
        return out

    def back(self, y, classes, out):
        """out = H^T y (image), y the listed classes' LORs."""
        cls = self._classes(classes)
        method = self.op.method

        def kernel(src, dst, stream):
            cuda_module().dualhead_back_cuda(method, self.model, src, cls, dst, stream)

        run_on_device_arrays(kernel, [y], [out], self._staging)
        return out
