"""Geometric normalisation of the rotating heads, checked by quadrature and against the Monte Carlo."""

import numpy as np
import pytest
from scipy.integrate import quad

from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table, geometric_normalisation, simulate
from directpet.first.monte_carlo import direction_band
from directpet.geometry import ImageGrid
from directpet.sim import CylinderSource

SCANNER = RotatingScanner(n_rows=8, n_angles=24, n_radial=61, n_columns=24)


def test_factors_by_independent_quadrature():
    s = SCANNER
    f = geometric_normalisation(s, full=False)
    lam, half_w, half_d = s.mu_per_mm * s.depth_mm, 0.5 * s.n_columns * s.pitch_mm, 0.5 * s.head_distance_mm
    for rho, (r1, r2) in ((30, (2, 2)), (5, (0, 7)), (52, (6, 3))):
        radial = float(s.radial_mm(rho))
        ca = 1 / np.sqrt(1 + s.tan_alpha[r2 - r1 + s.n_rows - 1] ** 2)

        def integrand(b):
            ya, yb = radial / np.cos(b) - half_d * np.tan(b), radial / np.cos(b) + half_d * np.tan(b)
            if abs(ya) > half_w or abs(yb) > half_w:
                return 0.0
            return ((1 - np.exp(-lam / (np.cos(b) * ca))) / (1 - np.exp(-lam / ca))) ** 2

        # the visible beta form one interval: integrate over it exactly
        edge = [np.arctan((half_w - abs(radial)) / half_d)]
        expected = quad(integrand, -np.pi / 2, np.pi / 2, points=[-edge[0], edge[0]], limit=200)[0] / np.pi
        assert f[r1, r2, rho] == pytest.approx(expected, rel=1.5e-3)   # the midpoint rule across the edges


def test_factor_properties():
    s = SCANNER
    f = geometric_normalisation(s)
    assert f.shape == s.sinogram_shape and f.dtype == np.float32
    np.testing.assert_array_equal(f[0], f[5])                      # no angle dependence
    np.testing.assert_allclose(f[..., ::-1], f, rtol=1e-5)         # mirror in s
    centre = (s.n_radial - 1) // 2
    profile = f[0, 3, 3]
    assert np.all(np.diff(profile[centre:]) <= 0) and profile[-1] < profile[centre]
    assert 0 < f.min() and f.max() < 1
    with pytest.raises(TypeError, match="scanner"):
        geometric_normalisation("scanner")
    with pytest.raises(ValueError, match="n_quad"):
        geometric_normalisation(s, n_quad=3)


def test_monte_carlo_of_a_uniform_cylinder_matches_model_times_normalisation():
    """The honest check of model + normalisation: Monte Carlo counts of a uniform cylinder against
    the analytic model's forward projection times the factors, compared as radial, ring-difference and
    axial-position profiles (each summed over the other sinogram axes, totals matched). Tolerance:
    4 standard errors of the Poisson counts plus 3 % for what the model leaves out (in-plane depth of
    interaction, side-face escape); about 1 % is seen."""
    s = SCANNER
    g = s.grid
    fine = ImageGrid(tuple(2 * n for n in g.shape), tuple(0.5 * v for v in g.voxel_size))
    cyl = CylinderSource(0.45 * g.nx * g.voxel_size[2], 100.0)
    activity = cyl.voxelise(fine, 4).astype(np.float32)
    n_decays = round(16_000_000 / direction_band(s, activity, grid=fine)["band_fraction"])  # 1.6e7 followed
    sino, st = simulate(s, activity, n_decays, seed=5, backend="cpu", grid=fine)
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend="cpu")
    model = P.forward(cyl.voxelise(g, 4).astype(np.float32)) * geometric_normalisation(s)
    delta, _, kc = s.lor_rows()
    profiles = {
        "radial": (sino.sum(axis=(0, 1, 2)), model.sum(axis=(0, 1, 2))),
        "delta": tuple(np.array([a[:, delta == d].sum() for d in range(-(s.n_rows - 1), s.n_rows)]) for a in (sino, model)),
        "kc": tuple(np.array([a[:, kc == k].sum() for k in range(2 * s.n_rows - 1)]) for a in (sino, model)),
    }
    for name, (mc, mod) in profiles.items():
        mod = mod * mc.sum() / mod.sum()
        use = mod > 0.2 * mod.max()
        err = np.abs(mc[use] - mod[use])
        assert np.all(err <= 4 * np.sqrt(mod[use]) + 0.03 * mod[use]), (name, (mc[use] / mod[use] - 1).round(3))
