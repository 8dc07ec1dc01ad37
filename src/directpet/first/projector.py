"""FIRST Super-LOR projectors: image ``(nz, n, n)`` <-> sinogram ``(n_angles, n_rows, n_rows, n)``.

One system model (a :class:`~directpet.first.model.SuperLORTable`) and one way of reading the image:
the tube's samples of one angle lie on a lattice of unit cells turned by the angle, and a sample
takes from each voxel the area its cell overlaps of the voxel's square (in-plane; axially the slices
by linear interpolation). The cells tile the plane, so a single voxel projects the same in-plane
total at every angle, and a uniform image is read as uniform. (Reading the image bilinearly at the
turned sample points, the paper's texture read, makes a voxel on the rotation axis count 1.34 times
at 45 degrees what it counts at 0: a sensitivity image with a 20 % hot centre and rings.) The
weights of every angle are computed once, in double precision, when the projector is made
(``n_angles x n x (n + 2J) x 40`` bytes: 163 MB at the paper's size, on the GPU too).

Three methods:

``faithful``  the paper's design. Forward: one thread per LOR summing the tube's
              ``n x (2J+1) x (2K+1)`` samples; on the GPU the image is first resampled per angle on
              the lattice with the footprint weights and read through a 3D texture with the
              hardware's interpolation (8-bit weights, between slices), the Super-LOR table through a
              layered texture. Back: one thread per voxel gathering the ``(2J+1) x (2K+1)`` LORs of
              each angle and ring difference, the sinogram read by bilinear (radial x axial)
              interpolation — not the transpose of the forward: it differs from it by a few per cent
              (1-3 % on random inputs) — with the sensitivity image in the same pass
              (:meth:`SuperLORProjector.back_with_sensitivity`).
``matched``   the same forward in exact float arithmetic and its exact transpose (one thread per
              voxel gathering every LOR sample whose cell overlaps it).
``fast``      the default: the factored form of ``matched`` (same numbers to float rounding).
              Per angle the image is resampled once on the LORs' common in-plane lattice, after
              which every LOR is a sum over integer offsets of that lattice with the axial
              interpolation folded into ``2K+2`` slice taps per (ring difference, along sample);
              the back projection runs the transposed steps.

Arrays: float32, C-contiguous; NumPy on the CPU backend; on the CUDA backend NumPy (copied) or
CuPy / PyTorch CUDA arrays (used in place, output on the same device).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _core
from .._checks import like, require_host_arrays, require_memory
from ..operators import LinearOperator
from .model import SuperLORTable

METHODS = ("fast", "matched", "faithful")


class SuperLORProjector(LinearOperator):
    """Forward and back projector of a rotating dual-head scanner from Super-LOR tables.

    Parameters
    ----------
    table : the SuperLORTable (its scanner fixes the image grid and the sinogram shape).
    method : 'fast' (default), 'matched' or 'faithful' (see the module docstring).
    backend : 'auto' (CUDA when usable), 'cpu' or 'cuda' (an error without a GPU); the one used is
        in ``self.backend``.
    threads : CPU threads (None: OpenMP's default).
    check_finite : reject NaN / inf inputs (one extra pass over the input).

    On the GPU a projector keeps reusable workspaces (lattice buffers, texture arrays): use one
    projector per CUDA stream or thread.

    A :class:`~directpet.operators.LinearOperator` whose units are the angles:
    ``forward(image, subset=None, out=None)`` returns the sinogram of the listed angles (all by
    default; one integer is a subset of one), ``(len(subset), n_rows, n_rows, n_radial)`` in the
    listed order; ``adjoint(sinogram, subset=None, out=None)`` back projects such a sinogram into
    ``(nz, n, n)``. ``in_shape = grid.shape``, ``out_shape = scanner.sinogram_shape``,
    ``n_units = n_angles``; ``output_shape(subset)`` is the shape of a subset's sinogram.
    """

    in_name, out_name, unit_name = "image", "sinogram", "angle"

    def __init__(self, table: SuperLORTable, method: str = "fast", *, backend: str = "auto",
                 threads: Optional[int] = None, check_finite: bool = True):
        self._set_model(table, SuperLORTable, "table", method, METHODS, backend, threads, check_finite)
        self.out_shape = self.scanner.sinogram_shape
        self.n_units = self.scanner.n_angles
        self._every_angle = np.arange(self.n_units, dtype=np.int32)    # what the engines take for "all"
        s = self.scanner
        require_memory("table", 40 * s.n_angles * s.n_radial * (s.n_radial + 2 * table.J),
                       f"the in-plane footprints of {s.n_angles} angles of {s.n_radial} x {s.n_radial} voxels")
        self._model = _core.FirstModel(self.scanner.n_radial, self.scanner.n_rows, self.scanner.n_angles,
                                       table.values, table.super_of_delta, table.flip_k,
                                       table.slope.astype(np.float32))
        if self.backend == "cuda":
            from .cuda_engine import CudaEngine

            self._engine = CudaEngine(self)
        else:
            self._engine = _CpuEngine(self)

    @property
    def n_angles(self) -> int:
        """Sinogram angles, the projector's units (``n_units``)."""
        return self.n_units

    # --- the operator model's hooks (arrays and units checked by LinearOperator) ----------------
    def _subset_shape(self, units: np.ndarray) -> tuple:
        if len(units) > self.n_units:   # only repeats make a subset larger than the (checked) full sinogram
            require_memory("subset", 4.0 * len(units) * np.prod(self.out_shape[1:]),
                           f"a sinogram of {len(units)} angles")
        return (len(units),) + tuple(self.out_shape[1:])

    def _angles(self, units) -> np.ndarray:
        return self._every_angle if units is None else units

    def _forward(self, x, units, out):
        return self._engine.forward(x, self._angles(units), out)

    def _adjoint(self, y, units, out):
        return self._engine.back(y, self._angles(units), out)

    def back_with_sensitivity(self, sinogram, factors=None, subset=None):
        """``(back(sinogram), back(factors))``, two images ``(nz, n, n)`` living where the sinogram
        lives, in one pass for 'faithful' (the paper's correction and sensitivity images); two back
        projections otherwise. ``sinogram`` and ``factors`` have ``output_shape(subset)``;
        ``factors=None`` means ones; factors (multiplicative corrections, like SinogramData's) must
        be >= 0."""
        units = self.units(subset)
        shape = self._shape_of(units)
        sinogram = self._checked(sinogram, self.out_name, shape, "back_with_sensitivity")
        if factors is not None:
            factors = self._checked(factors, "factors", shape, "back_with_sensitivity")
            # NumPy, CuPy and torch arrays have min() (a bare __cuda_array_interface__ array is passed as is)
            low = float(factors.min()) if hasattr(factors, "min") else 0.0
            if low < 0:
                raise ValueError(f"factors: contains negative values (min {low:.3g}); multiplicative factors "
                                 "must be >= 0")
        if self.method != "faithful":
            ones = factors if factors is not None else _ones_like(sinogram, shape)
            return (self._adjoint(sinogram, units, like(sinogram, self.in_shape)),
                    self._adjoint(ones, units, like(ones, self.in_shape)))
        out, sens = like(sinogram, self.in_shape), like(sinogram, self.in_shape)
        return self._engine.back_faithful(sinogram, factors, self._angles(units), out, sens)


def _ones_like(a, shape):
    o = like(a, shape)
    o[...] = 1
    return o


class _CpuEngine:
    """C++/OpenMP backend: NumPy in, NumPy out; the GIL is released while it runs."""

    def __init__(self, op: SuperLORProjector):
        self.op = op

    def forward(self, image, angles, out):
        require_host_arrays(image, out)
        _core.first_forward_cpu(self.op.method, self.op._model, image, angles, out, self.op.threads)
        return out

    def back(self, sino, angles, out):
        require_host_arrays(sino, out)
        _core.first_back_cpu(self.op.method, self.op._model, sino, angles, out, self.op.threads)
        return out

    def back_faithful(self, sino, factors, angles, out, sens):
        require_host_arrays(sino, factors, out, sens)
        _core.first_back_faithful_cpu(self.op._model, sino, factors, angles, out, sens, self.op.threads)
        return out, sens


__all__ = ["METHODS", "SuperLORProjector"]
