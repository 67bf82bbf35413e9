// Kernels built at run time with NVRTC (loaded with dlopen on first use) for
// the device's own architecture, cached in memory and on disk.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace loom::cuda {

// The kernel `kernel_name` of `source` (extern "C"), built for the current
// device. Raises a RuntimeError with NVRTC's log when the source fails.
cudaKernel_t jit_kernel(const std::string& source, const std::string& kernel_name);

// Launches a grid-stride element-wise kernel over `n` elements.
void launch_elementwise(cudaKernel_t kernel, size_t n, void** args, cudaStream_t stream);

// Device-side helpers every generated kernel starts with: storage types for
// float16/bfloat16 and their conversions to and from float.
const char* jit_prelude();

} // namespace loom::cuda
