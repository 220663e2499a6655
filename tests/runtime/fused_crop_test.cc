// The fused decode-and-crop (jpeg_decode with crop_size) against the
// separate ops it replaces (jpeg_decode, then random_crop_flip with the same
// seed): it decodes only the crop's window, and its output must be the same
// bytes for every crop, subsampling and decoder option, so that the tuner
// can swap one for the other without changing what a model trains on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"
#include "pipetune/runtime/function_registry.h"

// A named namespace: the unity build puts every test file in one translation
// unit, where anonymous namespaces would share names.
namespace pipetune::runtime::fused_crop_test {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<MapFunction> Make(const std::string& fn, Json args, bool random) {
  models::StageConfig stage;
  stage.name = "decode";
  stage.op = models::Op::kMap;
  stage.fn = fn;
  stage.args = std::move(args);
  stage.random = random;
  FunctionRegistry registry;
  RegisterImageFunctions(registry);
  auto made = registry.MakeMap(stage);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(made).value() : nullptr;
}

// Texture in which every row differs from the next and every column from
// the next (checked below on the decoded pixels), so a window off by one row
// or column changes the output: a smooth gradient plus hashed noise.
std::vector<uint8_t> Texture(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint32_t h = static_cast<uint32_t>(x) * 73856093u ^ static_cast<uint32_t>(y) * 19349663u;
      h = (h ^ (h >> 13)) * 0x5bd1e995u;
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 200 / width + (h & 31));
      p[1] = static_cast<uint8_t>(y * 200 / height + ((h >> 8) & 31));
      p[2] = static_cast<uint8_t>(((x + y) * 2) + ((h >> 16) & 63));
    }
  }
  return rgb;
}

struct Encoding {
  int width, height;
  int subsampling;  // TJSAMP_*
  int flags;        // TJFLAG_PROGRESSIVE or 0
};

std::vector<uint8_t> Encode(const Encoding& e) {
  std::vector<uint8_t> rgb = Texture(e.width, e.height);
  std::vector<uint8_t> grey;
  int format = TJPF_RGB;
  if (e.subsampling == TJSAMP_GRAY) {
    grey.resize(static_cast<size_t>(e.width) * e.height);
    for (size_t i = 0; i < grey.size(); ++i) grey[i] = rgb[3 * i];
    format = TJPF_GRAY;
  }
  tjhandle encoder = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(encoder, grey.empty() ? rgb.data() : grey.data(), e.width, 0, e.height, format, &jpeg,
                        &size, e.subsampling, 90, e.flags),
            0);
  std::vector<uint8_t> bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(encoder);
  return bytes;
}

Element Jpeg(const std::vector<uint8_t>& bytes) {
  Element element;
  element.id = 11;
  element.path = "data/img_11.jpg";
  element.dtype = DType::kBytes;
  element.data = std::make_shared<const Bytes>(bytes);
  return element;
}

Element Apply(const MapFunction& fn, Element element, uint64_t seed) {
  Status status = fn.Apply(element, FnContext{seed});
  EXPECT_TRUE(status.ok()) << status.message();
  return element;
}

// Adjacent rows and columns of the decoded image differ: the comparison
// below would notice a window shifted by one pixel.
void ExpectNoRepeatedRowOrColumn(const Element& decoded) {
  const int height = decoded.shape[0], width = decoded.shape[1];
  const uint8_t* p = decoded.data->data();
  int same_rows = 0, same_columns = 0;
  for (int y = 0; y + 1 < height; ++y)
    same_rows += std::equal(p + y * width * 3, p + (y + 1) * width * 3, p + (y + 1) * width * 3);
  for (int x = 0; x + 1 < width; ++x) {
    bool same = true;
    for (int y = 0; y < height && same; ++y) {
      for (int c = 0; c < 3; ++c) same = same && p[(y * width + x) * 3 + c] == p[(y * width + x + 1) * 3 + c];
    }
    same_columns += same;
  }
  EXPECT_EQ(same_rows, 0);
  EXPECT_EQ(same_columns, 0);
}

