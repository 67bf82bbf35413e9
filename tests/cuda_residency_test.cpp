// The residency seam, checked on any machine: a pretend device pool (host
// memory that counts its copies) stands in for a GPU, so the buffer handle's
// host/device bookkeeping is tested where CI has no GPU. With a real GPU the
// last tests also run a kernel on it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/allocator/memory.h"
#include "loom/ops/elementwise.h"
#include "loom/scheduler/scheduler.h"

using namespace loom;

namespace {

class PretendDevicePool final : public allocator::Allocator {
 public:
  allocator::Buffer malloc(size_t size) override {
    active += size;
    return {std::malloc(size == 0 ? 1 : size), size};
  }
  void free(allocator::Buffer b) override {
    active -= b.size;
    std::free(b.ptr);
  }
  allocator::MemoryStats stats() const override { return {active, active, 0}; }
  void reset_peak() override {}
  size_t set_memory_limit(size_t) override { return 0; }
  size_t set_cache_limit(size_t) override { return 0; }
  size_t set_wired_limit(size_t) override { return 0; }
  size_t memory_limit() const override { return SIZE_MAX; }
  void clear_cache() override {}
  std::string name() const override { return "pretend"; }
  Device device() const override { return Device(Device::gpu, kIndex); }
  void copy_to_host(void* host, const void* dev, size_t n) const override {
    ++downloads;
    std::memcpy(host, dev, n);
  }
  void copy_from_host(void* dev, const void* host, size_t n, void*) const override {
    ++uploads;
    std::memcpy(dev, host, n);
  }

  static constexpr int kIndex = 15; // far above any real GPU index
  size_t active = 0;
  mutable int downloads = 0;
  mutable int uploads = 0;
};

PretendDevicePool& pretend_pool() {
  static auto* pool = [] {
    auto* p = new PretendDevicePool();
    allocator::register_allocator(Device(Device::gpu, PretendDevicePool::kIndex), p);
    return p;
  }();
  return *pool;
}

} // namespace

TEST(CudaResidency, DeviceBornBufferComesToTheHostOnceOnRead) {
  auto& pool = pretend_pool();
  int down0 = pool.downloads;
  auto data =
      allocator::allocate(4 * sizeof(float), Device(Device::gpu, PretendDevicePool::kIndex));
  EXPECT_EQ(data->valid(), allocator::Data::kDevice);
  float* dev = static_cast<float*>(data->device_ptr(pool, nullptr));
  for (int i = 0; i < 4; ++i) dev[i] = 1.5f * i;
  const allocator::Data& ro = *data;
  const float* host = static_cast<const float*>(ro.ptr());
  EXPECT_EQ(pool.downloads, down0 + 1);
  EXPECT_EQ(data->valid(), allocator::Data::kHost | allocator::Data::kDevice);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(host[i], 1.5f * i);
  ro.ptr(); // both valid now: no second copy
  EXPECT_EQ(pool.downloads, down0 + 1);
}

TEST(CudaResidency, HostWriteMakesTheDeviceCopyStaleAndItIsUploadedAgain) {
  auto& pool = pretend_pool();
  auto data = allocator::allocate(3 * sizeof(int));
  EXPECT_EQ(data->valid(), allocator::Data::kHost);
  int* h = static_cast<int*>(data->ptr_for_write());
  h[0] = 1, h[1] = 2, h[2] = 3;
  int up0 = pool.uploads;
  int* d = static_cast<int*>(data->device_ptr(pool, nullptr));
  EXPECT_EQ(pool.uploads, up0 + 1);
  EXPECT_EQ(d[2], 3);
  data->device_ptr(pool, nullptr); // valid on the device: no copy
  EXPECT_EQ(pool.uploads, up0 + 1);
  static_cast<int*>(data->ptr_for_write())[2] = 7;
  EXPECT_EQ(data->valid(), allocator::Data::kHost);
  d = static_cast<int*>(data->device_ptr(pool, nullptr));
  EXPECT_EQ(pool.uploads, up0 + 2);
  EXPECT_EQ(d[2], 7);
}

TEST(CudaResidency, ArrayDataReadsThroughAHostCopy) {
  auto& pool = pretend_pool();
  array a = array::empty({2, 2}, float32);
  a.set_data(allocator::allocate(a.nbytes(), Device(Device::gpu, PretendDevicePool::kIndex)));
  float* dev = static_cast<float*>(a.data_shared_ptr()->device_ptr(pool, nullptr));
  for (int i = 0; i < 4; ++i) dev[i] = static_cast<float>(i);
  a.set_status(Status::available);
  // A CPU op consumes the device-born array: its kernel reads the host copy.
  array b = add(a, a);
  b.eval();
  EXPECT_EQ(b.data<float>()[3], 6.0f);
}

TEST(CudaResidency, StatisticsCountEveryPoolAndFreesReturnToIt) {
  auto& pool = pretend_pool();
  size_t before = get_active_memory();
  {
    auto data = allocator::allocate(1000, Device(Device::gpu, PretendDevicePool::kIndex));
    EXPECT_EQ(get_active_memory(), before + 1000);
  }
  EXPECT_EQ(get_active_memory(), before);
  EXPECT_EQ(pool.active, 0u);
}

TEST(CudaResidency, AllocatingOnAnUnregisteredDeviceRaises) {
  EXPECT_THROW(allocator::allocate(16, Device(Device::gpu, 14)), std::invalid_argument);
}

TEST(CudaDevice, GpuKernelMatchesCpuWhenAGpuIsPresent) {
  if (!is_available(Device(Device::gpu, 0))) {
    GTEST_SKIP() << "no GPU here: the CUDA backend found no device (run scripts/gpu.sh)";
  }
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i);
  array x(v, {1000});
  array g = exp(x, Device(Device::gpu, 0));
  array c = exp(x, Device(Device::cpu, 0));
  eval({g, c});
  for (int i = 0; i < 1000; ++i) EXPECT_NEAR(g.data<float>()[i], c.data<float>()[i], 1e-5f);
  synchronize(default_stream(Device(Device::gpu, 0)));
}
