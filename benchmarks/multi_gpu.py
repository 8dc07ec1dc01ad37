"""One DIRECT OSEM reconstruction on 1 and on several GPUs (one process per GPU, NCCL all-reduce).

Cases (the [HA] scanner, 40 x 3 = 120 views in 8 OSEM blocks of 15 views, the spatially variant
`variant1` kernel, model-consistent data of the sphere phantom with sensitivity x attenuation,
randoms and 430 M counts):

* ``osem_paper``: 144 x 144 x 48 voxels of 4 mm (the paper's size);
* ``osem_2mm``: 288 x 288 x 96 voxels of 2 mm (target: >= 1.8x on 2 GPUs).

Each GPU count runs in fresh processes (``directpet.parallel.run_on_gpus``). One GPU runs the plain
``ViewSubsets`` with its data resident (no communicator): the baseline. N GPUs run
``DistributedSubsets(problem.share(rank, N, xp=cupy), comm)``: each process keeps its 1/N of every
block's views resident, projects them and the back projections are summed by NCCL. Time: the
reconstruction's own per-iteration wall time (device synchronised at both ends; sensitivity images
and data set-up excluded), median of the iterations after the first. The N-GPU image is compared with
the 1-GPU image (largest difference relative to the image maximum).

Floor: the views are split, not the voxels: a block of 15 views gives its GPUs 8 and 7 views (on 2),
and every block ends in an all-reduce, so an iteration takes at least t1 x (the most views a GPU
holds) / 120 (the 1-GPU time per view; 1.875x at most on 2 GPUs) plus the 8 all-reduces of the image
per iteration at --bus-gbps of NCCL bus bandwidth.

    python benchmarks/multi_gpu.py [--cases osem_paper,osem_2mm] [--gpus 1,2] [--iterations 4]
        [--kernel variant1] [--backend auto|nccl|torch] [--json benchmarks/results/multi_gpu.json]

Records (merged into --json; other cases, e.g. the Dask sweep's, are kept): case, gpus, ms,
speedup, device, date, command, commit, grid, voxel_mm, views, subsets, kernel, iterations, comm,
max_rel_diff.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import gpu_name, print_table, stamp, write_records  # noqa: E402

CASES = {"osem_paper": ((48, 144, 144), 4.0), "osem_2mm": ((96, 288, 288), 2.0)}


def rank_run(comm, case, kernel_name, n_iter, seed):
    """One process's reconstruction: its per-iteration times and (rank 0) the image."""
    import time

    import cupy as cp

    from directpet import direct, recon, sim
    from directpet.direct import HistoImageData, HistoImageProjector, SRKernel, ViewSubsets
    from directpet.geometry import ImageGrid
    from directpet.parallel import DistributedSubsets

    t0 = time.perf_counter()
    shape, voxel = CASES[case]
    grid = ImageGrid(shape, voxel)
    scanner = direct.CylindricalScanner()
    viewset = scanner.viewset(40, 3)
    op = HistoImageProjector(grid, viewset, SRKernel.clinical(kernel_name), backend="cuda", check_finite=False)
    truth, info = sim.sphere_phantom(grid, length_mm=min(250.0, grid.nz * voxel))
    sens = direct.sensitivity_attenuation(grid, viewset, info, scanner, xp=cp)
    bg = direct.randoms_background(grid, viewset, scanner, total=0.2 * 430e6, xp=cp)
    full = direct.model_consistent_data(op, cp.asarray(truth), factors=sens, background=bg, counts=430e6,
                                        seed=cp.random.default_rng(seed), viewset=viewset)
    del sens, bg
    if comm.size == 1:                       # the baseline: everything resident, no communicator
        problem = ViewSubsets(op, full, 8)
    else:                                    # the parent on the host; only the share goes to the GPU
        host = HistoImageData(cp.asnumpy(full.prompts), grid, viewset, cp.asnumpy(full.factors),
                              cp.asnumpy(full.background))
        del full
        cp.get_default_memory_pool().free_all_blocks()
        problem = DistributedSubsets(ViewSubsets(op, host, 8).share(comm.rank, comm.size, xp=cp), comm)
    setup_s = time.perf_counter() - t0
    res = recon.osem(problem, n_iter, progress=False)
    share_views = sum(int(np.prod(problem.subset_shape(s)[:1])) for s in range(problem.n_subsets))
    return {"times": [float(t) for t in res.iteration_times], "setup_s": setup_s, "views": share_views,
            "image": cp.asnumpy(res.image) if comm.rank == 0 else None,
            "gpu_bytes": int(cp.get_default_memory_pool().used_bytes())}


