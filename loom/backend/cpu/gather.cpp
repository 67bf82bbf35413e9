// CPU kernels of Gather and Scatter. Each index tuple addresses one block (the
// non-indexed axes); the kernels first turn the index arrays into one element
// offset per tuple, then move whole blocks, with memcpy when a block is
// contiguous.
#include "loom/primitives/gather.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

Strides row_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

bool is_indexed(const std::vector<int>& axes, int d) {
  return std::find(axes.begin(), axes.end(), d) != axes.end();
}

// Element offset in `target` (shape/strides of the indexed array) of the
// block each index tuple addresses. Negative indices count from the end; an
// index still out of range raises, naming the op.
std::vector<int64_t> block_offsets(const char* op, const Shape& shape, const Strides& strides,
                                   const std::vector<int>& axes,
                                   const std::vector<array>& indices) {
  size_t n = indices.empty() ? 1 : indices[0].size();
  std::vector<int64_t> out(n, 0);
  std::atomic<bool> bad{false};
  for (size_t j = 0; j < indices.size(); ++j) {
    // Read through the index's own layout: the iotas of take_along_axis and
    // of vmap are broadcast views and are never materialised.
    const array& idx = indices[j];
    auto layout = cpu::collapse<1>(idx.shape(), {idx.strides()});
    int64_t dim = shape[axes[j]];
    int64_t stride = strides[axes[j]];
    dispatch(idx.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T* p = idx.data<T>();
        cpu::parallel_for(n, 1 << 15, [&](size_t b, size_t e) {
          bool local_bad = false;
          int64_t* o = out.data();
          cpu::for_each_run<1>(layout, b, e, [&](auto off, int64_t count, auto st) {
            const T* q = p + off[0];
            int64_t* dst = o + b;
            for (int64_t i = 0; i < count; ++i) {
              int64_t v = static_cast<int64_t>(q[i * st[0]]);
              if (v < 0) v += dim;
              local_bad |= (v < 0) | (v >= dim);
              dst[i] += v * stride;
            }
            b += count;
          });
          if (local_bad) bad = true;
        });
        if (bad) {
          array c = cpu::ensure_row_contiguous(idx);
          const T* q = c.data<T>();
          for (size_t i = 0; i < n; ++i) {
            int64_t v = static_cast<int64_t>(q[i]);
            if (v < -dim || v >= dim) {
              std::ostringstream msg;
              msg << "[" << op << "] Index " << v << " is out of bounds for axis " << axes[j]
                  << " with size " << dim << ".";
              throw std::out_of_range(msg.str());
            }
          }
        }
      } else {
        throw std::invalid_argument(std::string("[") + op + "] Indices must be integers.");
      }
    });
  }
  return out;
}

// Layout of one block: the non-indexed axes of the indexed array (strides
// `strides`) against a row-major block of the same shape.
cpu::StridedLayout<2> block_layout(const Shape& shape, const Strides& strides,
                                   const std::vector<int>& axes) {
  Shape rest;
  Strides rest_strides;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (is_indexed(axes, d)) continue;
    rest.push_back(shape[d]);
    rest_strides.push_back(strides[d]);
  }
  return cpu::collapse<2>(rest, {rest_strides, row_strides(rest)});
}

bool is_flat(const cpu::StridedLayout<2>& l) {
  return l.shape.size() == 1 && (l.shape[0] == 1 || (l.strides[0][0] == 1 && l.strides[1][0] == 1));
}

// Element types by size: a gather or a plain scatter only moves bytes.
template <typename F>
void by_size(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

} // namespace

void Gather::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  std::vector<array> indices(inputs.begin() + 1, inputs.end());
  auto layout = block_layout(a.shape(), a.strides(), axes_);
  const array& idx0 = indices[0];
  int64_t block = out.size() / static_cast<int64_t>(idx0.size());
  bool flat = is_flat(layout);
  if (indices.size() == 1 && flat && idx0.flags().row_contiguous &&
      (idx0.dtype() == int32 || idx0.dtype() == int64)) {
    // take along one axis with contiguous blocks: read the index in the copy
    // loop, without an offset table.
    int64_t dim = a.shape(axes_[0]);
    int64_t stride = a.strides()[axes_[0]];
    std::atomic<bool> bad{false};
    by_size(a.itemsize(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = a.data<T>();
      T* dst = out.data<T>();
      auto copy_rows = [&](const auto* p) {
        size_t grain = std::max<size_t>(1, (1 << 16) / std::max<int64_t>(block, 1));
        cpu::parallel_for(idx0.size(), grain, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) {
            int64_t v = static_cast<int64_t>(p[i]);
            if (v < 0) v += dim;
            if (v < 0 || v >= dim) {
              bad = true;
              continue;
            }
            const T* s = src + v * stride;
            if (block == 1) {
              dst[i] = *s;
            } else {
              std::memcpy(dst + i * block, s, block * sizeof(T));
            }
          }
        });
      };
      if (idx0.dtype() == int32) {
        copy_rows(idx0.data<int32_t>());
      } else {
        copy_rows(idx0.data<int64_t>());
      }
    });
    // Name the first bad index (block_offsets raises on it).
    if (bad) block_offsets("gather", a.shape(), a.strides(), axes_, indices);
    return;
  }
  std::vector<int64_t> offsets = block_offsets("gather", a.shape(), a.strides(), axes_, indices);
  by_size(a.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    size_t grain = std::max<size_t>(1, (1 << 16) / std::max<int64_t>(block, 1));
    cpu::parallel_for(offsets.size(), grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const T* s = src + offsets[i];
        T* d = dst + i * block;
        if (flat) {
          if (block == 1) {
            *d = *s;
          } else {
            std::memcpy(d, s, block * sizeof(T));
          }
          continue;
        }
        cpu::for_each_run<2>(layout, 0, block, [&](auto off, int64_t n, auto st) {
          for (int64_t k = 0; k < n; ++k) d[off[1] + k * st[1]] = s[off[0] + k * st[0]];
        });
      }
    });
  });
}

