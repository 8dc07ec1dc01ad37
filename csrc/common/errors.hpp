// Errors raised from C++ that pybind11 turns into Python exceptions.
//   dp::ValueError -> ValueError, dp::TypeError -> TypeError, dp::OutOfMemory -> MemoryError,
//   std::runtime_error -> RuntimeError.
#pragma once

#include <cmath>
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

// Checks of scalar parameters (a scanner's, ...): ValueError "<name>: expected ..., got <v>", where
// name says whose parameter it is (e.g. "scanner pitch_mm").
inline void require_positive_int(long long v, const std::string& name) {
    if (v < 1) throw ValueError(name + ": expected a positive integer, got " + std::to_string(v));
}

inline void require_positive(double v, const std::string& name) {
    if (!(std::isfinite(v) && v > 0))
        throw ValueError(name + ": expected a positive finite value, got " + std::to_string(v));
}

inline void require_non_negative(double v, const std::string& name) {
    if (!(std::isfinite(v) && v >= 0))
        throw ValueError(name + ": expected a finite value >= 0, got " + std::to_string(v));
}

}  // namespace dp
