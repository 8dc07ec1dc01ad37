// FIRST Super-LOR projectors on the GPU, the defaults: matched and fast (launches around tube.hpp; the
// paper's texture design is in cuda_faithful.cu, the resident model and the dispatch in cuda_model.cu).
//
// matched   forward: one thread per LOR, footprint reads in-plane and exact float linear
//           interpolation in z; back: one thread per voxel gathering the exact transpose (tube.hpp).
// fast      forward: (1) resample the image once per angle on the LOR lattice R[i][z][row]
//           (the footprint weights); (2) per angle, a block stages one along-plane R[i][*][*] at a time in
//           shared memory (one TMA box per plane into a ring of 3 buffers on sm_90; cp.async copies into
//           two buffers before) and each half-warp accumulates up to 8 LOR rows
//           of one ring difference for 64 radial bins (4 per lane) in registers, walking the
//           slices down the plane in pairs: 80 FMAs per 4 16-byte shared loads.
//           back: (1) the chunk's sinogram rearranged by ring difference (zero rows around each
//           one's LOR rows, 16-byte aligned windows); (2) per (angle, along sample i, 64 slices,
//           64 lattice rows) each lane sums 4 slices x 4 lattice rows of G[i][row][z] in registers
//           over the ring differences that reach its warp's slices, reading the LOR rows through L1:
//           160 FMAs per ring difference for 6 or 8 16-byte loads, no shared-memory sums and no
//           barrier; (3) the transposed resampling gathered per voxel.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "cuda_internal.cuh"

namespace dp::first::gpu::detail {

namespace {

// --- matched ------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256)
matched_forward_kernel(const Dims D, const AngleChunk A, const Footprints FP, const float* __restrict__ image,
                       const float* __restrict__ Q, const int* __restrict__ base, float* __restrict__ sino) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int rho = blockIdx.x * 32 + threadIdx.x;
    if (row >= D.n_rows * D.n_rows || rho >= D.n) return;
    const int q = blockIdx.z;
    const int r1 = row / D.n_rows, r2 = row % D.n_rows;
    sino[sino_index(D, A.first + q, r1, r2, rho)] =
        lor_forward_matched(D, FP, image, Q, base, r2 - r1 + D.n_rows - 1, r1 + r2, rho, A.a[q]);
}

__global__ void __launch_bounds__(256)
matched_back_kernel(const Dims D, const AngleChunk A, const Footprints FP, const float* __restrict__ sino,
                    const float* __restrict__ Q, const int* __restrict__ base, float* __restrict__ image,
                    bool accumulate) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
    const int iz = blockIdx.z;
    if (ix >= D.n || iy >= D.n) return;
    float acc = 0.0f;
    for (int q = 0; q < A.n; ++q)
        acc += voxel_back_matched(D, FP, sino, Q, base, A.first + q, A.a[q], ix, iy, iz, A.c[q], A.s[q]);
    const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
    image[v] = accumulate ? image[v] + acc : acc;
}

// --- fast ----------------------------------------------------------------------------------------------
// Lattice buffer of a chunk: L[q][i][z][row'] with row' = rho + j + J in [0, pitch), zero past n + 2J.
// A 32 (row) x 8 (i) block of lattice points, each warp an 8 x 4 tile of them (square_warp_tile): the
// image voxels a warp's footprints cover then lie in a compact patch, not along a turned line of 32
// points, whose reads touched a different image row per lane at oblique angles.
// The kernels and their launches take the block shape from these two constants.
constexpr int kTileRows = 32, kTileCols = 8;   // (x: row' or image x) x (y: i or image y)
static_assert(kTileRows == 32 && kTileCols == 8, "square_warp_tile's 8 x 4 tiling of a 32 x 8 block");
__device__ __forceinline__ int2 square_warp_tile() {
    const int t = threadIdx.y * kTileRows + threadIdx.x, w = t >> 5, l = t & 31;
    return make_int2(8 * (w & 3) + (l & 7), 4 * (w >> 2) + (l >> 3));
}

__global__ void __launch_bounds__(kTileRows * kTileCols) resample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch,
                                const float* __restrict__ image, float* __restrict__ L) {
    const int2 local = square_warp_tile();
    const int rr = blockIdx.x * kTileRows + local.x, i = blockIdx.y * kTileCols + local.y;
    const int q = blockIdx.z;
    if (rr >= pitch || i >= D.n) return;
    float* out = L + (static_cast<int64_t>(q) * D.n + i) * D.nz * pitch + rr;
    if (rr >= D.n_rows_ext()) {
        for (int z = 0; z < D.nz; ++z) out[static_cast<int64_t>(z) * pitch] = 0.0f;
        return;
    }
    const FootprintRead f = footprint_at(D, FP, A.a[q], i, rr);
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    for (int z = 0; z < D.nz; ++z) out[static_cast<int64_t>(z) * pitch] = footprint_read(image + z * plane, f);
}


// The folded taps Q[d][i][jj][t] of one (ring difference, along sample) into registers: 16-byte loads
// when a row of taps is 4 floats (K = 1; rows of NT floats from a cudaMalloc base are then 16-byte
// aligned), which is a fifth of the load instructions of the scalar reads.
template <int NJ, int NT>
__device__ __forceinline__ void load_folded_taps(const float* __restrict__ qp, float (&Qr)[NJ][NT]) {
    if constexpr (NT == 4) {
        const float4* q4 = reinterpret_cast<const float4*>(qp);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
            const float4 v = __ldg(q4 + jj);
            Qr[jj][0] = v.x, Qr[jj][1] = v.y, Qr[jj][2] = v.z, Qr[jj][3] = v.w;
        }
    } else {
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
            for (int t = 0; t < NT; ++t) Qr[jj][t] = __ldg(qp + jj * NT + t);
    }
}

