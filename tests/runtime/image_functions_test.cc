// The image element functions as a pipeline stage sees them: built by name
// from a stage config, applied to elements.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"
#include "pipetune/runtime/function_registry.h"

namespace pipetune::runtime {
namespace {

using ::testing::HasSubstr;

models::StageConfig Stage(const std::string& fn, Json args, bool random = false) {
  models::StageConfig stage;
  stage.name = "augment";
  stage.index = 3;
  stage.op = models::Op::kMap;
  stage.fn = fn;
  stage.args = std::move(args);
  stage.random = random;
  return stage;
}

const FunctionRegistry& ImageRegistry() {
  static const FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    RegisterImageFunctions(*r);
    return r;
  }();
  return *registry;
}

std::unique_ptr<MapFunction> Make(const std::string& fn, Json args, bool random = false) {
  auto made = ImageRegistry().MakeMap(Stage(fn, std::move(args), random));
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(made).value() : nullptr;
}

Status MakeError(const std::string& fn, Json args, bool random = true) {
  auto made = ImageRegistry().MakeMap(Stage(fn, std::move(args), random));
  return made.ok() ? Status::Ok() : made.status();
}

// An RGB image whose pixel (x, y) is pixel(x, y).
template <typename PixelFn>
std::vector<uint8_t> Render(int width, int height, PixelFn pixel) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const std::array<uint8_t, 3> p = pixel(x, y);
      std::copy(p.begin(), p.end(), &rgb[(static_cast<size_t>(y) * width + x) * 3]);
    }
  }
  return rgb;
}

std::vector<uint8_t> EncodeJpeg(const std::vector<uint8_t>& rgb, int width, int height, int quality = 95) {
  tjhandle encoder = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(
      tjCompress2(encoder, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, quality, 0), 0);
  std::vector<uint8_t> bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(encoder);
  return bytes;
}

Element BytesElement(std::vector<uint8_t> bytes, uint64_t id = 7, std::string path = "data/img_7.jpg") {
  Element element;
  element.id = id;
  element.path = std::move(path);
  element.dtype = DType::kBytes;
  element.data = std::make_shared<const Bytes>(std::move(bytes));
  return element;
}

Element ImageElement(const std::vector<uint8_t>& rgb, int width, int height) {
  Element element;
  element.id = 3;
  element.dtype = DType::kU8;
  element.shape = {height, width, 3};
  element.data = std::make_shared<const Bytes>(rgb);
  return element;
}

// Quadrants: red, green / blue, white.
std::array<uint8_t, 3> Quadrants(int x, int y, int width, int height) {
  const bool right = x >= width / 2, bottom = y >= height / 2;
  if (!bottom) return right ? std::array<uint8_t, 3>{20, 200, 30} : std::array<uint8_t, 3>{210, 25, 20};
  return right ? std::array<uint8_t, 3>{240, 240, 240} : std::array<uint8_t, 3>{25, 30, 220};
}

// A smooth, asymmetric image: every pixel different from its mirror image.
std::array<uint8_t, 3> Smooth(int x, int y) {
  return {static_cast<uint8_t>(x % 256), static_cast<uint8_t>((y * 2) % 256),
          static_cast<uint8_t>((x + 3 * y) % 256)};
}

Element Apply(const MapFunction& fn, Element element, uint64_t seed = 1) {
  Status status = fn.Apply(element, FnContext{seed});
  EXPECT_TRUE(status.ok()) << status.message();
  return element;
}

TEST(JpegDecodeTest, DecodesSizeAndColours) {
  const int width = 64, height = 48;
  auto jpeg = EncodeJpeg(Render(width, height, [&](int x, int y) { return Quadrants(x, y, width, height); }),
                         width, height);
  auto decode = Make("jpeg_decode", Json::object());
  Element out = Apply(*decode, BytesElement(jpeg));
  EXPECT_EQ(out.dtype, DType::kU8);
  EXPECT_EQ(out.shape, (std::array<int32_t, 3>{height, width, 3}));
  EXPECT_EQ(out.id, 7u);
  EXPECT_EQ(out.path, "data/img_7.jpg");
  ASSERT_EQ(out.data->size(), static_cast<size_t>(width * height * 3));
  // Centres of the quadrants keep their colour within JPEG error.
  for (auto [x, y] : {std::pair{8, 8}, {56, 8}, {8, 40}, {56, 40}}) {
    const auto want = Quadrants(x, y, width, height);
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR((*out.data)[(y * width + x) * 3 + c], want[c], 12) << x << "," << y << " channel " << c;
    }
  }
}

