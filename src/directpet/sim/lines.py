"""Lines through finite cylinders about the z axis: the generic geometry of every family's Monte Carlo.

Coordinates are ``(x, y, z)`` in mm, z the scanner axis. The helpers are written against an array
namespace ``xp`` (NumPy or CuPy) and broadcast, so they serve per-event arrays (event simulation)
and per-voxel grids (attenuation and sensitivity images) alike. Attenuation chords through a water
cylinder (:class:`~directpet.sim.phantoms.WaterCylinder`) and the detector exits of a cylindrical
scanner (``directpet.direct.geometry``) are both built on :func:`cylinder_interval`.
"""

from __future__ import annotations

import numpy as np

from .._checks import real_number


def cylinder_interval(x, y, z, ux, uy, uz, radius, half_length, xp=np):
    """Parameter interval ``[t0, t1]`` where ``r + t u`` lies inside a finite cylinder about z.

    ``r = (x, y, z)`` (mm) and ``u = (ux, uy, uz)`` are broadcastable arrays or scalars; u need not
    be a unit vector (t is then in units of ``|u|``), but must not be parallel to the axis. The cylinder
    has radius ``radius`` and spans ``|z| <= half_length`` (``half_length=None``: infinite).
    Returns ``(t0, t1)``; the interval is empty where ``t1 <= t0``. ``radius`` and ``half_length``
    are finite numbers >= 0 (checked; errors name them). The point and direction arrays are not
    checked (as in a NumPy ufunc, a NaN in gives a NaN out): this runs per event in the Monte Carlo.
    """
    radius = real_number("radius", radius, nonnegative=True)
    if half_length is not None:
        half_length = real_number("half_length", half_length, nonnegative=True)
    a = ux * ux + uy * uy
    b = x * ux + y * uy                     # half of the usual b
    c = x * x + y * y - radius * radius
    disc = b * b - a * c
    miss = disc < 0
    sq = xp.sqrt(xp.where(miss, 0.0, disc))
    t0 = xp.where(miss, 0.0, (-b - sq) / a)
    t1 = xp.where(miss, 0.0, (-b + sq) / a)
    if half_length is None:
        return t0, t1
    # Slab |z + t uz| <= h. A zero uz is replaced by a tiny positive one: for |z| < h this gives
    # (-huge, +huge), for |z| > h an interval far away on one side -> empty intersection.
    uz_safe = xp.where(xp.abs(uz) < 1e-12, 1e-12, uz)
    za = (-half_length - z) / uz_safe
    zb = (half_length - z) / uz_safe
    return xp.maximum(t0, xp.minimum(za, zb)), xp.minimum(t1, xp.maximum(za, zb))


def chord_length(x, y, z, ux, uy, uz, radius, half_length, xp=np):
    """Length (mm) of the full line through r with unit direction u inside a finite cylinder."""
    t0, t1 = cylinder_interval(x, y, z, ux, uy, uz, radius, half_length, xp)
    return xp.maximum(t1 - t0, 0.0)


__all__ = ["chord_length", "cylinder_interval"]
