"""The documentation builds with warnings as errors: the API reference from the docstrings (a missing
docstring or broken markup fails), the conventions figures, and the gallery, whose examples all run at
their tiny sizes (a broken example fails). The same command as the README's, into a temporary folder."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest


def _installed(name: str) -> bool:
    """A real package, found without importing it: a bare directory of that name on sys.path is a
    namespace package, and importing it would leave a 'sphinx' without 'sphinx.ext' in sys.modules,
    which SciPy's docstring code (scipy.stats) later trips over in other test modules."""
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin not in (None, "namespace")


for _name in ("sphinx", "numpydoc", "sphinx_gallery"):
    if not _installed(_name):
        pytest.skip(f"{_name} not installed (pip install directpet[docs])", allow_module_level=True)

import directpet  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    # the build (and the examples it runs) documents the directpet these tests import
    package_root = str(pathlib.Path(directpet.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-d", str(tmp_path / "doctrees"),
           str(ROOT / "docs"), str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    problems = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line or "Error" in line]
    rc = proc.returncode
    assert rc == 0, ("sphinx-build -W failed:\n" + "\n".join(problems[:200])
                     + "\n--- end of the log ---\n" + log[-4000:])
    assert (out / "index.html").is_file()
    for page in ("conventions", "physics", "vocabulary", "references", "auto_examples/index", "api/index"):
        assert (out / f"{page}.html").is_file(), page
    figures = sorted(p.name for p in (out / "_images").iterdir())
    for name in ("grid.png", "direct_views.png", "first_geometry.png", "dualhead_geometry.png"):
        assert name in figures, (name, figures)
    # every executed example produced at least one figure
    examples = sorted(p.stem for p in (ROOT / "docs" / "examples").glob("plot_*.py"))
    for stem in examples:
        if "autograd" in stem and not _has_torch():
            continue
        assert any(f.startswith(f"sphx_glr_{stem}_") for f in figures), (stem, figures)


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
