#include "image_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
// The AVX2 kernels are compiled for x86-64 with GCC or Clang whatever the
// build's -march: each function carries target("avx2") and runs only where
// the CPU reports AVX2, so a baseline x86-64 binary still starts everywhere.
#if defined(__x86_64__) && defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#define PIPETUNE_HAVE_AVX2_KERNELS 1
#include <immintrin.h>
#define PIPETUNE_AVX2 __attribute__((target("avx2")))
#else
#define PIPETUNE_HAVE_AVX2_KERNELS 0
#endif

#include "pipetune/base/check.h"

namespace pipetune::runtime::image {
namespace {

// Fixed point. Vertical weights sum to 128: 8-bit pixels times them, summed
// over any number of taps, stay below 2^15, so the intermediate row fits
// signed 16-bit lanes. Horizontal weights sum to 2^14, so the multiply-add of
// two 16-bit lanes (SSE2's pmaddwd) cannot overflow 32 bits; the result has
// 7 + 14 fractional bits and is rounded once.
constexpr int kVerticalOne = 1 << 7;
constexpr int kHorizontalOne = 1 << 14;
constexpr int kResultShift = 21;
constexpr int kRowPadding = 16;  // zero lanes after a row: vector loads may read past its end

// The kernel sets ResampleCrop can run, best last. Every set computes the
// same integers in the same order of rounding, so the choice changes speed
// only (ResampleKernelsTest checks it byte for byte).
enum class Isa { kPortable, kSse2, kAvx2 };

Isa BestIsa() {
  static const Isa best = [] {
#if PIPETUNE_HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
#endif
#if defined(__SSE2__)
    return Isa::kSse2;
#else
    return Isa::kPortable;
#endif
  }();
  return best;
}

std::atomic<ResampleKernels> forced_kernels{ResampleKernels::kBest};

Isa ChosenIsa() {
  switch (forced_kernels.load(std::memory_order_relaxed)) {
    case ResampleKernels::kPortable:
      return Isa::kPortable;
    case ResampleKernels::kSse2:
      return Isa::kSse2;
    case ResampleKernels::kAvx2:
      return Isa::kAvx2;
    case ResampleKernels::kBest:
      break;
  }
  return BestIsa();
}

// How one axis of the output reads the source: output i reads `taps`
// consecutive source pixels from first[i] with weights[i * taps ...]. Every
// output has the same tap count (shorter filters are padded with zero
// weights), which keeps the inner loops branch-free.
struct AxisPlan {
  int taps = 0;
  int lo = 0;  // the plan reads source pixels [lo, hi) only (zero-weight pad taps aside)
  int hi = 0;
  std::vector<int32_t> first;
  std::vector<int16_t> weights;
  // Horizontal plans, vector kernels: weights t and t+1 packed into one
  // 32-bit word (low half t) and repeated as the pmaddwd operand wants it,
  // ready to load. SSE2: output x's pair p is 4 copies at (x * pairs + p) * 4.
  // AVX2 (two outputs per step): outputs 2j and 2j+1 share a block, pair p
  // of it is 4 copies for 2j then 4 for 2j+1 at (2j * pairs + 2p) * 4; an odd
  // width gets a last, zero-weight partner.
  std::vector<int32_t> weight_pairs;
  // Horizontal plans: (first[i] - lo) * 3, the lane to start at; AVX2 pads it
  // to an even count like weight_pairs.
  std::vector<int32_t> row_offsets;
};

// Per-thread scratch reused across images: after the first few images no
// call allocates.
struct Scratch {
  AxisPlan x_plan, y_plan;
  std::vector<double> raw_weights;  // normalised float weights, max_taps per output
  std::vector<double> candidates;   // one output's weights before trimming
  std::vector<int32_t> raw_first, raw_count;
  std::vector<int16_t> row;  // one vertically filtered row of the crop, 3 lanes per pixel
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// floor() to int for values well inside int's range: truncation, one down
// for negative non-integers. The same int as static_cast<int>(std::floor(v)).
inline int FloorToInt(double v) {
  const int i = static_cast<int>(v);
  return v < i ? i - 1 : i;
}

// std::lround for the quantised weights, which are never negative: a float
// widened to double plus 0.5 is exact for every float that can round to 1 or
// more (and stays below 1 for the rest), so truncating it rounds half away
// from zero as lround does, without the library call. PlanAxisTest compares
// the weights with the previous planning's, which called lroundf.
inline int RoundNonNegative(float v) { return static_cast<int>(static_cast<double>(v) + 0.5); }

// Triangle-filter weights for one axis, as Pillow computes them (its
// ImagingResample "precompute_coeffs"), on the source range the crop covers,
// quantised to sum exactly to `one`. Horizontal plans (`isa` not null) pad
// the tap count to even (the vector kernels consume taps in pairs; the pad
// tap may read one pixel past `hi`, into the row's zero padding) and get the
// row offsets and weight layout of that kernel set.
//
// The weights define the pixels, so the arithmetic is the previous
// planning's step for step (double weights rounded to float, normalised in
// double, rounded to float, scaled in float and rounded): the same int16
// weights. Only the work is less: each candidate weight is computed once,
// the division by a filter scale of 1 is skipped (exact), and floor and
// lround are done inline.
void PlanAxis(double start, double length, int src_len, int out_len, bool mirror, bool antialias, int one,
              const Isa* isa, Scratch& scratch, AxisPlan& plan) {
  const double scale = length / out_len;
  const double filter_scale = antialias ? std::max(scale, 1.0) : 1.0;
  const bool unit_filter = filter_scale == 1.0;  // x / 1.0 == x: the division can go
  const double support = filter_scale;           // the triangle filter's support is 1
  plan.lo = std::clamp(static_cast<int>(std::floor(start)), 0, src_len - 1);
  plan.hi = std::clamp(static_cast<int>(std::ceil(start + length)), plan.lo + 1, src_len);
  const int max_taps = std::min(static_cast<int>(std::ceil(support)) * 2 + 1, plan.hi - plan.lo);

  scratch.raw_weights.resize(static_cast<size_t>(out_len) * max_taps);
  scratch.raw_first.resize(out_len);
  scratch.raw_count.resize(out_len);
  int taps = 1;
  for (int i = 0; i < out_len; ++i) {
    const int sample = mirror ? out_len - 1 - i : i;
    const double center = start + (sample + 0.5) * scale;
    int xmin = std::max(FloorToInt(center - support + 0.5), plan.lo);
    const int xmax = std::min(FloorToInt(center + support + 0.5), plan.hi);
    auto weight_at = [&](int x) {
      const double offset = x + 0.5 - center;
      return std::max(0.0, 1.0 - std::fabs(unit_filter ? offset : offset / filter_scale));
    };
    // Each candidate in [xmin, xmax) is weighed once: trimming the zero
    // weights at both ends and normalising read the same values.
    const int span = xmax - xmin;
    if (static_cast<size_t>(span) > scratch.candidates.size()) scratch.candidates.resize(span);
    double* d = scratch.candidates.data();
    for (int k = 0; k < span; ++k) d[k] = weight_at(xmin + k);
    int from = 0, to = span;  // kept: [xmin + from, xmin + to)
    while (to - from > 1 && d[from] <= 0.0) ++from;
    while (to - from > 1 && d[to - 1] <= 0.0) --to;
    if (to <= from) {  // centre outside the crop (tiny crops): nearest edge pixel
      xmin = std::clamp(FloorToInt(center), plan.lo, plan.hi - 1);
      if (scratch.candidates.empty()) scratch.candidates.resize(1);
      d = scratch.candidates.data();
      d[0] = weight_at(xmin);
      from = 0;
      to = 1;
    } else {
      xmin += from;
    }
    const int count = std::min(to - from, max_taps);
    double total = 0;
    double* w = &scratch.raw_weights[static_cast<size_t>(i) * max_taps];  // float values, kept as double
    for (int k = 0; k < count; ++k) total += (w[k] = static_cast<float>(d[from + k]));
    if (total <= 0.0) {
      w[0] = 1.0f;
      total = 1.0;
    }
    for (int k = 0; k < count; ++k) w[k] = static_cast<float>(w[k] / total);
    scratch.raw_first[i] = xmin;
    scratch.raw_count[i] = count;
    taps = std::max(taps, count);
  }

  const bool even_taps = isa != nullptr;
  plan.taps = even_taps ? (taps + 1) & ~1 : taps;
  plan.first.resize(out_len);
  plan.weights.assign(static_cast<size_t>(out_len) * plan.taps, 0);
  const float scaled_one = static_cast<float>(one);
  for (int i = 0; i < out_len; ++i) {
    const int xmin = scratch.raw_first[i], count = scratch.raw_count[i];
    const int first = std::min(xmin, plan.hi - taps);  // real taps stay inside [lo, hi)
    const double* w = &scratch.raw_weights[static_cast<size_t>(i) * max_taps];
    int16_t* q = &plan.weights[static_cast<size_t>(i) * plan.taps + (xmin - first)];
    int sum = 0, largest = 0;
    for (int k = 0; k < count; ++k) {
      q[k] = static_cast<int16_t>(RoundNonNegative(static_cast<float>(w[k]) * scaled_one));
      sum += q[k];
      if (q[k] > q[largest]) largest = k;
    }
    q[largest] = static_cast<int16_t>(q[largest] + (one - sum));  // exact sum: flat stays flat
    plan.first[i] = first;
  }
  if (!even_taps) return;
  const int pairs = plan.taps / 2;
  const int padded = *isa == Isa::kAvx2 ? (out_len + 1) & ~1 : out_len;
  plan.row_offsets.resize(padded);
  for (int i = 0; i < out_len; ++i) plan.row_offsets[i] = (plan.first[i] - plan.lo) * kChannels;
  if (padded > out_len) plan.row_offsets[out_len] = plan.row_offsets[out_len - 1];
  auto pair_at = [&](int x, int p) {
    if (x >= out_len) return int32_t{0};
    const int16_t* w = &plan.weights[static_cast<size_t>(x) * plan.taps + 2 * p];
    return static_cast<int32_t>(static_cast<uint16_t>(w[0]) |
                                static_cast<uint32_t>(static_cast<uint16_t>(w[1])) << 16);
  };
  switch (*isa) {
    case Isa::kPortable:
      break;
    case Isa::kSse2:
      plan.weight_pairs.resize(static_cast<size_t>(out_len) * pairs * 4);
      for (int x = 0; x < out_len; ++x) {
        for (int p = 0; p < pairs; ++p) {
          std::fill_n(&plan.weight_pairs[(static_cast<size_t>(x) * pairs + p) * 4], 4, pair_at(x, p));
        }
      }
      break;
    case Isa::kAvx2:
      plan.weight_pairs.resize(static_cast<size_t>(padded) * pairs * 4);
      for (int x = 0; x < padded; x += 2) {
        for (int p = 0; p < pairs; ++p) {
          int32_t* block = &plan.weight_pairs[(static_cast<size_t>(x) * pairs + 2 * p) * 4];
          std::fill_n(block, 4, pair_at(x, p));
          std::fill_n(block + 4, 4, pair_at(x + 1, p));
        }
      }
      break;
  }
}

// The inner loops come in three sets computing the same integers. SSE2 is
// baseline x86-64, so every x86-64 build has it; AVX2 is picked at run time
// where the CPU has it; other targets use the portable loops. They are
// written with intrinsics rather than left to the auto-vectoriser: the
// build's -O2 uses GCC's "very cheap" vectoriser cost model, which leaves
// them scalar, and GCC's generic vector extensions widen bytes clumsily.
//
// Vertical pass: row[k] = sum_t w[t] * src_row_t[k] over the crop's
// columns: contiguous 8-bit in, 16-bit out, all taps summed in registers.
// Horizontal pass: out[x] = sum_t w[t] * row[first[x] + t], per channel.

// Where output row `out_row`'s first tap starts in `src`.
const uint8_t* VerticalBase(const ImageView& src, const AxisPlan& y_plan, int out_row, int column_begin) {
  return src.data + static_cast<ptrdiff_t>(y_plan.first[out_row] - src.top) * src.stride +
         (column_begin - src.left * kChannels);
}

void VerticalLanesPortable(const uint8_t* base, ptrdiff_t stride, const int16_t* w, int taps, int k,
                           int lanes, int16_t* row) {
  for (; k < lanes; ++k) {
    int sum = 0;
    for (int t = 0; t < taps; ++t) sum += base[t * stride + k] * w[t];
    row[k] = static_cast<int16_t>(sum);
  }
}

void VerticalPassPortable(const ImageView& src, const AxisPlan& y_plan, int out_row, int column_begin,
                          int lanes, int16_t* row) {
  const int taps = y_plan.taps;
  VerticalLanesPortable(VerticalBase(src, y_plan, out_row, column_begin), src.stride,
                        &y_plan.weights[static_cast<size_t>(out_row) * taps], taps, 0, lanes, row);
}

void HorizontalPassPortable(const AxisPlan& x_plan, const int16_t* row, int out_width, uint8_t* out) {
  const int taps = x_plan.taps;
  const int32_t* offsets = x_plan.row_offsets.data();
  for (int x = 0; x < out_width; ++x) {
    const int16_t* p = row + offsets[x];
    const int16_t* w = &x_plan.weights[static_cast<size_t>(x) * taps];
    int32_t acc[kChannels] = {1 << (kResultShift - 1), 1 << (kResultShift - 1), 1 << (kResultShift - 1)};
    for (int t = 0; t < taps; ++t) {
      for (int c = 0; c < kChannels; ++c) acc[c] += p[t * kChannels + c] * w[t];
    }
    for (int c = 0; c < kChannels; ++c) {
      out[x * kChannels + c] = static_cast<uint8_t>(std::clamp(acc[c] >> kResultShift, 0, 255));
    }
  }
}

#if defined(__SSE2__)
// 16 lanes at a time.
void VerticalPassSse2(const ImageView& src, const AxisPlan& y_plan, int out_row, int column_begin, int lanes,
                      int16_t* row) {
  const int taps = y_plan.taps;
  const int16_t* w = &y_plan.weights[static_cast<size_t>(out_row) * taps];
  const uint8_t* base = VerticalBase(src, y_plan, out_row, column_begin);
  int k = 0;
  const __m128i zero = _mm_setzero_si128();
  for (; k + 16 <= lanes; k += 16) {
    __m128i lo = zero, hi = zero;
    for (int t = 0; t < taps; ++t) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + t * src.stride + k));
      const __m128i weight = _mm_set1_epi16(w[t]);
      lo = _mm_add_epi16(lo, _mm_mullo_epi16(_mm_unpacklo_epi8(bytes, zero), weight));
      hi = _mm_add_epi16(hi, _mm_mullo_epi16(_mm_unpackhi_epi8(bytes, zero), weight));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row + k), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row + k + 8), hi);
  }
  VerticalLanesPortable(base, src.stride, w, taps, k, lanes, row);
}

