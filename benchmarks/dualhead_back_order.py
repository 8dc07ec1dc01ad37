"""The dual-head default back projection's block order (issue 17; benchmarks/RESULTS.md section 14n).

One full iteration's back projection (the 72 orientation subsets of the full-size scanner, as
dualhead_projectors.py times it) with the blocks started heaviest first (the default,
``DeviceModel.back_heavy_first``) and in index order (unit fastest, then plane: the order before),
alternating in one process on the same build: CUDA events around the 72 ``adjoint`` calls, warm,
random positive ratios, medians over ``--repeats`` passes of each. Prints the medians, their ratio and
the FMA floor; both orders' results are compared (they must be identical: each block owns its cells).

    python benchmarks/dualhead_back_order.py [--model M.npz] [--repeats 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from directpet.dualhead import DualHeadProjector, DualHeadScanner

from _common import gpu_name, print_table, stamp, write_records
from dualhead_projectors import dense_macs, device_numbers, load_model, subsets_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="saved PatchModel (.npz); built and saved there when missing")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "dualhead_back_order.json"))
    args = ap.parse_args()
    import cupy as cp

    scanner = DualHeadScanner()
    model, _ = load_model(argparse.Namespace(model=args.model, small=False, synthetic=False), scanner)
    subsets, _ = subsets_of(scanner, 72)
    rng = np.random.default_rng(7)
    ratios = [cp.asarray(rng.uniform(0.5, 1.5, scanner.lor_count(k)).astype(np.float32)) for k in subsets]
    img = cp.empty(scanner.grid.shape, cp.float32)
    P = DualHeadProjector(model, "default", backend="cuda", check_finite=False)
    dm = P._engine.model
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def iteration(heavy_first):
        dm.back_heavy_first = heavy_first
        start.record()
        for s, k in enumerate(subsets):
            P.adjoint(ratios[s], k, out=img)
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)

    orders = {"heavy_first": True, "index_order": False}
    results = {}
    for name, on in orders.items():   # warm-up; the last subset's image of each order kept for the comparison
        iteration(on)
        results[name] = cp.asnumpy(img)
    if not np.array_equal(results["heavy_first"], results["index_order"]):
        raise SystemExit("the two block orders gave different back projections")
    times = {name: [] for name in orders}
    for _ in range(args.repeats):
        for name, on in orders.items():
            times[name].append(iteration(on))
    dm.back_heavy_first = True
    sms, clock = device_numbers()
    floor = dense_macs(model) / (sms * 128 * clock) * 1e3
    med = {name: statistics.median(t) for name, t in times.items()}
    records = [stamp(dict(case="full_iteration", method="default", op="bp", order=name, ms=med[name], times_ms=times[name],
                          repeats=args.repeats, n_subsets=len(subsets), floor_fma_ms=floor,
                          fraction_of_floor=floor / med[name], speedup_vs_index_order=med["index_order"] / med[name]),
                     device=gpu_name())
               for name in orders]
    print_table(records, ["order", "ms", "speedup_vs_index_order", "floor_fma_ms", "fraction_of_floor"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
