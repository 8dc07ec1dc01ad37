// Correction histo-images on the CPU (corrections.hpp): OpenMP over (view, z-slice) planes. Compiled
// without floating-point contraction (CMakeLists.txt).
#include <omp.h>

#include "corrections.hpp"

namespace dp::direct::corrections {

namespace {

// f(view, iz, iy, ix) -> float into every bin of out (n_views, nz, ny, nx), a (view, z) plane per task.
template <class Bin>
void fill_bins(int n_views, int nz, int ny, int nx, float* out, int threads, const Bin& bin) {
    const int64_t plane = static_cast<int64_t>(ny) * nx;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int v = 0; v < n_views; ++v)
        for (int iz = 0; iz < nz; ++iz) {
            float* row = out + (static_cast<int64_t>(v) * nz + iz) * plane;
            for (int iy = 0; iy < ny; ++iy)
                for (int ix = 0; ix < nx; ++ix) row[static_cast<int64_t>(iy) * nx + ix] = bin(v, iz, iy, ix);
        }
}

}  // namespace

void acceptance_cpu(const RingScanner& s, const AcceptanceCell* cells, const double* cos_sin, int n_views, int n_quad,
                    double omega_max, const double* zs, int nz, const double* ys, int ny, const double* xs, int nx,
                    float* out, int threads) {
    fill_bins(n_views, nz, ny, nx, out, threads, [&](int v, int iz, int iy, int ix) {
        return voxel_acceptance(s, cells[v], cos_sin + 2ll * n_quad * v, n_quad, omega_max, xs[ix], ys[iy], zs[iz]);
    });
}

void normalisation_cpu(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                       const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out,
                       int threads) {
    fill_bins(n_views, nz, ny, nx, out, threads, [&](int v, int iz, int iy, int ix) {
        return voxel_normalisation(s, e, dirs + 3ll * n_dirs * v, n_dirs, xs[ix], ys[iy], zs[iz]);
    });
}

}  // namespace dp::direct::corrections
