// Tiling arithmetic of the default CUDA dual-head projectors (cuda_default.cu), host and device: which
// LORs or image cells a block or warp owns, the shared-memory windows it stages per step, and where a tap lands
// in them. Kept apart from the kernels so that the planner on the host and the kernels use the very
// same bounds.
//
// Notation (layout.hpp): class k = (a_y, a_z), pos = (n_y - a_y, n_z - a_z) shift positions per sign,
// LOR (sign, i, j). A tap (dy, dz) of the class's (+,+) patch is, for signs (s_y, s_z), the voxel
// offset e = (s > 0 ? d : D (a + 1) - 1 - d) from (D i, D j): cell offset q = e / D, residue r = e % D
// (for a negative sign q = a - d / D and r = D - 1 - d % D). So LOR (i, j) reads the cells (i + q_y,
// j + q_z) of the residue planes (r_y, r_z), and voxel cell c receives from LOR c - q.
//
// The polyphase image X[p][r_y][r_z][c_y][c_z] (c_z fastest) makes a LOR's reads of one residue plane
// a unit-stride 2D correlation, so a warp of LORs consecutive in j reads consecutive words.
#pragma once

#include <cstdint>

#include "../common/hd.hpp"
#include "layout.hpp"

namespace dp::dualhead::tiles {

// The default forward's blocks: 256 threads of 8 LORs each. A warp's per-step work (the step's
// window, walk and LOR bases, the barrier) is the same for 4 or 8 LORs per thread, so 8 halve it per
// LOR, and 8 independent sums per tap give each warp ILP; 2048 LORs per block halve the windows' halo
// per LOR against 1024.
constexpr int kThreads = 256;                     // threads per block of the default forward
constexpr int kFwdRounds = 8;                     // LORs per thread in the forward
constexpr int kFwdLors = kThreads * kFwdRounds;   // most padded positions of one sign per block
constexpr int kBackRounds = 4;                    // back projection: warp tiles per warp (rounds)
constexpr int kTileY = 4, kTileZ = 8;             // a warp tile: 4 cell rows x 8 cell columns
constexpr int kGroups = 16;                       // voxel residues per back warp (D <= 4: all of them)
static_assert(32 % kGroups == 0, "a back-projection lane stages one voxel residue of the weights");
constexpr int kTapCap = 2 * kThreads;             // forward: taps decoded per step (two per thread)
constexpr int kQCap = 32;                         // back: cell offsets per step (one per lane)
constexpr int kMaxEntries = 128;                  // classes per launch (kernel parameter block)
constexpr int kMaxPlanes = 128;                   // planes per forward launch (plane metadata in shared memory)

// Cell offsets (q) of a patch, inclusive; empty when y_lo > y_hi.
struct Box {
    int y_lo, y_hi, z_lo, z_hi;
};

// The box of the signed orientation (s_y, s_z): negative signs mirror q -> a - q.
DP_HD Box signed_box(const Box& b, int a_y, int a_z, int s_y, int s_z) {
    Box r = b;
    if (s_y < 0) r.y_lo = a_y - b.y_hi, r.y_hi = a_y - b.y_lo;
    if (s_z < 0) r.z_lo = a_z - b.z_hi, r.z_hi = a_z - b.z_lo;
    return r;
}

// Signed voxel offset of tap offset d in a window of W = D (a + 1) voxels.
DP_HD int signed_offset(int d, int W, int s) { return s > 0 ? d : W - 1 - d; }

// --- forward ---------------------------------------------------------------------------------------
// Padded positions: a sign's LORs in rows of `pitch` = pos_z + g positions, g = the class's widest box
// in q_z over its planes (sz_max). Position f = i pitch + j is LOR (i, j) for j < pos_z, and padding
// (computed, never stored) for j >= pos_z. A staged window's rows lie `pitch` cells apart, so a LOR's
// place in it is linear in f: a thread's rounds f + r kThreads sit at fixed distances (immediate
// offsets of its shared loads, one address per tap), and the 32 LORs of a warp read 32 consecutive
// words (distinct banks) across row wraps too. The padding costs g / pitch of the tap work.
DP_HD int fwd_pitch(int pos_z, int sz_max) { return pos_z + sz_max; }

// A block owns the padded positions f in [f0, f1) of one sign, at most `lpb` (LORs per block: kFwdLors,
// or fewer for classes whose windows would be too large), rows i_a..i_b.
struct FwdTile {
    int f0, f1, i_a, i_b;
};

// A sign's tiles: its pos_y * pitch padded positions in blocks of lpb. The int product cannot overflow:
// pitch <= n_z (a class's boxes span at most a_z cells in q_z, so sz_max <= a_z), and heads have at most
// 32767 voxels per axis (dualhead/geometry.py INT16_MAX), so pos_y * pitch < 32767^2.
DP_HD int fwd_tiles(int pos_y, int pitch, int lpb) { return (pos_y * pitch + lpb - 1) / lpb; }

DP_HD FwdTile fwd_tile(int pos_y, int pitch, int tile, int lpb) {
    FwdTile t;
    const int n = pos_y * pitch;
    t.f0 = tile * lpb;
    t.f1 = t.f0 + lpb < n ? t.f0 + lpb : n;
    t.i_a = t.f0 / pitch;
    t.i_b = (t.f1 - 1) / pitch;
    return t;
}

// Where a block reads one (plane, r_z) step: address of LOR (i, j) with tap (r_y, q_y, q_z) is
// r_y * plane + (i - i_ref + q_y - y_ref) * pitch + (j + q_z - z_ref), i.e. base + offset.
// Staged: the cells the tile's LORs reach, `rows` x `cols` per residue plane r_y, in shared memory at
// rows `pitch` apart and planes `plane` apart; origin the cell (i_ref + y_ref, z_ref). Global:
// the polyphase plane itself (all refs 0).
struct Window {
    int i_ref, y_ref, z_ref;
    int rows, cols, pitch, plane;
};

// The staged window's plane stride (floats). The lanes of a warp's active round read at positions
// f - i_a pitch < (pitch - 1) + min(lpb, f1 - f0 + 31) (padding and lanes past the tile included,
// their sums unused), plus a tap's (q_y - y_ref) pitch + (q_z - z_ref) <= sy_max pitch + pitch - 1: so
// every read of residue plane r_y stays below the next plane, and the last one below D * plane.
DP_HD int fwd_plane_stride(int pos_y, int pitch, int sy_max, int lpb) {
    const int run = pos_y * pitch + 31 < lpb ? pos_y * pitch + 31 : lpb;
    return run + (sy_max + 2) * pitch;
}

// The staged window's floats (all D residue planes r_y), for any tile and plane of the class.
DP_HD int64_t fwd_window_bound(int pos_y, int pitch, int D, int sy_max, int lpb) {
    return int64_t(D) * fwd_plane_stride(pos_y, pitch, sy_max, lpb);
}

DP_HD Window fwd_window(const FwdTile& t, const Box& sb, int pos_z, int pitch, int plane) {
    Window w;
    w.i_ref = t.i_a;
    w.y_ref = sb.y_lo;
    w.z_ref = sb.z_lo;
    w.rows = (t.i_b - t.i_a) + (sb.y_hi - sb.y_lo) + 1;
    w.cols = pos_z + (sb.z_hi - sb.z_lo);   // the columns LORs j < pos_z reach (<= pitch)
    w.pitch = pitch;
    w.plane = plane;
    return w;
}

DP_HD Window fwd_global_window(const Layout& L) {
    Window w;
    w.i_ref = w.y_ref = w.z_ref = 0;
    w.rows = L.n_y;
    w.cols = L.n_z;
    w.pitch = L.n_z;
    w.plane = L.D * L.n_y * L.n_z;   // stride between residue planes r_y (X is [p][r_y][r_z][c_y][c_z])
    return w;
}

// Offset of a tap within the window (r_y, q_y, q_z are the signed values).
DP_HD int fwd_tap_offset(const Window& w, int ry, int qy, int qz) {
    return ry * w.plane + (qy - w.y_ref) * w.pitch + (qz - w.z_ref);
}

DP_HD int fwd_lor_base(const Window& w, int i, int j) { return (i - w.i_ref) * w.pitch + j; }

// --- back projection -------------------------------------------------------------------------------
// A warp owns one unit of an image plane: kBackRounds warp tiles of 4 x 8 cells stacked in y, i.e.
// kUnitRows = 16 cell rows x kTileZ = 8 cell columns (units row-major over the plane, clipped at the
// image's edge). Lane l holds cell (4 r + l / 8, l % 8) of the unit in round r. Each warp walks the
// (class, sign) steps that reach its unit on its own: no barrier couples it to other warps.
constexpr int kUnitRows = kTileY * kBackRounds;

struct BackUnits {
    int n_uy, n_uz, n_units;
};

DP_HD BackUnits back_units(int n_y, int n_z) {
    BackUnits g;
    g.n_uy = (n_y + kUnitRows - 1) / kUnitRows;
    g.n_uz = (n_z + kTileZ - 1) / kTileZ;
    g.n_units = g.n_uy * g.n_uz;
    return g;
}

// The cells of unit u (clipped to the image).
struct BackUnit {
    int cy_a, cy_b, cz_a, cz_b;
};

DP_HD BackUnit back_unit(const BackUnits& g, int n_y, int n_z, int u) {
    BackUnit U;
    const int uy = u / g.n_uz, uz = u - uy * g.n_uz;
    U.cy_a = kUnitRows * uy;
    U.cz_a = kTileZ * uz;
    U.cy_b = U.cy_a + kUnitRows - 1 < n_y - 1 ? U.cy_a + kUnitRows - 1 : n_y - 1;
    U.cz_b = U.cz_a + kTileZ - 1 < n_z - 1 ? U.cz_a + kTileZ - 1 : n_z - 1;
    return U;
}

// The cells a signed orientation's LORs reach at one plane: c = (i, j) + q, i < pos_y, j < pos_z.
DP_HD bool back_reaches(const Box& sb, int pos_y, int pos_z, int cy_a, int cy_b, int cz_a, int cz_b) {
    return cy_b >= sb.y_lo && cy_a <= pos_y - 1 + sb.y_hi && cz_b >= sb.z_lo && cz_a <= pos_z - 1 + sb.z_hi;
}

// The LOR values one back step stages for a unit: LORs (i, j) = (i_org + row, j_org + col); zero outside
// the orientation's positions. Cell (cy, cz) with tap q reads row (cy - cy_a) + (y_hi - q_y), column
// (cz - cz_a) + (z_hi - q_z). The window always spans the full unit (16 + box rows, 8 + box columns),
// so that the lanes of clipped cells at the image's edge read inside it too (their sums are dropped).
// pitch = 8 mod 16: the four rows of a warp tile (8 words each) fall in four distinct bank octets.
struct LorWindow {
    int i_org, j_org, rows, cols, pitch;
};

DP_HD LorWindow back_window(const BackUnit& U, const Box& sb) {
    LorWindow w;
    w.i_org = U.cy_a - sb.y_hi;
    w.j_org = U.cz_a - sb.z_hi;
    w.rows = kUnitRows + (sb.y_hi - sb.y_lo);
    w.cols = kTileZ + (sb.z_hi - sb.z_lo);
    w.pitch = w.cols + ((8 - w.cols % 16) + 16) % 16;
    return w;
}

// Upper bound of a class's staged LOR window (floats) for any unit and plane (boxes span at most
// sy_max x sz_max cells; +15: the pitch rounding).
DP_HD int64_t back_window_bound(int sy_max, int sz_max) {
    return int64_t(kUnitRows + sy_max) * (kTileZ + sz_max + 15);
}

// Offset of the LOR value that cell offset (q_y, q_z) (signed) brings to a cell, relative to the cell's base.
DP_HD int back_tap_offset(const LorWindow& w, const Box& sb, int qy, int qz) {
    return (sb.y_hi - qy) * w.pitch + (sb.z_hi - qz);
}

// Window offset of lane's cell in round r, relative to the unit's first cell.
DP_HD int back_cell_base(const LorWindow& w, int r, int lane) {
    return (kTileY * r + lane / kTileZ) * w.pitch + lane % kTileZ;
}

}  // namespace dp::dualhead::tiles
