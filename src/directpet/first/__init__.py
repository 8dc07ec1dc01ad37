"""FIRST-style Super-LOR projectors for a rotating dual-head scanner (science.md 2)."""

from .geometry import RotatingScanner
from .monte_carlo import simulate_sinogram

__all__ = ["RotatingScanner", "simulate_sinogram"]
