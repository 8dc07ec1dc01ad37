"""File to image: a PETSIRD list-mode file through ``reconstruct_petsird``, timed per stage (issue 18).

A file of random coincidences of the default ring scanner (crystal pairs across the ring within the
acceptance, random TOF bins; prompts plus 20 % delayeds; crystal efficiencies drawn around 1) and a
water-cylinder μ-map as NIfTI on a grid twice as fine in-plane are written once; then the whole call
runs: prompts and delayeds read and deposited in one pass (compiled), randoms smoothed from the
delayeds, normalisation, attenuation,
the projector chosen (select_projector, the workflow's default), block-RAMLA and the NIfTI written, twice on the GPU (the first run also compiles CuPy's kernels) and
once on the CPU at a reduced size. The floor of the read is the file's bytes at the page cache's
``readinto`` rate, measured on the same file.

    python benchmarks/time_to_image.py [--events 4.3e8] [--iterations 40] [--cpu-events 8e6]
                                       [--cpu-iterations 5] [--skip-cpu] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import cpu_name, gpu_name, print_table, stamp, write_records  # noqa: E402
from io_petsird import random_coincidences  # noqa: E402

from directpet.direct import CylindricalScanner, reconstruct_petsird  # noqa: E402
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.io import save_nifti  # noqa: E402
from directpet.io.petsird import PetsirdScanner, PetsirdWriter  # noqa: E402
from directpet.sim.phantoms import WaterCylinder  # noqa: E402


def write_scan(path, n_prompts, scanner, rng, block=5_000_000):
    eps = rng.normal(1.0, 0.05, direct_petsird.ring_shape(direct_petsird.scanner_header(scanner))).clip(0.8, 1.2)
    header = direct_petsird.scanner_header(scanner, crystal_efficiencies=eps)
    crystals = PetsirdScanner(header.scanner)
    n_per_ring, n_rings = direct_petsird.ring_shape(header)
    n_tof = crystals.tof_edges_mm(0, 0).size - 1
    with PetsirdWriter(path, header) as w:
        for start in range(0, n_prompts, block):
            k = min(block, n_prompts - start)
            w.write_block(prompts={(0, 0): random_coincidences(k, n_per_ring, n_rings, n_tof, rng)},
                          delayeds={(0, 0): random_coincidences(k // 5, n_per_ring, n_rings, n_tof, rng)})
    return os.path.getsize(path)


def readinto_seconds(path) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        buf = bytearray(1 << 24)
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


def case(path, mu_path, grid, iterations, backend, out, label, file_bytes, device):
    r = reconstruct_petsird(path, grid, mu=mu_path, n_iter=iterations, backend=backend, out=out, progress=False)
    read_floor = readinto_seconds(path)            # the same bytes through the page cache
    rec = dict(case="time_to_image", run=label, backend=backend, shape=list(grid.shape), iterations=iterations,
               prompts=r.n_prompts, delayeds=r.n_delayeds, file_gb=file_bytes / 1e9,
               total_s=r.wall_s, other_s=r.wall_s - sum(r.timings.values()), read_floor_s=read_floor,
               events_mev_s=(r.n_prompts + r.n_delayeds) / r.timings["events"] / 1e6, target_events_mev_s=300.0,
               target_total_s=4.0,
               projector=r.projector.method, projector_candidates_ms=r.projector.ms,
               **{f"{k}_s": v for k, v in r.timings.items()})
    print(f"\n{label} ({backend}):\n{r.summary()}")
    return stamp(rec, device=device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=4.3e8, help="prompts in the GPU file")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--cpu-events", type=float, default=8e6, help="prompts in the CPU file")
    ap.add_argument("--cpu-iterations", type=int, default=5)
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "time_to_image.json"))
    args = ap.parse_args()
    import directpet

    scanner = CylindricalScanner()
    rng = np.random.default_rng(18)
    records = []
    plans = []
    if directpet.cuda_device_count() > 0:
        plans.append(("cuda", int(args.events), ImageGrid((48, 144, 144), 4.0), args.iterations, gpu_name()))
    if not args.skip_cpu:
        plans.append(("cpu", int(args.cpu_events), ImageGrid((8, 96, 96), 4.0), args.cpu_iterations,
                      f"{cpu_name()} ({os.cpu_count()} threads)"))
    with tempfile.TemporaryDirectory() as tmp:
        for backend, n, grid, iterations, device in plans:
            path = os.path.join(tmp, f"scan_{backend}.petsird")
            t0 = time.perf_counter()
            size = write_scan(path, n, scanner, rng)
            print(f"{backend}: wrote {n:,} prompts + {n // 5:,} delayeds, {size / 1e9:.2f} GB in "
                  f"{time.perf_counter() - t0:.1f} s")
            mu_grid = ImageGrid((grid.nz, 2 * grid.ny, 2 * grid.nx),
                                (grid.voxel_size[0], grid.voxel_size[1] / 2, grid.voxel_size[2] / 2))
            mu_path = save_nifti(os.path.join(tmp, f"mu_{backend}.nii.gz"),
                                 WaterCylinder(175.0, 0.9 * grid.nz * grid.voxel_size[0], 0.0096).mu_map(mu_grid), mu_grid)
            runs = ("first", "second") if backend == "cuda" else ("first",)
            for label in runs:
                records.append(case(path, mu_path, grid, iterations, backend, os.path.join(tmp, "image.nii.gz"),
                                    label, size, device))
            os.remove(path)
    print_table(records, ["run", "backend", "prompts", "events_s", "events_mev_s", "randoms_s", "normalisation_s",
                          "sensitivity_s", "attenuation_s", "projector_s", "reconstruction_s", "write_s", "other_s", "total_s",
                          "read_floor_s"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
