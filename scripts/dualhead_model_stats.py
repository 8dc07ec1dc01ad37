"""Statistics of a dual-head patch model that decide how the default projectors can reuse what they
load and how much of their work is empty (issue 17). Weighted by each (class, plane) row's LORs:

* per row, the taps, the distinct cell offsets q, the distinct (r_y, r_z, q_y) and (r_y, q_y) tap lines
  and the spans of the rows' cell-offset boxes;
* per distinct cell offset q of a row, its taps and how many of its D rows r_y and D columns r_z hold a
  tap (the back projection stages a q's D x D weights densely);
* the back projection's steps (csrc/dualhead/tiles.hpp): per (plane, unit of 16 x 8 cells), the
  (class, sign) rows whose LORs reach the unit, how many of its four 4-row rounds each reaches, and the
  share of its cells;
* the forward's padded positions (csrc/dualhead/tiles.hpp: rows of pos_z + g positions, g the class's
  widest box in q_z; blocks of 2048): its tap work and blocks against those of unpadded rows;
* from the scanner's geometry alone, the forward's former tiles of 1024 unpadded positions, 256 threads x
  4 rounds (its geometry up to 0ce29f7, before padded positions and 8 rounds): the rounds of its warps
  left empty in each class's last tile.

    python scripts/dualhead_model_stats.py [MODEL.npz] [--skip-back]   # default: the full-size analytic model

--skip-back leaves out the back projection's steps (the slow count: a minute or more at full size).

The model is loaded from MODEL.npz when it exists, else built (on the GPU when there is one) and saved
there. Prints one line per statistic; benchmarks/results/ncu/issue17_dh_{fwd,back}_source_summary.json
keep the values cited in benchmarks/RESULTS.md.
"""

import os
import sys

import numpy as np

import directpet as dp
from directpet.dualhead import DualHeadScanner, PatchModel, build_patch_model


