"""Write notebooks/real_data_workflow.ipynb (outputs are not committed; run it to fill them)."""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# From a scanner's files to a NIfTI image: PETSIRD in → corrections → block-RAMLA → NIfTI out

The workflow a researcher with measured data follows, end to end. Since no scanner is attached, the
first step *makes* the files a scanner would give — and everything after it reads only those files:

1. **Acquisition (simulated)**: TOF list-mode of the [HA] sphere phantom on the cylindrical scanner,
   randoms in the prompts, a delayed-window stream, crystals with unequal efficiencies (events are
   thinned by ε_i ε_j), written as a **PETSIRD** file whose header describes the crystal rings, the
   TOF bins and the efficiencies; a CT-like **attenuation map** in 1/mm on its own grid.
2. **Corrections from what the scanner gives**: normalisation histo-images from the header's
   detector efficiencies, attenuation histo-images from the μ-map (line integrals on the GPU when
   there is one), randoms from the delayeds (smoothed).
3. **Reconstruction**: the PETSIRD prompts deposited into 40 × 3 view histo-images, block-RAMLA with
   the DIRECT projector; CRC and noise of the result.
4. **Image out**: NIfTI with the affine that places the voxel grid in scanner millimetres.

**Sizes.** On a GPU the notebook runs `small` (96 × 96 × 24 voxels of 4 mm, 30 M prompts, a μ-map
on a twice finer grid, 10 passes). On a CPU it runs `cpu` (96 × 96 × 8 voxels of 4 mm, 8 M prompts,
the μ-map on the image grid and one direction per view for the attenuation, 5 passes: about a
minute on 2 cores). `DIRECTPET_NOTEBOOK_SIZE=tiny|cpu|small` and `DIRECTPET_NOTEBOOK_ITER=N` choose
another."""),
    code("""import os, pathlib, tempfile
import numpy as np
import directpet as dp
from directpet import analysis, recon
from directpet.direct import (CylindricalScanner, HistoImageData, HistoImageProjector, ViewSubsets,
                              attenuation_histo_images, normalisation_histo_images, randoms_from_delayeds,
                              sensitivity_attenuation, simulate_events, simulate_randoms)
from directpet.direct import petsird as direct_petsird
from directpet.geometry import ImageGrid
from directpet.io import load_nifti, save_nifti
from directpet.io.petsird import Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter
from directpet.sim.phantoms import WaterCylinder, sphere_phantom

gpu = dp.cuda_device_count() > 0
size = os.environ.get("DIRECTPET_NOTEBOOK_SIZE", "small" if gpu else "cpu")
n_iter = int(os.environ.get("DIRECTPET_NOTEBOOK_ITER", "10" if gpu else "5"))
shape, voxel, n_prompts = {"tiny": ((8, 48, 48), 8.0, 1_000_000), "cpu": ((8, 96, 96), 4.0, 8_000_000),
                           "small": ((24, 96, 96), 4.0, 30_000_000)}[size]
if gpu:
    import cupy as xp
else:
    xp = np
workdir = pathlib.Path(os.environ.get("DIRECTPET_NOTEBOOK_OUT", tempfile.mkdtemp()))
workdir.mkdir(parents=True, exist_ok=True)
grid = ImageGrid(shape, voxel)
scanner = CylindricalScanner()
views = scanner.viewset(40, 3)
# wall times of this notebook measured at its default sizes (benchmarks/RESULTS.md, notebooks)
expected = {("cpu", False): "about 1 minute on a 2-core CPU", ("small", True): "about 30 s on an H200"}
print(f"size {size}: image {grid.shape} of {voxel} mm, {len(views)} views, {n_prompts:,} prompts, GPU: {gpu}; "
      f"expected run time: {expected.get((size, gpu), 'not measured for this choice')}")"""),
    md("""## 1. The scanner's files

The PETSIRD header describes the detector as rings of 4 mm crystals on the 465 mm cylinder
(`direct_petsird.scanner_header`), TOF bins of 25 ps and per-crystal efficiencies (here drawn
around 1 with a 10 % spread). The simulated coincidences are snapped to crystals and TOF bins and
thinned by the crystals' efficiencies — what a real scanner's list-mode contains. Delayeds are an
independent randoms stream of the expected size."""),
    code("""truth, info = sphere_phantom(grid, length_mm=min(250.0, grid.nz * voxel))
rng = np.random.default_rng(2026)
header0 = direct_petsird.scanner_header(scanner)
eps = rng.normal(1.0, 0.1, direct_petsird.ring_shape(header0)).clip(0.6, 1.4)
header = direct_petsird.scanner_header(scanner, crystal_efficiencies=eps)
crystals = PetsirdScanner(header.scanner)
listmode = workdir / "scan.petsird"

def detected(events):
    # the coincidences of a batch as the scanner records them: crystals, TOF bins, thinned by e_ij
    ev = direct_petsird.events_to_coincidences(events, crystals)
    hi, lo = np.maximum(ev.bin0, ev.bin1), np.minimum(ev.bin0, ev.bin1)
    keep = rng.random(len(ev)) < crystals.pair_efficiency((0, 0), hi, lo) / eps.max() ** 2
    return {(0, 0): Coincidences(ev.bin0[keep], ev.bin1[keep], ev.tof_idx[keep])}

