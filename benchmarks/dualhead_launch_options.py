"""Launch options of the dual-head default projectors, each against the way before it, on one build
(issue 17; benchmarks/RESULTS.md sections 14n and 14r).

* ``--study back_order`` (section 14n): one full iteration's back projection with the blocks started
  heaviest first (the default, ``DeviceModel.back_heavy_first``) and in index order (unit fastest, then
  plane: the order before);
* ``--study fwd_groups`` (section 14r): one full iteration's forward projection with all plane groups of
  a launch's classes in one launch (the default, ``DeviceModel.fwd_groups_per_launch = 0``) and one
  launch per plane group (``1``: the launches before), with the zero-count skip and positive counts, as
  dualhead_projectors.py times it.

The 72 orientation subsets of the full-size scanner; the two settings alternate in one process: CUDA
events around the 72 calls, warm, random positive inputs, medians over ``--repeats`` passes of each.
Prints the medians, their ratio and the floor (back: FMA over cell offsets; forward: shared loads);
the two settings' results are compared (they must be identical).

    python benchmarks/dualhead_launch_options.py --study back_order|fwd_groups [--model M.npz] [--repeats 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from directpet.dualhead import DualHeadProjector, DualHeadScanner

from _common import gpu_name, print_table, stamp, write_records
from dualhead_projectors import dense_macs, device_numbers, load_model, subset_macs, subsets_of

# study: (operation, DeviceModel attribute, {setting name: value}, the setting before, the record's key)
STUDIES = {
    "back_order": ("bp", "back_heavy_first", {"heavy_first": True, "index_order": False}, "index_order", "order"),
    "fwd_groups": ("fp", "fwd_groups_per_launch", {"one_launch": 0, "launch_per_group": 1}, "launch_per_group",
                   "plane_group_launches"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", choices=sorted(STUDIES), required=True)
    ap.add_argument("--model", default=None, help="saved PatchModel (.npz); built and saved there when missing")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=None, help="records file (default: results/dualhead_<study>.json)")
    args = ap.parse_args()
    import cupy as cp

    op, attribute, settings, before, key = STUDIES[args.study]
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"dualhead_{args.study}.json")
    scanner = DualHeadScanner()
    model, _ = load_model(argparse.Namespace(model=args.model, small=False, synthetic=False), scanner)
    subsets, _ = subsets_of(scanner, 72)
    rng = np.random.default_rng(7)
    lens = [scanner.lor_count(k) for k in subsets]
    if op == "bp":
        inputs = [cp.asarray(rng.uniform(0.5, 1.5, n).astype(np.float32)) for n in lens]
        outputs = [cp.empty(scanner.grid.shape, cp.float32)] * len(subsets)   # one image, overwritten
    else:
        x = cp.asarray(rng.uniform(0.5, 1.5, scanner.grid.shape).astype(np.float32))
        inputs = [cp.asarray(rng.integers(1, 20, n).astype(np.float32)) for n in lens]   # positive: none skipped
        outputs = [cp.empty(n, cp.float32) for n in lens]
    P = DualHeadProjector(model, "default", backend="cuda", check_finite=False)
    dm = P._engine.model
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def iteration(value):
        setattr(dm, attribute, value)
        start.record()
        for s, k in enumerate(subsets):
            if op == "bp":
                P.adjoint(inputs[s], k, out=outputs[s])
            else:
                P.forward(x, k, out=outputs[s], skip_zero=inputs[s])
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)

    results = {}
    for name, value in settings.items():   # warm-up; the results of each setting kept for the comparison
        iteration(value)
        results[name] = [cp.asnumpy(o) for o in (outputs[-1:] if op == "bp" else outputs)]
    a, b = results.values()
    if not all(np.array_equal(u, v) for u, v in zip(a, b)):
        raise SystemExit(f"{args.study}: the two settings gave different projections")
    times = {name: [] for name in settings}
    for _ in range(args.repeats):
        for name, value in settings.items():
            times[name].append(iteration(value))
    setattr(dm, attribute, next(iter(settings.values())))
    sms, clock = device_numbers()
    if op == "bp":   # FMA over the cell offsets (dualhead_projectors.py's fma_bp)
        floor_name, floor = "floor_fma_ms", dense_macs(model) / (sms * 128 * clock) * 1e3
    else:            # shared loads, 4.5 per 128 multiply-adds (dualhead_projectors.py's lds_fp)
        floor_name, floor = "floor_lds_ms", float(subset_macs(model, subsets).sum()) * 4.5 / 128 / (sms * clock) * 1e3
    med = {name: statistics.median(t) for name, t in times.items()}
    records = [stamp(dict(case="full_iteration", method="default", op=op, study=args.study, **{key: name},
                          ms=med[name], times_ms=times[name], repeats=args.repeats, n_subsets=len(subsets),
                          **{floor_name: floor}, fraction_of_floor=floor / med[name],
                          **{f"speedup_vs_{before}": med[before] / med[name]}),
                     device=gpu_name())
               for name in settings]
    print_table(records, [key, "ms", f"speedup_vs_{before}", floor_name, "fraction_of_floor"])
    write_records(records, out)


if __name__ == "__main__":
    main()
