"""The shared layers (recon/, sim/, analysis/, parallel/, io/) never import a projector family (design.md).

Two independent checks: the directpet imports written in each layer's modules (parsed, so imports
inside functions count too) stay within an allow-list of shared modules, and importing the layer
in a fresh interpreter loads no family module.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

FAMILIES = ("direct", "first", "dualhead")

# Layer -> the directpet modules it may import (and their submodules).
ALLOWED = {
    # _core / _backend: the compiled priors on the CPU and (the CUDA module, loaded through _backend) the GPU
    "recon": {"directpet._backend", "directpet._checks", "directpet._core", "directpet.recon"},
    "sim": {"directpet._checks", "directpet.geometry", "directpet.sim"},
    "analysis": {"directpet._checks", "directpet.geometry", "directpet.analysis", "directpet.recon",
                 "directpet.sim"},
    "parallel": {"directpet._backend", "directpet._checks", "directpet.parallel", "directpet.recon"},
    "io": {"directpet._checks", "directpet._core", "directpet.geometry", "directpet.io"},
}


def _directpet_imports(layer: str):
    """(file, module) for every import of a directpet module in directpet/<layer>/*.py."""
    package = importlib.import_module(f"directpet.{layer}")
    found = []
    for path in sorted(pathlib.Path(package.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:           # relative to the package directpet.<layer>
                    base = ".".join(["directpet", layer][:3 - node.level])
                    # `from .. import _core` imports the module directpet._core
                    names = ([f"{base}.{node.module}"] if node.module
                             else [f"{base}.{alias.name}" for alias in node.names])
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found.extend((path.name, m) for m in names if m.split(".")[0] == "directpet")
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_shared_modules(layer):
    found = _directpet_imports(layer)
    assert found, f"the scan found no directpet import in {layer}/"       # it does read the modules
    bad = [(f, m) for f, m in found if not any(m == a or m.startswith(a + ".") for a in ALLOWED[layer])]
    assert not bad, f"{layer}/ imports outside the shared layers: {bad}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_importing_a_layer_loads_no_family(layer):
    code = (f"import sys, directpet.{layer}; "
            f"print(sorted(m for m in sys.modules if m.startswith('directpet.') "
            f"and m.split('.')[1] in {FAMILIES!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
