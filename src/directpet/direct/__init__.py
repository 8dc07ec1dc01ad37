"""DIRECT TOF-PET: views, SR-kernel models, LUTs and histo-image projectors (spatial, FFT, low-rank FFT)."""

from .fft import FFTProjector
from .kernels import C_MM_PER_PS, SRKernel, tof_fwhm_mm
from .lowrank import LowRankProjector
from .lut import DirectLUT, build_lut, local_coordinates
from .projector import HistoImageProjector, ViewOperator
from .views import View, ViewSet

__all__ = ["C_MM_PER_PS", "DirectLUT", "FFTProjector", "HistoImageProjector", "LowRankProjector",
           "SRKernel", "View", "ViewOperator", "ViewSet", "build_lut", "local_coordinates", "tof_fwhm_mm"]
