"""DIRECT CPU projectors (docs/physics.rst 1.7) against the float64 NumPy reference, adjointness,
subsets of views, threading and the operator interface.

A projector's units are its views: ``forward(x, v)`` is the one-view stack ``(1, nz, ny, nx)`` and
``adjoint(y, v)`` takes one, so the per-view comparisons with the reference (one histo-image
``(nz, ny, nx)``) take ``[0]`` of the forward result and give the adjoint ``g[None]``.

The reference (``directpet.reference.direct``) writes the forward projection literally as a
scatter and the back projection as a gather, and never reads the flip table, so agreement checks
the C++ scatter-as-gather rewrite, the identifier lookups and the zero boundary.
"""

from __future__ import annotations

import numpy as np
import pytest

import directpet
from directpet import ImageGrid, LinearOperator
from directpet.direct import HistoImageProjector, SRKernel, View, ViewSet
from directpet.reference import direct as ref

#: float32 accumulation over a few hundred to tens of thousands of positive terms: relative error
#: ~1e-7 * sqrt(N) at worst, so 1e-5 in the 2-norm is a safe bound that still catches any wrong
#: weight (a single wrong identifier or offset moves the result by >= 1e-3).
RTOL = 1e-5

VIEWS = [View(0.0), View.from_degrees(23.625), View.from_degrees(90.0),
         View.from_degrees(128.25, 20 / 3), View.from_degrees(170.0, -20 / 3)]

KERNELS = {
    "invariant": SRKernel.invariant(),
    "variant1": SRKernel.clinical("variant1"),
    "variant2": SRKernel.clinical("variant2"),
    "variant3": SRKernel.clinical("variant3"),
    "linear_10_100": SRKernel(radial_fwhm=("linear", 10.0, 100.0)),
    "asym_variant": SRKernel.clinical("variant2", asymmetric=True),
    "asym_invariant": SRKernel.invariant(fwhm=6.5, asymmetric=True),
    "custom_values": SRKernel.clinical(
        "variant1",
        values=lambda t, r, a, s: np.exp(-np.abs(t) / 20.0 - np.abs(r - 0.02 * s) / 3.0
                                         - 0.5 * (a / 2.5) ** 2)),
}

GRIDS = {
    "odd": ImageGrid((9, 17, 15), 4.0),
    "even": ImageGrid((10, 16, 20), 4.0),
    "aniso": ImageGrid((13, 21, 18), (2.5, 4.0, 3.0)),
}


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def random_lut_projector(grid, views, rng):
    """Projector whose view-0 LUT carries random positive, per-identifier kernels (with_values):
    no symmetry at all, so forward != back and every identifier/flip lookup matters."""
    base = HistoImageProjector(grid, views, SRKernel.clinical("variant2"), backend="cpu")
    lut = base.lut(0)
    lut = lut.with_values(rng.uniform(0.05, 1.0, lut.values.shape))
    return HistoImageProjector(grid, views, SRKernel.clinical("variant2"), backend="cpu", luts={0: lut})


# --- against the float64 reference --------------------------------------------------------------
@pytest.mark.parametrize("grid_name", list(GRIDS))
@pytest.mark.parametrize("kernel_name", list(KERNELS))
def test_cpu_matches_reference(grid_name, kernel_name, volume):
    """CPU forward and back == float64 reference (same LUT) to 1e-5 relative, for every kernel
    kind, tilted and untilted views, odd, even and anisotropic grids."""
    grid = GRIDS[grid_name]
    op = HistoImageProjector(grid, VIEWS, KERNELS[kernel_name], backend="cpu")
    for v in range(len(VIEWS)):
        x, g = volume(grid.shape), volume(grid.shape)
        lut = op.lut(v)
        assert rel_err(op.forward(x, v)[0], ref.forward(x, lut)) < RTOL
        assert rel_err(op.adjoint(g[None], v), ref.back(g, lut)) < RTOL


def test_cpu_matches_reference_random_values(rng, volume):
    """Arbitrary (random positive) kernel values supplied through ``luts={0: lut}``."""
    grid = GRIDS["odd"]
    op = random_lut_projector(grid, VIEWS[3:4], rng)
    lut = op.lut(0)
    x, g = volume(grid.shape), volume(grid.shape)
    fx, bg = op.forward(x, 0)[0], op.adjoint(g[None], 0)
    assert rel_err(fx, ref.forward(x, lut)) < RTOL
    assert rel_err(bg, ref.back(g, lut)) < RTOL
    assert rel_err(op.adjoint(x[None], 0), fx) > 1e-3  # not symmetric: forward and back differ


