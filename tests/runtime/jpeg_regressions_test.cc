// The inputs the JPEG fuzzer found a problem with (regressions/README.md),
// replayed: decoded or refused, never a crash; a window the fused
// decode-and-crop takes of a clean file holds the whole decode's pixels; and
// a file decodes the same whatever the thread decoded before it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "image_jpeg.h"
#include "jpeg_files.h"

// A named namespace: the unity build puts every test file in one translation
// unit, where anonymous namespaces would share names.
namespace pipetune::runtime::image::jpeg_regressions_test {
namespace {

namespace fs = std::filesystem;

// Windows across the image: each corner, the middle, single pixels and rows.
std::vector<PixelCrop> Windows(int width, int height) {
  std::vector<PixelCrop> windows;
  for (int x : {0, width / 3, width / 2, width - 1}) {
    for (int y : {0, height / 3, height / 2, height - 1}) {
      for (int divisor : {1, 2, 3}) {
        windows.push_back({x, y, std::max(1, (width - x) / divisor), std::max(1, (height - y) / divisor)});
      }
    }
  }
  return windows;
}

std::vector<fs::path> Findings() {
  std::vector<fs::path> paths;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(PIPETUNE_SOURCE_DIR) / "tests/runtime/regressions")) {
    if (entry.path().filename() != "README.md") paths.push_back(entry.path());
  }
  return paths;
}

std::vector<uint8_t> Bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What one decode gave: refused, or these pixels (the whole image, then a window).
std::string Outcome(const std::vector<uint8_t>& data) {
  StatusOr<JpegInfo> info = ReadJpegInfo(data.data(), data.size());
  if (!info.ok()) return "refused: " + info.status().message();
  std::vector<uint8_t> whole(static_cast<size_t>(info->width) * info->height * 3);
  Status status = DecodeJpeg(data.data(), data.size(), *info, {}, whole.data());
  std::string outcome =
      status.ok() ? std::string(whole.begin(), whole.end()) : "refused: " + status.message();
  std::vector<uint8_t> scratch;
  StatusOr<ImageView> window =
      DecodeJpegRegion(data.data(), data.size(), {}, {info->width / 2, info->height / 2, 1, 1}, scratch);
  outcome +=
      window.ok() ? std::string(window->data, window->data + 3) : "refused: " + window.status().message();
  return outcome;
}

TEST(JpegRegressions, FuzzerFindingsDecodeSafelyAndExactly) {
  int files = 0;
  for (const fs::path& path : Findings()) {
    ++files;
    SCOPED_TRACE(path.string());
    const std::vector<uint8_t> data = Bytes(path);
    StatusOr<JpegInfo> info = ReadJpegInfo(data.data(), data.size());
    if (!info.ok()) continue;
    ASSERT_LE(static_cast<int64_t>(info->width) * info->height, 1 << 20);
    std::vector<uint8_t> whole(static_cast<size_t>(info->width) * info->height * 3);
    JpegDecodeOptions strict;
    strict.strict = true;
    const bool clean = DecodeJpeg(data.data(), data.size(), *info, strict, whole.data()).ok();
    std::vector<uint8_t> scratch;
    for (const PixelCrop& region : Windows(info->width, info->height)) {
      StatusOr<ImageView> window = DecodeJpegRegion(data.data(), data.size(), {}, region, scratch);
      if (!window.ok() || !clean) continue;
      for (int y = region.y; y < region.y + region.height; ++y) {
        const uint8_t* got = window->data + static_cast<ptrdiff_t>(y - window->top) * window->stride +
                             (region.x - window->left) * 3;
        const uint8_t* want = whole.data() + (static_cast<size_t>(y) * info->width + region.x) * 3;
        EXPECT_EQ(std::memcmp(got, want, static_cast<size_t>(region.width) * 3), 0)
            << "window (" << region.x << ", " << region.y << ") " << region.width << " x " << region.height
            << ", row " << y;
      }
    }
  }
  EXPECT_GT(files, 0);
}

// crash-5c6ed190...: a baseline file whose AC Huffman table was lost. A
// decoder reused from image to image decoded it with the table the previous
// file left (here a progressive file's optimised one); a fresh one uses
// libjpeg's standard table, whatever came before.
TEST(JpegRegressions, AFileDecodesTheSameWhateverTheThreadDecodedBefore) {
  const std::string other = (fs::temp_directory_path() / "pipetune_jpeg_regressions_other.jpg").string();
  jpeg_files::WriteJpegFile(other, 48, 40, jpeg_files::NoisePixels(7), TJFLAG_PROGRESSIVE);
  const std::vector<uint8_t> before = Bytes(other);
  fs::remove(other);
  for (const fs::path& path : Findings()) {
    SCOPED_TRACE(path.string());
    const std::vector<uint8_t> data = Bytes(path);
    const std::string alone = Outcome(data);
    (void)Outcome(before);
    EXPECT_TRUE(Outcome(data) == alone) << "decoded otherwise after another file";
  }
}

}  // namespace
}  // namespace pipetune::runtime::image::jpeg_regressions_test