// 3 blocks per SM (<= 85 registers): at 90 registers (the staging's carried offsets) only 2 fit.
// Each half-warp owns one work unit (ring difference, up to kFastRows LOR rows) and 64 radial bins, 4 per
// lane: a lane's 8-float window of a slice (two 16-byte loads) serves 4 bins x 5 taps, so a pair of
// slices costs 4 loads for 80 FMAs (before, 2 bins per lane of a whole warp: 6 float2 loads for 40 FMAs;
// 1.06 G instructions and 2.24 ms per 32 angles in Nsight Compute, now 0.92 G and 1.89 ms with the
// FFMAs 68 % of the instructions: benchmarks/RESULTS.md section 14g).
// Staging (kTma): a plane's nz x 68 floats are one TMA box issued by thread 0 into a ring of kTmaBuffers
// buffers; each warp waits on the buffer's "full" mbarrier, reads it, and arrives on its "free" mbarrier,
// and thread 0 refills a buffer once all 8 warps have freed it (common/bulk_copy.cuh). No block-wide
// barrier in the plane loop: a warp may run up to two planes ahead of the slowest. (!kTma, and before
// sm_90) each thread copies its share of 16-byte pieces with cp.async into two buffers, with a
// __syncthreads per plane. The stencil is the same.
constexpr int kTmaBuffers = 3;
template <int J, int K, bool kTma>
__global__ void __launch_bounds__(256, 3)
fast_forward_kernel(const Dims D, const AngleChunk A, int pitch, int pz_lo, int plane_rows, int n_units,
                    const FastUnit* __restrict__ units, const float* __restrict__ L,
                    const __grid_constant__ CUtensorMap lattice_map, const float* __restrict__ Q,
                    const int* __restrict__ base, float* __restrict__ sino) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2;
    constexpr int kBins = 4, W = NJ + kBins - 1;                // bins per lane, window floats per slice
    constexpr int COLS = 64 + 2 * J;                            // 64 radial bins + the tube's halo
    constexpr int kBuffers = kTma ? kTmaBuffers : 2;
    constexpr int kWarps = 8;                                   // the launch's 256 threads (free arrivals)
    static_assert(W == 8 && COLS % 4 == 0, "two float4 per slice window; float4 staging");
    // kBuffers plane buffers (plane_rows x COLS floats each), then the TMA staging's mbarriers (full, free
    // per buffer); the base rounded up to 128 bytes (a TMA box's destination alignment; fast_forward_smem
    // adds the slack)
    extern __shared__ __align__(128) unsigned char smem_bytes[];
    float* smem = reinterpret_cast<float*>(smem_bytes + ((128 - (cuda::shared_address(smem_bytes) & 127)) & 127));
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, half_lane = lane & 15;
    const int rho0 = blockIdx.x * 64, q = blockIdx.z;
    const int plane_size = plane_rows * COLS;
    uint64_t* plane_full = reinterpret_cast<uint64_t*>(smem + kBuffers * plane_size);   // [buffer]: its plane landed
    uint64_t* plane_free = plane_full + kBuffers;                // [buffer]: every warp is done reading it
    const int unit_id = (blockIdx.y * kWarps + warp) * 2 + (lane >> 4);
    const bool active = unit_id < n_units;
    FastUnit U{0, 0, 0, 0};
    if (active) U = units[unit_id];
    const int delta = U.d - (D.n_rows - 1), ad = delta < 0 ? -delta : delta;

    for (int k = tid; k < kBuffers * plane_size; k += blockDim.x) smem[k] = 0.0f;     // z padding stays zero
    if constexpr (kTma) {
        if (tid == 0) {
            for (int b = 0; b < kBuffers; ++b) {
                cuda::bulk_barrier_init(&plane_full[b], 1);
                cuda::bulk_barrier_init(&plane_free[b], kWarps);
            }
            cuda::bulk_barrier_init_fence();
        }
        cuda::bulk_proxy_fence();   // the zeros before the boxes that overwrite their slice rows
    }
    __syncthreads();
    const float* Lq = L + static_cast<int64_t>(q) * D.n * D.nz * pitch + rho0;
    // cp.async staging walks the plane's nz x V float4s flattened (element tid + n * 256), the same
    // elements for every plane i: the (z, column) of each step is carried incrementally, so a copy costs a
    // few adds instead of the division and 64-bit index arithmetic per copy (a quarter of the kernel's
    // instructions in the profile of 29f2428). Columns past the lattice pitch (the last radial block)
    // are zero-filled once, before the loop: no plane ever writes them; the TMA box writes them as zeros
    // (outside the tensor). (The same walk as common/window_walk.hpp, which the dual-head kernels use;
    // this one derives both offsets from (z, c) instead of carrying them, one register fewer: the helper
    // spills at this kernel's 80-register budget.)
    constexpr int V = COLS / 4;
    constexpr int kDz = 256 / V, kDc = 256 - kDz * V;
    const int v_in = min(V, (pitch - rho0) / 4);               // float4 columns inside the lattice rows
    auto stage = [&](int i, int buf) {                         // plane i -> buffer
        float* dst = smem + buf * plane_size + pz_lo * COLS;
        if constexpr (kTma) {   // thread 0 only
            cuda::bulk_expect_bytes(&plane_full[buf], static_cast<uint32_t>(D.nz * COLS * sizeof(float)));
            cuda::tensor_box_to_shared(dst, &lattice_map, rho0, (q * D.n + i) * D.nz, &plane_full[buf]);
        } else {
            const float* src = Lq + static_cast<int64_t>(i) * D.nz * pitch;
            int z = tid / V, c = tid - (tid / V) * V;
            for (int k = tid; k < D.nz * V; k += 256) {
                if (c < v_in) __pipeline_memcpy_async(dst + z * COLS + 4 * c, src + z * pitch + 4 * c, 16);
                z += kDz;
                c += kDc;
                if (c >= V) {
                    c -= V;
                    ++z;
                }
            }
            __pipeline_commit();
        }
    };
    // acc[m][b]: LOR row m0 + m, radial bin rho0 + 4 half_lane + b, summed over the planes
    float acc[kFastRows][kBins];
