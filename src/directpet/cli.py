"""Command line: ``directpet demo`` (the DIRECT reconstruction experiment), ``directpet demo first``
(the FIRST Super-LOR experiment: micro Derenzo and point sources, OSEM), ``directpet demo dualhead``
(the dual-head planar experiment: micro Deluxe Derenzo with rods along x and point sources, OSEM), ``directpet points``
(point sources through variant / asymmetric kernels, [HA] Fig. 6/7) and ``directpet info``."""

from __future__ import annotations

import argparse
import os
import sys
import time


def _demo(args) -> int:
    from .direct.experiment import ExperimentConfig, run_experiment, write_figures

    cfg = ExperimentConfig(size=args.size, n_events=args.events, n_iter=args.iterations,
                           kernels=tuple(args.kernels.split(",")), backend=args.backend,
                           target_noise=args.target_noise, seed=args.seed, progress=not args.quiet,
                           bsrem_betas=args.bsrem_betas, bsrem_passes=args.bsrem_passes)
    t0 = time.perf_counter()
    res = run_experiment(cfg)
    paths = write_figures(res, args.out)
    g = res.grid
    print(f"\nDIRECT sphere phantom, {g.nz}x{g.ny}x{g.nx} voxels of {g.voxel_size[0]:g} mm, 40x3 views, "
          f"{res.data.meta.get('n_deposited', 0):,} events deposited, backend {res.backend}")
    print(f"block-RAMLA, lambda0={cfg.lambda0}, gamma={cfg.gamma}; CRC = mean over the 6 spheres, "
          f"noise = std/mean in a 50 mm central ROI; matched noise {100 * cfg.target_noise:g}%\n")
    print(res.table())
    print(f"\nfigures: {', '.join(paths)}")
    print(f"total {time.perf_counter() - t0:.1f} s (simulation {res.timings['simulation_s']:.1f} s)")
    return 0


def _demo_family(args) -> int:
    """``directpet demo first`` / ``directpet demo dualhead``: the family's experiment module
    (``ExperimentConfig``, ``run_experiment``, ``write_figures``), its table and figures."""
    import importlib

    exp = importlib.import_module(f".{args.family}.experiment", __package__)
    cfg = exp.ExperimentConfig(size=args.size, methods=tuple(args.methods.split(",")), n_iter=args.iterations,
                               backend=args.backend, seed=args.seed, progress=not args.quiet,
                               bsrem_betas=args.bsrem_betas, bsrem_passes=args.bsrem_passes)
    t0 = time.perf_counter()
    res = exp.run_experiment(cfg)
    paths = exp.write_figures(res, args.out)
    s, g, st = res.scanner, res.scanner.grid, res.data_stats
    if args.family == "first":
        print(f"\nFIRST rotating dual-head scanner: sinogram {s.n_radial} x {s.n_angles} x {s.n_rows ** 2}, image "
              f"{g.nx} x {g.ny} x {g.nz}; {res.model.n_super} Super-LORs; backend {res.backend}")
        data = f"Derenzo {st['derenzo'].n_binned:,} events, point sources {st['points'].n_binned:,}"
    else:
        print(f"\ndual-head planar scanner: {s.n_y} x {s.n_z} crystals per head, {s.n_lors:,} LORs; image "
              f"{g.nz} x {g.ny} x {g.nx} voxels; model {res.model.n_taps:,} taps ({res.model.nbytes / 2**20:.0f} MiB) "
              f"built in {res.timings['model_s']:.1f} s; backend {res.backend}")
        data = f"Derenzo {st['derenzo'].n_trues:,} trues, point sources {st['points'].n_trues:,}"
    print(f"Monte Carlo data: {data}; OSEM {cfg.n_subsets} subsets x {cfg.n_iter} iterations\n")
    print(res.table_text())
    print(f"\nfigures: {', '.join(paths)}")
    print(f"total {time.perf_counter() - t0:.1f} s (simulation {res.timings['simulation_s']:.1f} s)")
    return 0


