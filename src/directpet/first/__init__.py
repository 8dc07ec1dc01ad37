"""FIRST-style Super-LOR projectors for a rotating dual-head scanner (science.md 2).

``RotatingScanner`` (geometry and sinogram conventions), ``build_super_lor_table`` /
``SuperLORTable`` (the analytic system model reduced to Super-LORs; saved and loaded as ``.npz``),
``SuperLORProjector`` (faithful / matched / fast, CPU and CUDA), ``SinogramData``,
``model_consistent_sinogram`` and the event Monte Carlo ``simulate_sinogram`` (data),
``geometric_normalisation`` (the rotating heads against the virtual LORs), ``AngleSubsets`` (OSEM
through :mod:`directpet.recon`).
"""

from .data import SinogramData, model_consistent_sinogram
from .geometry import RotatingScanner
from .model import SuperLORTable, analytic_tube, build_super_lor_table, lor_tube
from .monte_carlo import MonteCarloStats, simulate_sinogram
from .normalisation import geometric_normalisation
from .projector import METHODS, SuperLORProjector
from .subsets import AngleSubsets, interleaved_angle_subsets

__all__ = ["AngleSubsets", "METHODS", "MonteCarloStats", "RotatingScanner", "SinogramData", "SuperLORProjector",
           "SuperLORTable", "analytic_tube", "build_super_lor_table", "geometric_normalisation",
           "interleaved_angle_subsets", "lor_tube", "model_consistent_sinogram", "simulate_sinogram"]