class FusedCropTest : public ::testing::TestWithParam<Encoding> {};

TEST_P(FusedCropTest, SameBytesAsDecodeThenRandomCropFlip) {
  const std::vector<uint8_t> jpeg = Encode(GetParam());
  const Json options[] = {Json::object(), {{"fast_upsample", true}}, {{"fast_dct", true}}};
  for (const Json& decoder : options) {
    Json fused_args = decoder;
    fused_args["crop_size"] = 64;
    auto fused = Make("jpeg_decode", fused_args, /*random=*/true);
    auto decode = Make("jpeg_decode", decoder, /*random=*/false);
    auto crop = Make("random_crop_flip", {{"size", 64}}, /*random=*/true);
    const Element whole = Apply(*decode, Jpeg(jpeg), 0);
    ExpectNoRepeatedRowOrColumn(whole);
    int mismatches = 0;
    for (uint64_t seed = 1; seed <= 120; ++seed) {
      const Element one = Apply(*fused, Jpeg(jpeg), seed);
      const Element two = Apply(*crop, whole, seed);
      ASSERT_EQ(one.shape, two.shape);
      if (*one.data != *two.data) {
        ++mismatches;
        ADD_FAILURE() << "seed " << seed << ", decoder args " << decoder.dump();
        if (mismatches > 3) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, FusedCropTest,
                         ::testing::Values(Encoding{500, 375, TJSAMP_420, 0},  // ImageNet-like
                                           Encoding{333, 500, TJSAMP_420, 0},  // portrait
                                           Encoding{161, 97, TJSAMP_420, 0},   // no whole MCUs
                                           Encoding{203, 150, TJSAMP_422, 0},
                                           Encoding{190, 141, TJSAMP_444, 0},
                                           Encoding{150, 113, TJSAMP_GRAY, 0},
                                           Encoding{301, 227, TJSAMP_420, TJFLAG_PROGRESSIVE}));

TEST(FusedCropErrorsTest, TruncationIsAnErrorWhereverTheCropIs) {
  std::vector<uint8_t> jpeg = Encode({256, 256, TJSAMP_420, 0});
  jpeg.resize(jpeg.size() * 9 / 10);  // the last rows are gone; most crops never reach them
  auto fused = Make("jpeg_decode", {{"crop_size", 32}}, /*random=*/true);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Element element = Jpeg(jpeg);
    Status status = fused->Apply(element, FnContext{seed});
    ASSERT_FALSE(status.ok()) << "seed " << seed;
    EXPECT_THAT(status.message(), HasSubstr("element 11"));
    EXPECT_THAT(status.message(), HasSubstr("Premature end"));
  }
  Element junk = Jpeg({'n', 'o', 't', ' ', 'j', 'p', 'e', 'g'});
  EXPECT_THAT(fused->Apply(junk, FnContext{1}).message(), HasSubstr("not a JPEG"));
}

TEST(FusedCropErrorsTest, AGoodImageAfterABadOneDecodes) {
  // libjpeg's error path leaves the per-thread decompressor mid-way; the
  // next image must not inherit that.
  const std::vector<uint8_t> good = Encode({120, 90, TJSAMP_420, 0});
  std::vector<uint8_t> bad = good;
  for (size_t i = bad.size() / 3; i < bad.size() / 3 + 64; ++i) bad[i] = 0xFF;  // markers inside the scan
  auto fused = Make("jpeg_decode", {{"crop_size", 32}, {"strict", true}}, /*random=*/true);
  Element broken = Jpeg(bad);
  EXPECT_FALSE(fused->Apply(broken, FnContext{3}).ok());
  Element out = Apply(*fused, Jpeg(good), 3);
  EXPECT_EQ(out.shape, (std::array<int32_t, 3>{32, 32, 3}));
}

}  // namespace
}  // namespace pipetune::runtime::fused_crop_test
