// The residency seam, checked on any machine: a pretend device pool (host
// memory that counts its copies) stands in for a GPU, so the buffer handle's
// host/device bookkeeping is tested where CI has no GPU. With a real GPU the
// last tests also run a kernel on it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/allocator/memory.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/backend.h"
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

// The scheduler's device-stream path, checked without a GPU: a pretend GPU
// backend runs kernels with eval_cpu and completes work asynchronously, in
// order, on a thread of its own (as a CUDA stream's host callbacks do). This
// exercises held-back completion signals, same-stream ordering without
// event waits, and waits across CPU and device streams.
namespace {

class PretendGpu final : public scheduler::DeviceBackend {
 public:
  PretendGpu() : completer_([this] { run(); }) { completer_.detach(); }
  int device_count() const override { return 1; }
  void eval(Primitive& p, const std::vector<array>& in, std::vector<array>& out) override {
    ++evals;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_eval_thread = std::this_thread::get_id();
    }
    p.eval_cpu(in, out);
  }
  std::thread::id last_thread() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_eval_thread;
  }
  void signal_when_done(const Stream&, const std::shared_ptr<scheduler::Timeline>& t,
                        uint64_t value) override {
    ++signals;
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({t, value});
    cv_.notify_one();
  }
  // Waits until every queued completion has fired: the pretend device has
  // then finished all work enqueued so far (its kernels ran in eval).
  bool synchronize(const Stream&) override {
    ++syncs;
    std::unique_lock<std::mutex> lock(mutex_);
    drained_.wait(lock, [&] { return pending_.empty() && !in_flight_; });
    return true;
  }
  void stream_created(const Stream&) override {}
  void stream_destroyed(const Stream&) override {}
  std::map<std::string, std::variant<std::string, size_t>> device_info(int) override {
    return {{"device_name", std::string("pretend")}};
  }
  std::atomic<int> evals{0};
  std::atomic<int> signals{0};
  std::atomic<int> syncs{0};
  std::thread::id last_eval_thread;

 private:
  // Completes each signal a little later, in submission order.
  void run() {
    for (;;) {
      std::pair<std::shared_ptr<scheduler::Timeline>, uint64_t> item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !pending_.empty(); });
        item = pending_.front();
        pending_.pop_front();
        in_flight_ = true;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      item.first->signal(item.second);
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_ = false;
      drained_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable drained_;
  bool in_flight_ = false;
  std::deque<std::pair<std::shared_ptr<scheduler::Timeline>, uint64_t>> pending_;
  std::thread completer_;
};

PretendGpu* g_pretend = nullptr;

// True when the pretend backend is the GPU backend of this process: only if
// nothing asked about GPUs before (each ctest case runs in its own process).
bool install_pretend_gpu() {
  static bool installed = [] {
    scheduler::register_probe(Device::gpu, []() -> scheduler::DeviceBackend* {
      g_pretend = new PretendGpu(); // leaked: lives as long as the process
      return g_pretend;
    });
    bool ok = is_available(Device(Device::gpu, 0)) && g_pretend != nullptr;
    // Other tests in this process keep the CPU as their default device.
    set_default_device(Device(Device::cpu, 0));
    return ok;
  }();
  return installed;
}

} // namespace

TEST(CudaScheduling, SameStreamChainsNeedNoWaitsAndSignalsAreBatched) {
  if (!install_pretend_gpu()) GTEST_SKIP() << "a GPU backend was probed before this test";
  const Device gpu(Device::gpu, 0);
  int evals0 = g_pretend->evals, signals0 = g_pretend->signals;
  array x = array(0.0f);
  for (int i = 0; i < 500; ++i) x = add(x, array(1.0f), gpu);
  EXPECT_EQ(x.item<float>(), 500.0f);
  int evals = g_pretend->evals - evals0, signals = g_pretend->signals - signals0;
  EXPECT_GE(evals, 500);
  // Run inline, the tasks hold their signals back, and the eval waits for
  // the device itself: at most the last signal goes out.
  EXPECT_LE(signals, 1);
}

TEST(CudaScheduling, DependenciesAcrossCpuAndDeviceStreams) {
  if (!install_pretend_gpu()) GTEST_SKIP() << "a GPU backend was probed before this test";
  const Device gpu(Device::gpu, 0), cpu(Device::cpu, 0);
  Stream g2 = new_stream(gpu);
  Stream c2 = new_stream(cpu);
  array a = full({1000}, array(2.0f), gpu);
  for (int round = 0; round < 20; ++round) {
    array b = multiply(a, array(3.0f), g2); // device stream 2
    array c = add(b, array(1.0f), c2);      // waits on g2's event
    a = add(c, array(-1.0f), gpu);          // waits on c2's event
    a = multiply(a, array(1.0f / 3.0f), gpu);
  }
  async_eval({a});
  synchronize(g2);
  a.eval();
  EXPECT_NEAR(a.data<float>()[999], 2.0f, 1e-4f);
  EXPECT_NEAR(sum(a, false, cpu).item<float>(), 2000.0f, 1e-1f);
}

