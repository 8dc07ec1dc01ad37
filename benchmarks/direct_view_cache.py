"""Where a DIRECT iteration's projections lose time against the single benchmark view (issue 17).

The block-RAMLA iteration (120 views, 144 x 144 x 48, 4 mm, variant1) averages more per projection than
the one view that `direct_projectors.py` times. Two explanations: the views differ (their supports and
tables), or each view's tables, read once per iteration, come from DRAM rather than L2. This times every
view's forward and back projection through the bare launchers with CUDA events, three ways:

* in iteration order (FP(v), BP(v), v = 0..119: each table cold, as in the reconstruction);
* warm: each launch repeated at once, the repeat timed (its tables and inputs in L2);
* cold: each launch after 256 MB of other traffic (its tables certainly out of L2).

Inputs are random, never zeros. Medians of 3 passes per view; totals over the 120 views.

    python benchmarks/direct_view_cache.py [--out FILE] [--method default]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, ViewSet

from _common import gpu_name, print_table, stamp, write_records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_view_cache.json"))
    ap.add_argument("--method", default="default")
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    import cupy

    grid = dp.ImageGrid((48, 144, 144), 4.0)
    op = HistoImageProjector(grid, ViewSet(40, 3), SRKernel.clinical(), backend="cuda", method=args.method,
                             check_finite=False)
    rng = cupy.random.default_rng(0)
    x = rng.random(grid.shape, dtype=cupy.float32) + 0.1
    h = rng.random(grid.shape, dtype=cupy.float32) + 0.1
    y = cupy.empty(grid.shape, dtype=cupy.float32)
    b = cupy.empty(grid.shape, dtype=cupy.float32)
    flush_src = cupy.ones(64 << 20, dtype=cupy.float32)    # 256 MB, > L2
    flush_dst = cupy.empty_like(flush_src)
    launchers = {(fp, v): op.launcher(fp, v) for fp in (True, False) for v in range(op.n_views)}
    args_of = {True: (x.data.ptr, y.data.ptr), False: (h.data.ptr, b.data.ptr)}

    # Events are recorded around each timed launch without synchronising in between: the host queues
    # ahead of the GPU, so no timed interval contains the host's launch latency.
    pending = []

    def timed(fp, v, into, index):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launchers[fp, v](*args_of[fp])
        stop.record()
        pending.append((start, stop, into, index))

    def collect():
        cupy.cuda.Device().synchronize()
        for start, stop, into, index in pending:
            into[index] = cupy.cuda.get_elapsed_time(start, stop)
        pending.clear()

    for fp in (True, False):                              # uploads, launch configuration
        for v in range(op.n_views):
            launchers[fp, v](*args_of[fp])
    cupy.cuda.Device().synchronize()
    n = op.n_views
    order = np.zeros((args.passes, 2, n))
    warm = np.zeros((args.passes, 2, n))
    cold = np.zeros((args.passes, 2, n))
    for p in range(args.passes):
        cupy.copyto(flush_dst, flush_src)                 # keeps the GPU busy while the host queues
        for v in range(n):                                # iteration order
            timed(True, v, order, (p, 0, v))
            timed(False, v, order, (p, 1, v))
        collect()
        for k, fp in enumerate((True, False)):
            for v in range(n):
                launchers[fp, v](*args_of[fp])            # brings its tables in
                timed(fp, v, warm, (p, k, v))
                cupy.copyto(flush_dst, flush_src)         # evicts them
                timed(fp, v, cold, (p, k, v))
            collect()
    records = []
    for name, t in (("iteration_order", order), ("warm", warm), ("cold", cold)):
        med = np.median(t, axis=0)                        # (2, n)
        for k, opname in enumerate(("fp", "bp")):
            records.append(stamp(dict(case="clinical_120_views", method=args.method, order=name, op=opname,
                                      total_ms=float(med[k].sum()), mean_us=1e3 * float(med[k].mean()),
                                      min_us=1e3 * float(med[k].min()), max_us=1e3 * float(med[k].max())),
                                 device=gpu_name()))
    print_table(records, ["order", "op", "total_ms", "mean_us", "min_us", "max_us"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
