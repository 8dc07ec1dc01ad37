"""Dual-head patch projectors (CPU) against the float64 scipy.sparse reference, against an independent
ray trace of each LOR's straight line, adjointness, subsets (lists of classes, the projector's units),
the zero-count skip, determinism over thread counts, bad input, and a model read back from .npz.

Tolerances: float32 sums of a few hundred taps against the float64 matrix land near 1e-7 relative
(L2); 1e-5 leaves room for rounding. Where one code path computes the same sums in the same order
(class lists, skip, thread counts) the results must agree bit for bit.
"""

import numpy as np
import pytest

from directpet import _core
from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel
from directpet.operators import SubsetOperator
from directpet.reference import dualhead as ref

CONFIGS = {
    "small-D2": DualHeadScanner.small(),                                                   # 8 x 6, D = 2
    "non-square-D1": DualHeadScanner.small(n_y=5, n_z=7, voxels_per_crystal=1, n_planes=9),
    "D4": DualHeadScanner.small(n_y=4, n_z=3, voxels_per_crystal=4, n_planes=5),
}


def _rel(a, b):
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def problems():
    out = {}
    for i, (name, s) in enumerate(CONFIGS.items()):
        model = ref.random_model(s, 1000 + i, taps=(0, 8))   # some (class, plane) rows without taps
        out[name] = (model, ref.system_matrix(model))
    return out


# --- the matrix ------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", list(CONFIGS))
def test_cpu_matches_the_sparse_reference(problems, config, volume):
    model, H = problems[config]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    assert P.backend == "cpu" and P.in_shape == s.grid.shape and P.out_shape == (s.n_lors,)
    x = volume(s.grid.shape)
    y = volume((s.n_lors,))
    assert _rel(P.forward(x), H @ x.ravel().astype(np.float64)) < 1e-5
    assert _rel(P.adjoint(y), (H.T @ y.astype(np.float64)).reshape(s.grid.shape)) < 1e-5
    assert P.adjointness_test(rng=1) < 1e-5


def test_reference_rows_follow_the_patch_rule(problems):
    """A few entries of the reference matrix, from the rule in model.py written out for single LORs."""
    model, H = problems["small-D2"]
    s = model.scanner
    D, P = s.D, s.n_planes
    for c_u, c_l in (((2, 1), (5, 4)), ((6, 4), (3, 1)), ((1, 5), (1, 2)), ((4, 0), (0, 3))):
        lor = int(s.lor_index(*c_u, *c_l))
        k = abs(c_l[0] - c_u[0]) * s.n_z + abs(c_l[1] - c_u[1])
        row = np.zeros(s.grid.shape)
        for p in range(P):
            for dy, dz, w in zip(*model.patch(k, p)):
                vy = D * c_u[0] + (dy if c_l[0] >= c_u[0] else D - 1 - dy)
                vz = D * c_u[1] + (dz if c_l[1] >= c_u[1] else D - 1 - dz)
                row[vz, vy, p] += w
        assert np.array_equal(H[lor].toarray().ravel(), row.ravel())


# --- subsets: lists of classes ----------------------------------------------------------------------
def test_class_lists_are_slices_of_the_full_projection(problems, volume, rng):
    model, H = problems["small-D2"]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    x = volume(s.grid.shape)
    full = P.forward(x)
    offsets = s.class_offsets()
    classes = list(rng.permutation(s.n_classes)[:7]) + [3, 3]       # any order, a repeated class
    expect = np.concatenate([full[offsets[k]:offsets[k + 1]] for k in classes])
    got = P.forward(x, classes)
    assert got.shape == (P.lor_count(classes),) and np.array_equal(got, expect)
    # adjoint: the reference of the same list; a repeated class adds its blocks
    y = volume((P.lor_count(classes),))
    Hs = ref.system_matrix(model, classes)
    assert Hs.shape[0] == y.size
    assert _rel(P.adjoint(y, classes), (Hs.T @ y.astype(np.float64)).reshape(s.grid.shape)) < 1e-5
    n3 = P.lor_count([3])
    y3 = (y[-2 * n3:-n3].astype(np.float64) + y[-n3:]).astype(np.float32)
    both = P.adjoint(y[-2 * n3:], [3, 3])
    assert _rel(both, P.adjoint(y3, [3]).astype(np.float64)) < 1e-6
    # one integer is a subset of one class; the reference takes the same subsets
    assert np.array_equal(P.forward(x, 3), full[offsets[3]:offsets[4]]) and P.output_shape(3) == (n3,)
    assert _rel(P.forward(x, classes), ref.forward(model, x, classes)) < 1e-5
    assert _rel(P.adjoint(y, classes), ref.adjoint(model, y, classes)) < 1e-5


