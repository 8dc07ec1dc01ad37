"""From a PETSIRD file to an image in one call (issue 18): ``reconstruct_petsird`` and ``directpet
reconstruct`` at a tiny size, against the same events taken through the workflow by hand (deposit,
randoms from delayeds, normalisation x sensitivity x attenuation, block-RAMLA), and bad input named."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("petsird", reason="petsird not installed (pip install 'directpet[io]')")
pytest.importorskip("nibabel", reason="nibabel not installed (pip install 'directpet[io]')")

from directpet import recon  # noqa: E402
from directpet.direct import (CylindricalScanner, HistoImageData, HistoImageProjector, SRKernel, ViewSubsets,  # noqa: E402
                              attenuation_histo_images, normalisation_histo_images, randoms_from_delayeds,
                              sensitivity_attenuation, simulate_events, simulate_randoms)
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.direct.workflow import reconstruct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.io import load_nifti, save_nifti  # noqa: E402
from directpet.io.petsird import Coincidences, PetsirdScanner, PetsirdWriter  # noqa: E402
from directpet.sim.phantoms import sphere_phantom  # noqa: E402

GRID = ImageGrid((8, 48, 48), 8.0)
VIEWS = CylindricalScanner().viewset(10, 3)     # 30 views: a quick test (the default is the paper's 120)
# the exact spatial projector, as the workflow by hand uses (the default 'auto' may take the low-rank FFT one)
FAST = dict(viewset=VIEWS, attenuation_n_sub=1, backend="cpu", progress=False, projector="spatial")


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    """A tiny scan of the sphere phantom: prompts (with randoms) and delayeds in a PETSIRD file whose
    crystals have random efficiencies, and the phantom's attenuation map as NIfTI."""
    folder = tmp_path_factory.mktemp("scan")
    scanner = CylindricalScanner()
    truth, info = sphere_phantom(GRID, length_mm=64.0)
    rng = np.random.default_rng(18)
    eps = rng.normal(1.0, 0.1, direct_petsird.ring_shape(direct_petsird.scanner_header(scanner))).clip(0.6, 1.4)
    header = direct_petsird.scanner_header(scanner, crystal_efficiencies=eps)
    crystals = PetsirdScanner(header.scanner)

    def recorded(events):
        ev = direct_petsird.events_to_coincidences(events, crystals)
        return {(0, 0): Coincidences(ev.bin0, ev.bin1, ev.tof_idx)}

    path = folder / "scan.petsird"
    with PetsirdWriter(path, header) as writer:
        for batch in simulate_events(scanner, info, 300_000, seed=4, randoms_fraction=0.2, progress=False,
                                     chunk_size=100_000):
            delayed = simulate_randoms(scanner, int(rng.poisson(batch.n_randoms)), seed=rng)
            writer.write_block(prompts=recorded(batch), delayeds=recorded(delayed))
    mu = info.attenuation.mu_map(GRID)
    mu_path = save_nifti(folder / "mu.nii.gz", mu, GRID)
    return {"path": path, "mu": mu, "mu_path": mu_path, "header": header, "scanner": scanner, "folder": folder}


def _by_hand(scan, n_iter):
    """The notebook's workflow, step by step (the reference for the one call)."""
    return recon.block_ramla(_problem_by_hand(scan), n_iter, progress=False).image


def _problem_by_hand(scan):
    """The reconstruction problem of the scan built step by step from the reference deposition."""
    scanner, views = scan["scanner"], VIEWS
    prompts = direct_petsird.deposit_file(scan["path"], GRID, views, xp=np, progress=False, engine="python")
    randoms = randoms_from_delayeds(direct_petsird.read_events(scan["path"], "delayeds"), GRID, views,
                                    smooth_fwhm_mm=3 * 8.0, xp=np)
    factors = (sensitivity_attenuation(GRID, views, scanner=scanner)
               * normalisation_histo_images(scan["header"], GRID, views, scanner=scanner, n_sub=2)
               * attenuation_histo_images(scan["mu"].astype(np.float32), GRID, GRID, views, n_sub=1))
    data = HistoImageData(prompts, GRID, views, factors=factors.astype(np.float32),
                          background=randoms.astype(np.float32), kernel=scanner.kernel(), scanner=scanner)
    projector = HistoImageProjector(GRID, views, scanner.kernel(), backend="cpu")
    return ViewSubsets(projector, data)


