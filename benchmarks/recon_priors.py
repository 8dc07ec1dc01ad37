"""Prior and penalised-reconstruction benchmark (issue 19): the relative difference prior on the GPU
against its memory floor, and a BSREM pass against a block-RAMLA pass at DIRECT paper size.

1. RDP gradient (and value + gradient) on 288 x 288 x 96 float32 (26 neighbours, kappa off and on):
   the compiled CUDA kernel (csrc/recon/prior_cuda.cu) and, as the baseline, the vectorised CuPy path (13 shifted-slice passes),
   timed with CUDA events on random (never constant) images. Floor: the bytes that must move, the
   image read once and the gradient written once (8 bytes per voxel; 12 with kappa), at the H200's
   4.8 TB/s HBM3e peak.
2. One pass of BSREM (RDP) and of block-RAMLA over the 120 one-view subsets of the [HA] sphere phantom
   (144 x 144 x 48, variant1 kernel, model-consistent data with sensitivity x attenuation and randoms),
   both from the algorithms' own per-pass timers; issue 19 asks BSREM <= 1.2 x.

3. ``--cpu``: the RDP gradient on the CPU, the compiled OpenMP pass (csrc/recon/prior_cpu.cpp)
   against the vectorised NumPy path on the same float32 image (13 shifted-slice passes), at the
   DIRECT ``cpu`` notebook size (96 x 96 x 8) and the FIRST full image (175 x 175 x 59); wall time,
   median of repeats, every core of the machine.

    python benchmarks/recon_priors.py [--out FILE] [--quick] [--cpu]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import directpet as dp
from directpet import recon
from directpet.direct import HistoImageProjector, SRKernel, ViewSet, ViewSubsets
from directpet.recon import RelativeDifferencePrior

from _common import gpu_name, print_table, stamp, time_device, write_records
from direct_recon import make_data

HBM_PEAK_TBS = 4.8        # H200 HBM3e, the data sheet's peak


def prior_records(cupy, quick: bool):
    gpu = gpu_name()
    shape = (96, 288, 288)
    rng = cupy.random.default_rng(7)
    images = [rng.gamma(2.0, 1.0, shape).astype(cupy.float32) + 0.01 for _ in range(3)]
    kappa = rng.uniform(0.5, 1.5, shape).astype(cupy.float32)
    n = int(np.prod(shape))
    out = cupy.empty(shape, cupy.float32)
    records = []
    for label, kap in (("rdp_gradient", None), ("rdp_gradient_kappa", kappa)):
        prior = RelativeDifferencePrior(1.0, (2.0, 2.0, 2.0), gamma=2.0, epsilon=0.01, kappa=kap)
        fused = time_device(lambda i: prior.gradient(images[i % 3], out=out, check=False), repeat=5 if quick else 15)
        # the baseline: the same sums through the vectorised path (float64 images take it)
        slow_imgs = [im.astype(cupy.float64) for im in images[:1]]
        sliced = time_device(lambda i: prior.gradient(slow_imgs[0], check=False), repeat=3 if quick else 5)
        floor_bytes = n * (12 if kap is not None else 8)
        floor_ms = floor_bytes / (HBM_PEAK_TBS * 1e12) * 1e3
        records.append(stamp(dict(case=label, shape=list(shape), ms=fused, baseline="vectorised CuPy, float64",
                                  baseline_ms=sliced, speedup=sliced / fused, floor_bytes=floor_bytes,
                                  floor_ms=floor_ms, fraction_of_floor=floor_ms / fused), device=gpu))
    prior = RelativeDifferencePrior(1.0, (2.0, 2.0, 2.0), gamma=2.0, epsilon=0.01)
    both = time_device(lambda i: (prior.value(images[i % 3], check=False),
                                  prior.gradient(images[i % 3], out=out, check=False)), repeat=5 if quick else 15)
    floor_ms = n * 12 / (HBM_PEAK_TBS * 1e12) * 1e3     # read x, write the gradient and the value partials
    records.append(stamp(dict(case="rdp_value_and_gradient", shape=list(shape), ms=both, floor_ms=floor_ms,
                              fraction_of_floor=floor_ms / both, note="two launches and one float64 reduction"),
                         device=gpu))
    return records


def pass_records(cupy, quick: bool):
    gpu = gpu_name()
    grid = dp.ImageGrid((48, 144, 144), 4.0)
    viewset = ViewSet(40, 3)
    op = HistoImageProjector(grid, viewset, SRKernel.clinical(), backend="cuda", check_finite=False)
    data, _ = make_data(grid, viewset, op, cupy)
    problem = ViewSubsets(op, data)
    level = float(data.prompts.sum()) / float(recon.sensitivity_image(problem).sum())
    prior = RelativeDifferencePrior(0.1, grid, gamma=2.0, epsilon=1e-3 * level)
    n = 2 if quick else 4
    recon.block_ramla(problem, 1, progress=False)                    # warm-up: LUTs, kernels
    recon.bsrem(problem, prior, 1, lambda0=0.03, gamma=0.05, progress=False)
    ramla = recon.block_ramla(problem, n, progress=False)
    bsrem = recon.bsrem(problem, prior, n, lambda0=0.03, gamma=0.05, progress=False)
    ms_r = 1e3 * float(np.median(ramla.iteration_times))
    ms_b = 1e3 * float(np.median(bsrem.iteration_times))
    return [stamp(dict(case="pass_block_ramla_variant1", ms=ms_r, n_subsets=problem.n_subsets), device=gpu),
            stamp(dict(case="pass_bsrem_rdp_variant1", ms=ms_b, n_subsets=problem.n_subsets, ratio_to_block_ramla=ms_b / ms_r,
                       target_ratio=1.2), device=gpu)]


def cpu_records(quick: bool):
    """The compiled CPU pass against the vectorised NumPy path (the Python-level loop over the 13
    pair directions, forced by handing it a non-contiguous view of the same float32 image)."""
    import time

    from _common import cpu_device

    records = []
    for shape in ((8, 96, 96), (59, 175, 175)):
        rng = np.random.default_rng(3)
        x = (rng.gamma(2.0, 1.0, shape) + 0.01).astype(np.float32)
        strided = np.zeros(shape[:2] + (2 * shape[2],), np.float32)
        strided[..., ::2] = x
        view = strided[..., ::2]                      # the same values, not C-contiguous
        prior = RelativeDifferencePrior(1.0, (2.0, 2.0, 2.0), gamma=2.0, epsilon=0.01)
        assert prior._fused(x, np) and not prior._fused(view, np)

        def wall(image, repeat):
            out = np.empty(shape, np.float32)
            prior.gradient(image, out=out, check=False)
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                prior.gradient(image, out=out, check=False)
                times.append(time.perf_counter() - t)
            return 1e3 * float(np.median(times))

        compiled = wall(x, 5 if quick else 20)
        vectorised = wall(view, 3 if quick else 5)
        n = int(np.prod(shape))
        records.append(stamp(dict(case="rdp_gradient_cpu", shape=list(shape), ms=compiled, ns_per_voxel=1e6 * compiled / n,
                                  baseline="vectorised NumPy, float32", baseline_ms=vectorised,
                                  speedup=vectorised / compiled, threads=os.cpu_count()),
                             device=f"{cpu_device()}"))
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "recon_priors.json"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="the CPU records only (no GPU needed)")
    args = ap.parse_args()
    if args.cpu:
        records = cpu_records(args.quick)
        print_table(records, ["case", "shape", "ms", "ns_per_voxel", "baseline_ms", "speedup"])
        write_records(records, args.out)
        return
    import cupy

    records = prior_records(cupy, args.quick) + pass_records(cupy, args.quick)
    print_table(records, ["case", "ms", "baseline_ms", "speedup", "floor_ms", "fraction_of_floor",
                          "ratio_to_block_ramla"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
