"""csrc/dualhead/tiles.hpp's forward geometry, compiled here for the host: the padded positions, the
tiles and the staged window's plane stride (fwd_pitch, fwd_tile, fwd_plane_stride, fwd_window,
fwd_tap_offset). A brute-force walk over small geometries checks what the default forward relies on but
cannot see in its results:

* a real LOR's tap reads a cell that the step copied (row < rows, column < cols), so a padded row never
  wraps into the next one for a real LOR;
* every lane of a warp's active round (padding and lanes past the tile included, whose sums are dropped)
  reads inside its residue plane (position < plane), so no read leaves the window's buffer;
* the copied cells fit the plane stride.

The walk uses the kernel's own threads and rounds (kThreads, kFwdRounds) and its rule for active rounds
(a warp-round with at least one real LOR)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHECK = r"""
#include <cstdio>
#include <initializer_list>

#include "dualhead/tiles.hpp"
using namespace dp::dualhead::tiles;

int main() {
    long checked = 0;
    const int D = 4;
    for (int lpb : {kFwdLors / 4, kFwdLors / 2, kFwdLors})
    for (int pos_y : {1, 2, 3, 5, 9, 17, 40})
    for (int pos_z : {1, 2, 3, 7, 13, 31, 33, 64, 100, 300})
    for (int g : {0, 1, 3, 7, 40})
    for (int sy : {0, 1, 4, 9}) {
        const int pitch = fwd_pitch(pos_z, g), plane = fwd_plane_stride(pos_y, pitch, sy, lpb);
        if (fwd_window_bound(pos_y, pitch, D, sy, lpb) != int64_t(D) * plane) return 2;
        const int n_tiles = (pos_y * pitch + lpb - 1) / lpb;
        if (fwd_tiles(pos_y, pitch, lpb) != n_tiles) return 3;
        for (int tile = 0; tile < n_tiles; ++tile) {
            const FwdTile T = fwd_tile(pos_y, pitch, tile, lpb);
            for (int y_hi : {0, sy})
            for (int z_hi : {0, g}) {
                const Window w = fwd_window(T, Box{0, y_hi, 0, z_hi}, pos_z, pitch, plane);
                if ((w.rows - 1) * w.pitch + w.cols > plane) {
                    std::printf("copy exceeds the plane: pos %d x %d g %d sy %d lpb %d tile %d\n", pos_y, pos_z, g, sy, lpb, tile);
                    return 1;
                }
                const int far = fwd_tap_offset(w, 0, y_hi, z_hi);   // the farthest tap within a residue plane
                for (int warp = 0; warp < kThreads / 32; ++warp)
                    for (int r = 0; r < kFwdRounds; ++r) {
                        const int f_lane0 = T.f0 + r * kThreads + 32 * warp;
                        bool active = false;
                        for (int lane = 0; lane < 32; ++lane) {
                            const int f = f_lane0 + lane;
                            active |= f < T.f1 && f % pitch < pos_z;
                        }
                        if (!active) continue;
                        for (int lane = 0; lane < 32; ++lane) {
                            const int f = f_lane0 + lane, i = f / pitch, j = f - i * pitch;
                            const int pos = f - T.i_a * pitch;   // the kernel's base0 + r kThreads
                            ++checked;
                            if (pos < 0 || pos + far >= plane) {
                                std::printf("read leaves the plane: pos %d x %d g %d sy %d lpb %d tile %d f %d\n", pos_y, pos_z, g, sy, lpb, tile, f);
                                return 1;
                            }
                            if (f < T.f1 && j < pos_z &&
                                ((i - w.i_ref) + y_hi >= w.rows || j + z_hi >= w.cols ||
                                 pos != fwd_lor_base(w, i, j) || j + z_hi >= pitch)) {
                                std::printf("real LOR outside the copy: pos %d x %d g %d sy %d lpb %d tile %d f %d\n", pos_y, pos_z, g, sy, lpb, tile, f);
                                return 1;
                            }
                        }
                    }
            }
        }
    }
    std::printf("checked %ld\n", checked);
    return 0;
}
"""


def test_forward_windows_hold_every_read(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH (the check compiles csrc/dualhead/tiles.hpp for the host)")
    src = tmp_path / "check.cpp"
    src.write_text(CHECK)
    exe = tmp_path / "check"
    build = subprocess.run([cxx, "-std=c++17", "-O2", f"-I{ROOT / 'csrc'}", str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[-1]) > 10**6   # the walk really ran
