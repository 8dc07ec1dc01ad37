"""CUDA DIRECT projectors: agreement with the CPU backend, adjointness, array libraries, errors.

All tests carry the ``gpu`` marker and skip themselves (with the reason) when no CUDA device is
usable. Tolerances: float32 sums of up to ~2e4 terms in a different order than the CPU backend
agree to ~1e-6 relative; 1e-5 leaves room without hiding indexing errors (those give O(1) errors).
"""

import numpy as np
import pytest

import directpet as dp
from directpet._backend import cuda_module
from directpet.direct import HistoImageProjector, SRKernel, View

pytestmark = pytest.mark.gpu

METHODS = ["default", "slab_table", "slab_r16", "columns", "tlp", "ilp"]
KERNELS = {
    "invariant": SRKernel.invariant(),
    "variant1": SRKernel.clinical(),
    "variant3": SRKernel.clinical("variant3"),
    "asymmetric": SRKernel(tof_fwhm_ps=600, radial_fwhm=("linear", 10, 40), axial_fwhm=10, asymmetric=True),
}
VIEWS = [View.from_degrees(31.5, 0.0), View.from_degrees(121.5, 6.67), View.from_degrees(2.25, -6.67)]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def pair(grid, kernel, method, views=VIEWS):
    cpu = HistoImageProjector(grid, views, kernel, backend="cpu")
    gpu = HistoImageProjector(grid, views, kernel, backend="cuda", method=method, luts={v: cpu.lut(v) for v in range(len(views))})
    return cpu, gpu


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kname", list(KERNELS))
@pytest.mark.parametrize("shape", [(20, 24, 22), (17, 31, 29), (5, 16, 18), (13, 21, 36)])  # nx % 4 == 0: float4 staging
def test_gpu_matches_cpu(method, kname, shape, rng):
    """Every CUDA scheme computes the same operator as the CPU backend (NumPy in / out)."""
    grid = dp.ImageGrid(shape, 4.0)
    cpu, gpu = pair(grid, KERNELS[kname], method)
    x = rng.random(shape, dtype=np.float32) + 0.05
    for v in range(len(VIEWS)):
        assert rel(gpu.forward(x, v), cpu.forward(x, v)) < 1e-5
        assert rel(gpu.adjoint(x[None], v), cpu.adjoint(x[None], v)) < 1e-5


@pytest.mark.parametrize("method", METHODS)
def test_gpu_stress_kernel_larger_than_volume(method, rng):
    """Kernel support far larger than the volume (stress kernel on a tiny grid)."""
    grid = dp.ImageGrid((9, 14, 12), 4.0)
    cpu, gpu = pair(grid, SRKernel.stress(), method, VIEWS[:2])
    x = rng.random(grid.shape, dtype=np.float32) + 0.05
    for v in range(2):
        assert rel(gpu.forward(x, v), cpu.forward(x, v)) < 1e-5
        assert rel(gpu.adjoint(x[None], v), cpu.adjoint(x[None], v)) < 1e-5


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kname", list(KERNELS))
def test_gpu_adjointness(method, kname):
    grid = dp.ImageGrid((18, 26, 23), 4.0)
    op = HistoImageProjector(grid, VIEWS, KERNELS[kname], backend="cuda", method=method)
    assert op.adjointness_test(rng=7) < 1e-5


