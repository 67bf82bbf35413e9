// The loom.core.random submodule.
#include "loom/ops/utils.h"
#include "utils.h"

namespace loom::bindings {

namespace {

// `loom.core.random.state`: a one-element sequence holding the calling
// thread's default key, so compile(..., inputs=state, outputs=state) can
// capture and advance the random state.
struct RandomState {};

void check_state_index(int64_t i) {
  if (i != 0 && i != -1) throw std::out_of_range("[random.state] Index out of range.");
}

} // namespace

void init_random(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("random", "Random number generation.");
  m.attr("__name__") = "loom.core.random";
  nb::module_::import_("sys").attr("modules")["loom.core.random"] = m;

  nb::class_<RandomState>(m, "_RandomState",
                          "The random state: a sequence holding the default key of the "
                          "calling thread.")
      .def("__len__", [](const RandomState&) { return 1; })
      .def("__getitem__",
           [](const RandomState&, int64_t i) {
             check_state_index(i);
             return random::default_key();
           })
      .def("__setitem__",
           [](const RandomState&, int64_t i, const array& key) {
             check_state_index(i);
             random::default_key() = key;
           })
      .def("__iter__", [](const RandomState&) {
        nb::list items;
        items.append(random::default_key());
        return nb::iter(items);
      });
  m.attr("state") = nb::cast(RandomState{});

  m.def(
      "seed", [](uint64_t seed) { random::seed(seed); }, nb::arg("seed"),
      nb::sig("def seed(seed: int) -> None"),
      "Seed the global random number generator (of the calling thread).\n\n"
      "Example:\n"
      "    >>> mx.random.seed(42)\n\n"
      "Args:\n    seed (int): The seed.");

  m.def(
      "key", [](uint64_t seed) { return random::key(seed); }, nb::arg("seed"),
      nb::sig("def key(seed: int) -> array"),
      "A PRNG key made from a seed.\n\n"
      "Args:\n    seed (int): The seed.\n\n"
      "Returns:\n    array: The key, a uint32 array of shape ``(2,)``.");

  m.def(
      "split",
      [](const array& key, int num, const StreamArg& s) { return random::split(key, num, s); },
      nb::arg("key"), nb::arg("num") = 2, nb::arg("stream") = nb::none(),
      nb::sig("def split(key: array, num: int = 2, stream: StreamOrDevice = None) -> array"),
      "Split a PRNG key into sub-keys.\n\n"
      "Args:\n"
      "    key (array): The key to split.\n"
      "    num (int, optional): The number of sub-keys. Default: ``2``.\n\n"
      "Returns:\n    array: The sub-keys, one per row.");

  m.def(
      "uniform",
      [](const ScalarOrArray& low, const ScalarOrArray& high, const ShapeSeqArg& shape,
         std::optional<Dtype> dtype, const std::optional<array>& key, const StreamArg& s) {
        Dtype d = dtype.value_or(float32);
        return random::uniform(to_array(low.obj, d), to_array(high.obj, d), to_shape(shape), d, key,
                               s);
      },
      nb::arg("low") = 0, nb::arg("high") = 1, nb::arg("shape") = nb::list(),
      nb::arg("dtype").none() = float32, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def uniform(low: scalar | array = 0, high: scalar | array = 1, shape: "
              "Sequence[int] = [], dtype: Dtype | None = float32, key: array | None = None, "
              "stream: StreamOrDevice = None) -> array"),
      "Samples uniformly from the half-open interval ``[low, high)``.\n\n"
      "``low`` and ``high`` broadcast with ``shape``.\n\n"
      "Args:\n"
      "    low (scalar or array, optional): Lower bound. Default: ``0``.\n"
      "    high (scalar or array, optional): Upper bound. Default: ``1``.\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output type. Default: ``float32``.\n"
      "    key (array, optional): A PRNG key. Default: the global generator.\n\n"
      "Returns:\n    array: The samples.");

  m.def(
      "normal",
      [](const ShapeSeqArg& shape, std::optional<Dtype> dtype,
         const std::optional<ScalarOrArray>& loc, const std::optional<ScalarOrArray>& scale,
         const std::optional<array>& key, const StreamArg& s) {
        Dtype d = dtype.value_or(float32);
        array l = loc ? to_array(loc->obj, d) : array(0.0f, d);
        array sc = scale ? to_array(scale->obj, d) : array(1.0f, d);
        return random::normal(to_shape(shape), d, l, sc, key, s);
      },
      nb::arg("shape") = nb::list(), nb::arg("dtype").none() = float32,
      nb::arg("loc").none() = nb::none(), nb::arg("scale").none() = nb::none(),
      nb::arg("key").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def normal(shape: Sequence[int] = [], dtype: Dtype | None = float32, loc: "
              "scalar | array | None = None, scale: scalar | array | None = None, key: array | "
              "None = None, stream: StreamOrDevice = None) -> array"),
      "Samples from a normal distribution with mean ``loc`` and standard\n"
      "deviation ``scale``.\n\n"
      "Args:\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output type. Default: ``float32``.\n"
      "    loc (scalar or array, optional): Mean. Default: ``0``.\n"
      "    scale (scalar or array, optional): Standard deviation. Default: ``1``.\n"
      "    key (array, optional): A PRNG key. Default: the global generator.\n\n"
      "Returns:\n    array: The samples.");

  // --- distributions built from uniform (same draws as MLX for a key) -------
  m.def(
      "bernoulli",
      [](const ScalarOrArray& p, const std::optional<ShapeSeqArg>& shape,
         const std::optional<array>& key, const StreamArg& s) {
        std::optional<Shape> sh;
        if (shape) sh = to_shape(*shape);
        return random::bernoulli(to_array(p.obj, float32), sh, key, s);
      },
      nb::arg("p") = 0.5, nb::arg("shape").none() = nb::none(), nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def bernoulli(p: scalar | array = 0.5, shape: Sequence[int] | None = None, key: "
              "array | None = None, stream: StreamOrDevice = None) -> array"),
      "Booleans that are True with probability ``p``.\n\n"
      "Args:\n"
      "    p (scalar or array, optional): The probability. Default: ``0.5``.\n"
      "    shape (list(int), optional): Output shape; that of ``p`` by default.\n"
      "    key (array, optional): A PRNG key.\n\n"
      "Returns:\n    array: The samples.");

  m.def(
      "randint",
      [](const ScalarOrArray& low, const ScalarOrArray& high, const ShapeSeqArg& shape,
         std::optional<Dtype> dtype, const std::optional<array>& key, const StreamArg& s) {
        return random::randint(to_array(low.obj, float32), to_array(high.obj, float32),
                               to_shape(shape), dtype.value_or(int32), key, s);
      },
      nb::arg("low"), nb::arg("high"), nb::arg("shape") = nb::list(),
      nb::arg("dtype").none() = int32, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def randint(low: scalar | array, high: scalar | array, shape: Sequence[int] = [], "
              "dtype: Dtype | None = int32, key: array | None = None, stream: StreamOrDevice = "
              "None) -> array"),
      "Random integers in ``[low, high)``.\n\n"
      "Args:\n"
      "    low (scalar or array): Lower bound (included).\n"
      "    high (scalar or array): Upper bound (excluded).\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): An integer dtype. Default: ``int32``.\n"
      "    key (array, optional): A PRNG key.\n\n"
      "Returns:\n    array: The samples.");

  m.def(
      "gumbel",
      [](const ShapeSeqArg& shape, std::optional<Dtype> dtype, const std::optional<array>& key,
         const StreamArg& s) {
        return random::gumbel(to_shape(shape), dtype.value_or(float32), key, s);
      },
      nb::arg("shape") = nb::list(), nb::arg("dtype").none() = float32,
      nb::arg("key").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def gumbel(shape: Sequence[int] = [], dtype: Dtype | None = float32, key: array | "
              "None = None, stream: StreamOrDevice = None) -> array"),
      "Samples from the standard Gumbel distribution.");

  m.def(
      "categorical",
      [](const array& logits, int axis, const std::optional<ShapeSeqArg>& shape,
         std::optional<int> num_samples, const std::optional<array>& key, const StreamArg& s) {
        std::optional<Shape> sh;
        if (shape) sh = to_shape(*shape);
        return random::categorical(logits, axis, sh, num_samples, key, s);
      },
      nb::arg("logits"), nb::arg("axis") = -1, nb::arg("shape").none() = nb::none(),
      nb::arg("num_samples").none() = nb::none(), nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def categorical(logits: array, axis: int = -1, shape: Sequence[int] | None = None, "
              "num_samples: int | None = None, key: array | None = None, stream: StreamOrDevice "
              "= None) -> array"),
      "Sample category indices from unnormalised log-probabilities.\n\n"
      "Args:\n"
      "    logits (array): Log-probabilities (up to a constant) along ``axis``.\n"
      "    axis (int, optional): The category axis. Default: ``-1``.\n"
      "    shape (list(int), optional): Output shape (broadcasting with the\n"
      "      logits without ``axis``).\n"
      "    num_samples (int, optional): Samples per distribution (a new last axis).\n"
      "    key (array, optional): A PRNG key.\n\n"
      "Returns:\n    array: ``uint32`` indices.");

  m.def(
      "laplace",
      [](const ShapeSeqArg& shape, std::optional<Dtype> dtype, float loc, float scale,
         const std::optional<array>& key, const StreamArg& s) {
        return random::laplace(to_shape(shape), dtype.value_or(float32), loc, scale, key, s);
      },
      nb::arg("shape") = nb::list(), nb::arg("dtype").none() = float32, nb::arg("loc") = 0.0f,
      nb::arg("scale") = 1.0f, nb::arg("key").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def laplace(shape: Sequence[int] = [], dtype: Dtype | None = float32, loc: float = "
              "0.0, scale: float = 1.0, key: array | None = None, stream: StreamOrDevice = None) "
              "-> array"),
      "Samples from a Laplace distribution with mean ``loc`` and scale ``scale``.");

  m.def(
      "bits",
      [](const ShapeSeqArg& shape, int width, const std::optional<array>& key, const StreamArg& s) {
        return random::bits(to_shape(shape), width, key, s);
      },
      nb::arg("shape") = nb::list(), nb::arg("width") = 4, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def bits(shape: Sequence[int] = [], width: int = 4, key: array | None = None, "
              "stream: StreamOrDevice = None) -> array"),
      "Random bits (a Loom extension; MLX has it in C++ only).\n\n"
      "Args:\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    width (int, optional): Bytes per element, 1, 2 or 4, giving uint8,\n"
      "      uint16 or uint32. Default: ``4``.\n"
      "    key (array, optional): A PRNG key. Default: the global generator.\n\n"
      "Returns:\n    array: The random bits.");
}

} // namespace loom::bindings
