"""Rod sources, the micro Derenzo phantom and point-source sets for resolution studies
(:ref:`physics-phantoms`).

Shared by every family: FIRST images the Derenzo phantom with its rods along the scanner axis z,
the dual-head scanner with its rods along x (perpendicular to the heads).

Coordinates
-----------
Points are ``(x, y, z)`` mm and images ``(nz, ny, nx)`` as in :mod:`directpet.sim.phantoms`. A rod
along ``axis`` lies in the plane ``(u, v)`` perpendicular to it, taken in cyclic order so that
``(u, v, axis)`` is right-handed:

========  ===========
axis      (u, v)
========  ===========
``'z'``   ``(x, y)``
``'x'``   ``(y, z)``
``'y'``   ``(z, x)``
========  ===========

In-plane angles are measured from +u towards +v.

The phantom
-----------
:func:`derenzo_phantom` builds six 60-degree sectors, one per rod diameter ``d``, each a triangular
lattice of rods with centre spacing ``s = 2 d`` ("spacing twice the diameter", [DH]_). Sector ``k`` is centred on the in-plane direction ``first_sector_deg + 60 k``
(default 90 degrees: the largest rods towards +v, the others following counter-clockwise) and
spans +-30 degrees about it. Its lattice is spanned by the sector's two edge directions
``a1, a2`` (``|a1| = |a2| = s``), so its rows of rods are parallel to the edges and to the
sector's outer chord, and it starts one spacing from the apex along the bisector::

    c_ij = centre + s * b + i * a1 + j * a2,    i, j >= 0,    b the bisector's unit vector.

A point at ``s b`` is ``s / 2 = d`` from both edge lines, and ``a1, a2`` never bring a rod nearer
to them, so every rod surface keeps at least ``d / 2`` (half the group's own edge-to-edge gap)
from its sector's edges; rods of neighbouring sectors are then at least ``(d_k + d_k+1) / 2`` apart,
edge to edge. Rods are kept when wholly inside the disc: ``|c - centre| + d / 2 <= radius_mm``.

Default dimensions (the paper gives none): radius 16 mm and length 20 mm (:ref:`physics-phantoms`). The disc is 32 mm across in the 70 mm transaxial FIRST field
of view and the rods are 20 mm long in its 47.2 mm axial extent; the same insert fits the dual-head
volume with the rods along x (about 59 mm between the heads' image limits). With 16 mm the six groups
hold 6, 8, 10, 19, 34 and 62 rods and their longest rows 3, 3, 4, 5, 7 and 10 rods (15 mm would
leave the 2.4 mm group a row of only 2).

Profiles
--------
For each group :class:`DerenzoGroup` names one row of collinear rods to profile: the row parallel
to the sector's outer chord (perpendicular to its bisector) with the most rods, ties going to the
row nearer the centre; the profile runs along it from ``d`` (half a spacing) before its first rod to
``d`` after its last (rod edge plus half the gap), which stays inside the sector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from .._checks import expect_instance, integer, real_array, real_number, require_memory
from ..geometry import ImageGrid
from .phantoms import (AnalyticPhantom, _bounding_box, _check_positive, _check_voxelise, _disc_fraction,
                       _float32_value, _interval_overlap, check_inside_grid, check_point,
                       point_source_phantom)

#: The in-plane axes ``(u, v)`` for each rod axis (right-handed with the axis).
PLANE_AXES = {"x": ("y", "z"), "y": ("z", "x"), "z": ("x", "y")}
#: Index of each coordinate in image arrays ``(nz, ny, nx)`` and in ``ImageGrid`` tuples.
GRID_AXIS = {"z": 0, "y": 1, "x": 2}
#: Index of each coordinate in points ``(x, y, z)``.
POINT_AXIS = {"x": 0, "y": 1, "z": 2}

MICRO_DERENZO_DIAMETERS_MM = (2.4, 2.0, 1.7, 1.35, 1.0, 0.75)


def _check_axis(axis) -> str:
    if not isinstance(axis, str):
        raise TypeError(f"axis: expected 'x', 'y' or 'z', got {type(axis).__name__}")
    if axis not in PLANE_AXES:
        raise ValueError(f"axis: expected 'x', 'y' or 'z', got {axis!r}")
    return axis


# --- the rod source ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RodSource:
    """Uniform cylinder of ``radius_mm`` and ``length_mm`` with its axis along ``axis``.

    Parameters
    ----------
    centre_mm : (x, y, z) mm of the rod's centre (mid-length on its axis).
    radius_mm, length_mm : mm, positive.
    concentration : activity per mm^3 (additive, negative for a cold insert, as in
        :mod:`directpet.sim.phantoms`).
    axis : ``'x'``, ``'y'`` or ``'z'``.
    """

    centre_mm: Tuple[float, float, float]
    radius_mm: float
    length_mm: float
    concentration: float = 1.0
    axis: str = "z"

    def __post_init__(self):
        object.__setattr__(self, "centre_mm", check_point("centre_mm", self.centre_mm))
        for name, kw in (("radius_mm", {"positive": True}), ("length_mm", {"positive": True}), ("concentration", {})):
            object.__setattr__(self, name, real_number(name, getattr(self, name), **kw))
        _check_axis(self.axis)

    @property
    def volume(self) -> float:
        """Volume of the rod (mm^3)."""
        with np.errstate(over="ignore"):           # inf, not an OverflowError, for an absurd radius
            return float(np.pi * np.float64(self.radius_mm) ** 2 * self.length_mm)

    @property
    def activity(self) -> float:
        """Total activity of the rod: concentration x volume."""
        return self.concentration * self.volume

    def _frame(self, x, y, z):
        """Offsets (u, v, along) from the centre, for points given as (x, y, z)."""
        d = dict(zip("xyz", (c - c0 for c, c0 in zip((x, y, z), self.centre_mm))))
        u, v = PLANE_AXES[self.axis]
        return d[u], d[v], d[self.axis]

    def inside(self, x, y, z, xp=np):
        """Whether points (x, y, z) (mm, broadcastable arrays) lie in the rod."""
        u, v, a = self._frame(x, y, z)
        return (u * u + v * v <= self.radius_mm**2) & (xp.abs(a) <= 0.5 * self.length_mm)

    def sample(self, n: int, rng, xp=np):
        """n uniform points (n, 3) (x, y, z) mm: r = R sqrt(U) gives a uniform disc."""
        w = rng.random((3, n))
        r = self.radius_mm * xp.sqrt(w[0])
        phi = 2.0 * np.pi * w[1]
        u_name, v_name = PLANE_AXES[self.axis]
        offset = {u_name: r * xp.cos(phi), v_name: r * xp.sin(phi), self.axis: self.length_mm * (w[2] - 0.5)}
        return xp.stack([c0 + offset[name] for name, c0 in zip("xyz", self.centre_mm)], axis=1)

    def voxelise(self, grid: ImageGrid, supersample: int) -> np.ndarray:
        """Mean concentration per voxel (nz, ny, nx): supersampled disc fraction x exact axial overlap.

        The disc is sampled at ``supersample**2`` sub-pixels per voxel, only in the voxels its
        bounding square touches; the overlap of the rod's length with each voxel along the axis
        is exact.
        """
        supersample = _check_voxelise(grid, supersample)
        ax = GRID_AXIS[self.axis]
        u_ax, v_ax = (i for i in range(3) if i != ax)           # the two other image axes, in order
        centre_zyx = [self.centre_mm[POINT_AXIS[name]] for name in "zyx"]
        c_ax = centre_zyx[ax]
        centre_zyx[ax] = 0.0        # the box is needed in-plane only: keep the axis inside the grid
        out = np.zeros(grid.shape)
        box = _bounding_box(grid, centre_zyx, self.radius_mm)
        if box is None:
            return out
        # _disc_fraction samples the (y, x) plane of a grid centred on the axis: give it the box as
        # such a grid, with the disc centre shifted by the box's own centre.
        su, sv = box[u_ax], box[v_ax]
        vs = grid.voxel_size
        sub = ImageGrid((1, su.stop - su.start, sv.stop - sv.start), (1.0, vs[u_ax], vs[v_ax]))
        off_u = float(np.mean(grid.centres(u_ax)[su]))
        off_v = float(np.mean(grid.centres(v_ax)[sv]))
        disc = _disc_fraction(sub, centre_zyx[v_ax] - off_v, centre_zyx[u_ax] - off_u,
                              self.radius_mm, supersample)                        # (n_u, n_v)
        line = ImageGrid((grid.shape[ax], 1, 1), (vs[ax], 1.0, 1.0))
        axial = _interval_overlap(line, c_ax - 0.5 * self.length_mm, c_ax + 0.5 * self.length_mm)
        block = np.moveaxis(axial[:, None, None] * disc[None, :, :], 0, ax)
        index = [slice(None)] * 3
        index[u_ax], index[v_ax] = su, sv
        out[tuple(index)] = self.concentration * block
        return out


# --- the Derenzo phantom -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class DerenzoGroup:
    """One sector of rods of one diameter.

    Attributes
    ----------
    diameter_mm : rod diameter d (mm).
    spacing_mm : centre-to-centre distance of neighbouring rods, 2 d (mm).
    sector : sector index k (0 for the first diameter).
    sector_centre_deg : in-plane direction of the sector's bisector (degrees from +u towards +v).
    centres_mm : (n_rods, 2) rod centres in the plane ``(u, v)`` (mm, scanner frame, the phantom's
        centre included).
    profile_rods : (m,) indices into ``centres_mm`` of the collinear rods to profile, in order along
        the profile.
    profile_start_mm, profile_end_mm : (2,) ends of the profile line in ``(u, v)`` (mm).
    """

    diameter_mm: float
    spacing_mm: float
    sector: int
    sector_centre_deg: float
    centres_mm: np.ndarray
    profile_rods: np.ndarray
    profile_start_mm: np.ndarray
    profile_end_mm: np.ndarray

    @property
    def n_rods(self) -> int:
        """Rods in the group."""
        return int(self.centres_mm.shape[0])

    @property
    def profile_direction(self) -> np.ndarray:
        """(2,) unit vector of the profile line in ``(u, v)``."""
        d = self.profile_end_mm - self.profile_start_mm
        return d / np.hypot(d[0], d[1])


@dataclass(frozen=True, eq=False)
class DerenzoInfo:
    """What simulation and analysis need to know about a Derenzo phantom.

    Attributes
    ----------
    grid : the ImageGrid of the voxel image.
    analytic : the AnalyticPhantom (event sampling).
    axis : rod axis, ``'x'``, ``'y'`` or ``'z'``.
    plane_axes : names of the in-plane coordinates ``(u, v)`` (see the module docstring).
    centre_mm : (x, y, z) mm of the phantom centre (disc centre, mid-length of the rods).
    radius_mm : radius of the disc holding the rods (mm).
    length_mm : rod (and disc) length along the axis (mm).
    concentration : activity per mm^3 inside the rods.
    background : activity per mm^3 in the disc between the rods (0: cold).
    groups : one :class:`DerenzoGroup` per diameter, in the order given.
    """

    grid: ImageGrid
    analytic: AnalyticPhantom
    axis: str
    plane_axes: Tuple[str, str]
    centre_mm: Tuple[float, float, float]
    radius_mm: float
    length_mm: float
    concentration: float
    background: float
    groups: Tuple[DerenzoGroup, ...]

    @property
    def diameters_mm(self) -> np.ndarray:
        """Rod diameter of each group (mm), in group order."""
        return np.array([g.diameter_mm for g in self.groups])

    @property
    def centre_along_mm(self) -> float:
        """Coordinate of the phantom centre along the rod axis (mm)."""
        return self.centre_mm[POINT_AXIS[self.axis]]

    def group(self, diameter_mm: float) -> DerenzoGroup:
        """The group of rods of ``diameter_mm`` (to 1e-9 mm)."""
        diameter_mm = real_number("diameter_mm", diameter_mm)
        for g in self.groups:
            if abs(g.diameter_mm - diameter_mm) <= 1e-9:
                return g
        raise ValueError(f"diameter_mm: expected one of {[g.diameter_mm for g in self.groups]}, got {diameter_mm!r}")

    def to_xyz(self, uv_mm, along_mm: Optional[float] = None) -> np.ndarray:
        """Points (n, 3) (x, y, z) mm from in-plane (n, 2) ``(u, v)`` and a coordinate along the axis
        (default: the phantom centre's)."""
        uv = np.atleast_2d(real_array("uv_mm", uv_mm))
        if uv.ndim != 2 or uv.shape[1] != 2:
            raise ValueError(f"uv_mm: expected (n, 2) in-plane coordinates, got shape {uv.shape}")
        along = self.centre_along_mm if along_mm is None else real_number("along_mm", along_mm)
        return _plane_to_xyz(self.axis, uv, along)


def derenzo_phantom(grid: ImageGrid, diameters_mm: Sequence[float] = MICRO_DERENZO_DIAMETERS_MM, *,
                    radius_mm: float = 16.0, length_mm: float = 20.0, axis: str = "z",
                    concentration: float = 1.0, background: float = 0.0, supersample: int = 4,
                    centre_mm=(0.0, 0.0, 0.0), first_sector_deg: float = 90.0):
    """The micro Derenzo phantom: hot rods in six 60-degree sectors of a disc (see the module docstring).

    Parameters
    ----------
    grid : the image lattice.
    diameters_mm : six rod diameters (mm), one per sector, sector k for ``diameters_mm[k]``.
    radius_mm, length_mm : the disc holding the rods, and the length of rods and disc (mm).
    axis : rod axis, ``'z'`` (FIRST), ``'x'`` (dual-head) or ``'y'``.
    concentration : activity per mm^3 inside the rods (> ``background``).
    background : activity per mm^3 of the disc between the rods (>= 0; 0 is a cold background).
    supersample : sub-samples per voxel and in-plane axis (``supersample**2`` per voxel; exact along
        the axis).
    centre_mm : (x, y, z) mm of the phantom centre.
    first_sector_deg : in-plane direction of sector 0's bisector (degrees from +u towards +v).

    Returns
    -------
    image : (nz, ny, nx) float32 mean concentration per voxel.
    info : :class:`DerenzoInfo`.
    """
    expect_instance(grid, ImageGrid, "grid")
    _check_axis(axis)
    diam = real_array("diameters_mm", diameters_mm)
    if diam.shape != (6,) or np.any(diam <= 0):
        raise ValueError(f"diameters_mm: expected six positive finite diameters (mm), got {diameters_mm!r}")
    if len(np.unique(diam)) != 6:              # the groups (and rod_profiles' results) are keyed by diameter
        raise ValueError(f"diameters_mm: expected six distinct diameters (one per sector), got {diam.tolist()}")
    _check_positive(radius_mm=radius_mm, length_mm=length_mm, concentration=concentration)
    _float32_value("concentration", concentration, "the rods' concentration")
    background = real_number("background", background)
    if not 0 <= background < concentration:
        raise ValueError(f"background: expected 0 <= background < concentration ({concentration!r}), "
                         f"got {background!r}")
    supersample = integer("supersample", supersample, lo=1)
    centre = check_point("centre_mm", centre_mm)
    first_sector_deg = real_number("first_sector_deg", first_sector_deg)

    # each sector's lattice has about (radius / spacing)**2 sites, every rod a source: bound them first
    with np.errstate(over="ignore"):
        sites = 6.0 * np.square(float(radius_mm) / (2.0 * float(diam.min())) / np.cos(np.pi / 6) + 2.0)
    require_memory("radius_mm", 1000.0 * sites, f"a disc of radius {radius_mm!r} mm with rods of "
                   f"{float(diam.min())} mm (about {sites:.3g} lattice sites)")
    u_name, v_name = PLANE_AXES[axis]
    centre_uv = np.array([centre[POINT_AXIS[u_name]], centre[POINT_AXIS[v_name]]])
    groups = []
    for k, d in enumerate(diam):
        bisector = (float(first_sector_deg) + 60.0 * k) % 360.0
        rel, rows = _sector_lattice(float(d), float(radius_mm), np.deg2rad(bisector))
        if rel.shape[0] == 0:
            raise ValueError(f"radius_mm: {radius_mm!r} mm is too small for a rod of {d} mm in its sector "
                             f"(needs at least {2.5 * d:.3g} mm)")
        groups.append(_group(k, float(d), bisector, rel + centre_uv, rows))

    sources = []
    if background > 0:
        sources.append(RodSource(centre, radius_mm, length_mm, background, axis))
    for g in groups:
        for c in _plane_to_xyz(axis, g.centres_mm, centre[POINT_AXIS[axis]]):
            sources.append(RodSource(tuple(c), 0.5 * g.diameter_mm, length_mm, concentration - background, axis))
    phantom = AnalyticPhantom(sources)
    info = DerenzoInfo(grid=grid, analytic=phantom, axis=axis, plane_axes=(u_name, v_name), centre_mm=centre,
                       radius_mm=float(radius_mm), length_mm=float(length_mm),
                       concentration=float(concentration), background=float(background), groups=tuple(groups))
    return phantom.image(grid, int(supersample)), info


def _plane_to_xyz(axis: str, uv: np.ndarray, along: float) -> np.ndarray:
    """Points (n, 3) (x, y, z) from in-plane (n, 2) ``(u, v)`` and one coordinate along ``axis``."""
    out = np.empty((uv.shape[0], 3))
    u, v = PLANE_AXES[axis]
    out[:, POINT_AXIS[u]] = uv[:, 0]
    out[:, POINT_AXIS[v]] = uv[:, 1]
    out[:, POINT_AXIS[axis]] = along
    return out


def _sector_lattice(d: float, radius: float, bisector_rad: float):
    """Rod centres (n, 2) relative to the disc centre, and their row numbers i + j (n,)."""
    s = 2.0 * d
    e1 = np.array([np.cos(bisector_rad - np.pi / 6), np.sin(bisector_rad - np.pi / 6)])
    e2 = np.array([np.cos(bisector_rad + np.pi / 6), np.sin(bisector_rad + np.pi / 6)])
    b = np.array([np.cos(bisector_rad), np.sin(bisector_rad)])
    # |s b + i a1 + j a2| >= s + (i + j) s cos(30 deg): rows beyond n_max cannot reach the disc.
    n_max = max(int(np.ceil((radius - 0.5 * d - s) / (s * np.cos(np.pi / 6)))) + 1, 0)
    i, j = (a.ravel() for a in np.meshgrid(np.arange(n_max + 1), np.arange(n_max + 1), indexing="ij"))
    c = s * b[None, :] + s * (i[:, None] * e1[None, :] + j[:, None] * e2[None, :])
    keep = np.hypot(c[:, 0], c[:, 1]) + 0.5 * d <= radius
    # Order rods by row, then along the row (from the e1 edge towards the e2 edge).
    order = np.lexsort((i[keep], (i + j)[keep]))
    return c[keep][order], (i + j)[keep][order]


def _group(k: int, d: float, bisector_deg: float, centres: np.ndarray, rows: np.ndarray) -> DerenzoGroup:
    """Group k with its profile row: the most rods, ties to the row nearer the centre."""
    row_ids, counts = np.unique(rows, return_counts=True)
    best = row_ids[np.argmax(counts)]             # unique returns rows in increasing order: the first
    idx = np.flatnonzero(rows == best)            # maximum is the innermost longest row
    if idx.size == 1:
        # A single rod (only when the radius barely fits the group): profile across it along the
        # direction perpendicular to the bisector.
        t = np.deg2rad(bisector_deg) + np.pi / 2
        direction = np.array([np.cos(t), np.sin(t)])
    else:
        direction = centres[idx[-1]] - centres[idx[0]]
        direction /= np.hypot(direction[0], direction[1])
    start = centres[idx[0]] - d * direction
    end = centres[idx[-1]] + d * direction
    return DerenzoGroup(diameter_mm=d, spacing_mm=2.0 * d, sector=k, sector_centre_deg=bisector_deg,
                        centres_mm=centres, profile_rods=idx, profile_start_mm=start, profile_end_mm=end)


# --- point sources -----------------------------------------------------------------------------------

def point_sources(grid: ImageGrid, positions_mm, activity=1.0):
    """Point sources at ``positions_mm`` ((n, 3) or (3,), (x, y, z) mm), each inside the grid.

    Wraps :func:`~directpet.sim.phantoms.point_source_phantom` (image value ``activity /
    voxel_volume`` in the voxel containing each point), but rejects points outside the image, which
    a resolution study could not measure. ``activity`` is a scalar or one value per point.
    Returns ``(image (nz, ny, nx) float32, PhantomInfo)``.
    """
    expect_instance(grid, ImageGrid, "grid")
    pts = np.atleast_2d(real_array("positions_mm", positions_mm))
    if pts.ndim != 2 or pts.shape[1] != 3 or pts.shape[0] == 0:
        raise ValueError(f"positions_mm: expected finite (n, 3) (x, y, z) mm, got shape {pts.shape}")
    check_inside_grid("positions_mm", grid, pts)
    acts = real_array("activity", activity)
    if acts.ndim > 1 or (acts.ndim == 1 and acts.shape[0] != pts.shape[0]) \
            or np.any(acts <= 0):
        raise ValueError(f"activity: expected a positive scalar or {pts.shape[0]} positive values, got {activity!r}")
    return point_source_phantom(grid, pts, acts)


def radial_point_positions(max_radius_mm: float, n: int, z_mm: float = 0.0, *,
                           angle_deg: float = 0.0) -> np.ndarray:
    """(n, 3) positions (x, y, z) mm at radii ``linspace(0, max_radius_mm, n)`` along the in-plane
    direction ``angle_deg`` (from +x towards +y), all at ``z_mm``: the points of a FWHM-against-radius
    study (NEMA NU 4 style)."""
    n = integer("n", n, lo=2)
    require_memory("n", 80.0 * n, f"{n} point positions")      # the (n, 3) result and its float64 temporaries
    max_radius_mm = real_number("max_radius_mm", max_radius_mm, positive=True)
    z_mm, angle_deg = real_number("z_mm", z_mm), real_number("angle_deg", angle_deg)
    r = np.linspace(0.0, max_radius_mm, n)
    t = np.deg2rad(angle_deg)
    return np.stack([r * np.cos(t), r * np.sin(t), np.full(r.shape, float(z_mm))], axis=1)


__all__ = ["DerenzoGroup", "DerenzoInfo", "MICRO_DERENZO_DIAMETERS_MM", "PLANE_AXES", "RodSource",
           "derenzo_phantom", "point_sources", "radial_point_positions"]
