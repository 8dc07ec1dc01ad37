// The analytic detector response of the dual-head scanner (science.md 3.9), host and device.
//
// h(c_u, c_l; v) is the probability that a decay uniformly distributed in voxel v is detected as a
// front-layer coincidence on upper crystal c_u and lower crystal c_l:
//
//   h = (1/|v|) Int_v dr  Int_{x > 0} dOmega(w) / (2 pi)  P(c_u | r, w) P(c_l | r, -w),
//
// the pair axis isotropic (its upward photon uniform on the hemisphere toward the upper head), and
// for one photon entering its head's front layer
//
//   P(c | r, w) = exp(-mu l_pre) (1 - exp(-mu l_c)),
//
// l_c the path inside c's front-layer box (crystal_mm x crystal_mm x depth_mm), l_pre the path
// through the other crystals' boxes crossed before entering c (the gaps between crystals do not
// attenuate). Crystals lie on the *extended* lattice (the detector's edges are ignored), so h depends
// only on the offsets of c_u and c_l from the voxel's crystal cell, on the voxel's sub-position
// (a, b) in the cell and on its plane p: that is the Query below.
//
// Coordinates. Everything is computed in the frame of the voxel's crystal cell: crystal offset o has
// its centre at o * pitch in y (z likewise), the voxel's centre is at (a + 1/2 - D/2) * pitch / D,
// the plane at x_p = (p - (P - 1)/2) * plane_mm. The upper front layer fills x in [g, g + depth],
// the lower one x in [-g - depth, -g] (g = gap / 2).
//
// Quadrature (deterministic, symmetric midpoint rules):
//   * n_v^3 points r per voxel: midpoints of an n_v x n_v x n_v sub-grid;
//   * for each r, directions are parameterised by their slopes s = (dy/dx, dz/dx), with
//     dOmega = ds_y ds_z / (1 + s^2)^{3/2}. (A grid on the upper front plane x = g is the same rule:
//     q = r + (g - x_r)(1, s) is an affine map of s for fixed r, and dA cos(theta) / |q - r|^2 =
//     dOmega.) Seen from r, a crystal's front (back) face is a square of the slope plane and its
//     shadow the convex hull of the two squares; the integration runs over the intersection of the
//     bounding boxes of c_u's shadow and of c_l's (reflected through r), taken in a frame turned to
//     the LOR (t along the transverse direction of c_u - c_l, n across it; the y and z axes for
//     c_u = c_l). For oblique LORs the shadows are long thin bands along t (the crystal depth seen
//     at an angle): in the y / z axes their bounding boxes would be mostly empty, and a 4 x 4 grid
//     over them misses the most oblique classes by a factor ~3.
//     Each axis of the box is cut at the squares' corner projections (where a photon starts or
//     stops leaving through a side face: the integrand's kinks; cuts closer than 5 % of a node
//     spacing are merged) and each piece gets ceil(n_a * width / total) midpoint nodes: about n_a
//     per axis plus one per cut. An n_a x n_a grid over the whole box straddles those kinks: with
//     n_a = 4 it overestimates the central LOR by ~28 %; the cut rule stays within ~4 % of the
//     class's largest tap (median ~1 %) for every class (measured at full size: normal, axial,
//     diagonal and the most oblique (103, 71)), at ~50 nodes per point instead of 16.
//     The rule is symmetric by construction: the head swap + x mirror leaves the (t, n) coordinates
//     of every cut unchanged and negates the frame, the y / z mirrors and the y-z interchange negate
//     n; node counts depend only on the pieces' widths and nodes are centre + (i + 1/2 - n/2) step,
//     so mirrored pieces get bitwise mirrored nodes and the identities hold to rounding.
//   * Each photon is walked through the crystal lattice of its head (per axis, the depth intervals
//     in which the ray lies inside a crystal's y (or z) range; the crystal material is their
//     intersection, a 2D DDA), which gives l_pre and l_c.
// Everything is in double precision. The integrand is continuous in r and s (path lengths through
// convex boxes are continuous), so the rule converges as O(1/n^2) away from its kinks.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/hd.hpp"

