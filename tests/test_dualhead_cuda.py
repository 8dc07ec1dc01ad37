"""CUDA dual-head projectors (default, alg1, alg2, alg3) against the CPU backend (issue 8 section 2).

Every method must compute the CPU operator (y[lor] = sum_p sum_taps w image[voxel], its exact transpose)
to float rounding, for random patch models (taps anywhere in the crystal cells between the two
crystals, which exercises windows, mirrored offsets and tap chunks far beyond physical patches, and
compact physical-like blobs), non-square heads, D = 1..5, more than 128 planes, subsets (lists of
classes in any order with repeats, one class) and the zero-count skip. The default kernels'
global-memory fallback (windows larger than the shared memory allowed) and the plane-group launches
are forced through the engine's knobs.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import directpet
from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel
from directpet.reference.dualhead import random_model

pytestmark = pytest.mark.gpu
TOL = 1e-5   # float32 sums of hundreds of terms in different orders

METHODS = ["default", "alg1", "alg2", "alg3"]


def compact_model(scanner: DualHeadScanner, rng, taps_per_row=10, spread=1.5, empty=0.1) -> PatchModel:
    """Physical-like patches: per (class, plane) a normal blob (sigma `spread` voxels) of about
    `taps_per_row` draws around a random centre in the class's crystal cells (0 <= dy < D (a_y + 1),
    likewise dz; duplicates merge), about `empty` of the rows without taps. (random_model of
    directpet.reference.dualhead spreads the taps over the whole cell range instead.)"""
    s, D = scanner, scanner.D
    rows = s.n_classes * s.n_planes
    k_row = np.repeat(np.arange(s.n_classes), s.n_planes)
    n = rng.integers(1, 2 * taps_per_row, size=rows)
    n[rng.random(rows) < empty] = 0
    k = np.repeat(k_row, n)
    p = np.repeat(np.tile(np.arange(s.n_planes), s.n_classes), n)
    ay, az = s.class_of(k)
    ay_r, az_r = s.class_of(k_row)
    cy = np.repeat(rng.random(rows) * D * (ay_r + 1), n)
    cz = np.repeat(rng.random(rows) * D * (az_r + 1), n)
    dy = np.clip(np.rint(cy + rng.normal(0, spread, k.size)), 0, D * (ay + 1) - 1).astype(np.int64)
    dz = np.clip(np.rint(cz + rng.normal(0, spread, k.size)), 0, D * (az + 1) - 1).astype(np.int64)
    return PatchModel.from_taps(s, k, p, dy, dz, rng.uniform(0.05, 1.0, k.size))


def make_model(scanner, rng, taps, compact):
    if compact:
        return compact_model(scanner, rng, taps)
    return random_model(scanner, rng, taps=(0, 2 * taps))


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def class_lists(scanner, rng):
    """Subsets: all classes (None), a shuffled list with repeats, and one class (an integer)."""
    sub = rng.choice(scanner.n_classes, size=min(9, scanner.n_classes), replace=False)
    sub = np.concatenate([sub, sub[:3]])
    rng.shuffle(sub)
    return [None, sub.astype(np.int32), int(sub[0])]


CASES = {
    "small_D2": dict(scanner=DualHeadScanner.small(), taps=10, compact=False),
    "nonsquare_D1": dict(scanner=DualHeadScanner.small(n_y=7, n_z=3, voxels_per_crystal=1, n_planes=9), taps=6,
                         compact=False),
    "D4": dict(scanner=DualHeadScanner.small(n_y=5, n_z=4, voxels_per_crystal=4, n_planes=7), taps=40,
               compact=True),
    "D5_two_residue_chunks": dict(scanner=DualHeadScanner.small(n_y=4, n_z=3, voxels_per_crystal=5, n_planes=5),
                                  taps=30, compact=False),
    "planes_131": dict(scanner=DualHeadScanner.small(n_y=3, n_z=4, voxels_per_crystal=2, n_planes=131,
                                                     plane_mm=0.25), taps=4, compact=False),
}


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(20240508)
    return {name: make_model(c["scanner"], rng, c["taps"], c["compact"]) for name, c in CASES.items()}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", list(CASES))
def test_gpu_matches_cpu(models, method, case, rng):
    """Forward and adjoint of every method equal the CPU default projector (NumPy in and out)."""
    model = models[case]
    s = model.scanner
    cpu = DualHeadProjector(model, "default", backend="cpu")
    gpu = DualHeadProjector(model, method, backend="cuda")
    assert gpu.backend == "cuda"
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    for classes in class_lists(s, rng):
        n = s.lor_count(classes)
        y = rng.uniform(0.1, 1.0, n).astype(np.float32)
        yg = gpu.forward(x, classes)
        assert yg.shape == (n,) and yg.dtype == np.float32
        assert rel(yg, cpu.forward(x, classes)) < TOL
        assert rel(gpu.adjoint(y, classes), cpu.adjoint(y, classes)) < TOL


@pytest.mark.parametrize("method", METHODS)
def test_gpu_skip_zero(models, method, rng):
    """LORs whose skip value is 0 get exactly 0; the others are projected as without skip."""
    model = models["D4"]
    s = model.scanner
    gpu = DualHeadProjector(model, method, backend="cuda")
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    classes = np.array([5, 0, 19, 5, 12], np.int32)
    n = s.lor_count(classes)
    counts = rng.poisson(0.7, n).astype(np.float32)   # about half zeros
    assert 0.2 < np.mean(counts == 0) < 0.8
    full = gpu.forward(x, classes)
    skipped = gpu.forward(x, classes, skip_zero=counts)
    assert np.all(skipped[counts == 0] == 0.0)
    np.testing.assert_allclose(skipped[counts != 0], full[counts != 0], rtol=TOL)
    # every LOR skipped: all zeros, through the early-exit paths
    assert not np.any(gpu.forward(x, classes, skip_zero=np.zeros(n, np.float32)))


@pytest.mark.parametrize("method", METHODS)
def test_gpu_adjointness(models, method, rng):
    """<H x, y> = <x, H^T y> on the GPU (float64 dots of the float32 results)."""
    model = models["small_D2"]
    s = model.scanner
    gpu = DualHeadProjector(model, method, backend="cuda")
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    y = rng.uniform(0.1, 1.0, s.n_lors).astype(np.float32)
    lhs = np.dot(gpu.forward(x).astype(np.float64), y.astype(np.float64))
    rhs = np.dot(x.ravel().astype(np.float64), gpu.adjoint(y).ravel().astype(np.float64))
    assert abs(lhs - rhs) / abs(rhs) < 1e-5


def _engine(model, method, window_limit=0, narrow_blocks=False):
    from directpet.dualhead.cuda_engine import CudaEngine

    s = model.scanner
    host = directpet._core.DualHeadModel(s.n_y, s.n_z, s.D, s.n_planes, model.tap_start, model.tap_dy, model.tap_dz,
                                         model.tap_w)
    eng = CudaEngine(SimpleNamespace(_model=host, method=method), window_limit=window_limit)
    eng.model.narrow_blocks = narrow_blocks
    return eng


@pytest.mark.parametrize("case", ["small_D2", "D4", "D5_two_residue_chunks"])
def test_gpu_default_global_memory_fallback(models, case, rng):
    """With no shared memory allowed for windows, every class takes the global-memory kernels: same operator."""
    _check_window_limit(models[case], 1, rng)


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("limit", [0, 40000, 32768, 1])
def test_gpu_default_window_limits(limit, narrow, rng):
    """A 64 x 40 head, D = 4, under window limits (bytes of a block's two windows; 0: the device's) that
    send its classes to the small- or large-window launches or (narrow blocks) to blocks of 1024 or 512
    padded positions, and to the global-memory kernels: always the same operator. Class 0 (2560
    positions, no padding) spans two to five tiles: its windows take 68 / 35 / 19 KB at 2048 / 1024 /
    512 positions per block, so 40000 and 32768 pick 1024 and 512 with narrow blocks (the global-memory
    kernels without), and 0 the staged kernel at 2048."""
    s = DualHeadScanner.small(n_y=64, n_z=40, voxels_per_crystal=4, n_planes=5)
    _check_window_limit(compact_model(s, rng, taps_per_row=40), limit, rng,
                        classes=np.array([0, 1, 40, 41, s.n_classes - 1, 100, 0], np.int32), narrow=narrow)


def _check_window_limit(model, limit, rng, classes=None, narrow=False):
    s = model.scanner
    cpu = DualHeadProjector(model, "default", backend="cpu")
    eng = _engine(model, "default", window_limit=limit, narrow_blocks=narrow)
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    if classes is None:
        classes = np.array([3, 0, s.n_classes - 1, 3, 1], np.int32)
    n = s.lor_count(classes)
    y = rng.uniform(0.1, 1.0, n).astype(np.float32)
    counts = rng.poisson(1.0, n).astype(np.float32)
    yg = eng.forward(x, classes, counts, np.empty(n, np.float32))
    ref = cpu.forward(x, classes)
    assert np.all(yg[counts == 0] == 0.0)
    assert rel(yg[counts != 0], ref[counts != 0]) < TOL
    assert rel(eng.back(y, classes, np.empty(s.grid.shape, np.float32)), cpu.adjoint(y, classes)) < TOL


@pytest.mark.parametrize("limit", [0, 1])
@pytest.mark.parametrize("case", ["D4", "D5_two_residue_chunks", "head_64x40"])
def test_gpu_default_back_block_order(models, case, limit, rng):
    """The back projection's blocks started heaviest first (the default) or in index order: each block owns
    its cells and sums them alike, so the results are identical, and the CPU's operator (staged and, with
    no window memory allowed, global-memory kernels; one and two residue chunks; the 64 x 40 head has 20
    units of 16 x 8 cells per plane, so a block's unit and plane are both decoded from its index)."""
    if case == "head_64x40":
        s = DualHeadScanner.small(n_y=64, n_z=40, voxels_per_crystal=4, n_planes=5)
        model = compact_model(s, rng, taps_per_row=40)
    else:
        model = models[case]
    s = model.scanner
    eng = _engine(model, "default", window_limit=limit)
    assert eng.model.back_heavy_first
    classes = np.array([3, 0, s.n_classes - 1, 3, 1], np.int32)
    y = rng.uniform(0.1, 1.0, s.lor_count(classes)).astype(np.float32)
    heavy = eng.back(y, classes, np.empty(s.grid.shape, np.float32))
    eng.model.back_heavy_first = False
    plain = eng.back(y, classes, np.empty(s.grid.shape, np.float32))
    np.testing.assert_array_equal(heavy, plain)
    assert rel(heavy, DualHeadProjector(model, "default", backend="cpu").adjoint(y, classes)) < TOL


