"""Geometric normalisation of the rotating heads against the virtual-LOR model (component based).

The analytic model treats every sinogram LOR as a virtual LOR normal to its heads, seen for the
whole scan. The physical heads (``n_columns`` crystals wide, ``head_distance_mm`` apart) rotate
continuously over 180 degrees, so a sinogram direction phi is seen by real crystal pairs at
gantry-relative angles ``beta = phi - g`` only while the line hits both front faces:

    ``| s / cos(beta) +- (D / 2) tan(beta) | <= W / 2``

(s the LOR's radial position, D the front-face distance, W the head width), and an oblique photon
crosses more crystal. The normalisation factor of a LOR is the fraction of the rotation during which
it is seen, weighted by the detection probability of both photons relative to normal incidence:

    ``n(s, delta) = (1/pi) int_{-pi/2}^{pi/2} 1[both faces hit] (det(beta, alpha) / det(0, alpha))^2 dbeta``

with ``det = 1 - exp(-mu L_c / (cos beta cos alpha))``. It depends on the radial bin and the ring
difference, not on the angle. This is the geometric component of a component-based normalisation;
it uses only the detector geometry (not the tube model), as a normalisation from a real scanner's
geometry would. Crystal efficiencies, dead time and the like are not modelled (the Monte Carlo has
none).
"""

from __future__ import annotations

import numpy as np

from .._checks import expect_instance, flag, integer, require_memory
from .geometry import RotatingScanner


def geometric_normalisation(scanner: RotatingScanner, n_quad: int = 16384, *, full: bool = True):
    """Per-LOR normalisation factors of the rotating heads (see the module docstring).

    Parameters
    ----------
    scanner : the RotatingScanner (uses ``n_columns``, ``pitch_mm``, ``head_distance_mm``, the
        crystal depth and attenuation).
    n_quad : midpoint-rule points over beta in (-pi/2, pi/2); the visibility edges make the
        rule first order: about 1e-3 relative at 16384 points.
    full : return the full sinogram shape ``(n_angles, n_rows, n_rows, n_radial)`` (the form
        :class:`~directpet.first.SinogramData` takes); else ``(n_rows, n_rows, n_radial)``.

    Returns float32 factors; 1 would be a LOR seen at normal incidence for the whole scan.
    """
    expect_instance(scanner, RotatingScanner, "scanner")
    n_quad = integer("n_quad", n_quad, lo=16)
    full = flag("full", full)
    s = scanner
    # the (n_quad, n_radial) and (n_quad, n_deltas) float64 tables and their temporaries
    require_memory("n_quad", 8.0 * 6 * n_quad * (s.n_radial + s.n_deltas), f"{n_quad} quadrature points")
    beta = (np.arange(int(n_quad)) + 0.5) * (np.pi / n_quad) - 0.5 * np.pi          # (Q,)
    radial = s.radial_mm(np.arange(s.n_radial))                                       # (n,)
    half_w = 0.5 * s.n_columns * s.pitch_mm
    half_d = 0.5 * s.head_distance_mm
    cb, tb = np.cos(beta)[:, None], np.tan(beta)[:, None]
    y_a = radial[None, :] / cb - half_d * tb
    y_b = radial[None, :] / cb + half_d * tb
    seen = (np.abs(y_a) <= half_w) & (np.abs(y_b) <= half_w)                          # (Q, n)
    tan_alpha = s.tan_alpha                                                           # (n_deltas,)
    cos_alpha = 1.0 / np.sqrt(1.0 + tan_alpha**2)
    lam = s.mu_per_mm * s.depth_mm
    det = 1.0 - np.exp(-lam / (np.cos(beta)[:, None] * cos_alpha[None, :]))          # (Q, n_deltas)
    det0 = 1.0 - np.exp(-lam / cos_alpha)
    weight = (det / det0[None, :]) ** 2                                               # (Q, n_deltas)
    per_delta = (weight.T @ seen) / n_quad                                            # (n_deltas, n): (1/pi) sum dbeta
    delta, _, _ = s.lor_rows()
    factors = per_delta[delta + s.n_rows - 1].astype(np.float32)                      # (n_rows, n_rows, n)
    if full:
        return np.ascontiguousarray(np.broadcast_to(factors, s.sinogram_shape))
    return factors


__all__ = ["geometric_normalisation"]
