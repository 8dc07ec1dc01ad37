"""Every .npz loader turns a missing, truncated, foreign or corrupt file into a ValueError naming path."""

import json

import numpy as np
import pytest

from directpet.direct import HistoImageData
from directpet.dualhead import DualHeadScanner, PatchModel
from directpet.first import RotatingScanner, SinogramData, SuperLORTable, build_super_lor_table
from directpet.geometry import ImageGrid

SMALL = RotatingScanner.small()


def _good_files(tmp_path, rng):
    table = build_super_lor_table(SMALL)
    table.save(tmp_path / "table.npz")
    SinogramData(prompts=rng.poisson(2.0, SMALL.sinogram_shape).astype(np.float32), scanner=SMALL).save(
        tmp_path / "sino.npz")
    grid = ImageGrid((3, 4, 5), 2.0)
    HistoImageData(rng.random((2,) + grid.shape, dtype=np.float32), grid).save(tmp_path / "histo.npz")
    return {"table": (tmp_path / "table.npz", SuperLORTable.load),
            "sino": (tmp_path / "sino.npz", SinogramData.load),
            "histo": (tmp_path / "histo.npz", HistoImageData.load)}


def _rewrite(src, dst, **changes):
    with np.load(src) as f:
        d = dict(f)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    np.savez(dst, **d)


@pytest.mark.parametrize("kind", ["table", "sino", "histo"])
def test_broken_files_name_the_path(tmp_path, rng, kind):
    path, load = _good_files(tmp_path, rng)[kind]
    load(path)                                             # the good file loads
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "missing.npz")
    data = path.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "truncated.npz")
    (tmp_path / "text.npz").write_text("not a zip file at all")
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "text.npz")
    np.savez(tmp_path / "foreign.npz", something=np.ones(3))
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "foreign.npz")
    json_key = "grid" if kind == "histo" else "scanner"      # a HistoImageData need not hold a scanner
    _rewrite(path, tmp_path / "badjson.npz", **{json_key: np.array("{not json")})
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "badjson.npz")
    _rewrite(path, tmp_path / "list.npz", **{json_key: np.array(json.dumps([1, 2]))})
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "list.npz")


@pytest.mark.parametrize("kind", ["table", "sino", "histo"])
def test_wrong_versions_and_formats(tmp_path, rng, kind):
    path, load = _good_files(tmp_path, rng)[kind]
    for name, change in (("v99", {"version": np.array(99)}), ("vstr", {"version": np.array("one")}),
                         ("fmt", {"format": np.array("someone.else")}), ("nover", {"version": None})):
        _rewrite(path, tmp_path / f"{name}.npz", **change)
        with pytest.raises(ValueError, match="path"):
            load(tmp_path / f"{name}.npz")


def _patch_model_file(tmp_path, rng):
    s = DualHeadScanner.small()
    n = 40
    model = PatchModel.from_taps(s, rng.integers(0, s.n_classes, n), rng.integers(0, s.n_planes, n),
                                 rng.integers(0, s.D, n), rng.integers(0, s.D, n), rng.uniform(0.1, 1.0, n))
    model.save(tmp_path / "model.npz")
    return tmp_path / "model.npz", PatchModel.load


def _first_member_data(data: bytes) -> int:
    """Offset of the first zip member's (compressed) data: after its 30-byte local header, name and extra."""
    name_len, extra_len = int.from_bytes(data[26:28], "little"), int.from_bytes(data[28:30], "little")
    return 30 + name_len + extra_len


@pytest.mark.parametrize("kind", ["table", "sino", "model"])
def test_damaged_zip_members_name_the_path(tmp_path, rng, kind):
    """Damage that zipfile / zlib report with their own exceptions (NotImplementedError for an unknown
    compression method or zip version, zlib.error for a corrupt deflate stream) is a ValueError naming
    the path, like any unreadable file."""
    path, load = _patch_model_file(tmp_path, rng) if kind == "model" else _good_files(tmp_path, rng)[kind]
    data = path.read_bytes()
    load(path)                                             # the good file loads
    central = data.index(b"PK\x01\x02")                 # the first member's central directory entry
    method = bytearray(data)
    method[central + 10:central + 12] = (99).to_bytes(2, "little")   # compression method 99
    version = bytearray(data)
    version[central + 6:central + 8] = (147).to_bytes(2, "little")  # needs zip version 14.7
    deflate = bytearray(data)
    start = _first_member_data(data)
    deflate[start:start + 16] = bytes(range(240, 256))     # not a deflate stream
    for name, damaged in (("method", method), ("version", version), ("deflate", deflate)):
        (tmp_path / f"{name}.npz").write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match=f"path: .*{name}.npz"):
            load(tmp_path / f"{name}.npz")


@pytest.mark.parametrize("kind, key", [("table", "values"), ("model", "tap_w")])
def test_nan_in_a_stored_model_names_the_path_and_the_array(tmp_path, rng, kind, key):
    path, load = _patch_model_file(tmp_path, rng) if kind == "model" else _good_files(tmp_path, rng)[kind]
    with np.load(path) as f:
        bad = np.array(f[key])
    bad.reshape(-1)[rng.integers(bad.size)] = np.nan
    _rewrite(path, tmp_path / "nan.npz", **{key: bad})
    with pytest.raises(ValueError, match=f"path: .*nan.npz.*{key}"):
        load(tmp_path / "nan.npz")
