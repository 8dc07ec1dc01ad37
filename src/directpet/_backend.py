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
