// GPU FFT convolution engine (cuFFT). See fft_cuda.hpp for the pipeline, fft.hpp for the maths.
#include <cuComplex.h>
#include <cufft.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "fft_cuda.hpp"

namespace dp::fft::gpu {
namespace {

// ---- cuFFT error checking -------------------------------------------------------------------------
const char* cufft_error_name(cufftResult r) {
    switch (r) {
        case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
        case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
        default: return "unknown cufftResult";
    }
}

void check_cufft(cufftResult r, const char* what) {
    if (r == CUFFT_SUCCESS) return;
    const std::string msg = std::string("cuFFT error in ") + what + ": " + cufft_error_name(r) +
                            " (code " + std::to_string(static_cast<int>(r)) + ")";
    if (r == CUFFT_ALLOC_FAILED) throw OutOfMemory(msg);
    throw std::runtime_error(msg);
}

#define DP_CUFFT_CHECK(call) check_cufft((call), #call)

// ---- kernels --------------------------------------------------------------------------------------
// Pad / crop kernels use 32 x 8 tiles of (x, y): a warp reads 32 consecutive floats of a row, and
// short rows (Mx ~ 20..200) do not leave most of a long 1D block idle.
constexpr int kTileX = 32, kTileY = 8;
constexpr int kFlatThreads = 256;

dim3 tile_grid(int nx, int ny, int nz) {
    return dim3((nx + kTileX - 1) / kTileX, (ny + kTileY - 1) / kTileY, nz);
}

// One launch writes every slot of the padded buffer (zeros included), so no memset is needed:
//   dst[j](z, y, x) = src(z, y, x) * c_j(y, x) inside the image, 0 in the padding.
// grid: tile_grid(Mx, My, Mz * slots).
__global__ void pad_kernel(const float* __restrict__ src, const float* __restrict__ coef,
                           float* __restrict__ dst, Shape3 n, Shape3 m) {
    const int x = blockIdx.x * kTileX + threadIdx.x;
    const int y = blockIdx.y * kTileY + threadIdx.y;
    if (x >= m.nx || y >= m.ny) return;
    const int zz = blockIdx.z;  // j * Mz + z
    const int j = zz / m.nz, z = zz - j * m.nz;
    float v = 0.0f;
    if (x < n.nx && y < n.ny && z < n.nz) {
        v = __ldg(src + (static_cast<long long>(z) * n.ny + y) * n.nx + x);
        if (coef) v *= __ldg(coef + (static_cast<long long>(j) * n.ny + y) * n.nx + x);
    }
    dst[(static_cast<long long>(zz) * m.ny + y) * m.nx + x] = v;
}

// dst(z, y, x) = sum_{j < slots} c_j(y, x) * buf[j](z, y, x)   (c_j = 1 without coefficients):
// crop, coefficient and the sum over terms in one pass. grid: tile_grid(nx, ny, nz).
__global__ void crop_kernel(const float* __restrict__ buf, const float* __restrict__ coef,
                            float* __restrict__ dst, Shape3 n, Shape3 m, int slots) {
    const int x = blockIdx.x * kTileX + threadIdx.x;
    const int y = blockIdx.y * kTileY + threadIdx.y;
    if (x >= n.nx || y >= n.ny) return;
    const int z = blockIdx.z;
    const long long slot = static_cast<long long>(m.nz) * m.ny * m.nx;
    const long long p = (static_cast<long long>(z) * m.ny + y) * m.nx + x;
    const long long pix = static_cast<long long>(y) * n.nx + x;
    const long long plane = static_cast<long long>(n.ny) * n.nx;
    float acc = 0.0f;
    for (int j = 0; j < slots; ++j) {
        const float v = __ldg(buf + j * slot + p);
        acc = coef ? fmaf(__ldg(coef + j * plane + pix), v, acc) : acc + v;
    }
    dst[static_cast<long long>(z) * plane + pix] = acc;
}

// Forward: X[0][k] = sum_j K[j][k] X[j][k] (in place; each thread reads its k of every slot first).
__global__ void product_sum_kernel(cufftComplex* __restrict__ X, const cufftComplex* __restrict__ K,
                                   long long mc, int rank) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < mc;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        cufftComplex acc = cuCmulf(K[k], X[k]);
        for (int j = 1; j < rank; ++j) acc = cuCaddf(acc, cuCmulf(K[j * mc + k], X[j * mc + k]));
        X[k] = acc;
    }
}

