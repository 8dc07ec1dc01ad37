"""Access to the compiled modules and to optional GPU array libraries (never imported unguarded).

Two extension modules: ``directpet._core``, the CPU backend, always; ``directpet._cuda``, the CUDA
backend, when it was compiled in. ``_cuda`` links cuFFT, so it is imported only when a CUDA path is
asked for (:func:`cuda_module`), never by ``import directpet``: a machine without the CUDA libraries
or without a driver imports directpet and runs on the CPU. cuFFT is found, in this order, in NVIDIA's
``nvidia-cufft`` wheel (``pip install "directpet[cuda]"``), which is loaded here before ``_cuda`` as
CuPy and PyTorch load theirs, or wherever the dynamic loader looks (the CUDA toolkit, ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

import importlib
import importlib.util

from . import _core

_cuda = None            # the loaded CUDA module
_cuda_error = None      # why it cannot be loaded (a sentence), once a load was tried and failed


def _nvidia_wheel_libraries() -> list:
    """cuFFT shared libraries shipped by NVIDIA's PyPI wheels (``site-packages/nvidia/cu13/lib`` for
    CUDA 13, ``nvidia/cufft/lib`` for CUDA 12), found without importing anything."""
    import glob
    import os

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for sub in ("cu13", "cufft"):
            found += sorted(glob.glob(os.path.join(root, sub, "lib", "libcufft.so.*")))
    return found


def _load_cuda():
    global _cuda, _cuda_error
    if importlib.util.find_spec("directpet._cuda") is None:
        _cuda_error = "directpet was built without the CUDA backend"
        return
    import ctypes

    for path in _nvidia_wheel_libraries():
        try:  # RTLD_GLOBAL: _cuda's NEEDED libcufft.so.N then resolves to this copy
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError:
            continue
    try:
        _cuda = importlib.import_module("directpet._cuda")
    except ImportError as e:
        _cuda_error = (f"the CUDA backend is compiled in but cannot be loaded ({e}); install NVIDIA's cuFFT "
                       "with pip install \"directpet[cuda]\" (the nvidia-cufft wheel), or put the CUDA toolkit's "
                       "lib64 directory on LD_LIBRARY_PATH")


def cuda_module():
    """The CUDA backend module ``directpet._cuda``, loaded on first use; RuntimeError saying why when
    it was not compiled in or its libraries cannot be loaded."""
    if _cuda is None and _cuda_error is None:
        _load_cuda()
    if _cuda is None:
        raise RuntimeError(_cuda_error)
    return _cuda


def cuda_loaded() -> bool:
    """True when the CUDA backend is compiled in and loads (its libraries found); a GPU may still be absent."""
    try:
        cuda_module()
    except RuntimeError:
        return False
    return True


def has_cuda() -> bool:
    """True when the CUDA backend was compiled in (the module ``directpet._cuda`` is installed). Whether
    it can run here: :func:`cuda_device_count` and :func:`cuda_status`."""
    return importlib.util.find_spec("directpet._cuda") is not None


def cuda_device_count() -> int:
    """Number of CUDA devices usable now (0 without the CUDA backend, its libraries, a driver or a GPU)."""
    return int(cuda_module().device_count()) if cuda_loaded() else 0


def cuda_status() -> str:
    """'ok', or why no CUDA device can be used."""
    return str(cuda_module().runtime_status()) if cuda_loaded() else str(_cuda_error)


def device_summary() -> str:
    """One plain sentence on where the projectors run: the usable GPUs, or that none is usable (and
    why, in the CUDA runtime's words), or that the CUDA backend was not compiled in."""
    if not has_cuda():
        return "CUDA backend not compiled in: everything runs on the CPU (C++ / OpenMP)"
    n = cuda_device_count()
    if n > 0:
        return f"{n} usable CUDA device(s): backend='auto' runs on the GPU"
    return ("no GPU is usable here: backend='auto' runs on the CPU (C++ / OpenMP); "
            f"the CUDA backend says: {cuda_status()}")


def resolve_backend(backend: str) -> str:
    """Map 'auto' | 'cpu' | 'cuda' to the backend that will run; 'cuda' without a GPU is an error."""
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend: expected 'auto', 'cpu' or 'cuda', got {backend!r}")
    if backend == "cpu":
        return "cpu"
    usable = has_cuda() and cuda_device_count() > 0
    if backend == "cuda" and not usable:
        raise RuntimeError(f"backend='cuda' requested but no CUDA device is usable: {cuda_status()}")
    return "cuda" if usable else "cpu"


def _cuda_version(v: int) -> str:
    """CUDA's integer version encoding (1000 major + 10 minor) as 'major.minor'."""
    return f"{v // 1000}.{v % 1000 // 10}" if v else "none found"


def _cufft_version(v: int) -> str:
    """cuFFT's integer version (1000 major + 100 minor + patch, e.g. 12000) as 'major.minor.patch'."""
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}" if v else "none found"


