"""Deposition into histo-images, correction histo-images and HistoImageData storage."""

import numpy as np
import pytest

from directpet.direct import (CylindricalScanner, EventBatch, HistoImageData, SRKernel, ViewSet, bin_views, deposit,
                              randoms_background, sensitivity_attenuation, simulate_events, simulate_histo_images,
                              simulate_randoms)
from directpet.direct.model import C_MM_PER_PS
from directpet.geometry import ImageGrid
from directpet.sim import WaterCylinder, point_source_phantom, sphere_phantom

GRID = ImageGrid((8, 32, 32), 8.0)
SCANNER = CylindricalScanner()
MU = 0.0096


def _unit(phi_deg, theta_deg):
    p, t = np.deg2rad(phi_deg), np.deg2rad(theta_deg)
    return np.array([np.cos(t) * np.cos(p), np.cos(t) * np.sin(p), np.sin(t)])


def _event_at(grid, ijk, phi_deg, theta_deg):
    """An event whose MLP is the centre of voxel ijk = (iz, iy, ix), LOR direction (phi, theta).

    The endpoints are placed asymmetrically (300 mm behind, 500 mm ahead) so that the midpoint is
    not the MLP: dt must move it back by 100 mm."""
    iz, iy, ix = ijk
    r = np.array([grid.centres(2)[ix], grid.centres(1)[iy], grid.centres(0)[iz]])
    u = _unit(phi_deg, theta_deg)
    p1, p2 = r - 300 * u, r + 500 * u
    dt = -2 * 100 / C_MM_PER_PS            # r_hat = m + (c/2) dt u12, m = r + 100 u
    return p1, p2, dt


def _batch(events):
    p1 = np.array([e[0] for e in events], np.float32)
    p2 = np.array([e[1] for e in events], np.float32)
    dt = np.array([e[2] for e in events], np.float32)
    return EventBatch(p1, p2, dt)


def test_bin_views_matches_viewset():
    vs = ViewSet(6, 3)
    rng = np.random.default_rng(0)
    u = rng.standard_normal((5000, 3))
    u[:, 2] *= 0.15
    p1 = rng.uniform(-100, 100, (5000, 3))
    v, f = bin_views(p1, p1 + u, vs)
    v_ref, f_ref = vs.bin_directions(u)
    np.testing.assert_array_equal(v, v_ref)
    np.testing.assert_array_equal(f, f_ref)


@pytest.mark.parametrize("vs_shape", [(8, 1), (6, 3)])
def test_hand_made_events_land_in_known_voxel_and_view(vs_shape):
    vs = ViewSet(*vs_shape)
    cases = [  # (voxel, phi, theta, expected azimuth bin, expected tilt bin (3 bins))
        ((2, 20, 9), 100.0, 0.0, None, 1),
        ((5, 3, 30), 280.0, 0.0, None, 1),     # azimuth in [pi, 2 pi): canonical flip to 100 deg
        ((0, 16, 16), 10.0, 5.0, None, 2),
        ((7, 31, 0), 190.0, -5.0, None, 2),    # flipped: azimuth 10 deg, tilt +5 deg
        ((4, 10, 22), 359.0, 0.0, None, 1),    # flipped to 179 deg: the last azimuth bin
    ]
    events = [_event_at(GRID, c[0], c[1], c[2]) for c in cases]
    h = deposit(_batch(events), GRID, vs)
    assert h.shape == (len(vs),) + GRID.shape and h.dtype == np.float32
    assert h.sum() == len(cases)
    for (ijk, phi, theta, _, l3) in cases:
        phi_c = phi % 180.0
        k = int(phi_c / (180.0 / vs.n_phi))
        l = 0 if vs.n_theta == 1 else l3
        v = vs.index(k, l)
        assert h[(v,) + ijk] == 1, (ijk, phi, theta)


def test_events_outside_acceptance_or_grid_are_dropped():
    vs = ViewSet(8, 1)
    inside = _event_at(GRID, (3, 3, 3), 45.0, 0.0)
    steep = _event_at(GRID, (3, 3, 3), 45.0, 15.0)
    p1, p2, dt = _event_at(GRID, (3, 3, 3), 45.0, 0.0)
    far = (p1 + np.array([0, 0, 200.0]), p2 + np.array([0, 0, 200.0]), dt)   # MLP at z = 180 mm
    h, st = deposit(_batch([inside, steep, far]), GRID, vs, return_stats=True)
    assert h.sum() == 1
    assert (st.n_events, st.n_deposited, st.n_outside_views, st.n_outside_grid) == (3, 1, 1, 1)


