// FIRST Super-LOR projectors on the CPU: OpenMP loops around tube.hpp.
//
// faithful / matched forward: one LOR at a time (lor_forward_matched: footprint reads in-plane, linear
//   interpolation in z in exact float arithmetic, so the two agree here; on the GPU "faithful" reads a
//   per-angle resampled lattice through the texture unit).
// matched back: one voxel at a time (voxel_back_matched, the exact transpose, gathered).
// faithful back: one voxel at a time (voxel_back_faithful with software interpolation).
// fast: the factored form. Forward: per angle, resample the image once on the LOR lattice
//   (R[i][z][row], the footprint weights), then each LOR is a sum of folded slice taps over integer
//   offsets of R. Back: the transposed steps (G = taps^T y per angle, then the transposed resampling).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

// Software stand-ins for the GPU's textures in the faithful back projector.
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
};

// --- fast (factored) -----------------------------------------------------------------------------
// Lattice buffer of one angle: R[i][z][row'], row' = rho + j + J in [0, n + 2J).
int64_t lattice_size(const Dims& D) { return static_cast<int64_t>(D.n) * D.nz * D.n_rows_ext(); }

void resample_angle(const HostModel& M, const float* image, int a, float* R) {
    const Dims& D = M.D;
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    for (int i = 0; i < D.n; ++i)
        for (int rr = 0; rr < D.n_rows_ext(); ++rr) {
            const FootprintRead f = footprint_at(D, M.footprints(), a, i, rr);
            for (int z = 0; z < D.nz; ++z)
                R[(static_cast<int64_t>(i) * D.nz + z) * D.n_rows_ext() + rr] = footprint_read(image + z * plane, f);
        }
}

void forward_fast(const HostModel& M, const AngleList& A, const float* image, float* sino, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const int64_t L = lattice_size(D);
    const int nt = thread_count(threads);
    const int chunk = std::max(1, std::min(n_sel, nt));
    std::vector<float> R(static_cast<size_t>(chunk) * L);
    for (int a0 = 0; a0 < n_sel; a0 += chunk) {
        const int na = std::min(chunk, n_sel - a0);
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(static)
            for (int q = 0; q < na; ++q) resample_angle(M, image, A.index[a0 + q], R.data() + q * L);
#pragma omp for collapse(3) schedule(dynamic, 2)
            for (int q = 0; q < na; ++q)
                for (int r1 = 0; r1 < D.n_rows; ++r1)
                    for (int r2 = 0; r2 < D.n_rows; ++r2) {
                        const int d = r2 - r1 + D.n_rows - 1, kc = r1 + r2;
                        float* out = sino + sino_index(D, a0 + q, r1, r2, 0);
                        std::fill(out, out + D.n, 0.0f);
                        const float* Rq = R.data() + q * L;
                        for (int i = 0; i < D.n; ++i) {
                            const int z0 = kc + M.base[static_cast<int64_t>(d) * D.n + i] - D.K;
                            for (int t = 0; t < D.n_taps(); ++t) {
                                const int z = z0 + t;
                                if (z < 0 || z >= D.nz) continue;
                                const float* row = Rq + (static_cast<int64_t>(i) * D.nz + z) * D.n_rows_ext();
                                for (int jj = 0; jj < D.n_j(); ++jj) {
                                    const float w = M.Q[q_index(D, d, i, jj, t)];
#pragma omp simd
                                    for (int rho = 0; rho < D.n; ++rho) out[rho] += w * row[rho + jj];
                                }
                            }
                        }
                    }
        }
    }
}

void back_fast(const HostModel& M, const AngleList& A, const float* sino, float* image, int threads) {
    const Dims& D = M.D;
    const int n_sel = static_cast<int>(A.index.size());
    const int64_t L = lattice_size(D);
    const int nt = thread_count(threads);
    const int chunk = std::max(1, std::min(n_sel, nt));
    std::vector<float> G(static_cast<size_t>(chunk) * L);
    std::fill(image, image + D.image_size(), 0.0f);
    for (int a0 = 0; a0 < n_sel; a0 += chunk) {
        const int na = std::min(chunk, n_sel - a0);
#pragma omp parallel num_threads(nt)
        {
            // G[i][z][row'] = sum over LORs of the folded taps times y (the transpose of the stencil).
#pragma omp for collapse(2) schedule(dynamic, 4)
            for (int q = 0; q < na; ++q)
                for (int i = 0; i < D.n; ++i) {
                    float* Gi = G.data() + q * L + static_cast<int64_t>(i) * D.nz * D.n_rows_ext();
                    std::fill(Gi, Gi + static_cast<int64_t>(D.nz) * D.n_rows_ext(), 0.0f);
                    for (int r1 = 0; r1 < D.n_rows; ++r1)
                        for (int r2 = 0; r2 < D.n_rows; ++r2) {
                            const int d = r2 - r1 + D.n_rows - 1;
                            const float* y = sino + sino_index(D, a0 + q, r1, r2, 0);
                            const int z0 = r1 + r2 + M.base[static_cast<int64_t>(d) * D.n + i] - D.K;
                            for (int t = 0; t < D.n_taps(); ++t) {
                                const int z = z0 + t;
                                if (z < 0 || z >= D.nz) continue;
                                float* row = Gi + static_cast<int64_t>(z) * D.n_rows_ext();
                                for (int jj = 0; jj < D.n_j(); ++jj) {
                                    const float w = M.Q[q_index(D, d, i, jj, t)];
#pragma omp simd
                                    for (int rho = 0; rho < D.n; ++rho) row[rho + jj] += w * y[rho];
                                }
                            }
                        }
                }
            // image += the transposed resampling, gathered per voxel column.
#pragma omp for schedule(dynamic, 4)
            for (int iy = 0; iy < D.n; ++iy)
                for (int ix = 0; ix < D.n; ++ix) {
                    float* col = image + static_cast<int64_t>(iy) * D.n + ix;
                    for (int q = 0; q < na; ++q) {
                        const float* Gq = G.data() + q * L;
                        for_each_overlapping_lattice_point(D, M.footprints(), A.index[a0 + q], ix, iy, A.cos[a0 + q],
                                                           A.sin[a0 + q], [&](int i, int row, float w) {
                            const float* g = Gq + static_cast<int64_t>(i) * D.nz * D.n_rows_ext() + row + D.J;
                            for (int z = 0; z < D.nz; ++z)
                                col[static_cast<int64_t>(z) * D.n * D.n] += w * g[static_cast<int64_t>(z) * D.n_rows_ext()];
                        });
                    }
                }
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
#pragma omp parallel for collapse(2) schedule(dynamic, 8) num_threads(thread_count(threads))
    for (int iz = 0; iz < D.nz; ++iz)
        for (int iy = 0; iy < D.n; ++iy)
            for (int ix = 0; ix < D.n; ++ix) {
                float corr = 0.0f, sn = 0.0f;
                for (int al = 0; al < n_sel; ++al) {
                    const SinogramLayerReader layer{&D, sino, factors, al};
                    voxel_back_faithful(D, groups, M.slope.data(), ix, iy, iz, A.cos[al], A.sin[al], layer, prob,
                                        &corr, &sn);
                }
                const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
                image[v] = corr;
                if (sens) sens[v] = sn;
            }
}

}  // namespace dp::first
