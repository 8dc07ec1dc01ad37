"""Sphinx configuration of the directpet documentation.

Build (from the repository root, with the package importable, e.g. installed by
``scripts/setup.sh`` or a developer build on ``PYTHONPATH=src``)::

    .venv/bin/python -m sphinx -W -b html docs docs/_build/html

The API reference is generated from the docstrings (autodoc + autosummary + numpydoc) into
``docs/api/generated``; the gallery (sphinx-gallery) runs every script of ``docs/examples`` at a tiny
size into ``docs/auto_examples``; the conventions figures are drawn by ``docs/conventions_figures.py``
(matplotlib, Agg) into ``docs/_generated``. All three are build outputs (git-ignored).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# The examples' OpenMP threads sleep rather than spin while they wait: on a shared 2-core machine a
# spinning team can make the gallery several times slower. Set before directpet loads its OpenMP runtime.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))               # conventions_figures

import directpet  # noqa: E402  (the package the build documents: installed, or src/ on PYTHONPATH)

# --- project ----------------------------------------------------------------------------------------
project = "directpet"
author = "the directpet developers"
copyright = "directpet developers, BSD-3-Clause"
version = release = directpet.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "examples/GALLERY_HEADER.rst"]
root_doc = "index"
nitpicky = False
default_role = "literal"       # `x` in docstrings reads as code, as ``x`` does

# --- API reference ----------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {
    "members": True,
    "undoc-members": True,          # a public object without a docstring is listed, and flagged (below)
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "none"          # signatures without annotations: the docstrings give types, shapes, units
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = True

numpydoc_show_class_members = False    # autodoc lists members; numpydoc's tables would repeat them
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = False
# "a missing docstring fails CI": every public module, class, function, method and property that autodoc
# documents must have a docstring (its own or the one it inherits); see _require_docstring below.
numpydoc_validation_checks = set()

# --- the gallery ------------------------------------------------------------------------------------


def _torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


# Every example is executed at its tiny size when the docs are built. The PyTorch example needs
# PyTorch, which is optional (directpet.autograd imports it only when used): without it the example is
# shown, not run, and the page says so.
_executed = r"/plot_" if _torch_available() else r"/plot_(?!\d+_autograd)"

sphinx_gallery_conf = {
    "examples_dirs": ["examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": _executed,
    "ignore_pattern": r"__init__\.py|_helpers\.py",
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": False,     # run them all, report every failure (the build then fails)
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "min_reported_time": 0,
    "capture_repr": ("_repr_html_", "__repr__"),
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "write_computation_times": True,
}

# --- HTML -------------------------------------------------------------------------------------------
html_theme = "alabaster"
html_static_path = []
html_title = f"directpet {release}"
html_theme_options = {
    "description": "PET reconstruction operators: DIRECT, FIRST Super-LOR, dual-head planar",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "sidebar_width": "240px",
    "show_relbars": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False

# Warnings of third-party packages while the examples run are not the docs' warnings.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def _figures(app):
    """The conventions page's figures, drawn from the package's own geometry classes."""
    import conventions_figures

    conventions_figures.main(HERE / "_generated")


_DOCUMENTED_KINDS = {"module", "class", "exception", "function", "method", "property", "classmethod",
                     "staticmethod"}


def _require_docstring(app, what, name, obj, options, lines):
    """A warning (an error under -W) for a public object the API reference lists without a docstring."""
    from sphinx.util import logging

    parent, last = name.rsplit(".", 1) if "." in name else ("", name)
    if what not in _DOCUMENTED_KINDS or last.startswith("_") or any(line.strip() for line in lines):
        return
    if what in ("function", "class", "exception") and getattr(obj, "__module__", parent) != parent:
        return                      # a name a module imports: documented (and checked) where it is defined
    try:
        import inspect

        target = inspect.unwrap(getattr(obj, "fget", None) or obj)
        where = f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
    except (TypeError, OSError):
        where = None
    logging.getLogger("directpet.docs").warning(f"missing docstring: {what} {name}", location=where)


def setup(app):
    app.connect("builder-inited", _figures)
    app.connect("autodoc-process-docstring", _require_docstring, priority=400)
