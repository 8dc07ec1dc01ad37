"""Reconstruction for every projector family: MLEM, OSEM and block-RAMLA over a SubsetProblem,
written against NumPy / CuPy arrays. Never imports a family; each family provides its
SubsetProblem (``directpet.direct.ViewSubsets``, ...)."""

from .algorithms import (ReconResult, block_ramla, mlem, osem, poisson_loglik, ramla_lambda,
                         sensitivity_image)
from .problem import SubsetProblem, check_nonnegative

__all__ = ["ReconResult", "SubsetProblem", "block_ramla", "check_nonnegative", "mlem", "osem", "poisson_loglik",
           "ramla_lambda", "sensitivity_image"]
