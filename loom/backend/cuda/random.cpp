// RandomBits on the GPU: the CPU's Threefry-2x32 word layout (primitives/
// random.h), one thread per hash block of one key, so every word is the one
// the CPU computes. Bits and uniform samples are bit-identical to the CPU;
// normal samples use the CPU's formula with the same float operations in the
// same order, except the logarithm (computed in double and rounded to float,
// where the CPU calls glibc's logf, for MLX's values): glibc's logf is not
// correctly rounded for about 1.8% of these arguments (measured over 2e7),
// and there the samples differ by about an ulp. float64 normals stay on the
// CPU.
#include "loom/primitives/random.h"

#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

const char* threefry_source() {
  return R"(
__device__ __forceinline__ void loom_threefry(unsigned k0, unsigned k1, unsigned c0, unsigned c1,
                                              unsigned& o0, unsigned& o1) {
  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const unsigned ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  unsigned x0 = c0 + ks[0], x1 = c1 + ks[1];
#pragma unroll
  for (unsigned b = 0; b < 5; ++b) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = __funnelshift_l(x1, x1, rot[(b % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(b + 1) % 3];
    x1 += ks[(b + 2) % 3] + b + 1;
  }
  o0 = x0; o1 = x1;
}
__device__ __forceinline__ float loom_uniform(unsigned w) {
  return fminf(__fmul_rn(__uint2float_rn(w), 0x1p-32f), 0x1.fffffep-1f);
}
__device__ __forceinline__ float loom_normal(unsigned w, float scale) {
  const float s = __fsub_rn(__fmul_rn(2.0f, loom_uniform(w)), 0x1.fffffep-1f);
  const float t = (float)log((double)__fmaf_rn(s, -s, 1.0f));
  float tail = 3.03697567e-10f;
  tail = __fmaf_rn(tail, t, 2.93243101e-8f);
  tail = __fmaf_rn(tail, t, 1.22150334e-6f);
  tail = __fmaf_rn(tail, t, 2.84108955e-5f);
  tail = __fmaf_rn(tail, t, 3.93552968e-4f);
  tail = __fmaf_rn(tail, t, 3.02698812e-3f);
  tail = __fmaf_rn(tail, t, 4.83185798e-3f);
  tail = __fmaf_rn(tail, t, -2.64646143e-1f);
  tail = __fmaf_rn(tail, t, 8.40016484e-1f);
  float center = 5.43877832e-9f;
  center = __fmaf_rn(center, t, 1.43285448e-7f);
  center = __fmaf_rn(center, t, 1.22774793e-6f);
  center = __fmaf_rn(center, t, 1.12963626e-7f);
  center = __fmaf_rn(center, t, -5.61530760e-5f);
  center = __fmaf_rn(center, t, -1.47697632e-4f);
  center = __fmaf_rn(center, t, 2.31468678e-3f);
  center = __fmaf_rn(center, t, 1.15392581e-2f);
  center = __fmaf_rn(center, t, -2.32015476e-1f);
  center = __fmaf_rn(center, t, 8.86226892e-1f);
  const float e = __fmul_rn(s, fabsf(t) > 6.125f ? tail : center);
  return __fmul_rn(__fmul_rn(1.41421354f, e), scale);
}
)";
}

// How word `w` becomes output element `o`, for the distribution and dtype.
std::string put_source(RandomDistribution dist, Dtype d) {
  std::string st = d == complex64 ? "float" : storage_type(d);
  std::string head = "__device__ __forceinline__ void loom_put(" + st + "* o, unsigned w) {\n";
  if (dist == RandomDistribution::bits) return head + "  *o = (" + st + ")w;\n}\n";
  if (dist == RandomDistribution::uniform) {
    if (d == float16 || d == bfloat16) {
      // Rounded once; a sample that rounds up to 1 takes the largest value below.
      std::string top = d == float16 ? "0x3BFF" : "0x3F7F";
      return head +
             "  loom_st(o, loom_uniform(w));\n  if (!(loom_ld(*o) < 1.0f)) o->bits = " + top +
             ";\n}\n";
    }
    return head + "  *o = (" + st + ")loom_uniform(w);\n}\n";
  }
  const char* scale = d == complex64 ? "0.707106769f" : "1.0f";
  if (d == float16 || d == bfloat16)
    return head + "  loom_st(o, loom_normal(w, " + scale + "));\n}\n";
  return head + "  *o = loom_normal(w, " + scale + ");\n}\n";
}

