// Device memory owned from C++ (used for NumPy inputs on the CUDA backend, and for LUTs).
// The header is plain C++ so that bindings need no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dp::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

    void* get() const { return ptr_; }
    size_t bytes() const { return bytes_; }
    // Grows the buffer to at least `bytes` (a workspace: the contents are not kept). The old allocation
    // is freed before the new one is made, so that both never need to fit at once; nothing happens when
    // the buffer is already large enough.
    void reserve(size_t bytes) {
        if (bytes_ >= bytes) return;
        *this = DeviceBuffer();
        *this = DeviceBuffer(bytes);
    }
    // Synchronous copies of exactly bytes() bytes (or fewer, given explicitly).
    void upload(const void* host, size_t bytes);
    void download(void* host, size_t bytes) const;

    template <typename T>
    T* as() const { return static_cast<T*>(ptr_); }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

void synchronize();
// The current CUDA device, and the device a pointer's memory lives on (-1: host memory, or memory
// CUDA does not know).
int current_device();
int pointer_device(uintptr_t ptr);

}  // namespace dp::cuda
