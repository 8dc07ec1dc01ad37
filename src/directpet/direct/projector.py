"""DIRECT histo-image projectors with LUT kernels: image <-> per-view histo-images (:ref:`physics-direct`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from .. import _core
from .._checks import require_host_arrays
from ..geometry import ImageGrid
from .base import ViewProjector, ViewsLike
from .geometry import view_index
from .lut import DirectLUT, build_lut
from .model import SRKernel

__all__ = ["HistoImageProjector"]


class HistoImageProjector(ViewProjector):
    """DIRECT forward / back projector with spatially variant and asymmetric SR kernels.

    ``forward(image, subset=None, out=None)``: ``(nz, ny, nx) -> (len(subset), nz, ny, nx)``, per
    view the scatter of every source voxel with its own kernel (computed as a gather with the
    neighbour's identifier and the flipped offset); ``adjoint(histo_images, subset=None, out=None)``
    the sum over the listed views of the gather with the voxel's own identifier. ``subset``: view
    indices (one index: a one-view stack ``(1, nz, ny, nx)``; None: all views).

    Parameters
    ----------
    grid : ImageGrid of the image and of every histo-image.
    views : a ViewSet, one View, or a sequence of Views.
    kernel : SRKernel (default: invariant 400 ps, 5.8 mm). Ignored for views given in ``luts``.
    backend : 'auto' (CUDA when usable, else CPU), 'cpu' or 'cuda' (an error without a GPU).
        The chosen one is in ``self.backend``.
    threads : CPU threads (None: OpenMP default).
    method : "default" (= "slab"), or a CUDA-only scheme: "slab_table", "slab_r16", "columns", "tlp"
        or "ilp" ("slab_r16" the default kernel as it was before issue 17, "tlp" and "ilp" the
        paper's schemes: kept as measured baselines). A CUDA-only scheme on the CPU backend is a
        ValueError naming ``method``.
    luts : optional {view index: DirectLUT} to use instead of building them (arbitrary kernels).
    check_finite : reject NaN / inf inputs (one extra pass over the input).
    """

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel] = None, *,
                 backend: str = "auto", threads: Optional[int] = None, method: str = "default",
                 luts: Optional[dict] = None, check_finite: bool = True):
        super().__init__(grid, views, kernel, backend=backend, threads=threads, check_finite=check_finite)
        from .cuda_engine import CUDA_ONLY, METHODS, CudaEngine

        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        if method in CUDA_ONLY and self.backend != "cuda":
            raise ValueError(f"method: {method!r} is a CUDA scheme and needs backend=\"cuda\" (this projector runs "
                             f"on {self.backend!r}); use method='default' on the CPU")
        self.method = method
        self._luts = {}
        if luts is not None and not isinstance(luts, Mapping):
            raise TypeError(f"luts: expected a dict {{view index: DirectLUT}}, got {type(luts).__name__}")
        for v, lut in (luts or {}).items():
            v = view_index(v, self.n_views, "luts key (view index)")
            self._check_lut(v, lut)
            self._luts[v] = lut
        self._engine = CudaEngine(self, method) if self.backend == "cuda" else _CpuEngine(self)

    def lut(self, v: int) -> DirectLUT:
        """The LUTs of view index v (built on first use and cached)."""
        v = self._view_index(v)
        if v not in self._luts:
            self._luts[v] = build_lut(self.grid, self.views[v], self.kernel)
        return self._luts[v]

    def launcher(self, forward: bool, view: int):
        """The bare CUDA launch of one view: ``f(src_ptr, out_ptr, stream=0)`` on raw device pointers
        to (nz, ny, nx) float32 arrays, asynchronous, with no argument checks (for CUDA graphs and
        for timing the kernels without Python overhead)."""
        self._require_cuda("launcher()")
        return self._engine.launcher(bool(forward), self._view_index(view))

    def _project(self, forward: bool, src, out, v: int):
        return self._engine.project(forward, src, out, v)

    def _check_lut(self, v, lut):
        if not isinstance(lut, DirectLUT):
            raise TypeError(f"luts[{v}]: expected a DirectLUT, got {type(lut).__name__}")
        if lut.lormap.shape != (self.grid.ny, self.grid.nx):
            raise ValueError(f"luts[{v}]: lormap shape {lut.lormap.shape} does not match the grid")


class _CpuEngine:
    """C++/OpenMP backend: NumPy in, NumPy out; the GIL is released while it runs."""

    def __init__(self, op: HistoImageProjector):
        self.op = op

    def project(self, forward: bool, src, out, v: int):
        require_host_arrays(src)
        lut = self.op.lut(v)
        _core.direct_project_cpu(forward, src, out, lut.lormap, lut.offsets, lut.flip, lut.values,
                                 self.op.threads)
        return out
