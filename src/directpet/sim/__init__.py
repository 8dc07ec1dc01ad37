"""Simulation: scanner, analytic phantoms, list-mode TOF events, deposition into histo-images,
correction histo-images and model-consistent data (science.md 1.2, 1.3, 1.12)."""

from .compiled import simulate_deposit
from .deposition import (DepositStats, HistoImageData, bin_views, deposit, randoms_background,
                         sensitivity_attenuation, simulate_histo_images, to_numpy)
from .events import EventBatch, make_rng, simulate_events, simulate_randoms
from .model_data import expected_data, model_consistent_data
from .phantoms import (MU_WATER_PER_MM, AnalyticPhantom, CylinderSource, PhantomInfo, PointSource,
                       SphereSource, WaterCylinder, point_source_phantom, sphere_phantom, uniform_cylinder)
from .derenzo import (DerenzoGroup, DerenzoInfo, RodSource, derenzo_phantom, point_sources,
                      radial_point_positions)
from .scanner import CylindricalScanner, chord_length, cylinder_interval, detector_exits, detector_hits

__all__ = ["AnalyticPhantom", "CylinderSource", "CylindricalScanner", "DepositStats", "EventBatch",
           "HistoImageData", "MU_WATER_PER_MM", "PhantomInfo", "PointSource", "SphereSource",
           "WaterCylinder", "bin_views", "chord_length", "cylinder_interval", "deposit", "detector_exits",
           "detector_hits", "expected_data", "make_rng", "model_consistent_data", "point_source_phantom",
           "randoms_background", "sensitivity_attenuation", "simulate_deposit", "simulate_events",
           "simulate_histo_images", "simulate_randoms", "sphere_phantom", "to_numpy", "uniform_cylinder",
           "DerenzoGroup", "DerenzoInfo", "RodSource", "derenzo_phantom", "point_sources", "radial_point_positions"]
