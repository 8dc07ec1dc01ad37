// pybind11 bindings of the shared random streams (csrc/common/philox.hpp), for known-answer tests.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <vector>

#include "../common/philox.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_random(py::module_& m) {
    m.def("philox4x32_10", [](std::vector<uint32_t> counter, std::vector<uint32_t> key) {
              require(counter.size() == 4, "counter: expected 4 words");
              require(key.size() == 2, "key: expected 2 words");
              const random::Philox4 r = random::philox4x32_10(counter[0], counter[1], counter[2], counter[3],
                                                        key[0], key[1]);
              return std::vector<uint32_t>{r.x, r.y, r.z, r.w};
          }, py::arg("counter"), py::arg("key"),
          "Philox4x32-10 of a counter (4 x uint32) and key (2 x uint32): the generator of the "
          "compiled CPU simulations, exposed for known-answer tests.");
}

}  // namespace dp::bind
