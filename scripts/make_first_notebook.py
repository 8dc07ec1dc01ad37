"""Write notebooks/first_superlor.ipynb (outputs are not committed; run it to fill them)."""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# FIRST Super-LOR reconstruction of a rotating dual-head scanner ([FIRST-GPU]; docs: Physics › FIRST)

A pair of planar LYSO heads (30 rows of 1.6 mm crystals, 12 mm deep, front faces 160 mm apart)
rotates in 130 steps over 180°. The sinogram is 175 radial bins × 130 angles × 900 row pairs; the
image 175 × 175 × 59 voxels of 0.4 × 0.4 × 0.8 mm.

* **System model**: directpet's analytic tube of response (docs: Physics › FIRST; crystal apertures, depth of
  interaction, acollinearity, positron range, integrated over voxels with erf), reduced to
  Super-LOR tables by the rotational, translational and reflection symmetries and the
  quasi-symmetry of LORs with almost the same incidence angle.
* **Data**: the event Monte Carlo (`first.simulate`), which does not use the model, and the
  heads' geometric normalisation: no inverse crime.
* **Projectors**: `faithful` (the paper's texture-based design, unmatched back projector),
  `matched` (exact transpose) and `fast` (factored; the same numbers as `matched`).
* **Reconstruction**: OSEM, 13 subsets of 10 interleaved angles, through the shared
  `directpet.recon` layer.

**Sizes.** On a GPU the notebook runs the paper's size (`full`, 24 iterations). On a CPU it runs the
`cpu` size (6 rows of crystals, 26 angles, 85 radial bins; 3 M Derenzo events, 10 iterations: about a
minute on 2 cores, most of it in `faithful` and `matched`, which on a CPU cost 20 × `fast`).
`DIRECTPET_NOTEBOOK_SIZE=tiny|cpu|small|full` and `DIRECTPET_NOTEBOOK_ITER=N` choose another
(`full` on a CPU takes hours)."""),
    code("""import os
import numpy as np
import directpet as dp
from directpet.first import build_super_lor_table
from directpet.first.experiment import ExperimentConfig, run_experiment, scanner_for, write_figures

gpu = dp.cuda_device_count() > 0
size = os.environ.get("DIRECTPET_NOTEBOOK_SIZE", "full" if gpu else "cpu")
n_iter = int(os.environ.get("DIRECTPET_NOTEBOOK_ITER", "24" if size in ("full", "small") else "10"))
# the penalised arm (BSREM-RDP from the last OSEM image) for the fast projector, over relative strengths b:
# the range that trades noise for peak-to-valley at each size (benchmarks/RESULTS.md, penalised reconstruction)
betas = (0.001, 0.003, 0.01) if size in ("full", "small") else (0.003, 0.01, 0.03)
cfg = ExperimentConfig(size=size, n_iter=n_iter, bsrem_betas=betas, bsrem_passes=5,
                       bsrem_methods=("fast",), progress=False)
# wall times of this notebook measured at its default sizes (benchmarks/RESULTS.md, notebooks)
expected = {("cpu", False): "about 1 minute on a 2-core CPU", ("full", True): "about 2 minutes on an H200"}
print(f"size {size}, {n_iter} OSEM iterations of {cfg.n_subsets} subsets, CUDA device: {gpu}; expected run time: "
      f"{expected.get((size, gpu), 'not measured for this choice')}")"""),
    md("""## The system model and its storage

Every sinogram LOR could have its own 175 × 5 × 3 tube; the symmetries leave one per ring
difference |δ|, and the quasi-symmetry merges neighbouring |δ| (axial incidence angles 0.6° apart)
while every tube stays within the tolerance of its own analytic value."""),
    code("""scanner = scanner_for("full")
for tol in (0.0, 0.02, 0.05, 0.1):
    rep = build_super_lor_table(scanner, quasi_tolerance=tol).storage_report()
    print(f"tolerance {tol:4.2f}: {rep['n_super']:2d} Super-LORs, {rep['bytes_super_lor'] / 1024:6.0f} KiB, "
          f"{rep['reduction']:.2e} x smaller than per-LOR tubes ({rep['bytes_per_lor'] / 2**30:.0f} GiB), "
          f"quasi-symmetry alone {rep['quasi_reduction']:.1f} x, largest error {rep['max_quasi_error']:.3f}")"""),
    code("""res = run_experiment(cfg)
st = res.data_stats
print(f"Monte Carlo: Derenzo {st['derenzo'].n_binned:,} events, points {st['points'].n_binned:,} events; "
      f"simulation {res.timings['simulation_s']:.1f} s, backend {res.backend}")
print(res.table_text())"""),
    md("""## Images, rod profiles, resolution

Transverse slices after 1 and `n_iter` iterations; profiles through a row of each rod group (averaged
over the central half of the rods' length) with their peak-to-valley ratios; point-source FWHM
against the distance from the axis. A peak-to-valley marked `*` belongs to rods closer than two
voxels (the voxels cannot resolve them), and an FWHM printed in brackets, `(w)` (open marks in the figure), is
below two voxels: the voxels, not the scanner, limit it. At the `cpu` and `full` sizes the axial
FWHM is such a bound (0.8 mm slices)."""),
    code("""%matplotlib inline
paths = write_figures(res, os.environ.get("DIRECTPET_NOTEBOOK_OUT", "first_superlor_figures"))
from IPython.display import Image, display
for p in paths:
    display(Image(filename=p))"""),
    md("""## faithful vs matched vs fast

`fast` computes the same operator as `matched` (the factored form of one forward model and its
exact transpose), so their reconstructions agree to float rounding. `faithful` reads the image
through the texture unit (8-bit interpolation weights on a GPU) and back-projects with the paper's
interpolating, unmatched back projector, so its images differ by a little more."""),
    code("""last = {m: r.derenzo.images[-1] for m, r in res.methods.items()}
ref = last.get("matched")
if ref is not None:
    for m, img in last.items():
        print(f"{m:>9} vs matched: |difference| / |matched| = {np.linalg.norm(img - ref) / np.linalg.norm(ref):.2e}")"""),
    md("""## Penalised reconstruction: BSREM with the relative difference prior

OSEM's noise grows with the iterations. BSREM minimises `-L(x) + R(x)` with the edge-preserving
relative difference prior (γ = 2), so the prior's strength b, not the iteration count, sets the
trade-off (`directpet.recon.rdp_beta_sweep`, started from the last OSEM image; β = b × mean
sensitivity). The table above lists each b; the `*_bsrem_sweep.png` figure plots the peak-to-valley
of each sampled rod group against the noise along the largest rods (in their cores). Below: each b's noise
and peak-to-valley relative to OSEM's. A good b removes most of the noise while the rods the system
resolves keep most of their peak-to-valley; a strong one smooths the rods away."""),
    code("""print(res.bsrem_relative_text())"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/first_superlor.ipynb")
print("wrote notebooks/first_superlor.ipynb")