// Adjoint: Y[j][k] = conj(K[j][k]) Y[0][k] for every j (Y[0][k] read into a register first).
__global__ void conj_product_spread_kernel(cufftComplex* __restrict__ Y, const cufftComplex* __restrict__ K,
                                           long long mc, int rank) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < mc;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        const cufftComplex y = Y[k];
        for (int j = rank - 1; j >= 0; --j) Y[j * mc + k] = cuCmulf(cuConjf(K[j * mc + k]), y);
    }
}

__global__ void scale_kernel(cufftComplex* __restrict__ a, long long count, float s) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < count;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        a[k].x *= s;
        a[k].y *= s;
    }
}

unsigned flat_blocks(long long count) {
    const long long b = (count + kFlatThreads - 1) / kFlatThreads;
    return static_cast<unsigned>(b < (1 << 20) ? (b > 0 ? b : 1) : (1 << 20));  // grid-stride beyond
}

// ---- plans and per-stream scratch -------------------------------------------------------------------
class CufftPlan {
public:
    // `batch` contiguous 3D transforms of the padded grid (basic layout: real slots of Mz My Mx,
    // complex slots of Mz My (Mx/2+1)), bound to `stream`.
    CufftPlan(const Shape3& m, cufftType type, int batch, cudaStream_t stream) {
        int dims[3] = {m.nz, m.ny, m.nx};
        DP_CUFFT_CHECK(cufftPlanMany(&handle_, 3, dims, nullptr, 1, 0, nullptr, 1, 0, type, batch));
        valid_ = true;
        DP_CUFFT_CHECK(cufftSetStream(handle_, stream));
    }
    ~CufftPlan() {
        if (valid_) cufftDestroy(handle_);  // no throw from a destructor
    }
    CufftPlan(const CufftPlan&) = delete;
    CufftPlan& operator=(const CufftPlan&) = delete;
    cufftHandle get() const { return handle_; }

private:
    cufftHandle handle_{};
    bool valid_ = false;
};

struct StreamContext {
    cudaStream_t stream = nullptr;
    int capacity = 0;                 // number of slots the scratch holds
    cuda::DeviceBuffer real, spec;    // (slots, Mz, My, Mx) float, (slots, Mc) complex
    std::map<std::pair<int, int>, std::unique_ptr<CufftPlan>> plans;  // (type, batch)

    void reserve(int slots, const Shape3& m, long long mc) {
        if (slots <= capacity) return;
        // Free before allocating the larger buffers (cudaFree waits for pending work using them).
        real = cuda::DeviceBuffer();
        spec = cuda::DeviceBuffer();
        real = cuda::DeviceBuffer(sizeof(float) * static_cast<size_t>(slots) * m.size());
        spec = cuda::DeviceBuffer(sizeof(cufftComplex) * static_cast<size_t>(slots) * mc);
        capacity = slots;
    }

    cufftHandle plan(cufftType type, int batch, const Shape3& m) {
        auto& p = plans[{static_cast<int>(type), batch}];
        if (!p) p.reset(new CufftPlan(m, type, batch, stream));
        return p->get();
    }

    size_t bytes() const { return real.bytes() + spec.bytes(); }
};

}  // namespace

