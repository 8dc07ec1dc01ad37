"""scripts/dualhead_model_stats.py's counts that benchmarks/RESULTS.md cites: the default back
projection's steps, against a scalar walk over units, rows, signs and rounds written from
csrc/dualhead/tiles.hpp's definitions (16 x 8-cell units of four 4-row rounds; a (class, sign) row
reaches the cells positions + signed box), and the residues of each cell offset, against a count per
(row, cell)."""

import importlib.util
import os

import numpy as np
import pytest

from directpet.dualhead import DualHeadScanner, build_patch_model

SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, "scripts", "dualhead_model_stats.py")


@pytest.fixture(scope="module")
def stats():
    spec = importlib.util.spec_from_file_location("dualhead_model_stats", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scalar_steps(s, rows):
    """The same statistics, one (row, sign, unit, round) at a time. rows: (k, n_q, y_lo, y_hi, z_lo, z_hi)."""
    steps, q_slots, q_rounds, cells = 0, 0, [0] * 5, 0
    for k, n_q, y_lo, y_hi, z_lo, z_hi in rows:
        a_y, a_z = divmod(k, s.n_z)
        for s_y, s_z in s.class_signs(k):
            by = (y_lo, y_hi) if s_y > 0 else (a_y - y_hi, a_y - y_lo)
            bz = (z_lo, z_hi) if s_z > 0 else (a_z - z_hi, a_z - z_lo)
            reach_y = (by[0], s.n_y - a_y - 1 + by[1])
            reach_z = (bz[0], s.n_z - a_z - 1 + bz[1])
            for cy in range(0, s.n_y, 16):
                for cz in range(0, s.n_z, 8):
                    unit_y = range(cy, min(cy + 16, s.n_y))
                    unit_z = range(cz, min(cz + 8, s.n_z))
                    ys = [y for y in unit_y if reach_y[0] <= y <= reach_y[1]]
                    zs = [z for z in unit_z if reach_z[0] <= z <= reach_z[1]]
                    if not ys or not zs:
                        continue
                    rounds = {(y - cy) // 4 for y in ys}
                    steps += 1
                    q_slots += n_q
                    q_rounds[len(rounds)] += n_q
                    cells += n_q * len(ys) * len(zs)
    return steps, q_slots, q_rounds, cells


@pytest.fixture(scope="module")
def small_model():
    """A small scanner and its model's taps: (scanner, tap_start, tap_dy, tap_dz) as int64 arrays."""
    s = DualHeadScanner.small(n_y=21, n_z=11)       # two units in y (16 + 5 rows: a clipped last round)
    model = build_patch_model(s, backend="cpu")
    return (s,) + tuple(np.asarray(a).astype(np.int64) for a in (model.tap_start, model.tap_dy, model.tap_dz))


def test_cell_residues_match_a_count_per_cell(stats, small_model):
    s, start, dy, dz = small_model
    D, P = s.voxels_per_crystal, s.n_planes
    row = np.repeat(np.arange(s.n_classes * P), np.diff(start))
    lors = np.repeat(s.class_lor_counts(), P).astype(float)
    cells = {}
    for r, y, z in zip(row.tolist(), dy.tolist(), dz.tolist()):
        cell = cells.setdefault((r, y // D, z // D), [0, set(), set()])   # taps, rows r_y, columns r_z
        cell[0] += 1
        cell[1].add(y % D)
        cell[2].add(z % D)
    w = np.array([lors[r] for r, _, _ in cells])
    expect = {name: float(np.array([c[i] if i == 0 else len(c[i]) for c in cells.values()]) @ w / w.sum())
              for i, name in enumerate(("taps", "rows", "cols"))}
    expect["hull"] = float(np.array([max(c[2]) - min(c[2]) + 1 for c in cells.values()]) @ w / w.sum())
    hulls = {}
    for (r, _, _), c in cells.items():
        hulls.setdefault(r, set()).add((min(c[2]), max(c[2])))
    w_rows = np.array([lors[r] for r in hulls])
    expect["hulls_per_row"] = float(np.array([len(h) for h in hulls.values()]) @ w_rows / w_rows.sum())
    got = stats.cell_residues(row, dy // D, dz // D, dy % D, dz % D, lors)
    for name in expect:
        assert got[name] == pytest.approx(expect[name], rel=1e-12)
    assert got["hull"] > 1 and got["hulls_per_row"] > 1     # partly filled cells, rows of several hulls
    assert 1 < got["rows"] < D and 1 < got["cols"] < D     # some cells partly filled, not a trivial case


def test_back_steps_match_a_scalar_walk(stats, small_model):
    s, start, dy, dz = small_model
    D, P = s.voxels_per_crystal, s.n_planes
    rows = []
    for r in range(s.n_classes * P):
        qy, qz = dy[start[r]:start[r + 1]] // D, dz[start[r]:start[r + 1]] // D
        if qy.size:
            rows.append((r // P, len(set(zip(qy.tolist(), qz.tolist()))), qy.min(), qy.max(), qz.min(), qz.max()))
    assert len(rows) > 100
    steps, q_slots, q_rounds, cells = scalar_steps(s, rows)
    k, n_q, y_lo, y_hi, z_lo, z_hi = (np.array(c) for c in zip(*rows))
    got = stats.back_steps(s, k, n_q, y_lo, y_hi, z_lo, z_hi)
    assert got["steps"] == steps
    assert got["mean_q"] == pytest.approx(q_slots / steps, rel=1e-12)
    np.testing.assert_allclose(got["rounds_share"], np.array(q_rounds) / sum(q_rounds), rtol=1e-12)
    assert got["cells_share"] == pytest.approx(cells / (q_slots * 128), rel=1e-12)
    assert got["fma_ratio"] == pytest.approx(4 * q_slots / sum(n * q for n, q in enumerate(q_rounds)), rel=1e-12)
    # the small scanner has steps of one to four rounds, so the shares are not a trivial split
    assert min(q_rounds[1:]) > 0


def test_forward_tiles_match_a_count_per_warp(stats):
    s = DualHeadScanner.small(n_y=40, n_z=30)       # the widest classes span two tiles of 1024 positions
    slots = last = used = 0
    for k in range(s.n_classes):
        a_y, a_z = divmod(k, s.n_z)
        n_pos, n_signs = (s.n_y - a_y) * (s.n_z - a_z), len(s.class_signs(k))
        full, rest = divmod(n_pos, 1024)
        slots += n_signs * 32 * full
        used += n_signs * 32 * full
        for warp in range(8):
            held = sum(1 for r in range(4) if 256 * r + 32 * warp < rest)
            if held:
                slots += n_signs * 4
                last += n_signs * 4
                used += n_signs * held
    got = stats.forward_tiles(s)
    assert got["last_share"] == pytest.approx(last / slots, rel=1e-12)
    assert got["slots_per_round"] == pytest.approx(slots / used, rel=1e-12)
    assert 0 < got["last_share"] < 1 and got["slots_per_round"] > 1


def test_forward_padding_matches_a_count_per_class(stats, small_model):
    s, start, dy, dz = small_model
    D = s.voxels_per_crystal
    padded = unpadded = blocks_padded = blocks_unpadded = 0
    k_rows, taps, spans = [], [], []
    for k in range(s.n_classes):
        a_y, a_z = divmod(k, s.n_z)
        pos_y, pos_z, n_signs = s.n_y - a_y, s.n_z - a_z, len(s.class_signs(k))
        g, class_taps = 0, 0
        for p in range(s.n_planes):
            row = k * s.n_planes + p
            q_z = dz[start[row]:start[row + 1]] // D
            if q_z.size:
                g = max(g, int(q_z.max() - q_z.min()))
                class_taps += q_z.size
                k_rows.append(k)
                taps.append(q_z.size)
                spans.append(int(q_z.max() - q_z.min()))
        padded += class_taps * n_signs * pos_y * (pos_z + g)
        unpadded += class_taps * n_signs * pos_y * pos_z
        blocks_padded += n_signs * -(-(pos_y * (pos_z + g)) // 2048)
        blocks_unpadded += n_signs * -(-(pos_y * pos_z) // 2048)
    got = stats.forward_padding(s, np.array(k_rows), np.array(taps), np.array(spans))
    assert got["work_ratio"] == pytest.approx(padded / unpadded, rel=1e-12)
    assert got["blocks_ratio"] == pytest.approx(blocks_padded / blocks_unpadded, rel=1e-12)
    assert got["work_ratio"] > 1
