// Errors raised from C++ that pybind11 turns into Python exceptions.
//   dp::ValueError -> ValueError, dp::TypeError -> TypeError, std::runtime_error -> RuntimeError.
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

inline void require(bool ok, const std::string& message) {
    if (!ok) throw ValueError(message);
}

}  // namespace dp
