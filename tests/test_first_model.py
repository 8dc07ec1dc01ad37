"""FIRST system model: the analytic tube, its symmetries, the Super-LOR reduction and table storage."""

import numpy as np
import pytest

from directpet.first import RotatingScanner
from directpet.first.model import (SuperLORTable, analytic_tube, build_super_lor_table, efficiency, lor_tube,
                                   tube_at)

SMALL = RotatingScanner(n_rows=8, n_angles=10, n_radial=25, n_columns=16)


def _random_lor(rng, s):
    return (int(rng.integers(s.n_angles)), int(rng.integers(s.n_rows)), int(rng.integers(s.n_rows)),
            int(rng.integers(s.n_radial)))


def test_every_lor_of_a_class_gets_the_super_lor_tube(rng):
    """Rotation, radial translation, axial translation and z reflection: the per-LOR model computed in
    scanner coordinates equals the class tube (|delta|, k mirrored for negative delta)."""
    table = build_super_lor_table(SMALL, quasi_tolerance=0.0)
    for _ in range(40):
        a, r1, r2, rho = _random_lor(rng, SMALL)
        per_lor = lor_tube(SMALL, a, r1, r2, rho)
        np.testing.assert_allclose(per_lor, table.tube(r2 - r1), rtol=1e-6, atol=1e-9 * per_lor.max())


@pytest.mark.parametrize("which", ["rotation", "radial translation", "axial translation", "reflection"])
def test_symmetry_identities_of_the_per_lor_model(rng, which):
    for _ in range(10):
        a, r1, r2, rho = _random_lor(rng, SMALL)
        ref = lor_tube(SMALL, a, r1, r2, rho)
        if which == "rotation":
            other = lor_tube(SMALL, (a + int(rng.integers(1, SMALL.n_angles))) % SMALL.n_angles, r1, r2, rho)
        elif which == "radial translation":
            other = lor_tube(SMALL, a, r1, r2, int(rng.integers(SMALL.n_radial)))
        elif which == "axial translation":
            shift = int(rng.integers(-min(r1, r2), SMALL.n_rows - max(r1, r2)))
            other = lor_tube(SMALL, a, r1 + shift, r2 + shift, rho)
        else:                                        # z mirror: delta -> -delta, k -> -k
            other = lor_tube(SMALL, a, r2, r1, rho)[:, :, ::-1]
        np.testing.assert_allclose(other, ref, rtol=1e-9, atol=1e-12)


def test_internal_mirror_symmetries_of_the_tube():
    """In-plane mirror (j -> -j), head swap (i -> n-1-i) and the symmetric axial profile (k -> -k)."""
    for delta in (0, 3, 7):
        t = analytic_tube(SMALL, delta)
        np.testing.assert_allclose(t[:, ::-1, :], t, rtol=1e-12)
        np.testing.assert_allclose(t[::-1], t, rtol=1e-12)
        np.testing.assert_allclose(t[:, :, ::-1], t, rtol=1e-12)


def test_tube_widths_follow_the_blur_budget():
    """The in-plane profile at the LOR centre integrates the Gaussian of docs/physics.rst 2.6 over voxels:
    recompute it from the brief's formula with scipy's normal CDF, independently of the model code."""
    from scipy.stats import norm

    s = RotatingScanner()
    t = analytic_tube(s, 0, J=2, K=1)
    mid = (s.n_radial - 1) // 2                      # along position 0: t = 1/2
    sig_nc = np.deg2rad(s.acollinearity_fwhm_deg) / 2.3548200450309493
    L = s.head_distance_mm + 2 * s.depth_moments(0.0)[0]
    var_u = 0.5 * s.crystal_mm**2 / 12 + (0.25 * L * sig_nc) ** 2 + (s.positron_range_fwhm_mm / 2.3548200450309493) ** 2
    var_w = 0.5 * s.pitch_mm**2 / 12 + (0.25 * L * sig_nc) ** 2 + (s.positron_range_fwhm_mm / 2.3548200450309493) ** 2
    j = np.arange(-2, 3) * s.radial_bin_mm
    k = np.arange(-1, 2) * s.slice_mm
    pu = norm.cdf((j + 0.2) / np.sqrt(var_u)) - norm.cdf((j - 0.2) / np.sqrt(var_u))
    pw = norm.cdf((k + 0.4) / np.sqrt(var_w)) - norm.cdf((k - 0.4) / np.sqrt(var_w))
    np.testing.assert_allclose(t[mid], np.outer(pu, pw), rtol=1e-10)


