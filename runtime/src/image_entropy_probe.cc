// Entropy decoding's share of a JPEG decode on this host (jpeg_probe.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "image_jpeg.h"
#include "pipetune/base/clock.h"
#include "pipetune/base/files.h"
#include "pipetune/runtime/jpeg_probe.h"

namespace pipetune::runtime {
namespace {

// The CPU one decode of `region` takes; the decode's error, naming `path`.
StatusOr<double> TimeDecode(const std::string& path, const std::vector<uint8_t>& data,
                            const image::JpegDecodeOptions& options, const image::PixelCrop& region,
                            std::vector<uint8_t>& scratch) {
  const double begin = ThreadCpuSeconds();
  StatusOr<image::ImageView> view =
      image::DecodeJpegRegion(data.data(), data.size(), options, region, scratch);
  const double seconds = ThreadCpuSeconds() - begin;
  if (!view.ok()) return InvalidInput(fmt::format("{}: {}", path, view.status().message()));
  return seconds;
}

}  // namespace

StatusOr<models::JpegEntropyShare> MeasureJpegEntropyShare(const std::vector<std::string>& files,
                                                           const JpegProbeOptions& options) {
  if (files.empty()) return InvalidInput("no JPEG files to measure the decode on");
  image::JpegDecodeOptions decode;
  decode.fast_dct = options.fast_dct;
  decode.fast_upsample = options.fast_upsample;
  std::vector<uint8_t> scratch;
  double whole_seconds = 0, entropy_seconds = 0;
  int measured = 0;
  const double begin = ThreadCpuSeconds();
  for (const std::string& path : files) {
    if (measured >= 2 && ThreadCpuSeconds() - begin > options.max_cpu_seconds) break;
    ++measured;
    PIPETUNE_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
    const std::vector<uint8_t> data(bytes.begin(), bytes.end());
    StatusOr<image::JpegInfo> info = image::ReadJpegInfo(data.data(), data.size());
    if (!info.ok()) return InvalidInput(fmt::format("{}: not a JPEG ({})", path, info.status().message()));
    const image::PixelCrop whole{0, 0, info->width, info->height};
    const image::PixelCrop last_row{0, info->height - 1, 1, 1};
    double whole_least = std::numeric_limits<double>::infinity();
    double entropy_least = whole_least;
    for (int round = 0; round < kJpegProbeRounds; ++round) {
      PIPETUNE_ASSIGN_OR_RETURN(double w, TimeDecode(path, data, decode, whole, scratch));
      PIPETUNE_ASSIGN_OR_RETURN(double e, TimeDecode(path, data, decode, last_row, scratch));
      whole_least = std::min(whole_least, w);
      entropy_least = std::min(entropy_least, e);
    }
    whole_seconds += whole_least;
    entropy_seconds += entropy_least;
  }
  models::JpegEntropyShare share;
  share.files = measured;
  share.share = whole_seconds > 0 ? std::clamp(entropy_seconds / whole_seconds, 0.0, 1.0) : 1.0;
  return share;
}

}  // namespace pipetune::runtime
