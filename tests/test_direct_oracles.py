"""Independent oracles for the DIRECT projectors (design.md: "where an independent oracle
exists").

1. For a symmetric, shift-invariant kernel the forward scatter and the back gather are both the
   linear (zero-boundary) 3D convolution of the image with the kernel (docs/physics.rst 1.4), which
   ``scipy.ndimage.convolve(x, K, mode='constant', cval=0)`` computes with no DIRECT code at all.
2. Count conservation: every kernel has unit sum, so a source whose whole kernel footprint stays
   inside the volume keeps its total in the forward projection (any kernel); the back projection
   keeps it only when every voxel uses the same kernel (invariant kernels).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from directpet import ImageGrid
from directpet.direct import HistoImageProjector, SRKernel, View
from directpet.reference import direct as ref

VIEWS = [View(0.0), View.from_degrees(38.25), View.from_degrees(114.75, 20 / 3),
         View.from_degrees(150.75, -20 / 3)]


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("shape,voxel", [((9, 17, 15), 4.0), ((10, 16, 20), 4.0),
                                         ((11, 18, 21), (2.5, 4.0, 3.0))])
@pytest.mark.parametrize("kernel", [SRKernel.invariant(), SRKernel(tof_fwhm_ps=250.0, radial_fwhm=9.0,
                                                                   axial_fwhm=4.0, truncation=2.5)],
                         ids=["400ps_5.8mm", "250ps_9mm_k2.5"])
def test_invariant_symmetric_kernel_is_scipy_convolution(shape, voxel, kernel, volume):
    """H_v x = H_v^T x = convolve(x, K) with K = lut.kernel_volume(0) and zero boundary.

    ndimage.convolve flips K (out(r) = sum_d K(d) x(r - d), the scatter form exactly); the
    gather is a correlation, out(r) = sum_d K(d) x(r + d), which equals the same convolution
    only because K is point-symmetric (checked first). The 400 ps kernel is longer than the volume
    along TOF, so the zero boundary is exercised. float64 scipy vs float32 CPU: 1e-5 relative;
    float64 reference vs scipy: 1e-12."""
    grid = ImageGrid(shape, voxel)
    op = HistoImageProjector(grid, VIEWS, kernel, backend="cpu")
    for v in range(len(VIEWS)):
        lut = op.lut(v)
        K = lut.kernel_volume(0)
        np.testing.assert_array_equal(K, K[::-1, ::-1, ::-1])
        for a in (lut.n_kernels // 2, lut.n_kernels - 1):  # invariant: every identifier is the same
            np.testing.assert_array_equal(lut.kernel_volume(a), K)
        x, g = volume(shape), volume(shape)
        conv_x = ndimage.convolve(x.astype(np.float64), K, mode="constant", cval=0.0)
        conv_g = ndimage.convolve(g.astype(np.float64), K, mode="constant", cval=0.0)
        assert rel_err(op.forward(x, v)[0], conv_x) < 1e-5
        assert rel_err(op.adjoint(g[None], v), conv_g) < 1e-5
        assert rel_err(ref.forward(x, lut), conv_x) < 1e-12
        assert rel_err(ref.back(g, lut), conv_g) < 1e-12


def test_convolution_oracle_with_kernel_larger_than_volume(volume):
    """Stress-sized invariant kernel (900 ps, 50 mm radial, 10 mm axial, [HA] Fig. 5) on a
    7 x 12 x 10 grid: K is several times larger than the volume; still exactly convolve()."""
    grid = ImageGrid((7, 12, 10), 4.0)
    op = HistoImageProjector(grid, [View.from_degrees(30.0, 20 / 3)],
                             SRKernel(tof_fwhm_ps=900.0, radial_fwhm=50.0, axial_fwhm=10.0), backend="cpu")
    K = op.lut(0).kernel_volume(0)
    assert K.shape[1] > grid.ny and K.shape[2] > grid.nx
    x = volume(grid.shape)
    want = ndimage.convolve(x.astype(np.float64), K, mode="constant", cval=0.0)
    assert rel_err(op.forward(x, 0)[0], want) < 1e-5
    assert rel_err(op.adjoint(x[None], 0), want) < 1e-5


# --- count conservation ----------------------------------------------------------------------------
COUNT_KERNELS = {
    "invariant": SRKernel.invariant(tof_fwhm_ps=150.0),
    "asym_invariant": SRKernel.invariant(tof_fwhm_ps=150.0, fwhm=5.0, asymmetric=True),
    "variant1": SRKernel(tof_fwhm_ps=150.0, radial_fwhm="variant1", axial_fwhm=5.8),
    "variant3": SRKernel(tof_fwhm_ps=150.0, radial_fwhm="variant3", axial_fwhm=5.8),
    "linear": SRKernel(tof_fwhm_ps=150.0, radial_fwhm=("linear", 4.0, 16.0), axial_fwhm=5.8),
    "asym_variant": SRKernel(tof_fwhm_ps=150.0, radial_fwhm=("linear", 4.0, 10.0), axial_fwhm=5.8,
                             asymmetric=True),
    "custom_values": SRKernel(
        tof_fwhm_ps=150.0, radial_fwhm="variant1", axial_fwhm=5.8,
        values=lambda t, r, a, s: np.exp(-np.abs(t) / 8.0 - np.abs(r) / (1.0 + 0.05 * np.abs(s)))
        * np.exp(-0.5 * (a / 2.0) ** 2)),
    "custom_invariant": SRKernel(
        tof_fwhm_ps=150.0, radial_fwhm=5.8, axial_fwhm=5.8,
        values=lambda t, r, a, s: np.exp(-np.abs(t) / 8.0 - np.abs(r - 1.5) / 2.0 - 0.5 * (a / 2.0) ** 2)
        + 0.0 * s),
}
COUNT_VIEWS = [View.from_degrees(0.0), View.from_degrees(63.0, 20 / 3), View.from_degrees(141.75, -20 / 3)]


def blob_inside(op, v, volume):
    """Random positive values in the central region, zero within the kernel's half extent of every
    border: no part of any kernel centred in the blob can leave the volume."""
    h = op.lut(v).half_extent
    x = np.zeros(op.in_shape, dtype=np.float32)
    inner = tuple(slice(e, n - e) for e, n in zip(h, op.in_shape))
    assert all(s.stop - s.start >= 2 for s in inner), (h, op.in_shape)
    x[inner] = volume(x[inner].shape)
    return x


@pytest.mark.parametrize("name", list(COUNT_KERNELS))
def test_forward_projection_conserves_counts(name, volume):
    """sum(H x) == sum(x) for a blob well inside the volume, for every kernel kind: each source
    voxel spreads exactly its value with a unit-sum kernel (docs/physics.rst 1.4). 1e-5 relative:
    float32 kernel values (unit sum to ~1e-7) and float32 accumulation."""
    grid = ImageGrid((19, 40, 40), 4.0)
    op = HistoImageProjector(grid, COUNT_VIEWS, COUNT_KERNELS[name], backend="cpu")
    for v in range(len(COUNT_VIEWS)):
        x = blob_inside(op, v, volume)
        total = float(x.sum(dtype=np.float64))
        assert float(op.forward(x, v).sum(dtype=np.float64)) == pytest.approx(total, rel=1e-5)


@pytest.mark.parametrize("name", ["invariant", "custom_invariant"])
def test_back_projection_conserves_counts_for_invariant_kernels(name, volume):
    """When every voxel has the same kernel, sum_r' K(r - r') = 1 for every r inside, so
    sum(H^T g) == sum(g) for a blob well inside the volume -- also for a kernel that is not
    point-symmetric (custom_invariant, shifted along e_r). 1e-5 relative as above."""
    grid = ImageGrid((19, 40, 40), 4.0)
    op = HistoImageProjector(grid, COUNT_VIEWS, COUNT_KERNELS[name], backend="cpu")
    for v in range(len(COUNT_VIEWS)):
        g = blob_inside(op, v, volume)
        assert float(op.adjoint(g[None], v).sum(dtype=np.float64)) == pytest.approx(
            float(g.sum(dtype=np.float64)), rel=1e-5)


@pytest.mark.parametrize("name", ["variant1", "linear", "asym_variant", "asym_invariant"])
def test_back_projection_of_variant_kernels_does_not_conserve_counts(name, volume):
    """With spatially variant kernels -- including the 'invariant' asymmetric one, whose
    asymmetry flips with sgn(s) -- each voxel gathers with its *own* kernel, so the weights a
    source voxel r receives, sum_r' K_{a(r')}(r - r'), no longer add up to 1 (docs/physics.rst 1.7:
    back-projected blobs are lopsided). The mismatch is then exactly <H 1, g> - <1, g>, checked
    against the float64 reference scatter of a ones image, and it is clearly non-zero (> 1e-4)."""
    grid = ImageGrid((19, 40, 40), 4.0)
    op = HistoImageProjector(grid, COUNT_VIEWS, COUNT_KERNELS[name], backend="cpu")
    v = 0
    g = blob_inside(op, v, volume)
    back_sum = float(op.adjoint(g[None], v).sum(dtype=np.float64))
    gsum = float(g.sum(dtype=np.float64))
    column_weights = ref.forward(np.ones(grid.shape), op.lut(v))  # sum_r' K_{a(r')}(r - r')
    assert back_sum == pytest.approx(float(np.vdot(column_weights, g)), rel=1e-5)
    assert abs(back_sum - gsum) / gsum > 1e-4
