"""directpet: fast, trustworthy PET reconstruction operators for three scanner families.

The three projector families, each with its scanner geometry, system model, projectors, data, Monte
Carlo, subsets and experiment (the same file names and verbs in every family):

``directpet.direct``
    DIRECT: TOF histo-image projectors with spatially variant or asymmetric system-response kernels
    (spatial, FFT and low-rank FFT) for a cylindrical TOF scanner. Units: views.
``directpet.first``
    FIRST: Super-LOR sinogram projectors for a rotating dual-head small-animal scanner. Units:
    gantry angles.
``directpet.dualhead``
    Dual-head planar PET: projectors for a stationary pair of planar heads with a
    symmetry-compressed detector-response model. Units: orientation classes.

The shared layers:

``directpet.operators``
    The operator model every projector shares: ``forward(x, subset=None, out=None)``, ``adjoint``,
    ``A.H``, ``A @ B``, ``A.subset(s)``, ``vstack``, ``A.norm()``.
``directpet.recon``
    MLEM, OSEM and block-RAMLA over any family's ``SubsetProblem``.
``directpet.sim``
    Analytic phantoms, line-cylinder geometry, random streams.
``directpet.analysis``
    CRC, noise, contrast-noise curves, resolution measures, plots.
``directpet.io``
    NIfTI images and PETSIRD list-mode, in and out.
``directpet.autograd``
    Any operator as a differentiable PyTorch function.
``directpet.parallel``
    One reconstruction on several GPUs (NCCL); sweeps of reconstructions on Dask.
``directpet.reference``
    float64 NumPy references of every projector, for tests (ours and yours).

Conventions: images are float32 C-contiguous arrays of shape ``(nz, ny, nx)``; lengths in mm, TOF
timing in ps; voxel centres are symmetric about the scanner axis. The documentation's conventions
page gives every family's axes, signs and data layouts.
"""

from ._backend import build_info, cuda_device_count, has_cuda, show_config
from .geometry import ImageGrid
from .operators import LinearOperator
from . import analysis, recon, sim  # noqa: E402,F401  (subpackages; matplotlib is imported lazily)

try:  # written into the installed package by the build, from the git tag (pyproject.toml)
    from ._version import __version__
except ImportError:  # a source tree on sys.path, never built as a package
    __version__ = "0+unknown"

__all__ = ["ImageGrid", "LinearOperator", "build_info", "cuda_device_count", "has_cuda", "show_config", "__version__"]
