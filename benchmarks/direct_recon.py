"""DIRECT reconstruction benchmark (issue: DIRECT reconstruction end to end).

One full block-RAMLA iteration (120 views, 144x144x48, 4 mm, 400 ps, variant1) end to end from
Python with data resident on the GPU, split into projection (the 120 forward + 120 back
projections alone, timed in the same run) and everything else, and the same projections through the
bare launchers (launch_ms wall, launch_device_ms between CUDA events; projection_ms - launch_ms is
the Python API's cost where the GPU waits for the host); the same on the CPU backend with
all threads; and event simulation + deposition throughput on the GPU.

Data: the sphere phantom's model-consistent Poisson data with sensitivity x attenuation and a
randoms background (docs: Physics › DIRECT, corrections), all CuPy arrays on the device.

    python benchmarks/direct_recon.py [--out FILE] [--quick] [--skip-cpu] [--cases a,b] [--skip-events]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import directpet as dp
from directpet import direct, recon, sim
from directpet.direct import FFTProjector, HistoImageProjector, SRKernel, ViewSet, ViewSubsets

from _common import cpu_name, gpu_name, print_table, stamp, today, write_records


def make_data(grid, viewset, op, xp, seed=1):
    truth, info = sim.sphere_phantom(grid)
    scanner = direct.CylindricalScanner()
    sens = direct.sensitivity_attenuation(grid, viewset, info, scanner, xp=xp)
    bg = direct.randoms_background(grid, viewset, scanner, total=0.2 * 430e6, xp=xp)
    rng = xp.random.default_rng(seed) if xp is not np else np.random.default_rng(seed)
    return direct.model_consistent_data(op, xp.asarray(truth), factors=sens, background=bg, counts=430e6, seed=rng,
                                        viewset=viewset), info


def iteration_ms(op, data, n=3):
    """Median wall time (ms) of one block-RAMLA pass (120 view updates; setup and the
    sensitivity image excluded), from the reconstruction's own per-iteration timer."""
    res = recon.block_ramla(ViewSubsets(op, data), n, progress=False)
    return 1e3 * float(np.median(res.iteration_times))


def projection_ms(op, data, xp, sync, n=3):
    """The 120 forward and 120 back projections of one iteration alone (median over n passes)."""
    x = xp.ones(op.grid.shape, dtype=xp.float32)
    y = xp.empty((1,) + op.grid.shape, dtype=xp.float32)     # one view's histo-image stack
    b = xp.empty(op.grid.shape, dtype=xp.float32)
    ts = []
    for _ in range(n + 1):
        sync()
        t0 = time.perf_counter()
        for v in range(op.n_views):
            op.forward(x, v, out=y)
            op.adjoint(data.prompts[v:v + 1], v, out=b)
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts[1:]))


