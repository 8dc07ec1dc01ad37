// FIRST Super-LOR projectors on the CPU: OpenMP loops around tube.hpp.
//
// faithful / matched forward: one LOR at a time (lor_forward_matched: footprint reads in-plane, linear
//   interpolation in z in exact float arithmetic, so the two agree here; on the GPU "faithful" reads a
//   per-angle resampled lattice through the texture unit).
// matched back: one voxel at a time (voxel_back_matched, the exact transpose, gathered).
// faithful back: one voxel at a time (voxel_back_faithful with software bilinear reads; the paper's
//   tube with its compile-time loops, as on the GPU).
// fast: the factored form. Forward: per angle, resample the image once on the LOR lattice
//   (R[i][z][row], the footprint weights), then each LOR is a sum of folded slice taps over integer
//   offsets of R. Back: the transposed steps (G = taps^T y per angle, then the transposed resampling).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "../common/cpu_dispatch.hpp"
#include "../common/errors.hpp"
#include "model.hpp"

namespace dp::first {

namespace {

int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// --- direct (one LOR / one voxel at a time) ----------------------------------------------------
void forward_direct(const HostModel& M, const AngleList& A, const float* image, float* sino, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const int64_t rows = static_cast<int64_t>(n_sel) * D.n_rows * D.n_rows;
#pragma omp parallel for schedule(dynamic, 4) num_threads(thread_count(threads))
    for (int64_t q = 0; q < rows; ++q) {
        const int al = static_cast<int>(q / (D.n_rows * D.n_rows));
        const int r1 = static_cast<int>(q / D.n_rows % D.n_rows), r2 = static_cast<int>(q % D.n_rows);
        const int d = r2 - r1 + D.n_rows - 1;
        float* out = sino + sino_index(D, al, r1, r2, 0);
        for (int rho = 0; rho < D.n; ++rho)
            out[rho] = lor_forward_matched(D, M.footprints(), image, M.Q.data(), M.base.data(), d, r1 + r2, rho,
                                           A.index[al]);
    }
}

void back_matched(const HostModel& M, const AngleList& A, const float* sino, float* image, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
#pragma omp parallel for collapse(2) schedule(dynamic, 8) num_threads(thread_count(threads))
    for (int iz = 0; iz < D.nz; ++iz)
        for (int iy = 0; iy < D.n; ++iy)
            for (int ix = 0; ix < D.n; ++ix) {
                float acc = 0.0f;
                for (int al = 0; al < n_sel; ++al)
                    acc += voxel_back_matched(D, M.footprints(), sino, M.Q.data(), M.base.data(), al, A.index[al], ix, iy,
                                              iz, A.cos[al], A.sin[al]);
                image[(static_cast<int64_t>(iz) * D.n + iy) * D.n + ix] = acc;
            }
}

// Software stand-ins for the GPU's textures in the faithful back projector. kPairReads: offer pair()
// to voxel_back_faithful (two software reads), as the GPU's paired texels do without the sensitivity,
// so that the sums come in the GPU's order.
template <bool kPairReads>
struct SinogramLayerReader {
    const Dims* D;
    const float* sino;      // (n_sel, n_rows, n_rows, n)
    const float* factors;   // same shape, or nullptr for ones
    int al;
    void operator()(int d, float rho_f, float m_f, float* ratio, float* factor) const {
        const int delta = d - (D->n_rows - 1);
        const int M = D->n_rows - (delta < 0 ? -delta : delta);
        const Taps tr = linear_taps(rho_f), tm = linear_taps(m_f);
        float r = 0.0f, f = 0.0f;
        for (int dm = 0; dm < 2; ++dm) {
            const int m = tm.i0 + dm;
            if (m < 0 || m >= M) continue;
            const RowPair rp = row_pair(delta, m);
            const int64_t row = sino_index(*D, al, rp.r1, rp.r2, 0);
            const float wm = dm ? tm.w1 : tm.w0;
            for (int dr = 0; dr < 2; ++dr) {
                const int rho = tr.i0 + dr;
                if (rho < 0 || rho >= D->n) continue;
                const float w = wm * (dr ? tr.w1 : tr.w0);
                r += w * sino[row + rho];
                f += w * (factors ? factors[row + rho] : 1.0f);
            }
        }
        *ratio = r;
        *factor = f;
    }
    // The reads at rho_f and rho_f + 1 (voxel_back_faithful with the tube known at compile time).
    static constexpr bool kPairs = kPairReads;
    void pair(int d, float rho_f, float m_f, float* r0, float* f0, float* r1, float* f1) const {
        (*this)(d, rho_f, m_f, r0, f0);
        (*this)(d, rho_f + 1.0f, m_f, r1, f1);
    }
};

// --- fast (factored) -----------------------------------------------------------------------------
// Lattice buffers, row' = rho + j + J in [0, n + 2J): R (forward: one angle's resampled image,
// [i][z][row']) and G_i (back: the stencil's transpose for one along-sample i, [z][row'], then turned
// to GT [i][row'][z] for the gather). Their rows are padded to lattice_stride floats so that the
// register blocks below (kBlock radial positions, read or written at shifts 0..2J) stay inside their
// row; the padding of R holds zeros, that of G_i takes zeros.
//
// A register block is kBlock / 8 vectors of 8 floats (GCC's vector extension: one AVX2 register,
// two SSE registers in the baseline clone). Written as vectors, not as a float array under
// `omp simd`: GCC kept such an array in memory (a load and a store per multiply-add) once the
// weights' address changed with i. Each value sums in the order of the one-bin loops these replaced;
// the AVX2 / AVX-512 clones contract each multiply-add into an FMA, so the last bits depend on the clone.
constexpr int kVec = 8, kBlock = 64, kBlockVecs = kBlock / kVec;
typedef float Vec8 __attribute__((vector_size(kVec * sizeof(float))));

int radial_blocks(int width) { return (width + kBlock - 1) / kBlock; }

// The blocks of the widest row (n + 2J) plus the 2J shifts read past the last block.
int64_t lattice_stride(const Dims& D) {
    return static_cast<int64_t>(radial_blocks(D.n_rows_ext())) * kBlock + 2 * D.J;
}

// Where a sinogram row starts in its padded copy (y_pad, lattice_stride floats a row): after 2J zeros,
// which the back stencil reads at shifts -j.
int64_t y_pad_offset(const Dims& D) { return 2 * D.J; }

int64_t lattice_size(const Dims& D) { return static_cast<int64_t>(D.n) * D.nz * lattice_stride(D); }

// Columns [c0, c1) of a rows x cols array (rows src_stride apart) as contiguous runs:
// dst[c * rows + r] = src[r * src_stride + c].
void columns_to_runs(const float* src, int64_t rows, int64_t src_stride, int64_t c0, int64_t c1, float* dst) {
    for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = 0; r < rows; ++r) dst[c * rows + r] = src[r * src_stride + c];
}

// The image with z fastest, [y][x][z] (from [z][y][x]): a footprint's 3 x 3 voxel columns are then
// contiguous runs of nz floats. Inside a parallel region.
void to_z_fastest(const Dims& D, const float* image, float* columns) {
    const int64_t plane = static_cast<int64_t>(D.n) * D.n, chunk = 256;
#pragma omp for schedule(static)
    for (int64_t v = 0; v < plane; v += chunk)
        columns_to_runs(image, D.nz, plane, v, std::min(v + chunk, plane), columns);
}

// Lattice R of angle a from the z-fastest image: every lattice point reads its footprint's voxel
// columns for all slices at once (each value summed over the 9 slots in footprint_read's order);
// col: nz floats of scratch.
DP_CPU_CLONES void resample_angle(const HostModel& M, const float* columns, int a, float* R, float* col) {
    const Dims& D = M.D;
    const int64_t stride = lattice_stride(D);
    const int nz = D.nz;
    for (int i = 0; i < D.n; ++i)
        for (int rr = 0; rr < D.n_rows_ext(); ++rr) {
            const FootprintRead f = footprint_at(D, M.footprints(), a, i, rr);
            std::fill(col, col + nz, 0.0f);
            for (int k = 0; k < kFootprintSlots; ++k) {
                const float w = f.w[k];
                const float* src = columns + static_cast<int64_t>(f.off[k]) * nz;
#pragma omp simd
                for (int z = 0; z < nz; ++z) col[z] += w * src[z];
            }
            for (int z = 0; z < nz; ++z) R[(static_cast<int64_t>(i) * nz + z) * stride + rr] = col[z];
        }
}

// acc[v] += w * src[8 v .. 8 v + 8) for the kBlock floats from src (unaligned).
__attribute__((always_inline)) inline void add_scaled(Vec8* acc, float w, const float* src) {
#pragma GCC unroll 8
    for (int v = 0; v < kBlockVecs; ++v) {
        Vec8 x;
        std::memcpy(&x, src + v * kVec, sizeof x);
        acc[v] += w * x;
    }
}

// One LOR row (ring difference d, axial centre kc) from its angle's lattice R:
//     out[rho] = sum over i, t, j of Q[d][i][j][t] R[i][kc + base[d][i] - K + t][rho + j],
// each rho summed in that order (i, t, j), kBlock radial positions at a time in registers.
DP_CPU_CLONES void stencil_forward_row(const Dims& D, const float* Q, const int* base, const float* R, int d, int kc,
                                       float* out) {
    const int64_t stride = lattice_stride(D);
    const int nj = D.n_j(), ntaps = D.n_taps();
    for (int rho0 = 0; rho0 < D.n; rho0 += kBlock) {
        Vec8 acc[kBlockVecs] = {};
        for (int i = 0; i < D.n; ++i) {
            const int z0 = kc + base[static_cast<int64_t>(d) * D.n + i] - D.K;
            const float* Qi = Q + q_index(D, d, i, 0, 0);
            for (int t = 0; t < ntaps; ++t) {
                const int z = z0 + t;
                if (z < 0 || z >= D.nz) continue;
                const float* row = R + (static_cast<int64_t>(i) * D.nz + z) * stride + rho0;
                for (int jj = 0; jj < nj; ++jj) add_scaled(acc, Qi[jj * ntaps + t], row + jj);
            }
        }
        float sums[kBlock];
        std::memcpy(sums, acc, sizeof sums);
        std::copy(sums, sums + std::min(kBlock, D.n - rho0), out + rho0);
    }
}

// The transpose for one along-sample i of one angle: G_i[z][row'] = sum over the LOR rows
// (r1, r2), the taps t reaching z and j of Q[d][i][j][t] y[r1][r2][row' - j], from the angle's
// sinogram rows padded by 2J zeros on the left (y_pad[row][2J + rho] = y[row][rho], zeros elsewhere).
// Each G value sums in the order (r1, r2, t, j), kBlock values at a time in registers.
DP_CPU_CLONES void stencil_back_sample(const Dims& D, const float* Q, const int* base, const float* y_pad, int i,
                                       float* Gi) {
    const int64_t stride = lattice_stride(D);
    const int nj = D.n_j(), ntaps = D.n_taps(), n_blocks = radial_blocks(D.n_rows_ext());
    std::fill(Gi, Gi + D.nz * stride, 0.0f);
    for (int r1 = 0; r1 < D.n_rows; ++r1)
        for (int r2 = 0; r2 < D.n_rows; ++r2) {
            const int d = r2 - r1 + D.n_rows - 1;
            const float* y = y_pad + (static_cast<int64_t>(r1) * D.n_rows + r2) * stride + y_pad_offset(D);
            const int z0 = r1 + r2 + base[static_cast<int64_t>(d) * D.n + i] - D.K;
            const float* Qi = Q + q_index(D, d, i, 0, 0);
            for (int t = 0; t < ntaps; ++t) {
                const int z = z0 + t;
                if (z < 0 || z >= D.nz) continue;
                for (int blk = 0; blk < n_blocks; ++blk) {
                    float* g = Gi + z * stride + blk * kBlock;
                    Vec8 acc[kBlockVecs];
                    std::memcpy(acc, g, sizeof acc);
                    for (int jj = 0; jj < nj; ++jj) add_scaled(acc, Qi[jj * ntaps + t], y + blk * kBlock - jj);
                    std::memcpy(g, acc, sizeof acc);
                }
            }
        }
}


// Voxel column (ix, iy) += the transposed resampling of angles [a0, a0 + na) of the list: for every
// lattice point whose cell overlaps the voxel, its weight times that point's transposed lattice column
// (GT: per angle, [i][row'][z]), all slices at once, the points and angles in the order of
// for_each_overlapping_lattice_point; col: nz floats of scratch.
DP_CPU_CLONES void unresample_column(const HostModel& M, const AngleList& A, int a0, int na, const float* GT, int ix,
                                     int iy, float* col, float* image) {
    const Dims& D = M.D;
    const int nz = D.nz;
    const int64_t plane = static_cast<int64_t>(D.n) * D.n, LT = static_cast<int64_t>(D.n) * D.n_rows_ext() * nz;
    float* voxel = image + static_cast<int64_t>(iy) * D.n + ix;
    for (int z = 0; z < nz; ++z) col[z] = voxel[z * plane];
    for (int q = 0; q < na; ++q) {
        const float* GTq = GT + q * LT;
        for_each_overlapping_lattice_point(D, M.footprints(), A.index[a0 + q], ix, iy, A.cos[a0 + q], A.sin[a0 + q],
                                           [&](int i, int row, float w) {
            const float* g = GTq + (static_cast<int64_t>(i) * D.n_rows_ext() + row + D.J) * nz;
#pragma omp simd
            for (int z = 0; z < nz; ++z) col[z] += w * g[z];
        });
    }
    for (int z = 0; z < nz; ++z) voxel[z * plane] = col[z];
}

void forward_fast(const HostModel& M, const AngleList& A, const float* image, float* sino, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const int64_t L = lattice_size(D);
    const int nt = thread_count(threads);
    const int chunk = std::max(1, std::min(n_sel, nt));
    std::vector<float> R(static_cast<size_t>(chunk) * L, 0.0f);   // the rows' padding stays zero
    std::unique_ptr<float[]> columns(new float[static_cast<size_t>(D.image_size())]);   // filled below
#pragma omp parallel num_threads(nt)
    to_z_fastest(D, image, columns.get());
    for (int a0 = 0; a0 < n_sel; a0 += chunk) {
        const int na = std::min(chunk, n_sel - a0);
#pragma omp parallel num_threads(nt)
        {
            std::vector<float> col(static_cast<size_t>(D.nz));
#pragma omp for schedule(static)
            for (int q = 0; q < na; ++q)
                resample_angle(M, columns.get(), A.index[a0 + q], R.data() + q * L, col.data());
#pragma omp for collapse(3) schedule(dynamic, 2)
            for (int q = 0; q < na; ++q)
                for (int r1 = 0; r1 < D.n_rows; ++r1)
                    for (int r2 = 0; r2 < D.n_rows; ++r2)
                        stencil_forward_row(D, M.Q.data(), M.base.data(), R.data() + q * L, r2 - r1 + D.n_rows - 1,
                                            r1 + r2, sino + sino_index(D, a0 + q, r1, r2, 0));
        }
    }
}

void back_fast(const HostModel& M, const AngleList& A, const float* sino, float* image, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const int64_t stride = lattice_stride(D), rows = static_cast<int64_t>(D.n_rows) * D.n_rows;
    const int nt = thread_count(threads);
    const int chunk = std::max(1, std::min(n_sel, nt));
    // per angle, the stencil's transpose G transposed to [i][row'][z] for the gather
    const int64_t LT = static_cast<int64_t>(D.n) * D.n_rows_ext() * D.nz;
    std::vector<float> GT(static_cast<size_t>(chunk) * LT);
    std::vector<float> y_pad(static_cast<size_t>(chunk * rows * stride), 0.0f);   // the padding stays zero
    std::fill(image, image + D.image_size(), 0.0f);
    for (int a0 = 0; a0 < n_sel; a0 += chunk) {
        const int na = std::min(chunk, n_sel - a0);
#pragma omp parallel num_threads(nt)
        {
            std::vector<float> col(static_cast<size_t>(D.nz)), Gi(static_cast<size_t>(D.nz * stride));
#pragma omp for collapse(2) schedule(static)
            for (int q = 0; q < na; ++q)
                for (int64_t r = 0; r < rows; ++r) {
                    const float* src = sino + sino_index(D, a0 + q, 0, 0, 0) + r * D.n;
                    std::copy(src, src + D.n, y_pad.data() + (q * rows + r) * stride + y_pad_offset(D));
                }
            // G_i[z][row'] = sum over LORs of the folded taps times y (the transpose of the stencil).
#pragma omp for collapse(2) schedule(dynamic, 4)
            for (int q = 0; q < na; ++q)
                for (int i = 0; i < D.n; ++i) {
                    stencil_back_sample(D, M.Q.data(), M.base.data(), y_pad.data() + q * rows * stride, i, Gi.data());
                    columns_to_runs(Gi.data(), D.nz, stride, 0, D.n_rows_ext(),
                                    GT.data() + q * LT + static_cast<int64_t>(i) * D.n_rows_ext() * D.nz);
                }
            // image += the transposed resampling, gathered per voxel column.
#pragma omp for schedule(dynamic, 4)
            for (int iy = 0; iy < D.n; ++iy)
                for (int ix = 0; ix < D.n; ++ix) unresample_column(M, A, a0, na, GT.data(), ix, iy, col.data(), image);
        }
    }
}

}  // namespace

