"""FIRST Super-LOR projectors against the float64 scipy.sparse references, adjointness, fast = matched,
a geometric oracle (sinusoid of a point), bad input, and GPU against CPU.

Tolerances: float32 projections against the float64 matrices land near 2e-7 relative (L2); 1e-5
leaves room for the rounding of sums over ~10^3 terms. The GPU's 'faithful' projectors read through
the texture unit, whose interpolation weights have 8 fractional bits (CUDA Programming Guide,
texture fetching: weights in 9-bit fixed point): errors of up to 2^-9 per weight, which average
down over the thousands of samples of a LOR; 3e-3 relative (L2) bounds them with margin.
"""

import numpy as np
import pytest

import directpet
from directpet.first import RotatingScanner
from directpet.first.model import build_super_lor_table
from directpet.first.projector import SuperLORProjector
from directpet.reference import first as ref

CONFIGS = {
    "small": RotatingScanner(n_rows=4, n_angles=6, n_radial=15, n_columns=12),
    "even-n": RotatingScanner(n_rows=5, n_angles=4, n_radial=16, n_columns=12),
}
METHODS = ("fast", "matched", "faithful")


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def problems():
    out = {}
    for name, s in CONFIGS.items():
        table = build_super_lor_table(s, quasi_tolerance=0.05)
        out[name] = (table, ref.system_matrix(table), ref.faithful_back_matrix(table))
    return out


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("method", METHODS)
def test_cpu_projectors_match_the_sparse_reference(problems, config, method, volume):
    table, H, B = problems[config]
    s = table.scanner
    P = SuperLORProjector(table, method, backend="cpu")
    x = volume(s.grid.shape)
    y = volume(s.sinogram_shape)
    assert _rel(P.forward(x), (H @ x.ravel().astype(np.float64)).reshape(s.sinogram_shape)) < 1e-5
    back_ref = (B if method == "faithful" else H.T) @ y.ravel().astype(np.float64)
    assert _rel(P.adjoint(y), back_ref.reshape(s.grid.shape)) < 1e-5


@pytest.mark.parametrize("method", METHODS)
def test_angle_subsets_are_rows_of_the_full_projector(problems, method, volume, rng):
    table, H, B = problems["small"]
    s = table.scanner
    P = SuperLORProjector(table, method, backend="cpu")
    angles = rng.permutation(s.n_angles)[:3]
    x = volume(s.grid.shape)
    Hs = ref.system_matrix(table, angles)
    assert _rel(P.forward(x, angles), (Hs @ x.ravel().astype(np.float64)).reshape((3,) + s.sinogram_shape[1:])) < 1e-5
    y = volume((3,) + s.sinogram_shape[1:])
    M = ref.faithful_back_matrix(table, angles) if method == "faithful" else Hs.T
    assert _rel(P.subset(angles).adjoint(y), (M @ y.ravel().astype(np.float64)).reshape(s.grid.shape)) < 1e-5


def test_a_non_default_tube(volume):
    """J = 1, K = 2 (3 x 5 tube): the CPU projectors are not tied to the paper's 5 x 3."""
    s = CONFIGS["small"]
    table = build_super_lor_table(s, J=1, K=2)
    H = ref.system_matrix(table)
    x, y = volume(s.grid.shape), volume(s.sinogram_shape)
    for method in ("fast", "matched"):
        P = SuperLORProjector(table, method, backend="cpu")
        assert _rel(P.forward(x), (H @ x.ravel().astype(np.float64)).reshape(s.sinogram_shape)) < 1e-5
        assert _rel(P.adjoint(y), (H.T @ y.ravel().astype(np.float64)).reshape(s.grid.shape)) < 1e-5


@pytest.mark.parametrize("method", ["fast", "matched"])
def test_exact_adjoint_pairs(method):
    s = RotatingScanner.small()
    P = SuperLORProjector(build_super_lor_table(s), method, backend="cpu")
    assert P.adjointness_test(np.random.default_rng(5)) < 1e-5


def test_faithful_back_is_not_the_transpose_but_close():
    """The paper's interpolating back projector differs from H^T by a few per cent (documented)."""
    s = RotatingScanner.small()
    P = SuperLORProjector(build_super_lor_table(s), "faithful", backend="cpu")
    mismatch = P.adjointness_test(np.random.default_rng(6))
    assert 1e-4 < mismatch < 0.2


def test_fast_equals_matched(volume):
    s = RotatingScanner.small()
    table = build_super_lor_table(s)
    fast, matched = (SuperLORProjector(table, m, backend="cpu") for m in ("fast", "matched"))
    x, y = volume(s.grid.shape), volume(s.sinogram_shape)
    assert _rel(fast.forward(x), matched.forward(x).astype(np.float64)) < 1e-5
    assert _rel(fast.adjoint(y), matched.adjoint(y).astype(np.float64)) < 1e-5


