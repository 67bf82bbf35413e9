// DLPack in both directions: importing any producer's capsule (NumPy,
// PyTorch, JAX, ...) by copying its CPU memory, and exporting an array's
// memory to consumers (np.from_dlpack, torch.from_dlpack / torch.as_tensor).
#include <string>
#include <vector>

#include "utils.h"

namespace loom::bindings {

namespace {

// The DLPack ABI (dlpack.h, versions 0.x and 1.x): only the fields read here.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; // in elements; null for C order
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDAHost = 3; // pinned host memory: readable from the CPU
constexpr int32_t kDLROCMHost = 11;

// The PEP 3118 element code strided_to_array reads for a DLPack dtype.
const char* element_format(DLDataType t) {
  if (t.lanes != 1) return nullptr;
  switch (t.code) {
    case 0: // int
      return t.bits == 8    ? "b"
             : t.bits == 16 ? "h"
             : t.bits == 32 ? "i"
             : t.bits == 64 ? "q"
                            : nullptr;
    case 1: // uint
      return t.bits == 8    ? "B"
             : t.bits == 16 ? "H"
             : t.bits == 32 ? "I"
             : t.bits == 64 ? "Q"
                            : nullptr;
    case 2: // float
      return t.bits == 16 ? "e" : t.bits == 32 ? "f" : t.bits == 64 ? "d" : nullptr;
    case 4: // bfloat
      return t.bits == 16 ? "bfloat16" : nullptr;
    case 5: // complex
      return t.bits == 64 ? "Zf" : t.bits == 128 ? "Zd" : nullptr;
    case 6: // bool
      return t.bits == 8 ? "?" : nullptr;
    default:
      return nullptr;
  }
}

std::string describe(DLDataType t) {
  return "code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + " lanes";
}

array copy_tensor(const DLTensor& t, std::optional<Dtype> dtype) {
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost &&
      t.device.device_type != kDLROCMHost) {
    throw std::invalid_argument("[from_dlpack] Cannot import memory on DLPack device type " +
                                std::to_string(t.device.device_type) +
                                ": Loom reads CPU memory only (move the tensor to the CPU first).");
  }
  const char* format = element_format(t.dtype);
  if (format == nullptr) {
    throw std::invalid_argument("[from_dlpack] Unsupported DLPack element type (" +
                                describe(t.dtype) + ").");
  }
  Shape shape;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] > INT32_MAX) {
      throw std::overflow_error("[from_dlpack] Shape dimension " + std::to_string(t.shape[d]) +
                                " is outside the supported range [-2147483648, 2147483647].");
    }
    shape.push_back(static_cast<int32_t>(t.shape[d]));
  }
  int64_t itemsize = t.dtype.bits / 8;
  std::vector<int64_t> byte_strides;
  if (t.strides != nullptr) {
    for (int d = 0; d < t.ndim; ++d) byte_strides.push_back(t.strides[d] * itemsize);
  }
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  return strided_to_array(base, format, itemsize, shape,
                          t.strides != nullptr ? byte_strides.data() : nullptr, dtype);
}

} // namespace

bool has_cpu_dlpack(nb::handle v) {
  if (!nb::hasattr(v, "__dlpack__") || !nb::hasattr(v, "__dlpack_device__")) return false;
  try {
    nb::tuple dev = nb::cast<nb::tuple>(v.attr("__dlpack_device__")());
    int type = nb::cast<int>(dev[0]);
    return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost;
  } catch (nb::python_error&) {
    return false;
  } catch (nb::cast_error&) {
    return false;
  }
}

array array_from_dlpack(nb::handle v, std::optional<Dtype> dtype) {
  // Ask for a versioned (1.x) capsule; producers predating max_version
  // reject the keyword with TypeError and get the plain call.
  nb::object cap;
  try {
    cap = v.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = v.attr("__dlpack__")();
  }
  PyObject* c = cap.ptr();
  // Renaming the capsule marks it consumed: its destructor then leaves the
  // tensor to us, and we call the producer's deleter once the copy is made.
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (m->version.major > 1) {
      throw std::invalid_argument("[from_dlpack] Unsupported DLPack version " +
                                  std::to_string(m->version.major) + "." +
                                  std::to_string(m->version.minor) + ".");
    }
    PyCapsule_SetName(c, "used_dltensor_versioned");
    struct Release {
      DLManagedTensorVersioned* m;
      ~Release() {
        if (m->deleter) m->deleter(m);
      }
    } release{m};
    return copy_tensor(m->dl_tensor, dtype);
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    PyCapsule_SetName(c, "used_dltensor");
    struct Release {
      DLManagedTensor* m;
      ~Release() {
        if (m->deleter) m->deleter(m);
      }
    } release{m};
    return copy_tensor(m->dl_tensor, dtype);
  }
  throw std::invalid_argument("[from_dlpack] __dlpack__ of " + python_type_name(v) +
                              " did not return an unused DLPack capsule.");
}