// One output pixel per step. kPairs > 0: the tap count (2 * kPairs) is a
// compile-time constant, which unrolls the common cases; 0: read it from the
// plan.
template <int kPairs>
void HorizontalPassSse2(const AxisPlan& x_plan, const int16_t* row, int out_width, uint8_t* out) {
  const int pairs = kPairs > 0 ? kPairs : x_plan.taps / 2;
  const int32_t* offsets = x_plan.row_offsets.data();
  // Interleave pixel t and t+1 channel by channel, [r0 r1 g0 g1 b0 b1 . .],
  // and one pmaddwd with [w0 w1 w0 w1 ...] gives the three sums at once.
  const int32_t* weight_pairs = x_plan.weight_pairs.data();
  const __m128i round = _mm_set1_epi32(1 << (kResultShift - 1));
  auto pixel = [&](int x) {
    const int16_t* p = row + offsets[x];
    const int32_t* w = weight_pairs + static_cast<ptrdiff_t>(x) * pairs * 4;
    __m128i acc = round;
    for (int t = 0; t < pairs; ++t) {
      const __m128i a =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + static_cast<ptrdiff_t>(2 * t) * kChannels));
      const __m128i b = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(p + static_cast<ptrdiff_t>(2 * t + 1) * kChannels));
      const __m128i weights =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + static_cast<ptrdiff_t>(4) * t));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi16(a, b), weights));
    }
    acc = _mm_srai_epi32(acc, kResultShift);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
    return static_cast<uint32_t>(_mm_cvtsi128_si32(bytes));  // r, g, b, (junk) in memory order
  };
  // Four-byte stores overlap: the junk byte lands on the next pixel's red,
  // which the next iteration overwrites. The last pixel stores three bytes.
  for (int x = 0; x + 1 < out_width; ++x) {
    const uint32_t rgbx = pixel(x);
    std::memcpy(out + static_cast<ptrdiff_t>(x) * kChannels, &rgbx, sizeof(rgbx));
  }
  const uint32_t last = pixel(out_width - 1);
  std::memcpy(out + static_cast<ptrdiff_t>(out_width - 1) * kChannels, &last, kChannels);
}
#endif  // __SSE2__

