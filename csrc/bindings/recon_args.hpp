// Argument checks shared by the CPU (recon.cpp) and CUDA (recon_cuda.cpp) bindings of the pairwise
// priors.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>

#include "../recon/pair_prior.hpp"
#include "arrays.hpp"


namespace py = pybind11;

namespace dp::bind::recon_args {

inline recon::NeighbourWeights neighbour_weights(const py::array& weights) {
    check_array<float>(weights, "weights", {27});
    recon::NeighbourWeights W{};
    const float* w = data_of<float>(weights);
    for (int k = 0; k < 27; ++k) {
        if (!(w[k] >= 0.0f) || !std::isfinite(w[k])) throw ValueError("weights: expected finite values >= 0");
        W.w[k] = w[k];
    }
    return W;
}

inline recon::PriorShape prior_shape(int nz, int ny, int nx, float scale, float p0, float p1) {
    if (nz < 1 || ny < 1 || nx < 1)
        throw ValueError("x: expected a non-empty (nz, ny, nx) image, got (" + std::to_string(nz) + ", " +
                         std::to_string(ny) + ", " + std::to_string(nx) + ")");
    if (!std::isfinite(scale) || !std::isfinite(p0) || !std::isfinite(p1))
        throw ValueError("scale, p0, p1: expected finite numbers");
    return {nz, ny, nx, scale, p0, p1};
}

}  // namespace dp::bind::recon_args
