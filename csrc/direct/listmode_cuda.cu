// CUDA depositor of list-mode coincidences read from a file (listmode.hpp).
//
// Pipeline per chunk of an event list (about 32 MiB of varints, whole events):
//   host    read the chunk from the file into pinned buffer k % 2 (io/varint_file.hpp: parallel pread,
//           terminators counted on the way to find the chunk's end)
//   stream  copy it to the GPU; count the terminating bytes per 4 KiB tile; exclusive scan of the tile
//           counts (CUB) gives each tile the index of its first varint; decode: each thread takes 16
//           bytes, a block scan gives the index of its first varint, and every terminator decodes its
//           varint by walking back over the continuation bytes before it; deposit: a thread per event
//           gathers its crystal centres and TOF-bin centre and adds 1 at its most likely point.
// Two pinned buffers and two streams: while the GPU decodes and deposits chunk k, the host reads chunk
// k + 1 and its copy runs on the other stream. Nothing goes through NumPy.
//
// Faults are found on the GPU and counted (a varint longer than 5 bytes or wider than 32 bits, an event
// naming a detection bin or TOF bin the scanner does not have: skipped); finish() returns them and the
// caller raises. Compiled with --fmad=false (CMakeLists.txt) so that the deposition rounds as CuPy's.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "../io/varint_file.hpp"
#include "listmode.hpp"

namespace dp::direct::listmode::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kBytesPerThread = 16;                     // one uint4 per thread
constexpr size_t kTileBytes = kThreads * kBytesPerThread;  // 4 KiB per block
constexpr int kMaxPairs = 256;                          // module-type pairs (a scanner of 22 types)

// Device counters: per pair (kPairCounters each), then the two varint faults.
enum PairCounter { kDepositedSlot, kOutsideViewsSlot, kOutsideGridSlot, kOutsideScannerSlot, kPairCounters };
constexpr int kTooLongSlot = kMaxPairs * kPairCounters, kTooWideSlot = kTooLongSlot + 1, kNumCounters = kTooWideSlot + 1;

__device__ __forceinline__ uint32_t terminators(uint4 w) {
    return __popc(~w.x & 0x80808080u) + __popc(~w.y & 0x80808080u) + __popc(~w.z & 0x80808080u) +
           __popc(~w.w & 0x80808080u);
}

__global__ void __launch_bounds__(kThreads) count_tiles(const uint4* bytes, uint32_t* tile_count) {
    using BlockReduce = cub::BlockReduce<uint32_t, kThreads>;
    __shared__ typename BlockReduce::TempStorage temp;
    const uint32_t c = terminators(bytes[static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x]);
    const uint32_t total = BlockReduce(temp).Sum(c);
    if (threadIdx.x == 0) tile_count[blockIdx.x] = total;
}

// Bytes past the chunk are 0x80 (continuations): never terminators, never part of a decoded varint.
__global__ void __launch_bounds__(kThreads) decode_tiles(const uint8_t* bytes, const uint32_t* tile_first,
                                                          uint32_t* values, unsigned long long* counters) {
    using BlockScan = cub::BlockScan<uint32_t, kThreads>;
    __shared__ typename BlockScan::TempStorage temp;
    const size_t start = (static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x) * kBytesPerThread;
    const uint4 w = *reinterpret_cast<const uint4*>(bytes + start);
    uint32_t index = 0;
    BlockScan(temp).ExclusiveSum(terminators(w), index);
    index += tile_first[blockIdx.x];
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    bool too_long = false, too_wide = false;
    for (int j = 0; j < kBytesPerThread; ++j) {
        const uint32_t b = (words[j >> 2] >> (8 * (j & 3))) & 0xFFu;
        if (b >= 0x80u) continue;
        // walk back over the continuation bytes of this varint (the chunk starts at a varint)
        const size_t end = start + j;
        uint64_t value = b;
        size_t s = end;
        int length = 1;
        while (s > 0 && bytes[s - 1] >= 0x80u && length <= 5) {
            --s;
            value = (value << 7) | (bytes[s] & 0x7Fu);
            ++length;
        }
        too_long |= length > 5;
        too_wide |= (value >> 32) != 0;
        values[index++] = static_cast<uint32_t>(value);
    }
    if (too_long) atomicAdd(counters + kTooLongSlot, 1ull);
    if (too_wide) atomicAdd(counters + kTooWideSlot, 1ull);
}