namespace dp::dualhead {

// Scanner quantities the response needs (mm, per mm) and the quadrature orders.
struct ResponseParams {
    double pitch = 0;       // crystal pitch in y and z
    double half_width = 0;  // crystal_mm / 2
    double depth = 0;       // front-layer depth
    double front = 0;       // gap / 2: |x| of the front faces
    double mu = 0;          // linear attenuation of the crystal
    double voxel = 0;       // voxel size in y and z: pitch / D
    double plane = 0;       // plane spacing (voxel size in x)
    int D = 0;              // voxels per crystal pitch
    int n_planes = 0;
    int angle_samples = 0;  // n_a: about n_a direction nodes per slope axis (plus one per cut)
    int voxel_samples = 0;  // n_v: n_v^3 points per voxel
};

// One (LOR, voxel) pair reduced by shift invariance: the crystal offsets of c_u and c_l from the
// voxel's crystal cell (c_u - floor(v / D), per axis), the voxel's sub-position (a, b) =
// (v_y mod D, v_z mod D) and its plane p. 16 bytes (what the GPU reads per evaluation).
struct Query {
    int16_t ouy, ouz, oly, olz;
    int16_t a, b, p, pad;
};

// The depth intervals [lo, hi] (depth u in [0, u_end] behind the front face) in which a ray's
// lateral coordinate q(u) = q0 + t u lies inside a crystal's range [k pitch - hw, k pitch + hw],
// in increasing u, one crystal at a time. done: no interval left.
struct AxisWalk {
    double q0, inv_t, pitch, hw, u_end;
    double lo, hi;
    int k, k_last, step;
    bool done;

    // inv = 1 / t (the caller's, shared by the photon's computations; unused for t = 0)
    DP_HD void start(double q0_, double t, double inv, double u_end_, double pitch_, double hw_) {
        q0 = q0_;
        pitch = pitch_;
        hw = hw_;
        u_end = u_end_;
        if (t == 0.0) {  // the ray runs parallel to this axis: inside one crystal's range all along, or never
            const double r = q0 - pitch * floor(q0 / pitch + 0.5);
            done = fabs(r) > hw;
            lo = 0.0;
            hi = u_end;
            k = k_last = 0;
            step = 0;
            inv_t = 0.0;
            return;
        }
        inv_t = inv;
        const double q_end = q0 + t * u_end;
        // crystal k meets the travelled range iff k pitch - hw < max and k pitch + hw > min; one crystal
        // too many at either end only adds an empty interval.
        if (t > 0) {
            k = static_cast<int>(floor((q0 - hw) / pitch)) + 1;
            k_last = static_cast<int>(ceil((q_end + hw) / pitch)) - 1;
            step = 1;
        } else {
            k = static_cast<int>(ceil((q0 + hw) / pitch)) - 1;
            k_last = static_cast<int>(floor((q_end - hw) / pitch)) + 1;
            step = -1;
        }
        done = (k - k_last) * step > 0;
        if (!done) load();
    }

    DP_HD void load() {
        const double c = k * pitch;
        double e0 = ((c - hw) - q0) * inv_t, e1 = ((c + hw) - q0) * inv_t;
        if (e0 > e1) {
            const double tmp = e0;
            e0 = e1;
            e1 = tmp;
        }
        lo = e0 > 0.0 ? e0 : 0.0;
        hi = e1 < u_end ? e1 : u_end;
    }