#if PIPETUNE_HAVE_AVX2_KERNELS
// 32 lanes at a time, then 16; the last few lanes are redone by one
// overlapping 16-lane step (the same values land on the same lanes) rather
// than a scalar loop. Lambdas would not inherit target("avx2"), hence the
// plain loop bodies.
PIPETUNE_AVX2 void VerticalPassAvx2(const ImageView& src, const AxisPlan& y_plan, int out_row,
                                    int column_begin, int lanes, int16_t* row) {
  const int taps = y_plan.taps;
  const int16_t* w = &y_plan.weights[static_cast<size_t>(out_row) * taps];
  const uint8_t* base = VerticalBase(src, y_plan, out_row, column_begin);
  const ptrdiff_t stride = src.stride;
  int k = 0;
  for (; k + 32 <= lanes; k += 32) {
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    const uint8_t* s = base + k;
    for (int t = 0; t < taps; ++t, s += stride) {
      const __m256i weight = _mm256_set1_epi16(w[t]);
      const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)));
      lo = _mm256_add_epi16(lo, _mm256_mullo_epi16(a, weight));
      hi = _mm256_add_epi16(hi, _mm256_mullo_epi16(b, weight));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + k), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + k + 16), hi);
  }
  if (lanes < 16) {
    VerticalLanesPortable(base, stride, w, taps, k, lanes, row);
    return;
  }
  while (k < lanes) {
    const int at = std::min(k, lanes - 16);
    __m256i sum = _mm256_setzero_si256();
    const uint8_t* s = base + at;
    for (int t = 0; t < taps; ++t, s += stride) {
      const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      sum = _mm256_add_epi16(sum, _mm256_mullo_epi16(a, _mm256_set1_epi16(w[t])));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + at), sum);
    k = at + 16;
  }
}