namespace {

DLDataType export_dtype(Dtype d) {
  auto make = [](uint8_t code, size_t size) {
    return DLDataType{code, static_cast<uint8_t>(size * 8), 1};
  };
  switch (d.val) {
    case Dtype::Val::bool_:
      return make(6, 1);
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64:
      return make(1, d.size);
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64:
      return make(0, d.size);
    case Dtype::Val::float16:
    case Dtype::Val::float32:
    case Dtype::Val::float64:
      return make(2, d.size);
    case Dtype::Val::bfloat16:
      return make(4, 2);
    case Dtype::Val::complex64:
      return make(5, 8);
  }
  throw std::invalid_argument("[__dlpack__] Unsupported dtype.");
}

// What a capsule owns: the array (its memory stays alive while a consumer
// holds the tensor) and the shape and strides the DLTensor points to.
struct ExportContext {
  array a;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

// Consumers may call the deleter from any thread, without the GIL: it only
// drops C++ references.
template <typename MT>
void export_deleter(MT* m) {
  delete static_cast<ExportContext*>(m->manager_ctx);
  delete m;
}

template <typename MT>
void fill(MT* m, ExportContext* ctx) {
  static char empty_data = 0;
  const array& a = ctx->a;
  DLTensor& t = m->dl_tensor;
  t.data = a.has_data() ? const_cast<void*>(a.data<void>()) : &empty_data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = a.ndim();
  t.dtype = export_dtype(a.dtype());
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  m->manager_ctx = ctx;
  m->deleter = export_deleter<MT>;
}

// A capsule never consumed still owns its tensor.
template <typename MT>
void capsule_destructor(PyObject* cap, const char* name) {
  if (!PyCapsule_IsValid(cap, name)) return; // renamed "used_...": the consumer owns it
  auto* m = static_cast<MT*>(PyCapsule_GetPointer(cap, name));
  if (m && m->deleter) m->deleter(m);
}

bool wants_versioned(nb::handle max_version) {
  if (max_version.is_none()) return false;
  nb::tuple v = nb::cast<nb::tuple>(max_version);
  return v.size() >= 1 && nb::cast<int>(v[0]) >= 1;
}

} // namespace

void warn_if_traced(const array& a) {
  if (!a.is_tracer()) return;
  if (PyErr_WarnEx(PyExc_UserWarning,
                   "[array] Converting an array that a transform (grad, vjp, jvp, vmap) is "
                   "tracing to NumPy or a Python value: the transform does not see through "
                   "the conversion, so no gradient flows through the result.",
                   1) != 0) {
    throw nb::python_error(); // the warning was turned into an error
  }
}

nb::object array_to_dlpack(array& a, nb::handle max_version, nb::handle dl_device,
                           nb::handle copy) {
  if (!dl_device.is_none()) {
    nb::tuple dev = nb::cast<nb::tuple>(dl_device);
    if (dev.size() != 2 || nb::cast<int>(dev[0]) != kDLCPU) {
      throw nb::buffer_error("[__dlpack__] Loom arrays can only be exported to the CPU device.");
    }
  }
  warn_if_traced(a);
  bool want_copy = !copy.is_none() && nb::cast<bool>(nb::bool_(copy));
  // copy=True hands out fresh memory that no Loom array shares.
  array src = want_copy ? loom::copy(a) : a;
  eval_nogil(src); // waits: no consumer may read memory still being written
  auto* ctx = new ExportContext{
      src, {src.shape().begin(), src.shape().end()}, {src.strides().begin(), src.strides().end()}};
  if (wants_versioned(max_version)) {
    auto* m = new DLManagedTensorVersioned{};
    m->version = DLPackVersion{1, 0};
    fill(m, ctx);
    // An array being differentiated is exported read-only: writes through
    // the consumer would change values behind autodiff's back (seed 12.4).
    constexpr uint64_t kReadOnly = 1ULL << 0, kIsCopied = 1ULL << 1;
    m->flags = (src.is_tracer() ? kReadOnly : 0) | (want_copy ? kIsCopied : 0);
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", [](PyObject* c) {
      capsule_destructor<DLManagedTensorVersioned>(c, "dltensor_versioned");
    });
    if (!cap) {
      export_deleter(m);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  auto* m = new DLManagedTensor{};
  fill(m, ctx);
  PyObject* cap = PyCapsule_New(
      m, "dltensor", [](PyObject* c) { capsule_destructor<DLManagedTensor>(c, "dltensor"); });
  if (!cap) {
    export_deleter(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

} // namespace loom::bindings
