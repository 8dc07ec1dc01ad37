"""The notebooks execute end to end (reduced sizes: CI machines have no GPU)."""

import os
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install directpet[test])")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install directpet[test])")
pytest.importorskip("ipykernel", reason="ipykernel not installed (pip install directpet[test])")

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "direct_reconstruction.ipynb"


@pytest.mark.slow
def test_reconstruction_notebook_runs(tmp_path, monkeypatch):
    """Runs every cell at the 'tiny' size with a few iterations and checks the printed results."""
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_SIZE", "tiny")
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_ITER", "3")
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_EVENTS", "1e6")
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_OUT", str(tmp_path / "figures"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for label in ("invariant-fft", "invariant", "variant1", "variant2", "variant3"):
        assert label in text
    assert "events deposited" in text
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "contrast_noise.png", "line_profiles.png", "matched_noise_panels.png"]


FIRST_NOTEBOOK = NOTEBOOK.parent / "first_superlor.ipynb"


@pytest.mark.slow
def test_first_notebook_runs(tmp_path, monkeypatch):
    """The FIRST notebook at the 'tiny' size with 3 OSEM iterations: every cell runs, the tables are
    printed for the three methods and the three figures are written."""
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_SIZE", "tiny")
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_ITER", "3")
    monkeypatch.setenv("DIRECTPET_NOTEBOOK_OUT", str(tmp_path / "figures"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(FIRST_NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Super-LORs" in text and "peak-to-valley after 3 iterations" in text
    for method in ("faithful", "matched", "fast"):
        assert f"{method:>9} vs matched" in text
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "first_derenzo.png", "first_fwhm.png", "first_rod_profiles.png"]
