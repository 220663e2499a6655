// NormalizeToFloat and the Normalizer behind it (image_kernels.h).
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "image_kernels.h"

namespace pipetune::runtime::image {

Normalizer::Normalizer(const NormalizeParams& params) : channels_first_(params.channels_first) {
  // (x / 255 - mean) / std == x * scale + bias.
  for (int c = 0; c < kChannels; ++c) {
    scale_[c] = 1.0f / (255.0f * params.std[c]);
    bias_[c] = -params.mean[c] / params.std[c];
  }
  if (!channels_first_) return;
  // De-interleaving does not vectorise on baseline SSE2 (it wants SSSE3's
  // byte shuffle); a 256-entry table per channel makes each value one load
  // and one store, no conversion.
  for (int c = 0; c < kChannels; ++c) {
    for (int v = 0; v < 256; ++v) table_[c * 256 + v] = v * scale_[c] + bias_[c];
  }
}

void Normalizer::Pixels(const uint8_t* in, size_t first, size_t count, size_t image_pixels,
                        float* out) const {
  if (channels_first_) {
    float* __restrict r = out + first;
    float* __restrict g = out + image_pixels + first;
    float* __restrict b = out + 2 * image_pixels + first;
    const float* table = table_.data();
    for (size_t p = 0; p < count; ++p) {
      r[p] = table[in[3 * p]];
      g[p] = table[256 + in[3 * p + 1]];
      b[p] = table[512 + in[3 * p + 2]];
    }
    return;
  }
  // Interleaved: a run of whole pixels starts at channel 0, like the image.
  out += first * kChannels;
  const size_t values = count * kChannels;
  size_t i = 0;
#if defined(__SSE2__)
  // 48 values (16 pixels) per step: three 16-byte loads, widened to twelve
  // float vectors. The channel pattern repeats every 12 values, so vector j
  // of a step uses scale/bias pattern j % 3. Multiply, then add, as the
  // scalar tail does: the same floats whichever loop a value falls in.
  __m128 lane_scale[3], lane_bias[3];
  for (int v = 0; v < 3; ++v) {
    lane_scale[v] = _mm_setr_ps(scale_[(4 * v) % 3], scale_[(4 * v + 1) % 3], scale_[(4 * v + 2) % 3],
                                scale_[(4 * v + 3) % 3]);
    lane_bias[v] = _mm_setr_ps(bias_[(4 * v) % 3], bias_[(4 * v + 1) % 3], bias_[(4 * v + 2) % 3],
                               bias_[(4 * v + 3) % 3]);
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
  for (; i < values; ++i) out[i] = in[i] * scale_[i % kChannels] + bias_[i % kChannels];
}

void NormalizeToFloat(const uint8_t* in, int height, int width, const NormalizeParams& params, float* out) {
  const size_t pixels = static_cast<size_t>(height) * width;
  Normalizer(params).Pixels(in, 0, pixels, pixels, out);
}

}  // namespace pipetune::runtime::image
