"""The FIRST `fast` and dual-head `default` projectors on the CPU (1 thread and all threads).

FIRST: the full-size scanner (130 x 30 x 30 x 175 sinogram <-> 59 x 175 x 175 image, the paper's
5 x 3 tube), timed on one OSEM subset of 10 angles (every 13th: each angle is the same work, so a
whole projection is 13 times this). Dual-head: the 32 x 24-crystal scanner (D = 4, 59 planes) with
its analytic patch model, every class (a whole projection). Random non-zero inputs; host wall time,
median of repeats after a warm-up.

Floor first: the multiply-adds each projection must do are counted from the sizes and the model
(FIRST: the folded slice taps of every LOR and along-sample, plus the 3 x 3 footprint resampling;
dual-head: every (LOR, tap) pair) and printed as GFLOP/s per core next to the time, with the
fraction of one core's 8-lane FMA peak: measured (--measure-peak: benchmarks/cpu_fma_peak.cpp compiled
with the system's C++ compiler and run, the machine otherwise idle) or given (--peak-gflops).

    python benchmarks/first_dualhead_cpu.py [--model dh_small.npz] [--quick] [--measure-peak | --peak-gflops G]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np

import directpet
from directpet.dualhead import DualHeadProjector, DualHeadScanner, PatchModel
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table

from _common import cpu_device, print_table, stamp, time_host, today, write_records
from dualhead_projectors import subset_macs
from first_projectors import work_counts

FIRST_SUBSETS = 13   # the FIRST subset timed: every 13th angle, one OSEM subset of the full scanner's 130


def dualhead_model(path: str | None, scanner: DualHeadScanner) -> PatchModel:
    """The analytic model of the small scanner: loaded from path when it is there, else built (about a
    minute on 2 cores) and saved to path when given."""
    if path and os.path.exists(path):
        model = PatchModel.load(path)
        if model.scanner != scanner:
            raise SystemExit(f"--model {path}: not the model of the benchmark's 32 x 24 scanner")
        return model
    from directpet.dualhead import build_patch_model

    t0 = time.perf_counter()
    model = build_patch_model(scanner)
    print(f"dual-head model built in {time.perf_counter() - t0:.0f} s")
    if path:
        model.save(path)
    return model


def measured_peak() -> float:
    """One core's 8-lane fp32 FMA peak (GFLOP/s) from benchmarks/cpu_fma_peak.cpp."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise SystemExit("--measure-peak needs a C++ compiler (c++ or g++ on PATH, or CXX)")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_fma_peak.cpp")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "cpu_fma_peak")
        subprocess.run([cxx, "-O2", "-march=native", source, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return float(re.match(r"([\d.]+) GFLOP/s", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "first_dualhead_cpu.json"))
    ap.add_argument("--model", default=None, help="the dual-head model (.npz): loaded, or built and saved there")
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    peak = ap.add_mutually_exclusive_group()
    peak.add_argument("--measure-peak", action="store_true", help="measure one core's FMA peak first (cpu_fma_peak.cpp)")
    peak.add_argument("--peak-gflops", type=float, default=None, help="one core's fp32 FMA peak in GFLOP/s")
    args = ap.parse_args()
    if args.measure_peak:
        args.peak_gflops = measured_peak()
        print(f"one core's 8-lane FMA peak: {args.peak_gflops:.1f} GFLOP/s (benchmarks/cpu_fma_peak.cpp)")
    repeat = 2 if args.quick else 3
    n_threads = os.cpu_count() or 1
    dispatch = directpet.build_info().get("cpu_dispatch")
    rng = np.random.default_rng(2026)

    cases = []
    s = RotatingScanner()
    table = build_super_lor_table(s)
    counts = work_counts(s)
    first_angles = np.arange(0, s.n_angles, FIRST_SUBSETS, dtype=np.int32)
    share = len(first_angles) / s.n_angles
    first_flop = counts["fast_flop"] * share
    x_f = rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)
    y_f = rng.uniform(0.1, 1.0, (len(first_angles),) + s.sinogram_shape[1:]).astype(np.float32)
    first_shape = [len(first_angles)] + list(s.sinogram_shape[1:])
    for threads in sorted({1, n_threads}):
        P = SuperLORProjector(table, "fast", backend="cpu", threads=threads, check_finite=False)
        cases.append(("first_fast", "fp", threads, first_shape, first_flop,
                      lambda P=P: P.forward(x_f, first_angles)))
        cases.append(("first_fast", "bp", threads, first_shape, first_flop,
                      lambda P=P: P.adjoint(y_f, first_angles)))

    scanner = DualHeadScanner.small(n_y=32, n_z=24, voxels_per_crystal=4, n_planes=59, plane_mm=1.0)
    model = dualhead_model(args.model, scanner)
    every = np.arange(scanner.n_classes, dtype=np.int32)
    dh_flop = 2.0 * float(subset_macs(model, [every])[0])
    x_d = rng.uniform(0.1, 1.0, scanner.grid.shape).astype(np.float32)
    y_d = rng.uniform(0.1, 1.0, scanner.n_lors).astype(np.float32)
    dh_shape = [scanner.n_y, scanner.n_z, scanner.n_planes]
    for threads in sorted({1, n_threads}):
        P = DualHeadProjector(model, "default", backend="cpu", threads=threads, check_finite=False)
        cases.append(("dualhead_default", "fp", threads, dh_shape, dh_flop, lambda P=P: P.forward(x_d)))
        cases.append(("dualhead_default", "bp", threads, dh_shape, dh_flop, lambda P=P: P.adjoint(y_d)))

    print(f"FIRST fast: {first_flop / 1e9:.1f} GFLOP per projection of {len(first_angles)} angles; dual-head "
          f"default: {dh_flop / 1e9:.2f} GFLOP per projection ({model.n_taps:,} taps, {scanner.n_lors:,} LORs)")
    records = []
    for case, op, threads, shape, flop, fn in cases:
        ms = time_host(fn, repeat=repeat, warmup=1)
        per_core = flop / ms / 1e6 / threads
        rec = dict(case=case, method="cpu", op=op, threads=threads, ms=ms, shape=shape, gflop=flop / 1e9,
                   gflops_per_core=per_core, cpu_dispatch=dispatch)
        if case == "first_fast":
            rec["note"] = f"one subset of {len(first_angles)} of the {s.n_angles} angles (every {FIRST_SUBSETS}th)"
        if args.peak_gflops:
            rec["peak_gflops_per_core"] = args.peak_gflops
            rec["peak_source"] = "measured: benchmarks/cpu_fma_peak.cpp" if args.measure_peak else "given: --peak-gflops"
            rec["peak_fraction"] = per_core / args.peak_gflops
        records.append(stamp(rec, device=cpu_device()))
        print(f"  {case} {op} {threads} thread(s): {ms:.1f} ms, {per_core:.1f} GFLOP/s per core", flush=True)
    print(f"device: {cpu_device()}, clone {dispatch}, date {today()}")
    print_table(records, ["case", "op", "threads", "ms", "gflops_per_core", "peak_fraction"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