void forward_cpu(Method method, const HostModel& M, const AngleList& A, const float* image, float* sino, int threads) {
    if (method == Method::Fast)
        forward_fast(M, A, image, sino, threads);
    else
        forward_direct(M, A, image, sino, threads);
}

void back_cpu(Method method, const HostModel& M, const AngleList& A, const float* sino, float* image, int threads) {
    switch (method) {
        case Method::Fast: back_fast(M, A, sino, image, threads); break;
        case Method::Matched: back_matched(M, A, sino, image, threads); break;
        case Method::Faithful: back_faithful_cpu(M, A, sino, nullptr, image, nullptr, threads); break;
    }
}

void back_faithful_cpu(const HostModel& M, const AngleList& A, const float* sino, const float* factors, float* image,
                       float* sens, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const TableLerp prob{M.table.data(), D.n, D.n_j(), D.n_k()};
    const DeltaGroups groups = M.groups();
    // The paper's tube takes voxel_back_faithful's compile-time path, as on the GPU, with paired reads
    // where the GPU pairs them (without the sensitivity): the same sums in the same order. Other tubes
    // take its run-time loops.
    const bool paper_tube = D.J == kPaperJ && D.K == kPaperK;
    constexpr int kNJ = 2 * kPaperJ + 1, kNK = 2 * kPaperK + 1;
#pragma omp parallel for collapse(2) schedule(dynamic, 8) num_threads(thread_count(threads))
    for (int iz = 0; iz < D.nz; ++iz)
        for (int iy = 0; iy < D.n; ++iy)
            for (int ix = 0; ix < D.n; ++ix) {
                float corr = 0.0f, sn = 0.0f;
                for (int al = 0; al < n_sel; ++al) {
                    const SinogramLayerReader<true> paired{&D, sino, factors, al};
                    const SinogramLayerReader<false> single{&D, sino, factors, al};
                    const float c = A.cos[al], s = A.sin[al];
                    if (paper_tube && !sens)
                        voxel_back_faithful<kNJ, kNK>(D, groups, M.slope.data(), ix, iy, iz, c, s, paired, prob, &corr, &sn);
                    else if (paper_tube)
                        voxel_back_faithful<kNJ, kNK>(D, groups, M.slope.data(), ix, iy, iz, c, s, single, prob, &corr, &sn);
                    else
                        voxel_back_faithful(D, groups, M.slope.data(), ix, iy, iz, c, s, single, prob, &corr, &sn);
                }
                const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
                image[v] = corr;
                if (sens) sens[v] = sn;
            }
}

}  // namespace dp::first
