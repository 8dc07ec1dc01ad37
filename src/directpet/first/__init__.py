"""FIRST-style Super-LOR projectors for a rotating dual-head scanner (:ref:`physics-first`).

``RotatingScanner`` (geometry and sinogram conventions), ``build_super_lor_table`` /
``SuperLORTable`` (the analytic system model reduced to Super-LORs; saved and loaded as ``.npz``),
``SuperLORProjector`` (faithful / matched / fast, CPU and CUDA), ``SinogramData``,
``model_consistent_data`` and the event Monte Carlo ``simulate`` / ``trace_decays`` (data),
``geometric_normalisation`` (the rotating heads against the virtual LORs), ``AngleSubsets`` (OSEM
through :mod:`directpet.recon`).
"""

from .data import SinogramData, model_consistent_data
from .geometry import RotatingScanner
from .model import SuperLORTable, analytic_tube, build_super_lor_table, lor_tube
from .monte_carlo import MonteCarloStats, simulate, trace_decays
from .normalisation import geometric_normalisation
from .projector import METHODS, SuperLORProjector
from .subsets import AngleSubsets, interleaved_angle_subsets

__all__ = ["AngleSubsets", "METHODS", "MonteCarloStats", "RotatingScanner", "SinogramData", "SuperLORProjector",
           "SuperLORTable", "analytic_tube", "build_super_lor_table", "geometric_normalisation",
           "interleaved_angle_subsets", "lor_tube", "model_consistent_data", "simulate", "trace_decays"]