// The 32-bit sums (rounding term included) of output pixels x and x+1, one
// per 128-bit half: the SSE2 kernel's arithmetic in each half, r, g, b and a
// junk lane. Pixel t+1's channels are pixel t's three lanes on, so one load
// per tap pair and half holds both, and one byte shuffle (`interleave`)
// makes the SSE2 kernel's [r0 r1 g0 g1 b0 b1 . .] operand from it.
template <int kPairs>
PIPETUNE_AVX2 inline __m256i TwoPixelSums(const int16_t* row, const int32_t* offsets,
                                          const int32_t* weight_pairs, int pairs, int x, __m256i interleave) {
  const int16_t* p0 = row + offsets[x];
  const int16_t* p1 = row + offsets[x + 1];
  const int32_t* w = weight_pairs + static_cast<ptrdiff_t>(x) * pairs * 4;
  __m256i acc = _mm256_set1_epi32(1 << (kResultShift - 1));
  for (int t = 0; t < (kPairs > 0 ? kPairs : pairs); ++t) {
    const ptrdiff_t lane = static_cast<ptrdiff_t>(2 * t) * kChannels;
    const __m256i a = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + lane))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + lane)), 1);
    const __m256i weights = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 8 * t));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(a, interleave), weights));
  }
  return _mm256_srai_epi32(acc, kResultShift);
}

