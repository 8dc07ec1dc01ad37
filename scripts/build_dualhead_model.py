"""Build the dual-head analytic patch model (directpet.dualhead.build_patch_model), report its cost
and storage, and save it as .npz.

    python scripts/build_dualhead_model.py OUT.npz [--size full|medium|small] [--backend auto|cpu|cuda]
        [--angle-samples 4] [--voxel-samples 2] [--threshold 1e-3] [--classes N] [--seeds] [--json REC.json]

--size full is the paper's scanner (104 x 72 crystals, D = 4, 119 planes: ~1.1e8 evaluations);
--classes N builds only N classes spread over the class range (a cost sample: the model saved then
holds taps for those classes only) and extrapolates the full build from them; --seeds also builds
the seed DRFs (all folded planes; on the CPU only sensible for small scanners) for the storage report.
Prints the build time, candidate and evaluation counts, taps, taps per (class, plane), host and GPU
bytes and the storage report, and writes them with --json as one record stamped like the benchmarks'
(device, date, command, commit: benchmarks/_common.py stamp).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

import directpet
from directpet._backend import cuda_status
from directpet.dualhead import (DualHeadScanner, build_patch_model, build_seed_drf, patch_candidate_counts,
                                storage_report)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from _common import cpu_device, gpu_name, nvidia_smi_name, stamp  # noqa: E402

SIZES = {
    "full": DualHeadScanner(),
    "medium": DualHeadScanner.small(n_y=32, n_z=24, voxels_per_crystal=4, n_planes=59, plane_mm=1.0),
    "small": DualHeadScanner.small(),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="where to save the model (.npz)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--angle-samples", type=int, default=4)
    ap.add_argument("--voxel-samples", type=int, default=2)
    ap.add_argument("--threshold", type=float, default=1e-3)
    ap.add_argument("--classes", type=int, default=None, help="build only this many classes (a cost sample)")
    ap.add_argument("--seeds", action="store_true", help="also build the seed DRFs for the storage report")
    ap.add_argument("--json", default=None, help="write the record here")
    args = ap.parse_args()

    scanner = SIZES[args.size]
    evaluated, all_planes = patch_candidate_counts(scanner)
    classes = None
    if args.classes is not None:
        classes = np.unique(np.linspace(0, scanner.n_classes - 1, args.classes).round().astype(np.int32))
    print(f"scanner {args.size}: {scanner.n_y} x {scanner.n_z} crystals, D = {scanner.D}, {scanner.n_planes} planes, "
          f"{scanner.n_lors:,} LORs, image {scanner.grid.shape}")
    print(f"candidates: {int(all_planes.sum()):,} over all planes, {int(evaluated.sum()):,} evaluated (x <= 0); "
          f"per class {evaluated.mean():.0f} mean, {evaluated.max()} max")

    t0 = time.perf_counter()
    model = build_patch_model(scanner, angle_samples=args.angle_samples, voxel_samples=args.voxel_samples,
                              threshold=args.threshold, backend=args.backend, progress=True, classes=classes)
    seconds = time.perf_counter() - t0
    meta = model.meta
    built = evaluated.sum() if classes is None else evaluated[classes].sum()
    print(f"built on {meta['backend']} in {seconds:.2f} s (candidates {meta['seconds_generate']:.2f} s, "
          f"h {meta['seconds_evaluate']:.2f} s, assembly {meta['seconds_assemble']:.2f} s): "
          f"{meta['evaluated']:,} evaluations, {meta['evaluated'] / max(meta['seconds_evaluate'], 1e-9):.3g} per s")
    rows = model.taps_per_row()
    listed = np.arange(scanner.n_classes) if classes is None else classes
    r = rows[listed]
    print(f"taps: {model.n_taps:,} ({meta['dropped_below_threshold']:,} evaluated taps dropped below "
          f"{args.threshold:g} x class max); per (class, plane) mean {r.mean():.1f}, median {np.median(r):.0f}, "
          f"max {r.max()}, empty rows {np.count_nonzero(r == 0)} of {r.size}")
    print(f"bytes: {model.nbytes:,} host (tap_start int64 + dy, dz int16 + w float32); the GPU projectors "
          f"hold about the same before their own re-layout")
    record = {"case": "dualhead_model_build", "backend": meta["backend"], "size": args.size,
              "scanner": scanner.to_dict(), "seconds": seconds, "meta": meta,
              "candidates_all_planes": int(all_planes.sum()), "candidates_evaluated": int(evaluated.sum()),
              "n_taps": model.n_taps, "nbytes": model.nbytes,
              "taps_per_row": {"mean": float(r.mean()), "max": int(r.max()), "median": float(np.median(r))},
              "cuda": {"compiled": directpet.has_cuda(), "devices": directpet.cuda_device_count(),
                       "status": cuda_status()}, "host": platform.node()}
    if classes is not None:
        scale = evaluated.sum() / built
        est = {"seconds": seconds * scale, "n_taps": model.n_taps * scale,
               "nbytes": model.n_taps * scale * 8 + model.tap_start.nbytes}
        print(f"extrapolated to all {scanner.n_classes} classes (by evaluations): {est['seconds']:.0f} s, "
              f"{est['n_taps']:.3g} taps, {est['nbytes'] / 2**20:.0f} MiB")
        record["extrapolated"] = est
    else:
        seeds = build_seed_drf(scanner, backend=meta["backend"]) if args.seeds else None
        report = storage_report(model, seeds)
        print("storage report:")
        for k, v in report.items():
            print(f"  {k:28s} {v:,}" if isinstance(v, int) else f"  {k:28s} {v}")
        record["storage"] = report
    model.save(args.out)
    print(f"saved {args.out}")
    if args.json:
        device = ((gpu_name() or nvidia_smi_name()) if meta["backend"] == "cuda" else None) or cpu_device()
        with open(args.json, "w") as f:
            json.dump(stamp(record, device=device), f, indent=1, default=str)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
