// MeasureJpegEntropyShare: the split of a JPEG decode's CPU between entropy
// decoding and the pixel work, which prices a decode-and-crop fusion before
// it runs. Files full of fine detail spend more of their decode in entropy
// decoding than smooth ones; bad files are named.
#include "pipetune/runtime/jpeg_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "jpeg_files.h"

// A named namespace: the unity build puts every test file in one translation
// unit, where anonymous namespaces would share names.
namespace pipetune::runtime::jpeg_probe_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kWidth = 320, kHeight = 240;

class JpegProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipetune_jpeg_probe_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Files(const std::string& kind, int count) {
    std::vector<std::string> paths;
    for (int i = 0; i < count; ++i) {
      const fs::path path = dir_ / (kind + std::to_string(i) + ".jpg");
      if (kind == "noise") {
        paths.push_back(
            jpeg_files::WriteJpegFile(path.string(), kWidth, kHeight, jpeg_files::NoisePixels(12345u + i)));
      } else {
        paths.push_back(jpeg_files::WriteJpegFile(path.string(), kWidth, kHeight, [i](int x, int y, int c) {
          return static_cast<uint8_t>((x / 2 + y / 3 + 40 * c + i) % 256);
        }));
      }
    }
    return paths;
  }
  fs::path dir_;
};

TEST_F(JpegProbeTest, DetailedFilesSpendMoreOfTheirDecodeInEntropyDecoding) {
  StatusOr<models::JpegEntropyShare> noise = MeasureJpegEntropyShare(Files("noise", 3));
  StatusOr<models::JpegEntropyShare> smooth = MeasureJpegEntropyShare(Files("smooth", 3));
  ASSERT_TRUE(noise.ok()) << noise.status().message();
  ASSERT_TRUE(smooth.ok()) << smooth.status().message();
  EXPECT_EQ(noise->files, 3);
  EXPECT_GT(noise->share, 0.0);
  EXPECT_LE(noise->share, 1.0);
  EXPECT_GT(smooth->share, 0.0);
  // Noise at quality 95 is mostly Huffman codes; a gradient is mostly pixel
  // work. (0.8 against 0.2-0.3 here.)
  EXPECT_GT(noise->share, smooth->share + 0.2) << noise->share << " " << smooth->share;
}

TEST_F(JpegProbeTest, StopsAfterTwoFilesOnceItsCpuBudgetIsSpent) {
  JpegProbeOptions options;
  options.max_cpu_seconds = 0;  // every file costs more than that
  StatusOr<models::JpegEntropyShare> share = MeasureJpegEntropyShare(Files("noise", 5), options);
  ASSERT_TRUE(share.ok()) << share.status().message();
  EXPECT_EQ(share->files, 2);
}

TEST_F(JpegProbeTest, AFileThatCannotBeDecodedIsNamed) {
  std::vector<std::string> files = Files("smooth", 1);
  const std::string text = (dir_ / "notes.jpg").string();
  std::ofstream(text) << "not a picture";
  files.push_back(text);
  StatusOr<models::JpegEntropyShare> share = MeasureJpegEntropyShare(files);
  ASSERT_FALSE(share.ok());
  EXPECT_EQ(share.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(share.status().message(), HasSubstr(text + ": not a JPEG"));

  const std::string missing = (dir_ / "gone.jpg").string();
  share = MeasureJpegEntropyShare({missing});
  ASSERT_FALSE(share.ok());
  EXPECT_THAT(share.status().message(), HasSubstr(missing + ": cannot read"));

  share = MeasureJpegEntropyShare({});
  ASSERT_FALSE(share.ok());
  EXPECT_EQ(share.status().code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace pipetune::runtime::jpeg_probe_test
