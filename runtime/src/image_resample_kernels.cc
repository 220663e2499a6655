// The inner loops of ResampleCrop (image_resample.h).
#include <algorithm>
#include <cstring>

#include "image_resample.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if PIPETUNE_HAVE_AVX2_KERNELS
#include <immintrin.h>
#endif

namespace pipetune::runtime::image::resample {
namespace {

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

// TwoPixelSums' results as the 8-bit values the packs make of them (clamped
// to 0..255), then normalised: value * scale + bias, multiplied then added.
template <int kPairs>
struct FloatPassAvx2 {
  // What every pair of pixels of one row uses: the plan's taps and the
  // per-channel scale and bias laid out as [r g b 0 r g b 0].
  PIPETUNE_AVX2 FloatPassAvx2(const AxisPlan& x_plan, const float* scale, const float* bias)
      : pairs(kPairs > 0 ? kPairs : x_plan.taps / 2),
        offsets(x_plan.row_offsets.data()),
        weight_pairs(x_plan.weight_pairs.data()),
        interleave(_mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13,  //
                                    0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 6, 7, 12, 13)),
        lane_scale(_mm256_setr_ps(scale[0], scale[1], scale[2], 0, scale[0], scale[1], scale[2], 0)),
        lane_bias(_mm256_setr_ps(bias[0], bias[1], bias[2], 0, bias[0], bias[1], bias[2], 0)),
        zero(_mm256_setzero_si256()),
        top(_mm256_set1_epi32(255)) {}

  // Pixels x and x+1 of `row` as [r g b junk r g b junk] floats.
  PIPETUNE_AVX2 __m256 TwoPixels(const int16_t* row, int x) const {
    __m256i sums = TwoPixelSums<kPairs>(row, offsets, weight_pairs, pairs, x, interleave);
    sums = _mm256_min_epi32(_mm256_max_epi32(sums, zero), top);
    return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sums), lane_scale), lane_bias);
  }

  int pairs;
  const int32_t* offsets;
  const int32_t* weight_pairs;
  __m256i interleave;
  __m256 lane_scale, lane_bias;
  __m256i zero, top;
};

// HorizontalPassAvx2 with floats out: each pair's sums clamped to 0..255 (what
// the two saturating packs do), converted, scaled and biased per channel in
// float. Pixel x+1's four floats are stored three on from pixel x's, so the
// junk lane lands on pixel x+2's red, which the next step overwrites; the
// last pixels are stored three floats each.
template <int kPairs>
PIPETUNE_AVX2 void HorizontalFloatsAvx2(const AxisPlan& x_plan, const int16_t* row, int out_width,
                                        const float* scale, const float* bias, float* out) {
  const FloatPassAvx2<kPairs> pass(x_plan, scale, bias);
  int x = 0;
  for (; x + 2 < out_width; x += 2) {
    const __m256 f = pass.TwoPixels(row, x);
    _mm_storeu_ps(out + static_cast<ptrdiff_t>(x) * kChannels, _mm256_castps256_ps128(f));
    _mm_storeu_ps(out + static_cast<ptrdiff_t>(x + 1) * kChannels, _mm256_extractf128_ps(f, 1));
  }
  for (; x < out_width; x += 2) {
    alignas(32) float last[8];
    _mm256_store_ps(last, pass.TwoPixels(row, x));
    std::memcpy(out + static_cast<ptrdiff_t>(x) * kChannels, last, kChannels * sizeof(float));
    if (x + 1 < out_width) {
      std::memcpy(out + static_cast<ptrdiff_t>(x + 1) * kChannels, last + 4, kChannels * sizeof(float));
    }
  }
}

// HorizontalFloatsAvx2 into three planes: four pixels per step, their
// [r g b junk] vectors transposed into one vector per channel; the last
// pixels one at a time.
template <int kPairs>
PIPETUNE_AVX2 void HorizontalPlanesAvx2(const AxisPlan& x_plan, const int16_t* row, int out_width,
                                        const float* scale, const float* bias, float* r, float* g, float* b) {
  const FloatPassAvx2<kPairs> pass(x_plan, scale, bias);
  int x = 0;
  for (; x + 4 <= out_width; x += 4) {
    const __m256 first = pass.TwoPixels(row, x);
    const __m256 second = pass.TwoPixels(row, x + 2);
    __m128 p0 = _mm256_castps256_ps128(first), p1 = _mm256_extractf128_ps(first, 1);
    __m128 p2 = _mm256_castps256_ps128(second), p3 = _mm256_extractf128_ps(second, 1);
    _MM_TRANSPOSE4_PS(p0, p1, p2, p3);  // p0: the four reds, p1 greens, p2 blues, p3 junk
    _mm_storeu_ps(r + x, p0);
    _mm_storeu_ps(g + x, p1);
    _mm_storeu_ps(b + x, p2);
  }
  for (; x < out_width; x += 2) {
    alignas(32) float last[8];
    _mm256_store_ps(last, pass.TwoPixels(row, x));
    for (int k = 0; k < 2 && x + k < out_width; ++k) {
      r[x + k] = last[4 * k];
      g[x + k] = last[4 * k + 1];
      b[x + k] = last[4 * k + 2];
    }
  }
}
#endif  // PIPETUNE_HAVE_AVX2_KERNELS

// The horizontal pass for a tap count: the common counts unrolled.
template <template <int> class Pass, typename Fn = HorizontalFn>
Fn ByTaps(int taps) {
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
template <int kPairs>
struct Avx2HorizontalFloats {
  static constexpr HorizontalFloatsFn run = HorizontalFloatsAvx2<kPairs>;
};
template <int kPairs>
struct Avx2HorizontalPlanes {
  static constexpr HorizontalPlanesFn run = HorizontalPlanesAvx2<kPairs>;
};
#endif

}  // namespace

Kernels KernelsFor(Isa isa, [[maybe_unused]] int x_taps) {
  switch (isa) {
    case Isa::kAvx2:
#if PIPETUNE_HAVE_AVX2_KERNELS
      return {VerticalPassAvx2, ByTaps<Avx2Horizontal>(x_taps),
              ByTaps<Avx2HorizontalFloats, HorizontalFloatsFn>(x_taps),
              ByTaps<Avx2HorizontalPlanes, HorizontalPlanesFn>(x_taps)};
#endif
      [[fallthrough]];
    case Isa::kSse2:
#if defined(__SSE2__)
      return {VerticalPassSse2, ByTaps<Sse2Horizontal>(x_taps), nullptr, nullptr};
#endif
      [[fallthrough]];
    case Isa::kPortable:
      break;
  }
  return {VerticalPassPortable, HorizontalPassPortable, nullptr, nullptr};
}

}  // namespace pipetune::runtime::image::resample
