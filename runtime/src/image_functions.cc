// The image element functions: jpeg_decode, resize, center_crop,
// random_crop_flip and normalize (docs/image-example.md describes their args and what makes them
// fast). Each factory parses and checks its stage's args once; Apply is the
// hot path and produces exactly one output buffer per element, taken from a
// recycling pool (image_buffers.h), with per-thread scratch for the rest.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "image_buffers.h"
#include "image_jpeg.h"
#include "image_kernels.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"
#include "pipetune/runtime/function_registry.h"

namespace pipetune::runtime {
namespace {

using image::CropRect;
using image::ImageView;
using image::kChannels;
using models::StageConfig;

std::string DescribeElement(const Element& element) {
  std::string text = "element " + std::to_string(element.id);
  if (!element.path.empty()) text += " (" + element.path + ")";
  return text;
}

Status ElementError(const char* fn, const Element& element, const std::string& what) {
  return Failed(std::string(fn) + ": " + DescribeElement(element) + ": " + what);
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kNone:
      return "no payload";
    case DType::kBytes:
      return "bytes";
    case DType::kU8:
      return "a u8 image";
    case DType::kF32:
      return "an f32 image";
  }
  return "?";
}

// A 3-channel u8 image with a payload that matches its shape.
Status CheckU8Image(const char* fn, const Element& element) {
  if (element.dtype != DType::kU8 || !element.data) {
    return ElementError(fn, element,
                        std::string("expects a u8 image (decode it with jpeg_decode first), got ") +
                            DTypeName(element.dtype));
  }
  const auto& shape = element.shape;
  if (shape[2] != kChannels || shape[0] < 1 || shape[1] < 1 ||
      element.data->size() != static_cast<size_t>(shape[0]) * shape[1] * kChannels) {
    return ElementError(fn, element,
                        "expects a height x width x 3 image, got shape " + std::to_string(shape[0]) + "x" +
                            std::to_string(shape[1]) + "x" + std::to_string(shape[2]) + " with " +
                            std::to_string(element.data->size()) + " bytes");
  }
  return Status::Ok();
}

// Output sides are capped so that a typo (size 2240000) is a config error,
// not an attempt to allocate terabytes; images beyond kMaxPixels (decoded or
// produced) are an element error for the same reason.
constexpr int64_t kMaxSide = 16384;
constexpr int64_t kMaxPixels = int64_t{1} << 28;

ImageView ViewOf(const Element& element) {
  return {element.data->data(), element.shape[0], element.shape[1],
          static_cast<ptrdiff_t>(element.shape[1]) * kChannels};
}

void SetImage(Element& element, DType dtype, int height, int width, std::shared_ptr<const Bytes> data) {
  element.dtype = dtype;
  element.shape = {height, width, kChannels};
  element.data = std::move(data);
}

Status KeyError(const StageConfig& stage, const std::string& key, const std::string& what) {
  return InvalidInput(models::StageKeyError(stage, "args." + key, what));
}

std::string Describe(const Json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// An array of kCount numbers at `key` of `args` (the stage's args, or an
// object inside them that `prefix` names for errors), checked together by
// `valid`; absent: `fallback`.
template <size_t kCount>
StatusOr<std::array<double, kCount>> ArgNumbers(const StageConfig& stage, const Json& args,
                                                const std::string& prefix, const std::string& key,
                                                std::array<double, kCount> fallback, const char* expected,
                                                bool (*valid)(const std::array<double, kCount>&)) {
  if (!args.is_object() || !args.contains(key)) return fallback;
  const Json& value = args.at(key);
  std::array<double, kCount> numbers{};
  bool ok = value.is_array() && value.size() == kCount;
  for (size_t i = 0; ok && i < kCount; ++i) {
    ok = value[i].is_number();
    if (ok) numbers[i] = value[i].get<double>();
  }
  if (!ok || !valid(numbers))
    return KeyError(stage, prefix + key, std::string("expected ") + expected + ", got " + Describe(value));
  return numbers;
}

// normalize's args (`mean`, `std`, `layout`), read from `args`: the stage's
// own, or the object of a resampling function's `normalize` arg (`prefix`
// "normalize.", which errors name).
StatusOr<image::NormalizeParams> ParseNormalize(const StageConfig& stage, const Json& args,
                                                const std::string& prefix) {
  image::NormalizeParams params;
  PIPETUNE_ASSIGN_OR_RETURN(
      auto mean, ArgNumbers<3>(stage, args, prefix, "mean", {0.485, 0.456, 0.406},
                               "an array of 3 numbers (one per channel)", [](const std::array<double, 3>& v) {
                                 return std::isfinite(v[0] + v[1] + v[2]);
                               }));
  PIPETUNE_ASSIGN_OR_RETURN(auto std, ArgNumbers<3>(stage, args, prefix, "std", {0.229, 0.224, 0.225},
                                                    "an array of 3 numbers > 0 (one per channel)",
                                                    [](const std::array<double, 3>& v) {
                                                      return v[0] > 0 && v[1] > 0 && v[2] > 0;
                                                    }));
  for (int c = 0; c < kChannels; ++c) {
    params.mean[c] = static_cast<float>(mean[c]);
    params.std[c] = static_cast<float>(std[c]);
  }
  if (args.is_object() && args.contains("layout")) {
    const Json& layout = args.at("layout");
    if (!layout.is_string() || (layout != "hwc" && layout != "chw"))
      return KeyError(stage, prefix + "layout", "expected \"hwc\" or \"chw\", got " + Describe(layout));
    params.channels_first = layout == "chw";
  }
  return params;
}

// The `normalize` arg of the resampling functions (jpeg_decode with
// crop_size, random_crop_flip, resize): normalize's work folded into their
// output loop, so that they output what a normalize stage after them would
// (floats). `true` or an object of normalize's args; absent or false: 8-bit
// output. A chain folds a normalize step into the step before it this way
// (RegisterImageFunctions).
StatusOr<std::optional<image::NormalizeParams>> ParseFoldedNormalize(const StageConfig& stage) {
  using Folded = std::optional<image::NormalizeParams>;
  if (!stage.args.is_object() || !stage.args.contains("normalize")) return Folded();
  const Json& value = stage.args.at("normalize");
  if (value.is_boolean()) {
    return value.get<bool>() ? Folded(image::NormalizeParams{}) : Folded();
  }
  if (!value.is_object()) {
    return KeyError(
        stage, "normalize",
        "expected true or an object of normalize's args (mean, std, layout), got " + Describe(value));
  }
  for (const auto& [key, unused] : value.items()) {
    if (key != "mean" && key != "std" && key != "layout")
      return KeyError(stage, "normalize." + key, "unknown key: normalize takes mean, std and layout");
  }
  PIPETUNE_ASSIGN_OR_RETURN(image::NormalizeParams params, ParseNormalize(stage, value, "normalize."));
  return Folded(params);
}

// The output of a resampling function: `crop` of `view` resampled to
// height x width, 8-bit, or normalised floats where `normalize` is set.
void ResampleInto(Element& element, const ImageView& view, const CropRect& crop, int height, int width,
                  bool flip, bool antialias, const std::optional<image::NormalizeParams>& normalize) {
  const size_t values = static_cast<size_t>(height) * width * kChannels;
  if (!normalize) {
    auto out = image::AcquireBuffer(values);
    image::ResampleCrop(view, crop, height, width, flip, antialias, out->data());
    SetImage(element, DType::kU8, height, width, std::move(out));
    return;
  }
  auto out = image::AcquireBuffer(values * sizeof(float));
  // operator new aligns the buffer for any scalar type, float included.
  image::ResampleCropNormalized(view, crop, height, width, flip, antialias, *normalize,
                                reinterpret_cast<float*>(out->data()));
  SetImage(element, DType::kF32, height, width, std::move(out));
}

// `size`, `scale`, `ratio`, `flip_probability`, `antialias`: the crop spec
// shared by random_crop_flip and the fused jpeg_decode, where the output
// side is `crop_size` instead of `size`.
struct CropSpec {
  int size = 224;
  image::ResizedCropSampling sampling;
  double flip_probability = 0.5;
  bool antialias = true;
  std::optional<image::NormalizeParams> normalize;  // floats out (ParseFoldedNormalize)
};

StatusOr<CropSpec> ParseCropSpec(const StageConfig& stage, const char* size_key) {
  CropSpec spec;
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> size, models::ArgInt(stage, size_key, 1));
  if (!size) return KeyError(stage, size_key, "required: the side of the square output in pixels");
  if (*size > kMaxSide)
    return KeyError(stage, size_key, "expected at most 16384, got " + std::to_string(*size));
  spec.size = static_cast<int>(*size);
  PIPETUNE_ASSIGN_OR_RETURN(
      auto scale,
      ArgNumbers<2>(stage, stage.args, "", "scale", {0.08, 1.0}, "[min, max] with 0 < min <= max <= 1",
                    [](const std::array<double, 2>& v) { return v[0] > 0 && v[0] <= v[1] && v[1] <= 1; }));
  PIPETUNE_ASSIGN_OR_RETURN(
      auto ratio,
      ArgNumbers<2>(stage, stage.args, "", "ratio", {3.0 / 4.0, 4.0 / 3.0}, "[min, max] with 0 < min <= max",
                    [](const std::array<double, 2>& v) { return v[0] > 0 && v[0] <= v[1]; }));
  spec.sampling = {scale[0], scale[1], ratio[0], ratio[1]};
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<double> flip, models::ArgNumber(stage, "flip_probability", 0.0));
  if (flip && *flip > 1.0)
    return KeyError(stage, "flip_probability", "expected a number in [0, 1], got " + std::to_string(*flip));
  spec.flip_probability = flip.value_or(0.5);
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<bool> antialias, models::ArgBool(stage, "antialias"));
  spec.antialias = antialias.value_or(true);
  PIPETUNE_ASSIGN_OR_RETURN(spec.normalize, ParseFoldedNormalize(stage));
  if (!stage.random) {
    return InvalidInput(models::StageKeyError(
        stage, "random",
        "a random crop differs every epoch: set \"random\": true so that no cache is placed after it"));
  }
  return spec;
}