struct DevicePairTables {
    const float* centres0;
    const float* centres1;
    const float* dt_ps;
    uint32_t n_energy0, n_energy1, n_bins0, n_bins1, n_tof;
};

__global__ void __launch_bounds__(kThreads)
deposit_events(const uint32_t* values, uint64_t n_events, const DevicePairTables t, const Lattice g, const Views v,
               float* histos, unsigned long long* counters, uint32_t* maxima) {
    uint32_t deposited = 0, outside_views = 0, outside_grid = 0, outside_scanner = 0;
    uint32_t max0 = 0, max1 = 0, max_tof = 0;
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    // every thread runs the same number of rounds, so the warp reductions below see full warps
    const uint64_t rounds = (n_events + stride - 1) / stride;
    for (uint64_t r = 0; r < rounds; ++r) {
        const uint64_t e = r * stride + static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
        if (e >= n_events) continue;
        const uint32_t b0 = values[3 * e], b1 = values[3 * e + 1], tof = values[3 * e + 2];
        max0 = max(max0, b0), max1 = max(max1, b1), max_tof = max(max_tof, tof);
        if (b0 >= t.n_bins0 || b1 >= t.n_bins1 || tof >= t.n_tof) {
            ++outside_scanner;
            continue;
        }
        int64_t index = 0;
        const int where = locate_coincidence(g, v, t.centres0 + 3ull * (b0 / t.n_energy0),
                                             t.centres1 + 3ull * (b1 / t.n_energy1), t.dt_ps[tof], &index);
        if (where == kDeposited) {
            atomicAdd(histos + index, 1.0f);  // result unused: a RED
            ++deposited;
        } else if (where == kOutsideViews) {
            ++outside_views;
        } else {
            ++outside_grid;
        }
    }
    const uint32_t sums[4] = {__reduce_add_sync(0xffffffffu, deposited), __reduce_add_sync(0xffffffffu, outside_views),
                              __reduce_add_sync(0xffffffffu, outside_grid),
                              __reduce_add_sync(0xffffffffu, outside_scanner)};
    max0 = __reduce_max_sync(0xffffffffu, max0);
    max1 = __reduce_max_sync(0xffffffffu, max1);
    max_tof = __reduce_max_sync(0xffffffffu, max_tof);
    if ((threadIdx.x & 31) == 0) {
        for (int k = 0; k < 4; ++k)
            if (sums[k]) atomicAdd(counters + k, static_cast<unsigned long long>(sums[k]));
        atomicMax(maxima, max0);
        atomicMax(maxima + 1, max1);
        atomicMax(maxima + 2, max_tof);
    }
}

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

}  // namespace

struct DeviceDeposit::Impl {
    struct Slot {
        uint8_t* pinned = nullptr;
        cuda::DeviceBuffer bytes, values, tile_count, tile_first, scan_temp;
        cudaStream_t stream = nullptr;
        cudaEvent_t copied = nullptr;
        bool used = false;
    };
    struct Pair {
        cuda::DeviceBuffer centres0, centres1, dt_ps;
        DevicePairTables view;
    };

    Lattice g;
    Views v;
    size_t chunk_bytes;  // a multiple of kTileBytes
    int threads;
    Slot slots[2];
    int next_slot = 0;
    std::vector<Pair> pairs;
    cuda::DeviceBuffer counters, maxima;
    std::vector<uint64_t> events;  // per pair

