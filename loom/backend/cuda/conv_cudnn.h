// Convolution forward and gradients through cuDNN, when a cuDNN 9 library can be loaded
// (conv_cudnn.cpp). conv.cpp asks it first and runs its im2col path when it
// declines.
#pragma once

#include <cuda_runtime.h>

#include "loom/array.h"
#include "loom/primitives/conv.h"

namespace loom::cuda {

// y = conv(x, w) for row-major, channels-last x (N, spatial..., C), w
// (O, taps..., C/G) and y (N, out..., O), all device pointers of `out`'s
// dtype. Returns false, launching nothing, when cuDNN is absent
// (LOOM_CUDNN=0 turns it off), the form has no exact cuDNN equivalent (input
// dilation, padding whose output size differs from the primitive's), or
// cuDNN refuses the descriptors; conv.cpp then runs im2col + GEMM.
bool cudnn_conv_forward(const ConvParams& p, const array& x, const array& w, const array& out,
                        const void* xp, const void* wp, void* y, cudaStream_t s);

// The gradients of y = conv(x, w), for the forms cudnn_conv_forward takes
// (any kernel size here): dx from dy and w (cuDNN's backward data), dw from x
// and dy (backward filter). Shapes and dtype are the forward's; every pointer
// is row-major, channels-last, on the device. Returns false, launching
// nothing, where cudnn_conv_forward would decline the form.
bool cudnn_conv_backward_data(const ConvParams& p, const Shape& xs, const Shape& ws,
                              const Shape& ys, Dtype d, const void* dy, const void* wp, void* dx,
                              cudaStream_t s);
bool cudnn_conv_backward_filter(const ConvParams& p, const Shape& xs, const Shape& ws,
                                const Shape& ys, Dtype d, const void* xp, const void* dy, void* dw,
                                cudaStream_t s);

// Whether a cuDNN library was loaded (loading it on first call), for tests
// and the docs' benchmarks.
bool cudnn_available();

} // namespace loom::cuda
