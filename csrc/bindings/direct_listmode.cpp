// pybind11 binding of the CPU list-mode depositor (csrc/direct/listmode.hpp): directpet._core.DirectListDeposit.
#include "direct_listmode_args.hpp"

namespace dp::bind {

void register_direct_listmode(py::module_& m) {
    using namespace direct_listmode_args;
    py::class_<lm::HostDeposit>(m, "DirectListDeposit", kClassDoc)
        .def(py::init([](std::vector<int> shape, std::vector<double> voxel, int n_phi, int n_theta, double theta_max,
                         size_t chunk_bytes, int threads) {
                 return new lm::HostDeposit(make_lattice(shape, voxel), make_views(n_phi, n_theta, theta_max),
                                            chunk_bytes, threads);
             }),
             py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"), py::arg("theta_max"),
             py::arg("chunk_bytes") = size_t(32) << 20, py::arg("threads") = 0)
        .def("add_pair", [](lm::HostDeposit& d, const py::array& c0, const py::array& c1, const py::array& dt,
                            long long e0, long long e1) { return d.add_pair(make_tables(c0, c1, dt, e0, e1)); },
             py::arg("centres0"), py::arg("centres1"), py::arg("dt_ps"), py::arg("n_energy0"), py::arg("n_energy1"))
        .def("deposit", [](lm::HostDeposit& d, int pair, int fd, int64_t offset, uint64_t n_events, py::array& out) {
                 const lm::Lattice& g = d.lattice();
                 check_array<float>(out, "out", {d.n_views(), g.nz, g.ny, g.nx});
                 float* h = mutable_data_of<float>(out);
                 lm::ListRead r;
                 {
                     py::gil_scoped_release release;
                     r = d.deposit(pair, fd, offset, n_events, h);
                 }
                 return read_tuple(r);
             }, py::arg("pair"), py::arg("fd"), py::arg("offset"), py::arg("n_events"), py::arg("out"))
        .def("finish", [](lm::HostDeposit& d) { return totals_dict(d.finish()); });
}

}  // namespace dp::bind
