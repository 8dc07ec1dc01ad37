// CPU depositor of list-mode coincidences read from a file (listmode.hpp): chunks of the list are read
// and decoded over all threads (io/varint_file.hpp, io/varint.hpp), then their events deposited in
// parallel with atomic adds. Compiled without floating-point contraction (CMakeLists.txt).
#include <omp.h>

#include <algorithm>
#include <utility>

#include "../common/errors.hpp"
#include "../io/varint.hpp"
#include "../io/varint_file.hpp"
#include "listmode.hpp"

namespace dp::direct::listmode {

namespace {
constexpr size_t kMinChunkBytes = size_t(1) << 16;
}

HostDeposit::HostDeposit(const Lattice& g, const Views& v, size_t chunk_bytes, int threads)
    : g_(g), v_(v), chunk_bytes_(std::max(chunk_bytes, kMinChunkBytes)),
      threads_(threads > 0 ? threads : omp_get_max_threads()) {}

void check_tables(const PairTables& t) {
    require(t.n_energy0 >= 1 && t.n_energy1 >= 1, "tables: expected at least one energy bin");
    require(t.centres0.size() == 3ull * (t.n_bins0 / t.n_energy0) &&
                t.centres1.size() == 3ull * (t.n_bins1 / t.n_energy1) && !t.dt_ps.empty(),
            "tables: expected (n_bins / n_energy, 3) element centres per module type and TOF bins");
}

int HostDeposit::add_pair(PairTables tables) {
    check_tables(tables);
    pairs_.push_back(std::move(tables));
    totals_.emplace_back();
    return static_cast<int>(pairs_.size()) - 1;
}

ListRead HostDeposit::deposit(int pair, int fd, int64_t offset, uint64_t n_events, float* histos) {
    require(pair >= 0 && pair < static_cast<int>(pairs_.size()), "pair: no such module-type pair");
    const PairTables& t = pairs_[pair];
    io::VarintListReader reader(fd, offset, n_events, 3);
    bytes_.resize(chunk_bytes_);
    values_.resize(chunk_bytes_);  // every varint is at least one byte
    const uint32_t n_tof = static_cast<uint32_t>(t.dt_ps.size());
    uint64_t records = 0;
    while (!reader.done()) {
        const io::ListChunk chunk = reader.next(bytes_.data(), bytes_.size(), threads_);
        if (chunk.values == 0) break;  // the file ends inside the list
        const io::VarintDecode d = io::decode_varints(bytes_.data(), chunk.bytes, chunk.values, values_.data(),
                                                      threads_);
        if (d.values != chunk.values) throw ValueError("event list: corrupt varints");
        const int64_t n = static_cast<int64_t>(chunk.values / 3);
        const uint32_t* ev = values_.data();
        uint64_t deposited = 0, outside_views = 0, outside_grid = 0, outside_scanner = 0;
        uint32_t max0 = 0, max1 = 0, max_tof = 0;
#pragma omp parallel for schedule(static) num_threads(threads_) \
    reduction(+ : deposited, outside_views, outside_grid, outside_scanner) reduction(max : max0, max1, max_tof)
        for (int64_t i = 0; i < n; ++i) {
            const uint32_t b0 = ev[3 * i], b1 = ev[3 * i + 1], tof = ev[3 * i + 2];
            max0 = std::max(max0, b0), max1 = std::max(max1, b1), max_tof = std::max(max_tof, tof);
            if (b0 >= t.n_bins0 || b1 >= t.n_bins1 || tof >= n_tof) {
                ++outside_scanner;
                continue;
            }
            int64_t index = 0;
            switch (locate_coincidence(g_, v_, &t.centres0[3ull * (b0 / t.n_energy0)],
                                       &t.centres1[3ull * (b1 / t.n_energy1)], t.dt_ps[tof], &index)) {
                case kDeposited:
#pragma omp atomic update
                    histos[index] += 1.0f;
                    ++deposited;
                    break;
                case kOutsideViews: ++outside_views; break;
                default: ++outside_grid; break;
            }
        }
        records += static_cast<uint64_t>(n);
        PairTotals& total = totals_[pair];
        total.events += static_cast<uint64_t>(n);
        total.deposited += deposited;
        total.outside_views += outside_views;
        total.outside_grid += outside_grid;
        total.outside_scanner += outside_scanner;
        total.max_bin0 = std::max(total.max_bin0, max0);
        total.max_bin1 = std::max(total.max_bin1, max1);
        total.max_tof = std::max(total.max_tof, max_tof);
    }
    return {reader.offset(), records, reader.done()};
}

Totals HostDeposit::finish() {
    Totals t;
    t.pairs = totals_;
    std::fill(totals_.begin(), totals_.end(), PairTotals{});
    return t;
}

}  // namespace dp::direct::listmode