def test_efficiency_falls_with_obliquity():
    s = RotatingScanner()
    e = efficiency(s, s.tan_alpha[s.n_rows - 1:])
    assert e[0] == pytest.approx(1.0)
    assert np.all(np.diff(e) < 0)
    # cos^3 alone would give a smaller drop: oblique paths are longer in the crystal
    cos3 = (1 + s.tan_alpha[-1] ** 2) ** -1.5
    assert cos3 < e[-1] < 1.0


@pytest.mark.parametrize("tol", [0.0, 0.02, 0.05, 0.1])
def test_quasi_symmetry_error_within_the_stated_bound(tol):
    s = RotatingScanner()
    table = build_super_lor_table(s, quasi_tolerance=tol)
    worst = 0.0
    for delta in range(-(s.n_rows - 1), s.n_rows):
        exact = analytic_tube(s, delta)[:, :, ::-1] if delta < 0 else analytic_tube(s, delta)
        err = np.abs(table.tube(delta) - exact).max() / exact.max()
        assert err <= tol + 1e-6                    # float32 storage of the tables
        assert table.quasi_error[delta + s.n_rows - 1] == pytest.approx(err, abs=1e-6)
        worst = max(worst, err)
    rep = table.storage_report()
    assert rep["max_quasi_error"] == pytest.approx(worst, abs=1e-6)
    if tol == 0.0:
        assert table.n_super == s.n_rows and worst < 1e-6
    else:
        assert table.n_super < s.n_rows


def test_storage_report_counts_what_is_stored():
    """The report's Super-LOR entry is the table actually held, every coarser level counts one tube
    per class of the sinogram's own shape, and the quasi-symmetry reduces storage exactly as far as
    the tolerance allows (more Super-LORs for a tighter tolerance, one per |delta| without it)."""
    s = RotatingScanner()
    n_super = {}
    for tol in (0.0, 0.02, 0.05, 0.1):
        table = build_super_lor_table(s, quasi_tolerance=tol)
        rep = table.storage_report()
        assert rep["super_lor"] == table.values.size and rep["bytes_super_lor"] == table.values.nbytes
        tube = table.values[0].size
        assert rep["per_lor"] == int(np.prod(s.sinogram_shape)) * tube
        assert rep["reflection"] == len(set(np.abs(np.arange(-(s.n_rows - 1), s.n_rows)))) * tube
        n_super[tol] = table.n_super
    assert n_super[0.0] == s.n_rows
    assert n_super[0.0] >= n_super[0.02] >= n_super[0.05] >= n_super[0.1] >= 1
    assert n_super[0.1] < n_super[0.0]


def test_save_and_load_round_trip(tmp_path):
    table = build_super_lor_table(SMALL, quasi_tolerance=0.05)
    table.save(tmp_path / "t.npz")
    back = SuperLORTable.load(tmp_path / "t.npz")
    assert back.scanner == SMALL
    for name in ("values", "super_of_delta", "flip_k", "tan_alpha", "quasi_error"):
        np.testing.assert_array_equal(getattr(back, name), getattr(table, name))
    assert back.meta["representatives"] == table.meta["representatives"]


def test_a_foreign_table_replaces_the_analytic_one(tmp_path, rng):
    """A table from elsewhere (here: random values, one Super-LOR per |delta|) loads and is used as given."""
    s = SMALL
    vals = rng.uniform(0.01, 1.0, (s.n_rows, s.n_radial, 5, 3)).astype(np.float32)
    deltas = np.arange(-(s.n_rows - 1), s.n_rows)
    t = SuperLORTable(s, vals, np.abs(deltas), deltas < 0, s.tan_alpha, np.zeros(s.n_deltas), {"model": "foreign"})
    t.save(tmp_path / "mc.npz")
    back = SuperLORTable.load(tmp_path / "mc.npz")
    np.testing.assert_array_equal(back.tube(-3), vals[3][:, :, ::-1])


