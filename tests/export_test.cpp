// Structured primitive state (every registered primitive round-trips
// state -> factory -> state and stays equivalent) and function export:
// the format round trip, constants stored once, versions, corrupt files.
#include "loom/io/export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "loom/compile/compile.h"
#include "loom/compile/compiled.h"
#include "loom/ops.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/gather.h"
#include "loom/primitives/quantized.h"
#include "loom/primitives/random.h"
#include "loom/primitives/reduce.h"
#include "loom/primitives/scan.h"
#include "loom/primitives/shape.h"
#include "loom/primitives/slice.h"
#include "loom/primitives/softmax.h"
#include "loom/primitives/sort.h"
#include "loom/primitives/state_util.h"
#include "loom/primitives/unary.h"
#include "loom/transforms/primitives.h"

using namespace loom;

namespace {

// One instance per primitive with parameters, each with non-default values,
// so a factory that drops or swaps a field shows. A new primitive whose
// factory needs fields adds its sample here.
std::vector<std::shared_ptr<Primitive>> samples() {
  Stream s = default_stream(default_device());
  using compile_detail::Compiled;
  using compile_detail::FusedOp;
  std::vector<FusedOp> ops;
  ops.push_back({std::make_shared<Unary>(s, UnaryOp::Exp), {0}, {2, 3}, float32});
  ops.push_back({std::make_shared<Binary>(s, BinaryOp::Add), {2, 1}, {2, 3}, float32});
  std::vector<std::shared_ptr<Primitive>> out;
  // Families whose member is the name: one sample per name.
  for (auto t : {Reduce::And, Reduce::Or, Reduce::Sum, Reduce::Prod, Reduce::Min, Reduce::Max}) {
    out.push_back(std::make_shared<Reduce>(s, t, std::vector<int>{0, 2}, true));
  }
  using SR = Scatter::ReduceType;
  for (auto t : {SR::none, SR::sum, SR::prod, SR::max, SR::min}) {
    out.push_back(std::make_shared<Scatter>(s, std::vector<int>{1, 2}, t));
  }
  for (auto d :
       {RandomDistribution::bits, RandomDistribution::uniform, RandomDistribution::normal}) {
    out.push_back(std::make_shared<RandomBits>(s, Shape{4, 2}, d, float16));
  }
  using CR = Scan::ReduceType;
  for (auto t : {CR::sum, CR::prod, CR::max, CR::min, CR::logaddexp}) {
    out.push_back(std::make_shared<Scan>(s, t, 1, true, false));
  }
  for (auto k : {Sort::Kind::values, Sort::Kind::indices, Sort::Kind::partition_indices}) {
    out.push_back(std::make_shared<Sort>(s, k, 1, 3));
  }
  std::vector<std::shared_ptr<Primitive>> more{
      std::make_shared<Reshape>(s, Shape{2, 3, 4}),
      std::make_shared<Flatten>(s, Shape{6, 4}, 0, 1),
      std::make_shared<Transpose>(s, std::vector<int>{2, 0, 1}),
      std::make_shared<Broadcast>(s, Shape{5, 1, 7}),
      std::make_shared<ExpandDims>(s, std::vector<int>{0, 3}),
      std::make_shared<Squeeze>(s, std::vector<int>{1}),
      std::make_shared<Concatenate>(s, 2),
      std::make_shared<Split>(s, Shape{1, 4}, 1),
      std::make_shared<Reduce>(s, Reduce::Sum, std::vector<int>{0, 2}, true),
      std::make_shared<Reduce>(s, Reduce::Max, std::vector<int>{1}, false),
      std::make_shared<ArgReduce>(s, ArgReduce::ArgMax, 1, true),
      std::make_shared<ArgReduce>(s, ArgReduce::ArgMin, ArgReduce::kAllAxes, false),
      std::make_shared<Arange>(s, 1.5, 7.0, 0.5, 11, float64),
      std::make_shared<Linspace>(s, -1.0, 2.5, 9, float16),
      std::make_shared<Eye>(s, 3, 5, -1, int32),
      std::make_shared<AsType>(s, bfloat16),
      std::make_shared<Gather>(s, std::vector<int>{0, 2}),
      std::make_shared<Scatter>(s, std::vector<int>{1}, Scatter::ReduceType::sum),
      std::make_shared<Scatter>(s, std::vector<int>{0}, Scatter::ReduceType::min),
      std::make_shared<Slice>(s, Shape{0, 5}, Shape{4, -1}, Shape{2, -1}),
      std::make_shared<SliceUpdate>(s, Shape{1}, Shape{3}, Shape{1}),
      std::make_shared<RandomBits>(s, Shape{4, 2}, RandomDistribution::normal, float16),
      std::make_shared<RandomBits>(s, Shape{3}, RandomDistribution::bits, uint8),
      std::make_shared<Scan>(s, Scan::ReduceType::logaddexp, 1, true, false),
      std::make_shared<Softmax>(s, true),
      std::make_shared<Sort>(s, Sort::Kind::partition_indices, 1, 3),
      std::make_shared<SearchSorted>(s, true),
      std::make_shared<Compiled>(s, 2, std::move(ops), std::vector<int>{1, 0}),
      std::make_shared<CustomTransforms>(s, 2, nullptr, nullptr, nullptr),
      std::make_shared<Quantize>(s, 64, 4, QuantizationMode::affine),
      std::make_shared<Dequantize>(s, 32, 4, QuantizationMode::mxfp4, bfloat16),
      std::make_shared<QuantizedMatmul>(s, 128, 8, QuantizationMode::affine, true),
      std::make_shared<GatherQMM>(s, 32, 8, QuantizationMode::mxfp8, false),
  };
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

void expect_round_trip(const Primitive& p) {
  PrimitiveState st = p.state();
  // Through the bytes of the file format too.
  PrimitiveState decoded = decode_state(encode_state(st), p.name());
  EXPECT_EQ(decoded, st) << p.name();
  auto rebuilt = make_primitive(p.name(), p.stream(), decoded);
  EXPECT_STREQ(rebuilt->name(), p.name());
  EXPECT_EQ(rebuilt->state(), st) << p.name();
  EXPECT_EQ(rebuilt->describe(), p.describe());
  // A custom function's rules are closures outside its state: two of them
  // are never equivalent (EquivalenceFollowsState).
  if (std::string(p.name()) == "CustomTransforms") return;
  EXPECT_TRUE(rebuilt->is_equivalent(p)) << p.name();
  EXPECT_TRUE(p.is_equivalent(*rebuilt)) << p.name();
}

// A state the factory of `name` accepts, found by asking it: each missing
// field is added, and a field of the wrong type tries the next type. For
// primitives without a sample above (new families), so that the round trip
// still covers every registered name; nullptr when the factory wants values
// this cannot guess (it then needs a sample).
std::shared_ptr<Primitive> synthesize(const std::string& name, Stream s) {
  const std::vector<StateValue> candidates{
      int64_t{1},    std::vector<int64_t>{1},  true,          1.0,
      std::string(), std::vector<double>{1.0}, Dtype(float32)};
  PrimitiveState st;
  std::vector<size_t> tried;
  for (int step = 0; step < 64; ++step) {
    try {
      return make_primitive(name, s, st);
    } catch (const std::invalid_argument& e) {
      std::string msg = e.what();
      auto q1 = msg.find('\'');
      auto q2 = q1 == std::string::npos ? q1 : msg.find('\'', q1 + 1);
      if (q2 == std::string::npos) return nullptr;
      std::string field = msg.substr(q1 + 1, q2 - q1 - 1);
      if (msg.find("has no field") != std::string::npos) {
        st.push_back({field, candidates[0]});
        tried.push_back(0);
      } else if (msg.find("wrong type") != std::string::npos) {
        size_t k = 0;
        while (k < st.size() && st[k].name != field) ++k;
        if (k == st.size() || ++tried[k] >= candidates.size()) return nullptr;
        st[k].value = candidates[tried[k]];
      } else {
        return nullptr;
      }
    }
  }
  return nullptr;
}

} // namespace

TEST(PrimitiveState, EveryRegisteredPrimitiveRoundTrips) {
  std::set<std::string> covered;
  for (auto& p : samples()) {
    SCOPED_TRACE(p->describe());
    expect_round_trip(*p);
    covered.insert(p->name());
  }
  Stream s = default_stream(default_device());
  std::vector<std::string> names = registered_primitives();
  EXPECT_GT(names.size(), 90u);
  for (const std::string& name : names) {
    if (covered.count(name)) continue;
    // Without a sample: a state the factory accepts (empty for primitives
    // whose parameters are all in their name).
    std::shared_ptr<Primitive> p = synthesize(name, s);
    if (!p) {
      ADD_FAILURE() << name << " needs a sample in export_test.cpp (its factory wants values "
                    << "the test cannot guess).";
      continue;
    }
    EXPECT_EQ(name, p->name());
    expect_round_trip(*p);
  }
}

TEST(PrimitiveState, EquivalenceFollowsState) {
  Stream s = default_stream(default_device());
  Reduce a(s, Reduce::Sum, {0}, false);
  Reduce b(s, Reduce::Sum, {0}, false);
  Reduce c(s, Reduce::Sum, {0}, true);
  Reduce d(s, Reduce::Prod, {0}, false);
  EXPECT_TRUE(a.is_equivalent(b));
  EXPECT_FALSE(a.is_equivalent(c));
  EXPECT_FALSE(a.is_equivalent(d)); // same type and state, another name
  Reshape r(s, {2, 3});
  Flatten f(s, {2, 3}, 0, 1);
  EXPECT_FALSE(r.is_equivalent(f));
  // Closures are not state: two custom functions never merge.
  CustomTransforms x(s, 1, nullptr, nullptr, nullptr);
  CustomTransforms y(s, 1, nullptr, nullptr, nullptr);
  EXPECT_FALSE(x.is_equivalent(y));
}

TEST(PrimitiveState, PrintingComesFromState) {
  Stream s = default_stream(default_device());
  EXPECT_EQ(Reduce(s, Reduce::Sum, {0, 2}, true).describe(), "Sum(axes=(0, 2), keepdims=True)");
  EXPECT_EQ(Transpose(s, {1, 0}).describe(), "Transpose(axes=(1, 0))");
  EXPECT_EQ(AsType(s, float16).describe(), "AsType(dtype=float16)");
  EXPECT_EQ(Unary(s, UnaryOp::Exp).describe(), "Exp");
  EXPECT_EQ(ArgReduce(s, ArgReduce::ArgMax, ArgReduce::kAllAxes, false).describe(),
            "ArgMax(axis=None)");
  EXPECT_EQ(SearchSorted(s, false).describe(), "SearchSorted(side='left')");
}

TEST(PrimitiveState, CorruptStatesRaise) {
  std::string good = encode_state({{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", true}});
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(decode_state(good.substr(0, n), "Sum"), std::invalid_argument) << n;
  }
  Stream s = default_stream(default_device());
  EXPECT_THROW(make_primitive("Sum", s, {{"axes", int64_t{1}}}), std::invalid_argument);
  EXPECT_THROW(make_primitive("Sum", s, {}), std::invalid_argument);
  EXPECT_THROW(make_primitive("NoSuchPrimitive", s, {}), std::invalid_argument);
  EXPECT_THROW(make_primitive("SearchSorted", s, {{"side", std::string("up")}}),
               std::invalid_argument);
  PrimitiveState bad_region{
      {"num_inputs", int64_t{1}}, {"outputs", std::vector<int64_t>{3}}, {"ops", encode_state({})}};
  EXPECT_THROW(make_primitive("Compiled", s, bad_region), std::invalid_argument);
}

// --- export ----------------------------------------------------------------------

namespace {

std::vector<float> values(array a) {
  a = copy(astype(a, float32));
  a.eval();
  return std::vector<float>(a.data<float>(), a.data<float>() + a.size());
}

io::ExportedFunction round_trip(const io::ExportedFunction& f) {
  io::BufferWriter w;
  io::write_function(w, f);
  auto r = io::memory_reader(w.bytes(), "test");
  return io::read_function(*r);
}

std::string bytes_of(const io::ExportedFunction& f) {
  io::BufferWriter w;
  io::write_function(w, f);
  return w.bytes();
}

} // namespace

TEST(Export, RoundTripComputesTheSame) {
  array w({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {3, 2});
  io::KwFn fun = [w](const std::vector<array>& args, const std::map<std::string, array>& kw) {
    array h = matmul(args[0], w);
    array y = add(sum(exp(h), 1, true), kw.at("b"));
    auto parts = split(h, 2, 1);
    return std::vector<array>{y, parts[1], argmax(h, 1)};
  };
  array x({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {2, 3});
  array b(0.5f);
  io::ExportedFunction f;
  f.metadata = "config";
  f.traces.push_back(io::trace_for_export(fun, {x}, {{"b", b}}, false));
  io::ImportedFunction imported(round_trip(f));
  EXPECT_EQ(imported.metadata(), "config");
  auto expected = fun({x}, {{"b", b}});
  auto got = imported({x}, {{"b", b}});
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), expected[i].shape());
    EXPECT_EQ(got[i].dtype(), expected[i].dtype());
    auto a = values(got[i]);
    auto e = values(expected[i]);
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], e[k], 1e-5f);
  }
  // Wrong shape, wrong dtype, missing keyword: a clear error listing the traces.
  EXPECT_THROW(imported({array({1.0f, 2.0f}, {2})}, {{"b", b}}), std::invalid_argument);
  EXPECT_THROW(imported({astype(x, float16)}, {{"b", b}}), std::invalid_argument);
  EXPECT_THROW(imported({x}, {}), std::invalid_argument);
}