#pragma unroll
    for (int m = 0; m < kFastRows; ++m)
#pragma unroll
        for (int b = 0; b < kBins; ++b) acc[m][b] = 0.0f;

    if constexpr (kTma) {
        if (tid == 0)
            for (int i = 0; i < kBuffers - 1 && i < D.n; ++i) stage(i, i);
    } else {
        stage(0, 0);
        __pipeline_wait_prior(0);
        __syncthreads();   // every thread's pieces of plane 0 are in
    }
    // buf: plane i's buffer; phase: the parity of its fill (TMA: plane i is buffer buf's (i / kBuffers)-th)
    for (int i = 0, buf = 0, phase = 0; i < D.n; ++i) {
        if constexpr (!kTma) buf = i & 1;   // (derived, not carried: one register fewer at sm_80)
        if constexpr (kTma) cuda::bulk_wait(&plane_full[buf], phase);
        else if (i + 1 < D.n) stage(i + 1, buf ^ 1);
        if (active) {
            float Qr[NJ][NT];
            load_folded_taps<NJ, NT>(Q + q_index(D, U.d, i, 0, 0), Qr);
            // row m reads slices zr + 2m + t, t = 0 .. NT - 1: slice pair p (slices zr + 2p, zr + 2p + 1)
            // gives row p - k its taps t = 2k, 2k + 1 (k = 0 .. K), multiply-added onto the row's sum over
            // the planes so far (no partial sum per plane to add: an FADD and a zeroing per row and bin
            // fewer). Rows past the unit's count take their taps too and are never stored.
            const int zr = pz_lo + ad + 2 * U.m0 + base[static_cast<int64_t>(U.d) * D.n + i] - K;
            const float* P = smem + buf * plane_size + zr * COLS + kBins * half_lane;
#pragma unroll
            for (int pair = 0; pair < kFastRows + K; ++pair) {
                if (pair >= U.count + K) break;
                float v[2][W];
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int c = 0; c < W; c += 4) {
                        const float4 x = *reinterpret_cast<const float4*>(P + (2 * pair + h) * COLS + c);
                        v[h][c] = x.x, v[h][c + 1] = x.y, v[h][c + 2] = x.z, v[h][c + 3] = x.w;
                    }
#pragma unroll
                for (int k = K; k >= 0; --k) {
                    const int m = pair - k;   // rows before the first and past the last take nothing
                    if (m < 0 || m >= kFastRows) continue;
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
                            for (int b = 0; b < kBins; ++b)
                                acc[m][b] = fmaf(Qr[jj][2 * k + h], v[h][jj + b], acc[m][b]);
                }
            }
        }
        if constexpr (kTma) {
            __syncwarp();
            if (lane == 0) cuda::bulk_arrive(&plane_free[buf]);   // this warp is done with plane i
            // plane i + kBuffers - 1 into the buffer of plane i - 1, once every warp has freed it
            const int next = i + kBuffers - 1;
            if (tid == 0 && next < D.n) {
                const int nb = buf == 0 ? kBuffers - 1 : buf - 1;
                if (next >= kBuffers) cuda::bulk_wait(&plane_free[nb], (next / kBuffers - 1) & 1);
                stage(next, nb);
            }
            if (++buf == kBuffers) buf = 0, phase ^= 1;
        } else {
            // the next plane in (each thread's own pieces, the barrier then all of them), and every read
            // of this buffer done before the next iteration's stage refills it
            __pipeline_wait_prior(0);
            __syncthreads();
        }
    }
    if (!active) return;
    const int rho = rho0 + kBins * half_lane;
#pragma unroll
    for (int m = 0; m < kFastRows; ++m) {
        if (m >= U.count) break;
        const RowPair rp = row_pair(delta, U.m0 + m);
        float* out = sino + sino_index(D, A.first + q, rp.r1, rp.r2, 0);
#pragma unroll
        for (int b = 0; b < kBins; ++b)
            if (rho + b < D.n) out[rho + b] = acc[m][b];
    }
}

