#include "loom/array.h"

#include <cstring>
#include <sstream>

#include "loom/allocator/object_pool.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/scheduler.h"
#include "loom/transforms/trace.h"

namespace loom {

namespace {
OriginHook g_origin_hook = nullptr;

// Descriptors and nodes of lazy ops come from the per-thread object pool.
template <typename T, typename... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(allocator::PoolAllocator<T>(), std::forward<Args>(args)...);
}
} // namespace

void set_origin_hook(OriginHook hook) { g_origin_hook = hook; }

Strides row_major_strides(const Shape& shape) {
  Strides strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  }
  return strides;
}

size_t shape_size(const Shape& shape) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    os << shape[i];
    if (i + 1 < shape.size()) os << ",";
  }
  os << ")";
  return os.str();
}

ArrayDesc::ArrayDesc(Shape s, Dtype d) : shape(std::move(s)), size(shape_size(shape)), dtype(d) {
  for (auto dim : shape) {
    if (dim < 0) {
      throw std::invalid_argument("[array] Negative dimension in shape " + shape_to_string(shape) +
                                  ".");
    }
  }
}

ArrayDesc::~ArrayDesc() = default;

Node::Node(std::shared_ptr<Primitive> p, std::vector<array> in)
    : primitive(std::move(p)), inputs(std::move(in)) {
  if (g_origin_hook != nullptr) origin = g_origin_hook();
}

namespace {

// Releasing a long chain must not recurse: a dying node hands its inputs to a
// per-thread worklist, and only the outermost release drains it.
struct ReleaseList {
  std::vector<array> pending;
  bool draining = false;
};

// The worklist is reached through trivially destructible thread-locals, so
// that graphs still held by thread-locals destroyed after it (the thread's
// default random key, left lazy by a compiled function that advanced
// mx.random.state) release without touching a destroyed vector: that write
// into freed memory corrupted the heap at interpreter exit.
thread_local ReleaseList* t_release = nullptr;
thread_local bool t_release_gone = false;

// Constructed (function-local, dynamic initialisation) when the thread first
// releases a node, so the runtime registers its destructor then: it runs
// before the destructors of thread-locals constructed earlier.
struct ReleaseListOwner {
  ReleaseListOwner() { t_release = new ReleaseList; }
  ~ReleaseListOwner() {
    delete t_release;
    t_release = nullptr;
    t_release_gone = true;
  }
};

ReleaseList* release_list() {
  if (t_release == nullptr && !t_release_gone) {
    thread_local ReleaseListOwner owner;
  }
  return t_release;
}

} // namespace

Node::~Node() {
  ReleaseList* worklist = release_list();
  if (worklist == nullptr) return; // thread teardown: the inputs release recursively
  ReleaseList& list = *worklist;
  for (auto& in : inputs) list.pending.push_back(std::move(in));
  inputs.clear();
  if (list.draining) return;
  list.draining = true;
  while (!list.pending.empty()) {
    array last = std::move(list.pending.back());
    list.pending.pop_back();
  }
  list.draining = false;
}

void array::init_scalar(const void* src, Dtype src_dtype) {
  set_data(allocator::allocate(itemsize()));
  dispatch(dtype(), [&](auto tag) {
    using D = typename decltype(tag)::type;
    *data<D>() = dispatch(src_dtype, [&](auto stag) -> D {
      using S = typename decltype(stag)::type;
      return convert<D>(*static_cast<const S*>(src));
    });
  });
  set_status(Status::available);
}

array::array(complex64_t value, Dtype dtype) : desc_(make_pooled<ArrayDesc>(Shape{}, dtype)) {
  init_scalar(&value, complex64);
}

array::array(const void* src, Shape shape, Dtype dtype)
    : desc_(make_pooled<ArrayDesc>(std::move(shape), dtype)) {
  set_data(allocator::allocate(nbytes()));
  if (nbytes() > 0) std::memcpy(data<char>(), src, nbytes());
  set_status(Status::available);
}

array::array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
             std::vector<array> inputs)
    : desc_(make_pooled<ArrayDesc>(std::move(shape), dtype)) {
  desc_->node = make_pooled<Node>(std::move(primitive), std::move(inputs));
  desc_->node->outputs.push_back(desc_);
  desc_->is_tracer = transforms::in_trace();
  if (desc_->is_tracer) transforms::record_tracer(desc_);
}

