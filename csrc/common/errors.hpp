// Errors raised from C++ that pybind11 turns into Python exceptions.
//   dp::ValueError -> ValueError, dp::TypeError -> TypeError, dp::OutOfMemory -> MemoryError,
//   std::runtime_error -> RuntimeError.
#pragma once

#include <stdexcept>
#include <string>

namespace dp {

struct ValueError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

struct TypeError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// A device allocation failed (Python MemoryError).
struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void require(bool ok, const std::string& message) {
    if (!ok) throw ValueError(message);
}

}  // namespace dp
