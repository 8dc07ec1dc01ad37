"""FIRST: the invariants of a rotating scanner at the paper's size (issue 16 section 1), measured.

For each method at full size (image 175 x 175 x 59, sinogram 130 x 30 x 30 x 175):

* ``axis_spread``: the per-angle total of a single voxel on the rotation axis (central slice), over
  every ring difference, ``(max - min) / mean`` over the 130 angles; every angle sees it the same way.
* ``inplane_spread``: the largest such spread of voxels at 8, 18 and 30 mm from the axis in the
  direct (delta = 0) sinograms, projected with the tube replaced along the LOR by its midpoint value
  (so that only the projector's sampling can make the total depend on the angle).
* ``sensitivity_dev``: the back projection of ones (a uniform scanner's sensitivity image) against a
  radial fit (a polynomial of degree 4 in r per slice: the virtual heads' sensitivity has a |r| cusp
  on the axis, where the farther head limits the oblique acceptance) inside the field of view
  (r < c - J - 1): the largest relative deviation over all slices, and ``sensitivity_centre``: the
  centre voxel of the central slice over the fit there.

``--off-axis`` adds, on the CPU, what the per-angle totals of off-axis voxels do over every ring
difference (the model's virtual heads: the oblique acceptance follows the voxel's distance to each
head) next to the event Monte Carlo of the real, 89.6 mm wide heads (which also see an off-axis
voxel differently at each angle: the heads' width limits the in-plane obliquities), with 26 angles:
``model_spread`` and ``mc_spread`` per radius, and ``mc_noise`` (the spread expected from Poisson
noise alone, 4 sigma of the mean count per angle).

Run with the current tree (``python benchmarks/first_invariants.py``) and with a build of an
earlier commit for a before/after comparison (set ``DIRECTPET_COMMIT`` to that commit: the records
carry it). Writes JSON records (``--out``).

    python benchmarks/first_invariants.py [--backend cpu|cuda] [--methods fast,faithful] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import numpy as np

from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table

from _common import cpu_name, print_table, stamp, write_records


def per_angle_totals(P, iz, iy, ix, direct_only):
    s = P.scanner
    x = np.zeros(s.grid.shape, np.float32)
    x[iz, iy, ix] = 1.0
    y = P.forward(x)
    y = np.asarray(y.get() if hasattr(y, "get") else y, dtype=np.float64)
    if direct_only:
        y = y[:, np.arange(s.n_rows), np.arange(s.n_rows)]
    t = y.reshape(s.n_angles, -1).sum(axis=1)
    return float((t.max() - t.min()) / t.mean())


def sensitivity_deviation(P):
    s = P.scanner
    sens = P.adjoint(np.ones(s.sinogram_shape, np.float32))
    sens = np.asarray(sens.get() if hasattr(sens, "get") else sens, dtype=np.float64)
    c = 0.5 * (s.n_radial - 1)
    yy, xx = np.indices((s.n_radial, s.n_radial)) - c
    r = np.hypot(xx, yy).ravel()
    fov = r < c - P.table.J - 1
    worst, centre = 0.0, None
    for z, plane in enumerate(sens):
        v = plane.ravel()[fov]
        coef = np.polyfit(r[fov], v, 4)
        worst = max(worst, float(np.abs(v / np.polyval(coef, r[fov]) - 1).max()))
        if z == s.n_slices // 2:
            centre = float(plane[s.n_radial // 2, s.n_radial // 2] / np.polyval(coef, 0.0))
    return worst, centre


def off_axis_records(backend):
    """Per-angle spreads of single voxels at 0, 10, 20 and 30 mm on the x axis: model vs Monte Carlo."""
    from directpet.first.monte_carlo import direction_band, simulate

    s = RotatingScanner(n_angles=26)
    P = SuperLORProjector(build_super_lor_table(s), "fast", backend=backend)
    c, zc = s.n_radial // 2, s.n_slices // 2
    out = []
    for dx in (0, 25, 50, 75):
        x = np.zeros(s.grid.shape, np.float32)
        x[zc, c, c + dx] = 1.0
        model = per_angle_totals(P, zc, c, c + dx, direct_only=False)
        n_decays = round(3_000_000 / direction_band(s, x)["band_fraction"])     # 3e6 followed (band) decays
        y, _ = simulate(s, x, n_decays, seed=1, backend=backend)
        y = np.asarray(y.get() if hasattr(y, "get") else y, dtype=np.float64)
        t = y.reshape(s.n_angles, -1).sum(axis=1)
        out.append({"case": "off_axis", "radius_mm": dx * s.radial_bin_mm, "n_angles": s.n_angles,
                    "model_spread": model, "mc_spread": float((t.max() - t.min()) / t.mean()),
                    "mc_counts_per_angle": float(t.mean()), "mc_noise": float(4 / np.sqrt(t.mean()))})
        print(out[-1], flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--methods", default=None, help="comma-separated (default: all on cuda, fast on cpu)")
    ap.add_argument("--off-axis", action="store_true", help="also the off-axis model vs Monte Carlo spreads")
    ap.add_argument("--only-off-axis", action="store_true", help="only those")
    ap.add_argument("--label", default=None, help="a label stored in every record (e.g. before / after a change)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "first_invariants.json"))
    args = ap.parse_args()
    methods = (args.methods or ("fast,matched,faithful" if args.backend == "cuda" else "fast")).split(",")
    s = RotatingScanner()
    table = build_super_lor_table(s)
    mid = table.values[:, s.n_radial // 2]
    uniform = replace(table, values=np.repeat(mid[:, None], s.n_radial, axis=1))
    c, zc = s.n_radial // 2, s.n_slices // 2
    rows, records = [], []
    device = None if args.backend == "cuda" else f"{cpu_name()} ({os.cpu_count()} CPUs)"
    if args.off_axis or args.only_off_axis:
        records += [stamp(r, device=device) for r in off_axis_records(args.backend)]
    if args.only_off_axis:
        methods = []
    for method in methods:
        P = SuperLORProjector(table, method, backend=args.backend)
        U = SuperLORProjector(uniform, method, backend=args.backend)
        axis = per_angle_totals(P, zc, c, c, direct_only=False)
        inplane = max(per_angle_totals(U, zc + dz, c + dy, c + dx, direct_only=True)
                      for dz, dy, dx in ((1, 14, 14), (0, -45, 0), (1, 53, -53)))   # 8, 18, 30 mm
        dev, centre = sensitivity_deviation(P)
        row = {"method": method, "backend": args.backend, "axis_spread": axis, "inplane_spread": inplane,
               "sensitivity_dev": dev, "sensitivity_centre": centre}
        rows.append(row)
        records.append(stamp(dict(row, case="full"), device=device))
        print(row, flush=True)
    if rows:
        print_table(rows, ["method", "backend", "axis_spread", "inplane_spread", "sensitivity_dev", "sensitivity_centre"])
    if args.label is not None:
        for r in records:
            r["label"] = args.label
    write_records(records, args.out)


if __name__ == "__main__":
    main()