    Impl(const Lattice& g_, const Views& v_, size_t chunk, int threads_)
        : g(g_), v(v_), chunk_bytes(round_up(std::max(chunk, kTileBytes), kTileBytes)), threads(threads_),
          counters(kNumCounters * sizeof(unsigned long long)), maxima(3 * kMaxPairs * sizeof(uint32_t)) {
        const size_t tiles = chunk_bytes / kTileBytes;
        size_t scan_bytes = 0;
        DP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const uint32_t*>(nullptr),
                                                    static_cast<uint32_t*>(nullptr), static_cast<int>(tiles)));
        for (Slot& s : slots) {
            DP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&s.pinned), chunk_bytes, cudaHostAllocDefault));
            s.bytes = cuda::DeviceBuffer(chunk_bytes);
            s.values = cuda::DeviceBuffer(chunk_bytes * sizeof(uint32_t));  // at most one varint per byte
            s.tile_count = cuda::DeviceBuffer(tiles * sizeof(uint32_t));
            s.tile_first = cuda::DeviceBuffer(tiles * sizeof(uint32_t));
            s.scan_temp = cuda::DeviceBuffer(std::max<size_t>(scan_bytes, 1));
            DP_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
            DP_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
        }
        reset();
    }

    ~Impl() {
        for (Slot& s : slots) {  // no throwing from a destructor: errors here are dropped
            if (s.stream) cudaStreamSynchronize(s.stream);
            if (s.copied) cudaEventDestroy(s.copied);
            if (s.stream) cudaStreamDestroy(s.stream);
            if (s.pinned) cudaFreeHost(s.pinned);
        }
    }

    void reset() {
        DP_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
        DP_CUDA_CHECK(cudaMemset(maxima.get(), 0, maxima.bytes()));
        std::fill(events.begin(), events.end(), 0);
    }

    // Decodes the chunk in slot s and deposits its events (of `pair`, into histos) or, with host_values,
    // copies the decoded values there instead.
    void run_chunk(Slot& s, size_t n_bytes, size_t n_values, int pair, float* histos, uint32_t* host_values) {
        const size_t padded = round_up(n_bytes, kTileBytes);
        const int tiles = static_cast<int>(padded / kTileBytes);
        auto* bytes = s.bytes.as<uint8_t>();
        DP_CUDA_CHECK(cudaMemcpyAsync(bytes, s.pinned, n_bytes, cudaMemcpyHostToDevice, s.stream));
        DP_CUDA_CHECK(cudaEventRecord(s.copied, s.stream));
        if (padded > n_bytes) DP_CUDA_CHECK(cudaMemsetAsync(bytes + n_bytes, 0x80, padded - n_bytes, s.stream));
        count_tiles<<<tiles, kThreads, 0, s.stream>>>(reinterpret_cast<const uint4*>(bytes), s.tile_count.as<uint32_t>());
        DP_CUDA_CHECK_LAUNCH("listmode count_tiles");
        size_t scan_bytes = s.scan_temp.bytes();
        DP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(s.scan_temp.get(), scan_bytes, s.tile_count.as<uint32_t>(),
                                                    s.tile_first.as<uint32_t>(), tiles, s.stream));
        decode_tiles<<<tiles, kThreads, 0, s.stream>>>(bytes, s.tile_first.as<uint32_t>(), s.values.as<uint32_t>(),
                                                       counters.as<unsigned long long>());
        DP_CUDA_CHECK_LAUNCH("listmode decode_tiles");
        if (host_values) {
            DP_CUDA_CHECK(cudaMemcpyAsync(host_values, s.values.get(), n_values * sizeof(uint32_t),
                                          cudaMemcpyDeviceToHost, s.stream));
            s.used = true;
            return;
        }
        const DevicePairTables& t = pairs[pair].view;
        const uint64_t n_events = n_values / 3;
        const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>((n_events + kThreads - 1) / kThreads, 65536));
        deposit_events<<<blocks, kThreads, 0, s.stream>>>(s.values.as<uint32_t>(), n_events, t, g, v, histos,
                                                          counters.as<unsigned long long>() + kPairCounters * pair,
                                                          maxima.as<uint32_t>() + 3 * pair);
        DP_CUDA_CHECK_LAUNCH("listmode deposit_events");
        events[pair] += n_events;
        s.used = true;
    }
};

