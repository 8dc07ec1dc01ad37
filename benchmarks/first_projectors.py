"""FIRST Super-LOR projectors at full size (issue: FIRST family, section 6).

Forward and back projection of the whole sinogram (175 x 130 x 900 <-> 175 x 175 x 59) on the GPU
for the three methods (faithful, matched, fast), the CPU backend with all cores in the same run,
and one full OSEM iteration (13 subsets of 10 angles) with the data resident on the GPU.

Floor first: the work each method must do is counted from the sizes (samples, texture fetches,
FLOPs) and printed next to the times; see benchmarks/RESULTS.md for the discussion.

Timing: CUDA events (CuPy) around the projector calls on CuPy arrays (inputs rotate among several
random images / sinograms, never zeros; the sinogram is 82 MB, above the 50-60 MB L2), median of
repeats. CPU: host wall time; the slow CPU methods (faithful, matched) are timed on a few angles and
scaled to 130 (the work per angle is the same for every angle), which the table says.

    python benchmarks/first_projectors.py [--out FILE] [--quick]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from directpet import recon
from directpet.first import (AngleSubsets, RotatingScanner, SuperLORProjector, build_super_lor_table,
                             model_consistent_data)

from _common import cpu_name, print_table, stamp, time_device, time_host, write_records

FP32_TFLOPS = 67.0          # H100/H200 SXM, plain fp32 (datasheet)
TEX_BILINEAR_PER_S = 132 * 4 * 1.98e9   # 4 texture units per SM, one bilinear texel set per clock


def work_counts(s: RotatingScanner, J=2, K=1):
    """What each method must do for the whole sinogram (forward or back)."""
    n, R, nz, A = s.n_radial, s.n_rows, s.n_slices, s.n_angles
    lors = s.n_lors
    samples = lors * n * (2 * J + 1) * (2 * K + 1)
    rows_sum = sum(R - abs(d) for d in range(-(R - 1), R))                  # = R^2
    stencil_flop = 2 * A * rows_sum * n * n * (2 * J + 1) * (2 * K + 2)     # folded taps per LOR and i
    # the in-plane resampling: 9 footprint weights (3 x 3 voxels) per lattice point and slice
    resample_flop = 2 * 9 * A * n * (n + 2 * J) * nz
    # faithful back: per voxel, angle, ring difference and (j, k) one bilinear sinogram fetch, the
    # reads that fall wholly outside the ring difference's LORs skipped (the kernels skip them: they
    # would return 0); the fraction read is estimated from 10^6 random (voxel, angle, delta, k)
    all_reads = nz * n * n * A * (2 * R - 1) * (2 * K + 1)
    rng = np.random.default_rng(0)
    q = 1_000_000
    iz, iy, ix = rng.integers(nz, size=q), rng.integers(n, size=q), rng.integers(n, size=q)
    phi = rng.integers(A, size=q) * np.pi / A
    delta = rng.integers(-(R - 1), R, size=q)
    k = rng.integers(-K, K + 1, size=q)
    c = 0.5 * (n - 1)
    i_f = c + (ix - c) * np.cos(phi) + (iy - c) * np.sin(phi)
    m_f = 0.5 * (iz - (i_f - c) * s.slope[delta + R - 1] - k - np.abs(delta))
    read = (m_f > -1) & (m_f < R - np.abs(delta)) & (i_f > -1) & (i_f < n)
    faithful_back_fetches = int(read.mean() * all_reads) * (2 * J + 1)
    return {"samples": samples, "stencil_flop": stencil_flop, "resample_flop": resample_flop,
            "fast_flop": stencil_flop + resample_flop,
            # faithful forward: the resampling above (FMAs, negligible next to the fetches), then one
            # trilinear fetch (two bilinear texel sets) per sample of the resampled lattice; the
            # table is fetched once per 32 samples and shared through shuffles
            "faithful_fwd_bilinear": 2 * samples + samples // 32,
            # faithful back: the sinogram reads (the tube values come from shared memory)
            "faithful_back_bilinear": faithful_back_fetches}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "first_projectors.json"))
    ap.add_argument("--quick", action="store_true", help="fewer repeats and CPU angles")
    ap.add_argument("--cpu-angles", type=int, default=None, help="angles for the slow CPU methods")
    ap.add_argument("--methods", default="fast,faithful,matched", help="GPU methods to time (comma-separated)")
    ap.add_argument("--skip-cpu", action="store_true", help="leave out the CPU backend (no CPU ratios)")
    ap.add_argument("--skip-osem", action="store_true", help="leave out the OSEM iterations")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    cpu_methods = () if args.skip_cpu else ("fast", "faithful", "matched")
    import cupy as cp

    s = RotatingScanner()
    table = build_super_lor_table(s)
    counts = work_counts(s)
    print(f"scanner: {s.sinogram_shape} sinogram <-> {s.grid.shape} image; {table.n_super} Super-LORs; "
          f"{s.n_lors:,} LORs, {counts['samples'] / 1e9:.1f} G tube samples per projection")
    fast_floor = counts["fast_flop"] / (FP32_TFLOPS * 1e12) * 1e3
    print(f"floors: fast {counts['fast_flop'] / 1e9:.0f} GFLOP -> {fast_floor:.2f} ms at {FP32_TFLOPS} TFLOP/s; "
          f"faithful fwd {counts['faithful_fwd_bilinear'] / 1e9:.0f} G bilinear fetches -> "
          f"{counts['faithful_fwd_bilinear'] / TEX_BILINEAR_PER_S * 1e3:.0f} ms, back "
          f"{counts['faithful_back_bilinear'] / 1e9:.0f} G -> {counts['faithful_back_bilinear'] / TEX_BILINEAR_PER_S * 1e3:.0f} ms "
          f"at {TEX_BILINEAR_PER_S / 1e12:.2f} T/s")
    rng = np.random.default_rng(7)
    n_in = 2 if args.quick else 4
    images = [cp.asarray(rng.uniform(0.1, 1.0, s.grid.shape).astype(np.float32)) for _ in range(n_in)]
    sinos = [cp.asarray(rng.uniform(0.1, 1.0, s.sinogram_shape).astype(np.float32)) for _ in range(n_in)]
    img_out = cp.empty(s.grid.shape, cp.float32)
    sino_out = cp.empty(s.sinogram_shape, cp.float32)
    sens_out = cp.empty(s.grid.shape, cp.float32)

    rows, records = [], []
    gpu_ms = {}
    repeats = {"fast": (3, 10), "faithful": (1, 5), "matched": (1, 2)}
    faithful_sens_ms = None
    for method in methods:
        P = SuperLORProjector(table, method, backend="cuda", check_finite=False)
        warm, rep = repeats[method]
        if args.quick:
            rep = max(1, rep // 2)
        fp = time_device(lambda k: P.forward(images[k % n_in], out=sino_out), repeat=rep, warmup=warm)
        bp = time_device(lambda k: P.adjoint(sinos[k % n_in], out=img_out), repeat=rep, warmup=warm)
        gpu_ms[method] = (fp, bp)
        rows.append({"method": method, "op": "fp", "ms": fp})
        rows.append({"method": method, "op": "bp", "ms": bp})
        if method == "faithful":
            every = np.arange(s.n_angles, dtype=np.int32)
            bs = time_device(lambda k: P._engine.back_faithful(sinos[k % n_in], None, every, img_out, sens_out),
                             repeat=rep, warmup=warm)
            rows.append({"method": method, "op": "bp+sens", "ms": bs})
            faithful_sens_ms = bs
        print(f"  {method}: fp {fp:.2f} ms, bp {bp:.2f} ms, model + workspaces {P._engine.model.nbytes / 2**20:.0f} MiB",
              flush=True)

    # CPU backend, all cores, same inputs
    threads = os.cpu_count()
    x_h, y_h = cp.asnumpy(images[0]), cp.asnumpy(sinos[0])
    cpu_angles = args.cpu_angles or (2 if args.quick else 4)
    cpu_ms = {}
    for method in cpu_methods:
        P = SuperLORProjector(table, method, backend="cpu", threads=threads, check_finite=False)
        if method == "fast":
            angles, scale = None, 1.0
        else:
            angles = np.linspace(0, s.n_angles - 1, cpu_angles).round().astype(int)
            scale = s.n_angles / cpu_angles
        sub = s.n_angles if angles is None else len(angles)
        yb = y_h[:sub] if angles is not None else y_h
        fp = time_host(lambda: P.forward(x_h, angles), repeat=1, warmup=0) * scale
        bp = time_host(lambda: P.adjoint(np.ascontiguousarray(yb), angles), repeat=1, warmup=0) * scale
        cpu_ms[method] = (fp, bp)
        note = "" if angles is None else f"(measured on {len(angles)} angles, x{scale:.1f})"
        print(f"  CPU {method}: fp {fp / 1e3:.2f} s, bp {bp / 1e3:.2f} s {note}", flush=True)
        rows.append({"method": f"cpu-{method}", "op": "fp", "ms": fp, "note": note})
        rows.append({"method": f"cpu-{method}", "op": "bp", "ms": bp, "note": note})

    def vs_cpu(method, op, ms):
        k = 0 if op == "fp" else 1
        return (cpu_ms[method][k] / ms if method in cpu_ms else None,
                cpu_ms["fast"][k] / ms if "fast" in cpu_ms else None)

    for method, (fp, bp) in gpu_ms.items():
        for op, ms in (("fp", fp), ("bp", bp)):
            same, fast = vs_cpu(method, op, ms)
            records.append(stamp({"case": "full", "method": method, "op": op, "ms": ms,
                                  "speedup_vs_cpu": same, "speedup_vs_cpu_fast": fast}))
    if faithful_sens_ms is not None:
        records.append(stamp({"case": "full", "method": "faithful", "op": "bp+sens", "ms": faithful_sens_ms,
                              "speedup_vs_cpu": None}))
    for method, (fp, bp) in cpu_ms.items():
        for op, ms in (("fp", fp), ("bp", bp)):
            records.append(stamp({"case": "full", "method": "cpu", "cpu_method": method, "op": op, "ms": ms,
                                  "speedup_vs_cpu": 1.0, "note": None if method == "fast" else
                                  f"measured on {cpu_angles} angles, scaled to {s.n_angles}"},
                                 device=f"{cpu_name()} ({threads} threads)"))

    write_records(records, args.out)       # the projector records, before the reconstruction part

    # one full OSEM iteration (13 subsets of 10 angles), everything on the GPU
    truth = np.zeros(s.grid.shape, np.float32)
    truth[:, 40:135, 40:135] = rng.uniform(0.5, 1.5, (s.n_slices, 95, 95)).astype(np.float32)
    for method in [] if args.skip_osem else [m for m in ("fast", "faithful") if m in methods]:
        P = SuperLORProjector(table, method, backend="cuda", check_finite=False)
        data = model_consistent_data(P, cp.asarray(truth), counts=2e8, seed=cp.random.default_rng(3))
        problem = AngleSubsets(P, data, 13)
        res = recon.osem(problem, 2 if args.quick else 4, progress=False)
        it_ms = 1e3 * float(np.median(res.iteration_times[1:] if len(res.iteration_times) > 1 else res.iteration_times))
        cpu_it = cpu_ms[method][0] + cpu_ms[method][1] if method in cpu_ms else None
        rows.append({"method": method, "op": "osem iteration", "ms": it_ms})
        records.append(stamp({"case": "osem_iteration", "method": method, "op": "iteration", "ms": it_ms,
                              "speedup_vs_cpu": cpu_it / it_ms if cpu_it else None,
                              "note": "13 subsets x 10 angles, data on the GPU; CPU reference = its fp + bp time"}))
        print(f"  OSEM iteration ({method}): {it_ms:.1f} ms", flush=True)

    for r in rows:
        if r["method"] in gpu_ms and r["op"] in ("fp", "bp"):
            r["x_cpu_same"], r["x_cpu_fast"] = vs_cpu(r["method"], r["op"], r["ms"])
    if "fast" in gpu_ms:
        fast_fp, fast_bp = gpu_ms["fast"]
        print(f"\nfast: {fast_floor / fast_fp:.0%} (fp) / {fast_floor / fast_bp:.0%} (bp) of the FMA floor")
    if "faithful" in gpu_ms:
        print(f"faithful: fp at {counts['faithful_fwd_bilinear'] / (gpu_ms['faithful'][0] * 1e-3) / 1e12:.2f} T bilinear fetches/s, "
          f"bp at {counts['faithful_back_bilinear'] / (gpu_ms['faithful'][1] * 1e-3) / 1e12:.2f} T/s")
    print_table(rows, ["method", "op", "ms", "x_cpu_same", "x_cpu_fast", "note"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