def test_faithful_sensitivity_in_the_same_pass(problems, volume):
    table, H, B = problems["small"]
    s = table.scanner
    P = SuperLORProjector(table, "faithful", backend="cpu")
    y, f = volume(s.sinogram_shape), volume(s.sinogram_shape)
    corr, sens = P.back_with_sensitivity(y, f)
    assert _rel(corr, (B @ y.ravel().astype(np.float64)).reshape(s.grid.shape)) < 1e-5
    assert _rel(sens, (B @ f.ravel().astype(np.float64)).reshape(s.grid.shape)) < 1e-5
    _, ones = P.back_with_sensitivity(y)
    assert _rel(ones, (B @ np.ones(B.shape[1])).reshape(s.grid.shape)) < 1e-5


def test_point_source_traces_its_sinusoid(rng):
    """Independent oracle: a point at (x0, y0) projects to s(phi) = -x0 sin(phi) + y0 cos(phi) and to
    the LORs whose centre slice is its slice (delta = 0). The centroid is exact only up to the ripple
    of bilinear interpolation on a rotated lattice (a few hundredths of a bin seen; 0.1 bin allowed)."""
    s = RotatingScanner(n_rows=6, n_angles=16, n_radial=41, n_columns=20)
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend="cpu")
    g = s.grid
    ix, iy, iz = (int(v) for v in rng.integers(8, 33, 3))
    iz = iz % g.nz
    img = np.zeros(g.shape, np.float32)
    img[iz, iy, ix] = 1.0
    sino = P.forward(img)
    x0, y0 = g.centres(2)[ix], g.centres(1)[iy]
    phi = s.angles_rad
    expected = -x0 * np.sin(phi) + y0 * np.cos(phi)
    direct = np.stack([sino[a, r, r] for a in range(s.n_angles) for r in range(s.n_rows)])
    direct = direct.reshape(s.n_angles, s.n_rows, s.n_radial).sum(axis=1)
    centroid = (direct * s.radial_mm(np.arange(s.n_radial))).sum(1) / direct.sum(1)
    np.testing.assert_allclose(centroid, expected, atol=0.1 * s.radial_bin_mm)
    rows = sino.sum(axis=(0, 3))
    kc = np.add.outer(np.arange(s.n_rows), np.arange(s.n_rows))
    assert rows[kc == iz].sum() > 0.5 * rows.sum()


def test_bad_input_names_the_argument(volume):
    s = RotatingScanner.small()
    table = build_super_lor_table(s)
    P = SuperLORProjector(table, backend="cpu")
    x = volume(s.grid.shape)
    with pytest.raises(TypeError, match="image"):
        P.forward(x.astype(np.float64))
    with pytest.raises(ValueError, match="image"):
        P.forward(x[:-1])
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="image"):
        P.forward(bad)
    with pytest.raises(ValueError, match="angles"):
        P.forward(x, [0, s.n_angles])
    with pytest.raises(TypeError, match="angles"):
        P.forward(x, [0.5])
    with pytest.raises(ValueError, match="sinogram"):
        P.adjoint(volume(s.sinogram_shape), [0])
    with pytest.raises(ValueError, match="out"):
        P.forward(x, out=np.empty((2, 2), np.float32))
    with pytest.raises(ValueError, match="method"):
        SuperLORProjector(table, "best")
    with pytest.raises(TypeError, match="table"):
        SuperLORProjector(s)
    with pytest.raises(ValueError, match="threads"):
        SuperLORProjector(table, threads=0)
    if directpet.cuda_device_count() == 0:
        with pytest.raises(RuntimeError, match="cuda"):
            SuperLORProjector(table, backend="cuda")


# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_gpu_matches_cpu(method, volume):
    s = RotatingScanner(n_rows=7, n_angles=12, n_radial=45, n_columns=24)
    table = build_super_lor_table(s)
    cpu = SuperLORProjector(table, method, backend="cpu")
    gpu = SuperLORProjector(table, method, backend="cuda")
    x, y = volume(s.grid.shape), volume(s.sinogram_shape)
    tol = 3e-3 if method == "faithful" else 1e-5
    assert _rel(gpu.forward(x), cpu.forward(x).astype(np.float64)) < tol
    assert _rel(gpu.adjoint(y), cpu.adjoint(y).astype(np.float64)) < tol
    angles = [5, 0, 11]
    assert _rel(gpu.forward(x, angles), cpu.forward(x, angles).astype(np.float64)) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_gpu_matches_the_sparse_reference(problems, method, volume):
    table, H, B = problems["small"]
    s = table.scanner
    P = SuperLORProjector(table, method, backend="cuda")
    x, y = volume(s.grid.shape), volume(s.sinogram_shape)
    tol = 3e-3 if method == "faithful" else 1e-5
    assert _rel(P.forward(x), (H @ x.ravel().astype(np.float64)).reshape(s.sinogram_shape)) < tol
    back_ref = (B if method == "faithful" else H.T) @ y.ravel().astype(np.float64)
    assert _rel(P.adjoint(y), back_ref.reshape(s.grid.shape)) < tol


