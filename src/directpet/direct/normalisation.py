"""Normalisation histo-images from detector-pair efficiencies (:ref:`physics-direct`).

A measured count in histo-image bin (view v, voxel r) comes from the LORs of the view's direction
cell that pass through r; each LOR joins two crystals i, j with a coincidence efficiency e_ij. The
normalisation factor of the bin is the mean efficiency of those LORs,

    ``e_v(r) = mean over accepted directions u in the cell of e_{i(r,u), j(r,u)}``,

with i, j the crystals where the LOR through the voxel centre along +-u meets the detector
cylinder (an LOR leaving the axial extent is not accepted and does not count). The sensitivity of
the model ``ybar_v = s_v H_v x + b_v`` is then ``s_v = n_v a_v e_v`` (geometric sensitivity,
attenuation, normalisation): multiply :func:`normalisation_histo_images` into
:func:`~directpet.direct.sensitivity_attenuation`.

Efficiencies come as

* a plain ``(n_per_ring, n_rings)`` array of crystal efficiencies (the product model
  ``e_ij = eps_i eps_j``),
* a ``(n_crystals, n_crystals)`` array of pair efficiencies (crystal ``k * n_rings + r``), or
* ``None``: the PETSIRD header's own component model (calibration x detection-bin efficiencies x
  module-pair efficiencies), through :meth:`~directpet.io.petsird.PetsirdScanner.pair_efficiency`.

The crystals are those of a ring header from :func:`~directpet.direct.petsird.scanner_header`:
module k (at azimuth ``2 pi k / n_per_ring``) and ring r, found from a hit point in closed form.
Everything is written against ``xp`` (NumPy or CuPy).
"""

from __future__ import annotations

import numpy as np

from .._backend import cuda_loaded
from .._checks import expect_instance, real_values
from ..geometry import ImageGrid
from ..io.petsird import PetsirdScanner
from .data import require_stack_memory
from .geometry import CylindricalScanner, ViewSet, _exits, sub_samples
from .petsird import ring_shape


def crystals_of_points(x, y, z, n_per_ring: int, n_rings: int, axial_length_mm: float, xp=np):
    """Crystal index ``k * n_rings + r`` (int64) of points on the detector cylinder: ring position
    ``k`` the nearest module azimuth ``2 pi k / n_per_ring``, ring ``r`` the axial slab of width
    ``axial_length_mm / n_rings`` holding z (clipped to the rings)."""
    k = xp.rint(xp.arctan2(y, x) * (n_per_ring / (2 * np.pi))).astype(xp.int64) % n_per_ring
    r = xp.floor((z / axial_length_mm + 0.5) * n_rings).astype(xp.int64)
    return k * n_rings + xp.clip(r, 0, n_rings - 1)


def _efficiency_model(efficiencies, header, n_per_ring: int, n_rings: int, xp):
    """The efficiency model, checked: ``(f, compiled)`` with ``f(i, j) -> e_ij`` on crystal indices in
    the namespace ``xp`` (the array code), and the same model as the compiled kernels take it,
    ``(values, stride, scale, pairs)`` with ``e_ij = scale * values[i * stride] * values[j * stride]`` or
    ``pairs[i, j]`` (float64 ``xp`` arrays), or None for a model they do not have (a header with
    module-pair efficiencies)."""
    n_crystals = n_per_ring * n_rings
    if efficiencies is None:
        scanner = PetsirdScanner(header.scanner)
        n_energy = scanner.n_energy_bins[0]
        # PETSIRD's order within a module type: bin0 >= bin1 (evaluated where i, j live)
        f = lambda i, j: scanner.pair_efficiency((0, 0), xp.maximum(i, j) * n_energy, xp.minimum(i, j) * n_energy)  # noqa: E731
        factor, per_bin, module_pairs = scanner.efficiency_tables((0, 0), xp)
        if module_pairs is not None:
            return f, None
        if per_bin is None:
            return f, (xp.ones(n_crystals), 1, factor, None)
        return f, (per_bin[0], n_energy, factor, None)
    e = real_values("efficiencies", efficiencies, xp).astype(xp.float64)
    if tuple(e.shape) not in ((n_crystals, n_crystals), (n_per_ring, n_rings)):
        raise ValueError(f"efficiencies: expected ({n_per_ring}, {n_rings}) crystal efficiencies (n_per_ring, n_rings) "
                         f"or a ({n_crystals}, {n_crystals}) pair array, got shape {tuple(e.shape)}")
    if bool((e < 0).any()):
        raise ValueError("efficiencies: expected efficiencies >= 0")
    e = xp.ascontiguousarray(e)
    if e.shape == (n_crystals, n_crystals):
        return (lambda i, j: e[i, j]), (None, 1, 1.0, e)
    flat = e.reshape(-1)
    return (lambda i, j: flat[i] * flat[j]), (flat, 1, 1.0, None)


