"""What every DIRECT projector shares: views, input checks, per-view and batched forward/adjoint.

A projector maps an image ``(nz, ny, nx)`` to one histo-image per view. Subclasses implement
``_project(forward, src, out, v)`` for one view on their backend; this class gives them
``forward`` / ``adjoint`` (one view, or all views with ``view=None``), ``forward_views`` /
``adjoint_views`` (batches), ``view_operator`` (H_v as a LinearOperator) and the argument checks.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Optional, Sequence, Union

from .._checks import check_volume, expect_instance, like, output_array
from ..geometry import ImageGrid
from ..operators import LinearOperator
from .histo_data import require_stack_memory
from .kernels import SRKernel
from .views import View, ViewSet, view_index

ViewsLike = Union[ViewSet, View, Sequence[View]]


class ViewProjector(LinearOperator):
    """Base of the DIRECT projectors (spatial, FFT, low-rank FFT).

    Attributes: ``grid``, ``views`` (list of View), ``viewset`` (the ViewSet the views came from, or
    None when they were given as Views), ``kernel``, ``backend`` ('cpu' or 'cuda', the
    one actually used), ``threads`` (CPU threads, 0 = OpenMP/FFTW default), ``check_finite``,
    ``in_shape = grid.shape`` and ``out_shape = (n_views,) + grid.shape``.
    """

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel], *, backend: str,
                 threads: Optional[int], check_finite: bool):
        self.grid = expect_instance(grid, ImageGrid, "grid")
        self.views = as_view_list(views)
        self.viewset = views if isinstance(views, ViewSet) else None
        self.kernel = SRKernel.invariant() if kernel is None else expect_instance(kernel, SRKernel, "kernel")
        self._set_runtime(backend, threads, check_finite)
        self.in_shape = grid.shape
        self.out_shape = (len(self.views),) + grid.shape

    @property
    def n_views(self) -> int:
        return len(self.views)

    @abstractmethod
    def _project(self, forward: bool, src, out, v: int):
        """out = H_v src (forward) or H_v^T src for one view; src/out already checked. Returns out."""

    # --- single view ---------------------------------------------------------------------------
    def forward(self, image, view: Optional[int] = None, out=None):
        """H_v image for one view (``(nz, ny, nx)``) or, with ``view=None``, all views stacked."""
        if view is None:
            return self.forward_views(image, range(self.n_views), out=out)
        v = self._view_index(view)
        image = check_volume(image, "image", self.grid.shape, self.check_finite)
        out = output_array(image, out, self.grid.shape)
        return self._project(True, image, out, v)

    def adjoint(self, histo, view: Optional[int] = None, out=None):
        """H_v^T histo for one view or, with ``view=None``, sum_v H_v^T histo[v] over all views."""
        if view is None:
            return self.adjoint_views(histo, range(self.n_views), out=out)
        v = self._view_index(view)
        histo = check_volume(histo, "histo_image", self.grid.shape, self.check_finite)
        out = output_array(histo, out, self.grid.shape)
        return self._project(False, histo, out, v)

    # --- batches of views ----------------------------------------------------------------------
    def forward_views(self, image, views: Sequence[int], out=None):
        """Stack of H_v image for v in views: (len(views), nz, ny, nx)."""
        vs = self._view_list(views, stack=out is None)
        image = check_volume(image, "image", self.grid.shape, self.check_finite)
        out = output_array(image, out, (len(vs),) + self.grid.shape)
        for k, v in enumerate(vs):
            self._project(True, image, out[k], v)
        return out

    def adjoint_views(self, histos, views: Sequence[int], out=None):
        """sum_k H_{views[k]}^T histos[k]: histos is (len(views), nz, ny, nx)."""
        vs = self._view_list(views)
        histos = check_volume(histos, "histo_images", (len(vs),) + self.grid.shape, self.check_finite)
        out = output_array(histos, out, self.grid.shape)
        out[...] = 0
        part = like(histos, self.grid.shape)
        for k, v in enumerate(vs):
            out += self._project(False, histos[k], part, v)
        return out

    def view_operator(self, view: int) -> "ViewOperator":
        """The single-view operator H_v as a LinearOperator (image -> one histo-image)."""
        return ViewOperator(self, self._view_index(view))

    # --- helpers --------------------------------------------------------------------------------
    def _view_index(self, v) -> int:
        return view_index(v, len(self.views))

    def _view_list(self, views, stack: bool = False) -> list:
        """Checked view indices of a batch (an iterable of integers); ``stack``: a stack of one
        histo-image per entry is about to be allocated, so its size is estimated first."""
        try:
            items = list(views)
        except TypeError:
            raise TypeError(f"views: expected a sequence of integer view indices, got {type(views).__name__}") from None
        if stack:
            require_stack_memory("views", len(items), self.grid)
        return [self._view_index(v) for v in items]

    def _require_cuda(self, what: str):
        if self.backend != "cuda":
            raise RuntimeError(f"{what} needs the CUDA backend; this projector runs on {self.backend!r}")


class ViewOperator(LinearOperator):
    """H_v of one view, derived from a projector (shares its LUTs / spectra and backend)."""

    def __init__(self, parent: ViewProjector, view: int):
        self.parent, self.view = parent, view
        self.in_shape = self.out_shape = parent.grid.shape

    def forward(self, x):
        return self.parent.forward(x, self.view)

    def adjoint(self, y):
        return self.parent.adjoint(y, self.view)


def as_view_list(views) -> list:
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