def launch_ms(op, data, cupy, n=3):
    """The same 240 projections through the bare launchers (no Python-side checks, staging or output
    allocation: what the GPU needs when the host keeps up), wall time with a synchronisation at the
    end, and the device time between CUDA events; median over n passes."""
    x = cupy.ones(op.grid.shape, dtype=cupy.float32)
    y = cupy.empty(op.grid.shape, dtype=cupy.float32)
    b = cupy.empty(op.grid.shape, dtype=cupy.float32)
    fps = [op.launcher(True, v) for v in range(op.n_views)]
    bps = [op.launcher(False, v) for v in range(op.n_views)]
    src = [data.prompts[v].data.ptr for v in range(op.n_views)]
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    walls, device = [], []
    for _ in range(n + 1):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        start.record()
        for v in range(op.n_views):
            fps[v](x.data.ptr, y.data.ptr)
            bps[v](src[v], b.data.ptr)
        stop.record()
        stop.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
        device.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(walls[1:])), float(np.median(device[1:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "direct_recon.json"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--cases", default="", help="only these iteration cases (comma-separated; default all)")
    ap.add_argument("--skip-events", action="store_true", help="leave out the event simulation + deposition runs")
    args = ap.parse_args()
    import cupy

    sync = cupy.cuda.Device().synchronize
    gpu, cpu = gpu_name(), cpu_name() + f" ({os.cpu_count()} threads)"
    grid = dp.ImageGrid((48, 144, 144), 4.0)
    viewset = ViewSet(40, 3)
    records = []
    cases = [("iteration_variant1", lambda b: HistoImageProjector(grid, viewset, SRKernel.clinical(), backend=b, check_finite=False)),
             ("iteration_invariant", lambda b: HistoImageProjector(grid, viewset, SRKernel.invariant(), backend=b, check_finite=False)),
             ("iteration_invariant_fft", lambda b: FFTProjector(grid, viewset, SRKernel.invariant(), backend=b, check_finite=False))]
    for case, make in cases:
        if args.cases and case not in args.cases.split(","):
            continue
        op = make("cuda")
        data, _ = make_data(grid, viewset, op, cupy)
        iteration_ms(op, data, 1)  # warm-up: LUT upload, plans
        ms = iteration_ms(op, data, 2 if args.quick else 3)
        pm = projection_ms(op, data, cupy, sync)
        lm, lm_dev = launch_ms(op, data, cupy)
        # projection_ms - launch_ms: the Python API's cost per iteration where the GPU waits for it
        records.append(stamp(dict(case=case, backend="cuda", ms=ms, projection_ms=pm, other_ms=ms - pm,
                                  other_fraction=(ms - pm) / ms, launch_ms=lm, launch_device_ms=lm_dev,
                                  api_overhead_ms=pm - lm), device=gpu))
        if not args.skip_cpu and case != "iteration_invariant":
            op_c = make("cpu")
            data_c = data.to(np)
            ms_c = iteration_ms(op_c, data_c, 1)  # the update pass alone, as on the GPU
            pm_c = projection_ms(op_c, data_c, np, lambda: None, n=1)
            records.append(stamp(dict(case=case, backend="cpu", ms=ms_c, projection_ms=pm_c, other_ms=ms_c - pm_c,
                                      other_fraction=(ms_c - pm_c) / ms_c), device=cpu))
        del op, data
        cupy.get_default_memory_pool().free_all_blocks()

    # Event simulation + deposition throughput on the GPU (sphere phantom, 40 x 3 views): the
    # compiled kernel (simulate) and, as the baseline, the vectorised CuPy path.
    truth, info = sim.sphere_phantom(grid)
    scanner = direct.CylindricalScanner()
    n_fast = 43_000_000 if args.quick else 430_000_000
    n_cupy = 20_000_000
    runs = (("event_simulation_deposition", n_fast,
             lambda k: direct.simulate(scanner, info, n_trues=k, seed=3, backend="cuda", grid=grid, viewset=viewset)),
            ("event_simulation_deposition_cupy", n_cupy,
             lambda k: direct.deposit(direct.simulate_events(scanner, info, k, seed=3, xp=cupy, progress=False),
                                   grid, viewset, xp=cupy)),
            ("event_simulation_cupy", n_cupy,
             lambda k: sum(int(b.p1.shape[0]) for b in direct.simulate_events(scanner, info, k, seed=3, xp=cupy,
                                                                         progress=False))))
    for what, n, fn in (() if args.skip_events else runs):
        fn(2_000_000)
        sync()
        t0 = time.perf_counter()
        fn(n)
        sync()
        dt = time.perf_counter() - t0
        records.append(stamp(dict(case=what, backend="cuda", ms=dt * 1e3, events=n, events_per_s=n / dt), device=gpu))
    if not args.skip_events:
        t0 = time.perf_counter()
        direct.simulate(scanner, info, n_trues=20_000_000, seed=3, backend="cpu", grid=grid, viewset=viewset)
        dt = time.perf_counter() - t0
        records.append(stamp(dict(case="event_simulation_deposition", backend="cpu", ms=dt * 1e3, events=20_000_000,
                                  events_per_s=20e6 / dt), device=cpu))
    print(f"GPU: {gpu}; CPU: {cpu}; date {today()}")
    print_table(records, ["case", "backend", "ms", "projection_ms", "launch_ms", "launch_device_ms", "api_overhead_ms",
                          "other_ms", "other_fraction", "events_per_s"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
