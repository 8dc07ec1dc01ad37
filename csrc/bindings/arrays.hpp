// Argument checks at the Python boundary: every message names the argument, what was expected
// and what came. Used by the family bindings; nothing here copies or converts silently.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "../common/errors.hpp"

namespace dp::bind {

namespace py = pybind11;

inline std::string shape_str(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t k = 0; k < a.ndim(); ++k) s += (k ? ", " : "") + std::to_string(a.shape(k));
    return s + (a.ndim() == 1 ? ",)" : ")");
}

template <typename T>
const char* dtype_name();
template <>
inline const char* dtype_name<float>() { return "float32"; }
template <>
inline const char* dtype_name<double>() { return "float64"; }
template <>
inline const char* dtype_name<int32_t>() { return "int32"; }
template <>
inline const char* dtype_name<int16_t>() { return "int16"; }
template <>
inline const char* dtype_name<int64_t>() { return "int64"; }

// Checks dtype, C-contiguity and rank; an expected extent of -1 accepts any length.
template <typename T>
void check_array(const py::array& a, const char* name, const std::vector<py::ssize_t>& shape) {
    if (!a.dtype().is(py::dtype::of<T>()))
        throw TypeError(std::string(name) + ": expected dtype " + dtype_name<T>() + ", got " +
                        std::string(py::str(a.dtype())));
    if (a.ndim() != static_cast<py::ssize_t>(shape.size()))
        throw ValueError(std::string(name) + ": expected " + std::to_string(shape.size()) +
                         "-D array, got shape " + shape_str(a));
    for (size_t k = 0; k < shape.size(); ++k)
        if (shape[k] >= 0 && a.shape(k) != shape[k])
            throw ValueError(std::string(name) + ": wrong shape " + shape_str(a) + " (axis " +
                             std::to_string(k) + " must be " + std::to_string(shape[k]) + ")");
    if (!(a.flags() & py::array::c_style))
        throw ValueError(std::string(name) + ": array must be C-contiguous");
}

template <typename T>
const T* data_of(const py::array& a) { return static_cast<const T*>(a.data()); }

template <typename T>
T* mutable_data_of(py::array& a, const char* name = "out") {
    if (!a.writeable()) throw ValueError(std::string(name) + ": array is read-only");
    return static_cast<T*>(a.mutable_data());
}

// A required entry of a parameter dict (e.g. a scanner's to_dict()): ValueError when missing,
// TypeError when it does not convert to T; messages start with `what`.
template <typename T>
T dict_value(const py::dict& d, const char* key, const char* what = "scanner") {
    if (!d.contains(key)) throw ValueError(std::string(what) + ": missing key '" + key + "'");
    try {
        return d[key].cast<T>();
    } catch (const py::cast_error&) {
        throw TypeError(std::string(what) + ": '" + key + "' has the wrong type (" +
                        std::string(py::str(py::type::of(d[key]).attr("__name__"))) + ")");
    }
}

// A device pointer passed from Python as an integer (0 allowed only when not required).
template <typename T>
T* device_pointer(uintptr_t p, const char* name, bool required = true) {
    if (!p && required) throw ValueError(std::string(name) + ": null device pointer");
    return reinterpret_cast<T*>(p);
}

}  // namespace dp::bind
