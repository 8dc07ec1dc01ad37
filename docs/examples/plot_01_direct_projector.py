"""
DIRECT: histo-images and spatially variant kernels
==================================================

A DIRECT projector maps an image to one *histo-image* per view. A histo-image lies on the image's
own grid, and each voxel in it is spread along the view's TOF axis with the system-response
kernel. This example projects three point sources into two views with two kernels:

* an invariant kernel (the same Gaussian everywhere), for which forward and back projection are the
  same convolution;
* a spatially variant, asymmetric kernel (its radial width grows with the distance from the axis,
  and its wide side faces the centre). Its forward projection stretches the sources towards the
  centre and its back projection stretches them towards the edge.

(Ha et al. [HA]_, Figs. 5 to 7; :ref:`conventions-direct` gives the view geometry.)
"""

import matplotlib.pyplot as plt
import numpy as np

import directpet as dp
from directpet.direct import HistoImageProjector, SRKernel, ViewSet

# %%
# One transaxial slice of 72 x 72 voxels of 4 mm, and four views in the transaxial plane
# (no tilt). Three point sources sit on the +y axis at 0, 60 and 120 mm.
grid = dp.ImageGrid((1, 72, 72), voxel_size=4.0)
views = ViewSet(n_phi=4, n_theta=1)
print("view azimuths (deg):", [round(float(np.rad2deg(v.phi)), 1) for v in views])

x = np.zeros(grid.shape, np.float32)
for y_mm in (0.0, 60.0, 120.0):
    iz, iy, ix = grid.index_of(0.0, y_mm, 0.0)
    x[iz, iy, ix] = 1.0

kernels = {
    "invariant": SRKernel.invariant(tof_fwhm_ps=600.0, fwhm=10.0),
    "variant, asymmetric": SRKernel(tof_fwhm_ps=600.0, radial_fwhm=("linear", 10.0, 50.0),
                                                  axial_fwhm=10.0, asymmetric=True),
}

# %%
# Both kernels have 600 ps TOF resolution and a 10 mm axial width. The invariant one is 10 mm wide
# radially everywhere; the variant one widens from 10 mm at the axis to 50 mm at the edge of the
# grid, and is asymmetric.
#
# Forward-project into views 0 and 1 (``forward(x, subset)`` returns the stack of the listed views),
# back-project view 1 alone, and check that each pair is an exact transpose.
extent = (grid.centres(2)[0] - 2, grid.centres(2)[-1] + 2, grid.centres(1)[0] - 2, grid.centres(1)[-1] + 2)
fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
for row, (name, kernel) in zip(axes, kernels.items()):
    H = HistoImageProjector(grid, views, kernel, backend="cpu")
    y = H.forward(x, [0, 1])                      # (2, nz, ny, nx): the histo-images of views 0 and 1
    b = H.adjoint(H.forward(x, 1), 1)             # back projection of view 1's histo-image
    print(f"{name}: histo-images {y.shape}, total counts per view {y.sum(axis=(1, 2, 3))} "
          f"(unit-sum kernels), adjointness {H.adjointness_test(rng=0):.1e}")
    panels = [(y[0, 0], f"view 0 (phi = {np.rad2deg(views[0].phi):.1f} deg)"),
              (y[1, 0], f"view 1 (phi = {np.rad2deg(views[1].phi):.1f} deg)"),
              (b[0], "back projection of view 1")]
    for ax, (img, title) in zip(row, panels):
        im = ax.imshow(img, origin="lower", extent=extent, cmap="magma")
        ax.set_title(f"{name}\n{title}", fontsize=9)
        ax.set_xlabel("x (mm)")
        ax.set_ylabel("y (mm)")
        fig.colorbar(im, ax=ax, shrink=0.8, label="counts per voxel")
plt.show()

# %%
# The kernel of every voxel depends on its signed LOR distance
# ``s = -x sin(phi) + y cos(phi)``. The look-up table of a view holds the identifier of each
# transaxial voxel position (``lormap``), the kernel support (``offsets``) and one row of kernel
# values per identifier (``values``).
lut = H.lut(1)
print(f"view 1: {lut.values.shape[0]} kernel identifiers, support of {lut.offsets.shape[0]} offsets, "
      f"radial sigma {lut.sigma_radial.min():.1f} .. {lut.sigma_radial.max():.1f} mm")
fig, ax = plt.subplots(figsize=(5, 4), constrained_layout=True)
im = ax.imshow(lut.lormap, origin="lower", extent=extent, cmap="coolwarm")
ax.set_title("LORmap of view 1: kernel identifier per voxel")
ax.set_xlabel("x (mm)")
ax.set_ylabel("y (mm)")
fig.colorbar(im, ax=ax, label="identifier floor(s / epsilon) + a0")
plt.show()