TEST(JpegDecodeTest, GreyscaleComesOutAsRgb) {
  std::vector<uint8_t> grey(40 * 30, 90);
  tjhandle encoder = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(encoder, grey.data(), 40, 0, 30, TJPF_GRAY, &jpeg, &size, TJSAMP_GRAY, 95, 0), 0);
  std::vector<uint8_t> bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(encoder);
  Element out = Apply(*Make("jpeg_decode", Json::object()), BytesElement(bytes));
  EXPECT_EQ(out.shape, (std::array<int32_t, 3>{30, 40, 3}));
  for (uint8_t v : *out.data) ASSERT_NEAR(v, 90, 2);
}

TEST(JpegDecodeTest, CorruptBytesNameTheElementAndLibjpegError) {
  auto decode = Make("jpeg_decode", Json::object());
  Element junk = BytesElement({'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'}, 42, "data/broken.jpg");
  Status status = decode->Apply(junk, FnContext{1});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("jpeg_decode"));
  EXPECT_THAT(status.message(), HasSubstr("element 42"));
  EXPECT_THAT(status.message(), HasSubstr("data/broken.jpg"));
  EXPECT_THAT(status.message(), HasSubstr("libjpeg"));

  // A truncated file decodes partially in libjpeg; like Pillow, we refuse it.
  auto jpeg = EncodeJpeg(Render(256, 256, Smooth), 256, 256);
  jpeg.resize(jpeg.size() * 2 / 3);
  Element truncated = BytesElement(jpeg);
  status = decode->Apply(truncated, FnContext{1});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("Premature end"));

  Element empty = BytesElement({});
  EXPECT_FALSE(decode->Apply(empty, FnContext{1}).ok());
  Element image = ImageElement(Render(4, 4, Smooth), 4, 4);
  status = decode->Apply(image, FnContext{1});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("expects encoded bytes"));
}

TEST(JpegDecodeTest, TargetSizeDecodesAtTheSmallestCoveringDctScale) {
  auto jpeg = EncodeJpeg(Render(256, 192, Smooth), 256, 192);
  // Shorter side 192: 1/2 gives 96 >= 64, 1/4 would give 48 < 64.
  Element half = Apply(*Make("jpeg_decode", {{"target_size", 64}}), BytesElement(jpeg));
  EXPECT_EQ(half.shape, (std::array<int32_t, 3>{96, 128, 3}));
  Element eighth = Apply(*Make("jpeg_decode", {{"target_size", 24}}), BytesElement(jpeg));
  EXPECT_EQ(eighth.shape, (std::array<int32_t, 3>{24, 32, 3}));
  Element capped =
      Apply(*Make("jpeg_decode", {{"target_size", 24}, {"max_scale_down", 2}}), BytesElement(jpeg));
  EXPECT_EQ(capped.shape, (std::array<int32_t, 3>{96, 128, 3}));
}

TEST(JpegDecodeTest, FusedCropEqualsDecodeThenRandomCropFlip) {
  auto jpeg = EncodeJpeg(Render(160, 120, Smooth), 160, 120);
  auto fused = Make("jpeg_decode", {{"crop_size", 48}, {"max_scale_down", 1}}, /*random=*/true);
  auto decode = Make("jpeg_decode", Json::object());
  auto crop = Make("random_crop_flip", {{"size", 48}}, /*random=*/true);
  for (uint64_t seed : {1, 2, 3, 99}) {
    Element one = Apply(*fused, BytesElement(jpeg), seed);
    Element two = Apply(*crop, Apply(*decode, BytesElement(jpeg)), seed);
    EXPECT_EQ(one.shape, (std::array<int32_t, 3>{48, 48, 3}));
    EXPECT_EQ(*one.data, *two.data) << "seed " << seed;
  }
}

TEST(JpegDecodeTest, FusedCropWithScaledDecodeStaysClose) {
  // 640x480 source, 32 px output: most crops allow a 1/2..1/8 DCT scale.
  const int width = 640, height = 480;
  auto jpeg = EncodeJpeg(Render(width, height,
                                [](int x, int y) {
                                  return std::array<uint8_t, 3>{static_cast<uint8_t>(x * 255 / 640),
                                                                static_cast<uint8_t>(y * 255 / 480), 128};
                                }),
                         width, height);
  auto scaled = Make("jpeg_decode", {{"crop_size", 32}, {"max_scale_down", 8}}, /*random=*/true);
  auto exact = Make("jpeg_decode", {{"crop_size", 32}}, /*random=*/true);  // exact is the default
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Element a = Apply(*scaled, BytesElement(jpeg), seed);
    Element b = Apply(*exact, BytesElement(jpeg), seed);
    double total = 0;
    for (size_t i = 0; i < a.data->size(); ++i) total += std::abs(int((*a.data)[i]) - int((*b.data)[i]));
    EXPECT_LT(total / a.data->size(), 3.0) << "seed " << seed;
  }
}

