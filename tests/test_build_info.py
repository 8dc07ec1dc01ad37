"""directpet.build_info() / show_config(): what a build holds and finds, in one call (issue 20)."""

from __future__ import annotations

import io

import pytest

import directpet


def test_build_info_says_what_the_build_holds_and_finds():
    info = directpet.build_info()
    assert info["version"] == directpet.__version__
    assert info["cpu_dispatch"] in ("x86-64-v4", "x86-64-v3", "baseline", "native", "none")
    assert info["fftw"].startswith("fftw-3")
    assert info["openmp_threads"] >= 1 and info["compiler"]
    assert info["cuda_compiled"] == directpet.has_cuda()
    assert not info["cuda_loaded"] or info["cuda_compiled"]   # loads only where compiled in
    if info["cuda_loaded"]:
        assert info["cuda_architectures"]           # the architectures compiled in, e.g. '80-real,90'
    else:
        assert info["cuda_architectures"] is None and info["cuda_devices"] == []
        assert info["cuda_status"] and info["cuda_status"] != "ok"   # says why
    # one line per usable device, and as many as cuda_device_count() counts
    assert len(info["cuda_devices"]) == directpet.cuda_device_count()
    assert info["numpy"] is not None


def test_show_config_prints_one_line_per_item():
    out = io.StringIO()
    directpet.show_config(file=out)
    text = out.getvalue()
    assert text.startswith(f"directpet {directpet.__version__}")
    for item in ("CPU code path", "FFTW", "CUDA backend", "CUDA runtime", "CUDA devices", "array libraries"):
        assert item in text, item
    assert directpet.build_info()["cpu_dispatch"] in text


# Run with the dynamic loader's cache switched off: the CUDA toolkit's libraries (cuFFT, found only
# through /etc/ld.so.cache) are then invisible, as on a machine without the toolkit.
_HIDDEN_CUDA_PROBE = r"""
import ctypes, json
import numpy as np
try:
    ctypes.CDLL("libcufft.so.12")
    cufft_visible = True
except OSError:
    cufft_visible = False
import directpet as dp
from directpet import _backend, reference
from directpet.direct import HistoImageProjector, SRKernel, View
grid = dp.ImageGrid((6, 10, 12), 4.0)
op = HistoImageProjector(grid, [View.from_degrees(31.5, 6.67)], SRKernel.clinical())
x = np.random.default_rng(7).random(grid.shape, dtype=np.float32)
got = op.forward(x, 0)
want = reference.direct.forward(x.astype(np.float64), op.lut(0))
print(json.dumps({"cufft_visible": cufft_visible, "cufft_wheel": _backend._nvidia_wheel_libraries(),
                  "has_cuda": dp.has_cuda(), "devices": dp.cuda_device_count(),
                  "loaded": _backend.cuda_loaded(), "status": _backend.cuda_status(), "backend": op.backend,
                  "rel_err": float(np.abs(got - want).max() / np.abs(want).max())}))
"""


