"""DIRECT projector benchmark on one GPU (issue: DIRECT on the GPU).

Per view FP and BP at 144x144x48 with 4 mm voxels for
  stress     900 ps, radial 10 -> 100 mm linear in |s|, axial 10 mm  ([HA] Table II)
  clinical   400 ps, variant1 (4.8 -> 10 mm), axial 5.8 mm             ([HA] reconstruction kernel)
  invariant  400 ps, 5.8 / 5.8 mm
with the CUDA schemes tlp / ilp (the paper's, as baselines) and default, cuFFT (spatial-exact),
the low-rank FFT path, FFTW with 1 and all threads, and the CPU spatial backend; plus the 2 mm voxel
case (288x288x96, 375 ps / 6.5 mm as in [HA] Fig. 4 bottom) and a TOF sweep 300 -> 1200 ps
(LOR 10 / 5 mm, [HA] Fig. 4 top).

Timing: CUDA events around back-to-back launches (through the projectors' bare `launcher`, so no
Python-side checks are timed) on device-resident CuPy arrays (inputs rotate among 16 random
images, 64 MB > L2), median of repeats; CPU: wall clock, median. The end-to-end Python call adds
a few tens of microseconds per view (recorded by benchmarks/direct_recon.py). One oblique tilted view
(phi = 31.5 deg, theta = +6.67 deg) stands for "a view". rel_err = ||y - y_exact|| / ||y_exact|| on
a random image against the default exact projector, for the approximate / FFT methods.

Floor per op: FLOPs = 2 |mSR| N_vox (one multiply-add per voxel and offset) at the fp32 FMA rate,
bytes = read + write of one volume; the larger time is printed as floor_ms.

    python benchmarks/direct_projectors.py [--out FILE] [--quick] [--skip-cpu] [--cases a,b] [--methods a,b]

--cases / --methods keep only the named cases / methods (e.g. for benchmarks/before_after.py).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import directpet as dp
from directpet import direct
from directpet.direct import HistoImageProjector, SRKernel, View

from _common import cpu_name, gpu_name, print_table, rel_err, stamp, time_device, time_host, today, write_records

FP32_TFLOPS = 67.0   # H100 SXM / H200 dense fp32 (datasheet); floor only
HBM_TBPS = 3.0       # measured device-to-device copy on the H100 of this workplace (KINDS.md)
VIEW = View.from_degrees(31.5, 6.67)


def floor_ms(n_offsets, n_vox):
    return max(2.0 * n_offsets * n_vox / (FP32_TFLOPS * 1e12), 8.0 * n_vox / (HBM_TBPS * 1e12)) * 1e3


class Bench:
    def __init__(self, args):
        import cupy

        self.cp, self.args = cupy, args
        self.records = []
        self.device = gpu_name()
        self.rng = np.random.default_rng(20261121)

    def inputs(self, grid):
        xs = [self.rng.random(grid.shape, dtype=np.float32) + 0.05 for _ in range(16 if not self.args.quick else 4)]
        return xs, [self.cp.asarray(x) for x in xs]

    def add(self, **rec):
        self.records.append(stamp(rec, device=rec.get("device", self.device)))

    def gpu_op(self, launch, grid, xs_dev):
        """Device time (ms) of one projection through the bare launcher (no Python-side checks)."""
        import time

        out = self.cp.empty(grid.shape, dtype=self.cp.float32)
        ptrs = [x.data.ptr for x in xs_dev]
        launch(ptrs[0], out.data.ptr)
        self.cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        launch(ptrs[1 % len(ptrs)], out.data.ptr)
        self.cp.cuda.Device().synchronize()
        est = (time.perf_counter() - t0) * 1e3
        inner = max(1, min(50, int(20.0 / max(est, 1e-3))))
        repeat = 3 if est > 50 else 11
        return time_device(lambda k: launch(ptrs[k % len(ptrs)], out.data.ptr), repeat=repeat, warmup=1, inner=inner)

    def run_case(self, case, grid, kernel, methods, exact_ref=True):
        if self.args.cases and case not in self.args.cases.split(","):
            return
        if self.args.methods:
            methods = [m for m in methods if m in self.args.methods.split(",")]
        xs, xs_dev = self.inputs(grid)
        exact = HistoImageProjector(grid, [VIEW], kernel, backend="cuda", check_finite=False)
        lut = exact.lut(0)
        n = lut.n_offsets
        src = {"fp": xs[0], "bp": xs[0][None]}    # an image; a one-view histo-image stack (1, nz, ny, nx)
        y_exact = {"fp": exact.forward(src["fp"], 0), "bp": exact.adjoint(src["bp"], 0)}
        for method in methods:
            try:
                ops = self.make(method, grid, kernel, exact)
            except Exception as e:  # report and go on: one broken method must not hide the others
                print(f"  {case}/{method}: could not be built: {type(e).__name__}: {e}")
                continue
            if ops is None:
                continue
            ops_obj, on_gpu = ops
            for opname in ("fp", "bp"):
                fn = ops_obj.forward if opname == "fp" else ops_obj.adjoint
                if on_gpu:
                    ms = self.gpu_op(ops_obj.launcher(opname == "fp", 0), grid, xs_dev)
                else:
                    out = np.empty(y_exact[opname].shape, np.float32)
                    ms = time_host(lambda: fn(src[opname], 0, out=out), repeat=1 if case == "stress" else 3)
                err = None
                if method in ("lowrank", "lowrank_1e-4", "cufft", "fftw1", "fftw_all", "tlp", "ilp", "cpu", "slab_r16"):
                    y = fn(src[opname], 0)
                    y = self.cp.asnumpy(y) if on_gpu and not isinstance(y, np.ndarray) else y
                    err = rel_err(y, y_exact[opname])
                rec = dict(case=case, method=method, op=opname, ms=ms, rel_err=err, n_offsets=n,
                           shape=list(grid.shape), floor_ms=floor_ms(n, grid.n_voxels))
                if method.startswith("lowrank"):
                    rec["rank"] = int(ops_obj.rank(0))
                lut_dev = ops_obj._engine.device_lut(0) if on_gpu and method in ("default", "slab_table", "slab_r16") else None
                if hasattr(lut_dev, "slab_launch"):   # builds before issue 17 do not say
                    rec["launch"] = lut_dev.slab_launch(opname == "fp", method)
                if not on_gpu:
                    rec["device"] = cpu_name() + f" ({os.cpu_count()} threads)" if method != "fftw1" else cpu_name() + " (1 thread)"
                self.add(**rec)

    def make(self, method, grid, kernel, exact):
        kw = dict(check_finite=False)
        if method in ("default", "tlp", "ilp", "slab_table", "slab_r16", "columns"):
            return HistoImageProjector(grid, [VIEW], kernel, backend="cuda", method=method, luts={0: exact.lut(0)}, **kw), True
        if method == "cpu":
            return HistoImageProjector(grid, [VIEW], kernel, backend="cpu", luts={0: exact.lut(0)}, **kw), False
        if method in ("lowrank", "lowrank_1e-4"):   # kernel error 1e-3 (the earlier records) or 1e-4
            tol = 1e-4 if method == "lowrank_1e-4" else 1e-3
            return direct.LowRankProjector(grid, [VIEW], kernel, tol=tol, backend="cuda", **kw), True
        if method in ("cufft", "fftw1", "fftw_all"):
            if not hasattr(direct, "FFTProjector"):
                print("  (FFTProjector not available: skipped)")
                return None
            backend = "cuda" if method == "cufft" else "cpu"
            threads = 1 if method == "fftw1" else None
            return direct.FFTProjector(grid, [VIEW], kernel, mode="spatial-exact", backend=backend, threads=threads, **kw), method == "cufft"
        raise ValueError(method)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_projectors.json"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true", help="leave out the CPU / FFTW timings")
    ap.add_argument("--cases", default="", help="only these cases (comma-separated; default all)")
    ap.add_argument("--methods", default="", help="only these methods (comma-separated; default all)")
    args = ap.parse_args()
    b = Bench(args)
    grid4 = dp.ImageGrid((48, 144, 144), 4.0)
    cpu_methods = [] if args.skip_cpu else ["cpu"]
    fftw = [] if args.skip_cpu else ["fftw1", "fftw_all"]
    # variants of the column scheme (tuning record); slab_r16: the default before issue 17 (baseline)
    tuned = ["slab_r16", "slab_table", "columns"]
    b.run_case("stress", grid4, SRKernel.stress(), ["default"] + tuned + ["ilp", "tlp", "lowrank"] + cpu_methods)
    b.run_case("clinical", grid4, SRKernel.clinical(), ["default"] + tuned + ["ilp", "tlp", "lowrank"] + cpu_methods)
    b.run_case("invariant", grid4, SRKernel.invariant(), ["default"] + tuned + ["ilp", "tlp", "cufft"] + fftw + cpu_methods)
    if not args.quick:
        fig4 = SRKernel.invariant(tof_fwhm_ps=375.0, fwhm=6.5)
        b.run_case("voxel4mm", grid4, fig4, ["default", "cufft"] + fftw[:1])
        b.run_case("voxel2mm", dp.ImageGrid((96, 288, 288), 2.0), fig4, ["default", "cufft"] + fftw[:1])
        for tof in (300, 600, 900, 1200):
            b.run_case(f"tof{tof}", grid4, SRKernel(tof_fwhm_ps=tof, radial_fwhm=10.0, axial_fwhm=5.0), ["default", "cufft"])
    # the spatially variant clinical kernel at 2 mm (3261 taps): the exact paths and the low-rank FFT
    # path at the kernel accuracy select_projector defaults to (also with --quick: issue 17's case)
    b.run_case("variant1_2mm", dp.ImageGrid((96, 288, 288), 2.0), SRKernel.clinical(),
               ["default", "slab_r16", "lowrank_1e-4"])
    # Ratios to the default method of the same case and op.
    base = {(r["case"], r["op"]): r["ms"] for r in b.records if r["method"] == "default"}
    for r in b.records:
        d = base.get((r["case"], r["op"]))
        r["ratio_to_default"] = r["ms"] / d if d else None
        r["floor_fraction"] = r["floor_ms"] / r["ms"] if r["method"] == "default" else None
    print(f"GPU: {b.device}; CPU: {cpu_name()} ({os.cpu_count()} threads); date {today()}")
    print_table(b.records, ["case", "method", "op", "n_offsets", "ms", "ratio_to_default", "floor_ms", "floor_fraction", "rel_err", "rank"])
    for r in b.records:  # the launch each slab variant chose (tile, z-run, staging)
        if r.get("launch"):
            print(f"  {r['case']}/{r['method']}/{r['op']}: {r['launch']}")
    write_records(b.records, args.out)


if __name__ == "__main__":
    main()
