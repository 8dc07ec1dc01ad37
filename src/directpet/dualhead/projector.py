"""Dual-head patch projectors: image ``(n_z D, n_y D, n_planes)`` <-> LOR vector of a class list.

The operator is ``H`` of the patch model (:mod:`directpet.dualhead.model`): LOR ``(c_u, c_l)`` of
orientation class ``k`` sums, over the planes ``p`` and the taps ``(dy, dz, w)`` of class ``k`` at ``p``,
``w * image[v_z, v_y, p]`` at the tap's voxel moved by ``D c_u`` and mirrored for the LOR's signs.
The adjoint is the exact transpose. A call with a list of classes maps to (or from) the concatenation
of those classes' LOR blocks in the listed order (``scanner.class_offsets(classes)``); a class may
appear more than once.

Methods (all the same matrix):

``default``  CPU and CUDA: the fastest pair of each backend. On the CPU (OpenMP, fp32) the forward
             accumulates each tap as a saxpy over a sign's block of shift positions on a plane-major
             copy of the image; the back projection is the exact transpose, split by
             (plane, v_y mod D) so that no two threads write one voxel (no atomics). Both give the same
             bits for any number of threads.
``alg1``, ``alg2``, ``alg3``  the paper's GPU algorithms 1-3 (science.md 3.6), CUDA only (baselines).

``forward(image, classes, skip_zero=counts)`` leaves out the LORs whose entry of ``skip_zero`` is 0
(they get 0): exact where the projection is only used divided into the counts (the OSEM numerator).

Arrays: float32, C-contiguous; NumPy on the CPU backend; on the CUDA backend NumPy (copied) or CuPy /
PyTorch CUDA arrays (used in place, output on the same device).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import _core
from .._checks import check_volume, expect_instance, output_array, require_host_arrays, require_memory
from ..operators import LinearOperator
from .model import PatchModel

METHODS = ("default", "alg1", "alg2", "alg3")
#: methods only the CUDA backend has
CUDA_ONLY = ("alg1", "alg2", "alg3")


class DualHeadProjector(LinearOperator):
    """Forward and back projector of a dual-head scanner from its patch model.

    Parameters
    ----------
    model : the PatchModel (its scanner fixes the image grid and the LOR layout).
    method : 'default', or 'alg1' / 'alg2' / 'alg3' (the paper's GPU algorithms; CUDA only).
    backend : 'auto' (CUDA when usable), 'cpu' or 'cuda' (an error without a GPU); the one used is in
        ``self.backend``.
    threads : CPU threads (None: OpenMP's default).
    check_finite : reject NaN / inf inputs (one extra pass over each input).

    ``in_shape = scanner.grid.shape`` (``(n_z D, n_y D, n_planes)``, voxels of pitch/D x pitch/D x
    plane_mm), ``out_shape = (scanner.n_lors,)`` (all classes). ``forward(image, classes)`` returns
    the ``lor_count(classes)`` LOR values (detection probabilities times voxel activity, summed) of
    the listed classes; ``adjoint(y, classes)`` back projects such a vector.
    """

    def __init__(self, model: PatchModel, method: str = "default", *, backend: str = "auto",
                 threads: Optional[int] = None, check_finite: bool = True):
        self.model = expect_instance(model, PatchModel, "model")
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        self.method = method
        self.scanner = model.scanner
        self.grid = model.scanner.grid
        self._set_runtime(backend, threads, check_finite)
        if method in CUDA_ONLY and self.backend != "cuda":
            raise ValueError(f"method: {method!r} is one of the paper's GPU algorithms and needs backend=\"cuda\" "
                             f"(this projector runs on {self.backend!r}); use method='default' on the CPU")
        self.in_shape = self.grid.shape
        self.out_shape = (self.scanner.n_lors,)
        self._model = model.host_model
        if self.backend == "cuda":
            from .cuda_engine import CudaEngine

            self._engine = CudaEngine(self)
        else:
            self._engine = _CpuEngine(self)

    # --- projections ----------------------------------------------------------------------------
    def forward(self, image, classes: Optional[Sequence[int]] = None, out=None, skip_zero=None):
        """LOR values ``(lor_count(classes),)`` of ``image`` (n_z D, n_y D, n_planes) for the classes
        (all by default); where ``skip_zero`` (same shape as the result, or None) is 0 the LOR is not
        projected and gets 0."""
        k = self.class_list(classes)
        shape = (self.lor_count(k),)
        if out is None:   # a long class list (classes may repeat) can ask for an impossible LOR vector
            require_memory("classes", 4.0 * shape[0], f"a float32 LOR vector of {shape[0]} LORs")
        image = check_volume(image, "image", self.grid.shape, self.check_finite)
        if skip_zero is not None:
            skip_zero = check_volume(skip_zero, "skip_zero", shape, self.check_finite)
        out = output_array(image, out, shape, inputs=(skip_zero,))
        return self._engine.forward(image, k, skip_zero, out)

    def adjoint(self, y, classes: Optional[Sequence[int]] = None, out=None):
        """Back projection ``(n_z D, n_y D, n_planes)`` of the classes' LOR vector ``y``
        ``(lor_count(classes),)``."""
        k = self.class_list(classes)
        y = check_volume(y, "y", (self.lor_count(k),), self.check_finite)
        out = output_array(y, out, self.grid.shape)
        return self._engine.back(y, k, out)

    def subset(self, classes: Sequence[int]) -> "ClassOperator":
        """The projector restricted to a list of classes, as a LinearOperator (shares the model)."""
        return ClassOperator(self, self.class_list(classes))

    # --- helpers --------------------------------------------------------------------------------
    def class_list(self, classes=None) -> np.ndarray:
        """Validated int32 class indices (all classes, in index order, for None)."""
        return self.scanner.class_list(classes)

    def lor_count(self, classes=None) -> int:
        """Length of the LOR vector of the listed classes (all by default)."""
        return self.scanner.lor_count(classes)


class ClassOperator(LinearOperator):
    """A DualHeadProjector restricted to a list of classes (image -> their LOR vector)."""

    def __init__(self, parent: DualHeadProjector, classes: np.ndarray):
        self.parent, self.classes = parent, classes
        self.in_shape = parent.grid.shape
        self.out_shape = (parent.lor_count(classes),)

    def forward(self, x, out=None, skip_zero=None):
        return self.parent.forward(x, self.classes, out=out, skip_zero=skip_zero)

    def adjoint(self, y, out=None):
        return self.parent.adjoint(y, self.classes, out=out)


class _CpuEngine:
    """C++/OpenMP backend: NumPy in, NumPy out; the GIL is released while it runs."""

    def __init__(self, op: DualHeadProjector):
        self.op = op

    def forward(self, image, classes, skip, out):
        require_host_arrays(image, skip, out)
        _core.dualhead_forward_cpu(self.op._model, image, classes, skip, out, self.op.threads)
        return out

    def back(self, y, classes, out):
        require_host_arrays(y, out)
        _core.dualhead_back_cpu(self.op._model, y, classes, out, self.op.threads)
        return out


__all__ = ["CUDA_ONLY", "ClassOperator", "DualHeadProjector", "METHODS"]
