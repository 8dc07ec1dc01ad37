"""What every DIRECT projector shares: the views as the operator's units, and the stacks over them.

A projector maps an image ``(nz, ny, nx)`` to one histo-image per view, ``(n_views, nz, ny, nx)``.
It is a :class:`~directpet.operators.LinearOperator` whose units are the views:
``forward(image, subset=None, out=None)`` gives the stack of ``H_v image`` over the listed views
(all views for None; one view index gives a ``(1, nz, ny, nx)`` stack) and
``adjoint(histo_images, subset=None, out=None)`` the image ``sum_k H_{v_k}^T histo_images[k]``. The
base class checks the arrays and the view indices; subclasses implement ``_project(forward, src,
out, v)`` for one view on their backend.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Optional, Sequence, Union

from .._checks import expect_instance, like
from ..geometry import ImageGrid
from ..operators import LinearOperator
from .data import require_stack_memory
from .geometry import View, ViewSet, view_index
from .model import SRKernel

ViewsLike = Union[ViewSet, View, Sequence[View]]


class ViewProjector(LinearOperator):
    """Base of the DIRECT projectors (spatial, FFT, low-rank FFT).

    Attributes: ``grid``, ``views`` (list of View), ``viewset`` (the ViewSet the views came from, or
    None when they were given as Views), ``kernel``, ``backend`` ('cpu' or 'cuda', the
    one actually used), ``threads`` (CPU threads, 0 = OpenMP/FFTW default), ``check_finite``,
    ``in_shape = grid.shape``, ``out_shape = (n_views,) + grid.shape`` and ``n_units = n_views``.
    """

    in_name = "image"
    out_name = "histo_images"
    unit_name = "view"

    def __init__(self, grid: ImageGrid, views: ViewsLike, kernel: Optional[SRKernel], *, backend: str,
                 threads: Optional[int], check_finite: bool):
        self.grid = expect_instance(grid, ImageGrid, "grid")
        self.views = as_view_list(views)
        self.viewset = views if isinstance(views, ViewSet) else None
        self.kernel = SRKernel.invariant() if kernel is None else expect_instance(kernel, SRKernel, "kernel")
        self._set_runtime(backend, threads, check_finite)
        self.n_units = len(self.views)
        self.in_shape = grid.shape
        self.out_shape = (self.n_units,) + grid.shape

    @property
    def n_views(self) -> int:
        """The number of views (histo-images) of the projector; the same as ``n_units``."""
        return self.n_units

    @abstractmethod
    def _project(self, forward: bool, src, out, v: int):
        """out = H_v src (forward) or H_v^T src for one view; src, out (nz, ny, nx) checked. Returns out."""

    # --- the LinearOperator hooks: stacks over the listed views -------------------------------------
    def _subset_shape(self, units) -> tuple:
        if len(units) > 1:     # views may repeat: size the stack before anything allocates it
            require_stack_memory("subset", len(units), self.grid)
        return (len(units),) + tuple(self.grid.shape)

    def _forward(self, x, units, out):
        for k, v in enumerate(self._listed(units)):
            self._project(True, x, out[k], v)
        return out

    def _adjoint(self, y, units, out):
        views = self._listed(units)
        self._project(False, y[0], out, views[0])     # the first view straight into out, the rest summed
        if len(views) > 1:
            part = like(y, self.grid.shape)
            for k in range(1, len(views)):
                out += self._project(False, y[k], part, views[k])
        return out

    def _listed(self, units) -> list:
        return list(range(self.n_units)) if units is None else units.tolist()

    # --- helpers --------------------------------------------------------------------------------
    def _view_index(self, v) -> int:
        return view_index(v, self.n_units)

    def _require_cuda(self, what: str):
        if self.backend != "cuda":
            raise RuntimeError(f"{what} needs the CUDA backend; this projector runs on {self.backend!r}")


def as_view_list(views) -> list:
    """The views as a non-empty list of :class:`~directpet.direct.geometry.View`.

    ``views`` may be a :class:`~directpet.direct.geometry.ViewSet` (its views, in order), one View,
    or a sequence of Views; anything else raises TypeError.
    """
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
