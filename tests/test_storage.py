"""Every .npz loader turns a missing, truncated, foreign or corrupt file into a ValueError naming path."""

import json

import numpy as np
import pytest

from directpet.direct import HistoImageData
from directpet.first import RotatingScanner, SinogramData, SuperLORTable, build_super_lor_table
from directpet.geometry import ImageGrid

SMALL = RotatingScanner.small()


def _good_files(tmp_path, rng):
    table = build_super_lor_table(SMALL)
    table.save(tmp_path / "table.npz")
    SinogramData(rng.poisson(2.0, SMALL.sinogram_shape).astype(np.float32), SMALL).save(tmp_path / "sino.npz")
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
    json_key = "metadata" if kind == "histo" else "scanner"
    _rewrite(path, tmp_path / "badjson.npz", **{json_key: np.array("{not json")})
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "badjson.npz")
    _rewrite(path, tmp_path / "list.npz", **{json_key: np.array(json.dumps([1, 2]))})
    with pytest.raises(ValueError, match="path"):
        load(tmp_path / "list.npz")


@pytest.mark.parametrize("kind", ["table", "sino"])
def test_wrong_versions_and_formats(tmp_path, rng, kind):
    path, load = _good_files(tmp_path, rng)[kind]
    for name, change in (("v99", {"version": np.array(99)}), ("vstr", {"version": np.array("one")}),
                         ("fmt", {"format": np.array("someone.else")}), ("nover", {"version": None})):
        _rewrite(path, tmp_path / f"{name}.npz", **change)
        with pytest.raises(ValueError, match="path"):
            load(tmp_path / f"{name}.npz")