// The crop and flip for one element: torchvision's RandomResizedCrop draws,
// then RandomHorizontalFlip's, from the element's seed.
struct CropDraw {
  image::PixelCrop crop;
  bool flip = false;
};

CropDraw DrawCrop(const CropSpec& spec, int height, int width, uint64_t seed) {
  image::Rng rng(seed);
  CropDraw draw;
  draw.crop = image::SampleResizedCrop(height, width, spec.sampling, rng);
  draw.flip = rng.Uniform(0.0, 1.0) < spec.flip_probability;
  return draw;
}

// The largest allowed DCT downscale (1, 2, 4, 8) that keeps `width` x
// `height` source pixels at least `need_width` x `need_height` once scaled.
int ChooseScaleDown(int width, int height, int need_width, int need_height, int max_scale_down) {
  for (int scale = max_scale_down; scale > 1; scale /= 2) {
    if (width >= need_width * scale && height >= need_height * scale) return scale;
  }
  return 1;
}

class JpegDecode final : public MapFunction {
 public:
  JpegDecode(image::JpegDecodeOptions options, int max_scale_down, std::optional<int> target_size,
             std::optional<CropSpec> crop)
      : options_(options), max_scale_down_(max_scale_down), target_size_(target_size), crop_(crop) {}

  Status Apply(Element& element, const FnContext& context) const override {
    if (element.dtype != DType::kBytes || !element.data) {
      return ElementError("jpeg_decode", element,
                          std::string("expects encoded bytes (read_file), got ") + DTypeName(element.dtype));
    }
    Status status = crop_ ? DecodeCropped(element, context.seed) : DecodeWhole(element);
    if (!status.ok()) return ElementError("jpeg_decode", element, status.message());
    return Status::Ok();
  }