void Scatter::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& out = outputs[0];
  bool dense = a.flags().contiguous && a.data_size() == a.size();
  if (dense && a.is_donatable() && !out.is_tracer()) {
    out.copy_shared_buffer(a);
  } else {
    cpu::copy_contiguous(a, out);
  }
  array updates = cpu::ensure_row_contiguous(inputs.back());
  if (updates.size() == 0 || out.size() == 0) return;
  std::vector<array> indices(inputs.begin() + 1, inputs.end() - 1);
  auto layout = block_layout(out.shape(), out.strides(), axes_);
  const array& idx0 = indices[0];
  int64_t block = updates.size() / static_cast<int64_t>(idx0.size());
  bool flat = is_flat(layout);
  // One contiguous int32/int64 index of single elements (x.at[i].add(v) on
  // a vector): read the index in the update loop, without an offset table.
  bool direct = indices.size() == 1 && flat && block == 1 && idx0.flags().row_contiguous &&
                (idx0.dtype() == int32 || idx0.dtype() == int64);
  std::vector<int64_t> offsets;
  if (!direct) offsets = block_offsets(name(), out.shape(), out.strides(), axes_, indices);
  // Tuples run in order, so repeated indices accumulate (and the last plain
  // write wins); a large block is split across the pool instead.
  auto run = [&](auto* dst, const auto* src, auto&& combine) {
    if (direct) {
      int64_t dim = out.shape(axes_[0]);
      int64_t stride = out.strides()[axes_[0]];
      auto apply = [&](const auto* p) {
        for (size_t i = 0; i < idx0.size(); ++i) {
          int64_t v = static_cast<int64_t>(p[i]);
          if (v < 0) v += dim;
          if (v < 0 || v >= dim) {
            std::ostringstream msg;
            msg << "[" << name() << "] Index " << p[i] << " is out of bounds for axis " << axes_[0]
                << " with size " << dim << ".";
            throw std::out_of_range(msg.str());
          }
          combine(dst[v * stride], src[i]);
        }
      };
      if (idx0.dtype() == int32) {
        apply(idx0.data<int32_t>());
      } else {
        apply(idx0.data<int64_t>());
      }
      return;
    }
    for (size_t i = 0; i < offsets.size(); ++i) {
      auto* d = dst + offsets[i];
      const auto* s = src + i * block;
      if (flat) {
        if (block < (1 << 15)) {
          for (int64_t k = 0; k < block; ++k) combine(d[k], s[k]);
        } else {
          cpu::parallel_for(block, 1 << 14, [&](size_t b, size_t e) {
            for (size_t k = b; k < e; ++k) combine(d[k], s[k]);
          });
        }
        continue;
      }
      cpu::for_each_run<2>(layout, 0, block, [&](auto off, int64_t n, auto st) {
        for (int64_t k = 0; k < n; ++k) combine(d[off[0] + k * st[0]], s[off[1] + k * st[1]]);
      });
    }
  };
  if (type_ == ReduceType::none) {
    by_size(out.itemsize(), [&](auto tag) {
      using T = decltype(tag);
      run(out.data<T>(), updates.data<T>(), [](T& d, const T& s) { d = s; });
    });
    return;
  }
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    const T* src = updates.data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      switch (type_) {
        case ReduceType::sum:
        case ReduceType::max:
          run(dst, src, [](T& d, T s) { d = d || s; });
          break;
        default:
          run(dst, src, [](T& d, T s) { d = d && s; });
          break;
      }
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      auto f = [](float x) { return T(x); };
      switch (type_) {
        case ReduceType::sum:
          run(dst, src, [&](T& d, T s) { d = f(float(d) + float(s)); });
          break;
        case ReduceType::prod:
          run(dst, src, [&](T& d, T s) { d = f(float(d) * float(s)); });
          break;
        case ReduceType::max:
          run(dst, src, [&](T& d, T s) {
            float x = d, y = s;
            if (y > x || y != y) d = s;
          });
          break;
        default:
          run(dst, src, [&](T& d, T s) {
            float x = d, y = s;
            if (y < x || y != y) d = s;
          });
          break;
      }
    } else {
      switch (type_) {
        case ReduceType::sum:
          run(dst, src, [](T& d, T s) { d = ew::Add{}(d, s); }); // integers wrap around
          break;
        case ReduceType::prod:
          run(dst, src, [](T& d, T s) { d = ew::Multiply{}(d, s); });
          break;
        case ReduceType::max:
          if constexpr (!std::is_same_v<T, std::complex<float>>) {
            // NaN propagates, as in maximum.
            run(dst, src, [](T& d, T s) {
              if (s > d || s != s) d = s;
            });
          }
          break;
        default:
          if constexpr (!std::is_same_v<T, std::complex<float>>) {
            run(dst, src, [](T& d, T s) {
              if (s < d || s != s) d = s;
            });
          }
          break;
      }
    }
  });
}

} // namespace loom
