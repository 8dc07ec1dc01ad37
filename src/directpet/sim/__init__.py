"""Simulation pieces every projector family shares: analytic phantoms, line-cylinder geometry and
random streams (:ref:`physics-phantoms`). Each family's scanner, event Monte Carlo and data live in
its own package (``directpet.direct``: histo-images, deposition, cylindrical scanner)."""

from .lines import chord_length, cylinder_interval
from .phantoms import (MU_WATER_PER_MM, AnalyticPhantom, CylinderSource, PhantomInfo, PointSource,
                       SphereSource, WaterCylinder, point_source_phantom, sphere_phantom, uniform_cylinder)
from .derenzo import (DerenzoGroup, DerenzoInfo, RodSource, derenzo_phantom, point_sources,
                      radial_point_positions)
from .random import check_seed, make_rng, seed_from_rng

__all__ = ["AnalyticPhantom", "CylinderSource", "DerenzoGroup", "DerenzoInfo", "MU_WATER_PER_MM", "PhantomInfo",
           "PointSource", "RodSource", "SphereSource", "WaterCylinder", "check_seed", "chord_length",
           "cylinder_interval", "derenzo_phantom", "make_rng", "point_source_phantom", "point_sources",
           "radial_point_positions", "seed_from_rng", "sphere_phantom", "uniform_cylinder"]
