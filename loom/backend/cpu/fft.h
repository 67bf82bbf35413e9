// The CPU FFT engines behind the FFT primitive. Every transform runs along
// one axis of a row-major buffer viewed as [outer, n, inner] and is
// unnormalised (the primitive scales). Two engines compute it:
//  - FFTW3 (single precision), loaded at run time with dlopen so that
//    libloom never links GPL code; used when libfftw3f.so.3 is present;
//  - Loom's own mixed-radix (4, 2, 3, 5, small odd primes) transform with
//    Bluestein's algorithm for lengths with a large prime factor: always
//    available, slower than FFTW (about 2-4x on large transforms).
// LOOM_FFT=native (or set_backend) forces the second, so both are tested.
// With FFTW in use, a length whose largest prime factor p is >= 1000 with
// p - 1 not 5-smooth still runs the own Bluestein, its convolution on FFTW
// (FFTW's Rader plan for such p is slower, e.g. 2.3x at 10007).
#pragma once

#include <complex>
#include <cstdint>
#include <string>

namespace loom::cpu::fft {

using cfloat = std::complex<float>;

enum class Backend { automatic, native, fftw };

// Chooses the engine for later transforms ("auto", "native", "fftw");
// "fftw" raises when FFTW cannot be loaded.
void set_backend(const std::string& name);
// The engine transforms run on now: "fftw" or "native".
std::string backend_name();

// Complex to complex. `in` and `out` may be the same buffer (in place).
void c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse);
// Real to complex: in [outer, n, inner], out [outer, n / 2 + 1, inner].
void r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner);
// Complex (Hermitian half spectrum) to real: in [outer, n / 2 + 1, inner]
// (left unchanged; imaginary parts of the zero and Nyquist bins are
// ignored, as NumPy does), out [outer, n, inner].
void c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner);

// The forward c2c transform of a real input over [rows, n] (its last axis)
// and then [outer, m, inner] columns for each other axis, done on FFTW as
// r2c rows written into full-width rows (bins 0..n/2) and column passes over
// those bins only (columns c with c % n < n / 2 + 1): about half the work of
// the complex transform; the caller fills the other bins by symmetry. Each
// returns false, having done nothing, where FFTW is not in use or cannot
// describe the problem.
bool r2c_full_rows(const float* in, cfloat* out, int64_t rows, int64_t n);
bool c2c_partial_columns(const cfloat* in, cfloat* out, int64_t outer, int64_t m, int64_t inner,
                         int64_t seg, int64_t used, bool inverse);

// --- engines (fft.cpp holds the native one, fft_fftw.cpp FFTW) -----------

namespace native {
void c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse);
void r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner);
void c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner);
} // namespace native

namespace fftw {
// Whether libfftw3f could be loaded (tried once).
bool available();
// Each returns false (having done nothing) for a problem FFTW's int-sized
// interface cannot describe; the caller then uses the native engine.
bool c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse);
bool r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner);
bool c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner);
bool r2c_full_rows(const float* in, cfloat* out, int64_t rows, int64_t n);
bool c2c_partial_columns(const cfloat* in, cfloat* out, int64_t outer, int64_t m, int64_t inner,
                         int64_t seg, int64_t used, bool inverse);
} // namespace fftw

} // namespace loom::cpu::fft