// Transposed stencil: G[q][i][row'][z] = sum over LORs of the folded taps times the sinogram, summed in
// registers. Row m of ring difference d adds its taps t = 0 .. 3 to slices zr + 2m + t (zr from the ring
// difference and plane i) of lattice rows row' = rho + jj, jj = 0 .. 4 (weight Q[d][i][jj][t]): a
// transposed convolution, upsampled by two in z. Each half-warp owns kBackSlices slices of one plane i and
// 64 lattice rows, 4 per lane (4 x 4 sums in registers); a lane reads its 8-float window of each LOR row
// that reaches its slices (two 16-byte loads through L1 from the sinogram rearranged by ring difference,
// below) and multiply-adds it onto its 4 rows x 5 taps for each slice the row reaches. A block is 8 warps,
// 64 slices of one plane. Each warp walks only the ring differences whose rows reach its 8 slices (they
// cover about 2 M + 2 of the nz slices; a list made once per block), at its own pace: no barrier in the
// loop, no sums in shared memory.
// (Before, up to 825f494: one thread per lattice column with its nz slices in shared memory, two
// read-modify-writes per LOR row besides 5 loads for 20 FMAs, 1.93 ms per 33 angles in Nsight Compute;
// the register tiles with the LOR rows staged in shared memory per ring difference waited at that barrier
// for the warps the ring difference reached: benchmarks/RESULTS.md section 14h.)
constexpr int kBackSlices = 4;                             // slices per half-warp (per lane: 4 rows' x 4)
constexpr int kBackWarpSlices = 2 * kBackSlices;           // slices per warp
constexpr int kBackBlockSlices = 64;                       // slices per block
constexpr int kBackThreads = 32 * (kBackBlockSlices / kBackWarpSlices);
// Rows m_lo + k, k = 0 .. kBackRowsPerTile - 1, reach a half-warp's slices (tap t of row k on slice
// 2k + t - 3 - PAR of the tile). For a warp the ring difference reaches (zr <= zw + 7, zr + 2M + 1 >= zw),
// m_lo = floor((z0 - zr - 3) / 2) lies in [-(kBackSlices + 1), M + kBackSlices / 2 - 1], so the rows it
// reads lie in [-kBackPad, M + kBackPad): the rearranged sinogram has kBackPad zero rows on each side of
// a ring difference's rows, and no row needs a bounds test.
constexpr int kBackRowsPerTile = kBackSlices / 2 + 2;
constexpr int kBackPad = kBackSlices + 1;
static_assert(kBackSlices % 4 == 0 && kBackBlockSlices % kBackWarpSlices == 0 && kBackBlockSlices % 16 == 0,
              "float4 tiles; a block's slices a multiple of the transposed resampling's 16");

// Rows of the rearranged sinogram before ring difference d's: sum over d' < d of (M(d') + 2 kBackPad),
// M(d') = R - |d' - (R - 1)| LOR rows (d = 2R - 1: the rows of one angle; the host sizes the buffer with it).
DP_HD int back_rows_before(int R, int d) {
    int rows = 0;
    for (int e = 0; e < d; ++e) rows += R - abs(e - (R - 1)) + 2 * kBackPad;
    return rows;
}

// The chunk's sinogram rearranged for the transposed stencil's loads: per angle q and ring difference d,
// kBackPad zero rows, the M LOR rows m = 0 .. M - 1 ((r1, r2) = (m, m + delta) or (m - delta, m)), kBackPad
// zero rows; each row P[c] = sino[..][c - 2J] for c - 2J in [0, n), zero elsewhere, c in [0, back_pitch)
// (back_pitch = 64 per radial block + 2J, a multiple of 4), so that a lane's window of bins
// r0 - 2J .. r0 + 3 starts 16-byte aligned at c = r0. One block per (ring difference, angle).
__global__ void __launch_bounds__(256) rearrange_sinogram_kernel(const Dims D, const AngleChunk A, int back_pitch,
                                                                 const float* __restrict__ sino, float* __restrict__ P) {
    const int d = blockIdx.x, q = blockIdx.y, R = D.n_rows;
    const int delta = d - (R - 1), M = R - abs(delta);
    const int64_t rows_per_angle = back_rows_before(R, D.n_deltas());
    float* out = P + (q * rows_per_angle + back_rows_before(R, d)) * back_pitch;
    const float* y = sino + (static_cast<int64_t>(A.first + q) * R * R + (delta >= 0 ? delta : -delta * R)) * D.n;
    for (int e = threadIdx.x; e < (M + 2 * kBackPad) * back_pitch; e += 256) {
        const int r = e / back_pitch, m = r - kBackPad, rho = e - r * back_pitch - 2 * D.J;
        out[e] = m >= 0 && m < M && rho >= 0 && rho < D.n ? y[static_cast<int64_t>(m) * (R + 1) * D.n + rho] : 0.0f;
    }
}

