// Bulk copies by the Tensor Memory Accelerator (TMA, sm_90 and later): one thread hands the copy engine a
// box of a 2D tensor (described by a tensor map the host encodes) to land in shared memory, and the
// copy's completion is counted in bytes on a shared-memory mbarrier that every reader waits on. The
// readers then spend no instructions on the copy itself (a cp.async staging issues one copy per 16 bytes
// per thread, with its address arithmetic).
//
// Protocol, per staging buffer with its own barrier:
//   once:      thread 0 bulk_barrier_init(bar, 1); bulk_barrier_init_fence(); __syncthreads()
//   per fill:  thread 0 bulk_expect_bytes(bar, box bytes), then tensor_box_to_shared(dst, map, ..., bar)
//   per read:  every thread bulk_wait(bar, parity), parity = (fills of this barrier before this one) & 1
//   refill:    only after every reader is done with the buffer: a __syncthreads, or a second barrier per
//              buffer on which each reading warp arrives (bulk_arrive) and the issuing thread waits
// Generic stores into shared memory that a later bulk copy overwrites, or that must not be reordered
// against one, are ordered by bulk_proxy_fence() (the copy engine is the "async proxy").
//
// The tensor map is encoded through the driver's cuTensorMapEncodeTiled, looked up at run time through
// the runtime (cudaGetDriverEntryPointByVersion): the extension links no libcuda, and a driver without
// the entry point simply reports TMA staging unavailable. Host side needs only the driver API's types.
#pragma once

#include <cuda.h>            // CUtensorMap and the encoder's enums (types only: nothing is linked)
#include <cudaTypedefs.h>    // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace dp::cuda {

// --- device side ----------------------------------------------------------------------------------------
// Each helper compiles to its PTX on sm_90+ and to a trap elsewhere: the kernels that use them are chosen
// on the host only where the launched image is sm_90 code (bulk_copy_kernel_unsupported).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DP_BULK_COPY_PTX 1
#endif

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A barrier that completes a phase when `arrivals` threads have arrived and the bytes they announced
// have landed.
__device__ __forceinline__ void bulk_barrier_init(uint64_t* bar, unsigned arrivals) {
#ifdef DP_BULK_COPY_PTX
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
#else
    __trap();
#endif
}

// Makes initialised barriers visible to the copy engine; before the __syncthreads that publishes them.
__device__ __forceinline__ void bulk_barrier_init_fence() {
#ifdef DP_BULK_COPY_PTX
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
    __trap();
#endif
}

// Orders this thread's earlier generic shared-memory accesses before later bulk copies (and the reverse).
__device__ __forceinline__ void bulk_proxy_fence() {
#ifdef DP_BULK_COPY_PTX
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
    __trap();
#endif
}

// This thread's arrival on `bar`, announcing `bytes` still to land (the whole box, zero-filled parts too).
__device__ __forceinline__ void bulk_expect_bytes(uint64_t* bar, uint32_t bytes) {
#ifdef DP_BULK_COPY_PTX
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}

// The box of `map` whose first element is (column c0, row c1) into shared memory at dst (128-byte
// aligned); its bytes complete on `bar`. Elements outside the tensor land as zeros.
__device__ __forceinline__ void tensor_box_to_shared(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
#ifdef DP_BULK_COPY_PTX
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            shared_address(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_address(bar))
        : "memory");
#else
    __trap();
#endif
}

// This thread's arrival on `bar` (announcing no bytes): e.g. one lane per warp, after __syncwarp, saying its
// warp is done reading a buffer (release: the warp's reads are ordered before a later copy into it).
__device__ __forceinline__ void bulk_arrive(uint64_t* bar) {
#ifdef DP_BULK_COPY_PTX
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#else
    __trap();
#endif
}

// Waits until `bar` has completed the phase of the given parity (0 for its first fill, 1 for the second, ...).
__device__ __forceinline__ void bulk_wait(uint64_t* bar, unsigned parity) {
#ifdef DP_BULK_COPY_PTX
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "bulk_wait_again:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra bulk_wait_again;\n"
        "}\n" ::"r"(shared_address(bar)),
        "r"(parity)
        : "memory");
#else
    __trap();
#endif
}

// --- host side ------------------------------------------------------------------------------------------
using TensorMapEncoder = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's cuTensorMapEncodeTiled, looked up once; nullptr where the runtime or driver lacks it.
inline TensorMapEncoder tensor_map_encoder() {
    static const TensorMapEncoder encoder = [] {
        void* fn = nullptr;
#if CUDART_VERSION >= 12050
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            fn = nullptr;
            (void)cudaGetLastError();   // a failed lookup is an answer, not an error for later calls to report
        }
#endif
        return reinterpret_cast<TensorMapEncoder>(fn);
    }();
    return encoder;
}

// Encodes `map` for a row-major float matrix at `base` (16-byte aligned) of `rows` rows of `columns`
// floats, consecutive rows `row_pitch` floats apart (a multiple of 4), read in boxes of box_columns x
// box_rows floats (each at most 256; box_columns a multiple of 4). Returns "" or why it could not.
inline std::string encode_float_tensor_map(CUtensorMap* map, const void* base, uint64_t columns, uint64_t rows,
                                           uint64_t row_pitch, uint32_t box_columns, uint32_t box_rows) {
    const TensorMapEncoder encode = tensor_map_encoder();
    if (!encode) return "the driver offers no cuTensorMapEncodeTiled";
    const cuuint64_t dims[2] = {columns, rows};
    const cuuint64_t strides[1] = {row_pitch * sizeof(float)};   // bytes between rows (dimension 0 is packed)
    const cuuint32_t box[2] = {box_columns, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<void*>(base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled rejected a " + std::to_string(box_columns) + " x " + std::to_string(box_rows) +
               " box of a " + std::to_string(columns) + " x " + std::to_string(rows) + " matrix (CUresult " +
               std::to_string(static_cast<int>(r)) + ")";
    return "";
}

// "" when `kernel` can use the bulk-copy helpers on the current device: compute capability 9.0 or later
// and the image the device runs built from sm_90+ code (a build with only sm_80 code runs that on a Hopper).
inline std::string bulk_copy_kernel_unsupported(const void* kernel) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return "no CUDA device";
    }
    if (major < 9) return "compute capability " + std::to_string(major) + ".x has no TMA (9.0 or later)";
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
        (void)cudaGetLastError();
        return "the kernel's attributes could not be read";
    }
    if (attr.ptxVersion < 90)
        return "this build runs sm_" + std::to_string(attr.ptxVersion) + " code on the GPU (no sm_90 image)";
    return "";
}

}  // namespace dp::cuda
