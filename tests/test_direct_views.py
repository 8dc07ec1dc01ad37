"""DIRECT view geometry (docs/physics.rst 1.1, 1.9): bins, local axes, direction binning, view order."""

from __future__ import annotations

import numpy as np
import pytest

from directpet.direct import ViewSet


def _unit(phi, theta):
    """u(phi, theta) = (cos t cos p, cos t sin p, sin t), written from docs/physics.rst 1.1."""
    return np.stack([np.cos(theta) * np.cos(phi), np.cos(theta) * np.sin(phi), np.sin(theta)], axis=-1)


def test_default_viewset_is_40_by_3_with_paper_bin_centres():
    """[HA]'s 40 x 3 views: azimuth centres (k + 1/2) * 4.5 deg, tilt centres -6.67, 0, +6.67 deg
    and tilt edges at +-3.33 / +-10 deg (docs/physics.rst 1.1). Tolerances are float rounding of degrees,
    except the two-decimal paper numbers (0.005 deg)."""
    vs = ViewSet()
    assert (vs.n_phi, vs.n_theta) == (40, 3)
    assert len(vs) == 120
    np.testing.assert_allclose(np.rad2deg(vs.phi_centres), (np.arange(40) + 0.5) * 4.5, atol=1e-12)
    np.testing.assert_allclose(np.rad2deg(vs.theta_centres), [-6.67, 0.0, 6.67], atol=0.005)
    np.testing.assert_allclose(np.rad2deg(vs.theta_centres), [-20 / 3, 0.0, 20 / 3], atol=1e-12)
    np.testing.assert_allclose(np.rad2deg(vs.theta_edges), [-10, -10 / 3, 10 / 3, 10], atol=1e-12)


def test_view_index_is_k_times_ntheta_plus_l():
    """View v = k * n_theta + l carries azimuth centre k and tilt centre l."""
    vs = ViewSet(n_phi=40, n_theta=3)
    for k in (0, 7, 39):
        for l in range(3):
            v = vs.index(k, l)
            assert v == 3 * k + l
            assert vs[v].phi == pytest.approx((k + 0.5) * np.pi / 40, abs=1e-14)
            assert vs[v].theta == pytest.approx(vs.theta_centres[l], abs=1e-14)


