"""Write notebooks/dual_head.ipynb (outputs are not committed; run it to fill them)."""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# Dual-head planar PET: symmetry-compressed model, OSEM on a micro Deluxe Derenzo ([DH]; docs: Physics › Dual-head)

Two stationary HRRT heads (104 × 72 LSO crystals, 2.4 mm pitch, 10 mm front layer) face each other
with 60 mm between the front faces. The image is 119 planes × 416 × 288 voxels of 0.5 × 0.6 × 0.6 mm
(14.3 M voxels); there are 56.07 M front-layer LORs.

* **System model**: directpet's analytic multi-ray detector response (docs: Physics › Dual-head; photon paths
  through the crystal array, attenuation before and absorption in the hit crystal), stored as one
  patch per orientation class and plane: shift invariance and the x/y/z reflections leave
  104 × 72 classes × 119 planes of small patches.
* **Data**: the event Monte Carlo (`dualhead.simulate`: positron range, acollinearity, penetration and
  exponential depth of interaction in the finite front layer), which does not use the model: no
  inverse crime.
* **Reconstruction**: OSEM with the paper's subsets (orientation classes split at random into 72
  subsets), the zero-count skip, through the shared `directpet.recon` layer.

**Sizes.** On a GPU the notebook runs the paper's size (`full`, 24 iterations). On a CPU it runs the
`cpu` size (24 × 18 crystals per head, 0.8 mm voxels in 49 planes of 0.6 mm, 1e7 Derenzo trues,
12 iterations and the penalised arm: under a minute on 2 cores), whose voxels still sample the 1.35 mm rods.
`DIRECTPET_NOTEBOOK_SIZE=tiny|cpu|small|full` and `DIRECTPET_NOTEBOOK_ITER=N` choose another."""),
    code("""import os
import numpy as np
import directpet as dp
from directpet.dualhead import storage_report
from directpet.dualhead.experiment import PROFILE_Y_MM, ExperimentConfig, line_profile, run_experiment, write_figures

gpu = dp.cuda_device_count() > 0
size = os.environ.get("DIRECTPET_NOTEBOOK_SIZE", "full" if gpu else "cpu")
n_iter = int(os.environ.get("DIRECTPET_NOTEBOOK_ITER", "24" if size in ("full", "small") else "12"))
# the penalised arm (BSREM-RDP from the last OSEM image) over relative strengths b: the range that trades
# noise for peak-to-valley at each size (benchmarks/RESULTS.md, penalised reconstruction)
betas = (0.001, 0.003, 0.01) if size in ("full", "small") else (0.003, 0.01, 0.03)
cfg = ExperimentConfig(size=size, n_iter=n_iter, bsrem_betas=betas, bsrem_passes=5, progress=False)
# wall times of this notebook measured at its default sizes (benchmarks/RESULTS.md, notebooks)
expected = {("cpu", False): "under a minute on a 2-core CPU", ("full", True): "about 3 minutes on an H200"}
print(f"size {size}, {n_iter} OSEM iterations of {cfg.n_subsets} subsets, CUDA device: {gpu}; expected run time: "
      f"{expected.get((size, gpu), 'not measured for this choice')}")"""),
    code("""res = run_experiment(cfg)
s, st = res.scanner, res.data_stats
print(f"{s.n_y} x {s.n_z} crystals per head, {s.n_lors:,} LORs, image {s.grid.shape}")
print(f"model: {res.model.n_taps:,} taps, {res.model.nbytes / 2**20:.1f} MiB, built in {res.timings['model_s']:.1f} s")
print(f"Monte Carlo: Derenzo {st['derenzo'].n_trues:,} trues, points {st['points'].n_trues:,} trues; "
      f"simulation {res.timings['simulation_s']:.1f} s, backend {res.backend}")
print(res.table_text())"""),
    md("""## The model's storage

The unreduced matrix has one row per LOR and one column per voxel; the symmetries leave one patch per
orientation class and plane (the projectors' format), and the paper's further reduction (x fold and
y–z interchange on the extended detector) leaves 60 folded planes × 3 seed voxels."""),
    code("""for key, value in storage_report(res.model).items():
    print(f"{key:>32}: {value}")"""),
    md("""## Images, the paper's profile lines, rod groups, resolution

Transverse slices at y = 11.7 mm and y = −2.7 mm (the rods run along x, between the heads) and the
central plane, after 1 and `n_iter` iterations; profiles along z at those lines; profiles through a row
of each rod group with their peak-to-valley ratios; the FWHM of point sources at planes across the
gap, along x (the depth-of-interaction and limited-angle blur between the heads), y and z."""),
    code("""%matplotlib inline
paths = write_figures(res, os.environ.get("DIRECTPET_NOTEBOOK_OUT", "dual_head_figures"))
from IPython.display import Image, display
for p in paths:
    display(Image(filename=p))"""),
    code("""r = res.methods[cfg.methods[0]]                 # the default projector's results
for y in PROFILE_Y_MM:
    for label, img in (("1 iteration", r.derenzo.images[0]), (f"{n_iter} iterations", r.derenzo.images[-1])):
        z, v = line_profile(img, s, y)
        # the phantom's chord along z at this y, 1 mm in from its cold wall
        chord = np.sqrt(max(res.derenzo_info.radius_mm ** 2 - y ** 2, 0.0)) - 1.0
        inside = v[np.abs(z) < chord]
        hi, lo = inside.max(), inside.min()
        # OSEM can drive cold gaps to (almost) zero: a ratio to a near-zero minimum says nothing
        ratio = f"{hi / lo:.2f}" if lo > 1e-3 * hi else "> 1000 (the gaps between rods fall to ~0)"
        print(f"y = {y:5.1f} mm, {label:>14}: max/min along z inside the phantom (|z| < {chord:.1f} mm) = {ratio}")
print("point-source FWHM (mm) x / y / z by plane x ('(w)': below two voxels, limited by the voxels):")
for k, p in enumerate(res.point_positions):
    print(f"  x = {p[0]:6.1f} mm: {r.fwhm_text(k)}")"""),
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
nbf.write(nb, "notebooks/dual_head.ipynb")
print("wrote notebooks/dual_head.ipynb")
