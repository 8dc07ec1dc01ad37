// Dual-head projectors on the GPU. Plain C++ header (no CUDA types) so that the bindings need no
// CUDA headers; the implementation is in cuda.cu.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "model.hpp"

namespace dp::dualhead::gpu {

// 'default': the tiled projector pair (polyphase image windows in shared memory, gather back
// projection, no atomics). 'alg1' .. 'alg3': the paper's algorithms 1-3 (science.md 3.6).
enum class Method { Default, Alg1, Alg2, Alg3 };

Method parse_method(const std::string& name);   // ValueError naming the argument

// The model resident on the GPU: the taps regrouped by sub-position residue (8 bytes each), the
// row starts, per-row residue-group offsets and patch boxes (forward, alg1-3); for the default back
// projection the distinct cell offsets of every row with dense D^2 residue weights (about twice the
// tap storage at the analytic model's fill); plus the reusable workspaces (the image in polyphase
// layout for the default forward and back, the partial sums of alg2).
class DeviceModel {
public:
    // window_limit: bytes of shared memory a default-method block may use for its two image/LOR
    // windows (0: the device's opt-in limit less the fixed part). Smaller values send classes with
    // larger windows to the global-memory fallback kernels (used by the tests).
    explicit DeviceModel(const HostModel& host, size_t window_limit = 0);
    ~DeviceModel();
    DeviceModel(const DeviceModel&) = delete;
    DeviceModel& operator=(const DeviceModel&) = delete;

    const Layout& layout() const;
    int64_t n_taps() const;
    size_t bytes() const;              // device memory held now (model + workspaces)
    size_t model_bytes() const;        // the model arrays alone
    // Plane groups of the default forward: launches over plane ranges accumulating into y, so
    // that the part of the image the running blocks read stays in L2. 0: automatic.
    int plane_groups() const;
    void set_plane_groups(int groups);
    // Narrow blocks of the default forward: classes whose windows for a full block of LORs would not
    // fit two blocks per SM get blocks of 1/2 or 1/4 as many LORs (smaller windows, more halo) instead
    // of a larger-shared-memory launch. Off by default (measured slower on the H200, see RESULTS.md).
    bool narrow_blocks() const;
    void set_narrow_blocks(bool on);
    // Default back projection: blocks started in decreasing estimated cost (longest first), so that the
    // launch does not end on a few heavy blocks; off: in index order (unit fastest, then plane). Same
    // results either way (each block owns its cells). On by default (benchmarks/RESULTS.md section 14n).
    bool back_heavy_first() const;
    void set_back_heavy_first(bool on);
    // Default forward: plane groups per launch. Several groups in one launch write their tiles' sums to
    // a workspace, and a tile's last block adds them into y in plane order, so the results equal those
    // of one launch per group bit for bit; a launch of G groups' blocks ends on one partly filled wave
    // instead of G (benchmarks/RESULTS.md section 14r). 0 (the default): all groups whose sums fit the
    // workspace cap (64 MB); 1: one launch per group; n: at most n.
    int fwd_groups_per_launch() const;
    void set_fwd_groups_per_launch(int groups);

    struct Impl;
    Impl& impl() { return *impl_; }

private:
    std::unique_ptr<Impl> impl_;
};

// All asynchronous on `stream` (a cudaStream_t). image: device float32 (n_z D, n_y D, n_planes);
// y: the classes' LOR blocks concatenated in the list's order (ClassList offsets). skip may be
// nullptr; LORs whose skip value is 0 get 0 and are not projected. forward / back overwrite.
void forward(Method method, DeviceModel& model, const ClassList& classes, const float* image, const float* skip,
             float* y, void* stream);
void back(Method method, DeviceModel& model, const ClassList& classes, const float* y, float* image, void* stream);

}  // namespace dp::dualhead::gpu
