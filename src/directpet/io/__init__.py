"""Data in and out in the formats the field uses: NIfTI images (:mod:`directpet.io.nifti`, through
nibabel) and PETSIRD list-mode (:mod:`directpet.io.petsird`, through petsird); both packages are
imported only when used (``pip install 'directpet[io]'``)."""

from .nifti import load_nifti, nifti_affine, save_nifti
from .petsird import Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter

__all__ = ["Coincidences", "PetsirdReader", "PetsirdScanner", "PetsirdWriter", "load_nifti", "nifti_affine",
           "save_nifti"]
