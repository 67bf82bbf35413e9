// The loom.core.fft submodule (MLX's mlx.core.fft) and hadamard_transform.
#include "loom/backend/cpu/fft.h"

#include <memory>

#include "utils.h"

namespace loom::bindings {

namespace {

using OptAxes = std::optional<std::vector<int>>;

// nanobind keeps the signature and docstring pointers it is given: the
// strings built here live as long as the module.
const char* keep(std::string text) {
  static std::vector<std::unique_ptr<std::string>> kept;
  kept.push_back(std::make_unique<std::string>(std::move(text)));
  return kept.back()->c_str();
}

constexpr const char* kNormDoc =
    "    norm (str, optional): One of ``\"backward\"``, ``\"ortho\"``, or ``\"forward\"``.\n"
    "       Default is ``\"backward\"``.\n\n";

// fft, ifft, rfft, irfft share a signature.
template <typename F>
void def_1d(nb::module_& m, const char* name, F fn, const char* summary) {
  std::string sig = std::string("def ") + name +
                    "(a: array, n: int | None = None, axis: int = -1, norm: str = 'backward', "
                    "stream: StreamOrDevice = None) -> array";
  std::string doc = std::string(summary) +
                    "\n\nArgs:\n    a (array): The input array.\n"
                    "    n (int, optional): Size of the transformed axis; the input is cropped\n"
                    "       or zero-padded to it.\n"
                    "    axis (int, optional): Axis of the transform. Default ``-1``.\n" +
                    kNormDoc + "Returns:\n    array: The transform.";
  m.def(
      name,
      [fn](const array& a, std::optional<int> n, int axis, const std::string& norm,
           const StreamArg& s) { return fn(a, n, axis, norm, s); },
      nb::arg("a"), nb::arg("n") = nb::none(), nb::arg("axis") = -1, nb::arg("norm") = "backward",
      nb::arg("stream") = nb::none(), nb::sig(keep(sig)), keep(doc));
}

// The 2-D and n-D forms.
template <typename F>
void def_nd(nb::module_& m, const char* name, F fn, bool two_d, const char* summary) {
  std::string sig = std::string("def ") + name +
                    "(a: array, s: tuple[int, ...] | None = None, axes: Sequence[int] | None = " +
                    (two_d ? "[-2, -1]" : "None") +
                    ", norm: str = 'backward', stream: StreamOrDevice = None) -> array";
  std::string doc = std::string(summary) +
                    "\n\nArgs:\n    a (array): The input array.\n"
                    "    s (list(int), optional): Sizes of the transformed axes; the input is\n"
                    "       cropped or zero-padded to them. Needs ``axes``.\n"
                    "    axes (list(int), optional): Axes of the transform. Default " +
                    (two_d ? "``[-2, -1]``" : "all axes") + ".\n" + kNormDoc +
                    "Returns:\n    array: The transform.";
  nb::object default_axes = two_d ? nb::cast(std::vector<int>{-2, -1}) : nb::none();
  m.def(
      name,
      [fn](const array& a, const std::optional<std::vector<int>>& shape, const OptAxes& axes,
           const std::string& norm, const StreamArg& s) {
        std::optional<Shape> sh;
        if (shape) sh = Shape(shape->begin(), shape->end());
        return fn(a, sh, axes, norm, s);
      },
      nb::arg("a"), nb::arg("s").none() = nb::none(), nb::arg("axes").none() = default_axes,
      nb::arg("norm") = "backward", nb::arg("stream") = nb::none(), nb::sig(keep(sig)), keep(doc));
}

OptAxes shift_axes(const std::optional<IntOrInts>& axes) {
  if (!axes) return std::nullopt;
  return to_axes(*axes);
}

} // namespace

void init_fft(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fft", "Discrete Fourier transforms.");
  m.attr("__name__") = "loom.core.fft";
  nb::module_::import_("sys").attr("modules")["loom.core.fft"] = m;

  def_1d(m, "fft", &fft::fft, "One dimensional discrete Fourier Transform.");
  def_1d(m, "ifft", &fft::ifft, "One dimensional inverse discrete Fourier Transform.");
  def_1d(m, "rfft", &fft::rfft,
         "One dimensional discrete Fourier Transform on a real input (the output's\n"
         "transformed axis has ``n // 2 + 1`` elements).");
  def_1d(m, "irfft", &fft::irfft,
         "The inverse of :func:`rfft`; ``n`` is the output length, by default\n"
         "``2 * (a.shape[axis] - 1)``.");
  def_nd(m, "fft2", &fft::fft2, true, "Two dimensional discrete Fourier Transform.");
  def_nd(m, "ifft2", &fft::ifft2, true, "Two dimensional inverse discrete Fourier Transform.");
  def_nd(m, "rfft2", &fft::rfft2, true, "Two dimensional real discrete Fourier Transform.");
  def_nd(m, "irfft2", &fft::irfft2, true, "The inverse of :func:`rfft2`.");
  def_nd(m, "fftn", &fft::fftn, false, "n-dimensional discrete Fourier Transform.");
  def_nd(m, "ifftn", &fft::ifftn, false, "n-dimensional inverse discrete Fourier Transform.");
  def_nd(m, "rfftn", &fft::rfftn, false, "n-dimensional real discrete Fourier Transform.");
  def_nd(m, "irfftn", &fft::irfftn, false, "The inverse of :func:`rfftn`.");

  m.def(
      "fftfreq", [](int n, double d, const StreamArg& s) { return fft::fftfreq(n, d, s); },
      nb::arg("n"), nb::arg("d") = 1.0, nb::arg("stream") = nb::none(),
      nb::sig("def fftfreq(n: int, d: float = 1.0, stream: StreamOrDevice = None) -> array"),
      "The sample frequencies of :func:`fft`: ``[0, 1, ..., -1] / (d * n)``, float32.");
  m.def(
      "rfftfreq", [](int n, double d, const StreamArg& s) { return fft::rfftfreq(n, d, s); },
      nb::arg("n"), nb::arg("d") = 1.0, nb::arg("stream") = nb::none(),
      nb::sig("def rfftfreq(n: int, d: float = 1.0, stream: StreamOrDevice = None) -> array"),
      "The sample frequencies of :func:`rfft`: ``[0, ..., n // 2] / (d * n)``, float32.");
  m.def(
      "fftshift",
      [](const array& a, const std::optional<IntOrInts>& axes, const StreamArg& s) {
        return fft::fftshift(a, shift_axes(axes), s);
      },
      nb::arg("a"), nb::arg("axes").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def fftshift(a: array, axes: int | Sequence[int] | None = None, "
              "stream: StreamOrDevice = None) -> array"),
      "Shift the zero-frequency component to the center of the spectrum (all\n"
      "axes when ``axes`` is None).");
  m.def(
      "ifftshift",
      [](const array& a, const std::optional<IntOrInts>& axes, const StreamArg& s) {
        return fft::ifftshift(a, shift_axes(axes), s);
      },
      nb::arg("a"), nb::arg("axes").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def ifftshift(a: array, axes: int | Sequence[int] | None = None, "
              "stream: StreamOrDevice = None) -> array"),
      "The inverse of :func:`fftshift` (they differ for odd lengths).");

  m.def(
      "stft",
      [](const array& x, int n_fft, std::optional<int> hop, std::optional<int> win,
         const std::optional<array>& window, bool center, const std::string& pad_mode,
         const std::string& norm, std::optional<bool> onesided, const StreamArg& s) {
        return fft::stft(x, n_fft, hop, win, window, center, pad_mode, norm, onesided, s);
      },
      nb::arg("x"), nb::arg("n_fft") = 2048, nb::arg("hop_length").none() = nb::none(),
      nb::arg("win_length").none() = nb::none(), nb::arg("window").none() = nb::none(),
      nb::arg("center") = true, nb::arg("pad_mode") = "reflect", nb::arg("norm") = "backward",
      nb::arg("onesided").none() = nb::none(), nb::arg("stream") = nb::none(),
      nb::sig("def stft(x: array, n_fft: int = 2048, hop_length: int | None = None, "
              "win_length: int | None = None, window: array | None = None, center: bool = True, "
              "pad_mode: str = 'reflect', norm: str = 'backward', onesided: bool | None = None, "
              "stream: StreamOrDevice = None) -> array"),
      "Short-Time Fourier Transform of the last axis: frames of ``n_fft`` samples,\n"
      "``hop_length`` apart (default ``n_fft // 4``), times ``window`` (centred in\n"
      "``n_fft``; default rectangular of ``win_length``), transformed. ``center``\n"
      "pads both ends by ``n_fft // 2`` with ``pad_mode`` ('reflect', 'constant',\n"
      "'edge'). ``onesided`` defaults to True for real input.\n\n"
      "Returns:\n    array: Complex, shape ``(..., n_freq, n_frames)``.");
  m.def(
      "istft",
      [](const array& S, std::optional<int> n_fft, std::optional<int> hop, std::optional<int> win,
         const std::optional<array>& window, bool center, const std::string& norm,
         std::optional<bool> onesided, std::optional<int> length, const StreamArg& s) {
        return fft::istft(S, n_fft, hop, win, window, center, norm, onesided, length, s);
      },
      nb::arg("stft_matrix"), nb::arg("n_fft").none() = nb::none(),
      nb::arg("hop_length").none() = nb::none(), nb::arg("win_length").none() = nb::none(),
      nb::arg("window").none() = nb::none(), nb::arg("center") = true, nb::arg("norm") = "backward",
      nb::arg("onesided").none() = nb::none(), nb::arg("length").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def istft(stft_matrix: array, n_fft: int | None = None, hop_length: int | None = "
              "None, win_length: int | None = None, window: array | None = None, center: bool = "
              "True, norm: str = 'backward', onesided: bool | None = None, length: int | None = "
              "None, stream: StreamOrDevice = None) -> array"),
      "Inverse Short-Time Fourier Transform: the windowed inverse transform of\n"
      "each frame, overlap-added and divided by the squared-window envelope;\n"
      "``length`` trims or zero-pads the result.");

  // Loom-only: the engine switch the tests use to cover both engines.
  m.def(
      "_set_backend", [](const std::string& name) { cpu::fft::set_backend(name); }, nb::arg("name"),
      "Chooses the FFT engine: 'auto', 'native' or 'fftw' (Loom only).");
  m.def(
      "_backend", [] { return cpu::fft::backend_name(); },
      "The FFT engine transforms run on: 'fftw' or 'native' (Loom only).");

  parent.def(
      "hadamard_transform",
      [](const array& a, std::optional<float> scale, const StreamArg& s) {
        return hadamard_transform(a, scale, s);
      },
      nb::arg(), nb::arg("scale").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def hadamard_transform(a: array, scale: float | None = None, stream: "
              "StreamOrDevice = None) -> array"),
      "Perform the Walsh-Hadamard transform along the final axis: ``y = (T @ x) *\n"
      "scale`` with T the Hadamard matrix of order n = m * 2^k, m in (1, 12, 20,\n"
      "28) (any k on the CPU), ``scale`` by default ``1 / sqrt(n)`` (orthonormal).");
}

} // namespace loom::bindings
