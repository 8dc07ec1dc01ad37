"""DIRECT TOF-PET: views and the cylindrical scanner (geometry), SR-kernel models (model), LUTs and
histo-image projectors (spatial, FFT, low-rank FFT), histo-image data and model-consistent data
(data), the Monte Carlo (list-mode events, and the compiled simulation fused with deposition),
deposition and corrections, ViewSubsets (DIRECT as the reconstruction layer's SubsetProblem),
a PETSIRD file to an image in one call (:func:`reconstruct_petsird`) and the [HA] experiment (:mod:`directpet.direct.experiment`, ``directpet demo``)."""

from .._checks import to_numpy
from .attenuation import attenuation_histo_images
from .data import HistoImageData, expected_data, model_consistent_data
from .deposition import (DepositStats, bin_views, deposit, randoms_background, randoms_from_delayeds,
                         smooth_randoms,
                         sensitivity_attenuation, simulate_histo_images)
from .fft import FFTProjector
from .geometry import CylindricalScanner, View, ViewSet, detector_exits, detector_hits
from .lowrank import LowRankProjector
from .lut import DirectLUT, build_lut, local_coordinates
from .model import C_MM_PER_PS, SRKernel, tof_fwhm_mm
from .monte_carlo import EventBatch, MonteCarloStats, simulate, simulate_events, simulate_randoms
from .normalisation import normalisation_histo_images
from .projector import HistoImageProjector
from .select import ProjectorChoice, select_projector
from .subsets import ViewSubsets, make_blocks
from .workflow import PetsirdReconstruction, reconstruct_petsird

__all__ = ["randoms_from_delayeds", "smooth_randoms", "attenuation_histo_images", "C_MM_PER_PS", "CylindricalScanner", "DepositStats",
           "DirectLUT", "EventBatch", "FFTProjector", "HistoImageData", "HistoImageProjector", "LowRankProjector",
           "MonteCarloStats", "PetsirdReconstruction", "ProjectorChoice", "SRKernel", "View", "ViewSet", "ViewSubsets", "bin_views", "build_lut", "deposit",
           "detector_exits", "detector_hits", "expected_data", "local_coordinates", "make_blocks",
           "model_consistent_data", "normalisation_histo_images", "randoms_background", "reconstruct_petsird", "select_projector", "sensitivity_attenuation",
           "simulate", "simulate_events", "simulate_histo_images", "simulate_randoms", "to_numpy", "tof_fwhm_mm"]