// ---- the engine -------------------------------------------------------------------------------------
struct CudaFftEngine::Impl {
    struct View {
        int rank = 1;
        cuda::DeviceBuffer spectra;       // (rank, Mc) cufftComplex, scaled by 1/(Mz My Mx)
        cuda::DeviceBuffer coefficients;  // (rank, ny, nx) float, or empty (c_1 = 1)
        const cufftComplex* K() const { return spectra.as<cufftComplex>(); }
        const float* coef() const { return coefficients.bytes() ? coefficients.as<float>() : nullptr; }
    };

    Shape3 n, m;
    long long mc;
    int device = 0;
    ViewTable<View> views;
    std::map<void*, std::unique_ptr<StreamContext>> contexts;
    mutable std::mutex mutex;  // serialises enqueueing (scratch reuse) and the view table

    StreamContext& context(void* stream) {
        auto& c = contexts[stream];
        if (!c) {
            c.reset(new StreamContext);
            c->stream = static_cast<cudaStream_t>(stream);
        }
        return *c;
    }

    // The stream's context with scratch for a rank-r projection, on the engine's device.
    StreamContext& prepare(int r, void* stream) {
        check_device();
        StreamContext& ctx = context(stream);
        ctx.reserve(r, m, mc);
        return ctx;
    }

    void check_device() const {
        int d = -1;
        DP_CUDA_CHECK(cudaGetDevice(&d));
        if (d != device)
            throw ValueError("device: this FFT engine lives on CUDA device " + std::to_string(device) +
                             " but device " + std::to_string(d) + " is current");
    }
};

CudaFftEngine::CudaFftEngine(const Shape3& image, const Shape3& padded) : impl_(new Impl) {
    check_shapes(image, padded);
    // Grid limit of the pad/crop launches: gridDim.z (Mz, times the rank for pad) <= 65535.
    require(padded.nz <= 65535, "padded: Mz must be <= 65535 on the GPU");
    impl_->n = image;
    impl_->m = padded;
    impl_->mc = half_spectrum_size(padded);
    DP_CUDA_CHECK(cudaGetDevice(&impl_->device));
}

CudaFftEngine::~CudaFftEngine() = default;

void CudaFftEngine::set_view(int v, const ViewTerms& t) {
    Impl& s = *impl_;
    check_view_terms(t);
    require(static_cast<long long>(t.rank) * s.m.nz <= 65535,
            "rank: rank * Mz must be <= 65535 on the GPU (pad kernel grid)");
    std::lock_guard<std::mutex> lock(s.mutex);
    s.check_device();
    Impl::View view;
    view.rank = t.rank;
    const long long count = t.rank * s.mc;
    view.spectra = cuda::DeviceBuffer(sizeof(cufftComplex) * static_cast<size_t>(count));
    if (t.spectra) {
        view.spectra.upload(t.spectra, sizeof(cufftComplex) * static_cast<size_t>(count));
    } else {
        // The kernels' R2C on the device, batched over the r terms, straight into the resident
        // spectra (legacy default stream, synchronised below).
        StreamContext& ctx = s.context(nullptr);
        ctx.reserve(t.rank, s.m, s.mc);
        ctx.real.upload(t.kernels, sizeof(float) * static_cast<size_t>(t.rank) * s.m.size());
        DP_CUFFT_CHECK(cufftExecR2C(ctx.plan(CUFFT_R2C, t.rank, s.m), ctx.real.as<cufftReal>(),
                                    view.spectra.as<cufftComplex>()));
    }
    // cuFFT transforms are unnormalised: fold 1 / (Mz My Mx) into the stored spectra once.
    scale_kernel<<<flat_blocks(count), kFlatThreads>>>(view.spectra.as<cufftComplex>(), count,
                                                        1.0f / static_cast<float>(s.m.size()));
    DP_CUDA_CHECK_LAUNCH("fft scale_kernel");
    if (t.coefficients) {
        const size_t cb = sizeof(float) * static_cast<size_t>(t.rank) * s.n.ny * s.n.nx;
        view.coefficients = cuda::DeviceBuffer(cb);
        view.coefficients.upload(t.coefficients, cb);
    }
    DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    s.views.put(v, std::move(view));
}

