// Dual-head patch projectors on the CPU (OpenMP): y = H_C x and its exact transpose for the LORs of
// a class list C (the concatenated class blocks of layout.hpp, in list order).
//
// Both run in fp32 and give the same bits for any thread count: every output element is summed by
// one thread in a fixed order (forward: planes ascending, each plane's taps in stored order; back:
// classes in list order, then signs, taps and shift positions).
#pragma once

#include <cstdint>

#include "model.hpp"

namespace dp::dualhead {

// y[lor] = sum_p sum_taps w * image[v_z, v_y, p] for every LOR of the classes in C.
//   image: (n_z D, n_y D, n_planes) float32, C order.  y: C.n_lors() floats (overwritten).
//   skip: nullptr, or C.n_lors() floats: where skip[lor] == 0 the LOR is not projected and y = 0
//   (the other LORs get the same value as without skip).
//   threads: OpenMP threads (<= 0: OpenMP's default).
void forward_cpu(const HostModel& M, const ClassList& C, const float* image, const float* skip, float* y,
                 int threads);

// image = H_C^T y (overwritten): the exact transpose of forward_cpu, without atomics.
void back_cpu(const HostModel& M, const ClassList& C, const float* y, float* image, int threads);

}  // namespace dp::dualhead
