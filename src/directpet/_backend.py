"""Access to the compiled module and to optional GPU array libraries (never imported unguarded)."""

from __future__ import annotations

from . import _core


def has_cuda() -> bool:
    """True when the CUDA backend was compiled into ``directpet._core``."""
    return bool(_core.has_cuda())


def cuda_device_count() -> int:
    """Number of CUDA devices usable now (0 without the CUDA backend or without a GPU)."""
    return int(_core.cuda_device_count())


def cuda_status() -> str:
    """'ok', or why no CUDA device can be used."""
    return str(_core.cuda_runtime_status())


def device_summary() -> str:
    """One plain sentence on where the projectors run: the usable GPUs, or that none is usable (and
    why, in the CUDA runtime's words), or that the CUDA backend was not compiled in."""
    if not has_cuda():
        return "CUDA backend not compiled in: everything runs on the CPU (C++ / OpenMP)"
    n = cuda_device_count()
    if n > 0:
        return f"{n} usable CUDA device(s): backend='auto' runs on the GPU"
    return ("no GPU is usable here: backend='auto' runs on the CPU (C++ / OpenMP); "
            f"the CUDA runtime says: {cuda_status()}")


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
    ``cuda_compiled``, ``cuda_architectures`` (compiled in), ``cuda_runtime`` / ``cuda_driver`` /
    ``cufft`` (versions found at run time, 'none found' without them), ``cuda_devices`` and
    ``cuda_status``, and the versions of the optional array libraries (``numpy``, ``cupy``,
    ``torch``: None when not installed; never imported here unless installed)."""
    import importlib.metadata as metadata

    from . import __version__

    raw = dict(_core.build_info())
    info = {"version": __version__, "cpu_dispatch": raw["cpu_dispatch"], "compiler": raw["compiler"],
            "openmp_threads": int(raw["openmp_threads"]), "fftw": raw["fftw"], "cuda_compiled": has_cuda(),
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
        f"  CUDA backend       : {'compiled in for ' + str(info['cuda_architectures']) if info['cuda_compiled'] else 'not compiled in'}",
        f"  CUDA runtime       : {info['cuda_runtime']} (driver {info['cuda_driver']}), cuFFT {info['cufft']}",
        f"  CUDA devices       : {'; '.join(devices)}",
        f"  array libraries    : numpy {info['numpy']}, cupy {info['cupy'] or 'not installed'}, "
        f"torch {info['torch'] or 'not installed'}",
    ]
    print("\n".join(lines), file=out)
