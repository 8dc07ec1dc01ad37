// FIRST Super-LOR projectors: the per-element math, written once for the OpenMP and CUDA backends.
//
// Geometry (src/directpet/first/geometry.py has the full statement): image (nz, n, n) [z][y][x];
// sinogram [a][r1][r2][rho] with n_rows x n_rows row pairs and n radial bins; tube sample (i, j, k)
// of LOR (a, r1, r2, rho) lies at continuous voxel coordinates
//   fx = c + (i - c) cos(phi) - (rho + j - c) sin(phi),   fy = c + (i - c) sin(phi) + (rho + j - c) cos(phi),
//   fz = kc + k + u(i),   u(i) = (i - c) * slope_delta,   kc = r1 + r2,   c = (n - 1) / 2.
// In-plane a sample takes the voxels its lattice cell overlaps, weighted by the overlap area (the
// footprint below); axially the slices by linear interpolation (zero outside). Every LOR of one
// angle samples the same in-plane lattice (i, row = rho + j), so the in-plane and axial parts separate:
// the axial interpolation of the 2K+1 axial samples folds into 2K+2 slice taps per (delta, i),
//   Q[t] = (1 - f) P[t - K] + f P[t - 1 - K],  slice = kc + base - K + t,  base = floor(u), f = u - base,
// which the matched and fast projectors use (both are exact transposes of that forward model).
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/hd.hpp"

namespace dp::first {

// The paper's tube: 2J+1 = 5 radial by 2K+1 = 3 axial samples (the fast projectors support only this
// one; the faithful back projection has a compile-time path for it).
constexpr int kPaperJ = 2, kPaperK = 1;

// Sizes shared by every kernel.
struct Dims {
    int n;        // radial bins = image width = samples along a LOR
    int nz;       // slices (2 n_rows - 1)
    int n_rows;   // crystal rows per head
    int J, K;     // tube half-widths: 2J+1 radial and 2K+1 axial samples
    int n_super;  // Super-LOR tables

