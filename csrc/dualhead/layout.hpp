// The dual-head LOR layout and patch-tap addressing, host and device (the arithmetic of
// directpet/dualhead/geometry.py and model.py, written once for the C++ and CUDA code).
//
// Orientation class k = a_y * n_z + a_z; its signs in the order (+,+), (-,+), (+,-), (-,-),
// skipping repeats when a component is 0; within a sign, shift positions (i, j) row-major over
// (n_y - a_y) x (n_z - a_z), with c_u = (i + [s_y < 0] a_y, j + [s_z < 0] a_z), c_l = c_u + signed delta.
#pragma once

#include <cstdint>

#include "../common/hd.hpp"

namespace dp::dualhead {

struct Layout {
    int n_y = 0, n_z = 0;        // crystals per head
    int D = 0;                   // voxels per crystal pitch (y and z)
    int n_planes = 0;            // image planes (x)

    DP_HD int n_classes() const { return n_y * n_z; }
    DP_HD int image_ny() const { return n_y * D; }
    DP_HD int image_nz() const { return n_z * D; }
    DP_HD int64_t n_voxels() const { return int64_t(image_nz()) * image_ny() * n_planes; }
    // image[v_z, v_y, p], p fastest
    DP_HD int64_t voxel_index(int vz, int vy, int p) const {
        return (int64_t(vz) * image_ny() + vy) * n_planes + p;
    }
};

struct ClassInfo {
    int a_y, a_z;        // |delta|
    int n_signs;         // 1, 2 or 4
    int pos_y, pos_z;    // shift positions per sign: n_y - a_y, n_z - a_z
    DP_HD int64_t n_lors() const { return int64_t(n_signs) * pos_y * pos_z; }
};

// The class of offsets (a_y, a_z): no division (kernels that look classes up often keep (a_y, a_z)).
DP_HD ClassInfo class_info_of(const Layout& L, int a_y, int a_z) {
    ClassInfo c;
    c.a_y = a_y;
    c.a_z = a_z;
    c.n_signs = (a_y > 0 ? 2 : 1) * (a_z > 0 ? 2 : 1);
    c.pos_y = L.n_y - a_y;
    c.pos_z = L.n_z - a_z;
    return c;
}

DP_HD ClassInfo class_info(const Layout& L, int k) { return class_info_of(L, k / L.n_z, k % L.n_z); }

// Signs (s_y, s_z) of sign slot s of a class (s in [0, n_signs)).
DP_HD void class_sign(const ClassInfo& c, int s, int& s_y, int& s_z) {
    if (c.a_y > 0) {
        s_y = (s & 1) ? -1 : 1;
        s_z = (s & 2) ? -1 : 1;
    } else {  // only s_y = +1: slots (+,+), (+,-)
        s_y = 1;
        s_z = (s & 1) ? -1 : 1;
    }
}

// Sign slot of signed orientation (s_y, s_z) in its class (inverse of class_sign).
DP_HD int sign_slot(const ClassInfo& c, int s_y, int s_z) {
    return (s_y < 0 ? 1 : 0) + (s_z < 0 ? (c.a_y > 0 ? 2 : 1) : 0);
}

// Upper crystal of the LOR at shift position (i, j) of a signed orientation.
DP_HD void upper_crystal(const ClassInfo& c, int s_y, int s_z, int i, int j, int& cu_y, int& cu_z) {
    cu_y = i + (s_y < 0 ? c.a_y : 0);
    cu_z = j + (s_z < 0 ? c.a_z : 0);
}

// Index of LOR (sign slot s, position i, j) within its class's block.
DP_HD int64_t lor_in_class(const ClassInfo& c, int s, int i, int j) {
    return (int64_t(s) * c.pos_y + i) * c.pos_z + j;
}

// Start of class k's block in the full (all classes, index order) vector, in closed form: the
// signed 1-D orientations |delta| < A of n crystals hold F(A) = n + (A - 1)(2n - A) ordered crystal
// pairs (F(0) = 0, F(n) = n^2), so the classes before (a_y, a_z) hold
// F_y(a_y) n_z^2 + [a_y > 0 ? 2 : 1] (n_y - a_y) F_z(a_z) LORs (geometry.py class_offsets()).
DP_HD int64_t pairs_below(int n, int a) { return a == 0 ? 0 : int64_t(n) + int64_t(a - 1) * (2 * int64_t(n) - a); }

DP_HD int64_t class_offset(const Layout& L, int k) {
    const int a_y = k / L.n_z, a_z = k % L.n_z;
    return pairs_below(L.n_y, a_y) * L.n_z * L.n_z +
           int64_t(a_y > 0 ? 2 : 1) * (L.n_y - a_y) * pairs_below(L.n_z, a_z);
}

// Index in the full vector of the LOR joining upper crystal c_u and lower crystal c_l
// (geometry.py DualHeadScanner.lor_index).
DP_HD int64_t lor_index(const Layout& L, int cu_y, int cu_z, int cl_y, int cl_z) {
    const int dy = cl_y - cu_y, dz = cl_z - cu_z;
    const int k = (dy < 0 ? -dy : dy) * L.n_z + (dz < 0 ? -dz : dz);
    const ClassInfo c = class_info(L, k);
    const int s = sign_slot(c, dy < 0 ? -1 : 1, dz < 0 ? -1 : 1);
    const int i = cu_y < cl_y ? cu_y : cl_y;
    const int j = cu_z < cl_z ? cu_z : cl_z;
    return class_offset(L, k) + lor_in_class(c, s, i, j);
}

// Voxel (v_y, v_z) read by tap (dy, dz) of the class's (+,+) patch for the LOR with upper crystal
// c_u and signs (s_y, s_z): the y / z reflections mirror the offset within the D-voxel cell.
DP_HD int tap_voxel(int D, int cu, int sign, int d) { return D * cu + (sign > 0 ? d : D - 1 - d); }

}  // namespace dp::dualhead
