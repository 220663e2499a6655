// SampleResizedCrop (image_kernels.h): torchvision's RandomResizedCrop draws.
#include <algorithm>
#include <cmath>

#include "image_kernels.h"

namespace pipetune::runtime::image {

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
