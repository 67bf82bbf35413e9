#include "loom/allocator/memory.h"

#include "loom/allocator/allocator.h"
#include "loom/allocator/pools.h"
#include "loom/device.h"

namespace loom {

// Statistics add up every registered pool (host and devices), so that leak
// checks see device buffers too; limits apply to each pool, and the limit
// reported back is the default device's.
namespace {
allocator::Allocator& default_pool() {
  auto* p = allocator::allocator_for(default_device());
  return p != nullptr ? *p : allocator::host_allocator();
}
} // namespace

size_t get_active_memory() { return allocator::active_memory_of_all_pools(); }
size_t get_peak_memory() {
  size_t n = 0;
  for (auto* p : allocator::registered_allocators()) n += p->stats().peak;
  return n;
}
void reset_peak_memory() {
  for (auto* p : allocator::registered_allocators()) p->reset_peak();
}
size_t get_cache_memory() {
  size_t n = 0;
  for (auto* p : allocator::registered_allocators()) n += p->stats().cache;
  return n;
}
size_t set_memory_limit(size_t limit) {
  size_t old = default_pool().memory_limit();
  for (auto* p : allocator::registered_allocators()) p->set_memory_limit(limit);
  return old;
}
size_t get_memory_limit() { return default_pool().memory_limit(); }
size_t set_cache_limit(size_t limit) {
  size_t old = 0;
  auto& d = default_pool();
  for (auto* p : allocator::registered_allocators()) {
    size_t o = p->set_cache_limit(limit);
    if (p == &d) old = o;
  }
  return old;
}
size_t set_wired_limit(size_t limit) { return allocator::host_allocator().set_wired_limit(limit); }
void clear_cache() {
  for (auto* p : allocator::registered_allocators()) p->clear_cache();
}

} // namespace loom
