"""Every projector of the three families passes one conformance check (tests/operator_checks.py):
each method x backend (cpu; cuda, marked gpu) x array library (NumPy; CuPy and PyTorch CUDA tensors
on the cuda backend), its composite operators (A.H, A.subset(s), A.H @ A, c * A - A, vstack), and the
CPU and CUDA backends agree on the same inputs.

Small problems (a few hundred voxels, 4 to 20 units): the file runs in seconds on 2 CPU cores.
Tolerances are those of operator_checks; FIRST's ``faithful`` back projector is not the transpose of
its forward (documented in directpet.first.projector: 1-3 % on random inputs; 4 % allowed, as in
test_first_projectors), and its GPU pair reads through textures with 8-bit interpolation weights
(3e-3 relative between the backends, test_first_projectors' bound).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np
import pytest

import directpet
from directpet.direct import FFTProjector, HistoImageProjector, LowRankProjector, SRKernel, ViewSet
from directpet.direct.cuda_engine import METHODS as DIRECT_METHODS
from directpet.dualhead import DualHeadProjector, DualHeadScanner
from directpet.dualhead.projector import METHODS as DUALHEAD_METHODS
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table
from directpet.geometry import ImageGrid
from directpet.operators import vstack
from directpet.reference.dualhead import random_model
from operator_checks import check_backends_agree, check_operator

GRID = ImageGrid((3, 10, 10), 8.0)
VIEWS = ViewSet(2, 2)                    # 4 views


@functools.lru_cache(maxsize=None)
def first_table():
    return build_super_lor_table(RotatingScanner.small())     # the configuration the faithful bound was measured on


@functools.lru_cache(maxsize=None)
def dualhead_model():
    scanner = DualHeadScanner.small(n_y=4, n_z=3, voxels_per_crystal=2, n_planes=3)
    return random_model(scanner, np.random.default_rng(5), taps=(1, 8))


def _direct(method):
    return lambda backend: HistoImageProjector(GRID, VIEWS, SRKernel.clinical(), backend=backend, method=method)


def _asymmetric(t, r, a, s):
    """An invariant kernel shifted along e_r (test_direct_fft's): forward and adjoint differ."""
    return np.exp(-np.abs(t) / 20.0 - np.abs(r - 2.0) / 3.0 - 0.5 * (a / 2.5) ** 2)


def _fft(mode):
    kernel = SRKernel.invariant() if mode == "spectral" else SRKernel.invariant(values=_asymmetric)
    return lambda backend: FFTProjector(GRID, VIEWS, kernel, mode=mode, backend=backend, planner="estimate")


def _lowrank(backend):
    return LowRankProjector(GRID, VIEWS, SRKernel.clinical(), backend=backend, planner="estimate")


def _first(method):
    return lambda backend: SuperLORProjector(first_table(), method, backend=backend)


def _dualhead(method):
    return lambda backend: DualHeadProjector(dualhead_model(), method, backend=backend)


# FIRST's faithful back projector interpolates the sinogram instead of transposing the forward: its
# documented mismatch (1-3 % on random inputs) is checked; on zero-mean inputs, whose fine structure the
# interpolation smooths, it is of order one and only reported.
FAITHFUL = {"adjoint_tol": 0.04, "skip_zero_mean_adjoint": "faithful's back projector interpolates (not the "
            "transpose): its documented 1-3 % bound is for random non-negative inputs"}
# The paper's dual-head GPU algorithms 1-3 back-project by scattering with atomicAdd (csrc/dualhead/cuda_paper.cu):
# the order of the float additions, hence the last bits, changes from call to call.
ATOMIC = {"nondeterministic": "the paper's algorithms 1-3 back-project with an atomicAdd scatter"}


class Case(NamedTuple):
    make: Callable                         # make(backend) -> the projector
    backends: tuple = ("cpu", "cuda")
    checks: dict = {}                      # check_operator keywords (documented exceptions)
    backend_tol: float = 1e-5              # CPU = GPU, relative L2


PROJECTORS = {
    **{f"direct-histo-{m}": Case(_direct(m), ("cpu", "cuda") if m == "default" else ("cuda",))
       for m in DIRECT_METHODS},
    **{f"direct-fft-{mode}": Case(_fft(mode)) for mode in ("spatial-exact", "spectral")},
    "direct-lowrank": Case(_lowrank),
    "first-fast": Case(_first("fast")),
    "first-matched": Case(_first("matched")),
    "first-faithful": Case(_first("faithful"), checks=FAITHFUL, backend_tol=3e-3),
    **{f"dualhead-{m}": Case(_dualhead(m), ("cpu", "cuda") if m == "default" else ("cuda",),
                             {} if m == "default" else ATOMIC) for m in DUALHEAD_METHODS},
}
CPU = sorted(k for k, case in PROJECTORS.items() if "cpu" in case.backends)
CUDA = sorted(k for k, case in PROJECTORS.items() if "cuda" in case.backends)


def gpu_library(name):
    """numpy, cupy or torch for the cuda backend's inputs (torch optional: a skip with the reason)."""
    if name == "numpy":
        return np
    if name == "cupy":
        return pytest.importorskip("cupy", reason="CuPy missing (test_cupy_is_installed_on_a_gpu_machine fails)")
    torch = pytest.importorskip("torch", reason="PyTorch not installed (optional)")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch cannot see a CUDA device")
    return torch


def composites(A):
    """The algebra of one projector: its adjoint, a subset with a repeat, A^T A, 2 A - A and a vstack."""
    s = [A.n_units - 1, 0, A.n_units - 1]
    return {"A.H": A.H, "A.subset": A.subset(s), "A.H @ A": A.H @ A, "2 A - A": 2 * A - A,
            "vstack": vstack([A.subset(0), A.subset([1, 0])])}


def run(op, rng, xp=np, **kw):
    report = check_operator(op, rng, xp, **kw)
    print({k: (f"{v:.2g}" if isinstance(v, float) else v) for k, v in report.items()})


# --- CPU ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CPU)
def test_cpu_projector_conforms(name, rng):
    case = PROJECTORS[name]
    run(case.make("cpu"), rng, **case.checks)


@pytest.mark.parametrize("name", ["direct-histo-default", "first-fast", "dualhead-default"])
def test_cpu_composites_conform(name, rng):
    A = PROJECTORS[name].make("cpu")
    for op in composites(A).values():
        run(op, rng)


# --- CUDA -----------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_cupy_is_installed_on_a_gpu_machine():
    """The GPU run checks CuPy inputs: a GPU machine without CuPy fails here rather than skipping them."""
    assert directpet.cuda_device_count() > 0
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        pytest.fail(f"CuPy is not importable on a machine with {directpet.cuda_device_count()} CUDA device(s): {e}; "
                    "install cupy-cuda12x / cupy-cuda13x so that the CuPy paths are tested")


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["numpy", "cupy", "torch"])
@pytest.mark.parametrize("name", CUDA)
def test_cuda_projector_conforms(name, lib, rng):
    xp = gpu_library(lib)
    case = PROJECTORS[name]
    run(case.make("cuda"), rng, xp, **case.checks)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["numpy", "cupy", "torch"])
@pytest.mark.parametrize("name", ["direct-histo-default", "first-fast", "dualhead-default"])
def test_cuda_composites_conform(name, lib, rng):
    xp = gpu_library(lib)
    A = PROJECTORS[name].make("cuda")
    for op in composites(A).values():
        run(op, rng, xp)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CUDA)
def test_cpu_and_cuda_backends_agree(name, rng):
    """The CUDA methods against the CPU default (the same matrix), on the same NumPy inputs."""
    case = PROJECTORS[name]
    cpu = PROJECTORS[name if name in CPU else name.rsplit("-", 1)[0] + "-default"]
    found = check_backends_agree(lambda backend: cpu.make("cpu") if backend == "cpu" else case.make("cuda"), rng,
                                 tol=case.backend_tol)
    print(name, {k: f"{v:.2g}" for k, v in found.items()})
