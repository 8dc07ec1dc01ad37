// Arguments shared by the CPU (direct.cpp) and CUDA (direct_cuda.cpp) bindings of the normalisation
// histo-images (cs../direct/corrections.hpp): the ring scanner and the efficiency model, checked.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "../common/errors.hpp"
#include "../direct/corrections.hpp"

namespace dp::bind::corrections_args {

namespace nm = dp::direct::corrections;

inline nm::RingScanner make_ring(double radius, double half_length, double axial_length, int n_per_ring, int n_rings) {
    require_positive(radius, "radius");
    require_non_negative(half_length, "half_length");
    require_positive(axial_length, "axial_length");
    require_positive_int(n_per_ring, "n_per_ring");
    require_positive_int(n_rings, "n_rings");
    return {radius, half_length, axial_length, n_per_ring, n_rings};
}

// values_size / pairs_size: the lengths of the arrays given (0 when absent); one of the two is used.
inline nm::Efficiencies make_efficiencies(const nm::RingScanner& s, const double* values, int64_t values_size,
                                          int64_t stride, double scale, const double* pairs, int64_t pairs_size) {
    const int64_t n = static_cast<int64_t>(s.n_per_ring) * s.n_rings;
    nm::Efficiencies e;
    e.n_crystals = n;
    if (pairs) {
        require(pairs_size == n * n, "pairs: expected (n_crystals, n_crystals) = (" + std::to_string(n) + ", " +
                                         std::to_string(n) + ") pair efficiencies");
        e.pairs = pairs;
        return e;
    }
    require(values != nullptr, "values: expected per-crystal efficiencies or a pair table");
    require(stride >= 1, "stride: expected an integer >= 1");
    require(values_size >= (n - 1) * stride + 1, "values: expected at least (n_crystals - 1) * stride + 1 = " +
                                                     std::to_string((n - 1) * stride + 1) + " efficiencies");
    require(std::isfinite(scale), "scale: expected a finite number");
    e.values = values, e.stride = stride, e.scale = scale;
    return e;
}

// cells: (n_views, 3) rows (dphi, theta_lo, theta_hi) as AcceptanceCell (the same layout).
inline void check_acceptance(const double* cells, int n_views, double omega_max) {
    require(omega_max > 0 && std::isfinite(omega_max), "omega_max: expected a positive solid angle");
    for (int v = 0; v < n_views; ++v)
        for (int k = 0; k < 3; ++k)
            require(std::isfinite(cells[3 * v + k]), "cells: expected finite (dphi, theta_lo, theta_hi) rows");
}
static_assert(sizeof(nm::AcceptanceCell) == 3 * sizeof(double), "AcceptanceCell is three doubles");

}  // namespace dp::bind::corrections_args
