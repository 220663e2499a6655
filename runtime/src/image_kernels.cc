#include "image_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
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
  // Horizontal plans: weights t and t+1 packed into one 32-bit word (low
  // half t) and repeated 4 times: the 16-byte operand pmaddwd wants, ready
  // to load.
  std::vector<int32_t> weight_pairs;
  std::vector<int32_t> row_offsets;  // horizontal plans: (first[i] - lo) * 3, the lane to start at
};

// Per-thread scratch reused across images: after the first few images no
// call allocates.
struct Scratch {
  AxisPlan x_plan, y_plan;
  std::vector<float> raw_weights;
  std::vector<int32_t> raw_first, raw_count;
  std::vector<int16_t> row;  // one vertically filtered row of the crop, 3 lanes per pixel
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Triangle-filter weights for one axis, as Pillow computes them (its
// ImagingResample "precompute_coeffs"), on the source range the crop covers,
// quantised to sum exactly to `one`. `even_taps` pads the tap count to even
// (the SSE2 horizontal pass consumes taps in pairs); the pad tap may read one
// pixel past `hi`, into the row's zero padding.
void PlanAxis(double start, double length, int src_len, int out_len, bool mirror, bool antialias, int one,
              bool even_taps, Scratch& scratch, AxisPlan& plan) {
  const double scale = length / out_len;
  const double filter_scale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = filter_scale;  // the triangle filter's support is 1
  plan.lo = std::clamp(static_cast<int>(std::floor(start)), 0, src_len - 1);
  plan.hi = std::clamp(static_cast<int>(std::ceil(start + length)), plan.lo + 1, src_len);
  const int max_taps = std::min(static_cast<int>(std::ceil(support)) * 2 + 1, plan.hi - plan.lo);

  scratch.raw_weights.assign(static_cast<size_t>(out_len) * max_taps, 0.0f);
  scratch.raw_first.resize(out_len);
  scratch.raw_count.resize(out_len);
  int taps = 1;
  for (int i = 0; i < out_len; ++i) {
    const int sample = mirror ? out_len - 1 - i : i;
    const double center = start + (sample + 0.5) * scale;
    int xmin = std::max(static_cast<int>(std::floor(center - support + 0.5)), plan.lo);
    int xmax = std::min(static_cast<int>(std::floor(center + support + 0.5)), plan.hi);
    auto weight_at = [&](int x) { return std::max(0.0, 1.0 - std::fabs((x + 0.5 - center) / filter_scale)); };
    while (xmax - xmin > 1 && weight_at(xmin) <= 0.0) ++xmin;
    while (xmax - xmin > 1 && weight_at(xmax - 1) <= 0.0) --xmax;
    if (xmax <= xmin) {  // centre outside the crop (tiny crops): nearest edge pixel
      xmin = std::clamp(static_cast<int>(std::floor(center)), plan.lo, plan.hi - 1);
      xmax = xmin + 1;
    }
    const int count = std::min(xmax - xmin, max_taps);
    double total = 0;
    float* w = &scratch.raw_weights[static_cast<size_t>(i) * max_taps];
    for (int k = 0; k < count; ++k) total += (w[k] = static_cast<float>(weight_at(xmin + k)));
    if (total <= 0.0) {
      w[0] = 1.0f;
      total = 1.0;
    }
    for (int k = 0; k < count; ++k) w[k] = static_cast<float>(w[k] / total);
    scratch.raw_first[i] = xmin;
    scratch.raw_count[i] = count;
    taps = std::max(taps, count);
  }

  plan.taps = even_taps ? (taps + 1) & ~1 : taps;
  plan.first.resize(out_len);
  plan.weights.assign(static_cast<size_t>(out_len) * plan.taps, 0);
  for (int i = 0; i < out_len; ++i) {
    const int xmin = scratch.raw_first[i], count = scratch.raw_count[i];
    const int first = std::min(xmin, plan.hi - taps);  // real taps stay inside [lo, hi)
    const float* w = &scratch.raw_weights[static_cast<size_t>(i) * max_taps];
    int16_t* q = &plan.weights[static_cast<size_t>(i) * plan.taps + (xmin - first)];
    int sum = 0, largest = 0;
    for (int k = 0; k < count; ++k) {
      q[k] = static_cast<int16_t>(std::lround(w[k] * one));
      sum += q[k];
      if (q[k] > q[largest]) largest = k;
    }
    q[largest] = static_cast<int16_t>(q[largest] + (one - sum));  // exact sum: flat stays flat
    plan.first[i] = first;
  }
  if (even_taps) {
    plan.row_offsets.resize(out_len);
    for (int i = 0; i < out_len; ++i) plan.row_offsets[i] = (plan.first[i] - plan.lo) * kChannels;
    plan.weight_pairs.resize(plan.weights.size() / 2 * 4);
    for (size_t k = 0; k < plan.weights.size() / 2; ++k) {
      const int32_t pair =
          static_cast<int32_t>(static_cast<uint16_t>(plan.weights[2 * k]) |
                               static_cast<uint32_t>(static_cast<uint16_t>(plan.weights[2 * k + 1])) << 16);
      std::fill_n(&plan.weight_pairs[4 * k], 4, pair);
    }
  }
}

// The inner loops are written with SSE2 intrinsics (baseline x86-64, so
// every x86-64 build has them) rather than left to the auto-vectoriser: the
// build's -O2 uses GCC's "very cheap" vectoriser cost model, which leaves
// them scalar, and GCC's generic vector extensions widen bytes clumsily.
// Other targets use the plain loops, which compute the same integers.

// row[k] = sum_t w[t] * src_row_t[k] over the crop's columns: contiguous
// 8-bit in, 16-bit out; 16 lanes at a time with all taps summed in
// registers.
void VerticalPass(const ImageView& src, const AxisPlan& y_plan, int out_row, int column_begin, int lanes,
                  int16_t* row) {
  const int taps = y_plan.taps;
  const int16_t* w = &y_plan.weights[static_cast<size_t>(out_row) * taps];
  const uint8_t* base = src.data + static_cast<ptrdiff_t>(y_plan.first[out_row] - src.top) * src.stride +
                        (column_begin - src.left * kChannels);
  int k = 0;
#if defined(__SSE2__)
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
#endif
  for (; k < lanes; ++k) {
    int sum = 0;
    for (int t = 0; t < taps; ++t) sum += base[t * src.stride + k] * w[t];
    row[k] = static_cast<int16_t>(sum);
  }
}

// out[x] = sum_t w[t] * row[first[x] + t], per channel. kPairs > 0: the tap
// count (2 * kPairs) is a compile-time constant, which unrolls the common
// cases; 0: read it from the plan.
template <int kPairs>
void HorizontalPass(const AxisPlan& x_plan, const int16_t* row, int out_width, uint8_t* out) {
  const int pairs = kPairs > 0 ? kPairs : x_plan.taps / 2;
  const int32_t* offsets = x_plan.row_offsets.data();
#if defined(__SSE2__)
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
#else
  const int taps = 2 * pairs;
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
#endif
}

}  // namespace

void ResampleCrop(const ImageView& src, const CropRect& crop, int out_height, int out_width, bool flip,
                  bool antialias, uint8_t* out) {
  PIPETUNE_CHECK(out_height >= 1 && out_width >= 1 && src.height >= 1 && src.width >= 1);
  PIPETUNE_CHECK(crop.width > 0 && crop.height > 0);
  Scratch& scratch = ThreadScratch();
  PlanAxis(crop.x, crop.width, src.width, out_width, flip, antialias, kHorizontalOne, /*even_taps=*/true,
           scratch, scratch.x_plan);
  PlanAxis(crop.y, crop.height, src.height, out_height, /*mirror=*/false, antialias, kVerticalOne,
           /*even_taps=*/false, scratch, scratch.y_plan);
  const AxisPlan& x_plan = scratch.x_plan;
  PIPETUNE_CHECK(x_plan.lo >= src.left && scratch.y_plan.lo >= src.top);
  const int lanes = (x_plan.hi - x_plan.lo) * kChannels;
  scratch.row.resize(static_cast<size_t>(lanes) + kRowPadding);
  std::fill(scratch.row.begin() + lanes, scratch.row.end(), 0);
  const size_t out_row_bytes = static_cast<size_t>(out_width) * kChannels;
  for (int y = 0; y < out_height; ++y) {
    VerticalPass(src, scratch.y_plan, y, x_plan.lo * kChannels, lanes, scratch.row.data());
    uint8_t* dst = out + y * out_row_bytes;
    switch (x_plan.taps) {
      case 2:
        HorizontalPass<1>(x_plan, scratch.row.data(), out_width, dst);
        break;
      case 4:
        HorizontalPass<2>(x_plan, scratch.row.data(), out_width, dst);
        break;
      case 6:
        HorizontalPass<3>(x_plan, scratch.row.data(), out_width, dst);
        break;
      default:
        HorizontalPass<0>(x_plan, scratch.row.data(), out_width, dst);
        break;
    }
  }
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