@pytest.mark.gpu
def test_gpu_faithful_sensitivity_and_many_angles(volume):
    """More angles than one launch chunk (32) and than the faithful back's texture layers per launch."""
    s = RotatingScanner(n_rows=10, n_angles=70, n_radial=31, n_columns=20)
    table = build_super_lor_table(s)
    cpu = SuperLORProjector(table, "faithful", backend="cpu")
    gpu = SuperLORProjector(table, "faithful", backend="cuda")
    y, f = volume(s.sinogram_shape), volume(s.sinogram_shape)
    c1, s1 = cpu.back_with_sensitivity(y, f)
    c2, s2 = gpu.back_with_sensitivity(y, f)
    assert _rel(c2, c1.astype(np.float64)) < 3e-3 and _rel(s2, s1.astype(np.float64)) < 3e-3
    for m in ("fast", "matched"):
        c, g = SuperLORProjector(table, m, backend="cpu"), SuperLORProjector(table, m, backend="cuda")
        assert _rel(g.adjoint(y), c.adjoint(y).astype(np.float64)) < 1e-5
        x = volume(s.grid.shape)
        assert _rel(g.forward(x), c.forward(x).astype(np.float64)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["fast", "matched"])
def test_gpu_adjointness(method):
    s = RotatingScanner(n_rows=8, n_angles=20, n_radial=51, n_columns=24)
    P = SuperLORProjector(build_super_lor_table(s), method, backend="cuda")
    assert P.adjointness_test(np.random.default_rng(11)) < 1e-5


@pytest.mark.gpu
def test_gpu_cupy_arrays_in_place(volume):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    s = RotatingScanner.small()
    table = build_super_lor_table(s)
    gpu = SuperLORProjector(table, "fast", backend="cuda")
    x = volume(s.grid.shape)
    xd = cp.asarray(x)
    yd = gpu.forward(xd)
    assert isinstance(yd, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(yd), gpu.forward(x), rtol=1e-6, atol=1e-7)
    bd = gpu.adjoint(yd)
    assert isinstance(bd, cp.ndarray)
    with pytest.raises(TypeError, match="out"):
        gpu.forward(xd, out=np.empty(s.sinogram_shape, np.float32))


@pytest.mark.gpu
def test_gpu_fast_rejects_other_tubes():
    s = RotatingScanner.small()
    with pytest.raises(ValueError, match="method"):
        SuperLORProjector(build_super_lor_table(s, J=1, K=2), "fast", backend="cuda")


@pytest.mark.gpu
def test_gpu_faithful_back_with_tables_too_large_for_shared_memory(volume):
    """30 Super-LORs x 71 samples x 15 = 128 KB of tables: the faithful back reads them through the
    texture unit instead of shared memory, with the same results."""
    s = RotatingScanner(n_rows=30, n_angles=4, n_radial=71, n_columns=40)
    table = build_super_lor_table(s, quasi_tolerance=0.0)
    assert table.values.nbytes > 120_000
    cpu = SuperLORProjector(table, "faithful", backend="cpu")
    gpu = SuperLORProjector(table, "faithful", backend="cuda")
    y = volume(s.sinogram_shape)
    assert _rel(gpu.adjoint(y), cpu.adjoint(y).astype(np.float64)) < 3e-3
    c1, s1 = cpu.back_with_sensitivity(y)
    c2, s2 = gpu.back_with_sensitivity(y)
    assert _rel(c2, c1.astype(np.float64)) < 3e-3 and _rel(s2, s1.astype(np.float64)) < 3e-3


@pytest.mark.gpu
def test_gpu_fast_paths_of_large_configurations(volume):
    """More than one 64-bin radial tile, more than 16 rows per ring difference (several work units
    per ring difference), more than one 32-angle launch: fast (and the others) against the CPU."""
    s = RotatingScanner(n_rows=20, n_angles=40, n_radial=101, n_columns=40)
    table = build_super_lor_table(s)
    x, y = volume(s.grid.shape), volume(s.sinogram_shape)
    for method in METHODS:
        cpu = SuperLORProjector(table, method, backend="cpu")
        gpu = SuperLORProjector(table, method, backend="cuda")
        tol = 3e-3 if method == "faithful" else 1e-5
        angles = [0, 3] if method != "fast" else None   # the slow CPU methods on two angles
        yy = y if angles is None else y[angles]
        assert _rel(gpu.forward(x, angles), cpu.forward(x, angles).astype(np.float64)) < tol
        assert _rel(gpu.adjoint(yy, angles), cpu.adjoint(yy, angles).astype(np.float64)) < tol