bool CudaFftEngine::has_view(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.contains(v);
}

int CudaFftEngine::rank(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.at(v).rank;
}

void CudaFftEngine::drop_view(int v) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->views.erase(v);
}

void CudaFftEngine::forward(int v, const float* src, float* dst, void* stream) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    const int r = view.rank;
    StreamContext& ctx = s.prepare(r, stream);
    const cudaStream_t st = ctx.stream;

    const dim3 tile(kTileX, kTileY);
    pad_kernel<<<tile_grid(s.m.nx, s.m.ny, s.m.nz * r), tile, 0, st>>>(src, view.coef(), ctx.real.as<float>(), s.n, s.m);
    DP_CUDA_CHECK_LAUNCH("fft pad_kernel (forward)");
    DP_CUFFT_CHECK(cufftExecR2C(ctx.plan(CUFFT_R2C, r, s.m), ctx.real.as<cufftReal>(), ctx.spec.as<cufftComplex>()));
    product_sum_kernel<<<flat_blocks(s.mc), kFlatThreads, 0, st>>>(ctx.spec.as<cufftComplex>(), view.K(), s.mc, r);
    DP_CUDA_CHECK_LAUNCH("fft product_sum_kernel");
    DP_CUFFT_CHECK(cufftExecC2R(ctx.plan(CUFFT_C2R, 1, s.m), ctx.spec.as<cufftComplex>(), ctx.real.as<cufftReal>()));
    crop_kernel<<<tile_grid(s.n.nx, s.n.ny, s.n.nz), tile, 0, st>>>(ctx.real.as<float>(), nullptr, dst, s.n, s.m, 1);
    DP_CUDA_CHECK_LAUNCH("fft crop_kernel (forward)");
}

void CudaFftEngine::adjoint(int v, const float* src, float* dst, void* stream) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    const int r = view.rank;
    StreamContext& ctx = s.prepare(r, stream);
    const cudaStream_t st = ctx.stream;

    const dim3 tile(kTileX, kTileY);
    pad_kernel<<<tile_grid(s.m.nx, s.m.ny, s.m.nz), tile, 0, st>>>(src, nullptr, ctx.real.as<float>(), s.n, s.m);
    DP_CUDA_CHECK_LAUNCH("fft pad_kernel (adjoint)");
    DP_CUFFT_CHECK(cufftExecR2C(ctx.plan(CUFFT_R2C, 1, s.m), ctx.real.as<cufftReal>(), ctx.spec.as<cufftComplex>()));
    conj_product_spread_kernel<<<flat_blocks(s.mc), kFlatThreads, 0, st>>>(ctx.spec.as<cufftComplex>(), view.K(), s.mc, r);
    DP_CUDA_CHECK_LAUNCH("fft conj_product_spread_kernel");
    DP_CUFFT_CHECK(cufftExecC2R(ctx.plan(CUFFT_C2R, r, s.m), ctx.spec.as<cufftComplex>(), ctx.real.as<cufftReal>()));
    crop_kernel<<<tile_grid(s.n.nx, s.n.ny, s.n.nz), tile, 0, st>>>(ctx.real.as<float>(), view.coef(), dst, s.n, s.m, r);
    DP_CUDA_CHECK_LAUNCH("fft crop_kernel (adjoint)");
}

const Shape3& CudaFftEngine::image_shape() const { return impl_->n; }
const Shape3& CudaFftEngine::padded_shape() const { return impl_->m; }
int CudaFftEngine::device() const { return impl_->device; }

size_t CudaFftEngine::bytes() const {
    const Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    size_t b = 0;
    s.views.for_each([&](const Impl::View& w) { b += w.spectra.bytes() + w.coefficients.bytes(); });
    for (const auto& kv : s.contexts) b += kv.second->bytes();
    return b;
}

}  // namespace dp::fft::gpu