// acc[s][b] += the taps of rows m_lo + k (k = 0 .. kBackRowsPerTile - 1, y: row m_lo's window, rows
// row_step floats apart) that land on slice z0 + s; PAR = (z0 - zr - 3) - 2 m_lo, so tap t of row k lands
// on s = 2k + t - 3 - PAR (all known at compile time: the sums stay in registers).
template <int PAR, int NJ, int NT>
__device__ __forceinline__ void add_back_rows(const float* __restrict__ y, int row_step, const float (&Qr)[NJ][NT],
                                              float (&acc)[kBackSlices][4]) {
    float w[kBackRowsPerTile][8];                              // row k: y[0 .. 7], bins r0 - 2J .. r0 + 3
#pragma unroll
    for (int k = 0; k < kBackRowsPerTile; ++k) {
        if (2 * k - PAR < 0 || 2 * k - PAR > kBackSlices + 2) continue;   // no tap of this row in the tile
        const float4* p = reinterpret_cast<const float4*>(y + k * row_step);
        const float4 a = __ldg(p), c = __ldg(p + 1);
        w[k][0] = a.x, w[k][1] = a.y, w[k][2] = a.z, w[k][3] = a.w, w[k][4] = c.x, w[k][5] = c.y, w[k][6] = c.z, w[k][7] = c.w;
    }
#pragma unroll
    for (int k = 0; k < kBackRowsPerTile; ++k)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const int s = 2 * k + t - 3 - PAR;
            if (s < 0 || s >= kBackSlices) continue;
#pragma unroll
            for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
                for (int b = 0; b < 4; ++b) acc[s][b] = fmaf(Qr[jj][t], w[k][4 + b - jj], acc[s][b]);
        }
}

template <int J, int K>
__global__ void __launch_bounds__(kBackThreads, 3)
fast_back_kernel(const Dims D, int pitch, int g_slices, int n_zblocks, int back_pitch,
                 const float* __restrict__ P, const float* __restrict__ Q, const int* __restrict__ base,
                 float* __restrict__ G) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2;
    static_assert(J == 2 && NT == 4, "the 8-float window (4 rows' + 2J) and the row reach assume the 5 x 3 tube");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int l0 = blockIdx.x * 64, q = blockIdx.z;            // q: the angle within the launch (P and G)
    const int i = blockIdx.y / n_zblocks, zb = blockIdx.y - i * n_zblocks;
    const int zw = zb * kBackBlockSlices + warp * kBackWarpSlices;
    const int z0 = zw + (lane >> 4) * kBackSlices, r0 = l0 + 4 * (lane & 15);
    const int R = D.n_rows;
    // Once per block, in shared memory: the plane's folded taps, first slice zr and rearranged-row offset
    // of every ring difference, and each warp's list of the ring differences that reach its slices. Read
    // from global memory per ring difference, the chain base -> zr -> reach -> taps -> rows waited out two
    // global-memory latencies (long scoreboard 29 % of the stall samples); the reach test of all 59 ring
    // differences cost about 15 instructions each per warp.
    const int n_deltas = D.n_deltas();
    extern __shared__ __align__(16) float smem[];
    float* s_taps = smem;                                      // [d][jj][t]
    int* s_zr = reinterpret_cast<int*>(s_taps + n_deltas * NJ * NT);
    int* s_first = s_zr + n_deltas;                            // rows of the rearranged sinogram before d's
    int* s_list = s_first + n_deltas + warp * n_deltas;        // this warp's reached ring differences
    for (int k = threadIdx.x; k < n_deltas * NJ * NT; k += kBackThreads) {
        const int d = k / (NJ * NT);
        s_taps[k] = __ldg(Q + q_index(D, d, i, 0, 0) + (k - d * NJ * NT));
    }
    for (int d = threadIdx.x; d < n_deltas; d += kBackThreads) {
        const int delta = d - (R - 1);
        s_zr[d] = (delta < 0 ? -delta : delta) + __ldg(base + static_cast<int64_t>(d) * D.n + i) - K;
        s_first[d] = back_rows_before(R, d);
    }
    __syncthreads();
    int n_reached = 0;
    if (zw < D.nz)
        for (int d0 = 0; d0 < n_deltas; d0 += 32) {
            // the rows of d reach slices zr .. zr + 2M + 1; the warp's are zw .. zw + 7 (one plane, one test)
            const int d = d0 + lane, M = R - abs(d - (R - 1));
            const bool reached = d < n_deltas && s_zr[d] <= zw + kBackWarpSlices - 1 && s_zr[d] + 2 * M + 1 >= zw;
            const unsigned mask = __ballot_sync(0xffffffffu, reached);
            if (reached) s_list[n_reached + __popc(mask & ((1u << lane) - 1))] = d;
            n_reached += __popc(mask);
        }
    __syncwarp();
    float acc[kBackSlices][4];
#pragma unroll
    for (int s = 0; s < kBackSlices; ++s)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[s][b] = 0.0f;
    // ring difference d's row m at (s_first[d] + kBackPad + m) * back_pitch of this angle's rows
    const float* P_q = P + static_cast<int64_t>(q) * back_rows_before(R, n_deltas) * back_pitch + r0;
    for (int u = 0; u < n_reached; ++u) {
        const int d = s_list[u], zr = s_zr[d];                 // row m's first slice: zr + 2m
        float Qr[NJ][NT];
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {                      // 16-byte shared loads (NT = 4), broadcast
            const float4 v = reinterpret_cast<const float4*>(s_taps + d * NJ * NT)[jj];
            Qr[jj][0] = v.x, Qr[jj][1] = v.y, Qr[jj][2] = v.z, Qr[jj][3] = v.w;
        }
        const int e = z0 - zr - 3, m_lo = e >> 1;              // floor((z0 - zr - 3) / 2); one parity per warp
        const float* y = P_q + static_cast<int64_t>(s_first[d] + kBackPad + m_lo) * back_pitch;
        if (e & 1) add_back_rows<1, NJ, NT>(y, back_pitch, Qr, acc);
        else add_back_rows<0, NJ, NT>(y, back_pitch, Qr, acc);
    }
    // G[q][i][row'][z], g_slices (a multiple of the transposed resampling's 16 slices per thread) per
    // lattice point, zero past nz and past the lattice rows: that kernel reads a voxel's slices as 16-byte
    // loads. Warps past nz but inside g_slices write their zeros too.
    if (zw >= g_slices) return;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const int rr = r0 + b;
        if (rr >= pitch) break;
        const bool in_lattice = rr < D.n_rows_ext();
        float v[kBackSlices];