TEST(CudaScheduling, EightThreadsDriveDeviceStreams) {
  if (!install_pretend_gpu()) GTEST_SKIP() << "a GPU backend was probed before this test";
  std::vector<float> results(8, 0.0f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &results] {
      Stream s = new_stream(Device(Device::gpu, 0));
      array x = full({256}, array(static_cast<float>(t)), s);
      for (int i = 0; i < 100; ++i) x = add(x, array(1.0f), s);
      results[t] = sum(x, false, s).item<float>();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(results[t], 256.0f * (t + 100));
}

// A node whose stream worker is idle runs on the evaluating thread (a GPU
// launch costs less than a thread hand-off), whatever its size on a device
// stream; async_eval goes through the worker. Values and order are the same
// either way.
TEST(CudaScheduling, SmallNodesLaunchOnTheEvaluatingThreadWhenTheWorkerIsIdle) {
  if (!install_pretend_gpu()) GTEST_SKIP() << "a GPU backend was probed before this test";
  const Device gpu(Device::gpu, 0);
  Stream s = new_stream(gpu);
  const auto me = std::this_thread::get_id();
  array x = full({16}, array(0.0f), s);
  x.eval();
  int inline_runs = 0;
  for (int i = 0; i < 200; ++i) {
    x = add(x, array(1.0f), s);
    x.eval();
    inline_runs += g_pretend->last_thread() == me;
  }
  EXPECT_EQ(x.data<float>()[15], 200.0f);
  EXPECT_GE(inline_runs, 190); // the worker is idle after each eval returns

  array big = full({1 << 15}, array(1.0f), s); // 128 KiB: inline too on a device stream
  big = add(big, array(1.0f), s);
  big.eval();
  EXPECT_EQ(g_pretend->last_thread(), me);
  EXPECT_EQ(big.data<float>()[(1 << 15) - 1], 2.0f);

  array y = x;
  for (int i = 0; i < 50; ++i) y = add(y, array(1.0f), s);
  async_eval({y}); // never inline
  y.eval();
  EXPECT_NE(g_pretend->last_thread(), me);
  EXPECT_EQ(y.data<float>()[0], 250.0f);
  synchronize(s);
}

// Inline tasks hold their completion signals back and the eval waits for the
// device on its own thread: no signal at all for chains evaluated once or
// node by node. A consumer on another stream in the same graph makes the
// held-back signal go out (its worker waits on it), and values stay right.
TEST(CudaScheduling, HeldBackSignalsAndWaitsOnTheEvaluatingThread) {
  if (!install_pretend_gpu()) GTEST_SKIP() << "a GPU backend was probed before this test";
  const Device gpu(Device::gpu, 0), cpu(Device::cpu, 0);
  Stream s = new_stream(gpu);
  array x = full({16}, array(0.0f), s);
  x.eval();
  int signals0 = g_pretend->signals, syncs0 = g_pretend->syncs;
  for (int i = 0; i < 100; ++i) x = add(x, array(1.0f), s);
  x.eval();
  for (int i = 0; i < 50; ++i) {
    x = add(x, array(1.0f), s);
    x.eval();
  }
  EXPECT_EQ(x.data<float>()[0], 150.0f);
  EXPECT_EQ(g_pretend->signals - signals0, 0);
  EXPECT_GE(g_pretend->syncs - syncs0, 51);

  array y = x;
  for (int i = 0; i < 20; ++i) y = add(y, array(1.0f), s); // inline, held back
  array c = multiply(y, array(2.0f), cpu);                 // the CPU worker waits on them
  array d = add(c, array(1.0f), s);                        // the device worker on the CPU
  d.eval();
  EXPECT_EQ(d.data<float>()[0], 341.0f);

  // Two threads evaluating graphs built on one device stream (streams are
  // thread-affine for building, not for evaluating): a thread's inline task
  // may be held back on a worker the other thread listed first; each thread
  // still sends it before it blocks and when its eval ends, so values are
  // right and nothing waits forever.
  std::vector<array> ends;
  for (int t = 0; t < 2; ++t) {
    array v = x;
    for (int i = 0; i < 40; ++i) v = add(v, array(1.0f), s);
    ends.push_back(multiply(v, array(1.0f), cpu)); // waits on the device stream
  }
  std::vector<float> last(2, 0.0f);
  std::vector<std::thread> evaluators;
  for (int t = 0; t < 2; ++t) {
    evaluators.emplace_back([&, t] {
      ends[t].eval();
      last[t] = ends[t].data<float>()[15];
    });
  }
  for (auto& e : evaluators) e.join();
  EXPECT_EQ(last[0], 190.0f);
  EXPECT_EQ(last[1], 190.0f);

  // async_eval (never inline) then eval from another thread: the second
  // thread waits for the worker's signal.
  array z = x;
  for (int i = 0; i < 30; ++i) z = multiply(z, array(1.0f), s);
  async_eval({z});
  float seen = 0.0f;
  std::thread t([&] {
    z.eval();
    seen = z.data<float>()[15];
  });
  t.join();
  EXPECT_EQ(seen, 150.0f);
  synchronize(s);
}
