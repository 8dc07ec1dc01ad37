// Dual-head patch projectors on the CPU: OpenMP loops around the addressing of layout.hpp.
//
// Memory layout. The image [v_z][v_y][p] has the plane fastest, so walking a patch (taps of one
// plane) reads one float per cache line. Both projectors therefore work on a plane-major copy
//     X[p][v_y][r_z][c_z] = image[D c_z + r_z, v_y, p]      (r_z = v_z mod D, c_z = v_z / D)
// (each (p, v_y, r_z) row padded by kTail zeros), in which the LOR at shift position (i, j) of a
// signed orientation reads tap t at
//     X[base_t + i * SI + j],   base_t = index of the voxel read by position (0, 0),  SI = D * D * row
// (moving c_uy by one moves v_y by D rows; moving c_uz by one moves c_z by one). A sign's LOR block
// (i-major, j fastest: the layout of layout.hpp) is thus a strided 2-D window of X per tap, read or
// written on contiguous floats, in blocks of kLanes (and a last block of kTail) positions; the padding
// keeps every block inside its row, so no masked loads or stores are needed.
//
// Forward: one class per work item. Per plane and sign, kRows rows x one block of positions are held
//   in registers while all the plane's taps are added in order (independent accumulator chains that
//   share each tap's weight and base); so each LOR sums (plane, tap) in order, whatever the threads.
//   With a skip mask, a sign whose mask is mostly zero is projected LOR by LOR in the same order (the
//   same bits), a sign without counts is not projected at all.
// Back: the transpose, scattered into a zeroed X. Work item = (plane p, group of v_y residues mod D):
//   taps of plane p write only plane p, and a tap's v_y residue is that of all rows it writes, so
//   items never share an output float (no atomics). Per LOR row pair, the y values stay in registers
//   while the taps scatter them. Each output float is summed by one thread in a fixed order (classes
//   in list order, signs, LOR rows, taps): the result does not depend on the thread count (nor on
//   the item split, which does). The classes are taken in chunks of about kBackChunkLors LORs (fixed
//   by the class list alone) whose y rows are first copied with zero padding.
//
// Measured on a Xeon (AVX-512) core, 32 x 24 crystals, D = 4, 59 planes, ~40 taps per (class, plane),
// 1.4e9 nonzeros, one thread: forward 0.16 s, back 0.23 s; the naive loop (one LOR at a time on the
// original layout, the same sums in the same order, the same bits) 2.1 s.
#include "cpu.hpp"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "../common/cpu_dispatch.hpp"

