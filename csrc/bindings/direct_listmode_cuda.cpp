// pybind11 binding of the CUDA list-mode depositor (csrc/direct/listmode.hpp):
// directpet._cuda.DirectListDepositCuda; `out` of deposit is a device pointer to (n_views, nz, ny, nx)
// float32 (the Python caller checks the CuPy array).
#include "direct_listmode_args.hpp"

namespace dp::bind {

void register_direct_listmode_cuda(py::module_& m) {
    using namespace direct_listmode_args;
    using Deposit = lm::gpu::DeviceDeposit;
    py::class_<Deposit>(m, "DirectListDepositCuda", kClassDoc)
        .def(py::init([](std::vector<int> shape, std::vector<double> voxel, int n_phi, int n_theta, double theta_max,
                         size_t chunk_bytes, int threads) {
                 return new Deposit(make_lattice(shape, voxel), make_views(n_phi, n_theta, theta_max), chunk_bytes,
                                    threads);
             }),
             py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"), py::arg("theta_max"),
             py::arg("chunk_bytes") = size_t(32) << 20, py::arg("threads") = 0)
        .def("add_pair", [](Deposit& d, const py::array& c0, const py::array& c1, const py::array& dt, long long e0,
                            long long e1) { return d.add_pair(make_tables(c0, c1, dt, e0, e1)); },
             py::arg("centres0"), py::arg("centres1"), py::arg("dt_ps"), py::arg("n_energy0"), py::arg("n_energy1"))
        .def("deposit", [](Deposit& d, int pair, int fd, int64_t offset, uint64_t n_events, uintptr_t out) {
                 float* h = device_pointer<float>(out, "out");
                 lm::ListRead r;
                 {
                     py::gil_scoped_release release;
                     r = d.deposit(pair, fd, offset, n_events, h);
                 }
                 return read_tuple(r);
             }, py::arg("pair"), py::arg("fd"), py::arg("offset"), py::arg("n_events"), py::arg("out"))
        .def("decode", [](Deposit& d, int fd, int64_t offset, uint64_t n_events) {
                 py::array_t<uint32_t> values(static_cast<py::ssize_t>(3 * n_events));
                 lm::ListRead r;
                 {
                     py::gil_scoped_release release;
                     r = d.decode(fd, offset, n_events, values.mutable_data());
                 }
                 return py::make_tuple(values[py::slice(0, static_cast<py::ssize_t>(3 * r.records), 1)], read_tuple(r));
             }, py::arg("fd"), py::arg("offset"), py::arg("n_events"),
             "The list's varints decoded on the GPU: (uint32 values, (end_offset, events_read, complete)).")
        .def("finish", [](Deposit& d) {
                 lm::Totals t;
                 {
                     py::gil_scoped_release release;
                     t = d.finish();
                 }
                 return totals_dict(t);
             });
}

}  // namespace dp::bind