 private:
  static Status CheckSize(const image::JpegInfo& info) {
    if (int64_t{info.width} * info.height <= kMaxPixels) return Status::Ok();
    return Failed("the JPEG is " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                  ", more than the 268-megapixel limit");
  }

  Status DecodeWhole(Element& element) const {
    PIPETUNE_ASSIGN_OR_RETURN(image::JpegInfo info,
                              image::ReadJpegInfo(element.data->data(), element.data->size()));
    PIPETUNE_RETURN_IF_ERROR(CheckSize(info));
    image::JpegDecodeOptions options = options_;
    if (target_size_) {
      const int short_side = std::min(info.width, info.height);
      options.scale_down =
          ChooseScaleDown(short_side, short_side, *target_size_, *target_size_, max_scale_down_);
    }
    const int width = image::ScaledDimension(info.width, options.scale_down);
    const int height = image::ScaledDimension(info.height, options.scale_down);
    auto pixels = image::AcquireBuffer(static_cast<size_t>(width) * height * kChannels);
    PIPETUNE_RETURN_IF_ERROR(
        image::DecodeJpeg(element.data->data(), element.data->size(), info, options, pixels->data()));
    SetImage(element, DType::kU8, height, width, std::move(pixels));
    return Status::Ok();
  }

  // Fused decode + random resized crop + flip: the crop is drawn from the
  // header's dimensions (the same draws random_crop_flip makes on the
  // decoded image), and only the window the crop covers is decoded, at the
  // smallest allowed DCT scale whose pixels still cover the crop at >= the
  // output resolution. The window lives in per-thread scratch; the output is
  // the only per-element buffer. The header is read once, by the decode,
  // which asks for the window once it knows the image's size.
  Status DecodeCropped(Element& element, uint64_t seed) const {
    CropDraw draw;
    CropRect rect;
    auto choose = [&](const image::JpegInfo& info) -> StatusOr<image::RegionRequest> {
      PIPETUNE_RETURN_IF_ERROR(CheckSize(info));
      draw = DrawCrop(*crop_, info.height, info.width, seed);
      const int scale_down =
          ChooseScaleDown(draw.crop.width, draw.crop.height, crop_->size, crop_->size, max_scale_down_);
      const double s = 1.0 / scale_down;
      rect = {draw.crop.x * s, draw.crop.y * s, draw.crop.width * s, draw.crop.height * s};
      return image::RegionRequest{scale_down, CoveringPixels(rect)};
    };
    thread_local Bytes window;
    PIPETUNE_ASSIGN_OR_RETURN(
        image::ImageView view,
        image::DecodeJpegRegion(element.data->data(), element.data->size(), options_, choose, window));
    ResampleInto(element, view, rect, crop_->size, crop_->size, draw.flip, crop_->antialias,
                 crop_->normalize);
    if (window.capacity() > (64u << 20)) Bytes().swap(window);  // do not pin a huge image per thread
    return Status::Ok();
  }

