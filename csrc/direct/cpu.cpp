// CPU DIRECT projectors.
//
// The volume is copied once into a zero-padded, z-fastest layout (y, x, z). Because LORmap is 2D,
// every voxel of a z-column shares its kernel identifier (the paper's ILP observation), so one
// weight multiplies a contiguous run of z-block source values: the inner loop is a SIMD AXPY
// with no bounds checks (the zero halo stands in for "outside the volume is zero").
#include "cpu.hpp"

#include "columns.hpp"
#include "../common/cpu_dispatch.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

namespace dp::direct {
namespace {

struct Halo {
    int z, y, x;
};

// Offsets sharing (dy, dx) read the same neighbour column, hence the same neighbour identifier:
// they form one group, so the forward projection looks the identifier up once per column.
struct ColumnGroup {
    long long col_shift;  // shift of the neighbour column in the padded (y, x, z) layout
    long long pix_shift;  // shift of the neighbour in the padded identifier map
    int begin, end;       // range in the reordered offset list
};

struct Plan {
    Halo h;
    long long nzp, nxp, nyp;
    int nzb;
    std::vector<ColumnGroup> groups;
    std::vector<int> dz;         // per reordered offset
    std::vector<float> weights;  // (n_kernels, n_keep), reordered; flipped columns for forward
    int n_keep;
};

Plan make_plan(bool forward, const Dims& d, const LutRef& lut, int zblock) {
    Plan p;
    int halo[3];
    const std::vector<KernelColumn> cols = kernel_columns(lut, d, halo);
    p.h = {halo[0], halo[1], halo[2]};
    p.nzb = (d.nz + zblock - 1) / zblock;
    p.nzp = static_cast<long long>(p.nzb) * zblock + 2 * p.h.z;
    p.nyp = d.ny + 2 * p.h.y;
    p.nxp = d.nx + 2 * p.h.x;
    std::vector<int> order;  // original offset index of each reordered entry
    for (const KernelColumn& c : cols) {
        const long long pix = c.dy * p.nxp + c.dx;
        p.groups.push_back({pix * p.nzp, pix, static_cast<int>(order.size()), 0});
        for (size_t k = 0; k < c.taps.size(); ++k) {
            order.push_back(c.taps[k]);
            p.dz.push_back(c.dz_min + static_cast<int>(k));
        }
        p.groups.back().end = static_cast<int>(order.size());
    }
    p.n_keep = static_cast<int>(order.size());
    p.weights.resize(static_cast<size_t>(lut.n_kernels) * p.n_keep);
    for (int j = 0; j < p.n_keep; ++j)
        for (int a = 0; a < lut.n_kernels; ++a)
            p.weights[static_cast<size_t>(a) * p.n_keep + j] =
                lut.values[forward ? forward_weight_index(a, lut.flip[order[j]], lut.n_offsets)
                                   : back_weight_index(a, order[j], lut.n_offsets)];
    return p;
}

// One output column block: acc[b] = sum_j w_j * src[z0 + b + dz_j] over all offsets, where the
// kernel row is the neighbour's (forward) or the voxel's own (back).
template <int B>
DP_CPU_CLONES void column_block(bool forward, const Plan& p, const float* base, const int32_t* ids_at_pix,
                  int own_id, float* acc) {
    // Two accumulator sets for alternating taps: a single set would chain every multiply-add on
    // the previous one (FMA latency), two keep twice as many independent FMAs in flight. Four taps
    // per step: the loop's schedule then does not hang on the compiler's tuning for one CPU (a
    // generic-tuned build ran the two-tap loop ~15 % slower on long kernels than -mtune=native).
    float a0[B] = {}, a1[B] = {};
    for (const ColumnGroup& g : p.groups) {
        const int id = forward ? ids_at_pix[g.pix_shift] : own_id;
        const float* row = p.weights.data() + static_cast<size_t>(id) * p.n_keep;
        const float* col = base + g.col_shift;
        int j = g.begin;
        for (; j + 3 < g.end; j += 4) {
            const float w0 = row[j], w1 = row[j + 1], w2 = row[j + 2], w3 = row[j + 3];
            const float* c0 = col + p.dz[j];
            const float* c1 = col + p.dz[j + 1];
            const float* c2 = col + p.dz[j + 2];
            const float* c3 = col + p.dz[j + 3];
#pragma omp simd
            for (int b = 0; b < B; ++b) {
                a0[b] += w0 * c0[b] + w2 * c2[b];
                a1[b] += w1 * c1[b] + w3 * c3[b];
            }
        }
        for (; j + 1 < g.end; j += 2) {
            const float w0 = row[j], w1 = row[j + 1];
            const float* c0 = col + p.dz[j];
            const float* c1 = col + p.dz[j + 1];
#pragma omp simd
            for (int b = 0; b < B; ++b) {
                a0[b] += w0 * c0[b];
                a1[b] += w1 * c1[b];
            }
        }
        if (j < g.end) {
            const float w = row[j];
            const float* c = col + p.dz[j];
#pragma omp simd
            for (int b = 0; b < B; ++b) a0[b] += w * c[b];
        }
    }
    for (int b = 0; b < B; ++b) acc[b] = a0[b] + a1[b];
}

template <int B>
void run(bool forward, const float* src, float* dst, const Dims& d, const LutRef& lut, int threads) {
    const Plan p = make_plan(forward, d, lut, B);
    const long long plane = static_cast<long long>(d.ny) * d.nx;
    const Halo h = p.h;

    // Padded z-fastest copy of the source.
    std::vector<float> pad(static_cast<size_t>(p.nyp * p.nxp * p.nzp), 0.0f);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int y = 0; y < d.ny; ++y)
        for (int z = 0; z < d.nz; ++z) {
            const float* row = src + z * plane + static_cast<long long>(y) * d.nx;
            float* col = pad.data() + ((y + h.y) * p.nxp + h.x) * p.nzp + h.z + z;
            for (int x = 0; x < d.nx; ++x) col[x * p.nzp] = row[x];
        }

