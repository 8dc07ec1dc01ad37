"""Attenuation histo-images from a 3D attenuation map at the paper's size, on the GPU (CuPy) and
the CPU (NumPy): 120 views (40 x 3), the 144 x 144 x 48 grid of 4 mm, the [HA] 35 cm water cylinder
voxelised at 2 mm (175 x 175 x 125). Prints the time per call and the agreement with the analytic
chords along the representative directions (median and 99th percentile of the line-integral error
over voxels inside the cylinder, away from its surface). Engines: the compiled projections (default)
and, as the baseline in the same run, the same sums with map_coordinates.

    python benchmarks/direct_attenuation.py [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_name, gpu_name, stamp, write_records  # noqa: E402

from directpet.direct import CylindricalScanner, attenuation_histo_images  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.sim import lines  # noqa: E402
from directpet.sim.phantoms import WaterCylinder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "direct_attenuation.json"))
    args = ap.parse_args()
    grid = ImageGrid((48, 144, 144), 4.0)
    viewset = CylindricalScanner().viewset(40, 3)
    water = WaterCylinder(175.0, 250.0, 0.0096)
    mu_grid = ImageGrid((125, 175, 175), 2.0)
    mu = water.mu_map(mu_grid, 4)
    records = []
    z, y, x = np.meshgrid(*[grid.centres(i) for i in range(3)], indexing="ij")
    try:
        import cupy as cp
        mu_d = cp.asarray(mu)
        gpu_ms = {}
        for engine in ("compiled", "map_coordinates"):
            attenuation_histo_images(mu_d, mu_grid, grid, viewset, engine=engine)   # warm-up (kernel compilation)
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            a = attenuation_histo_images(mu_d, mu_grid, grid, viewset, engine=engine)
            cp.cuda.Device().synchronize()
            gpu_ms[engine] = 1e3 * (time.perf_counter() - t0)
            if engine == "compiled":
                a_compiled = cp.asnumpy(a)
            else:
                agree = float(np.abs(cp.asnumpy(a) - a_compiled).max())
        a = a_compiled
        errs = []
        for v, view in enumerate(viewset):
            ref = 0.0096 * lines.chord_length(x, y, z, *view.direction, 175.0, 125.0)
            d = np.abs(x * np.sin(view.phi) - y * np.cos(view.phi))
            sel = (d < 155) & (np.abs(z) < 60) & (ref > 0)
            errs.append(np.abs(-np.log(a[v][sel]) - ref[sel]) / ref[sel])
        e = np.concatenate(errs)
        ms = gpu_ms["compiled"]
        print(f"GPU ({gpu_name()}): compiled {ms:.0f} ms for 120 views, map_coordinates {gpu_ms['map_coordinates']:.0f} ms "
              f"({gpu_ms['map_coordinates'] / ms:.1f}x; max difference {agree:.1e}); line-integral error vs analytic "
              f"chords: median {np.median(e):.2e}, 99th percentile {np.percentile(e, 99):.2e}")
        records.append(stamp({"case": "attenuation_paper", "backend": "cuda", "engine": "compiled", "ms": ms,
                              "views": 120, "baseline_ms": gpu_ms["map_coordinates"],
                              "speedup": gpu_ms["map_coordinates"] / ms, "max_abs_diff": agree,
                              "median_rel_err": float(np.median(e)), "p99_rel_err": float(np.percentile(e, 99))},
                             device=gpu_name()))
    except ImportError:
        print("CuPy not installed: GPU not timed")
    # the CPU: 3 views (one azimuth cell, the 3 tilts), extrapolated to 120 by the view count
    from directpet.direct import ViewSet

    cpu_ms = {}
    for engine in ("compiled", "map_coordinates"):
        t0 = time.perf_counter()
        attenuation_histo_images(mu, mu_grid, grid, ViewSet(1, 3), engine=engine)
        cpu_ms[engine] = 1e3 * (time.perf_counter() - t0) * 40
    print(f"CPU ({cpu_name()}, {os.cpu_count()} threads): compiled {cpu_ms['compiled']:.0f} ms, map_coordinates "
          f"(SciPy, one thread) {cpu_ms['map_coordinates']:.0f} ms for 120 views (extrapolated from 3)")
    records.append(stamp({"case": "attenuation_paper", "backend": "cpu", "engine": "compiled", "ms": cpu_ms["compiled"],
                          "baseline_ms": cpu_ms["map_coordinates"],
                          "speedup": cpu_ms["map_coordinates"] / cpu_ms["compiled"], "views": 120,
                          "extrapolated_from_views": 3, "threads": os.cpu_count()}, device=cpu_name()))
    write_records(records, args.json)


if __name__ == "__main__":
    main()
