// The attenuation map's parallel projections on the CPU (OpenMP over lattice rows; attenuation.hpp).
#include <omp.h>

#include "attenuation.hpp"

namespace dp::direct::atten {

void project_cpu(const MapGrid& g, const Plane& P, double* out, int threads) {
    const int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int i = 0; i < P.n1; ++i)
        for (int j = 0; j < P.n2; ++j) out[static_cast<int64_t>(i) * P.n2 + j] = line_integral(g, P, i, j);
}

}  // namespace dp::direct::atten
