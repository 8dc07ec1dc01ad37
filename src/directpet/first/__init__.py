"""FIRST-style Super-LOR projectors for a rotating dual-head scanner (science.md 2)."""

from .geometry import RotatingScanner
from .monte_carlo import MonteCarloStats, simulate_sinogram, trace_decays

__all__ = ["MonteCarloStats", "RotatingScanner", "simulate_sinogram", "trace_decays"]
