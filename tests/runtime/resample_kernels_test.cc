// ResampleCrop's kernel sets (portable loops, SSE2, AVX2) and its filter
// planning, checked byte for byte: a faster kernel or a cheaper plan may
// change speed, never a pixel. Reaches into runtime/src (image_kernels.h) for
// the kernel switch and the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "image_kernels.h"

// A named namespace: the unity build puts every test file in one translation
// unit, where anonymous namespaces would share names.
namespace pipetune::runtime::image::resample_kernels_test {
namespace {

// Draws from mt19937's raw output only: the distributions' algorithms are
// the library's choice, and the golden checksum below must not depend on it.
class Draws {
 public:
  explicit Draws(uint32_t seed) : gen_(seed) {}
  int Int(int lo, int hi) { return lo + static_cast<int>(gen_() % static_cast<uint32_t>(hi - lo + 1)); }
  double Unit() { return (gen_() >> 8) / 16777216.0; }  // [0, 1), 24 bits
  bool Coin() { return (gen_() & 1) != 0; }

 private:
  std::mt19937 gen_;
};

// Every pixel distinct from its neighbours in every channel, so that a row
// or a column read from the wrong place changes the output.
std::vector<uint8_t> Noise(int width, int height, uint32_t seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * kChannels);
  uint32_t h = seed * 2654435761u + 1;
  for (uint8_t& p : pixels) {
    h ^= h << 13;
    h ^= h >> 17;
    h ^= h << 5;
    p = static_cast<uint8_t>(h >> 24);
  }
  return pixels;
}

struct Source {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
  ImageView View() const { return {pixels.data(), height, width, static_cast<ptrdiff_t>(width) * kChannels}; }
  // Only the columns and rows `crop` touches, in a buffer of their own (a
  // decoded window's layout): what ResampleCrop may read, and no more.
  ImageView Window(const CropRect& crop, std::vector<uint8_t>& storage) const {
    const int left = static_cast<int>(std::floor(crop.x)), top = static_cast<int>(std::floor(crop.y));
    const int right = std::min(width, static_cast<int>(std::ceil(crop.x + crop.width)));
    const int bottom = std::min(height, static_cast<int>(std::ceil(crop.y + crop.height)));
    const int w = right - left;
    storage.assign(static_cast<size_t>(w) * (bottom - top) * kChannels, 0);
    for (int y = top; y < bottom; ++y) {
      std::copy_n(&pixels[(static_cast<size_t>(y) * width + left) * kChannels], w * kChannels,
                  &storage[static_cast<size_t>(y - top) * w * kChannels]);
    }
    return {storage.data(), height, width, static_cast<ptrdiff_t>(w) * kChannels, left, top};
  }
};

struct Case {
  CropRect crop;
  int out_height = 0, out_width = 0;
  bool flip = false, antialias = true;
  bool window = false;  // read through a window view instead of the whole image
};

std::string Describe(const Source& s, const Case& c) {
  return "source " + std::to_string(s.width) + "x" + std::to_string(s.height) + " crop (" +
         std::to_string(c.crop.x) + ", " + std::to_string(c.crop.y) + ") " + std::to_string(c.crop.width) +
         "x" + std::to_string(c.crop.height) + " -> " + std::to_string(c.out_width) + "x" +
         std::to_string(c.out_height) + (c.flip ? " flip" : "") + (c.antialias ? " antialias" : "") +
         (c.window ? " window" : "");
}

// A random crop of `s`: tiny (under a pixel), full-image, integer or
// fractional edges, to output sizes from 1 up, up- and downscaling.
Case RandomCase(Draws& d, const Source& s) {
  Case c;
  switch (d.Int(0, 4)) {
    case 0:  // the whole image
      c.crop = {0, 0, double(s.width), double(s.height)};
      break;
    case 1: {  // integer pixels
      const int w = d.Int(1, s.width), h = d.Int(1, s.height);
      c.crop = {double(d.Int(0, s.width - w)), double(d.Int(0, s.height - h)), double(w), double(h)};
      break;
    }
    case 2: {  // tiny: less than two pixels either way
      const double w = 0.05 + d.Unit() * std::min(1.9, s.width - 0.05);
      const double h = 0.05 + d.Unit() * std::min(1.9, s.height - 0.05);
      c.crop = {d.Unit() * (s.width - w), d.Unit() * (s.height - h), w, h};
      break;
    }
    default: {  // fractional, as after a scaled decode
      const double w = 0.5 + d.Unit() * (s.width - 0.5), h = 0.5 + d.Unit() * (s.height - 0.5);
      c.crop = {d.Unit() * (s.width - w), d.Unit() * (s.height - h), w, h};
      break;
    }
  }
  static constexpr int kSizes[] = {224, 1, 7, 33, 2, 3, 16, 17, 31, 32};
  c.out_width = d.Coin() ? kSizes[d.Int(0, 9)] : d.Int(1, 400);
  c.out_height = d.Coin() ? kSizes[d.Int(0, 9)] : d.Int(1, 400);
  c.flip = d.Coin();
  c.antialias = d.Coin();
  c.window = d.Coin();
  return c;
}

Source RandomSource(Draws& d, uint32_t seed) {
  Source s;
  // Mostly small (fast, and many edge cases), sometimes photo-sized.
  const int max_side = d.Int(0, 9) == 0 ? 700 : 80;
  s.width = d.Int(1, max_side);
  s.height = d.Int(1, max_side);
  s.pixels = Noise(s.width, s.height, seed);
  return s;
}

std::vector<uint8_t> Resample(const Source& s, const Case& c, ResampleKernels kernels) {
  SetResampleKernels(kernels);
  // Guard bytes after the output: a kernel must not write past its end.
  std::vector<uint8_t> out(static_cast<size_t>(c.out_height) * c.out_width * kChannels + 16, 0xA5);
  std::vector<uint8_t> storage;
  ResampleCrop(c.window ? s.Window(c.crop, storage) : s.View(), c.crop, c.out_height, c.out_width, c.flip,
               c.antialias, out.data());
  SetResampleKernels(ResampleKernels::kBest);
  for (size_t i = out.size() - 16; i < out.size(); ++i) EXPECT_EQ(out[i], 0xA5) << "wrote past the end";
  out.resize(out.size() - 16);
  return out;
}

std::vector<ResampleKernels> SupportedKernels() {
  std::vector<ResampleKernels> sets;
  for (ResampleKernels k : {ResampleKernels::kPortable, ResampleKernels::kSse2, ResampleKernels::kAvx2}) {
    if (ResampleKernelsSupported(k)) sets.push_back(k);
  }
  return sets;
}

const char* Name(ResampleKernels k) {
  switch (k) {
    case ResampleKernels::kPortable:
      return "portable";
    case ResampleKernels::kSse2:
      return "sse2";
    case ResampleKernels::kAvx2:
      return "avx2";
    case ResampleKernels::kBest:
      return "best";
  }
  return "?";
}

TEST(ResampleKernelsTest, EverySetGivesTheSameBytesOnRandomCrops) {
  const std::vector<ResampleKernels> sets = SupportedKernels();
  if (!ResampleKernelsSupported(ResampleKernels::kAvx2)) {
    std::printf("note: this CPU has no AVX2; comparing %zu kernel sets\n", sets.size());
  }
  Draws d(21);
  for (int i = 0; i < 1500; ++i) {
    const Source s = RandomSource(d, static_cast<uint32_t>(i));
    const Case c = RandomCase(d, s);
    const std::vector<uint8_t> reference = Resample(s, c, ResampleKernels::kPortable);
    for (ResampleKernels k : sets) {
      ASSERT_EQ(Resample(s, c, k), reference) << Name(k) << " differs from portable: " << Describe(s, c);
    }
    ASSERT_EQ(Resample(s, c, ResampleKernels::kBest), reference) << Describe(s, c);
  }
}

// ResampleCropNormalized (normalize folded into the resample's output loop)
// against ResampleCrop then NormalizeToFloat: the same floats, bit for bit,
// with every kernel set, in both layouts, on random crops and parameters; and
// nothing written past the output.
TEST(ResampleKernelsTest, FoldedNormalizeEqualsResampleThenNormalize) {
  Draws d(27);
  for (ResampleKernels k : SupportedKernels()) {
    for (int i = 0; i < 300; ++i) {
      const Source s = RandomSource(d, static_cast<uint32_t>(i + 5000));
      const Case c = RandomCase(d, s);
      NormalizeParams params;
      for (int ch = 0; ch < kChannels; ++ch) {
        params.mean[ch] = static_cast<float>(d.Unit());
        params.std[ch] = static_cast<float>(0.05 + d.Unit());
      }
      params.channels_first = d.Coin();
      const std::vector<uint8_t> bytes = Resample(s, c, k);
      const size_t values = bytes.size();
      std::vector<float> want(values);
      NormalizeToFloat(bytes.data(), c.out_height, c.out_width, params, want.data());
      std::vector<float> got(values + 8, -1234.5f);
      std::vector<uint8_t> storage;
      SetResampleKernels(k);
      ResampleCropNormalized(c.window ? s.Window(c.crop, storage) : s.View(), c.crop, c.out_height,
                             c.out_width, c.flip, c.antialias, params, got.data());
      SetResampleKernels(ResampleKernels::kBest);
      for (size_t v = values; v < got.size(); ++v) ASSERT_EQ(got[v], -1234.5f) << "wrote past the end";
      got.resize(values);
      ASSERT_EQ(got, want) << Name(k) << (params.channels_first ? " chw " : " hwc ") << Describe(s, c);
    }
  }
}

// Output the crop's size with integer edges: every output pixel's centre is
// a source pixel's centre, with weight 1, so the output is the crop itself
// (mirrored with flip). A kernel off by a row, a column or a channel fails.
TEST(ResampleKernelsTest, SameSizeCropIsACopyWithEverySet) {
  Draws d(5);
  for (ResampleKernels k : SupportedKernels()) {
    for (int i = 0; i < 200; ++i) {
      Source s;
      s.width = d.Int(1, 120);
      s.height = d.Int(1, 60);
      s.pixels = Noise(s.width, s.height, static_cast<uint32_t>(i + 1000));
      const int w = d.Int(1, s.width), h = d.Int(1, s.height);
      const int x = d.Int(0, s.width - w), y = d.Int(0, s.height - h);
      Case c{{double(x), double(y), double(w), double(h)}, h, w, d.Coin(), d.Coin(), d.Coin()};
      const std::vector<uint8_t> out = Resample(s, c, k);
      for (int row = 0; row < h; ++row) {
        for (int col = 0; col < w; ++col) {
          const int from = c.flip ? x + w - 1 - col : x + col;
          for (int ch = 0; ch < kChannels; ++ch) {
            ASSERT_EQ(out[(static_cast<size_t>(row) * w + col) * kChannels + ch],
                      s.pixels[(static_cast<size_t>(y + row) * s.width + from) * kChannels + ch])
                << Name(k) << " row " << row << " column " << col << " channel " << ch << ": "
                << Describe(s, c);
          }
        }
      }
    }
  }
}

// FNV-1a over the outputs of a fixed set of crops, taken with the kernels
// and planning as they were before the AVX2 kernels and the cheaper planning
// (commit 3869f17): any changed byte, with any kernel set, changes it.
TEST(ResampleKernelsTest, OutputsMatchTheChecksumFromBeforeTheAvx2Kernels) {
  for (ResampleKernels k : SupportedKernels()) {
    Draws d(2026);
    uint64_t hash = 14695981039346656037ull;
    for (int i = 0; i < 300; ++i) {
      const Source s = RandomSource(d, static_cast<uint32_t>(i) + 77);
      const Case c = RandomCase(d, s);
      for (uint8_t byte : Resample(s, c, k)) hash = (hash ^ byte) * 1099511628211ull;
    }
    EXPECT_EQ(hash, 0xa4139668dc3946f9ull) << Name(k);
  }
}

// The planning as it was written before (commit 3869f17), kept as the
// reference: the current one is arranged to compute less, and must give
// the same int16 weights for every crop.
void ReferencePlan(double start, double length, int src_len, int out_len, bool mirror, bool antialias,
                   int one, AxisWeights& plan) {
  const double scale = length / out_len;
  const double filter_scale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = filter_scale;
  const int lo = std::clamp(static_cast<int>(std::floor(start)), 0, src_len - 1);
  const int hi = std::clamp(static_cast<int>(std::ceil(start + length)), lo + 1, src_len);
  const int max_taps = std::min(static_cast<int>(std::ceil(support)) * 2 + 1, hi - lo);
  std::vector<float> raw_weights(static_cast<size_t>(out_len) * max_taps, 0.0f);
  std::vector<int> raw_first(out_len), raw_count(out_len);
  int taps = 1;
  for (int i = 0; i < out_len; ++i) {
    const int sample = mirror ? out_len - 1 - i : i;
    const double center = start + (sample + 0.5) * scale;
    int xmin = std::max(static_cast<int>(std::floor(center - support + 0.5)), lo);
    int xmax = std::min(static_cast<int>(std::floor(center + support + 0.5)), hi);
    auto weight_at = [&](int x) { return std::max(0.0, 1.0 - std::fabs((x + 0.5 - center) / filter_scale)); };
    while (xmax - xmin > 1 && weight_at(xmin) <= 0.0) ++xmin;
    while (xmax - xmin > 1 && weight_at(xmax - 1) <= 0.0) --xmax;
    if (xmax <= xmin) {
      xmin = std::clamp(static_cast<int>(std::floor(center)), lo, hi - 1);
      xmax = xmin + 1;
    }
    const int count = std::min(xmax - xmin, max_taps);
    double total = 0;
    float* w = &raw_weights[static_cast<size_t>(i) * max_taps];
    for (int k = 0; k < count; ++k) total += (w[k] = static_cast<float>(weight_at(xmin + k)));
    if (total <= 0.0) {
      w[0] = 1.0f;
      total = 1.0;
    }
    for (int k = 0; k < count; ++k) w[k] = static_cast<float>(w[k] / total);
    raw_first[i] = xmin;
    raw_count[i] = count;
    taps = std::max(taps, count);
  }
  plan.taps = taps;
  plan.first.assign(out_len, 0);
  plan.weights.assign(static_cast<size_t>(out_len) * taps, 0);
  for (int i = 0; i < out_len; ++i) {
    const int xmin = raw_first[i], count = raw_count[i];
    const int first = std::min(xmin, hi - taps);
    const float* w = &raw_weights[static_cast<size_t>(i) * max_taps];
    int16_t* q = &plan.weights[static_cast<size_t>(i) * taps + (xmin - first)];
    int sum = 0, largest = 0;
    for (int k = 0; k < count; ++k) {
      q[k] = static_cast<int16_t>(std::lround(w[k] * one));
      sum += q[k];
      if (q[k] > q[largest]) largest = k;
    }
    q[largest] = static_cast<int16_t>(q[largest] + (one - sum));
    plan.first[i] = first;
  }
}

TEST(PlanAxisTest, WeightsEqualTheReferencePlanning) {
  Draws d(8);
  int planned = 0;
  for (int i = 0; i < 20000; ++i) {
    const int src_len = d.Int(1, d.Coin() ? 40 : 5000);
    double length, start;
    switch (d.Int(0, 3)) {
      case 0:  // whole axis
        start = 0;
        length = src_len;
        break;
      case 1: {  // integer
        const int l = d.Int(1, src_len);
        start = d.Int(0, src_len - l);
        length = l;
        break;
      }
      case 2:  // tiny
        length = 0.01 + d.Unit() * std::min(2.0, src_len - 0.01);
        start = d.Unit() * (src_len - length);
        break;
      default:  // fractional; scaled decodes give eighths
        length = d.Coin() ? (1 + d.Int(0, src_len * 8 - 1)) / 8.0 : 0.3 + d.Unit() * (src_len - 0.3);
        start = d.Coin() ? d.Int(0, static_cast<int>((src_len - length) * 8)) / 8.0
                         : d.Unit() * (src_len - length);
        break;
    }
    const int out_len = d.Coin() ? d.Int(1, 300) : std::vector<int>{224, 1, 7, 33, 112, 299}[d.Int(0, 5)];
    const bool mirror = d.Coin(), antialias = d.Coin();
    for (int one : {128, 16384}) {
      AxisWeights want, got;
      ReferencePlan(start, length, src_len, out_len, mirror, antialias, one, want);
      PlanAxisWeights(start, length, src_len, out_len, mirror, antialias, one, got);
      const std::string what = "start " + std::to_string(start) + " length " + std::to_string(length) +
                               " of " + std::to_string(src_len) + " -> " + std::to_string(out_len) +
                               (mirror ? " mirror" : "") + (antialias ? " antialias" : "") + " one " +
                               std::to_string(one);
      ASSERT_EQ(got.taps, want.taps) << what;
      ASSERT_EQ(got.first, want.first) << what;
      ASSERT_EQ(got.weights, want.weights) << what;
      ++planned;
    }
  }
  EXPECT_EQ(planned, 40000);
}

}  // namespace
}  // namespace pipetune::runtime::image::resample_kernels_test