def _compiled_normalisation(model, grid: ImageGrid, viewset: ViewSet, scanner: CylindricalScanner, n_sub: int,
                            n_per_ring: int, n_rings: int, xp):
    """normalisation_histo_images in one compiled pass per view (csrc/direct/corrections.hpp)."""
    values, stride, scale, pairs = model
    dirs = xp.asarray(np.array([[[float(c) for c in view.direction] for view in viewset.cell_views(v, n_sub)]
                                for v in range(len(viewset))], np.float64))
    zs, ys, xs = (xp.asarray(np.ascontiguousarray(grid.centres(a), dtype=np.float64)) for a in range(3))
    out = xp.empty((len(viewset),) + grid.shape, dtype=xp.float32)
    ring = (float(scanner.radius_mm), float(scanner.half_length_mm), float(scanner.axial_length_mm))
    if xp is np:
        from .._core import direct_normalisation_cpu

        direct_normalisation_cpu(ring, (n_per_ring, n_rings), dirs, zs, ys, xs, values, stride, scale, pairs, out)
        return out
    from .._backend import cuda_module

    def pointer(a):
        return (0, 0) if a is None else (int(a.data.ptr), int(a.size))

    cuda_module().direct_normalisation_cuda(ring, (n_per_ring, n_rings), dirs.data.ptr, dirs.shape[0], dirs.shape[1],
                                            zs.data.ptr, zs.size, ys.data.ptr, ys.size, xs.data.ptr, xs.size,
                                            *pointer(values), stride, scale, *pointer(pairs), out.data.ptr)
    return out


def _check_scanner_matches(header, scanner: CylindricalScanner, n_per_ring: int, n_rings: int) -> None:
    """The header's crystals must lie on ``scanner``'s cylinder and fill its axial length."""
    centres = PetsirdScanner(header.scanner).element_centres[0].reshape(n_per_ring, n_rings, 3)
    radius = float(np.hypot(centres[..., 0], centres[..., 1]).mean())
    length = float(centres[0, -1, 2] - centres[0, 0, 2]) * n_rings / max(n_rings - 1, 1)
    if abs(radius - scanner.radius_mm) > 1e-3 * scanner.radius_mm or \
            (n_rings > 1 and abs(length - scanner.axial_length_mm) > 1e-3 * scanner.axial_length_mm):
        raise ValueError(f"scanner: the header's crystal rings lie at radius {radius:.1f} mm over {length:.1f} mm, "
                         f"the scanner's cylinder at {scanner.radius_mm} mm over {scanner.axial_length_mm} mm")


def normalisation_histo_images(header, grid: ImageGrid, viewset: ViewSet, efficiencies=None, *,
                               scanner: CylindricalScanner = None, n_sub: int = 2, xp=np, engine: str = "compiled"):
    """Per-view normalisation factors ``e_v`` (n_views, nz, ny, nx) float32 (module docstring).

    Parameters
    ----------
    header : the ``petsird.Header`` of the ring scanner (:func:`~directpet.direct.petsird.scanner_header`).
    grid, viewset : the reconstruction lattice and the DIRECT views.
    efficiencies : None (the header's own efficiencies), ``(n_per_ring, n_rings)`` crystal
        efficiencies or ``(n_crystals, n_crystals)`` pair efficiencies.
    scanner : the :class:`CylindricalScanner` the header describes (its radius and axial length
        decide which LORs are accepted); default: the default scanner.
    n_sub : directions per view-cell edge, 1 to 1024 (``n_sub**2`` averaged).
    xp : array namespace of the result (NumPy or CuPy).
    engine : 'compiled' (default): one pass per view over the grid in compiled code, on the CPU or
        the GPU (csrc/direct/corrections.hpp, the same arithmetic); 'python': the array code below,
        per direction (the reference). A header with module-pair efficiencies always takes 'python'.

    Bins no accepted direction reaches get 1 (their geometric sensitivity is 0 anyway).
    """
    if engine not in ("compiled", "python"):
        raise ValueError(f"engine: expected 'compiled' or 'python', got {engine!r}")
    scanner = CylindricalScanner() if scanner is None else scanner
    expect_instance(scanner, CylindricalScanner, "scanner")
    expect_instance(grid, ImageGrid, "grid")
    expect_instance(viewset, ViewSet, "viewset")
    n_sub = sub_samples("n_sub", n_sub, dims=2)
    n_per_ring, n_rings = ring_shape(header)
    require_stack_memory("grid", len(viewset), grid)
    _check_scanner_matches(header, scanner, n_per_ring, n_rings)
    efficiency, model = _efficiency_model(efficiencies, header, n_per_ring, n_rings, xp)
    if engine == "compiled" and model is not None and (xp is np or cuda_loaded()):
        return _compiled_normalisation(model, grid, viewset, scanner, n_sub, n_per_ring, n_rings, xp)
    z, y, x = xp.meshgrid(*(xp.asarray(grid.centres(a), dtype=xp.float64) for a in range(3)), indexing="ij")
    out = xp.empty((len(viewset),) + grid.shape, dtype=xp.float32)
    for v in range(len(viewset)):
        total = xp.zeros(grid.shape, dtype=xp.float64)
        count = xp.zeros(grid.shape, dtype=xp.float64)
        for view in viewset.cell_views(v, n_sub):
            u = [float(c) for c in view.direction]
            t_plus, t_minus, ok = _exits(x, y, z, *u, scanner, xp)
            i = crystals_of_points(x + t_plus * u[0], y + t_plus * u[1], z + t_plus * u[2],
                                   n_per_ring, n_rings, scanner.axial_length_mm, xp)
            j = crystals_of_points(x - t_minus * u[0], y - t_minus * u[1], z - t_minus * u[2],
                                   n_per_ring, n_rings, scanner.axial_length_mm, xp)
            e = efficiency(i.ravel(), j.ravel()).reshape(grid.shape)
            total += xp.where(ok, e, 0.0)
            count += ok
        out[v] = xp.where(count > 0, total / xp.where(count > 0, count, 1.0), 1.0).astype(xp.float32)
    return out


__all__ = ["crystals_of_points", "normalisation_histo_images"]
