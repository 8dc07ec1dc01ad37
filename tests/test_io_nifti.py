"""NIfTI images in and out (nibabel): round trips, the affine against the grid's voxel centres, and
files that are not on a centred, axis-aligned grid."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from directpet.geometry import ImageGrid
from directpet.io import load_nifti, nifti_affine, save_nifti

nib = pytest.importorskip("nibabel", reason="nibabel not installed (pip install nibabel)")


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_round_trip_keeps_the_image_and_the_grid(tmp_path, rng, suffix):
    grid = ImageGrid((5, 7, 9), (2.5, 1.0, 0.75))          # anisotropic, odd and mixed sizes
    x = rng.uniform(0.1, 3.0, grid.shape).astype(np.float32)
    path = save_nifti(tmp_path / f"img{suffix}", x, grid)
    y, g = load_nifti(path)
    assert g == grid and y.dtype == np.float32
    np.testing.assert_array_equal(y, x)


def test_world_coordinates_of_voxels_are_the_grid_centres(tmp_path, rng):
    """Read back with nibabel alone: voxel (i, j, k) of the file lies at the grid's centre of image
    voxel (iz, iy, ix) = (k, j, i), and holds that voxel's value."""
    grid = ImageGrid((4, 6, 8), (3.0, 2.0, 1.5))
    x = rng.uniform(0.1, 1.0, grid.shape).astype(np.float32)
    save_nifti(tmp_path / "a.nii", x, grid)
    img = nib.load(str(tmp_path / "a.nii"))
    assert int(img.header["sform_code"]) == 1 and int(img.header["qform_code"]) == 1
    assert img.header.get_xyzt_units()[0] == "mm"
    np.testing.assert_allclose(img.header.get_zooms(), (1.5, 2.0, 3.0))
    data = np.asarray(img.dataobj)
    for iz, iy, ix in [(0, 0, 0), (3, 5, 7), (1, 4, 2)]:
        world = img.affine @ np.array([ix, iy, iz, 1.0])
        np.testing.assert_allclose(world[:3], [grid.centres(2)[ix], grid.centres(1)[iy], grid.centres(0)[iz]])
        assert data[ix, iy, iz] == x[iz, iy, ix]
    np.testing.assert_array_equal(nifti_affine(grid), img.affine)


def test_a_file_made_by_nibabel_on_a_centred_grid_loads(tmp_path, rng):
    data = rng.uniform(0, 1, (6, 4, 3)).astype(np.float64)            # (nx, ny, nz)
    vx, vy, vz = 2.0, 2.0, 4.0
    A = np.diag([vx, vy, vz, 1.0])
    A[:3, 3] = [-2.5 * vx, -1.5 * vy, -1.0 * vz]
    nib.save(nib.Nifti1Image(data, A), str(tmp_path / "b.nii.gz"))
    y, g = load_nifti(tmp_path / "b.nii.gz")
    assert g == ImageGrid((3, 4, 6), (4.0, 2.0, 2.0))
    np.testing.assert_allclose(y, np.transpose(data, (2, 1, 0)), rtol=1e-7)


def test_files_off_the_convention_are_clear_errors(tmp_path, rng):
    data = rng.uniform(0, 1, (4, 4, 4)).astype(np.float32)
    shifted = np.diag([2.0, 2.0, 2.0, 1.0])
    shifted[:3, 3] = [-3.0 + 1.0, -3.0, -3.0]
    nib.save(nib.Nifti1Image(data, shifted), str(tmp_path / "shift.nii"))
    with pytest.raises(ValueError, match=r"not centred.*\[1\.0, 0\.0, 0\.0\]"):
        load_nifti(tmp_path / "shift.nii")
    flipped = np.diag([-2.0, 2.0, 2.0, 1.0])
    flipped[:3, 3] = [3.0, -3.0, -3.0]
    nib.save(nib.Nifti1Image(data, flipped), str(tmp_path / "flip.nii"))
    with pytest.raises(ValueError, match="axis-aligned"):
        load_nifti(tmp_path / "flip.nii")
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[2 * c, -2 * s, 0, 0], [2 * s, 2 * c, 0, 0], [0, 0, 2, 0], [0, 0, 0, 1.0]])
    nib.save(nib.Nifti1Image(data, rot), str(tmp_path / "rot.nii"))
    with pytest.raises(ValueError, match="axis-aligned"):
        load_nifti(tmp_path / "rot.nii")
    nib.save(nib.Nifti1Image(rng.uniform(0, 1, (4, 4, 4, 2)).astype(np.float32), np.eye(4)), str(tmp_path / "t.nii"))
    with pytest.raises(ValueError, match="4D"):
        load_nifti(tmp_path / "t.nii")
    # a truncated file, a foreign file, a missing file
    good = tmp_path / "good.nii"
    save_nifti(good, data, ImageGrid((4, 4, 4), 2.0))
    (tmp_path / "cut.nii").write_bytes(good.read_bytes()[:400])
    with pytest.raises(ValueError, match="path: .*cut.nii"):
        load_nifti(tmp_path / "cut.nii")
    (tmp_path / "junk.nii.gz").write_bytes(gzip.compress(b"not a nifti file" * 10))
    with pytest.raises(ValueError, match="path: .*junk"):
        load_nifti(tmp_path / "junk.nii.gz")
    with pytest.raises(ValueError, match="does not exist"):
        load_nifti(tmp_path / "missing.nii")


def test_bad_images_are_named(tmp_path, rng):
    grid = ImageGrid((3, 4, 5), 2.0)
    x = rng.uniform(0, 1, grid.shape).astype(np.float32)
    with pytest.raises(ValueError, match="image: expected shape"):
        save_nifti(tmp_path / "a.nii", x[:, :, :4], grid)
    bad = x.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="image: contains NaN"):
        save_nifti(tmp_path / "a.nii", bad, grid)
    with pytest.raises(TypeError, match="grid"):
        save_nifti(tmp_path / "a.nii", x, (3, 4, 5))
    with pytest.raises(TypeError, match="image"):
        save_nifti(tmp_path / "a.nii", x.tolist(), grid)