  // The whole pixels a fractional rect touches: what ResampleCrop reads.
  static image::PixelCrop CoveringPixels(const CropRect& rect) {
    const int x = static_cast<int>(std::floor(rect.x)), y = static_cast<int>(std::floor(rect.y));
    return {x, y, static_cast<int>(std::ceil(rect.x + rect.width)) - x,
            static_cast<int>(std::ceil(rect.y + rect.height)) - y};
  }

  image::JpegDecodeOptions options_;
  int max_scale_down_;
  std::optional<int> target_size_;
  std::optional<CropSpec> crop_;
};

StatusOr<std::unique_ptr<MapFunction>> MakeJpegDecode(const StageConfig& stage) {
  image::JpegDecodeOptions options;
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<bool> fast_dct, models::ArgBool(stage, "fast_dct"));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<bool> fast_upsample, models::ArgBool(stage, "fast_upsample"));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<bool> strict, models::ArgBool(stage, "strict"));
  options.fast_dct = fast_dct.value_or(false);
  options.fast_upsample = fast_upsample.value_or(false);
  options.strict = strict.value_or(false);

  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> target_size, models::ArgInt(stage, "target_size", 1));
  std::optional<CropSpec> crop;
  if (stage.args.is_object() && stage.args.contains("crop_size")) {
    PIPETUNE_ASSIGN_OR_RETURN(CropSpec spec, ParseCropSpec(stage, "crop_size"));
    crop = spec;
    if (target_size)
      return KeyError(stage, "target_size", "not allowed with crop_size (the crop sets the scale)");
  } else if (stage.args.is_object() && stage.args.contains("normalize")) {
    return KeyError(stage, "normalize",
                    "folds normalize into the crop's resampling: give crop_size too, or normalize in a stage "
                    "of its own");
  }
  // Scaled decode is opt-in: target_size enables it (max_scale_down, default
  // 8, bounds it); with crop_size only an explicit max_scale_down does,
  // because the fused crop's default is to be exact (pixels identical to
  // jpeg_decode then random_crop_flip).
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> max_scale, models::ArgInt(stage, "max_scale_down", 1));
  if (max_scale && *max_scale > 1 && !target_size && !crop) {
    return KeyError(stage, "max_scale_down",
                    "has no effect without a size hint: give target_size (or crop_size) too");
  }
  const int64_t max_scale_down = max_scale.value_or(target_size ? 8 : 1);
  if (max_scale_down != 1 && max_scale_down != 2 && max_scale_down != 4 && max_scale_down != 8) {
    return KeyError(stage, "max_scale_down", "expected 1, 2, 4 or 8, got " + std::to_string(max_scale_down));
  }
  std::optional<int> target;
  if (target_size) target = static_cast<int>(std::min<int64_t>(*target_size, 1 << 20));
  return std::unique_ptr<MapFunction>(
      std::make_unique<JpegDecode>(options, static_cast<int>(max_scale_down), target, crop));
}