def test_subset_operator(problems, volume, rng):
    model, _ = problems["D4"]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    classes = rng.permutation(s.n_classes)[:5]
    A = P.subset(classes)
    assert isinstance(A, SubsetOperator)
    assert (P.n_units, P.unit_name) == (s.n_classes, "class")
    assert A.in_shape == s.grid.shape and A.out_shape == (s.lor_count(classes),) == (P.lor_count(classes),)
    x = volume(s.grid.shape)
    assert np.array_equal(A.forward(x), P.forward(x, classes))
    assert np.array_equal(A(x), P.forward(x, classes))
    counts = (np.arange(A.out_shape[0]) % 3).astype(np.float32)       # skip_zero passes through
    assert np.array_equal(A.forward(x, skip_zero=counts), P.forward(x, classes, skip_zero=counts))
    y = volume(A.out_shape)
    assert np.array_equal(A.adjoint(y), P.adjoint(y, classes))
    assert A.adjointness_test(rng=2) < 1e-5
    assert np.array_equal(P.units(classes), classes.astype(np.int32)) and P.units() is None


def test_out_arrays_are_filled_in_place(problems, volume):
    model, _ = problems["small-D2"]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    x = volume(s.grid.shape)
    out = np.full(P.lor_count([0, 9]), np.nan, np.float32)
    assert P.forward(x, [0, 9], out=out) is out and np.array_equal(out, P.forward(x, [0, 9]))
    img = np.full(s.grid.shape, np.nan, np.float32)
    assert P.adjoint(out, [0, 9], out=img) is img and np.array_equal(img, P.adjoint(out, [0, 9]))


