// The CPU kernel of a fused region: ONE pass over memory. The region's
// elements are cut into tiles small enough to stay in L1/L2; for each tile
// every op runs its own vectorised element-wise kernel (its eval_cpu on
// tile-sized arrays), intermediates live only as long as the tile, and only
// the escaping values are written to full-size buffers. Tiles are spread over
// the intra-op pool. No compiler is needed at run time.
//
// Regions whose values are all float32 and whose ops are float table entries
// take compiled_f32.cpp instead (loops over L1-sized chunks, no arrays).
#include "loom/backend/cpu/compiled.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/compile/compiled.h"

namespace loom::compile_detail {

namespace {

// Elements per tile (LOOM_COMPILE_TILE overrides): 16K float32 is 64 KiB per
// value, so a chain of a few values stays in L2.
size_t tile_elements() {
  static const size_t n = [] {
    const char* v = std::getenv("LOOM_COMPILE_TILE");
    size_t t = v && *v ? std::strtoull(v, nullptr, 10) : 0;
    return t >= 64 ? t : size_t(1) << 14;
  }();
  return n;
}

// Strides (in elements) that read `in` as `shape` with broadcasting, the
// dimensions aligned on the right.
Strides broadcast_strides_to(const array& in, const Shape& shape) {
  Strides out(shape.size(), 0);
  int offset = static_cast<int>(shape.size()) - in.ndim();
  for (int d = 0; d < in.ndim(); ++d) {
    out[offset + d] = in.shape()[d] == 1 ? 0 : in.strides()[d];
  }
  return out;
}

template <typename T>
void gather_typed(const T* src, const cpu::StridedLayout<1>& layout, size_t start, size_t n,
                  T* dst) {
  const Shape& shape = layout.shape;
  const Strides& st = layout.strides[0];
  int nd = static_cast<int>(shape.size());
  // Called per chunk: no heap allocation for the index of common ranks.
  int64_t small[8] = {};
  std::vector<int64_t> large(nd > 8 ? nd : 0, 0);
  int64_t* idx = nd > 8 ? large.data() : small;
  size_t rest = start;
  int64_t offset = 0;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = static_cast<int64_t>(rest % shape[d]);
    rest /= shape[d];
    offset += idx[d] * st[d];
  }
  size_t done = 0;
  while (done < n) {
    int64_t run = std::min<int64_t>(shape[nd - 1] - idx[nd - 1], static_cast<int64_t>(n - done));
    int64_t inner = st[nd - 1];
    const T* p = src + offset;
    if (inner == 1) {
      std::memcpy(dst + done, p, run * sizeof(T));
    } else if (inner == 0) {
      std::fill(dst + done, dst + done + run, *p);
    } else {
      for (int64_t i = 0; i < run; ++i) dst[done + i] = p[i * inner];
    }
    done += run;
    // Advance the index past the run, carrying into outer dimensions.
    offset += run * inner;
    idx[nd - 1] += run;
    for (int d = nd - 1; d > 0 && idx[d] == shape[d]; --d) {
      offset -= idx[d] * st[d];
      idx[d] = 0;
      ++idx[d - 1];
      offset += st[d - 1];
    }
  }
}

// Copies a tile value (dense, or one element broadcast) into `out` at `start`.
void store_tile(const array& v, size_t n, array& out, size_t start) {
  char* dst = out.data<char>() + start * out.itemsize();
  const char* src = v.data<char>();
  size_t item = out.itemsize();
  if (n == 1 || (v.ndim() == 1 && v.strides()[0] == 1)) {
    std::memcpy(dst, src, n * item);
    return;
  }
  int64_t step = v.strides()[0];
  for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * item, src + i * step * item, item);
}

} // namespace

