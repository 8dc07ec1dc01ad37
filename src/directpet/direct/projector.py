"""DIRECT histo-image projectors: image <-> per-view histo-images (science.md 1.7)."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from .. import _core
from .._backend import resolve_backend
from .._checks import array_module, check_volume
from ..geometry import ImageGrid
from ..operators import LinearOperator
from .kernels import SRKernel
from .lut import DirectLUT, build_lut
from .views import View, ViewSet

ViewsLike = Union[ViewSet, View, Sequence[View]]


class HistoImageProjector(LinearOperator):
    """DIRECT forward / back projector with spatially variant and asymmetric SR kernels.

    ``forward(image, v)`` is the scatter of every source voxel with its own kernel (computed as a
    gather with the neighbour's identifier and the flipped offset); ``adjoint(histo, v)`` the gather
    with the voxel's own identifier. Without ``view`` both act on all views at once:
    ``forward: (nz, ny, nx) -> (n_views, nz, ny, nx)`` and ``adjoint`` the sum of the per-view
    back projections.

    Parameters
    ----------
    grid : ImageGrid of the image and of every histo-image.
    views : a ViewSet, one View, or a sequence of Views.
    kernel : SRKernel (default: invariant 400 ps, 5.8 mm). Ignored for views given in ``luts``.
    backend : 'auto' (CUDA when usable, else CPU), 'cpu' or 'cuda' (an error without a GPU).
        The chosen one is in ``self.backend``.
    threads : CPU threads (None: OpenMP default).
    method : CUDA scheme: "default" (= "slab"), "columns", "tlp" or "ilp" (the paper's schemes, kept as
        measured baselines). Ignored on the CPU.
    luts : optional {view index: DirectLUT} to use instead of building them (arbitrary kernels).
    check_finite : reject NaN / inf inputs (one extra pass over the input).
    """

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel] = None, *,
                 backend: str = "auto", threads: Optional[int] = None, method: str = "default",
                 luts: Optional[dict] = None, check_finite: bool = True):
        if not isinstance(grid, ImageGrid):
            raise TypeError(f"grid: expected an ImageGrid, got {type(grid).__name__}")
        self.grid = grid
        self.views = _as_view_list(views)
        self.kernel = SRKernel.invariant() if kernel is None else kernel
        if not isinstance(self.kernel, SRKernel):
            raise TypeError(f"kernel: expected an SRKernel, got {type(self.kernel).__name__}")
        if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 1):
            raise ValueError(f"threads: expected a positive integer or None, got {threads!r}")
        self.threads = 0 if threads is None else int(threads)
        self.check_finite = bool(check_finite)
        self._luts = {}
        for v, lut in (luts or {}).items():
            self._check_lut(self._view_index(v), lut)
            self._luts[int(v)] = lut
        self.backend = resolve_backend(backend)
        if self.backend == "cuda":
            from .cuda_engine import CudaEngine

            self._engine = CudaEngine(self, method)
        else:
            from .cuda_engine import METHODS

            if method not in METHODS:
                raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
            self._engine = _CpuEngine(self)
        self.method = method
        self.in_shape = grid.shape
        self.out_shape = (len(self.views),) + grid.shape

    @property
    def n_views(self) -> int:
        return len(self.views)

    def lut(self, v: int) -> DirectLUT:
        """The LUTs of view index v (built on first use and cached)."""
        v = self._view_index(v)
        if v not in self._luts:
            self._luts[v] = build_lut(self.grid, self.views[v], self.kernel)
        return self._luts[v]

    # --- single view ---------------------------------------------------------------------------
    def forward(self, image, view: Optional[int] = None, out=None):
        """H_v image for one view (``(nz, ny, nx)``) or, with ``view=None``, all views stacked."""
        if view is None:
            return self.forward_views(image, range(self.n_views), out=out)
        v = self._view_index(view)
        image = check_volume(image, "image", self.grid.shape, self.check_finite)
        out = self._out(image, out, self.grid.shape)
        return self._engine.project(True, image, out, v)

    def adjoint(self, histo, view: Optional[int] = None, out=None):
        """H_v^T histo for one view or, with ``view=None``, sum_v H_v^T histo[v] over all views."""
        if view is None:
            return self.adjoint_views(histo, range(self.n_views), out=out)
        v = self._view_index(view)
        histo = check_volume(histo, "histo_image", self.grid.shape, self.check_finite)
        out = self._out(histo, out, self.grid.shape)
        return self._engine.project(False, histo, out, v)

    # --- batches of views ----------------------------------------------------------------------
    def forward_views(self, image, views: Sequence[int], out=None):
        """Stack of H_v image for v in views: (len(views), nz, ny, nx)."""
        vs = [self._view_index(v) for v in views]
        image = check_volume(image, "image", self.grid.shape, self.check_finite)
        out = self._out(image, out, (len(vs),) + self.grid.shape)
        for k, v in enumerate(vs):
            self._engine.project(True, image, out[k], v)
        return out

    def adjoint_views(self, histos, views: Sequence[int], out=None):
        """sum_k H_{views[k]}^T histos[k]: histos is (len(views), nz, ny, nx)."""
        vs = [self._view_index(v) for v in views]
        histos = check_volume(histos, "histo_images", (len(vs),) + self.grid.shape, self.check_finite)
        out = self._out(histos, out, self.grid.shape)
        out[...] = 0
        part = _like(histos, self.grid.shape)
        for k, v in enumerate(vs):
            out += self._engine.project(False, histos[k], part, v)
        return out

    def view_operator(self, view: int) -> "ViewOperator":
        """The single-view operator H_v as a LinearOperator (image -> one histo-image)."""
        return ViewOperator(self, self._view_index(view))

    # --- helpers --------------------------------------------------------------------------------
    def _view_index(self, v) -> int:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"view: expected an integer view index, got {type(v).__name__}")
        if not 0 <= v < len(self.views):
            raise ValueError(f"view: index {v} outside [0, {len(self.views)})")
        return int(v)

    def _check_lut(self, v, lut):
        if not isinstance(lut, DirectLUT):
            raise TypeError(f"luts[{v}]: expected a DirectLUT, got {type(lut).__name__}")
        if lut.lormap.shape != (self.grid.ny, self.grid.nx):
            raise ValueError(f"luts[{v}]: lormap shape {lut.lormap.shape} does not match the grid")

    def _out(self, like, out, shape):
        if out is None:
            return _like(like, shape)
        return check_volume(out, "out", shape, check_finite=False)


class ViewOperator(LinearOperator):
    """H_v of one view, derived from a HistoImageProjector (shares its LUTs and backend)."""

    def __init__(self, parent: HistoImageProjector, view: int):
        self.parent, self.view = parent, view
        self.in_shape = self.out_shape = parent.grid.shape

    def forward(self, x):
        return self.parent.forward(x, self.view)

    def adjoint(self, y):
        return self.parent.adjoint(y, self.view)


class _CpuEngine:
    """C++/OpenMP backend: NumPy in, NumPy out; the GIL is released while it runs."""

    def __init__(self, op: HistoImageProjector):
        self.op = op

    def project(self, forward: bool, src, out, v: int):
        if not isinstance(src, np.ndarray):
            raise TypeError("the CPU backend takes NumPy arrays; use backend='cuda' for GPU arrays")
        lut = self.op.lut(v)
        _core.direct_project_cpu(forward, src, out, lut.lormap, lut.offsets, lut.flip, lut.values,
                                 self.op.threads)
        return out


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _like(x, shape):
    """A new float32 array of `shape` living where x lives (NumPy, CuPy or PyTorch)."""
    if _is_torch(x):
        import torch  # optional dependency, present because x is a tensor

        return torch.empty(shape, dtype=torch.float32, device=x.device)
    xp = array_module(x)
    return xp.empty(shape, dtype=xp.float32)


def _as_view_list(views) -> list:
    if isinstance(views, ViewSet):
        return list(views.views)
    if isinstance(views, View):
        return [views]
    try:
        vs = list(views)
    except TypeError:
        raise TypeError(f"views: expected a ViewSet, a View or a sequence of Views, got {type(views).__name__}") from None
    if not vs or not all(isinstance(v, View) for v in vs):
        raise TypeError("views: expected a non-empty sequence of View objects")
    return vs