// normalize folded into the crop's resampling (the `normalize` arg, and a
// chain of the two, which folds them): the same floats as the two functions
// one after the other, in both layouts, with default and given mean/std.
TEST(JpegDecodeTest, FoldedNormalizeEqualsCropThenNormalize) {
  auto jpeg = EncodeJpeg(Render(160, 120, Smooth), 160, 120);
  auto fused = Make("jpeg_decode", {{"crop_size", 48}}, /*random=*/true);
  for (const Json& args :
       {Json::object(), Json{{"mean", {0.5, 0.4, 0.3}}, {"std", {0.2, 0.3, 0.4}}}, Json{{"layout", "chw"}}}) {
    auto normalize = Make("normalize", args);
    auto folded = Make("jpeg_decode", {{"crop_size", 48}, {"normalize", args}}, /*random=*/true);
    Json chain = {
        {"steps",
         {{{"fn", "jpeg_decode"}, {"args", {{"crop_size", 48}}}}, {{"fn", "normalize"}, {"args", args}}}}};
    auto chained = Make("chain", chain, /*random=*/true);
    for (uint64_t seed : {1, 2, 3, 99}) {
      const Element two = Apply(*normalize, Apply(*fused, BytesElement(jpeg), seed));
      for (const MapFunction* one : {folded.get(), chained.get()}) {
        const Element out = Apply(*one, BytesElement(jpeg), seed);
        EXPECT_EQ(out.dtype, DType::kF32);
        EXPECT_EQ(out.shape, two.shape);
        EXPECT_EQ(*out.data, *two.data) << args.dump() << " seed " << seed;
      }
    }
  }
  // random_crop_flip and resize take the same arg.
  const auto rgb = Render(90, 70, Smooth);
  const Element crop_then =
      Apply(*Make("normalize", Json::object()),
            Apply(*Make("random_crop_flip", {{"size", 32}}, true), ImageElement(rgb, 90, 70)));
  const Element crop_folded =
      Apply(*Make("random_crop_flip", {{"size", 32}, {"normalize", true}}, true), ImageElement(rgb, 90, 70));
  EXPECT_EQ(*crop_folded.data, *crop_then.data);
  const Element resize_then = Apply(*Make("normalize", Json::object()),
                                    Apply(*Make("resize", {{"size", 40}}), ImageElement(rgb, 90, 70)));
  const Element resize_folded =
      Apply(*Make("resize", {{"size", 40}, {"normalize", true}}), ImageElement(rgb, 90, 70));
  EXPECT_EQ(*resize_folded.data, *resize_then.data);
}

TEST(RandomCropFlipTest, ShapeAndDeterminismBySeed) {
  const int width = 300, height = 200;
  auto rgb = Render(width, height, Smooth);
  auto crop = Make("random_crop_flip", {{"size", 224}}, /*random=*/true);
  Element a = Apply(*crop, ImageElement(rgb, width, height), 11);
  Element b = Apply(*crop, ImageElement(rgb, width, height), 11);
  Element c = Apply(*crop, ImageElement(rgb, width, height), 12);
  EXPECT_EQ(a.dtype, DType::kU8);
  EXPECT_EQ(a.shape, (std::array<int32_t, 3>{224, 224, 3}));
  EXPECT_EQ(a.id, 3u);
  EXPECT_EQ(*a.data, *b.data);
  EXPECT_NE(*a.data, *c.data);
}

