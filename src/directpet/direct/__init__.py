"""DIRECT TOF-PET: views, SR-kernel models, LUTs and histo-image projectors (spatial, FFT, low-rank FFT),
histo-image data, the cylindrical scanner, event simulation and deposition, model-consistent data, and
ViewSubsets: DIRECT as the reconstruction layer's SubsetProblem."""

from .._checks import to_numpy
from .attenuation import attenuation_histo_images
from .deposition import (DepositStats, bin_views, deposit, randoms_background, randoms_from_delayeds,
                         sensitivity_attenuation, simulate_histo_images)
from .events import EventBatch, simulate_events, simulate_randoms
from .fft import FFTProjector
from .histo_data import HistoImageData
from .kernels import C_MM_PER_PS, SRKernel, tof_fwhm_mm
from .lowrank import LowRankProjector
from .lut import DirectLUT, build_lut, local_coordinates
from .model_data import expected_data, model_consistent_data
from .normalisation import normalisation_histo_images
from .projector import HistoImageProjector
from .scanner import CylindricalScanner, detector_exits, detector_hits
from .simulation import simulate_deposit
from .subsets import ViewSubsets, make_blocks
from .views import View, ViewSet

__all__ = ["randoms_from_delayeds", "attenuation_histo_images", "C_MM_PER_PS", "CylindricalScanner", "DepositStats", "DirectLUT", "EventBatch", "FFTProjector",
           "HistoImageData", "HistoImageProjector", "LowRankProjector", "SRKernel", "View",
           "ViewSet", "ViewSubsets", "bin_views", "build_lut", "deposit", "detector_exits", "detector_hits",
           "expected_data", "local_coordinates", "make_blocks", "model_consistent_data", "normalisation_histo_images", "randoms_background",
           "sensitivity_attenuation", "simulate_deposit", "simulate_events", "simulate_histo_images",
           "simulate_randoms", "to_numpy", "tof_fwhm_mm"]
