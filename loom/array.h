// The array handle, its descriptor and the graph node that produces it.
//
// Ownership is a DAG pointing from outputs to inputs: an array owns its node
// until it is evaluated, a node owns its inputs, and a node reaches its own
// outputs only through weak references. No reference cycle can form, so every
// graph is freed by ordinary reference counting (see docs/architecture.md).
#pragma once

#include <atomic>
#include <complex>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/dtype.h"
#include "loom/scheduler/event.h"
#include "loom/stream.h"
#include "loom/types/half.h"

namespace loom {

using Shape = std::vector<int32_t>;
using Strides = std::vector<int64_t>;
using complex64_t = std::complex<float>;

class Primitive;
class array;
struct Node;

struct Flags {
  bool contiguous = true;     // the elements fill data_size without gaps
  bool row_contiguous = true; // C order
  bool col_contiguous = true; // Fortran order
};

// A status moves forward (a claim is only given back when scheduling fails),
// and every move is a release store: a thread that reads `scheduled` also
// sees the event and the detached node written before it.
enum class Status : uint8_t {
  unscheduled, // has a node, no data
  claimed,     // an evaluating thread owns its node; its event is not set yet
  scheduled,   // handed to a stream; data is valid once its event fires
  available,   // data is valid
};

struct ArrayDesc {
  Shape shape;
  Strides strides;
  size_t size = 1;
  Dtype dtype;

  std::shared_ptr<Node> node; // dropped once evaluated (unless a tracer)
  uint32_t output_index = 0;

  std::shared_ptr<allocator::Data> data;
  int64_t offset = 0;   // bytes from the start of data
  size_t data_size = 0; // elements spanned in the buffer
  Flags flags;

  std::atomic<Status> status{Status::unscheduled};
  scheduler::Event event;
  std::exception_ptr error;           // set when the kernel that made this array failed
  std::atomic<bool> is_tracer{false}; // built inside a transform: keeps its node after eval

  ArrayDesc(Shape shape, Dtype dtype);
  ~ArrayDesc();
};

class array {
 public:
  // Scalars.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  explicit array(T value, Dtype dtype = default_dtype_of<T>());
  array(complex64_t value, Dtype dtype = complex64);
  // Copies `data` (row-major elements of `dtype`).
  array(const void* data, Shape shape, Dtype dtype);
  template <typename T>
  array(std::initializer_list<T> values, Shape shape = {}, Dtype dtype = default_dtype_of<T>());
  template <typename T>
  array(const std::vector<T>& values, Shape shape, Dtype dtype = default_dtype_of<T>());
  // An unevaluated array produced by `primitive` from `inputs`.
  array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive, std::vector<array> inputs);
  // Several outputs of one primitive sharing ONE node.
  static std::vector<array> make_arrays(std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
                                        const std::shared_ptr<Primitive>& primitive,
                                        std::vector<array> inputs);
  // An array with metadata and no data or node yet (kernels fill it).
  static array empty(Shape shape, Dtype dtype);

  array(const array&) = default;
  array(array&&) noexcept = default;
  array& operator=(const array&) = default;
  array& operator=(array&&) noexcept = default;

  // Metadata, valid without evaluation.
  const Shape& shape() const { return desc_->shape; }
  int32_t shape(int dim) const;
  Dtype dtype() const { return desc_->dtype; }
  size_t size() const { return desc_->size; }
  int ndim() const { return static_cast<int>(desc_->shape.size()); }
  size_t itemsize() const { return desc_->dtype.size; }
  size_t nbytes() const { return size() * itemsize(); }

  // Layout, valid once evaluated.
  const Strides& strides() const { return desc_->strides; }
  int64_t strides(int dim) const;
  const Flags& flags() const { return desc_->flags; }
  size_t data_size() const { return desc_->data_size; }
  int64_t offset() const { return desc_->offset; }

  // Graph.
  bool has_node() const { return desc_->node != nullptr; }
  const std::shared_ptr<Node>& node() const { return desc_->node; }
  Primitive& primitive() const;
  std::shared_ptr<Primitive> primitive_ptr() const;
  const std::vector<array>& inputs() const;
  uint32_t output_index() const { return desc_->output_index; }
  // All outputs of this array's node, in order (this one included).
  std::vector<array> outputs() const;
  void detach();
  bool is_tracer() const { return desc_->is_tracer; }
  void set_tracer(bool t) { desc_->is_tracer = t; }

  // Evaluation. Another thread may read the status at any time; the event and
  // the node may be read by others once the status is past `claimed`.
  Status status() const { return desc_->status.load(std::memory_order_acquire); }
  void set_status(Status s) { desc_->status.store(s, std::memory_order_release); }
  // Publishes a new status to threads blocked in wait_while().
  void publish_status(Status s);
  // Blocks while the status equals `s`; returns the status it moved to.
  Status wait_while(Status s) const;
  scheduler::Event& event() const { return desc_->event; }
  void eval();
  // Blocks until a scheduled array's data is valid; raises its error if any.
  void wait();
  bool is_available() const { return status() == Status::available; }

