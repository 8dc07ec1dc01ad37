"""The notebooks execute end to end (reduced sizes: CI machines have no GPU)."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install directpet[test])")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install directpet[test])")
pytest.importorskip("ipykernel", reason="ipykernel not installed (pip install directpet[test])")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def _execute(name, tmp_path, monkeypatch, **env):
    """Run every cell of notebooks/<name> with the given environment; returns (printed text, figures)."""
    for key, value in dict(env, DIRECTPET_NOTEBOOK_OUT=str(tmp_path / "figures"), JUPYTER_PLATFORM_DIRS="1",
                           MPLBACKEND="Agg").items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return text, sorted(p.name for p in (tmp_path / "figures").iterdir())


@pytest.mark.slow
def test_reconstruction_notebook_runs(tmp_path, monkeypatch):
    """Runs every cell at the 'tiny' size with a few iterations and checks the printed results."""
    text, figures = _execute("direct_reconstruction.ipynb", tmp_path, monkeypatch, DIRECTPET_NOTEBOOK_SIZE="tiny",
                             DIRECTPET_NOTEBOOK_ITER="3", DIRECTPET_NOTEBOOK_EVENTS="1e6")
    for label in ("invariant-fft", "invariant", "variant1", "variant2", "variant3"):
        assert label in text
    assert "events deposited" in text
    assert figures == ["contrast_noise.png", "line_profiles.png", "matched_noise_panels.png"]


@pytest.mark.slow
def test_first_notebook_runs(tmp_path, monkeypatch):
    """The FIRST notebook at the 'tiny' size with 3 OSEM iterations: every cell runs, the tables are
    printed for the three methods and the three figures are written."""
    text, figures = _execute("first_superlor.ipynb", tmp_path, monkeypatch, DIRECTPET_NOTEBOOK_SIZE="tiny",
                             DIRECTPET_NOTEBOOK_ITER="3")
    assert "Super-LORs" in text and "peak-to-valley after 3 iterations" in text
    for method in ("faithful", "matched", "fast"):
        assert f"{method:>9} vs matched" in text
    assert figures == ["first_derenzo.png", "first_fwhm.png", "first_rod_profiles.png"]


@pytest.mark.slow
def test_dualhead_notebook_runs(tmp_path, monkeypatch):
    """The dual-head notebook at the 'tiny' size with 2 OSEM iterations: every cell runs, the tables
    and the storage report are printed and the four figures are written."""
    text, figures = _execute("dual_head.ipynb", tmp_path, monkeypatch, DIRECTPET_NOTEBOOK_SIZE="tiny",
                             DIRECTPET_NOTEBOOK_ITER="2")
    assert "peak-to-valley after 2 iterations" in text and "point-source FWHM" in text
    assert "unreduced" in text
    assert figures == ["dualhead_derenzo.png", "dualhead_fwhm.png", "dualhead_profiles.png",
                       "dualhead_rod_profiles.png"]


@pytest.mark.slow
def test_real_data_notebook_runs(tmp_path, monkeypatch):
    """The real-data workflow at the 'tiny' size with 3 block-RAMLA passes: a PETSIRD file is written
    and read, the corrections are built, the reconstruction prints CRC and noise per pass and the
    NIfTI image and the figure are written."""
    text, figures = _execute("real_data_workflow.ipynb", tmp_path, monkeypatch, DIRECTPET_NOTEBOOK_SIZE="tiny",
                             DIRECTPET_NOTEBOOK_ITER="3")
    assert "scan.petsird" in text and "161 TOF bins" in text and "events deposited" in text
    assert "iteration  3: CRC" in text and "wrote reconstruction.nii.gz" in text
    assert {"real_data_slice.png", "reconstruction.nii.gz", "scan.petsird"} <= set(figures)
