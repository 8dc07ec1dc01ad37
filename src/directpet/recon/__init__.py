"""Reconstruction for every projector family: MLEM, OSEM and block-RAMLA, and penalised likelihood
(BSREM, MAP-EM, preconditioned SVRG with the priors of :mod:`directpet.recon.priors`) over a
SubsetProblem, written against NumPy / CuPy arrays. Never imports a family; each family provides its
SubsetProblem (``directpet.direct.ViewSubsets``, ``directpet.first.AngleSubsets``,
``directpet.dualhead.DualHeadSubsets``)."""

from .algorithms import (ReconResult, block_ramla, mlem, osem, poisson_loglik, ramla_lambda,
                         sensitivity_image)
from .penalised import BetaRun, bsrem, map_em, penalised_objective, rdp_beta_sweep, sqrt_hessian_row_sum, svrg
from .priors import LogCoshPrior, PairwisePrior, QuadraticPrior, RelativeDifferencePrior
from .problem import StoredSubsets, SubsetProblem, check_nonnegative, spread_order

__all__ = ["BetaRun", "LogCoshPrior", "PairwisePrior", "QuadraticPrior", "RelativeDifferencePrior", "ReconResult",
           "StoredSubsets", "SubsetProblem", "block_ramla", "bsrem", "check_nonnegative", "map_em", "mlem", "osem",
           "penalised_objective", "poisson_loglik", "ramla_lambda", "rdp_beta_sweep", "sensitivity_image", "spread_order",
           "sqrt_hessian_row_sum", "svrg"]
