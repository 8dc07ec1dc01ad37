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

On a GPU the notebook runs the paper's size; set `DIRECTPET_NOTEBOOK_SIZE=small|tiny` for the
reduced problems (CI runs `tiny`)."""),
    code("""import os
import numpy as np
import directpet as dp
from directpet.dualhead import storage_report
from directpet.dualhead.experiment import PROFILE_Y_MM, ExperimentConfig, line_profile, run_experiment, write_figures

gpu = dp.cuda_device_count() > 0
size = os.environ.get("DIRECTPET_NOTEBOOK_SIZE", "full" if gpu else "tiny")
n_iter = int(os.environ.get("DIRECTPET_NOTEBOOK_ITER", "24"))
cfg = ExperimentConfig(size=size, n_iter=n_iter, progress=False)
print(f"size {size}, {n_iter} OSEM iterations of {cfg.n_subsets} subsets, CUDA device: {gpu}")"""),
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
central plane, after 1 and 24 iterations; profiles along z at those lines; profiles through a row
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
        inside = np.abs(z) < 16
        print(f"y = {y:5.1f} mm, {label:>14}: max/min along z inside the phantom = "
              f"{v[inside].max() / max(v[inside].min(), 1e-12):.2f}")
f = r.fwhm_mm()                                  # x (between the heads), y, z
print("point-source FWHM (mm) x / y / z by plane x:")
for p, w in zip(res.point_positions, f):
    print(f"  x = {p[0]:6.1f} mm: {w[0]:.2f} / {w[1]:.2f} / {w[2]:.2f}")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/dual_head.ipynb")
print("wrote notebooks/dual_head.ipynb")
