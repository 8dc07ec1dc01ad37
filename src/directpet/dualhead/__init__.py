"""Dual-head planar PET (:ref:`physics-dualhead`): a stationary pair of planar heads, a symmetry-compressed
system model stored as per-orientation, per-plane patches, the paper's GPU algorithms 1-3 and a
faster default projector pair, an event Monte Carlo and OSEM over random orientation subsets.

``DualHeadScanner`` (geometry and the LOR layout), ``PatchModel`` (the model in the projectors'
format; saved and loaded as ``.npz``), ``lor_response`` / ``build_patch_model`` (the analytic
detector response and the patch model built from it), ``seed_key`` / ``build_seed_drf`` /
``seed_lookup`` / ``storage_report`` (the paper's seed reduction and storage figures),
``DualHeadProjector`` (forward / back projection of lists of classes, its units; CPU and CUDA),
``simulate`` / ``trace_events`` (the event Monte Carlo: honest data), ``DualHeadData`` and
``model_consistent_data`` (LOR data), ``orientation_subsets`` and ``DualHeadSubsets`` (OSEM through
:mod:`directpet.recon`).
"""

from .data import DualHeadData, model_consistent_data
from .geometry import SIGNS, DualHeadScanner
from .model import PatchModel
from .monte_carlo import MonteCarloStats, simulate, trace_events
from .projector import DualHeadProjector
from .response import build_patch_model, lor_response, patch_candidate_counts
from .subsets import DEFAULT_SUBSET_SEED, DualHeadSubsets, orientation_subsets
from .symmetry import SeedDRF, build_seed_drf, seed_key, seed_lookup, storage_report

__all__ = ["DEFAULT_SUBSET_SEED", "DualHeadData", "DualHeadProjector", "DualHeadScanner", "DualHeadSubsets",
           "MonteCarloStats", "PatchModel", "SIGNS", "SeedDRF", "build_patch_model",
           "build_seed_drf", "lor_response", "model_consistent_data", "orientation_subsets",
           "patch_candidate_counts", "seed_key", "seed_lookup", "simulate", "storage_report",
           "trace_events"]