    DP_HD void next() {
        if (step == 0 || k == k_last) {
            done = true;
            return;
        }
        k += step;
        load();
    }
};

// Depth measure of crystal material along the ray for u in [0, u_end]: the intersection of the
// y-wise and z-wise crystal intervals (a crystal box is the product of its y and z ranges).
DP_HD double material_depth(double y0, double ty, double ity, double z0, double tz, double itz, double u_end,
                            double pitch, double hw) {
    AxisWalk Y, Z;
    Y.start(y0, ty, ity, u_end, pitch, hw);
    if (Y.done) return 0.0;
    Z.start(z0, tz, itz, u_end, pitch, hw);
    double sum = 0.0;
    while (!Y.done && !Z.done) {
        const double lo = Y.lo > Z.lo ? Y.lo : Z.lo;
        const double hi = Y.hi < Z.hi ? Y.hi : Z.hi;
        if (hi > lo) sum += hi - lo;
        if (Y.hi < Z.hi)
            Y.next();
        else
            Z.next();
    }
    return sum;
}

// Clip the depth range [u0, u1] to where q0 + t u lies in [c - hw, c + hw]; false when empty
// (inv = 1 / t).
DP_HD bool clip_to_crystal(double q0, double t, double inv, double c, double hw, double& u0, double& u1) {
    const double lo_edge = c - hw, hi_edge = c + hw;
    if (t == 0.0) return q0 >= lo_edge && q0 <= hi_edge;
    double e0 = (lo_edge - q0) * inv, e1 = (hi_edge - q0) * inv;
    if (e0 > e1) {
        const double tmp = e0;
        e0 = e1;
        e1 = tmp;
    }
    if (e0 > u0) u0 = e0;
    if (e1 < u1) u1 = e1;
    return u1 > u0;
}

// P(c | r, w) of one photon: it enters its head's front face at lateral (y0, z0) and moves by
// (ty, tz) per mm of depth (ity, itz their reciprocals, shared by the photon pair's computations);
// path length per mm of depth len = sqrt(1 + ty^2 + tz^2). The target crystal's centre is (cy, cz).
DP_HD double photon_detection(const ResponseParams& P, double y0, double z0, double ty, double tz, double ity,
                              double itz, double len, double cy, double cz) {
    double u0 = 0.0, u1 = P.depth;
    if (!clip_to_crystal(y0, ty, ity, cy, P.half_width, u0, u1)) return 0.0;
    if (!clip_to_crystal(z0, tz, itz, cz, P.half_width, u0, u1)) return 0.0;
    const double p_in = -expm1(-P.mu * len * (u1 - u0));  // interacts inside c
    if (u0 <= 0.0) return p_in;                              // entered c through its front face
    const double pre = material_depth(y0, ty, ity, z0, tz, itz, u0, P.pitch, P.half_width);
    return pre > 0.0 ? exp(-P.mu * len * pre) * p_in : p_in;
}

// The slope plane is integrated in a frame turned to the LOR: t along e = (e_y, e_z), the
// transverse direction of (c_u - c_l) (e = (1, 0) for c_u = c_l), n along (-e_z, e_y). Seen from r,
// a crystal's front (back) face is a square of the slope plane, centre (Y - r_y, Z - r_z) / dist,
// half-size hw / dist, with dist the x distance to that face; the crystal's shadow is the convex
// hull of its two squares, elongated along e for oblique LORs (the depth seen at an angle). In the
// turned frame a square's projection on an axis spans c +- h wo with kinks at c +- h wi
// (wo = |e_y| + |e_z|, wi = ||e_y| - |e_z||): the integrand's kinks, where a photon starts leaving
// through a side face, lie on the squares' edges and the hull's corner lines.
struct SlopeSquare {
    double t, n, h;  // centre on the t and n axes, half-size
};

DP_HD SlopeSquare slope_square(double dy, double dz, double dist, double hw, double ey, double ez) {
    const double cy = dy / dist, cz = dz / dist;
    return {cy * ey + cz * ez, cz * ey - cy * ez, hw / dist};
}

// The pieces of one frame axis: the intersection [s0, s1] of the upper and lower shadows' extents,
// cut at the squares' corner projections (centre[k] +- half[k] * wo or wi). Cuts closer than
// merge = (s1 - s0) * kMergeFraction / n_a chain into clusters, each replaced by its midpoint (by the
// end point when it holds one), so that near-coincident kinks do not each cost a node. The rule
// depends only on the set of gaps, so a mirrored axis gets mirrored cuts. Writes at most 18 sorted
// points to b; returns their number (0: empty intersection).
constexpr double kMergeFraction = 0.05;  // 0.2 loses the narrow ramp pieces (up to 16 % off)

DP_HD int axis_pieces(const double* centre, const double* half, double wo, double wi, int na, double* b) {
    // 0, 1: upper front / back squares; 2, 3: lower front / back
    const double lo_u = fmin(centre[0] - half[0] * wo, centre[1] - half[1] * wo);
    const double hi_u = fmax(centre[0] + half[0] * wo, centre[1] + half[1] * wo);
    const double lo_l = fmin(centre[2] - half[2] * wo, centre[3] - half[3] * wo);
    const double hi_l = fmax(centre[2] + half[2] * wo, centre[3] + half[3] * wo);
    const double s0 = fmax(lo_u, lo_l), s1 = fmin(hi_u, hi_l);
    if (!(s1 > s0)) return 0;
    int n = 0;
    b[n++] = s0;
    for (int k = 0; k < 4; ++k) {
        const double v[4] = {centre[k] - half[k] * wo, centre[k] - half[k] * wi, centre[k] + half[k] * wi,
                             centre[k] + half[k] * wo};
        for (int i = 0; i < 4; ++i)
            if (v[i] > s0 && v[i] < s1) {
                int j = n++;
                while (j > 1 && b[j - 1] > v[i]) {
                    b[j] = b[j - 1];
                    --j;
                }
                b[j] = v[i];
            }
    }
    b[n++] = s1;
    // merge in place (the write index never passes the read index)
    const double merge = (s1 - s0) * (kMergeFraction / na);
    int m = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && b[j + 1] - b[j] < merge) ++j;
        if (i == 0) {
            b[m++] = s0;
            if (j == n - 1) b[m++] = s1;
        } else {
            b[m++] = j == n - 1 ? s1 : 0.5 * (b[i] + b[j]);
        }
        i = j + 1;
    }
    return m;
}

