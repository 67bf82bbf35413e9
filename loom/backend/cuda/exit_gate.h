// The exit gate (exit_gate.cpp): every path into CUDA holds a CudaScope, and
// the gate closes before CUDA's libraries tear themselves down at exit. Plain
// C++ (no CUDA headers), so tests without a GPU can drive it.
#pragma once

namespace loom::cuda {

// Every path into CUDA (a kernel, an allocation, a copy, a completion wait)
// holds a CudaScope. close_before_teardown()
// registers the gate's closing with atexit: call it right after a library
// whose static destructors tear CUDA state down has started (the runtime,
// cuBLAS, NVRTC), so the gate closes before they run. Once closed, scopes
// are refused: the caller raises (refuse), skips a free, or signals at once.
bool enter_cuda();
void leave_cuda();
bool exiting();
void close_before_teardown();
// Closes the gate now (Python's atexit, through scheduler::before_exit: it
// runs before every C-level exit handler, whatever their registration order).
void close_gate_now();

// Held around dlopen of a CUDA library (inside a CudaScope): the gate's
// closing waits for the load however long it takes.
struct LibraryLoad {
  LibraryLoad();
  ~LibraryLoad();
  LibraryLoad(const LibraryLoad&) = delete;
  LibraryLoad& operator=(const LibraryLoad&) = delete;
};

class CudaScope {
 public:
  CudaScope() : open_(enter_cuda()) {}
  ~CudaScope() {
    if (open_) leave_cuda();
  }
  CudaScope(const CudaScope&) = delete;
  CudaScope& operator=(const CudaScope&) = delete;
  bool open() const { return open_; }
  // Raises "[cuda] <what>: the process is exiting ..." when refused.
  void require(const char* what) const {
    if (!open_) refuse(what);
  }

 private:
  [[noreturn]] static void refuse(const char* what);
  bool open_;
};

} // namespace loom::cuda
