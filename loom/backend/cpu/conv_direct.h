// Convolution geometry shared by the CPU kernels, and the direct float32
// kernels (AVX-512 or AVX2, chosen at run time) that replace im2col + sgemm where the
// output has enough channels to fill vector lanes.
//
// The direct forward keeps a tile of output pixels x up to 64 output channels
// in registers and accumulates over (tap, input channel) with one broadcast
// of an input value against contiguous rows of a weight packed once per call
// as [tap][c][o]: no patch buffer, so the product runs at the FMA units'
// rate instead of alternating with im2col's copies. The direct weight
// gradient is the same tile turned around (input channels x output channels,
// accumulated over output pixels), per thread into its own buffer.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "loom/array.h"

namespace loom {
struct ConvParams;
} // namespace loom

namespace loom::cpu {

// Geometry with the spatial axes padded to three (leading unit axes), so one
// loop nest serves 1-, 2- and 3-D convolutions.
struct ConvGeometry {
  int64_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0;
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1};
  int64_t rows = 0, taps = 1, kc = 0;
  // Per axis: input index read by (output position, tap), or -1 (padding or
  // a hole of the input dilation).
  std::array<std::vector<int64_t>, 3> src;
  bool identity = true; // every tap reads the input position of its output (1x1 kernels)
};

// The geometry of input shape `xs` (N, S..., C), weight `ws` (O, K..., C/G),
// output `os` (N, S'..., O).
ConvGeometry make_conv_geometry(const Shape& xs, const Shape& ws, const Shape& os,
                                const ConvParams& p);

// Output row r as (batch, position along each padded axis).
struct ConvRow {
  int64_t n, o0, o1, o2;
};

inline ConvRow conv_row(const ConvGeometry& g, int64_t r) {
  ConvRow ri;
  ri.o2 = r % g.out[2];
  r /= g.out[2];
  ri.o1 = r % g.out[1];
  r /= g.out[1];
  ri.o0 = r % g.out[0];
  ri.n = r / g.out[0];
  return ri;
}

// Whether this CPU runs the direct kernels (AVX-512F, else AVX2 + FMA).
bool conv_direct_available();

// Caps the instruction set the direct kernels use (2: AVX-512, 1: AVX2,
// 0: none, so convolutions take the im2col path), for tests of the AVX2
// kernels on an AVX-512 machine; returns the previous cap.
int conv_direct_cap_isa(int level);

// Whether the direct forward suits `g`: enough output channels per group to
// fill a vector (below that the masked lanes waste more than im2col costs).
bool conv_direct_suits(const ConvGeometry& g);

// out (rows, O) = the convolution of x (row-contiguous input) with w
// (row-contiguous weight, (O, taps, Cg)). Any stride, padding, dilation,
// flip and group count; requires conv_direct_available().
void conv_direct_f32(const ConvGeometry& g, const float* x, const float* w, float* out);

// The weight gradient's contraction in the layout conv.cpp's swapped path
// uses: g describes the "convolution" whose rows are the cotangent's
// positions (batch, P...) and whose taps are the weight's positions Q, x is
// the input as stored (batch, S..., C) with C = g.C, cot the cotangent as
// stored (rows, O), and out[c, q, o] = sum over rows r of
// x[src(r, q), c] * cot[r, o].
bool conv_wgrad_direct_suits(const ConvGeometry& g, int64_t O);
void conv_wgrad_direct_f32(const ConvGeometry& g, const float* x, const float* cot, int64_t O,
                           float* out);

} // namespace loom::cpu
