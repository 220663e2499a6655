#include "image_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipetune/base/check.h"

namespace pipetune::runtime::image {
namespace {

// Weights are 8-bit fixed point summing to 256: an 8-bit pixel times a weight
// fits 16 bits even summed over any number of taps, so the vertical pass runs
// on 16-bit lanes (twice the work per vector instruction of 32-bit ones).
constexpr int kWeightBits = 8;
constexpr int kWeightOne = 1 << kWeightBits;

// How one axis of the output reads the source: output i reads `taps`
// consecutive source pixels from first[i] with weights[i * taps ...]. Every
// output has the same tap count (shorter filters are padded with zero
// weights), which keeps the inner loops branch-free.
struct AxisPlan {
  int taps = 0;
  int lo = 0;  // the plan reads source pixels [lo, hi) only
  int hi = 0;
  std::vector<int32_t> first;
  std::vector<uint16_t> weights;
};

// Per-thread scratch reused across images: after the first few images no
// call allocates.
struct Scratch {
  AxisPlan x_plan, y_plan;
  std::vector<float> raw_weights;
  std::vector<int32_t> raw_first, raw_count;
  std::vector<uint16_t> row;  // one vertically filtered row of the crop, 3 lanes per pixel
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Triangle-filter weights for one axis, as Pillow computes them (its
// ImagingResample "precompute_coeffs"), on the source range the crop covers.
void PlanAxis(double start, double length, int src_len, int out_len, bool mirror, bool antialias,
              Scratch& scratch, AxisPlan& plan) {
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

  // Fixed point, padded to `taps` and kept inside [lo, hi).
  plan.taps = taps;
  plan.first.resize(out_len);
  plan.weights.assign(static_cast<size_t>(out_len) * taps, 0);
  for (int i = 0; i < out_len; ++i) {
    const int xmin = scratch.raw_first[i], count = scratch.raw_count[i];
    const int first = std::min(xmin, plan.hi - taps);
    const float* w = &scratch.raw_weights[static_cast<size_t>(i) * max_taps];
    uint16_t* q = &plan.weights[static_cast<size_t>(i) * taps + (xmin - first)];
    int sum = 0, largest = 0;
    for (int k = 0; k < count; ++k) {
      q[k] = static_cast<uint16_t>(std::lround(w[k] * kWeightOne));
      sum += q[k];
      if (q[k] > q[largest]) largest = k;
    }
    q[largest] = static_cast<uint16_t>(q[largest] + (kWeightOne - sum));  // exact sum: flat stays flat
    plan.first[i] = first;
  }
}

// row[k] = sum_t w[t] * src_row_t[k] over the crop's columns: contiguous
// 8-bit in, 16-bit out, which the compiler vectorises.
void VerticalPass(const ImageView& src, const AxisPlan& y_plan, int out_row, int column_begin,
                  int lanes, uint16_t* row) {
  const int taps = y_plan.taps;
  const uint16_t* w = &y_plan.weights[static_cast<size_t>(out_row) * taps];
  const uint8_t* base = src.data + static_cast<ptrdiff_t>(y_plan.first[out_row]) * src.stride + column_begin;
  if (taps == 2) {
    const uint8_t* __restrict r0 = base;
    const uint8_t* __restrict r1 = base + src.stride;
    const uint16_t w0 = w[0], w1 = w[1];
    for (int k = 0; k < lanes; ++k) row[k] = static_cast<uint16_t>(r0[k] * w0 + r1[k] * w1);
    return;
  }
  {
    const uint8_t* __restrict r0 = base;
    const uint16_t w0 = w[0];
    for (int k = 0; k < lanes; ++k) row[k] = static_cast<uint16_t>(r0[k] * w0);
  }
  for (int t = 1; t < taps; ++t) {
    const uint16_t wt = w[t];
    if (wt == 0) continue;
    const uint8_t* __restrict rt = base + t * src.stride;
    for (int k = 0; k < lanes; ++k) row[k] = static_cast<uint16_t>(row[k] + rt[k] * wt);
  }
}

inline uint8_t Round16(uint32_t acc) { return static_cast<uint8_t>((acc + (1u << 15)) >> 16); }

// out[x] = sum_t w[t] * row[first[x] + t] per channel. kTaps > 0: the tap
// count is a compile-time constant (the common bilinear case); 0: runtime.
template <int kTaps>
void HorizontalPass(const AxisPlan& x_plan, const uint16_t* row, int out_width, uint8_t* out) {
  const int taps = kTaps > 0 ? kTaps : x_plan.taps;
  const int32_t* first = x_plan.first.data();
  const uint16_t* weights = x_plan.weights.data();
  for (int x = 0; x < out_width; ++x) {
    const uint16_t* p = row + static_cast<ptrdiff_t>(first[x] - x_plan.lo) * kChannels;
    const uint16_t* w = weights + static_cast<ptrdiff_t>(x) * taps;
    uint32_t r = 0, g = 0, b = 0;
    for (int t = 0; t < taps; ++t) {
      r += uint32_t{p[t * 3 + 0]} * w[t];
      g += uint32_t{p[t * 3 + 1]} * w[t];
      b += uint32_t{p[t * 3 + 2]} * w[t];
    }
    out[x * 3 + 0] = Round16(r);
    out[x * 3 + 1] = Round16(g);
    out[x * 3 + 2] = Round16(b);
  }
}

}  // namespace

void ResampleCrop(const ImageView& src, const CropRect& crop, int out_height, int out_width,
                  bool flip, bool antialias, uint8_t* out) {
  PIPETUNE_CHECK(out_height >= 1 && out_width >= 1 && src.height >= 1 && src.width >= 1);
  PIPETUNE_CHECK(crop.width > 0 && crop.height > 0);
  Scratch& scratch = ThreadScratch();
  PlanAxis(crop.x, crop.width, src.width, out_width, flip, antialias, scratch, scratch.x_plan);
  PlanAxis(crop.y, crop.height, src.height, out_height, /*mirror=*/false, antialias, scratch,
           scratch.y_plan);
  const AxisPlan& x_plan = scratch.x_plan;
  const int lanes = (x_plan.hi - x_plan.lo) * kChannels;
  scratch.row.resize(lanes);
  const size_t out_row_bytes = static_cast<size_t>(out_width) * kChannels;
  for (int y = 0; y < out_height; ++y) {
    VerticalPass(src, scratch.y_plan, y, x_plan.lo * kChannels, lanes, scratch.row.data());
    uint8_t* dst = out + y * out_row_bytes;
    switch (x_plan.taps) {
      case 1: HorizontalPass<1>(x_plan, scratch.row.data(), out_width, dst); break;
      case 2: HorizontalPass<2>(x_plan, scratch.row.data(), out_width, dst); break;
      case 3: HorizontalPass<3>(x_plan, scratch.row.data(), out_width, dst); break;
      case 4: HorizontalPass<4>(x_plan, scratch.row.data(), out_width, dst); break;
      default: HorizontalPass<0>(x_plan, scratch.row.data(), out_width, dst); break;
    }
  }
}

void NormalizeToFloat(const uint8_t* in, int height, int width, const NormalizeParams& params,
                      float* out) {
  // (x / 255 - mean) / std == x * scale + bias.
  std::array<float, kChannels> scale, bias;
  for (int c = 0; c < kChannels; ++c) {
    scale[c] = 1.0f / (255.0f * params.std[c]);
    bias[c] = -params.mean[c] / params.std[c];
  }
  const size_t pixels = static_cast<size_t>(height) * width;
  if (params.channels_first) {
    for (int c = 0; c < kChannels; ++c) {
      float* __restrict plane = out + c * pixels;
      const float s = scale[c], b = bias[c];
      for (size_t p = 0; p < pixels; ++p) plane[p] = in[p * kChannels + c] * s + b;
    }
    return;
  }
  // Interleaved: a block of 48 values (16 pixels) has a fixed channel pattern,
  // so the per-lane scale/bias are constant vectors and the loop vectorises.
  constexpr size_t kBlock = 48;
  std::array<float, kBlock> block_scale, block_bias;
  for (size_t k = 0; k < kBlock; ++k) {
    block_scale[k] = scale[k % kChannels];
    block_bias[k] = bias[k % kChannels];
  }
  const size_t values = pixels * kChannels;
  size_t i = 0;
  for (; i + kBlock <= values; i += kBlock) {
    const uint8_t* __restrict src = in + i;
    float* __restrict dst = out + i;
    for (size_t k = 0; k < kBlock; ++k) dst[k] = src[k] * block_scale[k] + block_bias[k];
  }
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
