"""directpet: fast, trustworthy PET reconstruction operators.

Projector families (each with its data, scanner and Monte Carlo)
-----------------------------------------------------------------
``directpet.direct``     DIRECT TOF histo-image projectors (spatially variant / asymmetric kernels).
``directpet.first``      FIRST-style Super-LOR projectors for a rotating dual-head scanner (in progress).

Shared layers
-------------
``directpet.recon``      MLEM, OSEM, block-RAMLA over any family's ``SubsetProblem``.
``directpet.sim``        analytic phantoms, line-cylinder geometry, random streams.
``directpet.analysis``   CRC, noise, contrast-noise curves, plots.
``directpet.reference``  float64 NumPy references of every projector, for tests and users.

Conventions: images and histo-images are float32 C-contiguous arrays of shape ``(nz, ny, nx)``;
lengths in mm, TOF timing in ps. Voxel centres are symmetric about the scanner axis.
"""

from ._backend import cuda_device_count, has_cuda
from .geometry import ImageGrid
from .operators import LinearOperator
from . import analysis, recon, sim  # noqa: E402,F401  (subpackages; matplotlib is imported lazily)

__version__ = "0.1.0"

__all__ = ["ImageGrid", "LinearOperator", "cuda_device_count", "has_cuda", "__version__"]