def test_trilinear_splits_between_voxel_centres():
    vs = ViewSet(8, 1)
    p1, p2, dt = _event_at(GRID, (3, 10, 10), 30.0, 0.0)
    shift = np.array([4.0, 0.0, 0.0])          # half a voxel in x: between ix = 10 and 11
    h = deposit(_batch([(p1 + shift, p2 + shift, dt)]), GRID, vs, mode="trilinear")
    v = vs.bin_directions(_unit(30.0, 0.0))[0]
    np.testing.assert_allclose(h[v, 3, 10, 10:12], [0.5, 0.5], atol=1e-5)
    assert h.sum() == pytest.approx(1.0)


def test_deposited_counts_equal_events_inside_grid():
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=200, length_mm=120, sphere_radius_mm=50,
                             sphere_diameter_mm=16)
    vs = ViewSet(6, 3)
    batches = list(simulate_events(SCANNER, info, 30_000, chunk_size=40_000, seed=1, randoms_fraction=0.1,
                                   progress=False))
    h, st = deposit(iter(batches), GRID, vs, return_stats=True)
    b = EventBatch.concatenate(batches)
    r = b.most_likely_points()
    iz, iy, ix = GRID.index_of(r[:, 2], r[:, 1], r[:, 0])
    inside = (iz >= 0) & (iz < 8) & (iy >= 0) & (iy < 32) & (ix >= 0) & (ix < 32)
    in_view = vs.bin_directions(b.p2.astype(float) - b.p1.astype(float))[0] >= 0
    assert in_view.all()                          # the simulation respects the acceptance
    assert float(h.sum(dtype=np.float64)) == st.n_deposited == int(inside.sum())
    assert st.n_randoms_deposited == int((inside & b.is_random).sum())
    assert st.n_events == 30_000


def test_histo_image_data_npz_round_trip(tmp_path):
    vs = ViewSet(4, 3, 12.0)
    rng = np.random.default_rng(2)
    shape = (len(vs),) + GRID.shape
    arrays = [rng.random(shape, dtype=np.float32) + 0.1 for _ in range(3)]
    for kernel in (SRKernel.clinical("variant1"), SRKernel.stress(), SRKernel.invariant(350.0, 4.0)):
        data = HistoImageData(*arrays[:1], GRID, vs, arrays[1], arrays[2], kernel,
                              CylindricalScanner(tof_fwhm_ps=350.0), {"counts": 12, "note": "x"})
        path = tmp_path / "data.npz"
        data.save(path)
        back = HistoImageData.load(path)
        for name in ("prompts", "factors", "background"):
            np.testing.assert_array_equal(getattr(back, name), getattr(data, name))
        assert back.grid == GRID and back.kernel == kernel and back.scanner == data.scanner
        assert (back.viewset.n_phi, back.viewset.n_theta) == (4, 3)
        assert back.viewset.theta_max == pytest.approx(vs.theta_max)
        assert back.meta == data.meta
    bare = HistoImageData(arrays[0], GRID)
    bare.save(tmp_path / "bare.npz", compress=True)
    for xp in (None, np, "numpy"):
        back = HistoImageData.load(tmp_path / "bare.npz", xp=xp)
        assert back.factors is None and back.background is None and back.viewset is None and back.kernel is None
        assert back.scanner is None and isinstance(back.prompts, np.ndarray)
        np.testing.assert_array_equal(back.prompts, arrays[0])
    with pytest.raises(TypeError, match="xp"):
        HistoImageData.load(tmp_path / "bare.npz", xp="torch")
    with pytest.raises(TypeError):
        HistoImageData.load(tmp_path / "bare.npz", np)                  # xp is keyword-only
    with pytest.raises(ValueError, match="prompts"):
        HistoImageData(arrays[0][:, :4], GRID)