TEST(RandomCropFlipTest, SameOutputFromConcurrentWorkers) {
  auto rgb = Render(120, 90, Smooth);
  auto crop = Make("random_crop_flip", {{"size", 40}}, /*random=*/true);
  std::vector<Bytes> expected;
  for (uint64_t seed = 0; seed < 32; ++seed)
    expected.push_back(*Apply(*crop, ImageElement(rgb, 120, 90), seed).data);
  std::vector<std::thread> workers;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      for (uint64_t seed = 0; seed < 32; ++seed) {
        Element e = ImageElement(rgb, 120, 90);
        if (!crop->Apply(e, FnContext{(seed + t * 7) % 32}).ok() ||
            *e.data != expected[(seed + t * 7) % 32]) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(RandomCropFlipTest, FlipMirrorsTheImage) {
  const int width = 80, height = 60;
  auto rgb = Render(width, height, Smooth);
  // scale and ratio pinned to the whole image: the crop is the image itself.
  Json args = {{"size", 50}, {"scale", {1.0, 1.0}}, {"ratio", {4.0 / 3.0, 4.0 / 3.0}}};
  Json flipped_args = args, plain_args = args;
  flipped_args["flip_probability"] = 1.0;
  plain_args["flip_probability"] = 0.0;
  Element flipped = Apply(*Make("random_crop_flip", flipped_args, true), ImageElement(rgb, width, height), 5);
  Element plain = Apply(*Make("random_crop_flip", plain_args, true), ImageElement(rgb, width, height), 5);
  ASSERT_EQ(flipped.shape, plain.shape);
  const auto& f = *flipped.data;
  const auto& p = *plain.data;
  EXPECT_NE(f, p);
  for (int y = 0; y < 50; ++y) {
    for (int x = 0; x < 50; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(f[(y * 50 + x) * 3 + c], p[(y * 50 + 49 - x) * 3 + c]);
    }
  }
}

TEST(RandomCropFlipTest, FlipsAboutHalfTheElements) {
  // Each pixel's red value is its x: a 2x2 output without antialias samples
  // a quarter and three quarters across the crop, so a flipped output has
  // its left pixel redder than its right one.
  const int width = 250, height = 200;
  auto coords = Render(width, height, [](int x, int y) {
    return std::array<uint8_t, 3>{static_cast<uint8_t>(x), static_cast<uint8_t>(y), 0};
  });
  auto probe = Make("random_crop_flip", {{"size", 2}, {"antialias", false}}, true);
  int flips = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Element out = Apply(*probe, ImageElement(coords, width, height), seed);
    flips += (*out.data)[0] > (*out.data)[3];
  }
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
}

TEST(ResizeTest, ConstantImageStaysConstant) {
  auto rgb = Render(97, 61, [](int, int) { return std::array<uint8_t, 3>{17, 130, 251}; });
  for (bool antialias : {true, false}) {
    for (Json args : {Json{{"size", 40}}, Json{{"height", 200}, {"width", 33}}}) {
      args["antialias"] = antialias;
      Element out = Apply(*Make("resize", args), ImageElement(rgb, 97, 61));
      for (size_t i = 0; i < out.data->size(); i += 3) {
        ASSERT_EQ((*out.data)[i], 17);
        ASSERT_EQ((*out.data)[i + 1], 130);
        ASSERT_EQ((*out.data)[i + 2], 251);
      }
    }
  }
}

TEST(ResizeTest, SizeSetsTheShorterSide) {
  auto rgb = Render(100, 50, Smooth);
  EXPECT_EQ(Apply(*Make("resize", {{"size", 20}}), ImageElement(rgb, 100, 50)).shape,
            (std::array<int32_t, 3>{20, 40, 3}));
  EXPECT_EQ(Apply(*Make("resize", {{"height", 7}, {"width", 9}}), ImageElement(rgb, 100, 50)).shape,
            (std::array<int32_t, 3>{7, 9, 3}));
  // Downscaling by 2 with antialias averages 2x2 blocks (4 taps each way).
  auto stripes = Render(8, 8, [](int x, int) {
    return std::array<uint8_t, 3>{uint8_t(x % 2 ? 200 : 0), 0, 0};
  });
  Element half = Apply(*Make("resize", {{"size", 4}}), ImageElement(stripes, 8, 8));
  // Away from the edges (where the filter is cut off at the image border):
  for (int y = 0; y < 4; ++y) {
    for (int x = 1; x < 3; ++x) EXPECT_NEAR((*half.data)[(y * 4 + x) * 3], 100, 1);
  }
}

TEST(NormalizeTest, MapsToFloatWithMeanAndStd) {
  const int width = 5, height = 3;
  auto rgb = Render(width, height, [](int x, int y) {
    return std::array<uint8_t, 3>{uint8_t(x * 50), uint8_t(y * 100), uint8_t(255 - x * 10)};
  });
  const float mean[3] = {0.5f, 0.25f, 0.0f}, std[3] = {0.5f, 0.25f, 1.0f};
  Json args = {{"mean", {0.5, 0.25, 0.0}}, {"std", {0.5, 0.25, 1.0}}};
  Element hwc = Apply(*Make("normalize", args), ImageElement(rgb, width, height));
  args["layout"] = "chw";
  Element chw = Apply(*Make("normalize", args), ImageElement(rgb, width, height));
  for (const Element* e : {&hwc, &chw}) {
    EXPECT_EQ(e->dtype, DType::kF32);
    EXPECT_EQ(e->shape, (std::array<int32_t, 3>{height, width, 3}));
    ASSERT_EQ(e->data->size(), rgb.size() * sizeof(float));
  }
  const float* h = reinterpret_cast<const float*>(hwc.data->data());
  const float* c = reinterpret_cast<const float*>(chw.data->data());
  for (int p = 0; p < width * height; ++p) {
    for (int ch = 0; ch < 3; ++ch) {
      const float want = (rgb[p * 3 + ch] / 255.0f - mean[ch]) / std[ch];
      EXPECT_NEAR(h[p * 3 + ch], want, 1e-5f);
      EXPECT_NEAR(c[ch * width * height + p], want, 1e-5f);
    }
  }
  // Defaults: ImageNet mean and std.
  Element imagenet = Apply(*Make("normalize", Json::object()), ImageElement(rgb, width, height));
  EXPECT_NEAR(reinterpret_cast<const float*>(imagenet.data->data())[0], (0 - 0.485f) / 0.229f, 1e-5f);
}

TEST(ImageFunctionArgsTest, BadArgsNameStageAndKey) {
  struct Case {
    std::string fn;
    Json args;
    std::string key;
  };
  const std::vector<Case> cases = {
      {"random_crop_flip", {{"size", 0}}, "args.size"},
      {"random_crop_flip", Json::object(), "args.size"},
      {"random_crop_flip", {{"size", "224"}}, "args.size"},
      {"random_crop_flip", {{"size", 224}, {"scale", {0.5, 0.2}}}, "args.scale"},
      {"random_crop_flip", {{"size", 224}, {"ratio", {1.0}}}, "args.ratio"},
      {"random_crop_flip", {{"size", 224}, {"flip_probability", 2}}, "args.flip_probability"},
      {"resize", Json::object(), "args.size"},
      {"resize", {{"height", 10}}, "args.width"},
      {"resize", {{"size", 10}, {"width", 10}}, "args.size"},
      {"normalize", {{"mean", {0.5, 0.5}}}, "args.mean"},
      {"normalize", {{"std", {0.5, 0.0, 0.5}}}, "args.std"},
      {"normalize", {{"layout", "nchw"}}, "args.layout"},
      {"jpeg_decode", {{"max_scale_down", 3}}, "args.max_scale_down"},
      {"jpeg_decode", {{"max_scale_down", 4}}, "args.max_scale_down"},  // no size hint: would do nothing
      {"random_crop_flip", {{"size", 100000}}, "args.size"},
      {"jpeg_decode", {{"crop_size", 0}}, "args.crop_size"},
      {"jpeg_decode", {{"fast_dct", "yes"}}, "args.fast_dct"},
      {"jpeg_decode", {{"normalize", true}}, "args.normalize"},  // folds into the crop: needs crop_size
      {"jpeg_decode", {{"crop_size", 224}, {"normalize", {{"std", {1, 0, 1}}}}}, "args.normalize.std"},
      {"random_crop_flip", {{"size", 224}, {"normalize", {{"mean", 1}}}}, "args.normalize.mean"},
      {"random_crop_flip", {{"size", 224}, {"normalize", {{"scale", 1}}}}, "args.normalize.scale"},
      {"resize", {{"size", 10}, {"normalize", "yes"}}, "args.normalize"},
      {"resize", {{"size", 10}, {"normalize", {{"layout", "nchw"}}}}, "args.normalize.layout"},
  };
  for (const Case& c : cases) {
    Status status = MakeError(c.fn, c.args);
    ASSERT_FALSE(status.ok()) << c.fn << " " << c.args.dump();
    EXPECT_EQ(status.code(), StatusCode::kInvalidInput);
    EXPECT_THAT(status.message(), HasSubstr("\"augment\"")) << status.message();
    EXPECT_THAT(status.message(), HasSubstr(c.key)) << status.message();
  }
}

TEST(ImageFunctionArgsTest, RandomCropNeedsARandomStage) {
  Status status = MakeError("random_crop_flip", {{"size", 224}}, /*random=*/false);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("\"random\""));
  EXPECT_FALSE(MakeError("jpeg_decode", {{"crop_size", 224}}, /*random=*/false).ok());
}

TEST(ImageFunctionsTest, WrongInputTypesAreElementErrors) {
  Element bytes = BytesElement({1, 2, 3});
  for (const char* fn : {"resize", "normalize"}) {
    Json args = std::string(fn) == "resize" ? Json{{"size", 8}} : Json::object();
    Status status = Make(fn, args)->Apply(bytes, FnContext{1});
    ASSERT_FALSE(status.ok());
    EXPECT_THAT(status.message(), HasSubstr(fn));
    EXPECT_THAT(status.message(), HasSubstr("element 7"));
  }
}

}  // namespace
}  // namespace pipetune::runtime
