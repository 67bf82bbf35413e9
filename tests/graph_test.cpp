// Graph invariants: ownership, detach, long chains, multi-output nodes.
#include <gtest/gtest.h>

#include "loom/allocator/memory.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/scheduler.h"

using namespace loom;

namespace {

// A minimal float32 add used to exercise the graph machinery on its own.
class TestAdd : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
    out[0].set_data(allocator::allocate(out[0].nbytes()));
    const float* a = in[0].data<float>();
    const float* b = in[1].data<float>();
    float* o = out[0].data<float>();
    for (size_t i = 0; i < out[0].size(); ++i) o[i] = a[i] + b[i];
  }
  const char* name() const override { return "TestAdd"; }
};

// Splits a 1-D float32 array into two halves: one node, two outputs.
class TestSplit : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
    int half = in[0].shape(0) / 2;
    out[0].copy_shared_buffer(in[0], {1}, Flags{}, half, 0);
    out[1].copy_shared_buffer(in[0], {1}, Flags{}, half, half);
  }
  const char* name() const override { return "TestSplit"; }
};

array add(const array& a, const array& b) {
  return array(a.shape(), float32, std::make_shared<TestAdd>(default_stream(default_device())),
               {a, b});
}

std::vector<array> split2(const array& a) {
  int half = a.shape(0) / 2;
  return array::make_arrays({{half}, {half}}, {float32, float32},
                            std::make_shared<TestSplit>(default_stream(default_device())), {a});
}

} // namespace

TEST(Graph, EvalDetachesAndComputes) {
  array a({1.0f, 2.0f, 3.0f});
  array b({10.0f, 20.0f, 30.0f});
  array c = add(a, b);
  EXPECT_TRUE(c.has_node());
  EXPECT_EQ(c.status(), Status::unscheduled);
  c.eval();
  EXPECT_FALSE(c.has_node());
  EXPECT_EQ(c.data<float>()[2], 33.0f);
}

TEST(Graph, SharedAndRepeatedInputsEvaluateOnceInOrder) {
  // The evaluator's flat node index and consumer lists: a node used twice by
  // one consumer (x + x), nodes shared by many consumers, and more nodes
  // than the index's first size, evaluated together.
  array one({1.0f});
  std::vector<array> layer{add(one, one)}; // 2
  for (int depth = 0; depth < 6; ++depth) {
    std::vector<array> next;
    for (size_t i = 0; i < layer.size(); ++i) {
      next.push_back(add(layer[i], layer[i]));                      // doubles
      next.push_back(add(layer[i], layer[(i + 1) % layer.size()])); // sums neighbours
    }
    layer = std::move(next);
  }
  ASSERT_EQ(layer.size(), 64u);
  // Every value at depth d is 2^(d+1) (all of a layer are equal).
  array total = layer[0];
  for (size_t i = 1; i < layer.size(); ++i) total = add(total, layer[i]);
  eval({total, layer[5]});
  EXPECT_EQ(layer[5].data<float>()[0], 128.0f);
  EXPECT_EQ(total.data<float>()[0], 64.0f * 128.0f);
}

TEST(Graph, NodeReachesOutputsOnlyWeakly) {
  array x({1.0f, 2.0f, 3.0f, 4.0f});
  std::weak_ptr<Node> node;
  {
    auto parts = split2(x);
    node = parts[0].node();
    EXPECT_EQ(parts[0].node(), parts[1].node()); // one node for both outputs
    EXPECT_EQ(node.use_count(), 2);              // owned by the two outputs only
  }
  EXPECT_TRUE(node.expired()); // dropping the outputs frees the node
}

TEST(Graph, DroppedSiblingStillComputed) {
  array x({1.0f, 2.0f, 3.0f, 4.0f});
  array second = split2(x)[1]; // first output dropped before eval
  second.eval();
  EXPECT_EQ(second.data<float>()[0], 3.0f);
  EXPECT_EQ(second.data<float>()[1], 4.0f);
}

TEST(Graph, LongChainEvaluatesAndFreesWithoutRecursion) {
  size_t base = get_active_memory();
  {
    array one(1.0f);
    array x(0.0f);
    for (int i = 0; i < 200000; ++i) x = add(x, one);
    x.eval();
    EXPECT_EQ(x.data<float>()[0], 200000.0f);
  }
  {
    // Destroyed without ever being evaluated.
    array one(1.0f);
    array x(0.0f);
    for (int i = 0; i < 200000; ++i) x = add(x, one);
  }
  synchronize();
  EXPECT_EQ(get_active_memory(), base);
}

TEST(Graph, MultiOutputLeakCycle) {
  // The shape of seed 003: weights evaluated outside, split + concat-like use.
  size_t base = get_active_memory();
  for (int cycle = 0; cycle < 50; ++cycle) {
    std::vector<float> w(1 << 14, 1.0f);
    array weights(w, {1 << 14});
    auto parts = split2(weights);
    array out = add(parts[1], parts[0]);
    out.eval();
  }
  synchronize();
  EXPECT_EQ(get_active_memory(), base);
}

TEST(Graph, ErrorsNamePrimitiveAndShapes) {
  class Failing : public Primitive {
   public:
    using Primitive::Primitive;
    void eval_cpu(const std::vector<array>&, std::vector<array>&) override {
      throw std::runtime_error("boom");
    }
    const char* name() const override { return "Failing"; }
  };
  array a({1.0f, 2.0f});
  array bad({2}, float32, std::make_shared<Failing>(default_stream(default_device())), {a});
  array after = add(bad, a);
  try {
    after.eval();
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Failing"), std::string::npos);
    EXPECT_NE(msg.find("(2) float32"), std::string::npos);
  }
}

TEST(Streams, CrossStreamDependency) {
  Stream s2 = new_stream(Device::cpu);
  array a({1.0f, 2.0f});
  array c = array({2}, float32, std::make_shared<TestAdd>(s2), {a, a});
  array d = add(c, a); // default stream, depends on s2
  d.eval();
  EXPECT_EQ(d.data<float>()[1], 6.0f);
}
