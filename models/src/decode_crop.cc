// The decode-and-crop fusion's pair finder and price (decode_crop.h).
#include "pipetune/models/decode_crop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pipetune/base/rng.h"

namespace pipetune::models {
namespace {

// The runtime's window: an iMCU is 16 pixels wide at 4:2:0 (what cameras and
// ImageNet use), and the fused decode widens the crop by 2 pixels where the
// image goes on.
constexpr int kImcuWidth = 16;
constexpr int kEdgeMargin = 2;
constexpr int kDraws = 4000;
constexpr int kChannels = 3;  // jpeg_decode's output is RGB

struct Crop {
  int x = 0, y = 0, width = 0, height = 0;
};

// torchvision's RandomResizedCrop.get_params, as the runtime draws it
// (runtime/src/image_crop_sampling.cc, SampleResizedCrop).
Crop Draw(int width, int height, const CropSampling& sampling, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.Uniform(sampling.scale_min, sampling.scale_max);
    const double aspect = std::exp(rng.Uniform(std::log(sampling.ratio_min), std::log(sampling.ratio_max)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = rng.IntInclusive(0, height - h);
      return {rng.IntInclusive(0, width - w), y, w, h};
    }
  }
  return {0, 0, width, height};  // the fallback crop's share is close enough to the whole image's
}

StatusOr<std::array<double, 2>> Range(const StageConfig& stage, const char* key,
                                      std::array<double, 2> fallback) {
  if (!stage.args.is_object() || !stage.args.contains(key)) return fallback;
  const Json& value = stage.args.at(key);
  if (!value.is_array() || value.size() != 2 || !value[0].is_number() || !value[1].is_number())
    return InvalidInput(StageKeyError(stage, std::string("args.") + key, "expected [min, max]"));
  return std::array<double, 2>{value[0].get<double>(), value[1].get<double>()};
}

}  // namespace

DecodeCropShare EstimateDecodeCropShare(double width, double height, const CropSampling& sampling,
                                        double entropy_share) {
  const int w = std::max(1, static_cast<int>(std::lround(width)));
  const int h = std::max(1, static_cast<int>(std::lround(height)));
  Rng rng(0x5eed);
  double rows = 0, pixels = 0;
  for (int i = 0; i < kDraws; ++i) {
    const Crop crop = Draw(w, h, sampling, rng);
    rows += static_cast<double>(crop.y + crop.height) / h;
    const int left = std::max(0, crop.x - kEdgeMargin) / kImcuWidth * kImcuWidth;
    const int right =
        std::min(w, (crop.x + crop.width + kEdgeMargin + kImcuWidth - 1) / kImcuWidth * kImcuWidth);
    pixels += static_cast<double>(right - left) * crop.height / (static_cast<double>(w) * h);
  }
  DecodeCropShare share;
  share.rows = rows / kDraws;
  share.pixels = pixels / kDraws;
  share.entropy_share = std::clamp(entropy_share, 0.0, 1.0);
  share.cost = share.entropy_share * share.rows + (1 - share.entropy_share) * share.pixels;
  return share;
}

std::optional<DecodeCropPair> FindDecodeCropPair(const PipelineConfig& config) {
  for (size_t i = 0; i + 1 < config.stages.size(); ++i) {
    const StageConfig& decode = config.stages[i];
    const StageConfig& crop = config.stages[i + 1];
    if (decode.op != Op::kMap || decode.fn != "jpeg_decode" || crop.op != Op::kMap ||
        crop.fn != "random_crop_flip")
      continue;
    const bool sized =
        decode.args.is_object() && (decode.args.contains("crop_size") || decode.args.contains("target_size"));
    if (sized) continue;  // already fused, or decoding for another size
    StatusOr<std::array<double, 2>> scale = Range(crop, "scale", {0.08, 1.0});
    StatusOr<std::array<double, 2>> ratio = Range(crop, "ratio", {3.0 / 4.0, 4.0 / 3.0});
    if (!scale.ok() || !ratio.ok()) continue;
    return DecodeCropPair{i, i + 1, CropSampling{(*scale)[0], (*scale)[1], (*ratio)[0], (*ratio)[1]}};
  }
  return std::nullopt;
}

std::optional<DecodeCropPrice> PriceDecodeCropFusion(const PipelineConfig& config, const Profile& profile) {
  std::optional<DecodeCropPair> pair = FindDecodeCropPair(config);
  if (!pair) return std::nullopt;
  std::optional<size_t> decode = profile.FindStage(config.stages[pair->decode].name);
  std::optional<size_t> crop = profile.FindStage(config.stages[pair->crop].name);
  if (!decode || !crop || *crop != *decode + 1) return std::nullopt;
  const StageProfile& decoded = profile.stages[*decode];
  if (!(decoded.bytes_per_element > 0) || !(decoded.cpu_seconds_per_element > 0)) return std::nullopt;
  // Decoded images are assumed 4:3 (the profile knows their mean size, not
  // their shape); the share a crop needs hardly depends on it.
  const double pixels = decoded.bytes_per_element / kChannels;
  const double width = std::sqrt(pixels * 4.0 / 3.0);
  DecodeCropPrice price;
  price.pair = *pair;
  price.decode_stage = *decode;
  price.crop_stage = *crop;
  price.entropy_measured = profile.jpeg_entropy.has_value();
  price.share = EstimateDecodeCropShare(width, pixels / width, pair->sampling,
                                        price.entropy_measured ? profile.jpeg_entropy->share : kEntropyShare);
  const double crop_cpu = profile.stages[*crop].cpu_seconds_per_element;
  price.separate_cpu_seconds = decoded.cpu_seconds_per_element + crop_cpu;
  price.fused_cpu_seconds = decoded.cpu_seconds_per_element * price.share.cost + crop_cpu;
  return price;
}

std::string DescribeDecodeCropFusion(const PipelineConfig& config, const DecodeCropPrice& price) {
  return fmt::format(
      "\"{}\" decodes whole images that \"{}\" then crops: decoding only the crop's window (jpeg_decode with "
      "crop_size, same pixels) would need about {:.0f}% of the decode's CPU ({}), {:.2f} instead of {:.2f} "
      "ms per image for the two stages; `pipetune tune` proposes the fusion.",
      config.stages[price.pair.decode].name, config.stages[price.pair.crop].name, 100 * price.share.cost,
      price.entropy_measured ? "the decode's split measured on this host" : "the decode's split assumed",
      price.fused_cpu_seconds * 1e3, price.separate_cpu_seconds * 1e3);
}

StatusOr<PipelineConfig> FuseDecodeCrop(const PipelineConfig& config, const DecodeCropPair& pair) {
  if (pair.crop != pair.decode + 1 || pair.crop >= config.stages.size() ||
      config.stages[pair.decode].fn != "jpeg_decode" || config.stages[pair.crop].fn != "random_crop_flip") {
    return InvalidInput("no jpeg_decode stage followed by a random_crop_flip stage there to fuse");
  }
  PipelineConfig fused = config;
  StageConfig& decode = fused.stages[pair.decode];
  const StageConfig& crop = config.stages[pair.crop];
  if (!decode.args.is_object()) decode.args = Json::object();
  for (const auto& [key, value] : crop.args.items()) decode.args[key == "size" ? "crop_size" : key] = value;
  decode.random = true;
  fused.stages.erase(fused.stages.begin() + static_cast<std::ptrdiff_t>(pair.crop));
  for (size_t i = 0; i < fused.stages.size(); ++i) fused.stages[i].index = i;
  PIPETUNE_RETURN_IF_ERROR(Validate(fused).WithContext("the fused config does not validate"));
  return fused;
}

}  // namespace pipetune::models