class Resize final : public MapFunction {
 public:
  // Either `shorter_side` (aspect kept) or both `height` and `width`.
  Resize(std::optional<int> shorter_side, int height, int width, bool antialias,
         std::optional<image::NormalizeParams> normalize)
      : shorter_side_(shorter_side),
        height_(height),
        width_(width),
        antialias_(antialias),
        normalize_(normalize) {}

  Status Apply(Element& element, const FnContext&) const override {
    PIPETUNE_RETURN_IF_ERROR(CheckU8Image("resize", element));
    const int in_height = element.shape[0], in_width = element.shape[1];
    int height = height_, width = width_;
    if (shorter_side_) {
      // torchvision.transforms.Resize(int): the shorter side becomes `size`,
      // the longer one int(size * long / short).
      const int size = *shorter_side_;
      if (in_height <= in_width) {
        height = size;
        width = static_cast<int>(std::clamp<int64_t>(int64_t{size} * in_width / in_height, 1, kMaxPixels));
      } else {
        width = size;
        height = static_cast<int>(std::clamp<int64_t>(int64_t{size} * in_height / in_width, 1, kMaxPixels));
      }
    }
    if (int64_t{height} * width > kMaxPixels) {
      return ElementError("resize", element,
                          "the output would be " + std::to_string(width) + "x" + std::to_string(height) +
                              ", more than the 268-megapixel limit");
    }
    ResampleInto(element, ViewOf(element), CropRect{0, 0, double(in_width), double(in_height)}, height, width,
                 /*flip=*/false, antialias_, normalize_);
    return Status::Ok();
  }

 private:
  std::optional<int> shorter_side_;
  int height_, width_;
  bool antialias_;
  std::optional<image::NormalizeParams> normalize_;
};