    // Identifier map with the same halo (the halo's identifier is irrelevant: the source is 0 there).
    std::vector<int32_t> ids(static_cast<size_t>(p.nyp * p.nxp), 0);
    for (int y = 0; y < d.ny; ++y)
        for (int x = 0; x < d.nx; ++x) ids[(y + h.y) * p.nxp + x + h.x] = lut.lormap[y * d.nx + x];

// Visit pixels grouped by kernel identifier (bands of constant LOR distance, raster order inside
    // a band): neighbouring pixels then share their own kernel row and, in the forward
    // projection, nearly the same neighbour rows, which keeps the weight rows in cache even when
    // the table is tens of MB (stress kernel).
    std::vector<int> order(static_cast<size_t>(d.ny) * d.nx);
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return lut.lormap[a] < lut.lormap[b]; });
    constexpr int kChunk = 32;
    const int n_chunks = static_cast<int>((order.size() + kChunk - 1) / kChunk);

#pragma omp parallel for collapse(2) num_threads(threads) schedule(dynamic, 1)
    for (int c = 0; c < n_chunks; ++c)
        for (int zb = 0; zb < p.nzb; ++zb) {
            const int k_end = std::min<int>(static_cast<int>(order.size()), (c + 1) * kChunk);
            for (int k = c * kChunk; k < k_end; ++k) {
                const int y = order[k] / d.nx, x = order[k] % d.nx;
                const long long pix = (y + h.y) * p.nxp + x + h.x;
                float acc[B];
                column_block<B>(forward, p, pad.data() + pix * p.nzp + h.z + zb * B,
                                ids.data() + pix, lut.lormap[order[k]], acc);
                const int zmax = std::min(B, d.nz - zb * B);
                for (int b = 0; b < zmax; ++b) dst[(zb * B + b) * plane + order[k]] = acc[b];
            }
        }
}

}  // namespace

void project_cpu(bool forward, const float* src, float* dst, const Dims& d, const LutRef& lut,
                 int threads) {
    if (threads <= 0) threads = omp_get_max_threads();
    // The z-run per thread: the whole column when it is short (one kernel-row lookup per offset
    // then feeds the most multiply-adds), else blocks of 32.
    if (d.nz <= 16) return run<16>(forward, src, dst, d, lut, threads);
    if (d.nz <= 32) return run<32>(forward, src, dst, d, lut, threads);
    if (d.nz <= 48) return run<48>(forward, src, dst, d, lut, threads);
    if (d.nz <= 64) return run<64>(forward, src, dst, d, lut, threads);
    return run<32>(forward, src, dst, d, lut, threads);
}

}  // namespace dp::direct
