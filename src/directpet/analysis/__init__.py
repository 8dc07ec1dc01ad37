"""Evaluation as in [HA] §6: partial-voxel ROIs, CRC, noise, contrast-noise curves and figures."""

from .metrics import (ContrastNoiseCurve, CRCResult, MatchedNoise, contrast_noise_curve, crc, noise,
                      pick_matched_noise)
from .plots import (line_profile, plot_contrast_noise, plot_contrast_noise_errorbars, plot_image_panels,
                    plot_line_profiles, plot_matched_noise_panels)
from .resolution import (PeakToValley, RodProfile, fwhm_1d, peak_to_valley, point_source_fwhm,
                         rod_noise, rod_profiles)
from .roi import SphereROIs, annulus_weights, circle_weights, roi_mean, slice_weights

__all__ = ["CRCResult", "ContrastNoiseCurve", "MatchedNoise", "SphereROIs", "annulus_weights",
           "circle_weights", "contrast_noise_curve", "crc", "line_profile", "noise", "pick_matched_noise",
           "plot_contrast_noise", "plot_contrast_noise_errorbars", "plot_image_panels", "plot_line_profiles", "plot_matched_noise_panels",
           "roi_mean", "slice_weights",
           "PeakToValley", "RodProfile", "fwhm_1d", "peak_to_valley", "point_source_fwhm", "rod_noise",
           "rod_profiles"]
