// Kernels built at run time with NVRTC (loaded with dlopen on first use) for
// the device's own architecture, cached in memory and on disk.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

namespace loom::cuda {

// The kernel `kernel_name` (extern "C"), built for the current device from
// the source `make_source` returns; the source is only generated on the first
// request for the name. Raises a RuntimeError with NVRTC's log when it fails.
cudaKernel_t jit_kernel(const std::string& kernel_name,
                        const std::function<std::string()>& make_source);

// Launches `kernel` on the current device: through the driver's
// cuLaunchKernel with the kernel's function for this context, resolved once,
// which saves only the runtime's per-launch lookup of a library kernel (on an
// H200 VM, 3.8 us per launch against cudaLaunchKernel's 4.0: the launch itself
// dominates); LOOM_CUDA_RUNTIME_LAUNCH=1 uses the runtime's.
void launch_kernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared_bytes,
                   cudaStream_t stream, const char* what);

// Launches a grid-stride element-wise kernel over `n` elements.
void launch_elementwise(cudaKernel_t kernel, size_t n, void** args, cudaStream_t stream);

// Device-side helpers every generated kernel starts with: storage types for
// float16/bfloat16 and their conversions to and from float.
const char* jit_prelude();

} // namespace loom::cuda
