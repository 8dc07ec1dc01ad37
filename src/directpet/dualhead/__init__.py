"""Dual-head planar PET (science.md 3): a stationary pair of planar heads, a symmetry-compressed
system model stored as per-orientation, per-plane patches, the paper's GPU algorithms 1-3 and a
faster default projector pair, an event Monte Carlo and OSEM over random orientation subsets.

``DualHeadScanner`` (geometry and the LOR layout), ``PatchModel`` (the model in the projectors'
format; saved and loaded as ``.npz``), ``lor_response`` / ``build_patch_model`` (the analytic
detector response and the patch model built from it), ``seed_key`` / ``build_seed_drf`` /
``seed_lookup`` / ``storage_report`` (the paper's seed reduction and storage figures).
"""

from .geometry import SIGNS, DualHeadScanner
from .model import PatchModel
from .response import build_patch_model, lor_response, patch_candidate_counts
from .symmetry import SeedDRF, build_seed_drf, seed_key, seed_lookup, storage_report

__all__ = ["DualHeadScanner", "PatchModel", "SIGNS", "SeedDRF", "build_patch_model", "build_seed_drf",
           "lor_response", "patch_candidate_counts", "seed_key", "seed_lookup", "storage_report"]
