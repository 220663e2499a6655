// ResampleCrop's driver and its axis plans (image_kernels.h); the inner
// loops are image_resample_kernels.cc's.
#include "image_resample.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "pipetune/base/check.h"

namespace pipetune::runtime::image {
namespace {

using resample::AxisPlan;
using resample::Isa;
using resample::Kernels;
using resample::KernelsFor;
using resample::kHorizontalOne;
using resample::kRowPadding;
using resample::kVerticalOne;

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

namespace {

// Plans both axes and produces the output rows top to bottom: after row y's
// vertical pass, `sink(y, kernels, x_plan, row)` runs the horizontal pass
// into wherever that row's pixels go.
template <typename Sink>
void ResampleRows(const ImageView& src, const CropRect& crop, int out_height, int out_width, bool flip,
                  bool antialias, Sink&& sink) {
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
  for (int y = 0; y < out_height; ++y) {
    kernels.vertical(src, scratch.y_plan, y, x_plan.lo * kChannels, lanes, scratch.row.data());
    sink(y, kernels, x_plan, scratch.row.data());
  }
}

}  // namespace

void ResampleCrop(const ImageView& src, const CropRect& crop, int out_height, int out_width, bool flip,
                  bool antialias, uint8_t* out) {
  const size_t out_row_bytes = static_cast<size_t>(out_width) * kChannels;
  ResampleRows(src, crop, out_height, out_width, flip, antialias,
               [&](int y, const Kernels& kernels, const AxisPlan& x_plan, const int16_t* row) {
                 kernels.horizontal(x_plan, row, out_width, out + y * out_row_bytes);
               });
}

void ResampleCropNormalized(const ImageView& src, const CropRect& crop, int out_height, int out_width,
                            bool flip, bool antialias, const NormalizeParams& params, float* out) {
  // One row of 8-bit output at a time, normalised while it is in L1: the
  // same bytes ResampleCrop writes, then the same floats NormalizeToFloat
  // makes of them, without the 8-bit image ever reaching memory. The AVX2
  // kernels normalise in registers instead (either layout): no 8-bit row, and
  // the float stores interleaved with the filter's arithmetic, which hides
  // most of their cost (docs/benchmarks-image.md: 40 us of 600 KB of floats
  // per 224 x 224 image).
  thread_local std::vector<uint8_t> pixels;
  pixels.resize(static_cast<size_t>(out_width) * kChannels);
  const Normalizer normalizer(params);
  const size_t image_pixels = static_cast<size_t>(out_height) * out_width;
  ResampleRows(src, crop, out_height, out_width, flip, antialias,
               [&](int y, const Kernels& kernels, const AxisPlan& x_plan, const int16_t* row) {
                 const size_t first = static_cast<size_t>(y) * out_width;
                 if (kernels.horizontal_floats != nullptr && !normalizer.channels_first()) {
                   kernels.horizontal_floats(x_plan, row, out_width, normalizer.scale().data(),
                                             normalizer.bias().data(), out + first * kChannels);
                   return;
                 }
                 if (kernels.horizontal_planes != nullptr && normalizer.channels_first()) {
                   kernels.horizontal_planes(x_plan, row, out_width, normalizer.scale().data(),
                                             normalizer.bias().data(), out + first,
                                             out + image_pixels + first, out + 2 * image_pixels + first);
                   return;
                 }
                 kernels.horizontal(x_plan, row, out_width, pixels.data());
                 normalizer.Pixels(pixels.data(), static_cast<size_t>(y) * out_width, out_width, image_pixels,
                                   out);
               });
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

}  // namespace pipetune::runtime::image