def build_info() -> dict:
    """What this directpet holds and finds, as a dict: ``version``, ``cpu_dispatch`` (the CPU
    code path the loader picked: 'x86-64-v4' (AVX-512), 'x86-64-v3' (AVX2), 'baseline', or 'native'
    for a ``-DDIRECTPET_NATIVE=ON`` build), ``compiler``, ``openmp_threads``, ``fftw``,
    ``cuda_compiled``, ``cuda_loaded`` (the CUDA module and its cuFFT load here), ``cuda_architectures``
    (compiled in; None unless loaded), ``cuda_runtime`` / ``cuda_driver`` /
    ``cufft`` (versions found at run time, 'none found' without them), ``cuda_devices`` and
    ``cuda_status``, and the versions of the optional array libraries (``numpy``, ``cupy``,
    ``torch``: None when not installed; never imported here unless installed)."""
    import importlib.metadata as metadata

    from . import __version__

    raw = dict(_core.build_info())
    raw.update(cuda_module().runtime_info() if cuda_loaded() else
               {"cuda_architectures": "", "cuda_runtime": 0, "cuda_driver": 0, "cufft": 0, "cuda_devices": []})
    info = {"version": __version__, "cpu_dispatch": raw["cpu_dispatch"], "compiler": raw["compiler"],
            "openmp_threads": int(raw["openmp_threads"]), "fftw": raw["fftw"], "cuda_compiled": has_cuda(),
            "cuda_loaded": cuda_loaded(),
            "cuda_architectures": raw["cuda_architectures"] or None,
            "cuda_runtime": _cuda_version(int(raw["cuda_runtime"])), "cuda_driver": _cuda_version(int(raw["cuda_driver"])),
            "cufft": _cufft_version(int(raw["cufft"])), "cuda_devices": list(raw["cuda_devices"]),
            "cuda_status": cuda_status()}
    for name in ("numpy", "cupy", "torch"):
        try:
            info[name] = metadata.version(name if name != "cupy" else _cupy_distribution())
        except metadata.PackageNotFoundError:
            info[name] = None
    return info


def _cupy_distribution() -> str:
    """The installed CuPy distribution's name (cupy-cuda13x, cupy-cuda12x, cupy), without importing it."""
    import importlib.metadata as metadata

    names = {d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}
    return next((n for n in sorted(names) if n.lower().startswith("cupy")), "cupy")


def _cuda_backend_line(info: dict) -> str:
    if not info["cuda_compiled"]:
        return "not compiled in"
    if not info["cuda_loaded"]:
        return "compiled in, cannot be loaded here: " + info["cuda_status"]
    return f"compiled in for {info['cuda_architectures']}"


def show_config(file=None) -> None:
    """Print what this directpet holds and finds (:func:`build_info`), one line each: the version,
    the CPU code path, FFTW, the CUDA architectures compiled in, the CUDA runtime, driver, cuFFT and
    devices found, and the optional array libraries. Like ``numpy.show_config()``: the first thing to
    send with a bug report."""
    import sys

    info = build_info()
    out = sys.stdout if file is None else file
    devices = info["cuda_devices"] or ["none usable (" + info["cuda_status"] + ")"]
    lines = [
        f"directpet {info['version']}",
        f"  CPU code path      : {info['cpu_dispatch']} (compiled by {info['compiler']}), "
        f"OpenMP threads {info['openmp_threads']}",
        f"  FFTW               : {info['fftw']}",
        f"  CUDA backend       : {_cuda_backend_line(info)}",
        f"  CUDA runtime       : {info['cuda_runtime']} (driver {info['cuda_driver']}), cuFFT {info['cufft']}",
        f"  CUDA devices       : {'; '.join(devices)}",
        f"  array libraries    : numpy {info['numpy']}, cupy {info['cupy'] or 'not installed'}, "
        f"torch {info['torch'] or 'not installed'}",
    ]
    print("\n".join(lines), file=out)
