// pybind11 bindings of the PETSIRD event-list varint codec (csrc/io/varint.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../io/varint.hpp"
#include "../io/varint_file.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_io(py::module_& m) {
    m.def("decode_varints", [](py::array_t<uint8_t, py::array::c_style> data, size_t max_values, int threads,
                               size_t min_chunk_bytes) {
              const size_t length = static_cast<size_t>(data.size());
              // every varint is at least one byte: no more values than bytes
              py::array_t<uint32_t> out(static_cast<py::ssize_t>(std::min(max_values, length)));
              io::VarintDecode r{0, 0};
              {
                  py::gil_scoped_release release;
                  r = io::decode_varints(data.data(), length, max_values, out.mutable_data(), threads,
                                         min_chunk_bytes);
              }
              return py::make_tuple(out[py::slice(0, static_cast<py::ssize_t>(r.values), 1)], r.bytes);
          }, py::arg("data"), py::arg("max_values"), py::arg("threads") = 0,
          py::arg("min_chunk_bytes") = size_t(1) << 16,
          "Decode at most max_values LEB128 varints (32-bit) from the uint8 array data; returns "
          "(values uint32, bytes consumed), stopping after the last complete varint. Split over "
          "`threads` (0: all OpenMP threads) once data holds two chunks of min_chunk_bytes; the result "
          "is the one-pass decoder's.");
    m.def("encode_varints", [](py::array_t<uint32_t, py::array::c_style> values) {
              const size_t n = static_cast<size_t>(values.size());
              const size_t total = io::varint_bytes(values.data(), n);
              py::array_t<uint8_t> out(static_cast<py::ssize_t>(total));
              {
                  py::gil_scoped_release release;
                  io::encode_varints(values.data(), n, out.mutable_data());
              }
              return out;
          }, py::arg("values"), "LEB128 varint bytes (uint8) of the uint32 values, in order.");
    m.def("varint_list_end", [](int fd, int64_t offset, uint64_t n_records, unsigned record_values,
                                size_t chunk_bytes, int threads) {
              io::VarintListReader reader(fd, offset, n_records, record_values);
              // the bytes are only counted, never kept: one scratch buffer per thread serves every list
              thread_local std::vector<uint8_t> buffer;
              buffer.resize(std::max(chunk_bytes, reader.min_capacity()));
              {
                  py::gil_scoped_release release;
                  while (!reader.done() && reader.next(buffer.data(), buffer.size(), threads).values) {
                  }
              }
              return py::make_tuple(reader.offset(), reader.done());
          }, py::arg("fd"), py::arg("offset"), py::arg("n_records"), py::arg("record_values"),
          py::arg("chunk_bytes") = size_t(4) << 20, py::arg("threads") = 0,
          "Skip a list of n_records records of record_values varints at byte `offset` of the file "
          "descriptor fd: returns (the byte after the list, whether the file held all of it). The "
          "varints' terminating bytes are counted, nothing is decoded.");
}

}  // namespace dp::bind
