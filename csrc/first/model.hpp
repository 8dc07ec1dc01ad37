// FIRST projector model on the host: Super-LOR tables, the ring-difference map and the folded
// slice taps derived from them, shared by the CPU projectors and uploaded by the CUDA ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tube.hpp"

namespace dp::first {

struct HostModel {
    Dims D{};
    int n_angles = 0;                         // angles of the full sinogram (over 180 degrees)
    std::vector<float> table;                 // Super-LOR tubes (n_super, n, 2J+1, 2K+1)
    std::vector<int> super_of_delta;          // (n_deltas,)
    std::vector<unsigned char> flip_k;        // (n_deltas,)
    std::vector<float> slope;                 // (n_deltas,) slices per along-sample
    std::vector<float> Q;                     // folded taps (n_deltas, n, 2J+1, 2K+2)
    std::vector<int> base;                    // (n_deltas, n) floor of the axial offset u(i)
    int base_min = 0, base_max = 0;           // range of base (the fast kernels pad z by it)
    // ring differences grouped by (Super-LOR, k-mirror) for the faithful back projector
    std::vector<int> delta_order, group_start, group_super;
    std::vector<unsigned char> group_flip;
    // in-plane footprints of every angle's lattice points (tube.hpp): (n_angles, n, n_rows_ext, 9)
    // overlap areas and (n_angles, n, n_rows_ext) origins
    std::vector<float> fp_weight;
    std::vector<FootprintOrigin> fp_origin;

    Footprints footprints() const { return {fp_weight.data(), fp_origin.data()}; }
    DeltaGroups groups() const {
        return {delta_order.data(), group_start.data(), group_super.data(), group_flip.data(),
                static_cast<int>(group_super.size())};
    }
};

// Builds the model, its folded taps and the footprint tables of all n_angles angles (OpenMP);
// throws dp::ValueError on inconsistent inputs.
HostModel make_model(const Dims& D, int n_angles, const float* table, const int* super_of_delta, const unsigned char* flip_k,
                     const float* slope);

// cos / sin of the selected angles (phi = pi a / n_angles), computed in double, stored as float.
struct AngleList {
    std::vector<int> index;
    std::vector<float> cos, sin;
};
AngleList make_angles(const int* angles, int n_sel, int n_angles);

// Overlap area of the unit square centred at (dx, dy) (a voxel, axis-aligned, in voxel units relative
// to the lattice point) with the unit square centred at 0 turned by phi (the lattice point's cell):
// the footprint weight, exposed for the tests.
double cell_voxel_overlap(double dx, double dy, double cos_phi, double sin_phi);

enum class Method { Faithful, Matched, Fast };
Method parse_method(const std::string& name);

// CPU projectors (OpenMP, threads <= 0: the OpenMP default). image (nz, n, n); sino
// (n_sel, n_rows, n_rows, n) for the listed angles. forward overwrites out; the back projections
// overwrite out (and sens).
void forward_cpu(Method method, const HostModel& M, const AngleList& A, const float* image, float* sino, int threads);
void back_cpu(Method method, const HostModel& M, const AngleList& A, const float* sino, float* image, int threads);
// The paper's back projector with the sensitivity in the same pass: image = B sino,
// sens = B factors (factors == nullptr: ones), sens may be nullptr.
void back_faithful_cpu(const HostModel& M, const AngleList& A, const float* sino, const float* factors, float* image,
                       float* sens, int threads);

}  // namespace dp::first