  // Host data access (evaluates first for item; kernels use data<T>()
  // directly). Both forms bring a host copy first when only a device holds
  // the buffer; the non-const form is for writing and makes a device copy
  // stale.
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(static_cast<char*>(desc_->data->ptr_for_write()) +
                                desc_->offset);
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(static_cast<const char*>(desc_->data->ptr()) +
                                      desc_->offset);
  }
  bool has_data() const { return desc_->data != nullptr; }
  const std::shared_ptr<allocator::Data>& data_shared_ptr() const { return desc_->data; }
  template <typename T>
  T item();

  // Kernels set an output's data with one of these.
  void set_data(std::shared_ptr<allocator::Data> data); // fresh row-major buffer
  void set_data(std::shared_ptr<allocator::Data> data, size_t data_size, Strides strides,
                Flags flags, int64_t offset_bytes = 0);
  // A view on `other`'s buffer with its own layout (reshape, slice, transpose...).
  void copy_shared_buffer(const array& other, Strides strides, Flags flags, size_t data_size,
                          int64_t offset_elements = 0);
  void copy_shared_buffer(const array& other); // same layout
  // True when nothing but the caller references this array or its buffer, so
  // an element-wise kernel may write its output into it.
  bool is_donatable() const;

  // Identity of the descriptor (for graph walks).
  const ArrayDesc* id() const { return desc_.get(); }
  bool is_same(const array& o) const { return desc_ == o.desc_; }
  const std::shared_ptr<ArrayDesc>& desc() const { return desc_; }
  explicit array(std::shared_ptr<ArrayDesc> desc) : desc_(std::move(desc)) {}

  template <typename T>
  static constexpr Dtype default_dtype_of();

 private:
  void init_scalar(const void* src, Dtype src_dtype);

  std::shared_ptr<ArrayDesc> desc_;
};

struct Node {
  std::shared_ptr<Primitive> primitive;
  std::vector<array> inputs;
  std::vector<std::weak_ptr<ArrayDesc>> outputs;
  // Metadata of every output so a dropped sibling can still be computed.
  std::vector<Shape> output_shapes;
  std::vector<Dtype> output_dtypes;
  std::string origin; // Python file:line that built it, under LOOM_DEBUG=1

  Node(std::shared_ptr<Primitive> p, std::vector<array> in);
  ~Node();
};

// Set by the Python layer under LOOM_DEBUG=1: returns "file:line" of the caller.
using OriginHook = std::string (*)();
void set_origin_hook(OriginHook hook);

// Row-major strides for a shape.
Strides row_major_strides(const Shape& shape);
size_t shape_size(const Shape& shape);
std::string shape_to_string(const Shape& shape);

// Evaluates element `T` from the raw value of an element of `dtype`.
template <typename T>
T cast_element(const void* src, Dtype dtype);

// --- template definitions ---

template <typename T>
constexpr Dtype array::default_dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return bool_;
  else if constexpr (std::is_same_v<T, uint8_t>) return uint8;
  else if constexpr (std::is_same_v<T, uint16_t>) return uint16;
  else if constexpr (std::is_same_v<T, uint32_t>) return uint32;
  else if constexpr (std::is_same_v<T, uint64_t>) return uint64;
  else if constexpr (std::is_same_v<T, int8_t>) return int8;
  else if constexpr (std::is_same_v<T, int16_t>) return int16;
  else if constexpr (std::is_integral_v<T>) return int32;
  else if constexpr (std::is_same_v<T, float16_t>) return float16;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return bfloat16;
  else if constexpr (std::is_same_v<T, double>) return float32; // Python floats are float32
  else if constexpr (std::is_same_v<T, complex64_t>) return complex64;
  else return float32;
}

template <typename T, typename>
array::array(T value, Dtype dtype) : desc_(std::make_shared<ArrayDesc>(Shape{}, dtype)) {
  if constexpr (std::is_same_v<T, bool>) {
    init_scalar(&value, bool_);
  } else if constexpr (std::is_integral_v<T>) {
    int64_t v = static_cast<int64_t>(value);
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) {
      init_scalar(&value, uint64);
    } else {
      init_scalar(&v, int64);
    }
  } else {
    double v = static_cast<double>(value);
    init_scalar(&v, float64);
  }
}

template <typename T>
array::array(std::initializer_list<T> values, Shape shape, Dtype dtype)
    : array(std::vector<T>(values), shape.empty() ? Shape{static_cast<int32_t>(values.size())}
                                                  : shape,
            dtype) {}

} // namespace loom

#include "loom/array_impl.h"
