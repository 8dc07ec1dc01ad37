"""Iterative DIRECT reconstruction (MLEM, OSEM, block-RAMLA), written against NumPy / CuPy arrays."""

from .algorithms import (ReconResult, block_ramla, make_blocks, mlem, osem, poisson_loglik, ramla_lambda,
                         sensitivity_image)

__all__ = ["ReconResult", "block_ramla", "make_blocks", "mlem", "osem", "poisson_loglik", "ramla_lambda",
           "sensitivity_image"]