@pytest.mark.parametrize("groups", [1, 2, 5, 131])
def test_gpu_default_plane_groups(models, groups, rng):
    """Plane-range launches accumulating into y give the same projection (up to rounding)."""
    model = models["planes_131"]
    s = model.scanner
    eng = _engine(model, "default")
    eng.model.plane_groups = groups
    assert eng.model.plane_groups == groups
    cpu = DualHeadProjector(model, "default", backend="cpu")
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    assert rel(eng.forward(x, None, None, np.empty(s.n_lors, np.float32)), cpu.forward(x)) < TOL
    with pytest.raises(ValueError, match="plane_groups"):
        eng.model.plane_groups = -1


@pytest.mark.parametrize("case, groups, per_launch, limit", [
    ("planes_131", 2, 0, 0), ("planes_131", 5, 2, 0), ("planes_131", 131, 0, 0), ("planes_131", 131, 7, 0),
    ("planes_131", 5, 0, 1), ("D4", 3, 0, 0), ("D5_two_residue_chunks", 2, 0, 0)])
def test_gpu_default_plane_groups_per_launch(models, case, groups, per_launch, limit, rng):
    """Several plane groups in one forward launch (a tile's last block adds the groups' sums into y in
    plane order) give the very floats of one launch per group: all groups in one launch, launches of
    fewer groups than there are (5 in launches of 2, 2, 1; 131 in launches of 7) that add onto what the
    earlier ones wrote, the global-memory kernel (limit 1 byte), and the zero-count skip with whole
    classes skipped (blocks that return early in every group) or random LORs skipped."""
    model = models[case]
    s = model.scanner
    eng = _engine(model, "default", window_limit=limit)
    assert eng.model.fwd_groups_per_launch == 0
    eng.model.plane_groups = groups
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    skip = (rng.random(s.n_lors) < 0.7).astype(np.float32)
    skip[: s.n_lors // 3] = 0.0
    classes = np.array([s.n_classes - 1, 0, 2, 1], np.int32)
    n_sub = s.lor_count(classes)

    def run():
        return [eng.forward(x, None, None, np.empty(s.n_lors, np.float32)),
                eng.forward(x, None, skip, np.empty(s.n_lors, np.float32)),
                eng.forward(x, classes, None, np.empty(n_sub, np.float32))]

    eng.model.fwd_groups_per_launch = 1
    per_group = run()
    eng.model.fwd_groups_per_launch = per_launch
    together = run()
    for a, b in zip(together, per_group):
        np.testing.assert_array_equal(a, b)
    assert np.all(together[1][skip == 0] == 0.0)
    assert rel(together[0], DualHeadProjector(model, "default", backend="cpu").forward(x)) < TOL
    with pytest.raises(ValueError, match="fwd_groups_per_launch"):
        eng.model.fwd_groups_per_launch = -1


def test_gpu_large_head(rng):
    """A 40 x 30 head, D = 4, 119 planes, ~60 compact taps per row (index ranges, many window shapes; the
    default forward's classes fit one tile of 2048 positions here, test_gpu_default_window_limits has
    classes of several): every method on a mixed class subset, and the default on all classes."""
    s = DualHeadScanner(n_y=40, n_z=30, voxels_per_crystal=4, n_planes=119)
    model = compact_model(s, rng, taps_per_row=60, spread=3.0, empty=0.02)
    cpu = DualHeadProjector(model, "default", backend="cpu")
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    # (0,0), (0, a_z), (a_y, 0), the most oblique class and random ones
    classes = np.concatenate([[0, 29, 39 * 30, s.n_classes - 1], rng.choice(s.n_classes, 8, replace=False)])
    classes = classes.astype(np.int32)
    n = s.lor_count(classes)
    y = rng.uniform(0.1, 1.0, n).astype(np.float32)
    ref_f, ref_b = cpu.forward(x, classes), cpu.adjoint(y, classes)
    for method in METHODS:
        gpu = DualHeadProjector(model, method, backend="cuda")
        assert rel(gpu.forward(x, classes), ref_f) < TOL, method
        assert rel(gpu.adjoint(y, classes), ref_b) < TOL, method
    gpu = DualHeadProjector(model, "default", backend="cuda")
    yy = rng.uniform(0.1, 1.0, s.n_lors).astype(np.float32)
    assert rel(gpu.forward(x), cpu.forward(x)) < TOL
    assert rel(gpu.adjoint(yy), cpu.adjoint(yy)) < TOL


@pytest.mark.parametrize("method", METHODS)
def test_gpu_dense_rows(method, rng):
    """Rows far denser than physical patches: class (25, 25) of a 30 x 30 head with D = 2 has up to 2704
    taps per (class, plane) and 676 distinct cell offsets, more than one step of the default kernels
    takes (512 taps per (plane, r_z) forward, 32 cell offsets per back step), so they run in chunks."""
    s = DualHeadScanner.small(n_y=30, n_z=30, voxels_per_crystal=2, n_planes=3)
    model = random_model(s, rng, taps=(2000, 4000))   # >= 2000 draws: >= ~1400 distinct taps in (25, 25)
    assert model.taps_per_row()[25 * 30 + 25].max() > 2 * 512 + 64   # one of the 2 r_z groups > 512
    cpu = DualHeadProjector(model, "default", backend="cpu")
    gpu = DualHeadProjector(model, method, backend="cuda")
    classes = np.array([775, 0, 899, 303, 775], np.int32)
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    y = rng.uniform(0.1, 1.0, s.lor_count(classes)).astype(np.float32)
    assert rel(gpu.forward(x, classes), cpu.forward(x, classes)) < TOL
    assert rel(gpu.adjoint(y, classes), cpu.adjoint(y, classes)) < TOL


def test_gpu_cupy_arrays_in_place(models, rng):
    """CuPy inputs and outputs are used in place and give the NumPy results; mixing sides is an error."""
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    model = models["D4"]
    s = model.scanner
    gpu = DualHeadProjector(model, "default", backend="cuda")
    x = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    classes = np.array([7, 2, 7], np.int32)
    n = s.lor_count(classes)
    y = rng.uniform(0.1, 1.0, n).astype(np.float32)
    counts = rng.poisson(1.0, n).astype(np.float32)
    out = cp.empty(n, cp.float32)
    res = gpu.forward(cp.asarray(x), classes, out=out, skip_zero=cp.asarray(counts))
    assert res is out
    np.testing.assert_allclose(cp.asnumpy(out), gpu.forward(x, classes, skip_zero=counts), rtol=1e-6, atol=0)
    img = cp.empty(s.grid.shape, cp.float32)
    assert gpu.adjoint(cp.asarray(y), classes, out=img) is img
    np.testing.assert_allclose(cp.asnumpy(img), gpu.adjoint(y, classes), rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError):
        gpu.forward(cp.asarray(x), classes, out=np.empty(n, np.float32))
    # the subset operator runs on the device too; skip_zero may not overlap out
    A = gpu.subset(classes)
    out2 = cp.empty(n, cp.float32)
    assert A.forward(cp.asarray(x), out=out2, skip_zero=cp.asarray(counts)) is out2
    np.testing.assert_allclose(cp.asnumpy(out2), cp.asnumpy(out), rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="out: overlaps skip_zero"):
        gpu.forward(cp.asarray(x), classes, out=out2, skip_zero=out2)


def test_gpu_device_model_bytes_and_bad_input(models):
    """nbytes counts the model (8 bytes per tap and more) and the workspaces; the bindings reject bad
    arguments with errors naming them."""
    core = directpet._backend.cuda_module()   # the CUDA module (loaded on first use)
    model = models["small_D2"]
    s = model.scanner
    eng = _engine(model, "default")
    m = eng.model
    assert m.model_nbytes >= 8 * model.n_taps
    assert m.n_taps == model.n_taps
    x = np.ones(s.grid.shape, np.float32)
    eng.forward(x, None, None, np.empty(s.n_lors, np.float32))
    assert m.nbytes >= m.model_nbytes + 4 * x.size      # the polyphase workspace
    buf = core.DeviceBuffer(4 * s.n_lors)
    img = core.DeviceBuffer(4 * x.size)
    ok = np.array([0, 1], np.int32)
    with pytest.raises(ValueError, match="method"):
        core.dualhead_forward_cuda("alg4", m, img.ptr, ok, 0, buf.ptr, 0)
    with pytest.raises(TypeError, match="classes"):
        core.dualhead_forward_cuda("default", m, img.ptr, ok.astype(np.int64), 0, buf.ptr, 0)
    with pytest.raises(ValueError, match="classes"):
        core.dualhead_forward_cuda("default", m, img.ptr, np.array([0, s.n_classes], np.int32), 0, buf.ptr, 0)
    with pytest.raises(ValueError, match="classes"):
        core.dualhead_back_cuda("default", m, buf.ptr, np.array([], np.int32), img.ptr, 0)
    with pytest.raises(ValueError, match="image"):
        core.dualhead_forward_cuda("default", m, 0, ok, 0, buf.ptr, 0)
    with pytest.raises(ValueError, match="out"):
        core.dualhead_back_cuda("alg3", m, buf.ptr, ok, 0, 0)
