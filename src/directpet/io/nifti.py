"""NIfTI-1 images through nibabel, placed in scanner millimetres.

directpet images are ``(nz, ny, nx)`` arrays on an :class:`~directpet.geometry.ImageGrid` centred on
the scanner axis (voxel centre ``x_i = (i - (nx - 1) / 2) vx``, likewise y and z). A NIfTI file
stores them as ``(nx, ny, nz)`` (its i, j, k = our x, y, z) with the affine

    ``[x, y, z, 1]^T = A [i, j, k, 1]^T``,  ``A = [[vx, 0, 0, -(nx-1)/2 vx], [0, vy, 0, -(ny-1)/2 vy],
    [0, 0, vz, -(nz-1)/2 vz], [0, 0, 0, 1]]``

as both the sform and the qform, with code 1 (NIFTI_XFORM_SCANNER_ANAT): the world coordinates are
the scanner's x, y, z in mm, unchanged. directpet does not know the patient's orientation, so no
RAS reorientation is applied; viewers show the image with the scanner's axes.

nibabel is imported only when these functions are called (``pip install nibabel`` or
``directpet[io]``).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_path, real_number, to_numpy
from ..geometry import ImageGrid

SCANNER_ANAT = 1     # NIfTI xform code: scanner-based anatomical coordinates
EXTENSIONS = (".nii", ".nii.gz")     # what save_nifti writes (one file; nibabel infers the format from it)


def _nibabel():
    try:
        import nibabel
    except ImportError as e:
        raise ImportError("NIfTI input/output needs nibabel: pip install nibabel (or directpet[io])") from e
    return nibabel


def nifti_affine(grid: ImageGrid) -> np.ndarray:
    """The 4 x 4 affine (float64) mapping NIfTI voxel indices (i, j, k) = (ix, iy, iz) to the grid's
    voxel centres in scanner mm (x, y, z)."""
    if not isinstance(grid, ImageGrid):
        raise TypeError(f"grid: expected an ImageGrid, got {type(grid).__name__}")
    vz, vy, vx = grid.voxel_size
    nz, ny, nx = grid.shape
    A = np.diag([vx, vy, vz, 1.0])
    A[:3, 3] = [-(nx - 1) / 2 * vx, -(ny - 1) / 2 * vy, -(nz - 1) / 2 * vz]
    return A


def save_nifti(path, image, grid: ImageGrid, *, description: str = "directpet"):
    """Write ``image`` (``grid.shape`` = (nz, ny, nx), NumPy or CuPy, real, finite in float32: no
    value beyond float32's range) as a NIfTI-1 file (``.nii`` or ``.nii.gz``), float32, with
    :func:`nifti_affine` as sform and qform (code scanner) and voxel sizes in mm. ``path`` must end
    in ``.nii`` or ``.nii.gz`` and must not be a directory (errors name ``path``). Returns ``path``."""
    nib = _nibabel()
    name = check_path(path, writing=True)
    if not name.lower().endswith(EXTENSIONS):
        raise ValueError(f"path: {name} does not end in .nii or .nii.gz; save_nifti writes single-file NIfTI-1 "
                         f"images (.nii, or .nii.gz compressed)")
    affine = nifti_affine(grid)
    if not hasattr(image, "shape") or not hasattr(image, "dtype"):
        raise TypeError(f"image: expected a NumPy or CuPy array, got {type(image).__name__}")
    a = to_numpy(image)
    if tuple(a.shape) != tuple(grid.shape):
        raise ValueError(f"image: expected shape {tuple(grid.shape)} (nz, ny, nx) of the grid, got {tuple(a.shape)}")
    if not np.issubdtype(a.dtype, np.floating) and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"image: expected a real numeric array, got dtype {a.dtype}")
    if not np.isfinite(a).all():
        raise ValueError("image: contains NaN or inf")
    with np.errstate(over="ignore"):             # values beyond float32 become inf: reported just below
        data = np.ascontiguousarray(np.transpose(a, (2, 1, 0)), dtype=np.float32)      # (nx, ny, nz)
    if not np.isfinite(data).all():              # float64 values beyond float32's range became inf
        big = float(np.abs(a).max())
        raise ValueError(f"image: values must be finite in float32 (|x| <= {float(np.finfo(np.float32).max):.4g}); "
                         f"the largest magnitude is {big:.4g}")
    img = nib.Nifti1Image(data, affine)
    img.set_sform(affine, code=SCANNER_ANAT)
    img.set_qform(affine, code=SCANNER_ANAT)
    img.header.set_xyzt_units(xyz="mm")
    img.header["descrip"] = str(description)[:79].encode("ascii", "replace")
    nib.save(img, name)
    return path


def load_nifti(path, *, atol_mm: float = 1e-3):
    """Read a 3D NIfTI image written in the convention above: returns ``(image, grid)``, image
    float32 ``(nz, ny, nx)`` on ``grid``.

    The file's affine (sform when set, else qform) must be axis-aligned with positive voxel sizes
    and centred on the scanner axis (to ``atol_mm``); anything else (a rotation, a flipped axis, an
    off-centre field, 4D data, a missing or corrupt file) is a ValueError naming ``path`` --
    resample such images onto a centred grid first. So is a file of complex, boolean or
    non-numeric voxels, and one whose values overflow float32.
    """
    nib = _nibabel()
    path = check_path(path)
    atol_mm = real_number("atol_mm", atol_mm)
    if atol_mm < 0:
        raise ValueError(f"atol_mm: expected a tolerance >= 0 mm, got {atol_mm!r}")
    try:
        img = nib.load(str(path))
        data = np.asanyarray(img.dataobj)
        affine = np.asarray(img.affine, dtype=np.float64)
    except FileNotFoundError:
        raise ValueError(f"path: {path} does not exist") from None
    except Exception as e:                     # nibabel's own errors for truncated / foreign files
        raise ValueError(f"path: {path} is not a readable NIfTI file ({type(e).__name__}: {e})") from e
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise ValueError(f"path: {path} holds {data.ndim}D data {data.shape}; expected a 3D image")
    if not (np.issubdtype(data.dtype, np.floating) or np.issubdtype(data.dtype, np.integer)):
        raise ValueError(f"path: {path} holds {data.dtype} voxels; expected real numbers (directpet images "
                         f"are real: a complex image would lose its imaginary part)")
    lin = affine[:3, :3]
    voxel = np.diag(lin).copy()
    if not np.isfinite(affine).all() or np.abs(lin - np.diag(voxel)).max() > 1e-6 * np.abs(voxel).max() \
            or (voxel <= 0).any():
        raise ValueError(f"path: {path} has an affine that is not axis-aligned with positive voxel sizes "
                         f"({np.array2string(lin, precision=4)}); resample it onto a directpet grid first")
    nx, ny, nz = data.shape
    grid = ImageGrid((nz, ny, nx), (voxel[2], voxel[1], voxel[0]))
    off = affine[:3, 3] - nifti_affine(grid)[:3, 3]
    if np.abs(off).max() > atol_mm:
        raise ValueError(f"path: {path} is not centred on the scanner axis (its field is shifted by "
                         f"{np.round(off, 4).tolist()} mm in x, y, z); resample it onto a centred grid first")
    if not np.isfinite(data).all():
        raise ValueError(f"path: {path} contains NaN or inf voxels")
    with np.errstate(over="ignore"):             # values beyond float32 become inf: reported just below
        image = np.ascontiguousarray(np.transpose(np.asarray(data, dtype=np.float32), (2, 1, 0)))
    if not np.isfinite(image).all():
        raise ValueError(f"path: {path} holds values beyond float32's range (largest magnitude "
                         f"{float(np.abs(data).max()):.4g})")
    return image, grid


__all__ = ["load_nifti", "nifti_affine", "save_nifti"]