// Midpoint nodes of one piece [lo, hi] of an axis whose intersection is total wide: ceil(n_a * width /
// total) of them (at least one per piece of positive width), so the axis holds about n_a nodes
// plus one per cut. The count depends only on the widths, and nodes are centre + (j + 1/2 - n/2)
// step, so a mirrored axis gets exactly mirrored nodes.
DP_HD int piece_nodes(double lo, double hi, double total, int na, double& centre, double& step) {
    const double w = hi - lo;
    if (!(w > 0.0)) return 0;
    int n = static_cast<int>(ceil(na * (w / total)));
    if (n < 1) n = 1;
    if (n > na) n = na;
    centre = 0.5 * (lo + hi);
    step = w / n;
    return n;
}

// Integral over the pair axis (dOmega, before the 1/(2 pi)) of P_u P_l for one point r; (ey, ez)
// the frame's t direction.
DP_HD double point_response(const ResponseParams& P, double rx, double ry, double rz, double Yu, double Zu, double Yl,
                            double Zl, double ey, double ez) {
    const double hw = P.half_width;
    const double back = P.front + P.depth;
    const double du_near = P.front - rx, du_far = back - rx;  // x distances to the upper layer's faces
    const double dl_near = P.front + rx, dl_far = back + rx;  // and to the lower layer's faces
    // Upper: s = (y - r_y) / (x - r_x) with x - r_x in [du_near, du_far]. Lower: the opposite
    // direction reaches y at x - r_x = -(dl_near .. dl_far), so s = (r_y - y) / dl.
    const double ay = fabs(ey), az = fabs(ez);
    const double wo = ay + az, wi = fabs(ay - az);
    double ct[4], cn[4], hh[4];
    {
        const SlopeSquare sq[4] = {slope_square(Yu - ry, Zu - rz, du_near, hw, ey, ez),
                                   slope_square(Yu - ry, Zu - rz, du_far, hw, ey, ez),
                                   slope_square(ry - Yl, rz - Zl, dl_near, hw, ey, ez),
                                   slope_square(ry - Yl, rz - Zl, dl_far, hw, ey, ez)};
        for (int k = 0; k < 4; ++k) {
            ct[k] = sq[k].t;
            cn[k] = sq[k].n;
            hh[k] = sq[k].h;
        }
    }
    const int na = P.angle_samples;
    double bt[18], bn[18];
    const int nt = axis_pieces(ct, hh, wo, wi, na, bt);
    if (nt == 0) return 0.0;
    const int nn = axis_pieces(cn, hh, wo, wi, na, bn);
    if (nn == 0) return 0.0;
    const double wt = bt[nt - 1] - bt[0], wn = bn[nn - 1] - bn[0];
    double acc = 0.0;
    for (int pt = 0; pt + 1 < nt; ++pt) {
        double c_t, h_t;
        const int mt = piece_nodes(bt[pt], bt[pt + 1], wt, na, c_t, h_t);
        for (int j = 0; j < mt; ++j) {
            const double t = c_t + (j + 0.5 - 0.5 * mt) * h_t;
            double row = 0.0;
            for (int pn = 0; pn + 1 < nn; ++pn) {
                double c_n, h_n;
                const int mn = piece_nodes(bn[pn], bn[pn + 1], wn, na, c_n, h_n);
                double part = 0.0;
                for (int i = 0; i < mn; ++i) {
                    const double n = c_n + (i + 0.5 - 0.5 * mn) * h_n;
                    const double sy = t * ey - n * ez, sz = t * ez + n * ey;
                    const double l2 = 1.0 + sy * sy + sz * sz;
                    const double len = sqrt(l2);
                    const double iy = sy != 0.0 ? 1.0 / sy : 0.0, iz = sz != 0.0 ? 1.0 / sz : 0.0;
                    // the photons enter their front faces at x = g (upper) and x = -g (lower)
                    const double pu =
                        photon_detection(P, ry + sy * du_near, rz + sz * du_near, sy, sz, iy, iz, len, Yu, Zu);
                    if (pu == 0.0) continue;
                    const double pl =
                        photon_detection(P, ry - sy * dl_near, rz - sz * dl_near, -sy, -sz, -iy, -iz, len, Yl, Zl);
                    part += pu * pl / (l2 * len);
                }
                row += part * h_n;
            }
            acc += row * h_t;
        }
    }
    return acc;
}