@pytest.mark.parametrize("method", ["default", "slab_table"])
@pytest.mark.parametrize("case", ["narrow_factored", "shallow_ring", "columns_fallback"])
def test_gpu_slab_configurations(method, case, rng):
    """The slab kernel's configurations: a short halo with a weight table too large for the caches
    (16 x 8 tiles, factored weights: a fine epsilon multiplies the identifiers); a halo whose
    shared-memory ring would not leave 4 blocks per SM (32 x 4 tiles, shallow ring, two barriers
    per row); one wider than the largest pitch (columns fallback). All must equal the CPU backend."""
    if case == "narrow_factored":
        grid, kernel = dp.ImageGrid((16, 40, 40), 4.0), SRKernel.clinical(epsilon=0.05)
    elif case == "shallow_ring":
        grid, kernel = dp.ImageGrid((20, 24, 120), 4.0), SRKernel.stress()
    else:
        grid, kernel = dp.ImageGrid((6, 12, 300), 4.0), SRKernel(tof_fwhm_ps=3000, radial_fwhm=6.0, axial_fwhm=6.0)
    cpu, gpu = pair(grid, kernel, method, VIEWS[:2])
    x = rng.random(grid.shape, dtype=np.float32) + 0.05
    for v in range(2):
        assert rel(gpu.forward(x, v), cpu.forward(x, v)) < 1e-5
        assert rel(gpu.adjoint(x[None], v), cpu.adjoint(x[None], v)) < 1e-5


@pytest.mark.parametrize("kname", ["variant1", "stress"])
def test_gpu_full_size_view(kname, rng):
    """The benchmark problem (144 x 144 x 48, 4 mm, tilted oblique view): enough tiles that the slab
    kernel runs one block per tile (clinical) or splits the kernel rows of each tile over two blocks
    to fill the last wave (stress); small test grids always split."""
    grid = dp.ImageGrid((48, 144, 144), 4.0)
    kernel = SRKernel.stress() if kname == "stress" else KERNELS[kname]
    cpu, gpu = pair(grid, kernel, "default", [View.from_degrees(31.5, 6.67)])
    x = rng.random(grid.shape, dtype=np.float32) + 0.05
    assert rel(gpu.forward(x, 0), cpu.forward(x, 0)) < 1e-5
    assert rel(gpu.adjoint(x[None], 0), cpu.adjoint(x[None], 0)) < 1e-5
    lut = gpu._engine.device_lut(0)
    for forward in (True, False):
        chosen = lut.slab_launch(forward)
        assert chosen["float4_staging"] and chosen["halo"] % 4 == 0 and chosen["tile"] in ((16, 8), (32, 4))
        # the clinical kernel's 1 MB table is gathered with its whole column plan staged once per block;
        # the stress kernel's factored weights are staged per kernel row
        assert chosen["whole_plan"] == (kname != "stress")
    if kname == "stress":
        # the stress kernel's table (slab_table) stages per kernel row: its whole plan would leave one
        # block per SM where per-row staging keeps three
        table = HistoImageProjector(grid, gpu.views, kernel, backend="cuda", method="slab_table", luts={0: cpu.lut(0)})
        assert rel(table.forward(x, 0), cpu.forward(x, 0)) < 1e-5
        chosen = table._engine.device_lut(0).slab_launch(True, "slab_table")
        assert not chosen["whole_plan"] and chosen["row_split"] > 0


def test_gpu_slab_staging_variants_agree(rng):
    """The tuned slab (rows staged as float4, the column plan staged once) and the issue-17 baseline
    slab_r16 (element copies, the plan staged per kernel row) compute the same projections; a source
    pointer off 16-byte alignment falls back to element copies of the same rounded halo."""
    cupy = pytest.importorskip("cupy", reason="CuPy not installed")
    grid = dp.ImageGrid((37, 40, 48), 4.0)
    views = [View.from_degrees(31.5, 6.67)]
    cpu, gpu = pair(grid, KERNELS["variant1"], "default", views)
    base = HistoImageProjector(grid, views, backend="cuda", method="slab_r16", luts={0: cpu.lut(0)})
    lut = gpu._engine.device_lut(0)
    assert lut.slab_launch(True) is None                     # chosen at the first projection
    with pytest.raises(ValueError, match="method"):
        lut.slab_launch(True, "columns")
    x = rng.random(grid.shape, dtype=np.float32) + 0.05
    ref_f, ref_b = cpu.forward(x, 0), cpu.adjoint(x[None], 0)
    for op in (gpu, base):
        assert rel(op.forward(x, 0), ref_f) < 1e-5
        assert rel(op.adjoint(x[None], 0), ref_b) < 1e-5
    tuned, old = lut.slab_launch(True), base._engine.device_lut(0).slab_launch(True, "slab_r16")
    assert tuned["float4_staging"] and tuned["halo"] % 4 == 0
    assert not old["float4_staging"] and old["halo"] <= tuned["halo"]
    assert tuned["whole_plan"] and not old["whole_plan"]   # the plan staged once / per kernel row: both checked
    buf = cupy.empty(x.size + 1, dtype=cupy.float32)       # x at a 4-byte offset: not 16-byte aligned
    shifted = buf[1:].reshape(grid.shape)
    shifted[...] = cupy.asarray(x)
    assert shifted.data.ptr % 16 == 4
    assert rel(cupy.asnumpy(gpu.forward(shifted, 0)), ref_f) < 1e-5
    assert rel(cupy.asnumpy(gpu.adjoint(shifted[None], 0)), ref_b) < 1e-5