DeviceDeposit::DeviceDeposit(const Lattice& g, const Views& v, size_t chunk_bytes, int threads)
    : impl_(std::make_unique<Impl>(g, v, chunk_bytes, threads)) {}

DeviceDeposit::~DeviceDeposit() = default;

int DeviceDeposit::add_pair(const PairTables& t) {
    require(static_cast<int>(impl_->pairs.size()) < kMaxPairs, "tables: too many module-type pairs");
    check_tables(t);
    Impl::Pair p;
    auto upload = [](cuda::DeviceBuffer& buf, const std::vector<float>& host) {
        buf = cuda::DeviceBuffer(std::max<size_t>(host.size(), 1) * sizeof(float));
        if (!host.empty()) buf.upload(host.data(), host.size() * sizeof(float));
        return buf.as<const float>();
    };
    p.view = DevicePairTables{upload(p.centres0, t.centres0), upload(p.centres1, t.centres1), upload(p.dt_ps, t.dt_ps),
                              t.n_energy0, t.n_energy1, t.n_bins0, t.n_bins1, static_cast<uint32_t>(t.dt_ps.size())};
    impl_->pairs.push_back(std::move(p));
    impl_->events.push_back(0);
    return static_cast<int>(impl_->pairs.size()) - 1;
}

ListRead DeviceDeposit::deposit(int pair, int fd, int64_t offset, uint64_t n_events, float* histos) {
    require(pair >= 0 && pair < static_cast<int>(impl_->pairs.size()), "pair: no such module-type pair");
    require(histos != nullptr, "histos: null device pointer");
    return read_list(fd, offset, n_events, pair, histos, nullptr);
}

ListRead DeviceDeposit::decode(int fd, int64_t offset, uint64_t n_events, uint32_t* values) {
    const ListRead r = read_list(fd, offset, n_events, -1, nullptr, values);
    for (Impl::Slot& s : impl_->slots) DP_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    return r;
}

ListRead DeviceDeposit::read_list(int fd, int64_t offset, uint64_t n_events, int pair, float* histos,
                                  uint32_t* host_values) {
    Impl& m = *impl_;
    io::VarintListReader reader(fd, offset, n_events, 3);
    uint64_t records = 0;
    while (!reader.done()) {
        Impl::Slot& s = m.slots[m.next_slot];
        m.next_slot ^= 1;
        if (s.used) DP_CUDA_CHECK(cudaEventSynchronize(s.copied));  // its pinned buffer is free again
        const io::ListChunk chunk = reader.next(s.pinned, m.chunk_bytes, m.threads);
        if (chunk.values == 0) break;  // the file ends inside the list
        m.run_chunk(s, chunk.bytes, chunk.values, pair, histos, host_values ? host_values + 3 * records : nullptr);
        records += chunk.values / 3;
    }
    return {reader.offset(), records, reader.done()};
}

Totals DeviceDeposit::finish() {
    Impl& m = *impl_;
    for (Impl::Slot& s : m.slots) DP_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    std::vector<unsigned long long> c(kNumCounters);
    m.counters.download(c.data(), c.size() * sizeof(unsigned long long));
    std::vector<uint32_t> maxima(3 * kMaxPairs);
    m.maxima.download(maxima.data(), maxima.size() * sizeof(uint32_t));
    Totals t;
    t.varint_too_long = c[kTooLongSlot] != 0;
    t.value_too_wide = c[kTooWideSlot] != 0;
    for (size_t p = 0; p < m.pairs.size(); ++p) {
        const unsigned long long* pc = c.data() + kPairCounters * p;
        PairTotals pt;
        pt.events = m.events[p];
        pt.deposited = pc[kDepositedSlot];
        pt.outside_views = pc[kOutsideViewsSlot];
        pt.outside_grid = pc[kOutsideGridSlot];
        pt.outside_scanner = pc[kOutsideScannerSlot];
        pt.max_bin0 = maxima[3 * p], pt.max_bin1 = maxima[3 * p + 1], pt.max_tof = maxima[3 * p + 2];
        t.pairs.push_back(pt);
    }
    m.reset();
    return t;
}

}  // namespace dp::direct::listmode::gpu