// Four output pixels per step, as two pairs whose results are packed
// together and stored as one 12-byte run (a 16-byte store whose last four
// bytes the next step overwrites); the last pixels go two at a time with
// overlapping four-byte stores as in the SSE2 kernel. Weights and offsets
// are padded to an even count (see AxisPlan), so an odd last pixel is
// computed with a zero-weight partner whose result is dropped.
template <int kPairs>
PIPETUNE_AVX2 void HorizontalPassAvx2(const AxisPlan& x_plan, const int16_t* row, int out_width,
                                      uint8_t* out) {
  const int pairs = kPairs > 0 ? kPairs : x_plan.taps / 2;
  const int32_t* offsets = x_plan.row_offsets.data();
  const int32_t* weight_pairs = x_plan.weight_pairs.data();
  // After packing pixels (x, x+1) with (x+2, x+3), the 32-bit words hold
  // x, x+2 (low half) and x+1, x+3 (high half) as r, g, b, junk: put them
  // in order, then drop the junk bytes.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
  const __m128i drop_junk = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  // 16-bit lanes 0 3 1 4 2 5 3 6 of each half: pixel t's r, g, b beside pixel t+1's.
  const __m256i interleave = _mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13,  //
                                              0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13);
  int x = 0;
  for (; x + 6 <= out_width; x += 4) {  // the 16-byte store stays inside the row
    const __m256i first = TwoPixelSums<kPairs>(row, offsets, weight_pairs, pairs, x, interleave);
    const __m256i second = TwoPixelSums<kPairs>(row, offsets, weight_pairs, pairs, x + 2, interleave);
    const __m256i words = _mm256_packs_epi32(first, second);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words, words), order);
    const __m128i rgb = _mm_shuffle_epi8(_mm256_castsi256_si128(bytes), drop_junk);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + static_cast<ptrdiff_t>(x) * kChannels), rgb);
  }
  for (; x < out_width; x += 2) {
    const __m256i sums = TwoPixelSums<kPairs>(row, offsets, weight_pairs, pairs, x, interleave);
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(sums, sums), sums);
    // r, g, b, (junk) of each pixel in the low word of its half.
    const uint32_t left = static_cast<uint32_t>(_mm256_cvtsi256_si32(bytes));
    const uint32_t right = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1)));
    uint8_t* dst = out + static_cast<ptrdiff_t>(x) * kChannels;
    if (x + 2 < out_width) {
      std::memcpy(dst, &left, sizeof(left));
      std::memcpy(dst + kChannels, &right, sizeof(right));
    } else if (x + 2 == out_width) {
      std::memcpy(dst, &left, sizeof(left));
      std::memcpy(dst + kChannels, &right, kChannels);
    } else {
      std::memcpy(dst, &left, kChannels);
    }
  }
}
#endif  // PIPETUNE_HAVE_AVX2_KERNELS