@pytest.mark.parametrize("method", ["default", "slab_table", "columns"])
def test_gpu_support_with_a_gap_in_dy(method, rng):
    """A support whose kernel rows skip dy = +-1 (not an ellipsoid: a hand-made LUT): the slab kernel
    restages its whole ring of source rows at the gap instead of advancing it by one row."""
    from dataclasses import replace

    grid = dp.ImageGrid((14, 26, 24), 4.0)
    base = HistoImageProjector(grid, VIEWS[:2], KERNELS["variant1"], backend="cpu")
    luts = {}
    for v in range(2):
        lut = base.lut(v)
        keep = np.flatnonzero(np.abs(lut.offsets[:, 1]) != 1)
        offsets = np.ascontiguousarray(lut.offsets[keep])
        where = {tuple(o): i for i, o in enumerate(offsets)}
        flip = np.array([where[tuple(-o)] for o in offsets], dtype=np.int32)
        luts[v] = replace(lut, offsets=offsets, flip=flip, values=np.ascontiguousarray(lut.values[:, keep]))
        rows = np.unique(offsets[:, 1])
        assert 0 in rows and 2 in rows and 1 not in rows and -1 not in rows  # the gap is there
    cpu = HistoImageProjector(grid, VIEWS[:2], backend="cpu", luts=luts)
    gpu = HistoImageProjector(grid, VIEWS[:2], backend="cuda", method=method, luts=luts)
    x = rng.random(grid.shape, dtype=np.float32) + 0.05
    for v in range(2):
        assert rel(gpu.forward(x, v), cpu.forward(x, v)) < 1e-5
        assert rel(gpu.adjoint(x[None], v), cpu.adjoint(x[None], v)) < 1e-5


@pytest.mark.parametrize("method", ["default", "slab_table", "columns"])
def test_gpu_arbitrary_kernel_values(method, rng):
    """Random per-identifier kernel values (no column factorisation): the table path is used and
    still equals the CPU backend."""
    grid = dp.ImageGrid((19, 22, 25), 4.0)
    base = HistoImageProjector(grid, VIEWS, KERNELS["variant1"], backend="cpu")
    luts = {v: base.lut(v).with_values(rng.random(base.lut(v).values.shape) + 0.1) for v in range(len(VIEWS))}
    cpu = HistoImageProjector(grid, VIEWS, backend="cpu", luts=luts)
    gpu = HistoImageProjector(grid, VIEWS, backend="cuda", method=method, luts=luts)
    x = rng.random(grid.shape, dtype=np.float32)
    for v in range(len(VIEWS)):
        assert rel(gpu.forward(x, v), cpu.forward(x, v)) < 1e-5
        assert rel(gpu.adjoint(x[None], v), cpu.adjoint(x[None], v)) < 1e-5
    assert gpu._engine.device_lut(0).factored == (False, False)
    assert HistoImageProjector(grid, VIEWS, KERNELS["asymmetric"], backend="cuda")._engine.device_lut(0).factored == (True, True)