def test_one_call_reconstructs_as_the_workflow_by_hand(scan, tmp_path):
    out = tmp_path / "image.nii.gz"
    r = reconstruct_petsird(scan["path"], GRID, mu=scan["mu_path"], n_iter=2, out=out, **FAST)
    want = _by_hand(scan, 2)
    assert r.image.shape == GRID.shape and r.image.dtype == np.float32 and r.image.max() > 0
    np.testing.assert_allclose(r.image, want, rtol=1e-4, atol=1e-6 * float(want.max()))
    back, back_grid = load_nifti(out)
    assert back_grid == GRID and np.array_equal(back, r.image)
    assert list(r.timings) == ["events", "randoms", "normalisation", "sensitivity", "attenuation", "projector",
                               "reconstruction", "write"]
    assert r.projector.method == "spatial" and r.projector.model_error == 0.0
    assert all(t >= 0 for t in r.timings.values()) and r.wall_s >= sum(r.timings.values())
    assert r.n_prompts > 0 and 0 < r.n_deposited <= r.n_prompts and r.n_delayeds > 0
    assert "total" in r.summary() and r.backend == "cpu"


def test_the_corrections_matter(scan):
    """Without the attenuation map the image differs (lower at the centre); an external scatter
    estimate added to the background lowers the image where it is added."""
    with_mu = reconstruct_petsird(scan["path"], GRID, mu=scan["mu"], mu_grid=GRID, n_iter=2, **FAST).image
    without = reconstruct_petsird(scan["path"], GRID, n_iter=2, **FAST).image
    centre = (slice(3, 5), slice(20, 28), slice(20, 28))
    assert without[centre].mean() < 0.8 * with_mu[centre].mean()
    scatter = np.full((len(VIEWS),) + GRID.shape, 0.5, np.float32)
    scattered = reconstruct_petsird(scan["path"], GRID, mu=scan["mu"], mu_grid=GRID, scatter=scatter, n_iter=2, **FAST)
    assert "scatter" in scattered.timings
    assert scattered.image.sum() < with_mu.sum()


def test_cli_reconstruct_writes_the_image(scan, tmp_path, capsys):
    from directpet.cli import main

    out = tmp_path / "cli.nii"
    assert main(["reconstruct", str(scan["path"]), "--mu", str(scan["mu_path"]), "-o", str(out), "--shape",
                 "8,48,48", "--voxel", "8", "--views", "10,3", "--attenuation-sub", "1", "--iterations", "2",
                 "--backend", "cpu", "--projector", "spatial", "--quiet"]) == 0
    text = capsys.readouterr().out
    for stage in ("events", "randoms", "normalisation", "sensitivity", "attenuation", "projector", "reconstruction",
                  "write", "other", "total", "DIRECT projector: spatial (exact)"):
        assert stage in text, stage
    image, grid = load_nifti(out)
    assert grid == GRID
    np.testing.assert_allclose(image, _by_hand(scan, 2), rtol=1e-4, atol=1e-6 * float(image.max()))


def test_projector_choice_meets_the_model_accuracy(scan):
    """projector='lowrank' reconstructs with the low-rank FFT projector at the stated kernel accuracy:
    its image is the exact projector's to well within the effect of a 1e-4 model error; 'auto'
    takes one of the two (whichever it timed faster here) and says which."""
    kw = dict(FAST, mu=scan["mu"], mu_grid=GRID, n_iter=2, kernel=SRKernel.clinical())   # spatially variant
    exact = reconstruct_petsird(scan["path"], GRID, **kw)
    lowrank = reconstruct_petsird(scan["path"], GRID, **dict(kw, projector="lowrank"))
    choice = lowrank.projector
    assert choice.method == "lowrank" and 0.0 < choice.model_error <= 1e-4 and choice.rank >= 2
    diff = np.linalg.norm(lowrank.image - exact.image) / np.linalg.norm(exact.image)
    assert 0.0 < diff < 1e-3
    auto = reconstruct_petsird(scan["path"], GRID, **dict(kw, projector="auto"))
    assert auto.projector.method in ("spatial", "lowrank") and set(auto.projector.ms) == {"spatial", "lowrank"}
    assert "fft" in auto.projector.skipped          # not an invariant kernel
    assert "DIRECT projector:" in auto.summary()
    with pytest.raises(ValueError, match="projector"):
        reconstruct_petsird(scan["path"], GRID, **dict(kw, projector="fastest"))
    with pytest.raises(ValueError, match="model_accuracy"):
        reconstruct_petsird(scan["path"], GRID, **dict(kw, projector="lowrank", model_accuracy=0.0))


