"""Accuracy figures of DIRECT quoted in RESULTS.md, computed on the CPU (no timing):

* ``lowrank_kernel_error`` (section 2): the relative kernel error ||V - V_r||_F / ||V||_F of the rank-r
  truncated SVD of one untilted view's kernel table (phi = 2.25 deg, the first of 40 x 3 views) on the
  144 x 144 x 48 grid of 4 mm, float64, ranks 1-12, for the stress and the clinical kernel;
* ``randoms_from_delayeds`` (section 7): delayed coincidences simulated as uniform randoms on the
  default scanner, deposited into 8 x 3 views of a 32 x 32 x 8 grid of 12 mm, raw and smoothed with a
  40 mm FWHM Gaussian, against the analytic expected randoms: the RMS relative difference over the
  voxels where the expected randoms exceed 0.3 of their maximum (the CI test's measure), for 1e6 and
  3e6 delayeds.

    python benchmarks/direct_accuracy.py [--out benchmarks/results/direct_accuracy.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_device, stamp, write_records  # noqa: E402

from directpet.direct import (CylindricalScanner, SRKernel, ViewSet, randoms_background,  # noqa: E402
                              randoms_from_delayeds, simulate_randoms)
from directpet.direct.lowrank import relative_kernel_errors  # noqa: E402
from directpet.direct.lut import build_lut  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402


def lowrank_errors(max_rank=12):
    views = ViewSet(40, 3)
    view = views[views.index(0, 1)]                       # azimuth 2.25 deg, untilted
    out = []
    for name, kernel in (("stress", SRKernel.stress()), ("clinical", SRKernel.clinical())):
        values = build_lut(ImageGrid((48, 144, 144), 4.0), view, kernel).values.astype(np.float64)
        err = relative_kernel_errors(np.linalg.svd(values, compute_uv=False))
        out.append({"case": "lowrank_kernel_error", "kernel": name, "table_shape": list(values.shape),
                    "view_phi_deg": float(np.degrees(view.phi)), "view_theta_deg": float(np.degrees(view.theta)),
                    "rank": list(range(1, max_rank + 1)), "kernel_error": [float(e) for e in err[1:max_rank + 1]]})
        print(f"{name}: table {values.shape}; kernel error at rank 1..{max_rank}: "
              + ", ".join(f"{e:.2g}" for e in err[1:max_rank + 1]))
    return out


def randoms_errors(counts=(1_000_000, 3_000_000), fwhm_mm=40.0, seed=7):
    grid, views, scanner = ImageGrid((8, 32, 32), 12.0), ViewSet(8, 3), CylindricalScanner()
    out = []
    for n in counts:
        delayeds = simulate_randoms(scanner, n, seed=seed)
        raw = randoms_from_delayeds(delayeds, grid, views)
        smooth = randoms_from_delayeds(delayeds, grid, views, smooth_fwhm_mm=fwhm_mm)
        expected = randoms_background(grid, views, scanner, total=float(raw.sum()))
        m = expected > 0.3 * expected.max()

        def rms(b):
            return float(np.sqrt(np.mean(((b - expected)[m] / expected[m]) ** 2)))

        rec = {"case": "randoms_from_delayeds", "delayeds": n, "seed": seed, "grid": list(grid.shape),
               "voxel_mm": 12.0, "views": len(views), "smooth_fwhm_mm": fwhm_mm,
               "mean_expected_in_mask": float(expected[m].mean()), "rms_raw": rms(raw), "rms_smoothed": rms(smooth),
               "view_counts_kept": bool(np.allclose(smooth.sum(axis=(1, 2, 3)), raw.sum(axis=(1, 2, 3)), rtol=1e-5))}
        out.append(rec)
        print(f"{n:,} delayeds ({rec['mean_expected_in_mask']:.2f} expected per voxel in the mask): RMS vs expected "
              f"raw {rec['rms_raw']:.3f}, smoothed {rec['rms_smoothed']:.3f}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_accuracy.json"))
    args = ap.parse_args()
    records = [stamp(r, device=cpu_device()) for r in lowrank_errors() + randoms_errors()]
    write_records(records, args.out)


if __name__ == "__main__":
    main()
