// The public memory API (seed §1.5), summed over the registered pools.
#pragma once

#include <cstddef>

namespace loom {

size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
size_t set_memory_limit(size_t limit);
size_t get_memory_limit();
size_t set_cache_limit(size_t limit);
size_t set_wired_limit(size_t limit);
void clear_cache();

} // namespace loom