@pytest.mark.parametrize("asymmetric", [False, True])
def test_kernel_larger_than_volume(asymmetric, volume):
    """The stress kernel (900 ps, 10 -> 100 mm radial, 10 mm axial) on a 7 x 12 x 10 grid: mSR
    reaches beyond the volume transaxially (y and x), so most offsets read outside (zeros)."""
    grid = ImageGrid((7, 12, 10), 4.0)
    op = HistoImageProjector(grid, [View.from_degrees(30.0, 20 / 3), View(0.0)],
                             SRKernel.stress(asymmetric=asymmetric), backend="cpu")
    for v in range(2):
        lut = op.lut(v)
        assert lut.half_extent[1] >= grid.ny and lut.half_extent[2] >= grid.nx
        x, g = volume(grid.shape), volume(grid.shape)
        assert rel_err(op.forward(x, v)[0], ref.forward(x, lut)) < RTOL
        assert rel_err(op.adjoint(g[None], v), ref.back(g, lut)) < RTOL


def test_long_z_axis_uses_several_z_blocks(volume):
    """nz = 70 exceeds every single-block z run of the CPU code (<= 64): blocks and their seams."""
    grid = ImageGrid((70, 9, 8), (2.0, 4.0, 4.0))
    op = HistoImageProjector(grid, [View.from_degrees(60.0, 20 / 3)], SRKernel.clinical("variant3"),
                             backend="cpu")
    x, g = volume(grid.shape), volume(grid.shape)
    assert rel_err(op.forward(x, 0)[0], ref.forward(x, op.lut(0))) < RTOL
    assert rel_err(op.adjoint(g[None], 0), ref.back(g, op.lut(0))) < RTOL


# --- adjointness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel_name", list(KERNELS) + ["random_values", "stress"])
def test_adjointness_float32(kernel_name, rng):
    """<y, H x> = <H^T y, x> to 1e-5 (design.md) through the operator's own adjointness_test():
    the all-views operator (forward stack / summed adjoint) and every one-view subset operator."""
    grid = GRIDS["even"] if kernel_name != "stress" else ImageGrid((7, 12, 10), 4.0)
    if kernel_name == "random_values":
        op = random_lut_projector(grid, VIEWS, rng)
    else:
        k = SRKernel.stress() if kernel_name == "stress" else KERNELS[kernel_name]
        op = HistoImageProjector(grid, VIEWS, k, backend="cpu")
    assert op.adjointness_test(rng) < 1e-5
    for v in range(op.n_views):
        assert op.subset(v).adjointness_test(rng) < 1e-5


@pytest.mark.parametrize("kernel_name", list(KERNELS) + ["random_values"])
def test_reference_pair_is_exactly_adjoint(kernel_name, rng, volume):
    """The float64 reference scatter/gather pair is an exact transpose: 1e-12 relative (float64
    summation of ~1e5 positive products)."""
    grid = GRIDS["odd"]
    if kernel_name == "random_values":
        lut = random_lut_projector(grid, VIEWS[4:], rng).lut(0)
    else:
        lut = HistoImageProjector(grid, VIEWS[4:], KERNELS[kernel_name], backend="cpu").lut(0)
    x = volume(grid.shape).astype(np.float64)
    y = volume(grid.shape).astype(np.float64)
    lhs = np.vdot(y, ref.forward(x, lut))
    rhs = np.vdot(ref.back(y, lut), x)
    assert abs(lhs - rhs) / abs(lhs) < 1e-12


# --- subsets of views, threads, out= ---------------------------------------------------------------
def _small_viewset_projector(kernel=None, **kw):
    grid = ImageGrid((9, 16, 15), 4.0)
    return HistoImageProjector(grid, ViewSet(n_phi=4, n_theta=3), kernel or SRKernel.clinical("variant1"),
                               backend="cpu", **kw)