def main():
    skip_back = "--skip-back" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--skip-back"]
    path = args[0] if args else None
    if path and os.path.exists(path):
        model = PatchModel.load(path)
    else:
        model = build_patch_model(DualHeadScanner(), backend="cuda" if dp.cuda_device_count() > 0 else "cpu")
        if path:
            model.save(path)
    s = model.scanner
    D, P, K = s.voxels_per_crystal, s.n_planes, s.n_classes
    start = np.asarray(model.tap_start).astype(np.int64)
    taps = np.diff(start)                                          # taps per row (class-major, plane)
    lors = np.repeat(s.class_lor_counts(), P).astype(float)        # LORs per row (its class's)
    full = taps > 0
    weight = lors[full] / lors[full].sum()
    print(f"taps {start[-1]}, rows {K * P} ({full.sum()} with taps), "
          f"multiply-adds per full forward {float((taps * lors).sum()):.4e}")
    print(f"taps per row (LOR-weighted mean) {float(taps[full] @ weight):.2f}")
    row = np.repeat(np.arange(K * P), taps)
    dy = np.asarray(model.tap_dy).astype(np.int64)
    dz = np.asarray(model.tap_dz).astype(np.int64)
    q_y, q_z, r_y, r_z = dy // D, dz // D, dy % D, dz % D
    distinct = {}                           # distinct keys per row, over all rows
    for name, keys in (("distinct cell offsets q", (q_y, q_z)), ("distinct (r_y, r_z, q_y)", (r_y, r_z, q_y)),
                       ("distinct (r_y, q_y)", (r_y, q_y))):
        code = row.copy()
        for key in keys:                    # offsets and residues are below 4096
            code = code * 4096 + key
        distinct[name] = np.bincount(np.unique(code) // 4096 ** len(keys), minlength=K * P)
        print(f"{name} per row (LOR-weighted mean) {float(distinct[name][full] @ weight):.2f}")
    first = start[:-1][full]
    spans = {}
    for name, q in (("q_y", q_y), ("q_z", q_z)):
        span = spans[name] = np.maximum.reduceat(q, first) - np.minimum.reduceat(q, first)
        hist = np.bincount(span, weights=weight)
        print(f"box span {name} (cells - 1, LOR-weighted mean) {float(span @ weight):.2f}; "
              f"histogram {np.round(hist, 3).tolist()}")
    n_q = distinct["distinct cell offsets q"][full]
    cs = cell_residues(row, q_y, q_z, r_y, r_z, lors)
    print(f"per cell offset q (LOR-weighted mean): taps {cs['taps']:.2f} of {D * D}, rows r_y with a tap "
          f"{cs['rows']:.2f} of {D}, columns r_z with a tap {cs['cols']:.2f} of {D}, column hull {cs['hull']:.2f}; "
          f"distinct column hulls per row {cs['hulls_per_row']:.2f}")
    box = [f(q, first) for q in (q_y, q_z) for f in (np.minimum.reduceat, np.maximum.reduceat)]
    k_full = np.nonzero(full)[0] // P                              # the class of each row with taps
    if not skip_back:
        print_back_steps(back_steps(s, k_full, n_q, *box))
    fp = forward_padding(s, k_full, taps[full], spans["q_z"])
    print(f"forward padded positions: tap work / unpadded {fp['work_ratio']:.4f}; blocks of 2048 positions / "
          f"unpadded {fp['blocks_ratio']:.4f}")
    ft = forward_tiles(s)
    print(f"forward tiles of 1024 unpadded positions (256 threads x 4 rounds): {100 * ft['last_share']:.1f} % of the warps' 4-round slots lie in "
          f"classes' last tiles; slots / rounds holding a LOR {ft['slots_per_round']:.3f}")


def class_shapes(s):
    """Per class: its signs and its shift positions pos_y, pos_z (int64 arrays over all classes)."""
    a_y, a_z = s.class_of(np.arange(s.n_classes))
    pos_y, pos_z = s.n_y - a_y, s.n_z - a_z
    return s.class_lor_counts() // (pos_y * pos_z), pos_y, pos_z


def forward_padding(s, k, taps, span_z, lors_per_block=2048):
    """The default forward's padded positions for rows of classes k with `taps` taps and q_z box spans
    span_z (cells - 1): each class's rows of pos_z + g positions, g its widest span; the multiply-adds
    (every position of a row times its taps, signs included) and the blocks of lors_per_block positions,
    each as a ratio to unpadded rows."""
    g = np.zeros(s.n_classes, dtype=np.int64)
    np.maximum.at(g, k, span_z)
    signs, pos_y, pos_z = class_shapes(s)
    lor_taps = np.bincount(k, weights=taps, minlength=s.n_classes) * signs * pos_y
    blocks = lambda width: float(signs @ -(-(pos_y * width) // lors_per_block))
    return dict(work_ratio=float(lor_taps @ (pos_z + g)) / float(lor_taps @ pos_z),
                blocks_ratio=blocks(pos_z + g) / blocks(pos_z))


def forward_tiles(s, lors_per_block=1024, threads=256, rounds=4):
    """The default forward's former tiles (csrc/dualhead/tiles.hpp up to 0ce29f7: a block held lors_per_block
    consecutive positions of one class and sign, position f0 + r * threads + t in round r of thread t): for the
    warps that hold a LOR, their 4-round slots, the share of them in each class's last tile, and the
    slots per round that holds a LOR. Narrow classes given fewer LORs per block are not modelled."""
    signs, pos_y, pos_z = class_shapes(s)
    n_pos = pos_y * pos_z
    full, rest = np.divmod(n_pos, lors_per_block)
    warps = threads // 32
    first = 32 * np.arange(warps)[:, None] + threads * np.arange(rounds)[None, :]   # [warp, round]
    held = (first[None] < rest[:, None, None]).sum(axis=2)                            # rounds per warp, last tile
    busy = held > 0
    slots_full = full * warps * rounds
    slots_last = rounds * busy.sum(axis=1)
    used = full * warps * rounds + held.sum(axis=1)
    slots = float(signs @ (slots_full + slots_last))
    return dict(last_share=float(signs @ slots_last) / slots, slots_per_round=slots / float(signs @ used))


def cell_residues(row, q_y, q_z, r_y, r_z, lors):
    """Per distinct (row, q) of the taps: the taps, the rows r_y and columns r_z of the D x D residue block
    that hold one, and the width of the columns' hull (lowest to highest column with a tap); per row, its
    distinct hulls (the runs that a back projection ordered by hull would meet). Means weighted by the
    row's LORs (lors, per row)."""
    cell, inv = np.unique((row * 4096 + q_y) * 4096 + q_z, return_inverse=True)
    rows = np.zeros(cell.size, dtype=np.int64)
    cols = np.zeros(cell.size, dtype=np.int64)
    np.bitwise_or.at(rows, inv, np.left_shift(1, r_y))
    np.bitwise_or.at(cols, inv, np.left_shift(1, r_z))
    crow = cell // 4096 ** 2                # the row of each cell
    weight = lors[crow]
    bits = lambda m: np.unpackbits(m.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
    mean = lambda v: float(v @ weight / weight.sum())
    lo = np.log2(cols & -cols).astype(np.int64)
    hi = np.log2(cols).astype(np.int64)
    hulls = np.bincount(np.unique((crow * 64 + lo) * 64 + hi) // 64 ** 2)
    listed = np.unique(crow)
    return dict(taps=mean(np.bincount(inv)), rows=mean(bits(rows)), cols=mean(bits(cols)), hull=mean(hi - lo + 1),
                hulls_per_row=float(hulls[listed] @ lors[listed] / lors[listed].sum()))


def back_steps(s, k, n_q, y_lo, y_hi, z_lo, z_hi, unit_rows=16, unit_cols=8, round_rows=4):
    """The default back projection's steps for rows of classes k with n_q distinct cell offsets and
    (+,+) boxes [y_lo, y_hi] x [z_lo, z_hi] (cells): a step is a (row, sign) whose LORs reach a unit."""
    a_y, a_z = s.class_of(k)
    pos_y, pos_z = s.n_y - a_y, s.n_z - a_z
    steps, q_slots, q_rounds, cells = 0, 0.0, np.zeros(5), 0.0
    for s_y in (1, -1):
        for s_z in (1, -1):
            valid = ((s_y > 0) | (a_y > 0)) & ((s_z > 0) | (a_z > 0))
            # the rows (cells) the signed orientation's LORs reach: positions + signed box
            y0 = np.where(s_y > 0, y_lo, a_y - y_hi)
            y1 = pos_y - 1 + np.where(s_y > 0, y_hi, a_y - y_lo)
            z0 = np.where(s_z > 0, z_lo, a_z - z_hi)
            z1 = pos_z - 1 + np.where(s_z > 0, z_hi, a_z - z_lo)
            for cy_a in range(0, s.n_y, unit_rows):
                cy_b = min(cy_a + unit_rows, s.n_y) - 1
                for cz_a in range(0, s.n_z, unit_cols):
                    cz_b = min(cz_a + unit_cols, s.n_z) - 1
                    hit = valid & (y0 <= cy_b) & (y1 >= cy_a) & (z0 <= cz_b) & (z1 >= cz_a)
                    if not hit.any():
                        continue
                    h0, h1, n = y0[hit], y1[hit], n_q[hit]
                    reached = np.zeros(h0.size, dtype=np.int64)
                    for ra in range(cy_a, cy_b + 1, round_rows):
                        reached += (h0 <= min(ra + round_rows - 1, cy_b)) & (h1 >= ra)
                    steps += h0.size
                    q_slots += float(n.sum())
                    q_rounds += np.bincount(reached, weights=n, minlength=5)
                    rows = np.minimum(h1, cy_b) - np.maximum(h0, cy_a) + 1
                    cols = np.minimum(z1[hit], cz_b) - np.maximum(z0[hit], cz_a) + 1
                    cells += float((n * rows * cols).sum())
    n_units = s.n_planes * -(-s.n_y // unit_rows) * -(-s.n_z // unit_cols)
    return dict(steps=steps, steps_per_unit=steps / n_units, mean_q=q_slots / steps,
                rounds_share=q_rounds / q_rounds.sum(), fma_ratio=4 * q_slots / float(q_rounds @ np.arange(5)),
                cells_share=cells / (q_slots * unit_rows * unit_cols))


def print_back_steps(st):
    print(f"back steps {st['steps']} ({st['steps_per_unit']:.1f} per plane and unit), mean q per step {st['mean_q']:.2f}")
    print(f"back steps by rounds reached 0..4 (q-weighted shares) {np.round(st['rounds_share'], 3).tolist()}; "
          f"FMAs of all four rounds / of the rounds reached {st['fma_ratio']:.3f}")
    print(f"cells reached per step and q / the unit's cells {st['cells_share']:.3f}")


if __name__ == "__main__":
    main()
