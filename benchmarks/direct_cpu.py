"""CPU DIRECT projector benchmark (issue: foundation).

Per view FP and BP at 144x144x48, 4 mm voxels, for the clinical kernel (400 ps, variant1) and the
paper's stress kernel (900 ps, radial 10 -> 100 mm, axial 10 mm), with 1 thread and all threads,
and the float64 NumPy reference at a small size in the same run (ratio reported per voxel-offset).

Useful work = 2 * |mSR| * voxels per view (one multiply-add per voxel per offset).

    python benchmarks/direct_cpu.py [--out benchmarks/results/direct_cpu.json] [--quick]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, View
from directpet.reference import direct as ref

from _common import cpu_name, print_table, stamp, time_host, today, write_records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_cpu.json"))
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args()

    n_threads = os.cpu_count() or 1
    grid = dp.ImageGrid((48, 144, 144), 4.0)
    small = dp.ImageGrid((12, 24, 24), 4.0)
    view = View.from_degrees(31.5, 6.67)  # an oblique, tilted view (azimuth bin 7, tilt +)
    rng = np.random.default_rng(2026)
    x = rng.random(grid.shape, dtype=np.float32) + 0.1
    xs = rng.random(small.shape, dtype=np.float32) + 0.1
    records = []
    for case, kernel in [("clinical", SRKernel.clinical()), ("stress", SRKernel.stress())]:
        repeat = 1 if (case == "stress" or args.quick) else 5
        lut = None
        for threads in sorted({1, n_threads}):
            op = HistoImageProjector(grid, [view], kernel, backend="cpu", threads=threads, check_finite=False)
            lut = op.lut(0)
            stack, image = np.empty((1,) + grid.shape, np.float32), np.empty_like(x)   # one view's histo-image
            for name, fn in (("fp", lambda: op.forward(x, 0, out=stack)),
                             ("bp", lambda: op.adjoint(x[None], 0, out=image))):
                ms = time_host(fn, repeat=repeat, warmup=1)
                flops = 2.0 * lut.n_offsets * grid.n_voxels
                records.append(stamp(dict(case=case, method="cpu", op=name, threads=threads, ms=ms,
                                          n_offsets=lut.n_offsets, gflops=flops / ms / 1e6,
                                          gflops_per_core=flops / ms / 1e6 / threads,
                                          shape=list(grid.shape)), device=cpu_name()))
        # float64 reference at the small size, and the fast CPU path at the same small size.
        op_s = HistoImageProjector(small, [view], kernel, backend="cpu", threads=1, check_finite=False)
        lut_s = op_s.lut(0)
        for name, fast, slow in (("fp", lambda: op_s.forward(xs, 0), lambda: ref.forward(xs, lut_s)),
                                 ("bp", lambda: op_s.adjoint(xs[None], 0), lambda: ref.back(xs, lut_s))):
            t_ref = time_host(slow, repeat=1, warmup=0)
            t_fast = time_host(fast, repeat=3, warmup=1)
            records.append(stamp(dict(case=case, method="reference_f64", op=name, threads=1, ms=t_ref,
                                      n_offsets=lut_s.n_offsets, shape=list(small.shape),
                                      speedup_vs_reference=t_ref / t_fast), device=cpu_name()))
    print(f"device: {cpu_name()} ({n_threads} threads), date {today()}")
    print_table(records, ["case", "method", "op", "threads", "shape", "n_offsets", "ms", "gflops_per_core", "speedup_vs_reference"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