StatusOr<std::unique_ptr<MapFunction>> MakeResize(const StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> size, models::ArgInt(stage, "size", 1));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> height, models::ArgInt(stage, "height", 1));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> width, models::ArgInt(stage, "width", 1));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<bool> antialias, models::ArgBool(stage, "antialias"));
  if (size && (height || width)) {
    return KeyError(stage, "size", "give either size (shorter side) or height and width, not both");
  }
  if (!size && !(height && width)) {
    return KeyError(stage, height ? "width" : (width ? "height" : "size"),
                    "required: size (the shorter side, aspect kept) or both height and width");
  }
  for (const auto& [key, value] : {std::pair{"size", size}, {"height", height}, {"width", width}}) {
    if (value && *value > kMaxSide)
      return KeyError(stage, key, "expected at most 16384, got " + std::to_string(*value));
  }
  std::optional<int> shorter;
  if (size) shorter = static_cast<int>(*size);
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<image::NormalizeParams> normalize, ParseFoldedNormalize(stage));
  return std::unique_ptr<MapFunction>(std::make_unique<Resize>(shorter, static_cast<int>(height.value_or(0)),
                                                               static_cast<int>(width.value_or(0)),
                                                               antialias.value_or(true), normalize));
}

// torchvision.transforms.CenterCrop: the window's offset on each axis is
// round((side - crop) / 2) with Python's round (half to even); an image
// smaller than the crop is first padded with zeros, (crop - side) // 2
// before and the rest after, so the offset is then minus that.
class CenterCrop final : public MapFunction {
 public:
  CenterCrop(int height, int width) : height_(height), width_(width) {}

  Status Apply(Element& element, const FnContext&) const override {
    PIPETUNE_RETURN_IF_ERROR(CheckU8Image("center_crop", element));
    const int in_height = element.shape[0], in_width = element.shape[1];
    const int top = Offset(in_height, height_), left = Offset(in_width, width_);
    auto out = image::AcquireBuffer(static_cast<size_t>(height_) * width_ * kChannels);
    // The window's columns that fall on the image; the rest stay zero.
    const int x0 = std::max(0, -left), x1 = std::min(width_, in_width - left);
    const uint8_t* in = element.data->data();
    for (int y = 0; y < height_; ++y) {
      uint8_t* row = out->data() + static_cast<size_t>(y) * width_ * kChannels;
      const int source_y = y + top;
      if (source_y < 0 || source_y >= in_height || x1 <= x0) {
        std::fill(row, row + static_cast<size_t>(width_) * kChannels, uint8_t{0});
        continue;
      }
      std::fill(row, row + static_cast<size_t>(x0) * kChannels, uint8_t{0});
      std::copy_n(in + (static_cast<size_t>(source_y) * in_width + x0 + left) * kChannels,
                  static_cast<size_t>(x1 - x0) * kChannels, row + static_cast<size_t>(x0) * kChannels);
      std::fill(row + static_cast<size_t>(x1) * kChannels, row + static_cast<size_t>(width_) * kChannels,
                uint8_t{0});
    }
    SetImage(element, DType::kU8, height_, width_, std::move(out));
    return Status::Ok();
  }

 private:
  static int Offset(int side, int crop) {
    if (crop > side) return -((crop - side) / 2);
    return static_cast<int>(std::nearbyint((side - crop) / 2.0));  // ties to even, as Python's round
  }

  int height_, width_;
};

StatusOr<std::unique_ptr<MapFunction>> MakeCenterCrop(const StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> size, models::ArgInt(stage, "size", 1));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> height, models::ArgInt(stage, "height", 1));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<int64_t> width, models::ArgInt(stage, "width", 1));
  if (size && (height || width)) {
    return KeyError(stage, "size", "give either size (a square) or height and width, not both");
  }
  if (!size && !(height && width)) {
    return KeyError(stage, height ? "width" : (width ? "height" : "size"),
                    "required: size (a square's side) or both height and width");
  }
  for (const auto& [key, value] : {std::pair{"size", size}, {"height", height}, {"width", width}}) {
    if (value && *value > kMaxSide)
      return KeyError(stage, key, "expected at most 16384, got " + std::to_string(*value));
  }
  const int h = static_cast<int>(size ? *size : *height), w = static_cast<int>(size ? *size : *width);
  return std::unique_ptr<MapFunction>(std::make_unique<CenterCrop>(h, w));
}

