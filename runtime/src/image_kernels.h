// Pixel kernels behind the image element functions: crop + resample + mirror
// in one pass (image_resample.cc, its inner loops image_resample_kernels.cc),
// normalisation to float (image_normalize.cc), both folded into one pass,
// and torchvision's RandomResizedCrop sampling (image_crop_sampling.cc). Pure functions over caller-owned
// buffers: no allocation on the hot path beyond per-thread scratch that is reused from image to image.
//
// Images are 8-bit, 3 channels, interleaved (HxWx3), rows `stride` bytes
// apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipetune/base/rng.h"

namespace pipetune::runtime::image {

inline constexpr int kChannels = 3;

struct ImageView {
  const uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  ptrdiff_t stride = 0;  // bytes from one row to the next
  // `data` is pixel (left, top) of the height x width image: a view of a
  // decoded window holds only the rows and columns a crop reads.
  int left = 0;
  int top = 0;
};

// A region of the source in pixel units. Fractional edges are allowed: a crop
// chosen on the full-size image keeps its exact position after a scaled
// (1/2, 1/4, 1/8) decode.
struct CropRect {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
};

// Resamples `crop` of `src` to out_height x out_width into `out` (tightly
// packed, out_width * 3 bytes per row), mirrored left-right when `flip`.
//
// The filter is the triangle (bilinear) filter with pixel centres at +0.5,
// as in Pillow and OpenCV. With `antialias`, a downscale widens the filter to
// the scale factor (Pillow's resize, which torchvision uses on PIL images);
// without it every output reads at most 2x2 source pixels (OpenCV's
// INTER_LINEAR). Samples never read outside the crop (edges clamp), exactly
// like cropping first and resizing the crop. Fixed point: 8-bit weights, a
// 16-bit intermediate row, one rounding at the end.
//
// Preconditions (checked by the callers): crop non-empty and inside the
// image, output sizes >= 1, and `src` holds the columns
// [floor(crop.x), ceil(crop.x + crop.width)) and the rows likewise: the only
// pixels read. Coordinates are the whole image's, whatever src.left and
// src.top are, so a window gives the same weights as the whole image.
void ResampleCrop(const ImageView& src, const CropRect& crop, int out_height, int out_width, bool flip,
                  bool antialias, uint8_t* out);

// The instruction sets ResampleCrop's inner loops can use. They compute the
// same integers, so the output bytes never depend on the choice; by default
// (kBest) each call takes the best this CPU has: AVX2 where present, else
// SSE2 on x86-64, else the portable loops.
enum class ResampleKernels { kBest, kPortable, kSse2, kAvx2 };

// Whether this build and CPU can run `kernels`.
bool ResampleKernelsSupported(ResampleKernels kernels);

// For tests and benchmarks: every later ResampleCrop in the process, on any
// thread, uses `kernels` (which must be supported); kBest restores the
// default.
void SetResampleKernels(ResampleKernels kernels);

// For tests: the quantised filter ResampleCrop plans along one axis (output
// i reads `taps` source pixels from first[i] with weights[i * taps ...],
// which sum to `one`: 128 vertically, 16384 horizontally), so that a change
// to the planning can be checked to give the same weights.
struct AxisWeights {
  int taps = 0;
  std::vector<int32_t> first;
  std::vector<int16_t> weights;
};
void PlanAxisWeights(double start, double length, int src_len, int out_len, bool mirror, bool antialias,
                     int one, AxisWeights& weights);

// Per-channel affine map of 8-bit pixels to float: out = (in / 255 - mean) / std.
struct NormalizeParams {
  std::array<float, kChannels> mean{0.485f, 0.456f, 0.406f};  // ImageNet
  std::array<float, kChannels> std{0.229f, 0.224f, 0.225f};
  bool channels_first = false;  // out is CHW planes instead of interleaved HWC
};
void NormalizeToFloat(const uint8_t* in, int height, int width, const NormalizeParams& params, float* out);

// NormalizeToFloat's work on a run of an image's pixels, for callers that
// produce the image piece by piece (ResampleCropNormalized). Building one
// costs a 3 x 256 table where channels_first; apply it to many pixels.
class Normalizer {
 public:
  explicit Normalizer(const NormalizeParams& params);
  // `in` holds `count` pixels (interleaved), pixels [first, first + count)
  // of an image of `image_pixels` pixels whose floats go to `out` (HWC, or
  // three planes of image_pixels each): the floats NormalizeToFloat writes
  // for those pixels of the whole image.
  void Pixels(const uint8_t* in, size_t first, size_t count, size_t image_pixels, float* out) const;

  // out = in * scale()[c] + bias()[c], multiplied then added in float: for
  // kernels that compute the same floats from 8-bit values in registers.
  bool channels_first() const { return channels_first_; }
  const std::array<float, kChannels>& scale() const { return scale_; }
  const std::array<float, kChannels>& bias() const { return bias_; }

 private:
  std::array<float, kChannels> scale_{}, bias_{};
  bool channels_first_;
  std::array<float, kChannels * 256> table_;  // channels_first: 256 floats per channel
};

// ResampleCrop then NormalizeToFloat in one pass (normalize folded into the
// resample's output loop): each output row is resampled into per-thread
// scratch and normalised from there (with AVX2, in the resample's registers)
// into `out`, out_height x out_width x 3 floats (or 3 planes where
// params.channels_first). The same floats as the
// two calls one after the other, bit for bit; the 8-bit image is never
// written out. Preconditions as ResampleCrop's.
void ResampleCropNormalized(const ImageView& src, const CropRect& crop, int out_height, int out_width,
                            bool flip, bool antialias, const NormalizeParams& params, float* out);

// Seeded from FnContext::seed: the same crops on every thread and machine.
using ::pipetune::Rng;

// torchvision.transforms.RandomResizedCrop's parameters.
struct ResizedCropSampling {
  double scale_min = 0.08, scale_max = 1.0;             // of the image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

struct PixelCrop {
  int x = 0, y = 0, width = 0, height = 0;
};

// RandomResizedCrop.get_params (torchvision 0.14): up to 10 draws of an area
// fraction (uniform in scale) and a log-uniform aspect ratio; the first crop
// that fits is placed uniformly at random. If none fits, the central crop with
// the aspect ratio clamped into `ratio`. Sizes round half to even, as Python's
// round() does.
PixelCrop SampleResizedCrop(int height, int width, const ResizedCropSampling& sampling, Rng& rng);

}  // namespace pipetune::runtime::image
