"""Dual-head patch projectors: image ``(n_z D, n_y D, n_planes)`` <-> LOR vector of a list of classes.

The operator is ``H`` of the patch model (:mod:`directpet.dualhead.model`): LOR ``(c_u, c_l)`` of
orientation class ``k`` sums, over the planes ``p`` and the taps ``(dy, dz, w)`` of class ``k`` at ``p``,
``w * image[v_z, v_y, p]`` at the tap's voxel moved by ``D c_u`` and mirrored for the LOR's signs.
The adjoint is the exact transpose. The units of this :class:`~directpet.operators.LinearOperator` are
the orientation classes: ``forward(image, subset)`` with a list of classes maps to (or from) the
concatenation of those classes' LOR blocks in the listed order (``scanner.class_offsets(subset)``); a
class may appear more than once.

Methods (all the same matrix):

``default``  CPU and CUDA: the fastest pair of each backend. On the CPU (OpenMP, fp32) the forward
             accumulates each tap as a saxpy over a sign's block of shift positions on a plane-major
             copy of the image; the back projection is the exact transpose, split by
             (plane, v_y mod D) so that no two threads write one voxel (no atomics). Both give the same
             bits for any number of threads.

``alg1``, ``alg2``, ``alg3``  the paper's GPU algorithms 1-3 ([DH], :ref:`physics-dualhead`), CUDA only (baselines).

``forward(image, subset, skip_zero=counts)`` leaves out the LORs whose entry of ``skip_zero`` is 0
(they get 0): exact where the projection is only used divided into the counts (the OSEM numerator).

Arrays: float32, C-contiguous; NumPy on the CPU backend; on the CUDA backend NumPy (copied) or CuPy /
PyTorch CUDA arrays (used in place, output on the same device).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _core
from .._checks import require_host_arrays, require_memory, shares_memory
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
    plane_mm), ``out_shape = (scanner.n_lors,)`` (all classes); the units are the ``n_units =
    scanner.n_classes`` orientation classes. ``forward(image, subset)`` returns the
    ``lor_count(subset)`` LOR values (detection probabilities times voxel activity, summed) of the
    listed classes; ``adjoint(y, subset)`` back projects such a vector.
    """

    in_name, out_name, unit_name = "image", "y", "class"

    def __init__(self, model: PatchModel, method: str = "default", *, backend: str = "auto",
                 threads: Optional[int] = None, check_finite: bool = True):
        self._set_model(model, PatchModel, "model", method, METHODS, backend, threads, check_finite, CUDA_ONLY)
        self.out_shape = (self.scanner.n_lors,)
        self.n_units = self.scanner.n_classes
        self._all_classes = np.arange(self.n_units, dtype=np.int32)
        self._class_lors = self.scanner.class_lor_counts()          # LORs per class (int64)
        self._model = model.host_model
        if self.backend == "cuda":
            from .cuda_engine import CudaEngine

            self._engine = CudaEngine(self)
        else:
            self._engine = _CpuEngine(self)

    # --- the LinearOperator hooks (arrays and units checked by the base) ------------------------
    def _subset_shape(self, units: np.ndarray) -> tuple:
        n = self.lor_count(units)
        # a long class list (classes may repeat) can ask for an impossible LOR vector: refuse it
        # before anything of that size is allocated
        require_memory("subset", 4.0 * n, f"a float32 LOR vector of {n} LORs")
        return (n,)

    def _forward(self, image, units, out, skip_zero=None):
        """out = H image; where ``skip_zero`` (the shape of out, or None) is 0 the LOR is not projected
        and gets 0."""
        if skip_zero is not None:
            skip_zero = self._checked(skip_zero, "skip_zero", out.shape, "forward")
            if shares_memory(skip_zero, out):     # the kernels read skip_zero while they write out
                raise ValueError(f"out: overlaps skip_zero; pass a separate array, or out=None "
                                 f"[{self._name()}.forward]")
        return self._engine.forward(image, self._classes(units), skip_zero, out)

    def _adjoint(self, y, units, out):
        return self._engine.back(y, self._classes(units), out)

    def _classes(self, units) -> np.ndarray:
        """The int32 class list the engines take (every class, in index order, for None)."""
        return self._all_classes if units is None else units

    def lor_count(self, subset=None) -> int:
        """Length of the LOR vector of the listed classes (all by default)."""
        units = self.units(subset)
        return self.out_shape[0] if units is None else int(self._class_lors[units].sum())


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


__all__ = ["CUDA_ONLY", "DualHeadProjector", "METHODS"]