namespace dp::dualhead {

namespace {

int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// Shift positions j are processed in blocks of kLanes (and one block of kTail at a row's end);
// rows of X and of the accumulators are padded so that a block never leaves its row (no masked
// loads or stores; see the file comment). kRows rows of positions share each tap's weight and
// base (independent accumulator chains).
constexpr int kLanes = 16, kTail = 8, kRows = 2, kBackRows = 2;
// A sign's block is projected LOR by LOR when fewer than 1 / kSparseFraction of its LORs are kept
// (about where the two cost the same, measured: a kept LOR alone costs ~20 LORs of the block).
constexpr int64_t kSparseFraction = 16;
// LORs per class chunk of the back projection (4 MiB of y).
constexpr int64_t kBackChunkLors = int64_t(1) << 20;

int64_t padded(int64_t n) { return (n + kTail - 1) / kTail * kTail; }

// The plane-major image X (see the file comment); each (p, v_y, r_z) row holds n_z values and
// kTail of zero padding. The cell / residue tables avoid integer divisions in the tap loops.
struct PlaneMajor {
    int D, n_z, ny_img, n_planes;
    int64_t row;                       // padded row length
    std::vector<int> z_cell, z_res, y_res;   // v_z / D, v_z % D, v_y % D
    explicit PlaneMajor(const Layout& L)
        : D(L.D), n_z(L.n_z), ny_img(L.image_ny()), n_planes(L.n_planes), row(L.n_z + kTail) {
        for (int vz = 0; vz < L.image_nz(); ++vz) {
            z_cell.push_back(vz / D);
            z_res.push_back(vz % D);
        }
        for (int vy = 0; vy < ny_img; ++vy) y_res.push_back(vy % D);
    }
    int64_t index(int p, int vy, int vz) const {
        return ((int64_t(p) * ny_img + vy) * D + z_res[vz]) * row + z_cell[vz];
    }
    int64_t plane_size() const { return int64_t(ny_img) * D * row; }
    int64_t size() const { return plane_size() * n_planes; }
    int64_t row_stride() const { return int64_t(D) * D * row; }   // SI: one step of c_uy (D rows of v_y)
};

// A signed orientation of a class: its signs and the upper crystal of shift position (0, 0).
struct Sign {
    int s_y, s_z, cu_y, cu_z;
};

Sign sign_of(const ClassInfo& c, int s) {
    Sign g;
    class_sign(c, s, g.s_y, g.s_z);
    upper_crystal(c, g.s_y, g.s_z, 0, 0, g.cu_y, g.cu_z);
    return g;
}

// Index in X of the voxel read by tap (dy, dz) at plane p for shift position (0, 0) of sign g.
int64_t tap_base(const PlaneMajor& X, int D, const Sign& g, int p, int dy, int dz) {
    return X.index(p, tap_voxel(D, g.cu_y, g.s_y, dy), tap_voxel(D, g.cu_z, g.s_z, dz));
}

// R rows x W positions of accumulators (row stride wz) take taps [0, nt) in order:
// r[q][l] += w[t] * x0[base[t] + q SI + l].
template <int R, int W>
__attribute__((always_inline)) inline void forward_block(const float* __restrict__ x0, const int64_t* __restrict__ base,
                                                        const float* __restrict__ w, int64_t nt, int64_t SI,
                                                        float* __restrict__ acc, int64_t wz) {
    float r[R][W];
    for (int q = 0; q < R; ++q)
#pragma omp simd
        for (int l = 0; l < W; ++l) r[q][l] = acc[q * wz + l];
    for (int64_t t = 0; t < nt; ++t) {
        const float* __restrict__ a = x0 + base[t];
        const float wt = w[t];
        for (int q = 0; q < R; ++q)
#pragma omp simd
            for (int l = 0; l < W; ++l) r[q][l] += wt * a[q * SI + l];
    }
    for (int q = 0; q < R; ++q)
#pragma omp simd
        for (int l = 0; l < W; ++l) acc[q * wz + l] = r[q][l];
}

// Rows [i, i + R) of a sign's accumulators (all position blocks) for one plane's taps.
// (runtime-dispatched: the register blocks above are AVX-512 / AVX2 vectors where the CPU has them)
template <int R>
DP_CPU_CLONES void forward_rows(const float* x, const int64_t* base, const float* w, int64_t nt, int64_t SI, float* acc,
                  int64_t wz, int i) {
    const float* x0 = x + i * SI;
    float* a0 = acc + i * wz;
    int64_t j0 = 0;
    for (; j0 + kLanes <= wz; j0 += kLanes) forward_block<R, kLanes>(x0 + j0, base, w, nt, SI, a0 + j0, wz);
    if (j0 < wz) forward_block<R, kTail>(x0 + j0, base, w, nt, SI, a0 + j0, wz);
}

// image [v_z][v_y][p] -> X (padding zeroed); inside a parallel region.
void to_plane_major(const Layout& L, const PlaneMajor& X, const float* image, float* x) {
    const int ny = L.image_ny(), P = L.n_planes;
#pragma omp for schedule(static)
    for (int vy = 0; vy < ny; ++vy)
        for (int p = 0; p < P; ++p)
            for (int rz = 0; rz < L.D; ++rz) {
                float* dst = x + X.index(p, vy, rz);
                for (int cz = 0; cz < L.n_z; ++cz) dst[cz] = image[(int64_t(L.D * cz + rz) * ny + vy) * P + p];
                std::fill(dst + L.n_z, dst + X.row, 0.0f);
            }
}

// X -> image [v_z][v_y][p]; inside a parallel region.
void from_plane_major(const Layout& L, const PlaneMajor& X, const float* x, float* image) {
    const int ny = L.image_ny(), P = L.n_planes;
#pragma omp for schedule(static)
    for (int vz = 0; vz < L.image_nz(); ++vz)
        for (int vy = 0; vy < ny; ++vy) {
            float* dst = image + (int64_t(vz) * ny + vy) * P;
            const int64_t o = X.index(0, vy, vz), step = X.plane_size();
            for (int p = 0; p < P; ++p) dst[p] = x[o + p * step];
        }
}

enum class Mode { zero, dense, sparse };

// Per-thread scratch of the forward projection.
struct ForwardScratch {
    std::vector<float> acc;        // n_signs x pos_y x padded(pos_z)
    std::vector<int64_t> base;     // tap bases of a plane (dense) or of all planes (sparse), one sign
    std::vector<float> w;          // a plane's tap weights
};

// All signs of class k into y (the class's block); skip is the class's block of the mask or null.
void forward_class(const HostModel& M, const PlaneMajor& X, int k, const float* x, const float* skip, float* y,
                   ForwardScratch& S) {
    const Layout& L = M.L;
    const int D = L.D;
    const ClassInfo c = class_info(L, k);
    const int64_t n_pos = int64_t(c.pos_y) * c.pos_z, SI = X.row_stride(), wz = padded(c.pos_z);
    Sign g[4];
    Mode mode[4];
    int n_dense = 0;
    for (int s = 0; s < c.n_signs; ++s) {
        g[s] = sign_of(c, s);
        mode[s] = Mode::dense;
        if (skip) {
            const float* m = skip + s * n_pos;
            const int64_t kept = n_pos - std::count(m, m + n_pos, 0.0f);
            mode[s] = kept == 0 ? Mode::zero : kept * kSparseFraction < n_pos ? Mode::sparse : Mode::dense;
        }
        if (mode[s] == Mode::zero) std::fill(y + s * n_pos, y + (s + 1) * n_pos, 0.0f);
        n_dense += mode[s] == Mode::dense;
    }
    if (n_dense) {
        // Dense signs: per plane, each block of positions is loaded once into registers and takes all
        // the plane's taps in order, so each LOR still sums (p, t) in order.
        // rows of positions padded to a multiple of kRows (the extra rows read X past the last
        // position row, into the next rows or X's margin, and are dropped)
        const int rows = int((c.pos_y + kRows - 1) / kRows * kRows);
        S.acc.assign(size_t(c.n_signs) * rows * wz, 0.0f);
        for (int p = 0; p < L.n_planes; ++p) {
            const int64_t t0 = M.row_begin(k, p), nt = M.row_end(k, p) - t0;
            if (nt == 0) continue;
            S.w.assign(M.tap_w.begin() + t0, M.tap_w.begin() + t0 + nt);
            S.base.resize(size_t(nt));
            for (int s = 0; s < c.n_signs; ++s) {
                if (mode[s] != Mode::dense) continue;
                for (int64_t t = 0; t < nt; ++t) S.base[t] = tap_base(X, D, g[s], p, M.tap_dy[t0 + t], M.tap_dz[t0 + t]);
                float* acc = S.acc.data() + int64_t(s) * rows * wz;
                for (int i = 0; i < rows; i += kRows) forward_rows<kRows>(x, S.base.data(), S.w.data(), nt, SI, acc, wz, i);
            }
        }
        for (int s = 0; s < c.n_signs; ++s) {
            if (mode[s] != Mode::dense) continue;
            for (int i = 0; i < c.pos_y; ++i) {
                const float* src = S.acc.data() + (int64_t(s) * rows + i) * wz;
                float* dst = y + s * n_pos + int64_t(i) * c.pos_z;
                const float* m = skip ? skip + s * n_pos + int64_t(i) * c.pos_z : nullptr;
                for (int j = 0; j < c.pos_z; ++j) dst[j] = (m && m[j] == 0.0f) ? 0.0f : src[j];
            }
        }
    }
    for (int s = 0; s < c.n_signs; ++s) {
        if (mode[s] != Mode::sparse) continue;
        // all the class's taps (planes in order) for this sign, then one LOR at a time in that order
        const int64_t t0 = M.row_begin(k, 0), nt = M.row_end(k, L.n_planes - 1) - t0;
        S.base.resize(size_t(nt));
        for (int p = 0; p < L.n_planes; ++p)
            for (int64_t t = M.row_begin(k, p); t < M.row_end(k, p); ++t)
                S.base[t - t0] = tap_base(X, D, g[s], p, M.tap_dy[t], M.tap_dz[t]);
        const float* __restrict__ w = M.tap_w.data() + t0;
        const int64_t* __restrict__ base = S.base.data();
        for (int64_t l = s * n_pos; l < (s + 1) * n_pos; ++l) {
            if (skip[l] == 0.0f) {
                y[l] = 0.0f;
                continue;
            }
            const int64_t q = l - s * n_pos;
            const float* xl = x + (q / c.pos_z) * SI + q % c.pos_z;
            float acc = 0.0f;
            for (int64_t t = 0; t < nt; ++t) acc += w[t] * xl[base[t]];
            y[l] = acc;
        }
    }
}

// The y values of a chunk of classes with each row of shift positions padded with zeros to a
// multiple of kTail: block (a, s) row i starts at start[a] + (s * pos_y + i) * padded(pos_z).
struct PaddedY {
    std::vector<int64_t> start;
    std::vector<float> v;
};

void pad_rows(const Layout& L, const ClassList& C, int a0, int a1, PaddedY& Y) {
    if (Y.start.size() < C.index.size()) Y.start.resize(C.index.size());
    int64_t n = 0;
    for (int a = a0; a < a1; ++a) {
        const ClassInfo c = class_info(L, C.index[a]);
        Y.start[a] = n;
        n += int64_t(c.n_signs) * c.pos_y * padded(c.pos_z);
    }
    if (int64_t(Y.v.size()) < n) Y.v.resize(size_t(n));
}

// Fills Y (sized by pad_rows); inside a parallel region.
void fill_padded(const Layout& L, const ClassList& C, int a0, int a1, const float* y, PaddedY& Y) {
#pragma omp for schedule(dynamic, 4)
    for (int a = a0; a < a1; ++a) {
        const ClassInfo c = class_info(L, C.index[a]);
        const int64_t wz = padded(c.pos_z);
        for (int r = 0; r < c.n_signs * c.pos_y; ++r) {
            const float* src = y + C.offset[a] + int64_t(r) * c.pos_z;
            float* dst = Y.v.data() + Y.start[a] + r * wz;
            std::copy(src, src + c.pos_z, dst);
            std::fill(dst + c.pos_z, dst + wz, 0.0f);
        }
    }
}

// Rows q < R (strides SI in x, wz in v): x[base[t] + q SI + l] += w[t] * v[q wz + l] for the taps t in
// order, one block of W positions (v held in registers).
template <int R, int W>
__attribute__((always_inline)) inline void back_block(float* x, const int64_t* __restrict__ base,
                                                     const float* __restrict__ w, int64_t nt, const float* __restrict__ v,
                                                     int64_t SI, int64_t wz) {
    float r[R][W];
    for (int q = 0; q < R; ++q)
#pragma omp simd
        for (int l = 0; l < W; ++l) r[q][l] = v[q * wz + l];
    for (int64_t t = 0; t < nt; ++t) {
        float* b = x + base[t];
        const float wt = w[t];
        for (int q = 0; q < R; ++q)
#pragma omp simd
            for (int l = 0; l < W; ++l) b[q * SI + l] += wt * r[q][l];
    }
}

// (runtime-dispatched, as forward_rows)
template <int R>
DP_CPU_CLONES void back_rows_of(float* x, const int64_t* base, const float* w, int64_t nt, const float* v, int64_t SI,
                                int64_t wz) {
    int64_t j0 = 0;
    for (; j0 + kLanes <= wz; j0 += kLanes) back_block<R, kLanes>(x + j0, base, w, nt, v + j0, SI, wz);
    if (j0 < wz) back_block<R, kTail>(x + j0, base, w, nt, v + j0, SI, wz);
}

// Per-thread scratch of the back projection: one sign's taps of one plane that this item writes.
struct BackScratch {
    std::vector<int64_t> base;
    std::vector<float> w;
};

// Back projection of classes [a0, a1) of the list at plane p into the rows of x whose v_y mod D
// falls in residue group `group` of n_groups. Per LOR row i, the row's y values stay in registers
// while the taps scatter them (summation order per voxel: classes, signs, rows i, taps). The blocks
// run past a LOR row into its zero padding, adding exact zeros to the rest of the X row (owned by
// this item) or to the row's padding.
void back_rows(const HostModel& M, const ClassList& C, const PlaneMajor& X, int a0, int a1, int p, int group,
               int n_groups, const PaddedY& Y, float* x, BackScratch& S) {
    const Layout& L = M.L;
    const int D = L.D;
    const int64_t SI = X.row_stride();
    for (int a = a0; a < a1; ++a) {
        const int k = C.index[a];
        const ClassInfo c = class_info(L, k);
        const int64_t wz = padded(c.pos_z);
        for (int s = 0; s < c.n_signs; ++s) {
            const Sign g = sign_of(c, s);
            S.base.clear();
            S.w.clear();
            for (int64_t t = M.row_begin(k, p); t < M.row_end(k, p); ++t) {
                const int vy = tap_voxel(D, g.cu_y, g.s_y, M.tap_dy[t]);
                if (X.y_res[vy] * n_groups / D != group) continue;
                S.base.push_back(X.index(p, vy, tap_voxel(D, g.cu_z, g.s_z, M.tap_dz[t])));
                S.w.push_back(M.tap_w[t]);
            }
            const int64_t nt = int64_t(S.w.size());
            if (nt == 0) continue;
            const float* yb = Y.v.data() + Y.start[a] + int64_t(s) * c.pos_y * wz;
            int i = 0;
            for (; i + kBackRows <= c.pos_y; i += kBackRows)
                back_rows_of<kBackRows>(x + i * SI, S.base.data(), S.w.data(), nt, yb + i * wz, SI, wz);
            for (; i < c.pos_y; ++i) back_rows_of<1>(x + i * SI, S.base.data(), S.w.data(), nt, yb + i * wz, SI, wz);
        }
    }
}

}  // namespace

void forward_cpu(const HostModel& M, const ClassList& C, const float* image, const float* skip, float* y,
                 int threads) {
    const Layout& L = M.L;
    const PlaneMajor X(L);
    // filled by to_plane_major; a margin of kRows position rows for the padded accumulator rows
    std::unique_ptr<float[]> x(new float[size_t(X.size() + kRows * X.row_stride())]);
    std::fill(x.get() + X.size(), x.get() + X.size() + kRows * X.row_stride(), 0.0f);
    const int n_cls = int(C.index.size());
#pragma omp parallel num_threads(thread_count(threads))
    {
        to_plane_major(L, X, image, x.get());
        ForwardScratch S;
#pragma omp for schedule(dynamic, 1)
        for (int a = 0; a < n_cls; ++a)
            forward_class(M, X, C.index[a], x.get(), skip ? skip + C.offset[a] : nullptr, y + C.offset[a], S);
    }
}

void back_cpu(const HostModel& M, const ClassList& C, const float* y, float* image, int threads) {
    const Layout& L = M.L;
    const PlaneMajor X(L);
    std::unique_ptr<float[]> x(new float[size_t(X.size())]);   // zeroed below, by plane
    // class chunks: fixed by the list, so the summation order is too
    std::vector<int> chunk{0};
    const int n_cls = int(C.index.size());
    for (int a = 0; a < n_cls; ++a)
        if (a + 1 == n_cls || C.offset[a + 1] - C.offset[chunk.back()] >= kBackChunkLors) chunk.push_back(a + 1);
    // Items (plane, residue group): planes alone when there are enough of them for the threads.
    const int nt = thread_count(threads);
    int n_groups = 1;
    while (n_groups < L.D && L.n_planes * n_groups < 4 * nt) ++n_groups;
    const int n_items = L.n_planes * n_groups;
    PaddedY Y;
#pragma omp parallel num_threads(nt)
    {
        BackScratch S;
#pragma omp for schedule(static)
        for (int p = 0; p < L.n_planes; ++p)
            std::fill(x.get() + p * X.plane_size(), x.get() + (p + 1) * X.plane_size(), 0.0f);
        for (size_t h = 0; h + 1 < chunk.size(); ++h) {
#pragma omp single
            pad_rows(L, C, chunk[h], chunk[h + 1], Y);
            fill_padded(L, C, chunk[h], chunk[h + 1], y, Y);
#pragma omp for schedule(dynamic, 1)
            for (int item = 0; item < n_items; ++item)
                back_rows(M, C, X, chunk[h], chunk[h + 1], item / n_groups, item % n_groups, n_groups, Y, x.get(), S);
        }
        from_plane_major(L, X, x.get(), image);
    }
}

}  // namespace dp::dualhead