TEST(Export, ShapelessTraceRunsOnOtherShapes) {
  io::KwFn fun = [](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{multiply(abs(args[0]), array(2.0f))};
  };
  io::ExportedFunction f;
  f.traces.push_back(io::trace_for_export(fun, {array({-1.0f})}, {}, true));
  io::ImportedFunction imported(round_trip(f));
  auto out = imported({array({-1.0f, 2.0f, -3.0f}, {3})}, {});
  EXPECT_EQ(values(out[0]), (std::vector<float>{2.0f, 4.0f, 6.0f}));
  EXPECT_THROW(imported({array({1.0f, 2.0f}, {1, 2})}, {}), std::invalid_argument);
}

// A linear layer traced at batch 3 runs at batch 1 (its bias broadcast to 3
// rows in the trace used to come back), and a call the trace cannot
// represent (an operand of the traced size that becomes 1) raises.
TEST(Export, ShapelessBatchOfOne) {
  array w({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  array b({0.5f, -1.0f, 2.0f}, {3});
  io::KwFn linear = [w, b](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{add(matmul(args[0], w), b)};
  };
  io::ExportedFunction f;
  f.traces.push_back(io::trace_for_export(linear, {zeros({3, 2}, float32)}, {}, true));
  io::ImportedFunction imported(round_trip(f));
  array x({1.0f, -2.0f}, {1, 2});
  auto out = imported({x}, {});
  EXPECT_EQ(out[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(values(out[0]), values(linear({x}, {})[0]));

  io::KwFn mul = [](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{multiply(args[0], args[1])};
  };
  io::ExportedFunction g;
  g.traces.push_back(
      io::trace_for_export(mul, {zeros({3, 2}, float32), zeros({3, 2}, float32)}, {}, true));
  io::ImportedFunction imported_mul(round_trip(g));
  EXPECT_EQ(imported_mul({ones({4, 2}), ones({4, 2})}, {})[0].shape(), (Shape{4, 2}));
  EXPECT_THROW(imported_mul({ones({3, 2}), ones({1, 2})}, {}), std::invalid_argument);
}

TEST(Export, ConstantsAreStoredOnce) {
  std::vector<float> big(4096, 1.5f);
  array w(big, {64, 64});
  io::KwFn fun = [w](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{matmul(args[0], w)};
  };
  io::ExportedFunction one;
  one.traces.push_back(io::trace_for_export(fun, {ones({1, 64})}, {}, false));
  io::ExportedFunction three = one;
  three.traces.push_back(io::trace_for_export(fun, {ones({2, 64})}, {}, false));
  three.traces.push_back(io::trace_for_export(fun, {ones({3, 64})}, {}, false));
  size_t single = bytes_of(one).size();
  size_t triple = bytes_of(three).size();
  EXPECT_GT(single, 4096u * 4);
  EXPECT_LT(triple, single + 1024); // the 16 KiB weight once, not three times
  io::ImportedFunction imported(round_trip(three));
  EXPECT_EQ(imported({ones({2, 64})}, {})[0].shape(), (Shape{2, 64}));
}

TEST(Export, VersionsAreChecked) {
  io::KwFn fun = [](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{negative(args[0])};
  };
  io::ExportedFunction f;
  f.traces.push_back(io::trace_for_export(fun, {array(1.0f)}, {}, false));
  std::string bytes = bytes_of(f);
  auto read = [](std::string b) {
    auto r = io::memory_reader(std::move(b), "f.loomfn");
    return io::read_function(*r);
  };
  std::string newer_format = bytes;
  newer_format[8] = 2;
  try {
    read(newer_format);
    FAIL() << "a newer format was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 2"), std::string::npos) << e.what();
  }
  std::string newer_primitives = bytes;
  newer_primitives[12] = 9;
  try {
    read(newer_primitives);
    FAIL() << "a newer primitive set was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("primitive set version 9"), std::string::npos);
  }
  std::string unknown = bytes;
  size_t at = unknown.find("Negative");
  ASSERT_NE(at, std::string::npos);
  unknown.replace(at, 8, "Negativf");
  try {
    read(unknown);
    FAIL() << "an unknown primitive was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'Negativf'"), std::string::npos) << e.what();
  }
}