// Byte-sized bits (`bytes` per key not a multiple of four) write the first
// bytes of each word; everything else writes one element per word.
std::string random_source(const std::string& name, RandomDistribution dist, Dtype d,
                          bool byte_mode) {
  std::string src = jit_prelude();
  src += threefry_source();
  std::string st = byte_mode ? "unsigned char" : d == complex64 ? "float" : storage_type(d);
  if (dist == RandomDistribution::bits && !byte_mode) st = "unsigned int";
  if (!byte_mode) src += put_source(dist, dist == RandomDistribution::bits ? uint32 : d);
  src += "extern \"C\" __global__ void " + name + "(const unsigned* __restrict__ keys, " + st +
         "* __restrict__ out, long long num_keys, long long words, long long bytes) {\n"
         "  const long long half = words / 2, odd = words % 2, blocks = half + odd;\n"
         "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
         "       i < num_keys * blocks; i += (long long)gridDim.x * blockDim.x) {\n"
         "    const long long k = i / blocks, j = i - k * blocks;\n"
         "    const unsigned k0 = keys[2 * k], k1 = keys[2 * k + 1];\n"
         "    unsigned a, b;\n"
         "    long long ja = j, jb = -1;\n"
         "    if (j < half) { loom_threefry(k0, k1, (unsigned)j, (unsigned)(j + half + odd), a, b);"
         " jb = j + half + odd; }\n"
         "    else loom_threefry(k0, k1, (unsigned)half, 0u, a, b);\n";
  if (byte_mode) {
    src +=
        "    unsigned char* o = out + k * bytes;\n"
        "    for (int q = 0; q < 4 && 4 * ja + q < bytes; ++q) o[4 * ja + q] = (a >> (8 * q)) & "
        "255u;\n"
        "    if (jb >= 0)\n"
        "      for (int q = 0; q < 4 && 4 * jb + q < bytes; ++q) o[4 * jb + q] = (b >> (8 * q)) "
        "& 255u;\n";
  } else {
    src += "    " + st +
           "* o = out + k * words;\n"
           "    loom_put(o + ja, a);\n"
           "    if (jb >= 0) loom_put(o + jb, b);\n";
  }
  src += "  }\n}\n";
  return src;
}

bool random_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto& r = static_cast<RandomBits&>(prim);
  const array& keys = inputs[0];
  array& out = outputs[0];
  const RandomDistribution dist = r.distribution();
  const Dtype d = out.dtype();
  if (keys.dtype() != uint32 || !keys.flags().row_contiguous || keys.data_size() != keys.size())
    return false;
  if (dist != RandomDistribution::bits) {
    if (dist == RandomDistribution::normal && d == float64) return false;
    if (!(d == float16 || d == bfloat16 || d == float32 || d == float64 ||
          (d == complex64 && dist == RandomDistribution::normal)))
      return false;
  }
  const long long num_keys = static_cast<long long>(keys.size() / 2);
  void* dst = alloc_output(out);
  if (num_keys == 0 || out.size() == 0) return true;
  const long long per_key = static_cast<long long>(out.size()) / num_keys;
  long long bytes = per_key * static_cast<long long>(out.itemsize());
  bool byte_mode = false;
  long long words = per_key;
  if (dist == RandomDistribution::bits) {
    byte_mode = bytes % 4 != 0;
    words = (bytes + 3) / 4;
  } else if (d == complex64) {
    words = 2 * per_key;
  }
  // The counters are 32-bit words of the key's stream, as on the CPU.
  if (words > 0xffffffffll) return false;
  const void* k = device_data(keys, s);
  std::string name = "loom_random_" + std::to_string(static_cast<int>(dist)) + "_" +
                     std::to_string(static_cast<int>(d.val)) + (byte_mode ? "_b" : "");
  cudaKernel_t kern = jit_kernel(name, [&] { return random_source(name, dist, d, byte_mode); });
  long long nk = num_keys;
  void* args[] = {&k, &dst, &nk, &words, &bytes};
  launch_elementwise(kern, static_cast<size_t>(num_keys * (words / 2 + words % 2)), args, s);
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(RandomBits), &random_kernel); }
} registration;

} // namespace

std::string random_kernel_source(const std::string& name, int dist, Dtype d, bool byte_mode) {
  return random_source(name, static_cast<RandomDistribution>(dist), d, byte_mode);
}

} // namespace loom::cuda