# --- zero-count skip -------------------------------------------------------------------------------
def test_skip_zero_leaves_out_exactly_the_zero_lors(problems, volume, rng):
    """Per class and sign, masks with no counts, with fewer than 1/16 kept (projected LOR by LOR), and
    mostly kept: the kept LORs get the full projection's values, the others exactly 0. (Not bitwise:
    the LOR-by-LOR path and the register-blocked path may contract multiply-adds differently under
    -march=native, as on the H200 host; the sum order is the same, so they agree to float rounding.)"""
    model, _ = problems["small-D2"]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    x = volume(s.grid.shape)
    full = P.forward(x)
    counts = np.zeros(s.n_lors, np.float32)
    offsets, sizes = s.class_offsets(), s.class_lor_counts()
    for k in range(s.n_classes):
        n = int(sizes[k])
        kept = (0, 1, n // 2, n)[k % 4]
        where = offsets[k] + rng.choice(n, kept, replace=False)
        counts[where] = rng.integers(1, 5, kept)
    y = P.forward(x, skip_zero=counts)
    assert np.all(y[counts == 0] == 0)
    np.testing.assert_allclose(y[counts != 0], full[counts != 0], rtol=2e-6, atol=0)
    assert np.count_nonzero(y) == np.count_nonzero(counts)
    # with a class list, the mask is the list's vector
    classes = [5, 2, 5]
    sub = np.concatenate([counts[offsets[k]:offsets[k + 1]] for k in classes])
    y_sub, full_sub = P.forward(x, classes, skip_zero=sub), P.forward(x, classes)
    assert np.all(y_sub[sub == 0] == 0)
    np.testing.assert_allclose(y_sub[sub != 0], full_sub[sub != 0], rtol=2e-6, atol=0)
    # one kept LOR per sign (the LOR-by-LOR path), at every shift position in turn
    per_sign = np.repeat(sizes // [len(s.class_signs(k)) for k in range(s.n_classes)], sizes)
    pos = np.concatenate([np.arange(n) for n in sizes]) % per_sign      # position within its sign
    for r in range(s.n_y * s.n_z):
        one = (pos == r % per_sign).astype(np.float32)
        y_one = P.forward(x, skip_zero=one)
        assert np.all(y_one[one == 0] == 0), r
        np.testing.assert_allclose(y_one[one != 0], full[one != 0], rtol=2e-6, atol=0, err_msg=str(r))


# --- determinism -----------------------------------------------------------------------------------
@pytest.mark.parametrize("config", ["small-D2", "D4"])
def test_thread_counts_give_identical_bits(problems, config, volume):
    """Including more threads than planes/4 (the D4 scanner has 5 planes), where the back projection
    splits planes by v_y residue."""
    model, _ = problems[config]
    s = model.scanner
    x, y = volume(s.grid.shape), volume((s.n_lors,))
    counts = (np.arange(s.n_lors) % 3).astype(np.float32)
    ref_f = ref_b = ref_s = None
    for threads in (1, 2, 3, 8):
        P = DualHeadProjector(model, backend="cpu", threads=threads)
        f, b, sk = P.forward(x), P.adjoint(y), P.forward(x, skip_zero=counts)
        if ref_f is None:
            ref_f, ref_b, ref_s = f, b, sk
        assert np.array_equal(f, ref_f) and np.array_equal(b, ref_b) and np.array_equal(sk, ref_s), threads


# --- an independent geometric check --------------------------------------------------------------
def _ray_trace(s: DualHeadScanner, a, b):
    """{(v_z, v_y, p): length in mm} of the segment a -> b (points (x, y, z) in mm) inside the image:
    every crossing of a voxel boundary, the voxel of each piece found from its midpoint."""
    nz_i, ny_i, n_p = s.grid.shape
    lo = np.array([-0.5 * n_p * s.plane_mm, -0.5 * ny_i * s.voxel_mm, -0.5 * nz_i * s.voxel_mm])
    size = np.array([s.plane_mm, s.voxel_mm, s.voxel_mm])
    n = np.array([n_p, ny_i, nz_i])
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = b - a
    lam = [0.0, 1.0]
    for ax in range(3):
        if d[ax] != 0:
            lam.extend((lo[ax] + size[ax] * np.arange(n[ax] + 1) - a[ax]) / d[ax])
    lam = np.unique(np.clip(lam, 0.0, 1.0))
    mid = 0.5 * (lam[1:] + lam[:-1])
    length = np.diff(lam) * np.linalg.norm(d)
    idx = np.floor((a + mid[:, None] * d - lo) / size).astype(int)
    keep = np.all((idx >= 0) & (idx < n), axis=1) & (length > 1e-9)
    out = {}
    for (p, vy, vz), ln in zip(idx[keep], length[keep]):
        out[(vz, vy, p)] = out.get((vz, vy, p), 0.0) + ln
    return out


def _endpoints(s, c_uy, c_uz, c_ly, c_lz):
    """Front-face centres of the upper and lower crystals, (x, y, z) mm."""
    return ((0.5 * s.gap_mm, s.crystal_y_mm(c_uy), s.crystal_z_mm(c_uz)),
            (-0.5 * s.gap_mm, s.crystal_y_mm(c_ly), s.crystal_z_mm(c_lz)))


def _line_model(s: DualHeadScanner) -> PatchModel:
    """Taps = the intersection lengths of the line from c_u = (0, 0) to c_l = (a_y, a_z) per class."""
    k, p, dy, dz, w = [], [], [], [], []
    for cls in range(s.n_classes):
        a_y, a_z = (int(v) for v in s.class_of(cls))
        for (vz, vy, pp), ln in _ray_trace(s, *_endpoints(s, 0, 0, a_y, a_z)).items():
            for lst, v in ((k, cls), (p, pp), (dy, vy), (dz, vz), (w, ln)):
                lst.append(v)
    return PatchModel.from_taps(s, k, p, dy, dz, w, meta={"kind": "line"})


# odd D: crystal centres are voxel centres, so no LOR runs along a voxel boundary (no ties)
LINE_SCANNERS = {"D1": DualHeadScanner.small(n_y=5, n_z=7, voxels_per_crystal=1, n_planes=9),
                 "D3": DualHeadScanner.small(n_y=4, n_z=5, voxels_per_crystal=3, n_planes=7, plane_mm=3.0)}


@pytest.mark.parametrize("config", list(LINE_SCANNERS))
def test_line_model_matches_a_ray_trace_of_every_lor(config, volume, rng):
    """Shift and reflection addressing checked against tracing each LOR's own line (all signs)."""
    s = LINE_SCANNERS[config]
    P = DualHeadProjector(_line_model(s), backend="cpu")
    x = volume(s.grid.shape)
    y = P.forward(x)
    c_uy, c_uz, c_ly, c_lz = s.lor_crystals()
    assert np.array_equal(s.lor_index(c_uy, c_uz, c_ly, c_lz), np.arange(s.n_lors))
    for lor in rng.choice(s.n_lors, 150, replace=False):
        taps = _ray_trace(s, *_endpoints(s, c_uy[lor], c_uz[lor], c_ly[lor], c_lz[lor]))
        expect = sum(ln * float(x[v]) for v, ln in taps.items())
        assert abs(y[lor] - expect) <= 1e-5 * expect, (lor, y[lor], expect)


def test_line_model_by_hand(volume):
    """D = 1. A LOR perpendicular to the heads reads its crystal's column of voxels, plane_mm per
    plane. A LOR one crystal oblique in y crosses to the neighbouring column at x = 0 (the middle of
    the central plane): half of the central plane on each side, length sqrt(gap^2 + pitch^2) / gap
    per mm of x."""
    s = LINE_SCANNERS["D1"]
    P = DualHeadProjector(_line_model(s), backend="cpu")
    x = volume(s.grid.shape)
    y = P.forward(x)
    t, c = s.plane_mm, (s.n_planes - 1) // 2
    assert np.isclose(y[s.lor_index(3, 2, 3, 2)], t * x[2, 3, :].sum(), rtol=1e-6)
    f = np.hypot(s.gap_mm, s.pitch_mm) / s.gap_mm
    for step in (1, -1):                      # to c_y + 1 (sign +) and to c_y - 1 (sign -)
        col_u, col_l = x[4, 2, :], x[4, 2 + step, :]
        expect = f * t * (col_u[c + 1:].sum() + 0.5 * col_u[c] + 0.5 * col_l[c] + col_l[:c].sum())
        assert np.isclose(y[s.lor_index(2, 4, 2 + step, 4)], expect, rtol=1e-6)


# --- files -----------------------------------------------------------------------------------------
def test_a_model_read_from_npz(problems, tmp_path, volume):
    model, _ = problems["non-square-D1"]
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = PatchModel.load(path)
    s = loaded.scanner
    x, y = volume(s.grid.shape), volume((s.n_lors,))
    P, Q = DualHeadProjector(model, backend="cpu"), DualHeadProjector(loaded, backend="cpu")
    assert np.array_equal(P.forward(x), Q.forward(x)) and np.array_equal(P.adjoint(y), Q.adjoint(y))


# --- bad input -------------------------------------------------------------------------------------
def test_bad_input_names_the_argument(problems, volume):
    model, _ = problems["small-D2"]
    s = model.scanner
    P = DualHeadProjector(model, backend="cpu")
    x = volume(s.grid.shape)
    n2 = P.lor_count([1, 2])
    with pytest.raises(TypeError, match="^image:"):
        P.forward(x.astype(np.float64))
    with pytest.raises(ValueError, match="^image:"):
        P.forward(x[:, :, :-1].copy())
    with pytest.raises(ValueError, match="^image:"):
        P.forward(np.asfortranarray(x))
    bad = x.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="^image:"):
        P.forward(bad)
    with pytest.raises(ValueError, match="^y:"):
        P.adjoint(volume((n2 + 1,)), [1, 2])
    bad_y = volume((n2,))
    bad_y[0] = np.inf
    with pytest.raises(ValueError, match="^y:"):
        P.adjoint(bad_y, [1, 2])
    with pytest.raises(ValueError, match="^subset:"):
        P.forward(x, [0, s.n_classes])
    with pytest.raises(ValueError, match="^subset:"):
        P.adjoint(volume((n2,)), [-1, 2])
    with pytest.raises(TypeError, match="^subset:"):
        P.forward(x, [0.5, 1.0])
    with pytest.raises(ValueError, match="^subset:"):
        P.forward(x, [])
    with pytest.raises(TypeError, match="skip_zero"):            # not a keyword of the adjoint
        P.adjoint(volume((n2,)), [1, 2], skip_zero=volume((n2,)))
    with pytest.raises(ValueError, match="^skip_zero:"):
        P.forward(x, [1, 2], skip_zero=volume((n2 - 1,)))
    with pytest.raises(TypeError, match="^skip_zero:"):
        P.forward(x, [1, 2], skip_zero=np.ones(n2))
    with pytest.raises(ValueError, match="^out:"):
        P.forward(x, [1, 2], out=np.empty(n2 + 1, np.float32))
    with pytest.raises(ValueError, match="^out:"):
        P.adjoint(volume((n2,)), [1, 2], out=np.empty(s.grid.shape[::-1], np.float32))
    # the model: wrong type, or a projector of another scanner fed this scanner's arrays
    with pytest.raises(TypeError, match="^model:"):
        DualHeadProjector(s, backend="cpu")
    other = DualHeadProjector(problems["D4"][0], backend="cpu")
    with pytest.raises(ValueError, match="^image:"):
        other.forward(x)
    with pytest.raises(ValueError, match="^y:"):
        other.adjoint(volume((s.n_lors,)))
    # methods and options
    for method in ("alg1", "alg2", "alg3"):
        with pytest.raises(ValueError, match='^method:.*backend="cuda"'):
            DualHeadProjector(model, method, backend="cpu")
    with pytest.raises(ValueError, match="^method:"):
        DualHeadProjector(model, "fast", backend="cpu")
    with pytest.raises(ValueError, match="^threads:"):
        DualHeadProjector(model, backend="cpu", threads=0)
    with pytest.raises(ValueError, match="^backend:"):
        DualHeadProjector(model, backend="gpu")


def test_bad_input_at_the_binding(problems, volume):
    """The compiled functions check on their own (dtype, shape, read-only output), naming the argument."""
    model, _ = problems["small-D2"]
    s = model.scanner
    M = DualHeadProjector(model, backend="cpu")._model
    x = volume(s.grid.shape)
    k = np.array([1, 2], np.int32)
    n = s.lor_count(k)
    y = np.empty(n, np.float32)
    _core.dualhead_forward_cpu(M, x, k, None, y, 1)
    with pytest.raises(TypeError, match="^classes:"):
        _core.dualhead_forward_cpu(M, x, k.astype(np.int64), None, y, 1)
    with pytest.raises(ValueError, match="^classes:"):
        _core.dualhead_forward_cpu(M, x, np.array([1, s.n_classes], np.int32), None, y, 1)
    with pytest.raises(ValueError, match="^image:"):
        _core.dualhead_forward_cpu(M, x[:-1].copy(), k, None, y, 1)
    with pytest.raises(TypeError, match="^skip:"):
        _core.dualhead_forward_cpu(M, x, k, np.ones(n, np.float64), y, 1)
    with pytest.raises(ValueError, match="^skip:"):
        _core.dualhead_forward_cpu(M, x, k, np.ones(n + 1, np.float32), y, 1)
    with pytest.raises(ValueError, match="^out:"):
        _core.dualhead_forward_cpu(M, x, k, None, np.empty(n - 1, np.float32), 1)
    ro = np.empty(n, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="^out:"):
        _core.dualhead_forward_cpu(M, x, k, None, ro, 1)
    with pytest.raises(ValueError, match="^y:"):
        _core.dualhead_back_cpu(M, np.ones(n + 1, np.float32), k, np.empty(s.grid.shape, np.float32), 1)
    with pytest.raises(TypeError, match="^out:"):
        _core.dualhead_back_cpu(M, y, k, np.empty(s.grid.shape, np.float64), 1)


def test_patch_model_rejects_taps_that_break_its_invariants(problems):
    """Offsets outside the cells between c_u and c_l, non-positive weights and unsorted or repeated
    taps are refused with a ValueError naming the array (the one compiled check of the taps)."""
    model, _ = problems["small-D2"]
    s = model.scanner
    row = int(np.flatnonzero(np.diff(model.tap_start) >= 2)[0])
    a = int(model.tap_start[row])
    k = row // s.n_planes
    ay, az = s.class_of(k)
    cases = {"tap_dy": ("tap_dy", s.D * (int(ay) + 1)), "tap_dz": ("tap_dz", s.D * (int(az) + 1)),
             "tap_w": ("tap_w", 0.0)}
    for name, (field, value) in cases.items():
        arrays = {f: getattr(model, f).copy() for f in ("tap_dy", "tap_dz", "tap_w")}
        arrays[field][a] = value
        with pytest.raises(ValueError, match=name):
            PatchModel(s, model.tap_start, **arrays)
    swapped = {f: getattr(model, f).copy() for f in ("tap_dy", "tap_dz", "tap_w")}
    for f in swapped:
        swapped[f][[a, a + 1]] = swapped[f][[a + 1, a]]
    with pytest.raises(ValueError, match="sorted by"):
        PatchModel(s, model.tap_start, **swapped)
