// Device memory shared by every family's CUDA code: DeviceBuffer (an owned cudaMalloc allocation that
// turns out-of-memory into dp::OutOfMemory, a Python MemoryError naming the bytes asked and free), its
// copies to and from the host, and the device queries the bindings use to place CuPy / PyTorch arrays.
#include <string>

#include "cuda_check.cuh"
#include "cuda_memory.hpp"

namespace dp::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
        ptr_ = nullptr;
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        throw OutOfMemory("CUDA out of memory: could not allocate " + std::to_string(bytes) +
                          " bytes (" + std::to_string(free_b) + " of " + std::to_string(total_b) +
                          " bytes free): " + cudaGetErrorString(err));
    }
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // no throw from a destructor; a failure here leaves the error sticky
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_) cudaFree(ptr_);
        ptr_ = o.ptr_;
        bytes_ = o.bytes_;
        o.ptr_ = nullptr;
        o.bytes_ = 0;
    }
    return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
    if (bytes > bytes_) throw std::runtime_error("DeviceBuffer::upload: more bytes than allocated");
    if (bytes) DP_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, size_t bytes) const {
    if (bytes > bytes_) throw std::runtime_error("DeviceBuffer::download: more bytes than allocated");
    if (bytes) DP_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

void synchronize() { DP_CUDA_CHECK(cudaDeviceSynchronize()); }

int current_device() {
    int dev = 0;
    DP_CUDA_CHECK(cudaGetDevice(&dev));
    return dev;
}

int pointer_device(uintptr_t ptr) {
    cudaPointerAttributes attr{};
    const cudaError_t err = cudaPointerGetAttributes(&attr, reinterpret_cast<const void*>(ptr));
    if (err == cudaErrorInvalidValue) {   // not a pointer CUDA knows (older runtimes): host memory
        cudaGetLastError();
        return -1;
    }
    DP_CUDA_CHECK(err);
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

}  // namespace dp::cuda