def test_bad_tables_and_files(tmp_path):
    with pytest.raises(TypeError, match="scanner"):
        build_super_lor_table("not a scanner")
    with pytest.raises(ValueError, match="quasi_tolerance"):
        build_super_lor_table(SMALL, quasi_tolerance=1.5)
    with pytest.raises(ValueError, match="J"):
        build_super_lor_table(SMALL, J=-1)
    good = build_super_lor_table(SMALL)
    with pytest.raises(ValueError, match="values"):
        SuperLORTable(SMALL, good.values[:, :5], good.super_of_delta, good.flip_k, good.tan_alpha, good.quasi_error)
    bad = good.values.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="values"):
        SuperLORTable(SMALL, bad, good.super_of_delta, good.flip_k, good.tan_alpha, good.quasi_error)
    with pytest.raises(ValueError, match="super_of_delta"):
        SuperLORTable(SMALL, good.values, good.super_of_delta + 100, good.flip_k, good.tan_alpha, good.quasi_error)
    with pytest.raises(ValueError, match="values"):
        SuperLORTable(SMALL, good.values.astype(np.float64) * 1e40, good.super_of_delta, good.flip_k, good.tan_alpha,
                      good.quasi_error)   # finite in float64, inf in float32
    with pytest.raises(TypeError, match="super_of_delta"):
        SuperLORTable(SMALL, good.values, good.super_of_delta + 0.5, good.flip_k, good.tan_alpha, good.quasi_error)
    with pytest.raises(ValueError, match="tan_alpha"):
        SuperLORTable(SMALL, good.values, good.super_of_delta, good.flip_k, good.tan_alpha * 1e9, good.quasi_error)
    with pytest.raises(ValueError, match="quasi_error"):
        SuperLORTable(SMALL, good.values, good.super_of_delta, good.flip_k, good.tan_alpha,
                      np.full(SMALL.n_deltas, np.nan))
    with pytest.raises(TypeError, match="quasi_tolerance"):
        build_super_lor_table(SMALL, quasi_tolerance="a")
    np.savez(tmp_path / "other.npz", values=good.values)
    with pytest.raises(ValueError, match="not a Super-LOR table"):
        SuperLORTable.load(tmp_path / "other.npz")
    good.save(tmp_path / "v.npz")
    with np.load(tmp_path / "v.npz") as f:
        d = dict(f)
    d["version"] = np.array(99)
    np.savez(tmp_path / "v99.npz", **d)
    with pytest.raises(ValueError, match="version"):
        SuperLORTable.load(tmp_path / "v99.npz")


def test_scanner_validation():
    with pytest.raises(ValueError, match="n_rows"):
        RotatingScanner(n_rows=0)
    with pytest.raises(ValueError, match="crystal_mm"):
        RotatingScanner(crystal_mm=2.0)
    with pytest.raises(ValueError, match="n_radial"):
        RotatingScanner(n_radial=500)
    with pytest.raises(ValueError, match="mu_per_mm"):
        RotatingScanner(mu_per_mm=float("nan"))
    with pytest.raises(TypeError, match="pitch_mm"):
        RotatingScanner(pitch_mm="1.6")
    with pytest.raises(TypeError, match="n_angles"):
        RotatingScanner(n_angles=2.5)
    s = RotatingScanner()
    assert s.grid.shape == (59, 175, 175) and s.sinogram_shape == (130, 30, 30, 175)
    assert RotatingScanner.from_dict(s.to_dict()) == s


def test_tube_at_is_symmetric_and_positive(rng):
    s = RotatingScanner()
    along = rng.uniform(-30, 30, 50)
    off = rng.uniform(-1, 1, 50)
    p = tube_at(s, 0.1, along, off, off)
    assert np.all(p > 0)
    np.testing.assert_allclose(tube_at(s, 0.1, -along, -off, -off), p, rtol=1e-12)
