"""Dual-head planar PET (science.md 3): a stationary pair of planar heads, a symmetry-compressed
system model stored as per-orientation, per-plane patches, the paper's GPU algorithms 1-3 and a
faster default projector pair, an event Monte Carlo and OSEM over random orientation subsets.

``DualHeadScanner`` (geometry and the LOR layout), ``PatchModel`` (the model in the projectors'
format; saved and loaded as ``.npz``), ``DualHeadProjector`` (forward / back projection of class
lists, CPU and CUDA).
"""

from .geometry import SIGNS, DualHeadScanner
from .model import PatchModel
from .projector import ClassOperator, DualHeadProjector

__all__ = ["ClassOperator", "DualHeadProjector", "DualHeadScanner", "PatchModel", "SIGNS"]