TEST(Export, EveryTruncationRaises) {
  array w({1.0f, 2.0f}, {2});
  io::KwFn fun = [w](const std::vector<array>& args, const std::map<std::string, array>& kw) {
    auto parts = split(add(args[0], w), 2, 0);
    return std::vector<array>{parts[0], multiply(parts[1], kw.at("k"))};
  };
  io::ExportedFunction f;
  f.traces.push_back(
      io::trace_for_export(fun, {array({3.0f, 4.0f}, {2})}, {{"k", array(2.0f)}}, false));
  std::string bytes = bytes_of(f);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = io::memory_reader(bytes.substr(0, n), "cut");
    EXPECT_THROW(io::read_function(*r), std::exception) << n;
  }
  auto r = io::memory_reader(bytes + "x", "long");
  EXPECT_THROW(io::read_function(*r), std::runtime_error);
}

TEST(Export, RandomInitialisationWarnsAndIsExportedAsValues) {
  array w = random::uniform(array(0.0f), array(1.0f), {4}, float32, random::key(3));
  std::vector<std::string> warnings;
  io::KwFn fun = [w](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{add(args[0], w)};
  };
  auto t = io::trace_for_export(fun, {zeros({4})}, {}, false,
                                [&](const std::string& m) { warnings.push_back(m); });
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("mx.eval(model.parameters())"), std::string::npos);
  io::ExportedFunction f;
  f.traces.push_back(std::move(t));
  io::ImportedFunction imported(round_trip(f));
  EXPECT_EQ(values(imported({zeros({4})}, {})[0]), values(w));
  // Evaluated first: no warning.
  warnings.clear();
  io::trace_for_export(fun, {zeros({4})}, {}, false,
                       [&](const std::string& m) { warnings.push_back(m); });
  EXPECT_TRUE(warnings.empty());
}

TEST(Export, ImportedGraphIsDifferentiable) {
  io::KwFn fun = [](const std::vector<array>& args, const std::map<std::string, array>&) {
    return std::vector<array>{sum(multiply(sin(args[0]), args[0]))};
  };
  io::ExportedFunction f;
  f.traces.push_back(io::trace_for_export(fun, {zeros({3})}, {}, false));
  auto imported = std::make_shared<io::ImportedFunction>(round_trip(f));
  array x({0.5f, 1.0f, 2.0f}, {3});
  auto [outs, grads] = vjp([imported](const std::vector<array>& in) { return (*imported)(in, {}); },
                           {x}, {array(1.0f)});
  auto g = values(grads[0]);
  std::vector<float> xs{0.5f, 1.0f, 2.0f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[i], std::cos(xs[i]) * xs[i] + std::sin(xs[i]), 1e-5f);
}