def test_batched_forward_equals_per_view(volume):
    """forward(x) (all views) and forward(x, subset) stack the per-view results exactly, in the
    listed order, repeats included (same code per view, so bitwise)."""
    op = _small_viewset_projector(SRKernel.clinical("variant2", asymmetric=True))
    x = volume(op.in_shape)
    stack = op.forward(x)
    assert stack.shape == op.out_shape == (12,) + op.in_shape
    assert op.n_units == op.n_views == 12 and op.output_shape([7, 2]) == (2,) + op.in_shape
    for v in range(op.n_views):
        one = op.forward(x, v)
        assert one.shape == op.output_shape(v) == (1,) + op.in_shape
        np.testing.assert_array_equal(stack[v:v + 1], one)
    for subset in ([7, 2, 11], np.array([7, 7, 0], np.int64), (3,)):
        np.testing.assert_array_equal(op.forward(x, subset), stack[np.asarray(subset)])


def test_adjoint_all_views_is_sum_over_views(volume):
    """adjoint(y) with subset=None is sum_v H_v^T y[v]; float32 accumulation in a different order,
    so 1e-6 relative. adjoint(y, subset) on a subset likewise; back(y) is the alias."""
    op = _small_viewset_projector(SRKernel.clinical("variant2", asymmetric=True))
    y = volume(op.out_shape)
    total = op.adjoint(y)
    assert total.shape == op.in_shape
    want = sum(op.adjoint(y[v:v + 1], v).astype(np.float64) for v in range(op.n_views))
    assert rel_err(total, want) < 1e-6
    np.testing.assert_array_equal(op.back(y), total)
    sub = op.adjoint(np.ascontiguousarray(y[[3, 9]]), [3, 9])
    want = op.adjoint(y[3:4], 3).astype(np.float64) + op.adjoint(y[9:10], [9])
    assert rel_err(sub, want) < 1e-6


def test_back_alias_accepts_a_subset(volume):
    """design.md: every operator has ``adjoint`` with the alias ``back``, with the same subset
    argument: back(histos, views) gives adjoint(histos, views)."""
    op = _small_viewset_projector()
    g = volume((1,) + op.in_shape)
    np.testing.assert_array_equal(op.back(g, 4), op.adjoint(g, 4))
    np.testing.assert_array_equal(op.back(g, subset=[4]), op.adjoint(g, [4]))


def test_threads_give_identical_results(volume):
    """threads=1 vs threads=2: every output voxel is summed by one thread in a fixed order, so the
    results are bitwise identical."""
    grid = ImageGrid((11, 19, 16), 4.0)
    k = SRKernel.clinical("variant3", asymmetric=True)
    one = HistoImageProjector(grid, VIEWS, k, backend="cpu", threads=1)
    two = HistoImageProjector(grid, VIEWS, k, backend="cpu", threads=2)
    x, y = volume(grid.shape), volume((len(VIEWS),) + grid.shape)
    np.testing.assert_array_equal(one.forward(x), two.forward(x))
    np.testing.assert_array_equal(one.adjoint(y), two.adjoint(y))


def test_out_argument_is_filled_and_returned(volume):
    """out= receives the result (overwriting whatever it held) and is the returned object, for
    single views, subsets, the all-views stack and the summed adjoint."""
    op = _small_viewset_projector()
    x = volume(op.in_shape)
    out = volume((1,) + op.in_shape, 5.0, 6.0)
    res = op.forward(x, 5, out=out)
    assert res is out
    np.testing.assert_array_equal(out, op.forward(x, 5))
    out = volume(op.in_shape, 5.0, 6.0)
    assert op.adjoint(x[None], 5, out=out) is out
    np.testing.assert_array_equal(out, op.adjoint(x[None], 5))
    pair = volume((2,) + op.in_shape)
    out = volume(op.in_shape, 5.0, 6.0)
    assert op.adjoint(pair, [1, 6], out=out) is out
    np.testing.assert_array_equal(out, op.adjoint(pair, [1, 6]))
    stack = volume(op.out_shape, 5.0, 6.0)
    assert op.forward(x, out=stack) is stack
    np.testing.assert_array_equal(stack, op.forward(x))
    img = volume(op.in_shape, 5.0, 6.0)
    assert op.adjoint(stack, out=img) is img
    np.testing.assert_array_equal(img, op.adjoint(stack))


def test_inputs_are_not_modified(volume):
    """Projecting never writes into its input."""
    op = _small_viewset_projector()
    x = volume(op.in_shape)
    x0 = x.copy()
    op.forward(x, 1)
    op.adjoint(x[None], 1)
    op.adjoint(np.stack([x, x]), [1, 2])
    op.forward(x)
    np.testing.assert_array_equal(x, x0)


