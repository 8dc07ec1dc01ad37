"""
Reconstruction through ``directpet.recon``
==========================================

MLEM, OSEM and block-RAMLA are written once, against a *subset problem*: a family's projector split
into subsets, together with the data, the multiplicative factors and the background of each subset.
Every family provides one (``ViewSubsets``, ``AngleSubsets``, ``DualHeadSubsets``), so the same call
reconstructs any of them. This example reconstructs:

* DIRECT, on data drawn from the model itself (``model_consistent_data``), with OSEM over 4
  interleaved blocks of views and with block-RAMLA over one view at a time (the scheme of Ha et al.
  [HA]_);
* FIRST, on event Monte Carlo data of a micro Derenzo phantom, with OSEM over angle subsets.

(:ref:`physics-recon` gives the update formulas.)
"""

import matplotlib.pyplot as plt
import numpy as np

import directpet as dp
from directpet import recon, sim

# %%
# DIRECT
# ------
# Three slices of 64 x 64 voxels of 6 mm, a 35 cm cylinder with six hot spheres of 30 mm at 4:1,
# 12 views and the [HA] reconstruction kernel (400 ps, variant LOR width).
from directpet.direct import HistoImageProjector, SRKernel, ViewSet, ViewSubsets, model_consistent_data

grid = dp.ImageGrid((3, 64, 64), voxel_size=6.0)
views = ViewSet(n_phi=12, n_theta=1)
truth, info = sim.sphere_phantom(grid, sphere_diameter_mm=30.0, sphere_radius_mm=90.0, contrast=4.0)
H = HistoImageProjector(grid, views, SRKernel.clinical(), backend="cpu")
data = model_consistent_data(H, truth, counts=2e7, seed=1, viewset=views)
print(f"histo-images {data.prompts.shape}, {data.total_counts:.3g} counts")

osem = recon.osem(ViewSubsets(H, data, 4), 5, track_loglik=True, progress=False)
ramla = recon.block_ramla(ViewSubsets(H, data), 5, lambda0=0.3, track_loglik=True, progress=False)
for res in (osem, ramla):
    print(f"{res.algorithm}: {res.n_iter} iterations in {res.time_s:.2f} s, "
          f"log-likelihood {res.loglik[0]:.4g} -> {res.loglik[-1]:.4g}")

xs, ys = grid.centres(2), grid.centres(1)
ext = (xs[0] - 3, xs[-1] + 3, ys[0] - 3, ys[-1] + 3)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), constrained_layout=True)
vmax = float(truth.max())
scale = data.meta["image_scale"]              # model_consistent_data scaled the image to reach the counts
for ax, (img, title) in zip(axes, ((truth, "truth"), (osem.image / scale, "OSEM, 4 subsets x 5"),
                                   (ramla.image / scale, "block-RAMLA, 12 views x 5"))):
    im = ax.imshow(img[1], origin="lower", extent=ext, cmap="gray_r", vmin=0, vmax=1.2 * vmax)
    ax.set_title(title)
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    fig.colorbar(im, ax=ax, shrink=0.85, label="activity (a.u.)")
for res in (osem, ramla):
    axes[3].plot(res.loglik_iterations, res.loglik, "o-", label=res.algorithm)
axes[3].set_xlabel("iteration")
axes[3].set_ylabel("Poisson log-likelihood")
axes[3].legend()
plt.show()

# %%
# FIRST
# -----
# A rotating scanner with an 81-bin (32 mm) field of view, a micro Derenzo phantom of rods along z
# (the six diameters 2.4 to 0.75 mm), data from the event Monte Carlo, the geometric normalisation of
# the rotating heads as the multiplicative factors, and OSEM over 6 interleaved angle subsets.
from directpet.first import (AngleSubsets, RotatingScanner, SinogramData, SuperLORProjector,
                             build_super_lor_table, geometric_normalisation)
from directpet.first.monte_carlo import simulate

scanner = RotatingScanner(n_rows=8, n_angles=30, n_radial=81, n_columns=24)
rods, rod_info = sim.derenzo_phantom(scanner.grid, radius_mm=14.0, length_mm=6.0)
counts, stats = simulate(scanner, rods, n_decays=6 * 10**8, seed=2, backend="cpu")
sino = SinogramData(scanner=scanner, prompts=counts, factors=geometric_normalisation(scanner))
P = SuperLORProjector(build_super_lor_table(scanner), "fast", backend="cpu")
first = recon.osem(AngleSubsets(P, sino, 6), 8, progress=False)
print(f"FIRST: {counts.sum():.3g} coincidences from {stats.n_decays:.3g} decays; "
      f"OSEM {first.n_iter} x {6} subsets in {first.time_s:.2f} s")

g = scanner.grid
xs, ys = g.centres(2), g.centres(1)
ext = (xs[0] - 0.2, xs[-1] + 0.2, ys[0] - 0.2, ys[-1] + 0.2)
mid = g.nz // 2
fig, axes = plt.subplots(1, 2, figsize=(9, 4), constrained_layout=True)
for ax, (img, title) in zip(axes, ((rods, "micro Derenzo (truth)"), (first.image, "OSEM, 8 x 6 subsets"))):
    im = ax.imshow(img[mid], origin="lower", extent=ext, cmap="hot")
    ax.set_title(f"{title}, slice {mid}")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    fig.colorbar(im, ax=ax, shrink=0.85, label="activity (a.u.)")
plt.show()