// The output rows with one kernel set: the pass functions are chosen once
// per image, the horizontal one by tap count.
using VerticalFn = void (*)(const ImageView&, const AxisPlan&, int, int, int, int16_t*);
using HorizontalFn = void (*)(const AxisPlan&, const int16_t*, int, uint8_t*);

struct Kernels {
  VerticalFn vertical;
  HorizontalFn horizontal;
};

template <template <int> class Pass>
HorizontalFn ByTaps(int taps) {
  switch (taps) {
    case 2:
      return Pass<1>::run;
    case 4:
      return Pass<2>::run;
    case 6:
      return Pass<3>::run;
    default:
      return Pass<0>::run;
  }
}

#if defined(__SSE2__)
template <int kPairs>
struct Sse2Horizontal {
  static constexpr HorizontalFn run = HorizontalPassSse2<kPairs>;
};
#endif
#if PIPETUNE_HAVE_AVX2_KERNELS
template <int kPairs>
struct Avx2Horizontal {
  static constexpr HorizontalFn run = HorizontalPassAvx2<kPairs>;
};
#endif

Kernels KernelsFor(Isa isa, [[maybe_unused]] int x_taps) {
  switch (isa) {
    case Isa::kAvx2:
#if PIPETUNE_HAVE_AVX2_KERNELS
      return {VerticalPassAvx2, ByTaps<Avx2Horizontal>(x_taps)};
#endif
      [[fallthrough]];
    case Isa::kSse2:
#if defined(__SSE2__)
      return {VerticalPassSse2, ByTaps<Sse2Horizontal>(x_taps)};
#endif
      [[fallthrough]];
    case Isa::kPortable:
      break;
  }
  return {VerticalPassPortable, HorizontalPassPortable};
}

}  // namespace