def _points(args) -> int:
    """Forward vs back projection of three point sources with a variant and an asymmetric kernel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .direct import HistoImageProjector, SRKernel, View
    from .geometry import ImageGrid

    grid = ImageGrid((5, 144, 144), 4.0)
    img = np.zeros(grid.shape, np.float32)
    for y_mm in (0.0, 120.0, 240.0):  # three equal sources along +y, as in [HA] Fig. 5-7
        iz, iy, ix = grid.index_of(0.0, y_mm, 0.0)
        img[iz, iy, ix] = 1.0
    view = View.from_degrees(0.0, 0.0)  # TOF along x, LOR-radial along y
    kernels = {"variant (600 ps, radial 10->80 mm)": SRKernel(600, ("linear", 10, 80), 10),
               "asymmetric variant": SRKernel(600, ("linear", 10, 80), 10, asymmetric=True)}
    fig, axes = plt.subplots(2, 2, figsize=(9, 9))
    for col, (name, k) in enumerate(kernels.items()):
        op = HistoImageProjector(grid, [view], k, backend=args.backend)
        # the one view's forward projection (a (1, nz, ny, nx) stack), and the sources back projected
        # as that view's histo-image
        for row, (what, res) in enumerate((("forward", op.forward(img)[0]), ("back", op.adjoint(img[None])))):
            out = np.asarray(res)[2]
            ax = axes[row, col]
            ax.imshow(out, origin="lower", cmap="magma", extent=[-288, 288, -288, 288])
            ax.set_title(f"{what}: {name}", fontsize=9)
            ax.set_xlabel("x (mm, TOF)")
            ax.set_ylabel("y (mm, LOR-radial)")
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "point_sources_forward_vs_back.png")
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")
    return 0


def _reconstruct(args) -> int:
    """A PETSIRD file to a NIfTI image: corrections, block-RAMLA / OSEM / BSREM-RDP, a timing line per stage."""
    from .direct.workflow import reconstruct_petsird
    from .geometry import ImageGrid

    from .direct import CylindricalScanner

    grid = ImageGrid(args.shape, args.voxel)
    views = CylindricalScanner().viewset(*args.views)
    r = reconstruct_petsird(args.file, grid, viewset=views, mu=args.mu, algorithm=args.algorithm.replace("-", "_"),
                            n_iter=args.iterations, subsets=args.subsets, rdp_b=args.rdp_b,
                            attenuation_n_sub=args.attenuation_sub, backend=args.backend, out=args.output,
                            projector=args.projector, model_accuracy=args.model_accuracy, progress=not args.quiet)
    print(f"{r.n_prompts:,} prompts ({r.n_deposited:,} deposited), {r.n_delayeds:,} delayeds -> {grid.shape} "
          f"image of {grid.voxel_size} mm voxels, {args.iterations} {args.algorithm} passes; wrote {r.path}")
    print(r.summary())
    return 0


def _numbers(kind, lengths, what):
    """argparse type: comma-separated values of ``kind``, as many as one of ``lengths`` (a single value
    stands for all three where 3 is allowed)."""
    def parse(text):
        try:
            parts = [kind(p) for p in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if len(parts) == 1 and 3 in lengths:
            parts *= 3
        if len(parts) not in lengths:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return tuple(parts)
    return parse


def _info(args) -> int:
    from . import __version__, _backend

    print(f"directpet {__version__}: DIRECT TOF histo-image, FIRST Super-LOR and dual-head planar PET projectors")
    print(_backend.device_summary())
    return 0


def main(argv=None) -> int:
    """The ``directpet`` command (``argv``: its arguments, default ``sys.argv[1:]``); returns the exit status."""
    ap = argparse.ArgumentParser(prog="directpet", description="directpet: PET reconstruction operators for DIRECT "
                                 "TOF histo-images, FIRST Super-LOR sinograms and dual-head planar PET")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="DIRECT (default): simulate the sphere phantom, reconstruct, print CRC/noise, "
                                    "write figures; 'first': the FIRST Derenzo / point-source experiment; "
                                    "'dualhead': the dual-head Derenzo / point-source experiment")
    d.add_argument("family", nargs="?", default="direct", choices=["direct", "first", "dualhead"])
    d.add_argument("--size", default="auto", choices=["auto", "tiny", "cpu", "small", "paper", "full"],
                   help="DIRECT: auto = 'paper' (48x144x144, 430 M events) on a GPU, 'small' (16x96x96, 143 M) "
                        "on a CPU; FIRST: auto = 'full' (175x130x900 sinograms) on a GPU, 'small' on a CPU; "
                        "dualhead: auto = 'full' (104x72 crystals, 288x416x119 voxels) on a GPU, 'cpu' (24x18 "
                        "crystals, 0.8 mm voxels) on a CPU; 'cpu' is each notebook's size on a CPU")
    d.add_argument("--events", type=int, default=None, help="DIRECT: prompts to simulate (default per size)")
    d.add_argument("--iterations", type=int, default=None,
                   help="DIRECT: block-RAMLA passes (default 30 small, 40 paper); FIRST, dualhead: OSEM iterations (24)")
    d.add_argument("--methods", default=None,
                   help="FIRST: comma list of faithful, matched, fast (default all three on a GPU, fast on a CPU); "
                        "dualhead: comma list of default, alg1, alg2, alg3 (the last three on CUDA; default: default)")
    d.add_argument("--kernels", default="invariant-fft,invariant,variant1",
                   help="comma list of: invariant-fft, invariant, variant1, variant2, variant3")
    d.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    d.add_argument("--bsrem-betas", default="",
                   help="comma list of relative prior strengths b; adds BSREM with the relative difference prior "
                        "(beta = b * mean sensitivity) from the last unpenalised image, per kernel (DIRECT: CRC "
                        "against noise, e.g. 0.0001,0.0003,0.001) or per method (FIRST, dualhead: peak-to-valley "
                        "against noise in the largest rods)")
    d.add_argument("--bsrem-passes", type=int, default=10, help="BSREM passes per b (default 10)")
    d.add_argument("--target-noise", type=float, default=0.08)
    d.add_argument("--seed", type=int, default=2026)
    d.add_argument("--out", default="directpet_demo", help="folder for the PNG figures")
    d.add_argument("--quiet", action="store_true", help="no progress bars")
    p = sub.add_parser("points", help="point sources: forward vs back projection with variant/asymmetric kernels")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", default="directpet_demo")
    r = sub.add_parser("reconstruct", help="a PETSIRD list-mode file -> corrections -> block-RAMLA / OSEM -> NIfTI "
                                           "image, with a timing line per stage")
    r.add_argument("file", help="the PETSIRD file (prompts, optionally delayeds; TOF)")
    r.add_argument("-o", "--output", required=True, help="the image to write (.nii or .nii.gz)")
    r.add_argument("--mu", default=None, help="attenuation map in 1/mm (NIfTI, on its own grid); none: no correction")
    r.add_argument("--shape", type=_numbers(int, (3,), "one integer or three (z,y,x)"),
                   default=(48, 144, 144), help="image nz,ny,nx (default 48,144,144)")
    r.add_argument("--voxel", type=_numbers(float, (3,), "one size or three (z,y,x)"),
                   default=(4.0, 4.0, 4.0), help="voxel mm, one or z,y,x (default 4)")
    r.add_argument("--views", type=_numbers(int, (2,), "two integers n_phi,n_theta"), default=(40, 3), help="DIRECT views n_phi,n_theta (default 40,3)")
    r.add_argument("--attenuation-sub", type=int, default=2,
                   help="directions per view-cell edge averaged for the attenuation factors (default 2)")
    r.add_argument("--algorithm", default="block-ramla", choices=["block-ramla", "osem", "bsrem"],
                   help="bsrem: penalised likelihood with the relative difference prior, from 2 block-RAMLA passes")
    r.add_argument("--rdp-b", type=float, default=3e-4,
                   help="bsrem: the prior's strength relative to the data (default 3e-4; larger, smoother)")
    r.add_argument("--iterations", type=int, default=10, help="passes through the data (default 10)")
    r.add_argument("--subsets", type=int, default=None, help="view blocks (default: one view per subset)")
    r.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    r.add_argument("--projector", default="auto", choices=["auto", "spatial", "fft", "lowrank"],
                   help="the DIRECT projector (default auto: the fastest meeting --model-accuracy, timed here)")
    r.add_argument("--model-accuracy", type=float, default=1e-4,
                   help="relative kernel error an approximate (low-rank FFT) projector may have (default 1e-4)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    sub.add_parser("info", help="build and device information")
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        from ._backend import resolve_backend

        gpu = resolve_backend(args.backend) == "cuda"
        try:
            args.bsrem_betas = tuple(float(b) for b in args.bsrem_betas.split(",")) if args.bsrem_betas else ()
        except ValueError:
            ap.error(f"--bsrem-betas: expected a comma list of numbers, got {args.bsrem_betas!r}")
        if args.family in ("first", "dualhead"):
            if args.size == "auto":
                args.size = "full" if gpu else ("small" if args.family == "first" else "cpu")
            if args.size not in ("tiny", "cpu", "small", "full"):
                ap.error(f"--size: the {args.family} demo takes tiny, cpu, small or full")
            args.iterations = 24 if args.iterations is None else args.iterations
            if args.methods is None:
                args.methods = ("faithful,matched,fast" if gpu else "fast") if args.family == "first" else "default"
            return _demo_family(args)
        if args.size not in ("auto", "tiny", "cpu", "small", "paper"):
            ap.error("--size: the DIRECT demo takes tiny, cpu, small or paper")
        if args.size == "auto":
            args.size = "paper" if gpu else "small"
        if args.iterations is None:
            args.iterations = 40 if args.size == "paper" else 30
        return _demo(args)
    return {"points": _points, "info": _info, "reconstruct": _reconstruct}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