def test_gpu_batched_views_and_sum(rng):
    grid = dp.ImageGrid((16, 20, 20), 4.0)
    cpu, gpu = pair(grid, KERNELS["variant1"], "default")
    x = rng.random(grid.shape, dtype=np.float32)
    y = rng.random((len(VIEWS),) + grid.shape, dtype=np.float32)
    assert rel(gpu.forward(x), cpu.forward(x)) < 1e-5
    assert rel(gpu.adjoint(y), cpu.adjoint(y)) < 1e-5


def test_cupy_and_torch_inputs_identical(rng):
    """NumPy, CuPy and PyTorch inputs give bitwise identical results, outputs on the device."""
    grid = dp.ImageGrid((16, 20, 22), 4.0)
    op = HistoImageProjector(grid, VIEWS, KERNELS["asymmetric"], backend="cuda")
    x = rng.random(grid.shape, dtype=np.float32)
    y = rng.random((2,) + grid.shape, dtype=np.float32)        # histo-images of the views [2, 0]
    ref_f, ref_b, ref_sum = op.forward(x, 1), op.adjoint(x[None], 1), op.adjoint(y, [2, 0])
    cupy = pytest.importorskip("cupy", reason="CuPy not installed")
    xc, yc = cupy.asarray(x), cupy.asarray(y)
    yf, yb = op.forward(xc, 1), op.adjoint(xc[None], 1)
    assert isinstance(yf, cupy.ndarray) and yf.shape == (1,) + grid.shape
    np.testing.assert_array_equal(cupy.asnumpy(yf), ref_f)
    np.testing.assert_array_equal(cupy.asnumpy(yb), ref_b)
    np.testing.assert_array_equal(cupy.asnumpy(op.adjoint(yc, [2, 0])), ref_sum)
    yall = op.forward(xc)
    assert yall.shape == (len(VIEWS),) + grid.shape
    np.testing.assert_array_equal(cupy.asnumpy(yall[1:2]), ref_f)
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    xt, yt = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    tf, tb = op.forward(xt, 1), op.adjoint(xt[None], 1)
    assert tf.is_cuda and tb.is_cuda
    np.testing.assert_array_equal(tf.cpu().numpy(), ref_f)
    np.testing.assert_array_equal(tb.cpu().numpy(), ref_b)
    np.testing.assert_array_equal(op.adjoint(yt, [2, 0]).cpu().numpy(), ref_sum)


def test_device_array_errors(rng):
    cupy = pytest.importorskip("cupy", reason="CuPy not installed")
    grid = dp.ImageGrid((8, 10, 12), 4.0)
    op = HistoImageProjector(grid, VIEWS[:1], KERNELS["invariant"], backend="cuda")
    with pytest.raises(TypeError, match="image"):
        op.forward(cupy.ones(grid.shape, dtype=cupy.float64), 0)
    with pytest.raises(ValueError, match="image"):
        op.forward(cupy.ones((8, 10, 11), dtype=cupy.float32), 0)
    bad = cupy.asarray(rng.random(grid.shape, dtype=np.float32))
    bad[3, 4, 5] = cupy.nan
    with pytest.raises(ValueError, match="NaN"):
        op.forward(bad, 0)
    with pytest.raises(ValueError, match="contiguous"):
        op.forward(cupy.ones((8, 10, 24), dtype=cupy.float32)[:, :, ::2], 0)
    with pytest.raises(TypeError, match="out"):
        op.forward(cupy.ones(grid.shape, dtype=cupy.float32), 0, out=np.empty((1,) + grid.shape, np.float32))


def test_out_of_memory_is_memory_error():
    with pytest.raises(MemoryError, match="out of memory"):
        cuda_module().DeviceBuffer(1 << 50)


def test_lut_corruption_rejected_before_upload():
    grid = dp.ImageGrid((8, 10, 12), 4.0)
    op = HistoImageProjector(grid, VIEWS[:1], KERNELS["invariant"], backend="cpu")
    lut = op.lut(0)
    with pytest.raises(ValueError, match="lormap"):
        cuda_module().DirectDeviceLut(list(grid.shape), lut.lormap + 10_000, lut.offsets, lut.flip, lut.values)