bool ResampleKernelsSupported(ResampleKernels kernels) {
  switch (kernels) {
    case ResampleKernels::kBest:
    case ResampleKernels::kPortable:
      return true;
    case ResampleKernels::kSse2:
#if defined(__SSE2__)
      return true;
#else
      return false;
#endif
    case ResampleKernels::kAvx2:
      return BestIsa() == Isa::kAvx2;
  }
  return false;
}

void SetResampleKernels(ResampleKernels kernels) {
  PIPETUNE_CHECK(ResampleKernelsSupported(kernels));
  forced_kernels.store(kernels, std::memory_order_relaxed);
}

void ResampleCrop(const ImageView& src, const CropRect& crop, int out_height, int out_width, bool flip,
                  bool antialias, uint8_t* out) {
  PIPETUNE_CHECK(out_height >= 1 && out_width >= 1 && src.height >= 1 && src.width >= 1);
  PIPETUNE_CHECK(crop.width > 0 && crop.height > 0);
  Scratch& scratch = ThreadScratch();
  const Isa isa = ChosenIsa();
  PlanAxis(crop.x, crop.width, src.width, out_width, flip, antialias, kHorizontalOne, &isa, scratch,
           scratch.x_plan);
  PlanAxis(crop.y, crop.height, src.height, out_height, /*mirror=*/false, antialias, kVerticalOne,
           /*isa=*/nullptr, scratch, scratch.y_plan);
  const AxisPlan& x_plan = scratch.x_plan;
  PIPETUNE_CHECK(x_plan.lo >= src.left && scratch.y_plan.lo >= src.top);
  const int lanes = (x_plan.hi - x_plan.lo) * kChannels;
  scratch.row.resize(static_cast<size_t>(lanes) + kRowPadding);
  std::fill(scratch.row.begin() + lanes, scratch.row.end(), 0);
  const Kernels kernels = KernelsFor(isa, x_plan.taps);
  const size_t out_row_bytes = static_cast<size_t>(out_width) * kChannels;
  for (int y = 0; y < out_height; ++y) {
    kernels.vertical(src, scratch.y_plan, y, x_plan.lo * kChannels, lanes, scratch.row.data());
    kernels.horizontal(x_plan, scratch.row.data(), out_width, out + y * out_row_bytes);
  }
}

void PlanAxisWeights(double start, double length, int src_len, int out_len, bool mirror, bool antialias,
                     int one, AxisWeights& weights) {
  Scratch scratch;
  AxisPlan plan;
  PlanAxis(start, length, src_len, out_len, mirror, antialias, one, /*isa=*/nullptr, scratch, plan);
  weights.taps = plan.taps;
  weights.first = plan.first;
  weights.weights = plan.weights;
}

