"""Write notebooks/direct_reconstruction.ipynb (outputs are not committed; run it to fill them)."""

import nbformat as nbf
nb = nbf.v4.new_notebook()
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
nb.cells = [
    md("""# DIRECT TOF-PET reconstruction with spatially variant kernels ([HA] §6, Fig. 9/10)

A 35 cm water cylinder with six 10 mm spheres (6:1) at 7.5 cm radius in the central slice is
simulated as list-mode TOF events (400 ps, 5.8 mm intrinsic blur, attenuation), deposited into
40 × 3 view histo-images and reconstructed with block-RAMLA (one view per block, geometric order)
for the paper's five SR-kernel models:

| label | projector | LOR-radial FWHM |
|---|---|---|
| `invariant-fft` | `FFTProjector` (cuFFT / FFTW3) | 5.8 mm |
| `invariant` | `HistoImageProjector` | 5.8 mm |
| `variant1` | `HistoImageProjector` | 4.8 → 10 mm (matches 5.8 mm at the spheres) |
| `variant2` | `HistoImageProjector` | 5.8 → 12 mm |
| `variant3` | `HistoImageProjector` | √(5.8² + (0.0236·s)²), 11.17 mm at the edge |

CRC and noise are computed as in the paper (2D sphere ROI and background annulus, 50 mm central
noise ROI) and compared at matched noise (8 %). A penalised arm (BSREM with the relative
difference prior over a sweep of strengths) shows the same trade-off the way Q.Clear-type studies do.

**Sizes.** On a GPU the notebook runs the paper's size (144 × 144 × 48 voxels of 4 mm, 430 M
events, 40 passes). On a CPU it runs the `cpu` size (96 × 96 × 8 voxels of 4 mm, 20 M events,
10 passes, and the penalised arm: about a minute on 2 cores), which keeps the phantom and the counts per slice close to
the paper's. `DIRECTPET_NOTEBOOK_SIZE=tiny|cpu|small|paper` and `DIRECTPET_NOTEBOOK_ITER=N` choose
another (`paper` on a CPU takes hours)."""),
    code("""import os
import numpy as np
import directpet as dp
from directpet.direct.experiment import ExperimentConfig, run_experiment, write_figures

gpu = dp.cuda_device_count() > 0
size = os.environ.get("DIRECTPET_NOTEBOOK_SIZE", "paper" if gpu else "cpu")
n_iter = int(os.environ.get("DIRECTPET_NOTEBOOK_ITER", {"paper": "40", "small": "30"}.get(size, "10")))
events = os.environ.get("DIRECTPET_NOTEBOOK_EVENTS")
# the penalised arm: BSREM with the relative difference prior from the last block-RAMLA image, for the
# invariant (FFT) and the first variant kernel, over relative strengths b (beta = b * mean sensitivity);
# the b that trade noise for contrast depend on the problem (voxels, counts): these span each size's range
betas = (1e-4, 3e-4, 1e-3) if size == "paper" else (1e-3, 3e-3, 1e-2)
cfg = ExperimentConfig(size=size, n_iter=n_iter, n_events=None if events is None else int(float(events)),
                       kernels=("invariant-fft", "invariant", "variant1", "variant2", "variant3"),
                       bsrem_betas=betas, bsrem_passes=10 if size == "paper" else 5,
                       bsrem_kernels=("invariant-fft", "variant1"), progress=False)
# wall times of this notebook measured at its default sizes (benchmarks/RESULTS.md, notebooks)
expected = {("cpu", False): "about 1 minute on a 2-core CPU",
            ("paper", True): "about 20 s on an H200 (35 s on a first run, which compiles CuPy's kernels)"}
print(f"size {size}, {n_iter} iterations, CUDA device: {gpu}; expected run time: "
      f"{expected.get((size, gpu), 'not measured for this choice')}")"""),
    code("""res = run_experiment(cfg)
print(f"{res.data.meta['n_deposited']:,} events deposited; simulation {res.timings['simulation_s']:.1f} s")
print(res.table())"""),
    md("""## Contrast recovery vs noise

Each point is one block-RAMLA iteration; the vertical line marks the matched noise level."""),
    code("""%matplotlib inline
paths = write_figures(res, os.environ.get("DIRECTPET_NOTEBOOK_OUT", "direct_reconstruction_figures"))
from IPython.display import Image, display
for p in paths:
    display(Image(filename=p))"""),
    md("""## Penalised reconstruction: BSREM with the relative difference prior

Block-RAMLA trades noise against contrast by when it stops. BSREM minimises the penalised
objective `-L(x) + R(x)` instead, so the image no longer depends on the iteration count, and the
prior's strength sets the trade-off: each b below is one point (`directpet.recon.bsrem`,
`RelativeDifferencePrior` with γ = 2, started from the kernel's last block-RAMLA image). Compare
each kernel's BSREM points with its block-RAMLA curve at the same noise. At the paper's size (H200,
benchmarks/RESULTS.md §10) BSREM-RDP recovers more contrast than block-RAMLA at low noise (b = 3e-4:
CRC 0.489 at 5.6 % noise, block-RAMLA 0.474 there) and about the same at high noise (b = 1e-4: 0.530
at 9.8 %, block-RAMLA 0.540); a strong prior (b = 1e-3) reaches noise levels block-RAMLA never
has, at a lower contrast."""),
    code("""from directpet.analysis import pick_matched_noise
for label, points in res.bsrem.items():
    curve = next(c for c in res.curves if c.label == label)
    for b, noise, crc in points:
        # block-RAMLA's CRC where its noise equals this BSREM point's (interpolated along its iterations)
        m = pick_matched_noise([curve], target=noise)[0]
        ramla = {"ok": f"{m.crc:.3f}", "above at first": "none (its first pass is already noisier)",
                 "not reached": "none (it never gets this noisy)"}.get(m.status, m.status)
        print(f"{label:<14} b = {b:<7g} BSREM CRC {crc:.3f} at {100 * noise:4.1f} % noise; block-RAMLA at that noise: {ramla}")"""),
    md("""## The paper's findings, checked on these images

[HA] report: FFT and spatial invariant reconstructions are nearly identical; `variant1`
converges to a slightly *lower* CRC than the invariant kernel (the width it models at the spheres
averages below 5.8 mm); `variant2` and `variant3` converge to a *higher* CRC with more edge
overshoot. The cell below evaluates these statements at the matched noise level (and at the last
iteration, where the curves are furthest apart); on the reduced problems the differences are
smaller than the noise, so read them at paper size."""),
    code("""from directpet.direct.experiment import science_checks
for name, value in science_checks(res):
    print(f"{name:<78} {value:+.4f}")"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/direct_reconstruction.ipynb")
print("wrote notebooks/direct_reconstruction.ipynb")
