"""float64 NumPy reference operators, readable and slow, for tests (ours and yours)."""

from . import direct, dualhead, first, priors

__all__ = ["direct", "dualhead", "first", "priors"]