#pragma unroll
        for (int s = 0; s < kBackSlices; ++s) v[s] = in_lattice && z0 + s < D.nz ? acc[s][b] : 0.0f;
        float4* out = reinterpret_cast<float4*>(G + ((static_cast<int64_t>(q) * D.n + i) * pitch + rr) * g_slices + z0);
#pragma unroll
        for (int s = 0; s < kBackSlices; s += 4) out[s / 4] = make_float4(v[s], v[s + 1], v[s + 2], v[s + 3]);
    }
}

// The transposed resampling, gathered per voxel: kUnresampleSlices slices per thread, read from
// G[q][i][row'][z] as 16-byte loads (the layout the back kernel writes). (ix, iy) in 8 x 4 warp tiles, as
// in the resampling: the lattice points a warp's voxels gather from then lie in a compact patch of
// (i, row). The candidate search of each (voxel, angle) is paid once per 16 slices (8 before, each
// slice a 4-byte load of its own G[q][i][z][row'] row: 1.02 -> 0.49 ms per 32 angles in Nsight Compute).
constexpr int kUnresampleSlices = 16;
static_assert(kUnresampleSlices % 4 == 0, "float4 reads");
__global__ void __launch_bounds__(kTileRows * kTileCols)
unresample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch, int g_slices,
                  const float* __restrict__ G, float* __restrict__ image, bool accumulate) {
    constexpr int ZB = kUnresampleSlices;
    const int2 local = square_warp_tile();
    const int ix = blockIdx.x * kTileRows + local.x, iy = blockIdx.y * kTileCols + local.y;
    const int z0 = blockIdx.z * ZB;
    if (ix >= D.n || iy >= D.n) return;
    float acc[ZB];
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz) acc[zz] = 0.0f;
    for (int q = 0; q < A.n; ++q) {
        const float* Gq = G + static_cast<int64_t>(q) * D.n * pitch * g_slices + z0;
        for_each_overlapping_lattice_point(D, FP, A.a[q], ix, iy, A.c[q], A.s[q], [&](int i, int row, float w) {
            const float4* g = reinterpret_cast<const float4*>(Gq + (static_cast<int64_t>(i) * pitch + row + D.J) * g_slices);
#pragma unroll
            for (int v = 0; v < ZB / 4; ++v) {
                const float4 x = __ldg(g + v);
                acc[4 * v] = fmaf(w, x.x, acc[4 * v]);
                acc[4 * v + 1] = fmaf(w, x.y, acc[4 * v + 1]);
                acc[4 * v + 2] = fmaf(w, x.z, acc[4 * v + 2]);
                acc[4 * v + 3] = fmaf(w, x.w, acc[4 * v + 3]);
            }
        });
    }
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    float* out = image + static_cast<int64_t>(iy) * D.n + ix;
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz)
        if (z0 + zz < D.nz) {
            float* o = out + (z0 + zz) * plane;
            *o = accumulate ? *o + acc[zz] : acc[zz];
        }
}

}  // namespace

long long fast_back_grid_rows(const Impl& m) {
    return static_cast<long long>(m.host.D.n) * div_up(m.host.D.nz, kBackBlockSlices);
}
// the plane buffers (two for cp.async, kTmaBuffers for TMA), the TMA staging's mbarriers (full and free per
// buffer), and the slack that lets the kernel align its base to 128
constexpr int kFastCols = 64 + 2 * kFastJ;   // a staged plane's columns: 64 radial bins and the tube's halo
size_t fast_forward_smem(const Impl& m, bool tma) {
    const size_t plane_bytes = sizeof(float) * m.plane_rows * kFastCols;
    return tma ? kTmaBuffers * (plane_bytes + 2 * sizeof(uint64_t)) + 128 : 2 * plane_bytes + 128;
}
// the transposed stencil's shared memory: its plane's taps, first slices, row offsets and the warps' lists of
// ring differences (the sinogram is read through L1)
size_t fast_back_smem(const Impl& m) {
    return static_cast<size_t>(m.host.D.n_deltas()) * ((2 * kFastJ + 1) * (2 * kFastK + 2) + 2 + kBackThreads / 32) *
           sizeof(float);
}

void allow_fast_kernels_smem(int max_smem) {
    for (const void* kernel : {reinterpret_cast<const void*>(fast_forward_kernel<kFastJ, kFastK, false>),
                               reinterpret_cast<const void*>(fast_forward_kernel<kFastJ, kFastK, true>),
                               reinterpret_cast<const void*>(fast_back_kernel<kFastJ, kFastK>)})
        DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
}

