// Normalisation histo-images on the CPU (normalisation.hpp): OpenMP over (view, z-slice) rows. Compiled
// without floating-point contraction (CMakeLists.txt).
#include <omp.h>

#include "normalisation.hpp"

namespace dp::direct::normalisation {

void normalisation_cpu(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                       const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out,
                       int threads) {
    const int64_t plane = static_cast<int64_t>(ny) * nx;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int v = 0; v < n_views; ++v)
        for (int iz = 0; iz < nz; ++iz) {
            float* row = out + (static_cast<int64_t>(v) * nz + iz) * plane;
            const double* view_dirs = dirs + 3ll * n_dirs * v;
            for (int iy = 0; iy < ny; ++iy)
                for (int ix = 0; ix < nx; ++ix)
                    row[static_cast<int64_t>(iy) * nx + ix] =
                        voxel_normalisation(s, e, view_dirs, n_dirs, xs[ix], ys[iy], zs[iz]);
        }
}

}  // namespace dp::direct::normalisation