// h for one query (see the file header).
DP_HD double lor_voxel_response(const ResponseParams& P, const Query& q) {
    const double Yu = q.ouy * P.pitch, Zu = q.ouz * P.pitch;
    const double Yl = q.oly * P.pitch, Zl = q.olz * P.pitch;
    // centres in the cell frame; (a + 1/2 - D/2) is an exact half-integer, so mirrored sub-positions
    // give exactly negated coordinates
    const double vy = (q.a + 0.5 - 0.5 * P.D) * P.voxel;
    const double vz = (q.b + 0.5 - 0.5 * P.D) * P.voxel;
    const double vx = (q.p - 0.5 * (P.n_planes - 1)) * P.plane;
    // the frame's t direction: along c_u - c_l (transverse), the y axis for c_u = c_l
    const double dy = Yu - Yl, dz = Zu - Zl, norm = sqrt(dy * dy + dz * dz);
    const double ey = norm > 0.0 ? dy / norm : 1.0, ez = norm > 0.0 ? dz / norm : 0.0;
    const int nv = P.voxel_samples;
    const double st = P.voxel / nv, sx = P.plane / nv, half = 0.5 - 0.5 * nv;
    double total = 0.0;
    for (int ix = 0; ix < nv; ++ix) {
        const double rx = vx + (ix + half) * sx;
        for (int iy = 0; iy < nv; ++iy) {
            const double ry = vy + (iy + half) * st;
            for (int iz = 0; iz < nv; ++iz) {
                const double rz = vz + (iz + half) * st;
                total += point_response(P, rx, ry, rz, Yu, Zu, Yl, Zl, ey, ez);
            }
        }
    }
    const double two_pi = 6.283185307179586476925286766559;
    return total / (two_pi * nv * nv * nv);
}

// The query of LOR (c_u, c_l) and voxel (v_z, v_y, p): offsets from the voxel's crystal cell.
DP_HD Query make_query(int D, int cuy, int cuz, int cly, int clz, int vz, int vy, int p) {
    // floor division (voxel indices of the extended lattice may be negative)
    const int cy = vy >= 0 ? vy / D : -((-vy + D - 1) / D);
    const int cz = vz >= 0 ? vz / D : -((-vz + D - 1) / D);
    Query q;
    q.ouy = static_cast<int16_t>(cuy - cy);
    q.ouz = static_cast<int16_t>(cuz - cz);
    q.oly = static_cast<int16_t>(cly - cy);
    q.olz = static_cast<int16_t>(clz - cz);
    q.a = static_cast<int16_t>(vy - D * cy);
    q.b = static_cast<int16_t>(vz - D * cz);
    q.p = static_cast<int16_t>(p);
    q.pad = 0;
    return q;
}

}  // namespace dp::dualhead