def test_sensitivity_attenuation_central_voxel():
    grid = ImageGrid((9, 33, 33), 8.0)             # a voxel centre at the origin
    water = WaterCylinder(175.0, 250.0)
    _, info = point_source_phantom(grid, [(0.0, 0.0, 0.0)], attenuation=water)
    centre = (4, 16, 16)
    s = sensitivity_attenuation(grid, ViewSet(8, 1), info, SCANNER)
    assert s.shape == (8,) + grid.shape and s.dtype == np.float32
    np.testing.assert_allclose(s[(slice(None),) + centre], np.exp(-MU * 350.0), rtol=1e-5)

    vs = ViewSet(6, 3)
    s = sensitivity_attenuation(grid, vs, info, SCANNER)
    n = sensitivity_attenuation(grid, vs, None, SCANNER)          # geometric part only
    te = vs.theta_edges
    omega = np.sin(te[1:]) - np.sin(te[:-1])
    for v, view in enumerate(vs):
        n_v = n[(v,) + centre]
        # The centre sees the whole cell: n_v is its solid angle over the largest cell's.
        assert n_v == pytest.approx(omega[v % 3] / omega.max(), rel=1e-5)
        assert s[(v,) + centre] == pytest.approx(n_v * np.exp(-MU * 350.0 / np.cos(view.theta)), rel=1e-5)
    assert np.all(n <= 1.0 + 1e-6) and np.all(s <= n + 1e-7)


def test_geometric_sensitivity_falls_at_the_axial_edge():
    grid = ImageGrid((13, 3, 3), (20.0, 8.0, 8.0))  # z centres -120 ... 120 mm
    vs = ViewSet(4, 3)
    n = sensitivity_attenuation(grid, vs, None, SCANNER)
    te = vs.theta_edges
    omega_max = np.sin(te[2]) - np.sin(te[1])
    for iz in (6, 9, 11, 12):
        # On the axis one photon of every LOR goes up: accepted iff R |tan(theta)| <= h - |z|.
        z = abs(grid.centres(0)[iz])
        t = np.arctan((SCANNER.half_length_mm - z) / SCANNER.radius_mm)
        for l in range(3):
            lo, hi = max(te[l], -t), min(te[l + 1], t)
            exact = max(0.0, np.sin(hi) - np.sin(lo)) / omega_max
            assert n[vs.index(1, l), iz, 1, 1] == pytest.approx(exact, abs=2e-3), (iz, l)
    assert n[vs.index(0, 2), -1, 1, 1] == 0.0 and n[vs.index(0, 1), -1, 1, 1] > 0.1


def test_randoms_background_matches_simulated_randoms():
    vs = ViewSet(4, 3)
    r = simulate_randoms(SCANNER, 600_000, seed=3)
    h, st = deposit(r, GRID, vs, return_stats=True)
    b = randoms_background(GRID, vs, SCANNER, total=st.n_randoms_deposited)
    assert b.sum() == pytest.approx(st.n_randoms_deposited, rel=1e-4)
    per_view = h.sum(axis=(1, 2, 3)) / h.sum()
    np.testing.assert_allclose(b.sum(axis=(1, 2, 3)) / b.sum(), per_view, rtol=0.04)
    # Radial shape (summed over views and z) in 4 rings.
    rad = np.hypot(*np.meshgrid(GRID.centres(1), GRID.centres(2), indexing="ij"))
    ring = np.minimum((rad / 40).astype(int), 3)
    hs = np.bincount(ring.ravel(), h.sum(axis=(0, 1)).ravel()) / ring.size
    bs = np.bincount(ring.ravel(), b.sum(axis=(0, 1)).ravel()) / ring.size
    np.testing.assert_allclose(bs / bs.sum(), hs / hs.sum(), rtol=0.04)


def test_simulate_histo_images_with_corrections():
    _, info = sphere_phantom(GRID, cylinder_diameter_mm=200, length_mm=120, n_spheres=0)
    vs = ViewSet(4, 1)
    data = simulate_histo_images(SCANNER, info, 20_000, grid=GRID, viewset=vs, randoms_fraction=0.2, seed=4,
                                 progress=False)
    assert data.factors.shape == data.prompts.shape and data.background is not None
    assert data.background.sum() == pytest.approx(data.meta["n_randoms_deposited"], rel=1e-4)
    assert data.prompts.sum() == data.meta["n_deposited"]
    assert data.kernel == SCANNER.kernel()
