"""Data in and out in the formats the field uses: NIfTI images (:mod:`directpet.io.nifti`)."""

from .nifti import load_nifti, nifti_affine, save_nifti

__all__ = ["load_nifti", "nifti_affine", "save_nifti"]