def floor_ms(ref_ms, views_per_gpu, image_bytes, n_gpus, bus_gbps):
    """The 1-GPU time of the views the busiest GPU holds plus 8 ring all-reduces of the image."""
    comm = 8 * 2 * (n_gpus - 1) / n_gpus * image_bytes / (bus_gbps * 1e9) * 1e3 if n_gpus > 1 else 0.0
    return ref_ms * max(views_per_gpu) / 120 + comm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="osem_paper,osem_2mm")
    ap.add_argument("--gpus", default="1,2", help="GPU counts to run (the first is the reference)")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--kernel", default="variant1")
    ap.add_argument("--backend", default="auto", help="communicator: auto, nccl (CuPy) or torch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bus-gbps", type=float, default=300.0, help="nominal NCCL bus bandwidth for the floor")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "multi_gpu.json"))
    args = ap.parse_args()

    import directpet as dp
    from directpet.parallel import resolve_comm_backend, run_on_gpus

    n_avail = dp.cuda_device_count()
    counts = [int(g) for g in args.gpus.split(",")]
    counts = [g for g in counts if g <= n_avail]
    if not counts:
        raise SystemExit(f"--gpus {args.gpus}: only {n_avail} GPU(s) here")
    comm_kind = resolve_comm_backend(args.backend)
    device = gpu_name()
    print(f"{n_avail} x {device}; communicator {comm_kind}; kernel {args.kernel}; {args.iterations} OSEM iterations "
          f"(8 subsets of 15 views)")
    records, rows = [], []
    for case in args.cases.split(","):
        shape, voxel = CASES[case]
        image_bytes = 4 * int(np.prod(shape))
        ref_ms = ref_image = None
        for g in counts:
            out = run_on_gpus(rank_run, g, args=(case, args.kernel, args.iterations, args.seed),
                              backend=args.backend, timeout_s=580)
            per_rank = [np.median(o["times"][1:] if len(o["times"]) > 1 else o["times"]) for o in out]
            ms = 1e3 * float(max(per_rank))
            image = out[0]["image"]
            if ref_ms is None:
                ref_ms, ref_image = ms, image
            diff = float(np.abs(image - ref_image).max() / np.abs(ref_image).max())
            floor = floor_ms(ref_ms, [o["views"] for o in out], image_bytes, g, args.bus_gbps)
            rec = {"case": case, "gpus": g, "ms": ms, "speedup": ref_ms / ms if counts[0] == 1 else None,
                   "grid": list(shape[::-1]), "voxel_mm": voxel, "views": 120,
                   "subsets": 8, "kernel": args.kernel, "iterations": args.iterations,
                   "comm": comm_kind if g > 1 else "none", "max_rel_diff": diff,
                   "first_iteration_ms": 1e3 * max(o["times"][0] for o in out),
                   "setup_s": max(o["setup_s"] for o in out), "views_per_gpu": [o["views"] for o in out],
                   "gpu_pool_bytes": [o["gpu_bytes"] for o in out], "floor_ms": floor}
            records.append(stamp(rec, device=device))
            rows.append({"case": case, "gpus": g, "ms / iteration": ms, "speed-up": rec["speedup"],
                         "floor ms": floor, "% of floor": 100 * floor / ms, "max rel diff": diff})
            print(f"  {case} on {g} GPU(s): {ms:.1f} ms per iteration (first {rec['first_iteration_ms']:.1f} ms; "
                  f"set-up {rec['setup_s']:.1f} s); views per GPU {rec['views_per_gpu']}; vs 1 GPU x"
                  f"{ref_ms / ms:.2f}, image max rel diff {diff:.2e}", flush=True)
    print()
    print_table(rows, ["case", "gpus", "ms / iteration", "speed-up", "floor ms", "% of floor", "max rel diff"])
    old = []
    if os.path.exists(args.json):
        with open(args.json) as f:
            old = json.load(f)
    key = lambda r: (r.get("case"), r.get("gpus"), r.get("device"), r.get("workers"), r.get("size"))  # noqa: E731
    new_keys = {key(r) for r in records}
    write_records([r for r in old if key(r) not in new_keys] + records, args.json)
    print(f"wrote {len(records)} records to {args.json}")


if __name__ == "__main__":
    main()