void count_fast_kernel_slots(Impl& m) {
    // a model whose planes exceed the shared memory cannot use the fast kernels (fast_unsupported_reason)
    if (std::max(m.fast_forward_smem[0], m.fast_back_smem) > static_cast<size_t>(m.max_smem)) return;
    m.fast_forward_slots = cuda::resident_blocks(fast_forward_kernel<kFastJ, kFastK, false>, 256, m.fast_forward_smem[0]);
    if (m.fast_forward_tma_unsupported.empty()) {
        // the TMA ring's third plane buffer must not cost resident blocks (planes of more slices than the
        // full scanner's 59 would leave 2 blocks per SM instead of 3), so the launches' waves are the same
        // for both stagings
        if (cuda::resident_blocks(fast_forward_kernel<kFastJ, kFastK, true>, 256, m.fast_forward_smem[1]) <
            m.fast_forward_slots) {
            m.fast_forward_tma_unsupported = "n_rows: the TMA staging's " + std::to_string(kTmaBuffers) +
                                             " slice planes leave fewer resident blocks than the cp.async staging's 2";
            m.fast_forward_tma = false;
        }
    }
    m.fast_back_slots = cuda::resident_blocks(fast_back_kernel<kFastJ, kFastK>, kBackThreads, m.fast_back_smem);
}

// Opt-in (FirstDeviceModel.fast_forward_tma = True) until it has run on a GPU: the TMA staging was written
// in sessions that got no device machine (benchmarks/RESULTS.md section 14w). The cp.async staging is the
// one measured (section 14g). Turn this on once the FIRST gpu tests, first_staging.py and compute-sanitizer
// have passed with it.
constexpr bool kTmaStagingByDefault = false;

namespace {

// The tensor map of a lattice buffer at `base` of `rows` rows (angles x n x nz) of m.pitch floats, read in
// boxes of one plane of a radial block: kFastCols columns x nz rows (columns past the pitch land as zeros).
// Returns "" or why the driver would not encode it.
std::string encode_lattice_map(const Impl& m, CUtensorMap* map, const void* base, uint64_t rows) {
    return cuda::encode_float_tensor_map(map, base, m.pitch, rows, m.pitch, kFastCols, m.host.D.nz);
}

}  // namespace

// The TMA staging where it can run: an sm_90 image of the kernel, a driver with the tensor-map encoder, a
// plane of at most 256 slices (a box's limit), its ring of planes within the shared memory and a tensor map
// the driver accepts for the lattice's shape (tried on the model's own buffer: encoding reads no memory).
void choose_fast_forward_staging(Impl& m) {
    const Dims& D = m.host.D;
    std::string why = cuda::bulk_copy_kernel_unsupported(reinterpret_cast<const void*>(fast_forward_kernel<kFastJ, kFastK, true>));
    if (why.empty() && (D.J != kFastJ || D.K != kFastK)) why = "the fast kernels are compiled for the 5 x 3 tube";
    if (why.empty() && m.pitch < kFastCols)   // a box wider than the tensor is not a valid map
        why = "n: the lattice rows (" + std::to_string(m.pitch) + " floats) are narrower than a plane's 68-column box";
    if (why.empty() && D.nz > 256)
        why = "n_rows: a plane of " + std::to_string(D.nz) + " slices exceeds a TMA box's 256 rows";
    if (why.empty() && fast_forward_smem(m, true) > static_cast<size_t>(m.max_smem))
        why = "n_rows: the TMA staging's " + std::to_string(kTmaBuffers) + " slice planes need " +
              std::to_string(fast_forward_smem(m, true) >> 10) + " KiB of shared memory, the GPU has " +
              std::to_string(m.max_smem >> 10);
    if (why.empty()) {
        CUtensorMap probe{};
        why = encode_lattice_map(m, &probe, m.Q.as<float>(), static_cast<uint64_t>(D.n) * D.nz);
    }
    m.fast_forward_tma_unsupported = why;
    m.fast_forward_tma = why.empty() && kTmaStagingByDefault;
}

namespace {

// Angles per launch of a fast projection of n angles: at most kChunk and what the workspace budget holds
// (bytes_per_angle: the lattice's, and the back projection's rearranged sinogram), the even split whose
// launches take the fewest waves of a kernel of blocks_per_angle blocks on `slots` resident blocks. The
// full scanner's forward (27 blocks per angle, 396 slots on an H200) takes 3 launches of 44, 43, 43
// angles, 3.0 waves each, instead of 32 x 4 + 2 (2.2 waves each and a last launch of 54 blocks).
int fast_chunk(int n, long long blocks_per_angle, long long slots, size_t bytes_per_angle) {
    const int cap = static_cast<int>(std::clamp<size_t>(kLatticeBudget / bytes_per_angle, 1, kChunk));
    return waves::wave_balanced_launch_size(n, cap, blocks_per_angle, slots);
}

}  // namespace

void resample(Impl& m, const AngleChunk& ch, const float* image, float* lattice, cudaStream_t s) {
    const Dims& D = m.host.D;
    resample_kernel<<<dim3(div_up(m.pitch, kTileRows), div_up(D.n, kTileCols), ch.n), dim3(kTileRows, kTileCols), 0, s>>>(D, ch, m.footprints(),
                                                                                           m.pitch, image, lattice);
    DP_CUDA_CHECK_LAUNCH("resample_kernel");
}

