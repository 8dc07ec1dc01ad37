"""DIRECT reconstruction at 2 mm voxels: the projector select_projector picks against the exact spatial one
(issue 17: "DIRECT at fine voxels").

One iteration of OSEM (8 blocks of 15 views, as benchmarks/multi_gpu.py's osem_2mm) and of block-RAMLA
(120 one-view subsets) at 288 x 288 x 96 voxels of 2 mm, the variant1 kernel (400 ps), 40 x 3 views,
on the model-consistent sphere-phantom data of benchmarks/direct_recon.py (made with the exact projector);
each algorithm with (a) the exact spatial projector (HistoImageProjector, the default before issue 17)
and (b) ``select_projector(method="auto", accuracy=1e-4)``, in the same run. Per case: the
reconstruction's own per-iteration wall time (median of iterations 2..n; the first, which builds LUTs,
factors and spectra, is reported apart as setup), the 120 forward + 120 back projections alone, and for
(b) the choice, its kernel error, the candidates' times and the seconds the selection took. The image
difference after the iterations (b vs a, relative L2) says what the model error does to the image.

Floors: the exact projector's FMA count 2 |mSR| N_vox per projection (|mSR| of view 0) at 67 TFLOP/s; the
low-rank path's, the bytes it cannot avoid: each projection reads the view's r resident spectra
(r (Mz/2+1) My Mx complex64) and the image in and out once, at 4.8 TB/s (a loose bound: the transforms'
own passes come on top).

    python benchmarks/direct_fine_voxels.py [--out FILE] [--iterations N] [--algorithms osem,block_ramla]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import directpet as dp
from directpet import recon
from directpet.direct import HistoImageProjector, SRKernel, ViewSet, ViewSubsets, select_projector

from _common import gpu_name, print_table, rel_err, stamp, write_records
from direct_recon import make_data, projection_ms

FP32_TFLOPS, HBM_TBPS = 67.0, 4.8   # H200 datasheet (dense fp32, HBM3e); floors only


def run_case(op, data, algorithm, n_iter, blocks):
    problem = ViewSubsets(op, data, blocks)
    t0 = time.perf_counter()
    run = recon.osem if algorithm == "osem" else recon.block_ramla
    res = run(problem, n_iter, progress=False)
    total = time.perf_counter() - t0
    times = 1e3 * np.asarray(res.iteration_times)
    return res.image, float(np.median(times[1:])), float(times[0]), total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_fine_voxels.json"))
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--algorithms", default="osem,block_ramla")
    args = ap.parse_args()
    import cupy

    sync = cupy.cuda.Device().synchronize
    gpu = gpu_name()
    grid, viewset, kernel = dp.ImageGrid((96, 288, 288), 2.0), ViewSet(40, 3), SRKernel.clinical()
    exact = HistoImageProjector(grid, viewset, kernel, backend="cuda", check_finite=False)
    data, _ = make_data(grid, viewset, exact, cupy)
    n_taps = exact.lut(0).n_offsets
    exact_floor = 2 * 2.0 * n_taps * grid.n_voxels / (FP32_TFLOPS * 1e12) * 1e3 * len(viewset)
    t0 = time.perf_counter()
    auto = select_projector(grid, viewset, kernel, backend="cuda", check_finite=False, verbose=True)
    select_s = time.perf_counter() - t0
    c = auto.choice
    records = []
    ops = {"spatial_exact": exact, f"auto_{c.method}": auto}
    if c.method == "lowrank":
        mz, my, mx = auto.padding
        spectra = 8.0 * c.rank * (mz // 2 + 1) * my * mx          # the view's resident spectra, read once
        fft_floor = len(viewset) * 2 * (spectra + 8.0 * grid.n_voxels) / (HBM_TBPS * 1e12) * 1e3
    images = {}
    for algorithm in args.algorithms.split(","):
        blocks = 8 if algorithm == "osem" else None
        for name, op in ops.items():
            image, ms, first_ms, total_s = run_case(op, data, algorithm, args.iterations, blocks)
            images[(algorithm, name)] = cupy.asnumpy(image)
            pm = projection_ms(op, data, cupy, sync, n=2)
            rec = dict(case=f"{algorithm}_2mm_variant1", projector=name, ms=ms, first_iteration_ms=first_ms,
                       projection_ms=pm, other_ms=ms - pm, iterations=args.iterations, shape=list(grid.shape),
                       n_views=len(viewset), subsets=blocks or len(viewset), n_offsets_view0=n_taps)
            if op is exact:
                rec["floor_ms"] = exact_floor
            else:
                rec.update(choice=c.method, model_error=c.model_error, accuracy=c.accuracy, rank=c.rank,
                           candidates_ms_per_view=c.ms, select_s=select_s, padding=list(getattr(op, "padding", ())))
                if c.method == "lowrank":
                    rec["floor_ms"] = fft_floor
            records.append(stamp(rec, device=gpu))
        base = images[(algorithm, "spatial_exact")]
        for name in ops:
            if name != "spatial_exact":
                diff = rel_err(images[(algorithm, name)], base)
                for r in records:
                    if r["case"] == f"{algorithm}_2mm_variant1":
                        r["image_rel_diff_vs_exact"] = diff if r["projector"] == name else 0.0
        ex = next(r for r in records if r["case"] == f"{algorithm}_2mm_variant1" and r["projector"] == "spatial_exact")
        for r in records:
            if r["case"] == ex["case"]:
                r["speedup_vs_exact"] = ex["ms"] / r["ms"]
    print(f"GPU: {gpu}; selection {select_s:.1f} s: {c.summary()}")
    print_table(records, ["case", "projector", "ms", "speedup_vs_exact", "projection_ms", "other_ms", "first_iteration_ms",
                          "floor_ms", "image_rel_diff_vs_exact"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
