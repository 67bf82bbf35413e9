// The CUDA backend's shared pieces: error checks, the device pools, the
// stream a worker thread is running, and the table of GPU kernels.
//
// Everything here is plain C++ against the CUDA runtime (linked statically,
// so that loading Loom on a machine without a driver works and simply finds
// no GPU); kernels are generated as source and built with NVRTC at run time,
// and cuBLAS and NVRTC themselves are loaded with dlopen on first use.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <typeindex>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/array.h"
#include "loom/backend/cuda/exit_gate.h"

namespace loom {
class Primitive;
}

namespace loom::cuda {

// Raises a RuntimeError naming `what` when `e` is an error.
void check(cudaError_t e, const char* what);

// The device pool of GPU `index` (a stream-ordered pool of plain device
// allocations).
allocator::Allocator& device_pool(int index);

// The CUDA stream of the GPU stream whose task runs on this thread (the
// legacy default stream outside a GPU worker).
cudaStream_t current_stream();

// The CUDA stream of the only GPU stream there is, or null when there are
// several (or none). With one stream every kernel is ordered on it, so a
// buffer freed there is never reused under a kernel still reading it.
cudaStream_t sole_stream();

// A GPU kernel for one primitive type. It returns false, before touching
// anything, when it does not handle this case (a dtype or layout it lacks);
// the primitive then runs on the CPU.
using Kernel = bool (*)(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                        cudaStream_t stream);
void register_kernel(std::type_index primitive, Kernel kernel);

// Device pointer to `a`'s first element, uploading its buffer if only the
// host holds it.
const void* device_data(const array& a, cudaStream_t stream);
// Gives `out` a fresh row-major device buffer; returns its pointer.
void* alloc_output(array& out);

// Copies `src` (any layout) element by element to `dst` + the element
// offsets `dst_strides` give, on the device; `copy_to_row_major` writes a
// fresh row-major buffer (one memcpy when `src` is dense).
void copy_strided(const array& src, void* dst, const std::vector<int64_t>& dst_strides,
                  cudaStream_t s);
void copy_to_row_major(const array& src, void* dst, cudaStream_t s);
// A row-major device pointer to `a` for kernels that index it densely: `a`'s
// own buffer when it already is, else a copy in `tmp`, which the caller frees
// (stream-ordered) after its launch; `tmp` is left untouched when unused.
const void* dense_data(const array& a, allocator::Buffer& tmp, cudaStream_t s);

// Runs `p` on the GPU as the scheduler would: its GPU kernel, or the CPU
// fallback. For kernels that run other primitives (a fused region op by op).
void eval_primitive(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs);

// Whether the host holds a valid copy of `a`'s buffer (its values can be
// checked there without waiting on the GPU).
bool host_valid(const array& a);
// A pinned, device-mapped int per worker thread that index kernels set when
// an index is out of range. Shared by every such kernel on the thread, so
// zero it before each launch and read it only after synchronising.
int* bad_flag();

// Launch batching (backend.cpp, launch_batch.h). Inside a kernel the backend
// marked batchable (registered with `register_batchable`: it only allocates
// outputs, reads device_data and launches through launch_kernel), a launch of
// the driver function `function` on the eval's stream is recorded, to be
// enqueued with the launches around it as one CUDA graph; returns true then.
// Otherwise it enqueues `stream`'s recorded launches first (a launch must come
// after them) and returns false: the caller launches.
bool record_launch(const void* function, dim3 grid, dim3 block, unsigned shared_bytes,
                   cudaStream_t stream, void** args);
// Enqueues the launches recorded for `stream`, if any.
void flush_launches(cudaStream_t stream);
void register_batchable(std::type_index primitive);

// Number of multiprocessors of GPU `index`.
int multiprocessor_count(int index);

// The calling thread's current CUDA device.
int current_device();

// Compute capability of GPU `index`, e.g. 90.
int compute_capability(int index);

// Host-side timers (LOOM_CUDA_PROFILE=1): where a small op's microseconds go.
// Totals per slot (calls, mean) print to stderr at exit.
namespace profile {
enum Slot {
  kEval,
  kPrepare,
  kAlloc,
  kLaunch,
  kSignal,
  kSync,
  kFlush,
  kGraphUpdate,
  kGraphLaunch,
  kSlots
};
bool enabled();
void add(Slot slot, long long ns);
long long now_ns();
struct Timer {
  explicit Timer(Slot s) : slot(s), start(enabled() ? now_ns() : -1) {}
  ~Timer() { stop(); }
  void stop() {
    if (start >= 0) add(slot, now_ns() - start);
    start = -1;
  }
  Slot slot;
  long long start;
};
} // namespace profile

} // namespace loom::cuda