void forward_matched(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s) {
    const Dims& D = m.host.D;
    const dim3 lor_block(32, 8);
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        const dim3 grid(div_up(D.n, 32), div_up(static_cast<int64_t>(D.n_rows) * D.n_rows, 8), ch.n);
        matched_forward_kernel<<<grid, lor_block, 0, s>>>(D, ch, m.footprints(), image, m.Q.as<float>(),
                                                          m.base.as<int>(), sino);
        DP_CUDA_CHECK_LAUNCH("matched_forward_kernel");
    });
}

void back_matched(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s) {
    const Dims& D = m.host.D;
    const dim3 vox_block(32, 8);
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        const dim3 grid(div_up(D.n, 32), div_up(D.n, 8), D.nz);
        matched_back_kernel<<<grid, vox_block, 0, s>>>(D, ch, m.footprints(), sino, m.Q.as<float>(),
                                                       m.base.as<int>(), image, ch.first > 0);
        DP_CUDA_CHECK_LAUNCH("matched_back_kernel");
    });
}

void forward_fast(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s) {
    const Dims& D = m.host.D;
    const int n = static_cast<int>(angles.index.size());
    const int gx = div_up(D.n, 64), gy = div_up(m.n_units, 16);      // 8 warps, 2 units each
    // the TMA staging keeps the cp.async staging's resident blocks (count_fast_kernel_slots): one chunk size
    const int chunk = fast_chunk(n, static_cast<long long>(gx) * gy, m.fast_forward_slots, m.lattice_bytes(1, D.nz));
    float* L = m.lattice_for(std::min(chunk, n), D.nz);
    if (m.fast_forward_tma) {
        const uint64_t rows = static_cast<uint64_t>(std::min(chunk, n)) * D.n * D.nz;
        if (m.lattice_map_base != L || m.lattice_map_rows != rows) {
            const std::string why = encode_lattice_map(m, &m.lattice_map, L, rows);
            if (why.empty()) {
                m.lattice_map_base = L;
                m.lattice_map_rows = rows;
            } else {   // the model-upload probe passed; should this buffer's map not, stage with cp.async
                m.fast_forward_tma_unsupported = why;
                m.fast_forward_tma = false;
                m.lattice_map_base = nullptr;
            }
        }
    }
    const bool tma = m.fast_forward_tma;
    auto* kernel = tma ? fast_forward_kernel<kFastJ, kFastK, true> : fast_forward_kernel<kFastJ, kFastK, false>;
    const size_t smem = m.fast_forward_smem[tma];
    for_each_chunk(angles, chunk, [&](const AngleChunk& ch) {
        resample(m, ch, image, L, s);
        const dim3 grid(gx, gy, ch.n);
        kernel<<<grid, 256, smem, s>>>(D, ch, m.pitch, m.pz_lo, m.plane_rows, m.n_units, m.units.as<FastUnit>(), L,
                                       m.lattice_map, m.Q.as<float>(), m.base.as<int>(), sino);
        DP_CUDA_CHECK_LAUNCH("fast_forward_kernel");
    });
}

void back_fast(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s) {
    const Dims& D = m.host.D;
    auto* kernel = fast_back_kernel<kFastJ, kFastK>;
    const int n_blocks_z = div_up(D.nz, kUnresampleSlices), g_slices = n_blocks_z * kUnresampleSlices;
    const int n = static_cast<int>(angles.index.size());
    const int n_zblocks = div_up(D.nz, kBackBlockSlices);
    const int gx = div_up(m.pitch, 64), gy = fast_back_grid_rows(m);   // <= 65535: fast_unsupported_reason
    // the rearranged sinogram: per angle n_rows^2 LOR rows and 2 kBackPad zero rows per ring difference,
    // sized with the same back_rows_before the kernels index it with
    const int back_pitch = 64 * gx + 2 * kFastJ;
    const size_t rearranged_per_angle = static_cast<size_t>(back_rows_before(D.n_rows, D.n_deltas())) * back_pitch * sizeof(float);
    const int chunk = fast_chunk(n, static_cast<long long>(gx) * gy, m.fast_back_slots,
                                 m.lattice_bytes(1, g_slices) + rearranged_per_angle);
    float* G = m.lattice_for(std::min(chunk, n), g_slices);
    m.rearranged_sino.reserve(static_cast<size_t>(std::min(chunk, n)) * rearranged_per_angle);
    float* P = m.rearranged_sino.as<float>();
    for_each_chunk(angles, chunk, [&](const AngleChunk& ch) {
        rearrange_sinogram_kernel<<<dim3(D.n_deltas(), ch.n), 256, 0, s>>>(D, ch, back_pitch, sino, P);
        DP_CUDA_CHECK_LAUNCH("rearrange_sinogram_kernel");
        kernel<<<dim3(gx, gy, ch.n), kBackThreads, m.fast_back_smem, s>>>(D, m.pitch, g_slices, n_zblocks, back_pitch, P,
                                                           m.Q.as<float>(), m.base.as<int>(), G);
        DP_CUDA_CHECK_LAUNCH("fast_back_kernel");
        unresample_kernel<<<dim3(div_up(D.n, kTileRows), div_up(D.n, kTileCols), n_blocks_z), dim3(kTileRows, kTileCols),
                            0, s>>>(D, ch, m.footprints(), m.pitch, g_slices, G, image, ch.first > 0);
        DP_CUDA_CHECK_LAUNCH("unresample_kernel");
    });
}

}  // namespace dp::first::gpu::detail