std::vector<array> array::make_arrays(std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
                                      const std::shared_ptr<Primitive>& primitive,
                                      std::vector<array> inputs) {
  auto node = make_pooled<Node>(primitive, std::move(inputs));
  const bool tracer = transforms::in_trace();
  std::vector<array> outputs;
  outputs.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto desc = make_pooled<ArrayDesc>(shapes[i], dtypes[i]);
    desc->node = node;
    desc->output_index = static_cast<uint32_t>(i);
    desc->is_tracer = tracer;
    if (tracer) transforms::record_tracer(desc);
    node->outputs.push_back(desc);
    outputs.emplace_back(std::move(desc));
  }
  node->output_shapes = std::move(shapes);
  node->output_dtypes = dtypes;
  return outputs;
}

array array::empty(Shape shape, Dtype dtype) {
  return array(make_pooled<ArrayDesc>(std::move(shape), dtype));
}

int32_t array::shape(int dim) const {
  int nd = ndim();
  int d = dim < 0 ? dim + nd : dim;
  if (d < 0 || d >= nd) {
    throw std::out_of_range("[shape] Invalid axis " + std::to_string(dim) + " for array with " +
                            std::to_string(nd) + " dimensions.");
  }
  return desc_->shape[d];
}

int64_t array::strides(int dim) const {
  int nd = ndim();
  return desc_->strides.at(dim < 0 ? dim + nd : dim);
}

Primitive& array::primitive() const { return *desc_->node->primitive; }
std::shared_ptr<Primitive> array::primitive_ptr() const { return desc_->node->primitive; }
const std::vector<array>& array::inputs() const { return desc_->node->inputs; }

std::vector<array> array::outputs() const {
  if (!desc_->node) return {*this};
  std::vector<array> out;
  for (auto& w : desc_->node->outputs) {
    if (auto d = w.lock()) out.emplace_back(std::move(d));
  }
  return out;
}

void array::detach() { desc_->node.reset(); }

void array::eval() {
  if (status() != Status::available) {
    loom::eval({*this});
  } else if (desc_->error) {
    // Another reader made it available first: its kernel still failed.
    std::rethrow_exception(desc_->error);
  }
}

void array::publish_status(Status s) {
  desc_->status.store(s, std::memory_order_release);
  desc_->status.notify_all();
}

Status array::wait_while(Status s) const {
  desc_->status.wait(s, std::memory_order_acquire);
  return status();
}

void array::wait() {
  Status s = status();
  if (s == Status::available) {
    if (desc_->error) std::rethrow_exception(desc_->error);
    return;
  }
  // Another thread is scheduling it: its event is set before it moves on.
  if (s == Status::claimed) s = wait_while(Status::claimed);
  if (s == Status::unscheduled) {
    throw std::runtime_error("[wait] Array was never scheduled for evaluation.");
  }
  desc_->event.wait();
  set_status(Status::available);
  if (desc_->error) std::rethrow_exception(desc_->error);
}

void array::set_data(std::shared_ptr<allocator::Data> d) {
  desc_->data = std::move(d);
  desc_->offset = 0;
  desc_->data_size = size();
  desc_->strides = row_major_strides(shape());
  desc_->flags = Flags{true, true, ndim() <= 1 || size() <= 1};
  if (!desc_->flags.col_contiguous) {
    // col-contiguous also holds when at most one dimension exceeds 1
    int big = 0;
    for (auto s : shape()) big += (s > 1);
    desc_->flags.col_contiguous = big <= 1;
  }
}

void array::set_data(std::shared_ptr<allocator::Data> d, size_t data_size, Strides strides,
                     Flags flags, int64_t offset_bytes) {
  desc_->data = std::move(d);
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
  desc_->offset = offset_bytes;
}

void array::copy_shared_buffer(const array& other, Strides strides, Flags flags, size_t data_size,
                               int64_t offset_elements) {
  desc_->data = other.desc_->data;
  desc_->offset = other.desc_->offset + offset_elements * static_cast<int64_t>(itemsize());
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size());
}

bool array::is_donatable() const {
  return desc_.use_count() == 1 && desc_->data && desc_->data.use_count() == 1;
}

} // namespace loom