void NormalizeToFloat(const uint8_t* in, int height, int width, const NormalizeParams& params, float* out) {
  // (x / 255 - mean) / std == x * scale + bias.
  std::array<float, kChannels> scale, bias;
  for (int c = 0; c < kChannels; ++c) {
    scale[c] = 1.0f / (255.0f * params.std[c]);
    bias[c] = -params.mean[c] / params.std[c];
  }
  const size_t pixels = static_cast<size_t>(height) * width;
  if (params.channels_first) {
    // De-interleaving does not vectorise on baseline SSE2 (it wants SSSE3's
    // byte shuffle); a 256-entry table per channel makes each value one load
    // and one store, no conversion.
    float table[kChannels][256];
    for (int c = 0; c < kChannels; ++c) {
      for (int v = 0; v < 256; ++v) table[c][v] = v * scale[c] + bias[c];
    }
    float* __restrict r = out;
    float* __restrict g = out + pixels;
    float* __restrict b = out + 2 * pixels;
    for (size_t p = 0; p < pixels; ++p) {
      r[p] = table[0][in[3 * p]];
      g[p] = table[1][in[3 * p + 1]];
      b[p] = table[2][in[3 * p + 2]];
    }
    return;
  }
  const size_t values = pixels * kChannels;
  size_t i = 0;
#if defined(__SSE2__)
  // 48 values (16 pixels) per step: three 16-byte loads, widened to twelve
  // float vectors. The channel pattern repeats every 12 values, so vector j
  // of a step uses scale/bias pattern j % 3.
  __m128 lane_scale[3], lane_bias[3];
  for (int v = 0; v < 3; ++v) {
    lane_scale[v] = _mm_setr_ps(scale[(4 * v) % 3], scale[(4 * v + 1) % 3], scale[(4 * v + 2) % 3],
                                scale[(4 * v + 3) % 3]);
    lane_bias[v] =
        _mm_setr_ps(bias[(4 * v) % 3], bias[(4 * v + 1) % 3], bias[(4 * v + 2) % 3], bias[(4 * v + 3) % 3]);
  }
  const __m128i zero = _mm_setzero_si128();
  // 16 bytes to four float vectors whose patterns are j0..j3, spelled out so
  // that the pattern choice costs nothing at run time.
  auto sixteen = [&](const uint8_t* src, float* dst, int j0, int j1, int j2, int j3) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i lo = _mm_unpacklo_epi8(bytes, zero), hi = _mm_unpackhi_epi8(bytes, zero);
    auto four = [&](__m128i ints, float* d, int j) {
      _mm_storeu_ps(d, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(ints), lane_scale[j]), lane_bias[j]));
    };
    four(_mm_unpacklo_epi16(lo, zero), dst, j0);
    four(_mm_unpackhi_epi16(lo, zero), dst + 4, j1);
    four(_mm_unpacklo_epi16(hi, zero), dst + 8, j2);
    four(_mm_unpackhi_epi16(hi, zero), dst + 12, j3);
  };
  // The vector starting at value s begins with channel s % 3; s = 16c + 4q.
  for (; i + 48 <= values; i += 48) {
    sixteen(in + i, out + i, 0, 1, 2, 0);
    sixteen(in + i + 16, out + i + 16, 1, 2, 0, 1);
    sixteen(in + i + 32, out + i + 32, 2, 0, 1, 2);
  }
#endif
  for (; i < values; ++i) out[i] = in[i] * scale[i % kChannels] + bias[i % kChannels];
}

PixelCrop SampleResizedCrop(int height, int width, const ResizedCropSampling& sampling, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_ratio_min = std::log(sampling.ratio_min);
  const double log_ratio_max = std::log(sampling.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(sampling.scale_min, sampling.scale_max);
    const double aspect = std::exp(rng.Uniform(log_ratio_min, log_ratio_max));
    // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = rng.IntInclusive(0, height - h);
      const int x = rng.IntInclusive(0, width - w);
      return {x, y, w, h};
    }
  }
  // Fallback: the central crop, aspect ratio clamped into [ratio_min, ratio_max].
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < sampling.ratio_min) {
    h = static_cast<int>(std::nearbyint(w / sampling.ratio_min));
  } else if (in_ratio > sampling.ratio_max) {
    w = static_cast<int>(std::nearbyint(h * sampling.ratio_max));
  }
  w = std::clamp(w, 1, width);
  h = std::clamp(h, 1, height);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace pipetune::runtime::image
