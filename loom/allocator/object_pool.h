// Per-thread free lists for the small, short-lived objects that every lazy op
// allocates (array descriptors and graph nodes, with their shared_ptr control
// blocks). A chain of tiny ops keeps about a thousand of them alive until its
// eval, more than glibc's per-thread cache holds, so each new and delete went
// through malloc's bins; here a block freed on a thread is reused by that
// thread's next allocation of the same size class.
//
// Internal to the files that allocate those objects (std::allocate_shared
// with PoolAllocator<T>); not part of the public headers. Under AddressSanitizer
// or ThreadSanitizer the pool is bypassed so that they still see every block.
#pragma once

#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOOM_OBJECT_POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOOM_OBJECT_POOL_BYPASS 1
#endif
#endif

namespace loom::allocator {

// Blocks of up to kPoolMaxBytes, in 16-byte classes; at most kPoolDepth free
// blocks per class and thread (the rest go back to the system).
constexpr size_t kPoolClassBytes = 16;
constexpr size_t kPoolMaxBytes = 512;
constexpr size_t kPoolDepth = 2048;

void* pool_allocate(size_t bytes);
void pool_free(void* p, size_t bytes) noexcept;

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}

  // Blocks come from plain operator new (16-byte alignment): no over-aligned types.
  static_assert(alignof(T) <= kPoolClassBytes, "PoolAllocator: over-aligned type");

  T* allocate(size_t n) {
#ifndef LOOM_OBJECT_POOL_BYPASS
    if (n == 1 && sizeof(T) <= kPoolMaxBytes && alignof(T) <= kPoolClassBytes) {
      return static_cast<T*>(pool_allocate(sizeof(T)));
    }
#endif
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
#ifndef LOOM_OBJECT_POOL_BYPASS
    if (n == 1 && sizeof(T) <= kPoolMaxBytes && alignof(T) <= kPoolClassBytes) {
      pool_free(p, sizeof(T));
      return;
    }
#endif
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const PoolAllocator<U>&) const noexcept {
    return false;
  }
};

} // namespace loom::allocator