def _probe_with_loader_cache_off(probe: str, tmp_path) -> dict:
    """Run ``probe`` (Python printing one JSON line) in a fresh interpreter started by glibc's dynamic
    loader with ``--inhibit-cache``: libraries found only through /etc/ld.so.cache (the CUDA toolkit's)
    are then invisible, as on a machine without them. LD_LIBRARY_PATH is dropped; the directpet under
    test (an installed wheel or a source tree) comes first on PYTHONPATH."""
    import glob
    import json
    import os
    import subprocess
    import sys

    loaders = sorted(glob.glob("/lib64/ld-linux-x86-64.so.*"))
    if not loaders:
        pytest.skip("no glibc dynamic loader at /lib64 to run with --inhibit-cache")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(directpet.__file__)),
                                         env.get("PYTHONPATH", "")])
    run = subprocess.run([loaders[0], "--inhibit-cache", sys.executable, "-c", probe], env=env,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_cpu_import_and_projection_with_the_cuda_libraries_hidden(tmp_path):
    """A wheel with the CUDA backend compiled in imports and projects on the CPU where cuFFT cannot be
    found: the CUDA module is loaded only on first use, and its failure is reported, not raised."""
    if not directpet.has_cuda():
        pytest.skip("the CUDA backend is not compiled in: there is no CUDA library to hide")
    r = _probe_with_loader_cache_off(_HIDDEN_CUDA_PROBE, tmp_path)
    assert r["has_cuda"] and r["rel_err"] < 1e-5, r
    if r["cufft_wheel"]:
        pytest.skip(f"cuFFT comes from NVIDIA's wheel here ({r['cufft_wheel'][0]}), which the loader finds by path")
    if r["cufft_visible"]:
        pytest.skip("cuFFT lies in one of the loader's default directories here: it cannot be hidden")
    if r["loaded"]:
        pytest.skip("this _cuda module (a build-tree copy) carries a RUNPATH to the toolkit: nothing to hide")
    assert r["backend"] == "cpu" and r["devices"] == 0, r
    assert "libcufft" in r["status"] and "directpet[cuda]" in r["status"], r["status"]


def test_cufft_from_nvidias_wheel_is_found_where_pip_puts_it(tmp_path, monkeypatch):
    """nvidia-cufft installs site-packages/nvidia/cu13/lib/libcufft.so.12 (a namespace package, no
    __init__); the loader looks there before the system's libraries."""
    from directpet import _backend

    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcufft.so.12").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(lib / "libcufft.so.12") in _backend._nvidia_wheel_libraries()


def test_an_installed_build_says_its_version_from_git():
    """The build writes directpet/_version.py from the git tag (setuptools-scm): the package and its
    metadata say the same version, and it is a real one (X.Y.Z or X.Y.devN+gHASH), not a placeholder."""
    import importlib.metadata
    import pathlib
    import re

    if not (pathlib.Path(directpet.__file__).parent / "_version.py").exists():
        pytest.skip("a source tree on sys.path: no build wrote directpet/_version.py")
    assert directpet.__version__ == importlib.metadata.version("directpet")
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?(\.dev\d+)?(\+g[0-9a-f]+(\.d\d{8})?)?", directpet.__version__), \
        directpet.__version__


_WHEEL_CUFFT_PROBE = r"""
import json
import numpy as np
import directpet as dp
from directpet import _backend
from directpet.direct import FFTProjector, SRKernel, View
grid = dp.ImageGrid((6, 10, 12), 4.0)
views = [View.from_degrees(31.5, 6.67)]
x = np.random.default_rng(3).random(grid.shape, dtype=np.float32)
if dp.cuda_device_count() == 0:
    print(json.dumps({"devices": 0, "status": _backend.cuda_status()}))
    raise SystemExit(0)
gpu = FFTProjector(grid, views, SRKernel.invariant(), backend="cuda").forward(x, 0)   # NumPy in and out
cpu = FFTProjector(grid, views, SRKernel.invariant(), backend="cpu").forward(x, 0)
maps = open("/proc/self/maps").read()
print(json.dumps({"cufft": sorted({l.split()[-1] for l in maps.splitlines() if "libcufft" in l}),
                  "devices": dp.cuda_device_count(), "status": _backend.cuda_status(),
                  "rel_err": float(np.abs(gpu - cpu).max() / np.abs(cpu).max())}))
"""


@pytest.mark.gpu
def test_gpu_backend_with_cufft_from_nvidias_wheel_only(tmp_path):
    """A machine with a driver and the ``cuda`` extra, no toolkit: with the loader's cache off (the
    toolkit's cuFFT invisible), the CUDA module loads cuFFT from the nvidia-cufft wheel and the cuFFT
    projector agrees with the CPU one."""
    from directpet import _backend

    if not _backend._nvidia_wheel_libraries():
        pytest.skip("no nvidia-cufft wheel installed here (pip install 'directpet[cuda]')")
    r = _probe_with_loader_cache_off(_WHEEL_CUFFT_PROBE, tmp_path)
    if r["devices"] == 0:
        pytest.skip(f"with the loader cache off no GPU is usable here (the driver's libcuda is found only "
                    f"through the cache): {r['status']}")
    assert r["cufft"] and all("/nvidia/" in p for p in r["cufft"]), r     # the wheel's copy, not the toolkit's
    assert r["rel_err"] < 1e-5, r