void gather_into(const array& in, const InputPlan& plan, size_t start, size_t n, void* dst) {
  const char* src = in.data<char>();
  const auto& layout = plan.layout;
  switch (in.itemsize()) {
    case 1:
      return gather_typed(reinterpret_cast<const uint8_t*>(src), layout, start, n,
                          static_cast<uint8_t*>(dst));
    case 2:
      return gather_typed(reinterpret_cast<const uint16_t*>(src), layout, start, n,
                          static_cast<uint16_t*>(dst));
    case 4:
      return gather_typed(reinterpret_cast<const uint32_t*>(src), layout, start, n,
                          static_cast<uint32_t*>(dst));
    case 8:
      return gather_typed(reinterpret_cast<const uint64_t*>(src), layout, start, n,
                          static_cast<uint64_t*>(dst));
    default:
      throw std::logic_error("[Compiled] Unsupported element size.");
  }
}

void Compiled::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Shape shape = outputs[0].shape();
  const size_t total = outputs[0].size();
  if (total == 0) {
    for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
    return;
  }

  std::vector<InputPlan> plans(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const array& in = inputs[k];
    Strides bs = broadcast_strides_to(in, shape);
    bool all_zero = std::all_of(bs.begin(), bs.end(), [](int64_t s) { return s == 0; });
    if (all_zero) {
      plans[k].kind = InputPlan::scalar;
    } else if (in.shape() == shape && in.flags().row_contiguous) {
      plans[k].kind = InputPlan::dense;
    } else {
      plans[k].kind = InputPlan::strided;
      plans[k].layout = cpu::collapse<1>(shape, {bs});
    }
  }

  if (eval_f32_chain(*this, inputs, outputs, plans)) return;
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));

  const size_t kTile = tile_elements();
  const size_t tiles = (total + kTile - 1) / kTile;
  cpu::parallel_for(tiles, 1, [&](size_t t0, size_t t1) {
    // Per-thread scratch for inputs that must be gathered.
    std::vector<std::optional<array>> scratch(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (plans[k].kind != InputPlan::strided) continue;
      array s = array::empty({static_cast<int32_t>(kTile)}, inputs[k].dtype());
      s.set_data(allocator::allocate(kTile * inputs[k].itemsize()));
      scratch[k] = std::move(s);
    }
    std::vector<std::optional<array>> values(num_inputs_ + ops_.size());
    for (size_t t = t0; t < t1; ++t) {
      size_t start = t * kTile;
      size_t n = std::min(kTile, total - start);
      Shape tile_shape{static_cast<int32_t>(n)};
      for (size_t k = 0; k < inputs.size(); ++k) {
        const array& in = inputs[k];
        array v = array::empty(tile_shape, in.dtype());
        switch (plans[k].kind) {
          case InputPlan::dense:
            v.copy_shared_buffer(in, {1}, Flags{true, true, true}, n, static_cast<int64_t>(start));
            break;
          case InputPlan::scalar:
            v.copy_shared_buffer(in, {0}, Flags{n == 1, n == 1, n == 1}, 1);
            break;
          case InputPlan::strided:
            gather_into(in, plans[k], start, n, scratch[k]->data<char>());
            v.copy_shared_buffer(*scratch[k], {1}, Flags{true, true, true}, n);
            break;
        }
        v.set_status(Status::available);
        values[k] = std::move(v);
      }
      for (size_t i = 0; i < ops_.size(); ++i) {
        const FusedOp& op = ops_[i];
        if (op.primitive->traits().broadcast) {
          // Inputs are already read as the region's shape.
          values[num_inputs_ + i] = *values[op.args[0]];
          continue;
        }
        std::vector<array> args;
        args.reserve(op.args.size());
        for (int a : op.args) args.push_back(*values[a]);
        std::vector<array> outs{array::empty(tile_shape, op.dtype)};
        op.primitive->eval_cpu(args, outs);
        outs[0].set_status(Status::available);
        values[num_inputs_ + i] = std::move(outs[0]);
      }
      for (size_t j = 0; j < outputs_.size(); ++j) {
        store_tile(*values[num_inputs_ + outputs_[j]], n, outputs[j], start);
      }
      // Release the tile's intermediates before the next tile.
      for (auto& v : values) v.reset();
    }
  });
}

} // namespace loom::compile_detail
