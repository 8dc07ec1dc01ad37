"""FIRST-style Super-LOR projectors for a rotating dual-head scanner (science.md 2)."""

from .geometry import RotatingScanner

__all__ = ["RotatingScanner"]
