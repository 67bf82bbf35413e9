// Copies between layouts and dtypes: the kernel behind astype, contiguous
// copies, concatenate and scatter into slices.
#pragma once

#include "loom/array.h"

namespace loom::cpu {

// Writes the elements of `src` (any layout, any dtype) into `dst`, viewed
// with `dst_strides` starting `dst_offset` elements into its buffer.
void copy_strided(const array& src, array& dst, const Strides& dst_strides, int64_t dst_offset);

// Gives `dst` a fresh row-major buffer holding `src` converted to dst's dtype.
void copy_contiguous(const array& src, array& dst);

// A row-major copy of `a` if it is not already row-contiguous.
array ensure_row_contiguous(const array& a);

// Converts n elements between dtypes.
void convert_buffer(const void* src, Dtype src_dtype, void* dst, Dtype dst_dtype, size_t n);

} // namespace loom::cpu
