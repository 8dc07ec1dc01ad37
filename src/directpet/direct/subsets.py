"""DIRECT as a :class:`~directpet.recon.SubsetProblem`: views, or blocks of views, as subsets.

:class:`ViewSubsets` pairs a DIRECT projector with histo-image data for the reconstruction layer
(:mod:`directpet.recon`). With ``ybar_v = f_v * H_v x + b_v`` per view, the factors f_v (the
sensitivity s_v of [HA]) are the problem's multiplicative factors and b_v its background.

* ``subsets=None`` (default): one view per subset (subset s is view s), visited in the views'
  geometric order (bit-reversed azimuths, tilts 0, +, -): block-RAMLA as in [HA] section 6;
* ``subsets=k`` (an int): k blocks of views from :func:`make_blocks` (interleaved azimuths, all
  tilts), the usual OSEM subsets;
* ``subsets=[[...], ...]``: explicit blocks.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import numpy as np

from .._checks import array_module, expect_attributes, positive_int, require_memory
from ..geometry import ImageGrid
from ..recon.problem import StoredSubsets, check_nonnegative, spread_order
from .data import HistoImageData
from .geometry import ViewSet, check_views_match, view_index


#: Bytes per view index held in a Python list (an int object and its list slot).
_BYTES_PER_LISTED_VIEW = 40


def make_blocks(n_views: int, n_subsets: int, viewset: Optional[ViewSet] = None) -> List[List[int]]:
    """Blocks of views for OSEM, in a geometric visiting order.

    With a ViewSet and at most ``n_phi`` blocks, block m holds every azimuth k with
    ``k % n_subsets == m`` (all tilts), so each block spans all directions evenly; with more blocks
    than azimuths (at most one per view), the views of ``viewset.geometric_order()`` are dealt to
    the blocks in turn. Without a ViewSet, views ``v % n_subsets == m``. The blocks are listed in
    bit-reversed (van der Corput) order of m, so consecutive blocks are far apart.
    """
    return _make_blocks(n_views, n_subsets, viewset, "n_subsets")


def _make_blocks(n_views, n_subsets, viewset, name: str) -> List[List[int]]:
    """:func:`make_blocks`, its errors naming the block count ``name``."""
    m_total = positive_int(name, n_subsets)
    n_views = positive_int("n_views", n_views)
    if viewset is not None and not isinstance(viewset, ViewSet):
        raise TypeError(f"viewset: expected a ViewSet or None, got {type(viewset).__name__}")
    if viewset is not None and n_views != len(viewset):
        raise ValueError(f"n_views: {n_views} views, but the viewset has {len(viewset)}; they must agree")
    if m_total > n_views:
        raise ValueError(f"{name}: {m_total} blocks exceed the {n_views} views")
    # the blocks list every view once (a Python int and a list slot each, twice while they are ordered)
    require_memory("n_views", 2.0 * _BYTES_PER_LISTED_VIEW * n_views, f"blocks of {n_views} view indices")
    if viewset is not None and m_total <= viewset.n_phi:
        groups = [[viewset.index(k, l) for k in range(m, viewset.n_phi, m_total)
                   for l in range(viewset.n_theta)] for m in range(m_total)]
    elif viewset is not None:
        visit = list(viewset.geometric_order())
        groups = [visit[m::m_total] for m in range(m_total)]
    else:
        groups = [list(range(m, n_views, m_total)) for m in range(m_total)]
    order = spread_order(m_total)   # bit-reversed 0..M-1
    return [groups[m] for m in order]


class ViewSubsets(StoredSubsets):
    """A DIRECT projector and its histo-image data split into subsets of views.

    Parameters
    ----------
    projector : a DIRECT projector (:class:`HistoImageProjector`, :class:`FFTProjector`,
        :class:`LowRankProjector`, or anything with ``forward(x, views, out)`` giving the stack
        ``(len(views), nz, ny, nx)``, ``adjoint(y, views, out)``, ``n_views`` and ``grid``).
    data : a :class:`HistoImageData` (prompts d_v, optional factors f_v and background b_v) or an
        ``(n_views, nz, ny, nx)`` float32 array of counts (no corrections, no views).
        It must be the projector's: the same grid (shape and voxel size), the same number of
        views and, when it carries a ViewSet, the projector's views (the same ViewSet, or the same
        directions when the projector was given Views); otherwise a ValueError naming ``data``.
    subsets : None (default): one view per subset, visited in ``data.viewset.geometric_order()``
        (0 .. n_views-1 when the data carry no ViewSet): the paper's block-RAMLA; an int k: k
        interleaved blocks from ``make_blocks(n_views, k, data.viewset)``, visited as listed; or
        explicit blocks: lists of view indices that together hold every view exactly once, subset s
        being ``subsets[s]``, visited in the given order.

    A subset's data, factors, background and projections are ``(len(views), nz, ny, nx)`` stacks,
    also for one view (``(1, nz, ny, nx)``, a view into ``data``, no copy); a multi-view subset's
    data are copied contiguous once, here.

    Attributes: ``projector``, ``histo_image_data`` (the HistoImageData), ``subsets`` (the view
    indices of each subset), ``n_subsets``, ``image_shape`` (the grid's ``(nz, ny, nx)``).
    """

    def __init__(self, projector, data, subsets: Union[None, int, Sequence[Sequence[int]]] = None):
        self.projector = check_projector(projector)
        self.histo_image_data = _as_data(projector, data)
        n_views = self.histo_image_data.n_views
        viewset = self.histo_image_data.viewset
        if _block_count(subsets):
            self.subsets = _make_blocks(n_views, subsets, viewset, "subsets")
            order = range(len(self.subsets))
        elif subsets is not None:
            self.subsets = _check_subsets(subsets, n_views)
            order = range(len(self.subsets))
        else:
            self.subsets = [[v] for v in range(n_views)]
            order = viewset.geometric_order() if viewset is not None else range(n_views)
        # what forward / adjoint hand the projector: a one-view subset as its index, the operator's
        # fast path (block-RAMLA makes two such calls per view and iteration)
        self._units = [views[0] if len(views) == 1 else views for views in self.subsets]
        self.image_shape = tuple(projector.grid.shape)
        d = self.histo_image_data
        self.store(*([None if stack is None else _subset_part(stack, views) for views in self.subsets]
                     for stack in (d.prompts, d.factors, d.background)), order)

    # --- the SubsetProblem interface --------------------------------------------------------------
    def forward(self, x, subset: int, out=None):
        """The stack ``(len(views), nz, ny, nx)`` of H_v x over the subset's views."""
        return self.projector.forward(x, self._units[subset], out=out)

    def adjoint(self, y, subset: int, out=None):
        """sum_{v in subset} H_v^T y_v: an image ``(nz, ny, nx)``; y has the shape of ``data(subset)``."""
        return self.projector.adjoint(y, self._units[subset], out=out)

    # --- unit hooks: the views of a subset (StoredSubsets.share splits them across processes) -----
    def subset_units(self, subset: int) -> list:
        """The view indices of ``subset``."""
        return list(self.subsets[subset])

    def forward_units(self, x, units, out=None, data=None):
        """The stack ``(len(units), nz, ny, nx)`` of H_v x over the views in ``units`` (``data`` unused)."""
        return self.projector.forward(x, units, out=out)

    def adjoint_units(self, y, units, out=None):
        """sum over the views in ``units`` of H_v^T y_k: an image ``(nz, ny, nx)``."""
        return self.projector.adjoint(y, units, out=out)

    @property
    def xp(self):
        return self.histo_image_data.xp

    def subset_shape(self, subset: int) -> tuple:
        return tuple(self._data[subset].shape)

    def check(self) -> "ViewSubsets":
        """Validate the whole stacks at once: prompts as ``data``, factors as ``factors``,
        background as ``background`` (finite, non-negative float32; see SubsetProblem.check)."""
        d, xp = self.histo_image_data, self.histo_image_data.xp
        check_nonnegative(d.prompts, "data", None, xp, None)
        for name, stack in (("factors", d.factors), ("background", d.background)):
            if stack is not None:
                check_nonnegative(stack, name, None, xp, d.prompts.shape)
        return self

    def totals(self):
        """One float64 reduction per stack (the subsets partition the views)."""
        d, xp = self.histo_image_data, self.histo_image_data.xp
        b_sum = 0.0 if d.background is None else float(d.background.sum(dtype=xp.float64))
        return float(d.prompts.sum(dtype=xp.float64)), b_sum, int(d.prompts.size)


_PROJECTOR_API = ("forward", "adjoint", "n_views", "grid")


def check_projector(projector, name: str = "projector", needs=_PROJECTOR_API):
    """A DIRECT projector: anything with the attributes ``needs`` (by default ``forward``,
    ``adjoint``, ``n_views`` and ``grid``) and an ImageGrid ``grid``; else a TypeError naming
    ``name``."""
    what = (f"a DIRECT projector (HistoImageProjector, FFTProjector, LowRankProjector, or anything with "
            f"{', '.join(needs)})")
    expect_attributes(projector, needs, name, what)
    if not isinstance(projector.grid, ImageGrid):
        raise TypeError(f"{name}: expected {what}, got {type(projector).__name__} (its grid is not an ImageGrid)")
    return projector


def _as_data(projector, data) -> HistoImageData:
    if isinstance(data, HistoImageData):
        d = data
    elif hasattr(data, "shape") and len(data.shape) == 4:
        try:
            d = HistoImageData(data, projector.grid)
        except (TypeError, ValueError) as err:   # the array is the argument `data` here
            raise type(err)(f"data: {err}") from None
    else:
        raise TypeError(f"data: expected HistoImageData or an (n_views, nz, ny, nx) array, got {type(data).__name__}")
    if d.n_views != projector.n_views:
        raise ValueError(f"data: has {d.n_views} views but the projector has {projector.n_views}")
    if d.grid != projector.grid:
        raise ValueError(f"data: its grid {d.grid.shape} of {d.grid.voxel_size} mm voxels does not match the "
                         f"projector's grid {projector.grid.shape} of {projector.grid.voxel_size} mm voxels")
    check_views_match(d.viewset, projector, "data")
    return d


def _block_count(subsets) -> bool:
    """Whether ``subsets`` is a number of blocks (an integer, or a 0-d integer array), not lists."""
    if isinstance(subsets, (bool, np.bool_)):
        return False
    if isinstance(subsets, np.ndarray):
        return subsets.ndim == 0 and subsets.dtype.kind in "iu"
    return isinstance(subsets, (int, np.integer))


def _check_subsets(subsets, n_views: int) -> List[List[int]]:
    try:
        blocks = [list(b) for b in subsets]
    except TypeError:
        raise TypeError(f"subsets: expected a number of blocks (an integer) or a sequence of lists of view indices, "
                        f"got {type(subsets).__name__} {repr(subsets)[:40]}") from None
    blocks = [[view_index(v, n_views, "subsets") for v in b] for b in blocks]
    flat = sorted(v for b in blocks for v in b)
    if not blocks or any(len(b) == 0 for b in blocks) or flat != list(range(n_views)):
        raise ValueError(f"subsets: expected non-empty lists of view indices that together hold every "
                         f"view 0..{n_views - 1} exactly once")
    return blocks


def _subset_part(stack, views: List[int]):
    """stack[v:v+1] for one view (a view of the array, no copy); a contiguous copy for several."""
    if len(views) == 1:
        return stack[views[0]:views[0] + 1]
    return array_module(stack).ascontiguousarray(stack[views])


__all__ = ["ViewSubsets", "check_projector", "make_blocks"]
