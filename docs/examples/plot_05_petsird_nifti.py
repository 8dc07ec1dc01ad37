"""
Scanner data in, images out: PETSIRD and NIfTI
==============================================

:mod:`directpet.io` reads and writes the formats of the field:

* PETSIRD list mode (the PET raw data standard of ETSI [PETSIRD]_). Each family has a
  ``petsird`` module that describes its scanner in a PETSIRD header and turns its events or LOR
  histograms into coincidences and back;
* NIfTI-1 images [NIfTI]_, with an affine that places the centred voxel grid in scanner
  millimetres.

This example writes simulated DIRECT list-mode events to a PETSIRD file, deposits the file into
histo-images, reconstructs, and saves the image as NIfTI and reads it back. It ends with a
dual-head LOR histogram through PETSIRD. It needs ``pip install 'directpet[io]'`` (``petsird``,
``nibabel``).
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import directpet as dp
from directpet import recon, sim
from directpet.direct import (CylindricalScanner, HistoImageData, HistoImageProjector, SRKernel, ViewSet,
                              ViewSubsets, sensitivity_attenuation, simulate_events)
from directpet.direct import petsird as direct_petsird
from directpet.io import PetsirdReader, load_nifti, nifti_affine, save_nifti

workdir = tempfile.TemporaryDirectory(prefix="directpet_io_")
tmp = Path(workdir.name)

# %%
# PETSIRD out: list-mode events of a water cylinder with four hot spheres, simulated in the
# idealised cylindrical TOF scanner (400 ps), written as crystal-pair coincidences with TOF bins.
grid = dp.ImageGrid((4, 48, 48), voxel_size=8.0)
views = ViewSet(n_phi=12, n_theta=1)
truth, info = sim.sphere_phantom(grid, length_mm=32.0, n_spheres=4, sphere_diameter_mm=40.0,
                                 sphere_radius_mm=90.0, contrast=4.0)
scanner = CylindricalScanner()
header = direct_petsird.scanner_header(scanner)
path = tmp / "spheres.petsird"
written = direct_petsird.write_events(path, header,
                                      prompts=simulate_events(scanner, info, 1_000_000, seed=1, progress=False))
with PetsirdReader(path) as reader:
    ps = reader.scanner
    print(f"{path.name}: {written['prompts']} prompts, {path.stat().st_size / 1e6:.1f} MB; "
          f"{ps.tof_edges_mm(0, 0).size - 1} TOF bins")

# %%
# PETSIRD in: the file's prompts deposited into histo-images, with the sensitivity-times-attenuation
# histo-images as the multiplicative factors. Then OSEM.
prompts = direct_petsird.deposit_file(path, grid, views, xp=np, progress=False)
factors = sensitivity_attenuation(grid, views, info, scanner)
data = HistoImageData(prompts=prompts, grid=grid, viewset=views, factors=factors)
H = HistoImageProjector(grid, views, SRKernel.clinical(), backend="cpu")
res = recon.osem(ViewSubsets(H, data, 4), 4, progress=False)
print(f"{prompts.sum():.0f} events deposited in {prompts.shape} histo-images; OSEM {res.n_iter} x 4 subsets")

# %%
# NIfTI out and in: the image and its grid come back unchanged, and the affine maps voxel indices
# (i, j, k) = (ix, iy, iz) to scanner mm.
nii = tmp / "spheres_osem.nii.gz"
save_nifti(nii, res.image, grid)
image, grid_back = load_nifti(nii)
print(f"{nii.name}: grid {grid_back}, identical image: {np.array_equal(image, res.image)}")
print("affine (voxel index -> scanner mm):\n", nifti_affine(grid))

xs, ys = grid.centres(2), grid.centres(1)
ext = (xs[0] - 4, xs[-1] + 4, ys[0] - 4, ys[-1] + 4)
fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
# view 3's histo-image, summed over z: the spheres blurred along the view's TOF axis, and bright
# rims where the LORs graze the cylinder (their chords through the water are shortest).
panels = ((prompts[3].sum(axis=0), f"PETSIRD prompts, view 3 (phi = {np.rad2deg(views[3].phi):.0f} deg), sum over z",
           "counts"), (truth[1], "truth", "activity (a.u.)"), (image[1], "OSEM, read back from NIfTI",
                                                                "activity (a.u.)"))
for ax, (img, title, label) in zip(axes, panels):
    im = ax.imshow(img, origin="lower", extent=ext, cmap="viridis")
    ax.set_title(title)
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    fig.colorbar(im, ax=ax, shrink=0.85, label=label)
plt.show()

# %%
# A dual-head LOR histogram goes through PETSIRD as the list mode of the two heads' modules, and
# comes back bit for bit.
from directpet.dualhead import DualHeadScanner  # noqa: E402
from directpet.dualhead import petsird as dualhead_petsird  # noqa: E402
from directpet.dualhead.monte_carlo import simulate  # noqa: E402

dh = DualHeadScanner.small()
activity = np.zeros(dh.grid.shape, np.float32)
activity[4:8, 6:10, 6:9] = 1.0
counts, _ = simulate(dh, activity, n_decays=10**6, seed=4, backend="cpu")
n = dualhead_petsird.write_counts(tmp / "dualhead.petsird", dh, counts)
back = dualhead_petsird.read_counts(tmp / "dualhead.petsird", dh)
print(f"dual-head: {n} coincidences written, histogram read back identical: {np.array_equal(back, counts)}")
workdir.cleanup()