def test_subset_operator(volume):
    """projector.subset(views) is a LinearOperator of those views (image -> their stack), sharing
    the parent's LUTs: one view is H_v as a (1, nz, ny, nx) stack."""
    op = _small_viewset_projector(SRKernel.clinical("variant2", asymmetric=True))
    vop = op.subset(7)
    assert isinstance(vop, LinearOperator)
    assert vop.in_shape == op.in_shape and vop.out_shape == (1,) + op.in_shape
    x = volume(op.in_shape)
    np.testing.assert_array_equal(vop.forward(x), op.forward(x, 7))
    np.testing.assert_array_equal(vop(x), op.forward(x, 7))
    np.testing.assert_array_equal(vop.adjoint(x[None]), op.adjoint(x[None], 7))
    np.testing.assert_array_equal(vop.back(x[None]), op.adjoint(x[None], 7))
    assert rel_err(vop.forward(x)[0], ref.forward(x, op.lut(7))) < RTOL
    pair = op.subset([7, 2])
    assert pair.out_shape == (2,) + op.in_shape
    np.testing.assert_array_equal(pair.forward(x), op.forward(x, [7, 2]))
    assert pair.adjointness_test() < 1e-5


def test_single_view_and_view_list_constructors(volume):
    """A lone View, or a list of Views, gives the same operator as the corresponding ViewSet view."""
    grid = ImageGrid((9, 16, 15), 4.0)
    vs = ViewSet(n_phi=4, n_theta=3)
    k = SRKernel.clinical("variant1")
    x = volume(grid.shape)
    full = HistoImageProjector(grid, vs, k, backend="cpu")
    lone = HistoImageProjector(grid, vs[5], k, backend="cpu")
    listed = HistoImageProjector(grid, [vs[5], vs[0]], k, backend="cpu")
    assert lone.n_views == 1 and listed.n_views == 2
    np.testing.assert_array_equal(lone.forward(x, 0), full.forward(x, 5))
    np.testing.assert_array_equal(listed.forward(x, 1), full.forward(x, 0))


# --- backends ------------------------------------------------------------------------------------
@pytest.mark.skipif(directpet.cuda_device_count() > 0, reason="a CUDA device is present: 'cuda' is valid here")
def test_cuda_backend_without_gpu_is_an_error():
    """design.md: no silent fallbacks -- backend='cuda' without a usable GPU raises RuntimeError."""
    with pytest.raises(RuntimeError, match="cuda"):
        HistoImageProjector(ImageGrid((4, 5, 6)), View(0.0), backend="cuda")


@pytest.mark.skipif(directpet.cuda_device_count() > 0, reason="a CUDA device is present: 'auto' picks it")
def test_auto_backend_picks_cpu_without_gpu(volume):
    """backend='auto' without a GPU runs on the CPU and says so in ``backend``."""
    grid = ImageGrid((9, 16, 15), 4.0)
    op = HistoImageProjector(grid, View(0.3), backend="auto")
    assert op.backend == "cpu"
    x = volume(grid.shape)
    assert rel_err(op.forward(x, 0)[0], ref.forward(x, op.lut(0))) < RTOL


def test_default_backend_is_auto():
    """Without a backend argument the operator resolves 'auto' and reports the one it picked."""
    op = HistoImageProjector(ImageGrid((4, 5, 6)), View(0.0))
    assert op.backend == ("cuda" if directpet.has_cuda() and directpet.cuda_device_count() > 0 else "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_name", ["invariant", "variant2", "asym_variant"])
def test_gpu_matches_cpu(kernel_name, volume):
    """GPU and CPU projectors agree on the same NumPy inputs to 1e-5 relative (both float32)."""
    grid = GRIDS["even"]
    cpu = HistoImageProjector(grid, VIEWS, KERNELS[kernel_name], backend="cpu")
    gpu = HistoImageProjector(grid, VIEWS, KERNELS[kernel_name], backend="cuda")
    assert gpu.backend == "cuda"
    x, y = volume(grid.shape), volume((len(VIEWS),) + grid.shape)
    assert rel_err(np.asarray(gpu.forward(x)), cpu.forward(x)) < RTOL
    assert rel_err(np.asarray(gpu.adjoint(y)), cpu.adjoint(y)) < RTOL
