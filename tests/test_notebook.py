"""The notebooks execute end to end at the sizes a reader gets on a CPU (their ``cpu`` defaults,
about a minute each on 2 cores): CI runs them exactly as written. On a GPU machine the defaults are
the papers' sizes (minutes each; ``scripts/gpu_check.sh`` runs those), so there the tests ask for
the same ``cpu`` size explicitly."""

import pathlib

import pytest

import directpet as dp

nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install directpet[test])")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install directpet[test])")
pytest.importorskip("ipykernel", reason="ipykernel not installed (pip install directpet[test])")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def _execute(name, tmp_path, monkeypatch):
    """Run every cell of notebooks/<name> at its CPU default; returns (printed text, figures)."""
    env = dict(DIRECTPET_NOTEBOOK_OUT=str(tmp_path / "figures"), JUPYTER_PLATFORM_DIRS="1", MPLBACKEND="Agg")
    if dp.cuda_device_count() > 0:
        env["DIRECTPET_NOTEBOOK_SIZE"] = "cpu"
    for key in ("DIRECTPET_NOTEBOOK_SIZE", "DIRECTPET_NOTEBOOK_ITER", "DIRECTPET_NOTEBOOK_EVENTS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return text, sorted(p.name for p in (tmp_path / "figures").iterdir())


@pytest.mark.slow
def test_reconstruction_notebook_runs(tmp_path, monkeypatch):
    """Runs every cell at the CPU default (10 passes of five kernel models) and checks the printed
    results: every model reaches the matched noise, so its CRC there is a number."""
    text, figures = _execute("direct_reconstruction.ipynb", tmp_path, monkeypatch)
    assert "size cpu, 10 iterations" in text and "expected run time: about 1 minute" in text
    rows = {parts[0]: parts for parts in map(str.split, text.splitlines())        # the table's 7 columns
            if len(parts) == 7 and parts[0] in ("invariant-fft", "invariant", "variant1", "variant2", "variant3")}
    assert len(rows) == 5
    for label, row in rows.items():
        assert row[3] == "8.0%", (label, row)            # matched noise reached within the passes
        assert 0.1 < float(row[2]) < 1.0, (label, row)   # CRC at matched noise
    assert "events deposited" in text
    # the penalised arm: three strengths for the invariant (FFT) and the variant1 kernel; at the
    # middle one BSREM-RDP has more contrast than block-RAMLA at the same noise (the notebook says so)
    arm = [line.split() for line in text.splitlines() if "BSREM CRC" in line]
    assert [(a[0], a[3]) for a in arm] == [(k, b) for k in ("invariant-fft", "variant1") for b in ("0.001", "0.003", "0.01")]
    for a in arm:
        if a[3] == "0.003":
            assert float(a[6]) > float(a[-1]), a
    assert figures == ["bsrem_beta_sweep.png", "contrast_noise.png", "line_profiles.png", "matched_noise_panels.png"]


@pytest.mark.slow
def test_first_notebook_runs(tmp_path, monkeypatch):
    """The FIRST notebook at its CPU default (10 OSEM iterations): every cell runs, the tables are
    printed for the three methods, the axial FWHM (0.8 mm slices) is printed as voxel-limited and the
    three figures are written."""
    text, figures = _execute("first_superlor.ipynb", tmp_path, monkeypatch)
    assert "size cpu, 10 OSEM iterations" in text and "expected run time" in text
    assert "Super-LORs" in text and "peak-to-valley after 10 iterations" in text
    assert "/ (0.80)" in text and "the voxels, not the system, limit it" in text
    for method in ("faithful", "matched", "fast"):
        assert f"{method:>9} vs matched" in text
    # the penalised arm for fast: each strength lowers OSEM's noise, and the strongest lowers the
    # largest rods' peak-to-valley more than the weakest does
    arm = [line.split() for line in text.splitlines() if line.startswith("  b = ")]
    assert [a[2] for a in arm] == ["0.003", "0.01", "0.03"]
    assert all(float(a[5]) < 1.0 for a in arm) and float(arm[-1][8].rstrip(",")) < float(arm[0][8].rstrip(","))
    assert figures == ["first_bsrem_sweep.png", "first_derenzo.png", "first_fwhm.png", "first_rod_profiles.png"]


@pytest.mark.slow
def test_dualhead_notebook_runs(tmp_path, monkeypatch):
    """The dual-head notebook at its CPU default (12 OSEM iterations): every cell runs, the tables
    and the storage report are printed, no ratio to a near-zero minimum is printed, and the four
    figures are written."""
    text, figures = _execute("dual_head.ipynb", tmp_path, monkeypatch)
    assert "size cpu, 12 OSEM iterations" in text and "expected run time" in text
    assert "peak-to-valley after 12 iterations" in text and "point-source FWHM" in text
    assert "unreduced" in text and "e+" not in text
    arm = [line.split() for line in text.splitlines() if line.startswith("  b = ")]
    assert [a[2] for a in arm] == ["0.003", "0.01", "0.03"]
    assert all(float(a[5]) < 1.0 for a in arm) and float(arm[-1][8].rstrip(",")) < float(arm[0][8].rstrip(","))
    assert figures == ["dualhead_bsrem_sweep.png", "dualhead_derenzo.png", "dualhead_fwhm.png",
                       "dualhead_profiles.png", "dualhead_rod_profiles.png"]


@pytest.mark.slow
def test_real_data_notebook_runs(tmp_path, monkeypatch):
    """The real-data workflow at its CPU default (5 block-RAMLA passes): a PETSIRD file is written
    and read, the corrections are built, the reconstruction prints CRC and noise per pass and the
    NIfTI image and the figure are written. The image shows the spheres: their CRC clearly exceeds
    the noise after the last pass (the Rose criterion: contrast-to-noise (6 - 1) CRC / noise above 4)."""
    text, figures = _execute("real_data_workflow.ipynb", tmp_path, monkeypatch)
    assert "size cpu" in text and "expected run time" in text
    assert "scan.petsird" in text and "161 TOF bins" in text and "events deposited" in text
    assert "wrote reconstruction.nii.gz" in text
    last = [line for line in text.splitlines() if line.startswith("iteration  5: CRC")]
    assert len(last) == 1
    crc, noise = float(last[0].split()[3]), float(last[0].split()[5]) / 100
    assert crc > 0.2 and 5.0 * crc / noise > 4.0, last[0]
    assert {"real_data_slice.png", "reconstruction.nii.gz", "scan.petsird"} <= set(figures)