@pytest.mark.parametrize("n_phi,n_theta", [(40, 3), (7, 5), (3, 1)])
def test_local_axes_orthonormal_right_handed(n_phi, n_theta):
    """For every view, (e_t, e_r, e_a) is orthonormal and right-handed with e_a = e_t x e_r,
    e_t = u(phi, theta), e_r = (-sin phi, cos phi, 0) transaxial and e_a as in docs/physics.rst 1.1.
    1e-12: float64 trigonometry."""
    for view in ViewSet(n_phi, n_theta):
        p, t = view.phi, view.theta
        et, er, ea = view.direction, view.radial_axis, view.axial_axis
        m = np.stack([et, er, ea])
        np.testing.assert_allclose(m @ m.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(m) == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(np.cross(et, er), ea, atol=1e-12)
        np.testing.assert_allclose(et, _unit(p, t), atol=1e-12)
        np.testing.assert_allclose(er, [-np.sin(p), np.cos(p), 0.0], atol=1e-12)
        np.testing.assert_allclose(ea, [-np.sin(t) * np.cos(p), -np.sin(t) * np.sin(p), np.cos(t)],
                                   atol=1e-12)


def test_bin_directions_matches_independent_binning(rng):
    """Random directions inside the acceptance land in the bin computed from their azimuth and
    tilt (equal-width bins, docs/physics.rst 1.1); directions are drawn away from bin edges (>= 1e-6
    rad) so the expected bin is unambiguous."""
    vs = ViewSet()
    dphi, dth = np.pi / 40, np.deg2rad(20.0) / 3
    k = rng.integers(0, 40, 500)
    l = rng.integers(0, 3, 500)
    phi = (k + rng.uniform(1e-6, 1 - 1e-6, 500)) * dphi
    theta = -np.deg2rad(10.0) + (l + rng.uniform(1e-6, 1 - 1e-6, 500)) * dth
    scale = rng.uniform(0.5, 3.0, (500, 1))  # bin_directions must not need unit vectors
    v, flipped = vs.bin_directions(scale * _unit(phi, theta))
    np.testing.assert_array_equal(v, 3 * k + l)
    assert not flipped.any()


def test_bin_directions_canonicalises_negated_directions(rng):
    """-u is the same LOR as u: it must get the same view and flipped=True (docs/physics.rst 1.1:
    swap p1 and p2 so the azimuth lies in [0, pi))."""
    vs = ViewSet()
    phi = rng.uniform(1e-6, np.pi - 1e-6, 300)
    theta = rng.uniform(-np.deg2rad(9.99), np.deg2rad(9.99), 300)
    u = _unit(phi, theta)
    v_pos, f_pos = vs.bin_directions(u)
    v_neg, f_neg = vs.bin_directions(-u)
    np.testing.assert_array_equal(v_neg, v_pos)
    assert (v_pos >= 0).all()
    assert not f_pos.any()
    assert f_neg.all()


@pytest.mark.parametrize("u_neg", [(-1.0, 0.0, 0.0), (-1.0, -0.0, 0.0), (-2.0, 0.0, 0.1),
                                   (-2.0, 0.0, -0.1)])
def test_bin_directions_negation_on_the_zero_azimuth_edge(u_neg):
    """An LOR along the x axis written from +x to -x, e.g. p2 - p1 = (-600, 0, 0) with a +0.0
    y component, has arctan2 azimuth exactly +pi. Negated it is (+600, 0, 0), azimuth 0, so it must
    land in azimuth bin k = 0 -- the view of the canonical direction -- with flipped=True
    (docs/physics.rst 1.1). Exact-edge case of the canonicalisation; no tolerance involved."""
    vs = ViewSet()
    u_neg = np.array(u_neg)
    v_pos, f_pos = vs.bin_directions(-u_neg)  # the canonical direction, azimuth 0
    v_neg, f_neg = vs.bin_directions(u_neg)
    assert int(v_pos) // 3 == 0 and not bool(f_pos)
    assert bool(f_neg)
    assert int(v_neg) == int(v_pos), f"{u_neg.tolist()} binned to view {int(v_neg)}, its negation to {int(v_pos)}"


def test_bin_directions_rejects_tilts_outside_acceptance(rng):
    """Tilts beyond +-theta_max (10 deg) are outside every view: index -1, for u and for -u."""
    vs = ViewSet()
    phi = rng.uniform(0.01, np.pi - 0.01, 100)
    theta = rng.uniform(np.deg2rad(10.01), np.deg2rad(80.0), 100) * rng.choice([-1, 1], 100)
    u = _unit(phi, theta)
    assert (vs.bin_directions(u)[0] == -1).all()
    assert (vs.bin_directions(-u)[0] == -1).all()


def test_geometric_order_is_bit_reversed_permutation():
    """The visiting order is a permutation of all 120 views; azimuths start 0, 20, 10, 30, 5, 25
    (van der Corput, docs/physics.rst 1.9) and every azimuth visits its tilts as (0, +, -)."""
    vs = ViewSet()
    order = vs.geometric_order()
    assert sorted(order) == list(range(len(vs)))
    ks = [v // 3 for v in order[::3]]
    assert ks[:6] == [0, 20, 10, 30, 5, 25]
    for j in range(0, len(order), 3):
        k = order[j] // 3
        assert [order[j + i] // 3 for i in range(3)] == [k, k, k]
        thetas = [vs[order[j + i]].theta for i in range(3)]
        assert thetas[0] == pytest.approx(0.0, abs=1e-15)
        assert thetas[1] > 0 > thetas[2]


def test_geometric_order_other_sizes_is_permutation():
    """For n_phi that are not powers of two the order is still a permutation of every view."""
    for n_phi, n_theta in [(7, 1), (12, 3), (40, 5)]:
        vs = ViewSet(n_phi, n_theta)
        assert sorted(vs.geometric_order()) == list(range(n_phi * n_theta))