class RandomCropFlip final : public MapFunction {
 public:
  explicit RandomCropFlip(CropSpec spec) : spec_(spec) {}

  Status Apply(Element& element, const FnContext& context) const override {
    PIPETUNE_RETURN_IF_ERROR(CheckU8Image("random_crop_flip", element));
    const CropDraw draw = DrawCrop(spec_, element.shape[0], element.shape[1], context.seed);
    const CropRect rect{double(draw.crop.x), double(draw.crop.y), double(draw.crop.width),
                        double(draw.crop.height)};
    ResampleInto(element, ViewOf(element), rect, spec_.size, spec_.size, draw.flip, spec_.antialias,
                 spec_.normalize);
    return Status::Ok();
  }

 private:
  CropSpec spec_;
};

StatusOr<std::unique_ptr<MapFunction>> MakeRandomCropFlip(const StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(CropSpec spec, ParseCropSpec(stage, "size"));
  return std::unique_ptr<MapFunction>(std::make_unique<RandomCropFlip>(spec));
}

class Normalize final : public MapFunction {
 public:
  explicit Normalize(image::NormalizeParams params) : params_(params) {}

  Status Apply(Element& element, const FnContext&) const override {
    PIPETUNE_RETURN_IF_ERROR(CheckU8Image("normalize", element));
    const int height = element.shape[0], width = element.shape[1];
    auto out = image::AcquireBuffer(static_cast<size_t>(height) * width * kChannels * sizeof(float));
    // operator new aligns the buffer for any scalar type, float included.
    image::NormalizeToFloat(element.data->data(), height, width, params_,
                            reinterpret_cast<float*>(out->data()));
    SetImage(element, DType::kF32, height, width, std::move(out));
    return Status::Ok();
  }

 private:
  image::NormalizeParams params_;
};

StatusOr<std::unique_ptr<MapFunction>> MakeNormalize(const StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(image::NormalizeParams params, ParseNormalize(stage, stage.args, ""));
  return std::unique_ptr<MapFunction>(std::make_unique<Normalize>(params));
}

}  // namespace

void RegisterImageFunctions(FunctionRegistry& registry) {
  registry.RegisterMap("jpeg_decode", MakeJpegDecode);
  registry.RegisterMap("resize", MakeResize);
  registry.RegisterMap("center_crop", MakeCenterCrop);
  registry.RegisterMap("random_crop_flip", MakeRandomCropFlip);
  registry.RegisterMap("normalize", MakeNormalize);
  // normalize after a resampling function: folded into its output loop
  // (ParseFoldedNormalize), unless the function already normalizes, the
  // decode is not the cropped one, or normalize has args the fold does not
  // take (then it stays a step of its own and says what is wrong).
  auto fold_normalize = [](bool needs_crop) {
    return [needs_crop](const Json& first, const Json& second) -> std::optional<Json> {
      if (!first.is_object() || first.contains("normalize")) return std::nullopt;
      if (needs_crop && !first.contains("crop_size")) return std::nullopt;
      if (!second.is_object()) return std::nullopt;
      for (const auto& [key, unused] : second.items()) {
        if (key != "mean" && key != "std" && key != "layout") return std::nullopt;
      }
      Json folded = first;
      folded["normalize"] = second;
      return folded;
    };
  };
  registry.RegisterChainFold("jpeg_decode", "normalize", fold_normalize(/*needs_crop=*/true));
  registry.RegisterChainFold("random_crop_flip", "normalize", fold_normalize(false));
  registry.RegisterChainFold("resize", "normalize", fold_normalize(false));
}

}  // namespace pipetune::runtime