with PetsirdWriter(listmode, header) as writer:
    for batch in simulate_events(scanner, info, n_prompts, seed=1, randoms_fraction=0.2, progress=False,
                                 chunk_size=2_000_000, xp=xp):
        delayed = simulate_randoms(scanner, int(rng.poisson(batch.n_randoms)), seed=rng)  # delayed window = prompt window
        writer.write_block(prompts=detected(batch), delayeds=detected(delayed))
    written = dict(writer.n_written)

mu_grid = ImageGrid((grid.nz, 2 * grid.ny, 2 * grid.nx), (voxel, voxel / 2, voxel / 2)) if gpu else grid
mu_map = info.attenuation.mu_map(mu_grid)                         # CT-like: 1/mm on its own grid
print(f"{listmode.name}: {listmode.stat().st_size / 1e6:.1f} MB, {written['prompts']:,} prompts, "
      f"{written['delayeds']:,} delayeds; mu-map {mu_grid.shape} of {mu_grid.voxel_size} mm")"""),
    md("""## 2. Reading the file and building the corrections

From here on only the files are used: the header (crystal positions, TOF bins, efficiencies), the
prompt and delayed streams and the μ-map."""),
    code("""with PetsirdReader(listmode) as f:
    header_read = f.header
    print(f"scanner '{header_read.scanner.model_name}': {f.scanner.n_detection_bins[0]:,} detection bins, "
          f"{f.scanner.tof_edges_mm(0, 0).size - 1} TOF bins, CTR {f.scanner.tof_resolution_mm(0, 0):.1f} mm FWHM")

prompts, stats = direct_petsird.deposit_file(listmode, grid, views, xp=xp, progress=False, return_stats=True)
delayeds = direct_petsird.read_events(listmode, "delayeds", xp=xp)
randoms = randoms_from_delayeds(delayeds, grid, views, smooth_fwhm_mm=3 * voxel)

geometric = sensitivity_attenuation(grid, views, xp=xp)           # n_v: acceptance only
mu = xp.asarray(mu_map)
attenuation = (attenuation_histo_images(mu, mu_grid, grid, views, n_sub=2) if gpu else
               attenuation_histo_images(mu, mu_grid, grid, views, n_sub=1, step_mm=voxel, plane_mm=voxel))
normalisation = normalisation_histo_images(header_read, grid, views, xp=xp)
factors = (geometric * attenuation * normalisation).astype(xp.float32)     # s_v of [HA]
print(f"events deposited: {stats.n_deposited:,} of {stats.n_events:,} prompts; randoms estimate {float(randoms.sum()):,.0f}")
print(f"normalisation factors: {float(normalisation.min()):.3f} .. {float(normalisation.max()):.3f}; "
      f"attenuation at the centre, central view: {float(attenuation[views.n_theta // 2, grid.nz // 2, grid.ny // 2, grid.nx // 2]):.4f}")"""),
    md("""## 3. Block-RAMLA

One DIRECT view per subset, the invariant 400 ps kernel of the scanner, the model
`ybar_v = f_v H_v x + b_v` with the factors f_v = n_v a_v e_v (the sensitivity s_v of [HA]) and the
randoms background."""),
    code("""data = HistoImageData(prompts, grid, views, factors=factors, background=randoms.astype(xp.float32),
                      kernel=scanner.kernel(), scanner=scanner)
projector = HistoImageProjector(grid, views, scanner.kernel(), backend="cuda" if gpu else "cpu")
result = recon.block_ramla(ViewSubsets(projector, data), n_iter, store_every=1, progress=False)
curve = analysis.contrast_noise_curve(result, info, label="PETSIRD data")
for it, c, n in zip(curve.iterations, curve.crc, curve.noise):
    print(f"iteration {int(it):>2}: CRC {c:.3f}  noise {100 * n:5.1f} %")"""),
    md("""## 4. Image out

The image is written as NIfTI (sform and qform: scanner millimetres, voxel centres symmetric
about the axis) and read back; any viewer places it correctly."""),
    code("""image = np.asarray(result.image.get() if hasattr(result.image, "get") else result.image)
path = save_nifti(workdir / "reconstruction.nii.gz", image, grid)
back, back_grid = load_nifti(path)
assert back_grid == grid and np.array_equal(back, image)
print(f"wrote {path.name}: {back.shape}, voxel {back_grid.voxel_size} mm")

import matplotlib.pyplot as plt
fig, ax = plt.subplots(1, 2, figsize=(10, 4))
z = int(np.argmin(np.abs(grid.centres(0) - info.sphere_z_mm)))      # the spheres' slice
half_x, half_y = grid.nx * grid.voxel_size[2] / 2, grid.ny * grid.voxel_size[1] / 2
for a, img, title in ((ax[0], truth, "phantom"), (ax[1], image, f"block-RAMLA, {n_iter} passes, from PETSIRD")):
    shown = a.imshow(img[z], cmap="gray", origin="lower", extent=(-half_x, half_x, -half_y, half_y), vmin=0)
    fig.colorbar(shown, ax=a, shrink=0.85, label="activity (a.u.)")
    a.set_title(f"{title}, z = {grid.centres(0)[z]:.0f} mm", fontsize=10)
    a.set_xlabel("x (mm)"); a.set_ylabel("y (mm)")
fig.savefig(workdir / "real_data_slice.png", dpi=100, bbox_inches="tight")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/real_data_workflow.ipynb")