    DP_HD int n_deltas() const { return 2 * n_rows - 1; }
    DP_HD int n_j() const { return 2 * J + 1; }
    DP_HD int n_k() const { return 2 * K + 1; }
    DP_HD int n_taps() const { return 2 * K + 2; }        // folded slice taps per (delta, i, j)
    DP_HD int n_rows_ext() const { return n + 2 * J; }    // lattice rows rho + j, shifted by +J
    DP_HD float centre() const { return 0.5f * static_cast<float>(n - 1); }
    DP_HD int64_t image_size() const { return static_cast<int64_t>(nz) * n * n; }
};

// One sinogram LOR row (a ring difference and an axial position).
struct RowPair {
    int r1, r2;
};

// (delta, m) -> (r1, r2): m = min(r1, r2) in [0, n_rows - |delta|).
DP_HD RowPair row_pair(int delta, int m) {
    return delta >= 0 ? RowPair{m, m + delta} : RowPair{m - delta, m};
}

// Two-tap linear interpolation of a continuous index: taps i0 and i0 + 1.
struct Taps {
    int i0;
    float w0, w1;
};

DP_HD Taps linear_taps(float f) {
    const float f0 = floorf(f);
    const float w1 = f - f0;
    return {static_cast<int>(f0), 1.0f - w1, w1};
}

// Continuous voxel coordinates (fx, fy) of in-plane lattice point (i along, row = rho + j radial)
// (double on the host, where the footprint tables are built).
template <typename T>
DP_HD void lattice_point(int i, int row, T c, T cphi, T sphi, T* fx, T* fy) {
    const T di = static_cast<T>(i) - c;
    const T dr = static_cast<T>(row) - c;
    *fx = c + di * cphi - dr * sphi;
    *fy = c + di * sphi + dr * cphi;
}

// The inverse: a voxel's along and radial lattice coordinates (i_f, row_f).
DP_HD void voxel_lattice_coords(int ix, int iy, float c, float cphi, float sphi, float* i_f, float* row_f) {
    const float dx = static_cast<float>(ix) - c;
    const float dy = static_cast<float>(iy) - c;
    *i_f = c + dx * cphi + dy * sphi;
    *row_f = c - dx * sphi + dy * cphi;
}

// Axial position of along-sample i relative to the LOR centre slice: base slice offset and fraction.
DP_HD Taps axial_taps(int i, float c, float slope) {
    return linear_taps((static_cast<float>(i) - c) * slope);
}

// ---------------------------------------------------------------------------------------------
// In-plane footprint. The tube's in-plane samples (i, row) form a lattice of unit cells turned by
// phi, one voxel apart along and across the LOR. A lattice point stands for its cell and takes from
// voxel (ix, iy) the overlap area of the voxel's unit square and the cell's turned unit square. The
// cells tile the plane, so every voxel gives away its whole value at every angle (a single voxel
// projects the same in-plane total at every angle); the voxels tile the plane, so a uniform image
// is read as uniform. (Bilinear reads at the lattice points keep only the second property: a voxel
// on the rotation centre is read with total weight 1 at 0 degrees and 1.34 at 45 degrees.)
//
// A voxel and a cell overlap only when their centres are less than
// footprint_reach = 1/2 + (|cos phi| + |sin phi|) / 2 apart along each image axis and along each
// lattice axis, so a lattice point meets at most 3 x 3 voxels, from its origin (ix0, iy0) on. The
// weights of every lattice point of every angle are computed once, on the host in double precision
// (make_model), and read by every method and backend from the same table:
//   weight[cell * 9 + 3 * (iy - iy0) + (ix - ix0)],  origin[cell] = (ix0, iy0),
//   cell = (a * n + i) * n_rows_ext + (row + J)   (a: the angle's index in the full sinogram).
constexpr int kFootprintSide = 3;
constexpr int kFootprintSlots = kFootprintSide * kFootprintSide;

struct FootprintOrigin {
    int16_t ix0, iy0;
};

struct Footprints {
    const float* weight;              // (n_angles, n, n_rows_ext, 9)
    const FootprintOrigin* origin;    // (n_angles, n, n_rows_ext)
    DP_HD int64_t cell(const Dims& D, int a, int i, int rr) const {
        return (static_cast<int64_t>(a) * D.n + i) * D.n_rows_ext() + rr;
    }
};

template <typename T>
DP_HD T footprint_reach(T cphi, T sphi) {
    return T(0.5) + T(0.5) * ((cphi < 0 ? -cphi : cphi) + (sphi < 0 ? -sphi : sphi));
}

// The in-grid voxels of one lattice point as 9 fixed slots (plane offset, weight); slots outside the
// grid get weight 0 and offset 0, so that a read of every slot is always in bounds.
struct FootprintRead {
    int off[kFootprintSlots];
    float w[kFootprintSlots];
};

DP_HD FootprintRead footprint_at(const Dims& D, const Footprints& F, int a, int i, int rr) {
    const int64_t cell = F.cell(D, a, i, rr);
    const FootprintOrigin o = F.origin[cell];
    const float* w = F.weight + cell * kFootprintSlots;
    FootprintRead r;
    for (int oy = 0; oy < kFootprintSide; ++oy)
        for (int ox = 0; ox < kFootprintSide; ++ox) {
            const int x = o.ix0 + ox, y = o.iy0 + oy, slot = oy * kFootprintSide + ox;
            const bool in = x >= 0 && x < D.n && y >= 0 && y < D.n;
            r.off[slot] = in ? y * D.n + x : 0;
            r.w[slot] = in ? w[slot] : 0.0f;
        }
    return r;
}

// The footprint-weighted read of one image plane (n x n).
DP_HD float footprint_read(const float* plane, const FootprintRead& r) {
    float acc = 0.0f;
    for (int k = 0; k < kFootprintSlots; ++k) acc += r.w[k] * plane[r.off[k]];
    return acc;
}

// The transpose: calls f(i, row, w) for every lattice point (i in [0, n), row in [-J, n + J)) whose
// cell overlaps voxel (ix, iy), w > 0 being the table's weight. Candidates lie within reach of the
// voxel's lattice coordinates (0.01 of margin for their float rounding; the slot test against the
// stored origin decides, so the pairs and weights are exactly those of the forward reads).
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <typename F>
DP_HD void for_each_overlapping_lattice_point(const Dims& D, const Footprints& FP, int a, int ix, int iy, float cphi,
                                              float sphi, F&& f) {
    const float c = D.centre();
    float i_f, row_f;
    voxel_lattice_coords(ix, iy, c, cphi, sphi, &i_f, &row_f);
    const float reach = footprint_reach(cphi, sphi) + 0.01f;
    int i_lo = static_cast<int>(ceilf(i_f - reach)), i_hi = static_cast<int>(floorf(i_f + reach));
    int r_lo = static_cast<int>(ceilf(row_f - reach)), r_hi = static_cast<int>(floorf(row_f + reach));
    i_lo = i_lo > 0 ? i_lo : 0;
    i_hi = i_hi < D.n - 1 ? i_hi : D.n - 1;
    r_lo = r_lo > -D.J ? r_lo : -D.J;
    r_hi = r_hi < D.n - 1 + D.J ? r_hi : D.n - 1 + D.J;
    for (int i = i_lo; i <= i_hi; ++i)
        for (int row = r_lo; row <= r_hi; ++row) {
            const int64_t cell = FP.cell(D, a, i, row + D.J);
            const FootprintOrigin o = FP.origin[cell];
            const int ox = ix - o.ix0, oy = iy - o.iy0;
            if (ox < 0 || ox >= kFootprintSide || oy < 0 || oy >= kFootprintSide) continue;
            const float w = FP.weight[cell * kFootprintSlots + oy * kFootprintSide + ox];
            if (w != 0.0f) f(i, row, w);
        }
}

// Folded slice taps Q[0..2K+1] of one (delta, i, j) from the tube's axial samples P[0..2K] and the
// fraction f of the axial position (see the header comment).
DP_HD void fold_axial(const float* P, int K, float f, float* Q) {
    for (int t = 0; t < 2 * K + 2; ++t) {
        const float lo = t <= 2 * K ? P[t] : 0.0f;        // sample k = t - K at slice base - K + t
        const float hi = t >= 1 ? P[t - 1] : 0.0f;        // sample k = t - 1 - K, carried up by f
        Q[t] = (1.0f - f) * lo + f * hi;
    }
}

// Folded-tap tables: Q[delta][i][jj][t] (delta index d = delta + n_rows - 1) and base[d][i].
DP_HD int64_t q_index(const Dims& D, int d, int i, int jj, int t) {
    return ((static_cast<int64_t>(d) * D.n + i) * D.n_j() + jj) * D.n_taps() + t;
}

// Super-LOR table value P_S[i][jj][kk] (kk = k + K).
DP_HD int64_t table_index(const Dims& D, int S, int i, int jj, int kk) {
    return ((static_cast<int64_t>(S) * D.n + i) * D.n_j() + jj) * D.n_k() + kk;
}

// Sinogram bin of (local angle al, r1, r2, rho).
DP_HD int64_t sino_index(const Dims& D, int al, int r1, int r2, int rho) {
    return ((static_cast<int64_t>(al) * D.n_rows + r1) * D.n_rows + r2) * D.n + rho;
}

// ---------------------------------------------------------------------------------------------
// Matched forward projection of one LOR (angle a of the full sinogram): sum over along samples i and
// radial offsets j of the footprint-weighted reads of each of the 2K+2 slices the folded taps touch.
// `image` is (nz, n, n).
DP_HD float lor_forward_matched(const Dims& D, const Footprints& FP, const float* image, const float* Q, const int* base,
                                int d, int kc, int rho, int a) {
    const int nn = D.n;
    const int64_t plane = static_cast<int64_t>(nn) * nn;
    float acc = 0.0f;
    for (int i = 0; i < nn; ++i) {
        const int z0 = kc + base[static_cast<int64_t>(d) * nn + i] - D.K;
        for (int jj = 0; jj < D.n_j(); ++jj) {
            const FootprintRead r = footprint_at(D, FP, a, i, rho + jj);
            const float* q = Q + q_index(D, d, i, jj, 0);
            for (int t = 0; t < D.n_taps(); ++t) {
                const int z = z0 + t;
                if (z < 0 || z >= D.nz || q[t] == 0.0f) continue;
                acc += q[t] * footprint_read(image + z * plane, r);
            }
        }
    }
    return acc;
}

// Matched back projection of one voxel: the exact transpose of lor_forward_matched, gathered.
// For every lattice point whose cell overlaps the voxel, every ring difference and every folded tap t, the
// one LOR (kc = iz - base + K - t, of the ring difference's parity) and the 2J+1 radial bins
// rho = row - j that read this voxel through that sample are visited. `sino` is
// (n_angles_sel, n_rows, n_rows, n), al the local angle and a its index in the full sinogram.
DP_HD float voxel_back_matched(const Dims& D, const Footprints& FP, const float* sino, const float* Q, const int* base,
                               int al, int a, int ix, int iy, int iz, float cphi, float sphi) {
    float acc = 0.0f;
    for_each_overlapping_lattice_point(D, FP, a, ix, iy, cphi, sphi, [&](int i, int row, float w_xy) {
        for (int d = 0; d < D.n_deltas(); ++d) {
            const int delta = d - (D.n_rows - 1);
            const int ad = delta < 0 ? -delta : delta;
            const int kc0 = iz - base[static_cast<int64_t>(d) * D.n + i] + D.K;   // kc of tap t = 0
            for (int t = 0; t < D.n_taps(); ++t) {
                const int kc = kc0 - t;
                if (((kc - ad) & 1) || kc < ad || kc > 2 * (D.n_rows - 1) - ad) continue;
                const RowPair rp = row_pair(delta, (kc - ad) >> 1);
                const float* y = sino + sino_index(D, al, rp.r1, rp.r2, 0);
                for (int jj = 0; jj < D.n_j(); ++jj) {
                    const int rho = row - (jj - D.J);
                    if (rho < 0 || rho >= D.n) continue;
                    acc += w_xy * Q[q_index(D, d, i, jj, t)] * y[rho];
                }
            }
        }
    });
    return acc;
}

// Super-LOR table read linearly in i (zero outside [0, n)): the faithful back projector's tube value
// at a voxel's fractional along position. `table` is [S][i][(j, k)] (host memory on the CPU, shared
// memory on the GPU).
struct TableLerp {
    const float* table;
    int n, nj, nk;
    DP_HD float operator()(int S, float i_f, int jj, int kk) const {
        const Taps t = linear_taps(i_f);
        const int njk = nj * nk;
        const float* col = table + static_cast<int64_t>(S) * n * njk + jj * nk + kk;
        float p = 0.0f;
        if (t.i0 >= 0 && t.i0 < n) p += t.w0 * col[static_cast<int64_t>(t.i0) * njk];
        if (t.i0 + 1 >= 0 && t.i0 + 1 < n) p += t.w1 * col[static_cast<int64_t>(t.i0 + 1) * njk];
        return p;
    }
};

// ---------------------------------------------------------------------------------------------
// The ring differences of the faithful back projector in groups of one (Super-LOR, k-mirror), visited
// group by group (a texture-read table then stays on the same layer).
struct DeltaGroups {
    const int* delta_order;          // ring-difference indices d, group by group
    const int* group_start;          // (n_groups + 1,) offsets into delta_order
    const int* group_super;          // (n_groups,) Super-LOR of the group
    const unsigned char* group_flip; // (n_groups,) read the table at -k
    int n_groups;
};

// The paper's back projection of one voxel for one angle (not a transpose): for every ring
// difference and tube offset (j, k), the LOR whose sample (j, k) passes through the voxel is read
// at the voxel's own continuous (radial, axial) sinogram coordinates by bilinear interpolation,
// and weighted by the tube at the voxel's along position (linear in i). The sum is halved (the
// axial LOR density of one ring difference: LORs two slices apart, reads one slice apart).
// `read_corr(d, rho_f, m_f, &ratio, &factor)` interpolates the sinogram layer of ring difference d
// at continuous (rho, m) — a texture on the GPU, software on the CPU; `read_prob(S, i_f, jj, kk)`
// the Super-LOR table linearly in i. Reads whose bilinear footprint lies wholly outside the ring
// difference's LORs (m_f <= -1 or m_f >= n_rows - |delta|) are skipped: they are zero.
// (m_f of k is m_f(k = 0) - k / 2.)
// Adds to *corr and *sens.
// NJ, NK: the tube's radial and axial sample counts when known at compile time (the GPU then
// unrolls the inner loops and keeps all of a ring difference's texture reads in flight), 0 for the
// run-time D.n_j(), D.n_k(). With them and a reader whose kPairs is true, the radial offsets are read
// two at a time: `read_corr.pair(d, rho_f, m_f, &r0, &f0, &r1, &f1)` interpolates at rho_f and
// rho_f + 1 with the same weights (the reads of j and j - 1), so a ring difference takes
// (J + 1)(2K + 1) reads, not (2J + 1)(2K + 1) (on the GPU, without the sensitivity: one texel holds
// the ratios of two neighbouring bins; the offset left over is read alone, `read_corr(...)`). Readers
// without pairs set kPairs = false.
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <int NJ = 0, int NK = 0, typename ReadCorr, typename ReadProb>
DP_HD void voxel_back_faithful(const Dims& D, const DeltaGroups& groups, const float* slope, int ix, int iy, int iz,
                               float cphi, float sphi, const ReadCorr& read_corr, const ReadProb& read_prob,
                               float* corr, float* sens) {
    const float c = D.centre();
    float i_f, row_f;
    voxel_lattice_coords(ix, iy, c, cphi, sphi, &i_f, &row_f);
    if (i_f <= -1.0f || i_f >= static_cast<float>(D.n)) return;      // beyond every tube's along extent
    float acc_c = 0.0f, acc_s = 0.0f;
    // Ring difference outermost: a voxel's reads of one ring difference fall in one sinogram layer
    // within a few bins of each other, which keeps the texture cache warm.
    const int nj = NJ > 0 ? NJ : D.n_j(), nk = NK > 0 ? NK : D.n_k();
    const int J = (nj - 1) / 2, K = (nk - 1) / 2;
    const float half_k = 0.5f * static_cast<float>(K);
    for (int g = 0; g < groups.n_groups; ++g) {
        const int S = groups.group_super[g];
        const bool flip = groups.group_flip[g] != 0;
        // The tube value of (j, k) depends on the group (Super-LOR, mirror) and the voxel's along
        // position only, not on the ring difference: with the tube known at compile time it is read
        // once per group, at its first ring difference that the voxel reaches, and kept in registers
        // (read per ring difference, its two table loads and interpolation cost more instructions
        // than the sinogram read they weight, and the kernel is issue-bound). Same values, same sums.
        constexpr bool kHoisted = NJ > 0 && NK > 0;
        auto table_k = [&](int kk) { return flip ? nk - 1 - kk : kk; };   // the group's mirror in k
        float tube[kHoisted ? NK : 1][kHoisted ? NJ : 1];
        bool have_tube = false;
        for (int e = groups.group_start[g]; e < groups.group_start[g + 1]; ++e) {
            const int d = groups.delta_order[e];
            const int delta = d - (D.n_rows - 1);
            const int ad = delta < 0 ? -delta : delta;
            const float M = static_cast<float>(D.n_rows - ad);
            const float m0 = 0.5f * (static_cast<float>(iz) - (i_f - c) * slope[d] - static_cast<float>(ad));
            if (m0 + half_k <= -1.0f || m0 - half_k >= M) continue;     // no k reaches this ring difference
            if constexpr (kHoisted) {
                if (!have_tube) {
#ifdef __CUDACC__
#pragma unroll
#endif
                    for (int kk = 0; kk < NK; ++kk)
#ifdef __CUDACC__
#pragma unroll
#endif
                        for (int jj = 0; jj < NJ; ++jj) tube[kk][jj] = read_prob(S, i_f, jj, table_k(kk));
                    have_tube = true;
                }
            }
#ifdef __CUDACC__
#pragma unroll
#endif
            for (int kk = 0; kk < nk; ++kk) {
                const float m_f = m0 - 0.5f * static_cast<float>(kk - K);
                if (m_f <= -1.0f || m_f >= M) continue;
                if constexpr (kHoisted && ReadCorr::kPairs) {
                    // Two radial offsets per read: read_corr.pair interpolates at rho_f and rho_f + 1
                    // (the reads of jj and jj - 1) with the same weights; the last offset (jj = 0) alone.
#ifdef __CUDACC__
#pragma unroll
#endif
                    for (int jj = NJ - 1; jj >= 0; jj -= 2) {
                        const float rho_f = row_f - static_cast<float>(jj - J);
                        float r0, f0, r1, f1;
                        if (jj >= 1)
                            read_corr.pair(d, rho_f, m_f, &r0, &f0, &r1, &f1);
                        else
                            read_corr(d, rho_f, m_f, &r0, &f0);
                        acc_c += tube[kk][jj] * r0;
                        acc_s += tube[kk][jj] * f0;
                        if (jj >= 1) {
                            acc_c += tube[kk][jj - 1] * r1;
                            acc_s += tube[kk][jj - 1] * f1;
                        }
                    }
                } else {
#ifdef __CUDACC__
#pragma unroll
#endif
                    for (int jj = 0; jj < nj; ++jj) {
                        float p;
                        if constexpr (kHoisted) p = tube[kk][jj];
                        else p = read_prob(S, i_f, jj, table_k(kk));
                        float ratio, factor;
                        read_corr(d, row_f - static_cast<float>(jj - J), m_f, &ratio, &factor);
                        acc_c += p * ratio;
                        acc_s += p * factor;
                    }
                }
            }
        }
    }
    *corr += 0.5f * acc_c;
    *sens += 0.5f * acc_s;
}

}  // namespace dp::first