def test_penalised_reconstruction_is_bsrem_from_block_ramla(scan):
    """'bsrem': the same image as block-RAMLA passes then recon.bsrem with the relative difference
    prior, done by hand; a stronger prior gives a smoother image inside the phantom's cylinder."""
    from directpet.recon import RelativeDifferencePrior, bsrem, sensitivity_image

    problem = _problem_by_hand(scan)
    start = recon.block_ramla(problem, 2, progress=False).image
    prior = RelativeDifferencePrior(1e-4 * float(sensitivity_image(problem).mean()), GRID, gamma=2.0,
                                    epsilon=1e-3 * float(start.mean()))
    want = bsrem(problem, prior, 2, x0=start, progress=False).image
    weak = reconstruct_petsird(scan["path"], GRID, mu=scan["mu_path"], algorithm="bsrem", n_iter=2, rdp_b=1e-4, **FAST)
    np.testing.assert_allclose(weak.image, want, rtol=1e-4, atol=1e-6 * float(want.max()))
    strong = reconstruct_petsird(scan["path"], GRID, mu=scan["mu_path"], algorithm="bsrem", n_iter=2, rdp_b=1e-1,
                                 **FAST)
    inside = (slice(2, 6), slice(18, 30), slice(18, 30))

    def roughness(im):
        return float(np.abs(np.diff(im[inside], axis=-1)).mean() / im[inside].mean())

    assert roughness(strong.image) < 0.8 * roughness(weak.image)
    with pytest.raises(ValueError, match="rdp_b"):
        reconstruct_petsird(scan["path"], GRID, algorithm="bsrem", rdp_b=0.0, backend="cpu")


def test_bad_input_is_named(scan, tmp_path):
    with pytest.raises(ValueError, match="algorithm"):
        reconstruct_petsird(scan["path"], GRID, algorithm="mlem", backend="cpu")
    with pytest.raises(ValueError, match="out"):
        reconstruct_petsird(scan["path"], GRID, out=tmp_path / "image.png", backend="cpu")
    with pytest.raises(ValueError, match="mu_grid"):
        reconstruct_petsird(scan["path"], GRID, mu=scan["mu"], backend="cpu")
    with pytest.raises(ValueError, match="scatter"):
        reconstruct_petsird(scan["path"], GRID, scatter=np.zeros((3,) + GRID.shape, np.float32), backend="cpu")
    with pytest.raises(ValueError, match="n_iter"):
        reconstruct_petsird(scan["path"], GRID, n_iter=0, backend="cpu")
    with pytest.raises(FileNotFoundError):
        reconstruct_petsird(tmp_path / "missing.petsird", GRID, backend="cpu")
    with pytest.raises(TypeError, match="grid"):
        reconstruct_petsird(scan["path"], (8, 48, 48), backend="cpu")


@pytest.mark.gpu
def test_gpu_reconstructs_as_the_cpu(scan):
    """The same call on the GPU (CuPy throughout: deposition, corrections, block-RAMLA)."""
    cpu = reconstruct_petsird(scan["path"], GRID, mu=scan["mu_path"], n_iter=2, **FAST)
    gpu = reconstruct_petsird(scan["path"], GRID, mu=scan["mu_path"], n_iter=2, **dict(FAST, backend="cuda"))
    assert gpu.backend == "cuda" and list(gpu.timings) == list(cpu.timings)
    np.testing.assert_allclose(gpu.image, cpu.image, rtol=2e-3, atol=2e-4 * float(cpu.image.max()))
