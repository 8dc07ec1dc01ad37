// List-mode coincidences from a file deposited into DIRECT histo-images (science.md 1.2), the compiled
// path of directpet.direct.petsird.deposit_file: the event list's varint bytes are read in chunks
// (io/varint_file.hpp), decoded, turned into crystal centres and TOF-bin time differences through the
// tables of coincidences_to_events, and each event added at its most likely point into its view's
// histo-image -- without building an EventBatch.
//
// Same numbers as the NumPy / CuPy path
// -------------------------------------
// locate_coincidence is bin_canonical + deposit(mode='nearest') operation for operation, in double
// precision from the same float32 tables, with the same association of every sum and product. The files
// that include it compile without floating-point contraction (CMakeLists.txt), so every operation
// rounds as NumPy's and CuPy's element-wise kernels do; sqrt and division are correctly rounded
// everywhere. Only atan2 and asin come from different libraries (glibc or NumPy's SIMD code on the CPU,
// CUDA's libdevice on the GPU and in CuPy), so an event whose direction lies within an ulp of a view
// edge can land in the neighbouring view on the CPU; the GPU path uses CuPy's own functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "../common/hd.hpp"

namespace dp::direct::listmode {

// The histo-image lattice and the views, as Python holds them (double).
struct Lattice {
    int nz, ny, nx;
    double vz, vy, vx;  // mm
};

struct Views {
    int n_phi, n_theta;
    double theta_max;  // radians; 0: one tilt bin taking every tilt
};

// Where an event lands.
enum Placement : int { kDeposited = 0, kOutsideViews = 1, kOutsideGrid = 2 };

constexpr double kHalfCmmPerPs = 0.5 * 0.299792458;  // (c / 2) in mm / ps: directpet.direct.model.C_MM_PER_PS

// bin_canonical + deposit(mode='nearest') of the event p1 -> p2 (mm) with t1 - t2 = dt (ps): its view
// (the direction negated when its azimuth is outside [0, pi)), its most likely point
// r = (p1 + p2) / 2 + (c/2) dt (p2 - p1) / |p2 - p1| and the voxel floor(r / v + (n - 1) / 2 + 1/2).
// `index` is the flat index into (n_views, nz, ny, nx) when kDeposited.
DP_HD int locate_coincidence(const Lattice& g, const Views& v, const float* a, const float* b, float dt_ps,
                             int64_t* index) {
    constexpr double kPi = 3.141592653589793;  // numpy.pi
    const double p1x = a[0], p1y = a[1], p1z = a[2], p2x = b[0], p2y = b[1], p2z = b[2];
    const double ux = p2x - p1x, uy = p2y - p1y, uz = p2z - p1z;
    const bool flipped = uy < 0.0 || (uy == 0.0 && ux < 0.0);
    double phi = atan2(flipped ? -uy : uy, flipped ? -ux : ux);
    if (phi < 0.0) phi = 0.0;  // -0.0 for u_y = -0
    const double norm = sqrt(ux * ux + uy * uy + uz * uz);
    if (!(norm > 0.0)) return kOutsideViews;
    const double cz = flipped ? -uz : uz;
    const double theta = asin(fmin(fmax(cz / norm, -1.0), 1.0));
    int64_t k = static_cast<int64_t>(phi / kPi * static_cast<double>(v.n_phi));
    if (k > v.n_phi - 1) k = v.n_phi - 1;
    int64_t l = 0;
    if (v.theta_max > 0.0) {
        const double f = floor((theta + v.theta_max) / (2.0 * v.theta_max) * static_cast<double>(v.n_theta));
        if (!(f >= 0.0 && f < static_cast<double>(v.n_theta)) && theta != v.theta_max) return kOutsideViews;
        l = theta == v.theta_max ? v.n_theta - 1 : static_cast<int64_t>(f);
    }
    const double scale = kHalfCmmPerPs * static_cast<double>(dt_ps);
    const double rx = 0.5 * (p1x + p2x) + scale * (ux / norm);
    const double ry = 0.5 * (p1y + p2y) + scale * (uy / norm);
    const double rz = 0.5 * (p1z + p2z) + scale * (uz / norm);
    const double fx = floor(rx / g.vx + 0.5 * (g.nx - 1) + 0.5);
    const double fy = floor(ry / g.vy + 0.5 * (g.ny - 1) + 0.5);
    const double fz = floor(rz / g.vz + 0.5 * (g.nz - 1) + 0.5);
    // compared in double before converting: an MLP far outside would overflow an integer
    if (!(fx >= 0.0 && fx < g.nx && fy >= 0.0 && fy < g.ny && fz >= 0.0 && fz < g.nz)) return kOutsideGrid;
    const int64_t view = k * v.n_theta + l;
    *index = ((view * g.nz + static_cast<int64_t>(fz)) * g.ny + static_cast<int64_t>(fy)) * g.nx +
             static_cast<int64_t>(fx);
    return kDeposited;
}

// What coincidences_to_events needs for the events of one module-type pair (host arrays, copied by the
// depositors): element centres of both types, the TOF-bin centres and the index limits.
struct PairTables {
    std::vector<float> centres0, centres1;  // (n_elements, 3) float32 mm, module-major
    std::vector<float> dt_ps;               // (n_tof,) float32 ps
    uint32_t n_energy0 = 1, n_energy1 = 1;  // energy bins per element (detection bin = element * n + e)
    uint32_t n_bins0 = 0, n_bins1 = 0;      // detection bins of each type
};

// Throws dp::ValueError unless the tables are consistent: one centre per element of each type
// (n_bins / n_energy of them), at least one energy bin and one TOF bin (both depositors' add_pair).
void check_tables(const PairTables& t);

// Running totals of a depositor per registered pair (add_pair's handle): the events read and where they
// went, and the largest indices met (to name events outside the scanner, as PetsirdScanner.check does).
struct PairTotals {
    uint64_t events = 0, deposited = 0, outside_views = 0, outside_grid = 0;
    uint64_t outside_scanner = 0;  // events with a bin or TOF index out of range (not deposited)
    uint32_t max_bin0 = 0, max_bin1 = 0, max_tof = 0;
};

struct Totals {
    std::vector<PairTotals> pairs;
    bool varint_too_long = false, value_too_wide = false;  // faults found on the GPU
};

// What one deposit call read.
struct ListRead {
    int64_t end_offset = 0;  // the byte after the list (valid when complete)
    uint64_t records = 0;    // events read
    bool complete = false;   // false: the file ends inside the list
};

// CPU (OpenMP) depositor. Synchronous: deposit returns when the list is in the histo-images.
class HostDeposit {
public:
    HostDeposit(const Lattice& g, const Views& v, size_t chunk_bytes, int threads);
    // Registers a pair's tables and returns its handle; the totals are kept per handle (a pair may be
    // registered once per kind of event).
    int add_pair(PairTables tables);
    // Deposits the n_events coincidences at `offset` of `fd` (events of pair `pair`) into histos,
    // (n_views, nz, ny, nx) float32 host memory. A varint longer than 5 bytes or wider than 32 bits
    // throws dp::ValueError.
    ListRead deposit(int pair, int fd, int64_t offset, uint64_t n_events, float* histos);
    Totals finish();  // the totals so far; the counts start again from zero
    const Lattice& lattice() const { return g_; }
    int n_views() const { return v_.n_phi * v_.n_theta; }

private:
    Lattice g_;
    Views v_;
    size_t chunk_bytes_;
    int threads_;
    std::vector<PairTables> pairs_;
    std::vector<PairTotals> totals_;
    std::vector<uint8_t> bytes_;
    std::vector<uint32_t> values_;
};

namespace gpu {
// CUDA depositor: two pinned host buffers and two streams, so that reading chunk k + 1 from the file
// and copying it to the GPU overlap the decoding and deposition of chunk k. deposit returns when the
// list is read and queued; finish() waits for the GPU and returns the totals (faults in the varints and
// events outside the scanner are found on the GPU and reported there).
class DeviceDeposit {
public:
    DeviceDeposit(const Lattice& g, const Views& v, size_t chunk_bytes, int threads);
    ~DeviceDeposit();
    DeviceDeposit(const DeviceDeposit&) = delete;
    DeviceDeposit& operator=(const DeviceDeposit&) = delete;
    int add_pair(const PairTables& tables);
    // histos: a device pointer to (n_views, nz, ny, nx) float32.
    ListRead deposit(int pair, int fd, int64_t offset, uint64_t n_events, float* histos);
    // The list decoded on the GPU into values (host, 3 * n_events uint32), nothing deposited: the
    // decoder checked against the CPU's. Synchronous; faults are counted as for deposit.
    ListRead decode(int fd, int64_t offset, uint64_t n_events, uint32_t* values);
    Totals finish();

private:
    ListRead read_list(int fd, int64_t offset, uint64_t n_events, int pair, float* histos, uint32_t* host_values);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};
}  // namespace gpu

}  // namespace dp::direct::listmode
