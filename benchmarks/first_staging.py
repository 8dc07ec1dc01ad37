"""The FIRST `fast` forward's two stagings of the lattice planes timed in one run on one build (issue 17):
a TMA box per plane issued by one thread into a ring of three buffers (sm_90+; opt-in,
``FirstDeviceModel.fast_forward_tma``) against cp.async copies by every thread (the default). The resampling launch is the same in both; the stencil kernel's staging differs.

Full scanner (175 x 130 x 900 <-> 175 x 175 x 59), random non-zero images rotated among calls, CUDA
events, the stagings alternated over rounds (median of the rounds' medians), the sinograms of both
checked bitwise equal. The floor is the stencil's and the resampling's FMAs at the fp32 peak
(first_projectors.work_counts), printed beside each time.

    python benchmarks/first_staging.py [--rounds 5] [--repeat 10] [--out FILE]

Exits 0 with a message on a GPU or build without the TMA staging (nothing to compare).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table

from _common import print_table, stamp, time_device, write_records
from first_projectors import FP32_TFLOPS, work_counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "first_staging.json"))
    ap.add_argument("--rounds", type=int, default=5, help="alternations of the two stagings")
    ap.add_argument("--repeat", type=int, default=10, help="timed calls per staging and round")
    args = ap.parse_args()
    import cupy as cp

    s = RotatingScanner()
    table = build_super_lor_table(s)
    P = SuperLORProjector(table, "fast", backend="cuda", check_finite=False)
    model = P._engine.model
    if model.fast_forward_tma_unsupported_reason:
        print(f"no TMA staging here ({model.fast_forward_tma_unsupported_reason}): nothing to compare")
        return 0
    counts = work_counts(s)
    floor_ms = counts["fast_flop"] / (FP32_TFLOPS * 1e12) * 1e3
    rng = np.random.default_rng(11)
    images = [cp.asarray(rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)) for _ in range(3)]
    out = cp.empty(s.sinogram_shape, cp.float32)

    stagings = {"tma": True, "cp_async": False}
    sinos = {}
    for name, on in stagings.items():            # the same bits from both
        model.fast_forward_tma = on
        sinos[name] = cp.asnumpy(P.forward(images[0]))
    same = bool(np.array_equal(sinos["tma"], sinos["cp_async"]))
    print(f"sinograms bitwise equal: {same}")
    times = {name: [] for name in stagings}
    for _ in range(args.rounds):
        for name, on in stagings.items():
            model.fast_forward_tma = on
            times[name].append(time_device(lambda k: P.forward(images[k % len(images)], out=out),
                                           repeat=args.repeat, warmup=2))
    med = {name: statistics.median(t) for name, t in times.items()}
    rows, records = [], []
    for name in stagings:
        rows.append({"staging": name, "fp_ms": med[name], "floor_ms": floor_ms, "of_floor": floor_ms / med[name],
                     "rounds": ", ".join(f"{t:.3f}" for t in times[name])})
        records.append(stamp({"case": "full", "method": "fast", "op": "fp", "staging": name, "ms": med[name],
                              "rounds_ms": times[name], "floor_ms": floor_ms, "bitwise_equal": same}))
    print_table(rows, ["staging", "fp_ms", "floor_ms", "of_floor", "rounds"])
    ratio = med["cp_async"] / med["tma"]
    print(f"cp_async / tma = {ratio:.3f}; floor {floor_ms:.2f} ms ({counts['fast_flop'] / 1e9:.0f} GFLOP at "
          f"{FP32_TFLOPS} TFLOP/s)")
    for r in records:
        r["cp_async_over_tma"] = ratio
    write_records(records, args.out)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
