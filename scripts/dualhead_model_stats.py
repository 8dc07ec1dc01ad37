"""Statistics of a dual-head patch model that decide how a projector can reuse what it loads (issue 17):
per (class, plane) row, weighted by the row's LORs, the taps, the distinct cell offsets q, the distinct
(r_y, r_z, q_y) and (r_y, q_y) tap lines, and the spans of the rows' cell-offset boxes.

    python scripts/dualhead_model_stats.py [MODEL.npz]     # default: the full-size analytic model

The model is loaded from MODEL.npz when it exists, else built (on the GPU when there is one) and saved
there. Prints one line per statistic; benchmarks/results/ncu/issue17_dh_fwd_source_summary.json keeps
the full-size values.
"""

import os
import sys

import numpy as np

import directpet as dp
from directpet.dualhead import DualHeadScanner, PatchModel, build_patch_model


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else None
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
    for name, keys in (("distinct cell offsets q", (q_y, q_z)), ("distinct (r_y, r_z, q_y)", (r_y, r_z, q_y)),
                       ("distinct (r_y, q_y)", (r_y, q_y))):
        code = row.copy()
        for key in keys:                    # offsets and residues are below 4096
            code = code * 4096 + key
        count = np.bincount(np.unique(code) // 4096 ** len(keys), minlength=K * P)
        print(f"{name} per row (LOR-weighted mean) {float(count[full] @ weight):.2f}")
    first = start[:-1][full]
    for name, q in (("q_y", q_y), ("q_z", q_z)):
        span = np.maximum.reduceat(q, first) - np.minimum.reduceat(q, first)
        hist = np.bincount(span, weights=weight)
        print(f"box span {name} (cells - 1, LOR-weighted mean) {float(span @ weight):.2f}; "
              f"histogram {np.round(hist, 3).tolist()}")


if __name__ == "__main__":
    main()
